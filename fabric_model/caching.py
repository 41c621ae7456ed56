"""Every cache the model keeps across calls, in one place: its key, its size, its lock.

One process serves every dashboard session (each in its own thread), so a cached result is
returned to whoever asks next with an equal key: a key that leaves out something the result
depends on returns another scenario's numbers with no sign that they are stale (issue 30:
the training fabric was keyed without ``hybrid``, the sweep's network price without
``hybrid``, ``storage`` and ``management``). So:

- a result computed from a scenario is keyed by a :class:`Reads` declared next to the cached
  function: the scenario sections it reads, each whole (a dotted key only where the result
  reads one key of a section that other cached results must not be split by, such as the
  MoE skew of the expert all-to-all); :meth:`Reads.key` derives the key, nothing else does.
  ``tests/test_cache_transparency.py`` perturbs every section a declaration leaves out and
  checks the result does not move, and computes random pairs of scenarios one after the
  other against a cold start;
- a result computed from plain frozen values (a topology request, a layout, a fat-tree's
  shape) is an ``functools.lru_cache`` over its arguments (:func:`lru_cached`), or a
  per-fabric value dropped with its fabric's graph (:func:`kept_per_fabric`);
- every one of them is registered here (:func:`register`), so :func:`caches` lists them
  with their key, size and lock, and :func:`clear_caches` empties them all (a cold start).

This module sits in ``topology`` because it is the lowest layer every cached layer imports
(fat-tree layouts here, routing state per fabric, the collectives' routed patterns, the
training fabrics and prices): it imports nothing of the model. Data files read once per
process (``load_catalog``, ``nccl_constants``, the presets, the citations) depend on no
scenario and are not caches of results; they are not registered.
"""

from __future__ import annotations

import functools
import operator
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

__all__ = [
    "CacheEntry",
    "Lru",
    "Reads",
    "caches",
    "clear_caches",
    "kept_per_capacity",
    "kept_per_fabric",
    "lru_cached",
    "register",
]

T = TypeVar("T")


# ------------------------------------------------------------------------------ registry
@dataclass(frozen=True)
class CacheEntry:
    """One cache of the model, as a reader (or :func:`clear_caches`) finds it.

    Attributes
    ----------
    name : str
        Where it lives (``module.name``).
    key : str
        What the key is made of.
    size : str
        How many entries it keeps (or how it is bounded).
    lock : str
        What guards it between threads.
    clear : Callable[[], None]
        Empties it.
    """

    name: str
    key: str
    size: str
    lock: str
    clear: Callable[[], None]


_REGISTRY: dict[str, CacheEntry] = {}
_REGISTRY_LOCK = threading.Lock()


def register(name: str, *, key: str, size: str, lock: str, clear: Callable[[], None]) -> None:
    """Add (or replace, on a module reload) the cache ``name`` to the registry."""
    with _REGISTRY_LOCK:
        _REGISTRY[name] = CacheEntry(name, key, size, lock, clear)


def caches() -> tuple[CacheEntry, ...]:
    """Return every registered cache, in registration order."""
    with _REGISTRY_LOCK:
        return tuple(_REGISTRY.values())


def clear_caches() -> None:
    """Empty every registered cache (a cold start; builds under way finish and are kept)."""
    for entry in caches():
        entry.clear()


# --------------------------------------------------------------------------------- keys
@dataclass(frozen=True)
class Reads:
    """What a cached result reads of a scenario: whole sections, or single dotted keys.

    Declared next to the cached function; :meth:`key` is the only way its cache keys a
    scenario. A whole section is the default: a section's key added later is then in the
    key without anyone remembering it.

    >>> Reads("x", ("cluster", "model.routing_skew")).names
    ('cluster', 'model.routing_skew')

    ``derived``, when given, adds what the result reads of other sections only in some
    designs, as a function of the scenario (an OCS fabric's job circuits read the plan's
    degrees; no other fabric does): its value joins the key, and is ``()`` for the designs
    that read nothing more.
    """

    what: str
    names: tuple[str, ...]
    derived: Callable[[Any], tuple[Hashable, ...]] | None = None

    @property
    def sections(self) -> frozenset[str]:
        """The scenario sections read, wholly or in part."""
        return frozenset(n.partition(".")[0] for n in self.names)

    def __post_init__(self) -> None:
        # one C-level getter of every name (dotted names included): keys are built per lookup
        get = operator.attrgetter(*self.names)
        one = len(self.names) == 1
        object.__setattr__(self, "_get", (lambda s: (get(s),)) if one else get)

    def key(self, scenario: Any) -> tuple[Hashable, ...]:
        """Return the cache key of ``scenario``: each read section (frozen, hashable) or key."""
        base: tuple[Hashable, ...] = (self.what, *self._get(scenario))  # type: ignore[attr-defined]
        if self.derived is None:
            return base
        return (*base, self.derived(scenario))


