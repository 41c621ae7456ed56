"""Every speed shortcut of the model, and the switch that turns each off (tests, benchmarks).

A shortcut here is a faster way to the result a plainer path computes: the plainer path
stays in the code as its reference twin, and ``tests/test_speed_paths.py`` holds the two
equal, shortcut by shortcut (one test case per field of :class:`FastPaths`, so a shortcut
declared here is tested the moment it exists) and all of them off at once. Each site reads
the current switchboard with :func:`fast`::

    if shortcuts().first_round:
        ...  # the shortcut
    ...      # the reference path

Each gives its reference's result bit for bit, except where its field's ``metadata`` gives a
``rel_tol``: the orbit solve (``symmetry``) sums the same rates in another order, so it
agrees to rounding (1e-9 relative, ``tests/test_symmetry_fat_tree.py``).
Each site reads its switch where the shortcut applies (after the cheap checks of whether it
does), so :func:`consulted` names the shortcuts a computation takes; the test switches
each off where it is taken.

The current value lives in a :class:`contextvars.ContextVar`, so turning a shortcut off is
local to the thread (and asyncio task) that does it: every dashboard session runs in a
thread of its own, and a test or benchmark that compares paths never changes what another
session runs. New threads start with every shortcut on.

Caches: results cached while a shortcut is off would be handed to callers with it on (and
the other way round), since no cache key names a code path. So :func:`fast_paths` and
:func:`reference_paths` empty every registered cache (:func:`fabric_model.caching.
clear_caches`) when they change the switchboard and again when they restore it: a block
computes from a cold start with its own paths, and leaves nothing behind. (Objects a caller
keeps across the block keep their lazily computed attributes, as they would across any
two calls.)

>>> shortcuts().first_round
True
>>> with fast_paths(first_round=False):
...     shortcuts().first_round, shortcuts().symmetry
(False, True)
>>> with reference_paths():
...     any(getattr(shortcuts(), name) for name in NAMES)
False
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from fabric_model.caching import clear_caches

__all__ = ["FastPaths", "consulted", "fast_paths", "reference_paths", "shortcuts"]


@dataclass(frozen=True)
class FastPaths:
    """Which speed shortcuts run (all by default); each field names one and its reference.

    Attributes
    ----------
    first_round : bool
        A pattern's slowest connection from the max-min solve's first filling round
        (``collectives/first_round.py``); off: the full solve.
    symmetry : bool
        All-to-all on one orbit representative's classes and k copies over NIC slots solved
        as one (``collectives/symmetry.py``); off: every flow class.
    seed_shortcut : bool
        A pattern no ECMP hash can move (every connection under one leaf) solved for the
        first seed only (``collectives/context.py``); off: every seed routed and solved.
    ecmp_kernel : bool
        ECMP on a 2- or 3-tier fat-tree walked by the numba kernel (``routing/_kernels.py``);
        off: the vectorised per-path router (``routing/fat_tree._per_path``).
    out_order_kernel : bool
        A fabric's outgoing-link CSR ordered by the counting-sort kernel
        (``topology/_kernels.py``); off: NumPy's stable argsort (``topology/_reference.py``).
    pair_count_runs : bool
        Same-key pair counts read from the runs of an already sorted key, and every rail
        counted in one call (``topology/base.py``); off: ``np.unique`` rail by rail.
    slowest_group : bool
        Groups moved by whole NVLink domains answered by group 0 (``training/layout.py``);
        off: every group laid out.
    """

    first_round: bool = True
    symmetry: bool = field(default=True, metadata={"rel_tol": 1e-9})
    seed_shortcut: bool = True
    ecmp_kernel: bool = True
    out_order_kernel: bool = True
    pair_count_runs: bool = True
    slowest_group: bool = True


#: The shortcuts' names (the fields of :class:`FastPaths`).
NAMES = tuple(f.name for f in dataclasses.fields(FastPaths))
#: Every shortcut on: what the model runs outside :func:`fast_paths` blocks.
ALL_ON = FastPaths()
_CURRENT: ContextVar[FastPaths] = ContextVar("fabric_model_fast_paths", default=ALL_ON)


def shortcuts() -> FastPaths:
    """Return the shortcuts this thread (or task) runs with."""
    return _CURRENT.get()


@contextmanager
def fast_paths(**switches: bool) -> Iterator[FastPaths]:
    """Run the block with the named shortcuts set (``fast_paths(symmetry=False)``).

    Every registered cache is emptied on entering and on leaving when the switchboard
    changes (module docstring).

    Raises
    ------
    TypeError
        For a name that is not a field of :class:`FastPaths`.
    """
    before = shortcuts()
    now = dataclasses.replace(before, **switches)
    token = _CURRENT.set(now)
    if now != before:
        clear_caches()
    try:
        yield now
    finally:
        _CURRENT.reset(token)
        if now != before:
            clear_caches()


def reference_paths() -> AbstractContextManager[FastPaths]:
    """Run the block with every shortcut off: the reference twins only."""
    return fast_paths(**dict.fromkeys(NAMES, False))


@dataclass(frozen=True)
class _Recording(FastPaths):
    """The switchboard it copies, noting the name of every shortcut read from it."""

    read: set[str] = field(default_factory=set, compare=False, repr=False)

    def __getattribute__(self, name: str) -> Any:
        if name in NAMES:
            object.__getattribute__(self, "read").add(name)
        return object.__getattribute__(self, name)


@contextmanager
def consulted() -> Iterator[set[str]]:
    """Collect the names of the shortcuts the block reads (a shortcut runs only where read).

    The switchboard is unchanged (no cache is emptied).

    >>> import numpy as np
    >>> from fabric_model.topology.base import pairs_not_same_domain
    >>> with consulted() as read:
    ...     _ = pairs_not_same_domain(np.arange(4), np.zeros(4, np.int64))
    >>> sorted(read)
    ['pair_count_runs']
    """
    now = shortcuts()
    recording = _Recording(**{name: getattr(now, name) for name in NAMES})
    token = _CURRENT.set(recording)
    try:
        yield recording.read
    finally:
        _CURRENT.reset(token)