# ---------------------------------------------------------------------------------- LRU
class Lru:
    """A small LRU cache, safe to share between threads (every Streamlit session's thread).

    A value is built by a closure over objects that are not part of its key (the scenario
    beside the sections its :class:`Reads` names), which ``functools.lru_cache``'s keying
    by arguments cannot express; so this keeps an ``OrderedDict`` under a lock. The lock
    covers only the bookkeeping, never ``make()``: a slow build for one key does not hold
    up lookups of other keys. Threads asking for a key that is being built wait for that
    one build (its value, or its exception) instead of building it again.

    With ``name``, the cache is registered (see :func:`register`), its key described by
    ``key``.
    """

    def __init__(self, size: int, name: str = "", key: str = "") -> None:
        self.size = size
        self.data: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._building: dict[Hashable, Future[Any]] = {}
        if name:
            register(
                name, key=key, size=f"{size} entries, LRU", lock="its own Lock", clear=self.clear
            )

    def get(self, key: Hashable, make: Callable[[], T]) -> T:
        """Return the value cached under ``key``, building it with ``make`` on a miss.

        Raises
        ------
        Exception
            Whatever ``make`` raises (also in the threads that waited for it); nothing is
            cached then.
        """
        with self._lock:
            if key in self.data:
                self.data.move_to_end(key)
                return self.data[key]  # type: ignore[no-any-return]
            pending = self._building.get(key)
            builder = pending is None
            if pending is None:
                pending = self._building[key] = Future()
        if not builder:
            return pending.result()  # type: ignore[no-any-return]
        try:
            value = make()
        except BaseException as exc:
            with self._lock:
                del self._building[key]
            pending.set_exception(exc)
            raise
        with self._lock:
            self.data[key] = value
            if len(self.data) > self.size:
                self.data.popitem(last=False)
            del self._building[key]
        pending.set_result(value)
        return value

    def __len__(self) -> int:
        with self._lock:
            return len(self.data)

    def clear(self) -> None:
        """Forget every cached value (builds under way finish and are kept)."""
        with self._lock:
            self.data.clear()


def lru_cached(
    name: str, maxsize: int, key: str = "its arguments"
) -> Callable[[Callable[..., T]], functools._lru_cache_wrapper[T]]:
    """``functools.lru_cache(maxsize)``, registered as ``name`` (for frozen-value arguments).

    Only for functions of plain frozen values whose every field the result may read (a
    topology request, a layout); never for a scenario keyed by part of it.
    """

    def wrap(fn: Callable[..., T]) -> functools._lru_cache_wrapper[T]:
        cached = functools.lru_cache(maxsize=maxsize)(fn)
        register(
            name,
            key=key,
            size=f"{maxsize} entries, LRU",
            lock="functools.lru_cache's own",
            clear=cached.cache_clear,
        )
        return cached

    return wrap


# ------------------------------------------------------------------------ per fabric
#: Routing state kept per built fabric, keyed by its graph (dropped with it): layouts,
#: bundle members and bundle capacities that every pattern routed on the fabric reuses.
_KEPT: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
_KEPT_LOCK = threading.Lock()


def _clear_kept() -> None:
    with _KEPT_LOCK:
        _KEPT.clear()


register(
    "caching.kept_per_fabric",
    key="the fabric's graph object (weak: dropped with the fabric), then a name "
    "(and, for kept_per_capacity, the capacity array by identity)",
    size="one value per name per live fabric; the last 4 capacity arrays per name",
    lock="_KEPT_LOCK",
    clear=_clear_kept,
)


def kept_per_fabric(graph: Any, name: str, build: Callable[[], T]) -> T:
    """Return ``build()``, computed once per fabric ``graph`` under ``name``."""
    with _KEPT_LOCK:
        held = _KEPT.setdefault(graph, {})
        if name in held:
            return held[name]  # type: ignore[no-any-return]
    value = build()
    with _KEPT_LOCK:
        _KEPT.setdefault(graph, {})[name] = value
    return value


def kept_per_capacity(
    graph: Any, name: str, capacity: np.ndarray, build: Callable[[], T], last: int = 4
) -> T:
    """Return ``build()``, kept per fabric for the ``last`` capacity arrays it was asked for.

    By identity: a fabric's context passes the same capacity array to every pattern it
    routes, and a degraded-link what-if is a new array.
    """
    with _KEPT_LOCK:
        for held, value in _KEPT.setdefault(graph, {}).get(name, ()):
            if held is capacity:
                return value  # type: ignore[no-any-return]
    value = build()
    with _KEPT_LOCK:
        kept = _KEPT.setdefault(graph, {})
        others = [e for e in kept.get(name, ()) if e[0] is not capacity][-(last - 1) :]
        kept[name] = (*others, (capacity, value))
    return value
