"""Collective and point-to-point times of each parallel dimension, cached across evaluations.

A training step asks for a handful of (dimension, operation, size) times; a sweep or a plan
search asks for the same ones many times. Built fabrics and solved algorithm models are kept
in small LRU caches keyed by what they depend on: a communicator by the cluster, fabric and
what-if sections and its group's shape (:func:`group_shape`), the expert all-to-all also by
the MoE skew, so plans and models that share a TP, EP, PP or DP group share its solves
(not the whole scenario or rank layout), and a repeated evaluation costs arithmetic only. The
caches are shared by every thread (each Streamlit session runs in its own) and locked.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypeVar

import numpy as np

from fabric_model.collectives import (
    AlgoModel,
    AlgorithmUnavailableError,
    FabricContext,
    algo_models,
    times_from_models,
)
from fabric_model.scenario import Scenario
from fabric_model.topology.fat_tree import clear_layout_cache
from fabric_model.training.layout import DIMENSIONS, GroupContext, Layout

__all__ = ["CommTime", "DimensionFabric", "clear_caches", "group_shape"]

T = TypeVar("T")


class _Lru:
    """A small LRU cache, safe to share between threads (every Streamlit session's thread).

    A value is built by a closure over objects that are not part of its key (the scenario
    beside its cluster, fabric and what-if sections), which ``functools.lru_cache``'s
    keying by arguments cannot express; so this keeps an ``OrderedDict`` under a lock. The
    lock covers only the bookkeeping, never ``make()``: a slow build for one key does not
    hold up lookups of other keys. Threads asking for a key that is being built wait for
    that one build (its value, or its exception) instead of building it again.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.data: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._building: dict[Hashable, Future[Any]] = {}

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

    def clear(self) -> None:
        """Forget every cached value (builds under way finish and are kept)."""
        with self._lock:
            self.data.clear()


#: Whole-cluster fabrics (a 131,072-GPU topology holds tens of MB: keep few).
_BASES = _Lru(6)
#: Group contexts and their solved algorithm models, per (fabric, layout, dimension, op).
_MODELS = _Lru(2048)


def clear_caches() -> None:
    """Forget every cached fabric and model (tests use it to measure cold paths)."""
    _BASES.clear()
    _MODELS.clear()
    clear_layout_cache()


def _fabric_key(s: Scenario) -> tuple[Hashable, ...]:
    return (s.cluster, s.fabric, s.what_if)


@lru_cache(maxsize=4096)
def group_shape(layout: Layout, dim: str) -> tuple[tuple[int, bool], ...]:
    """Return what fixes ``dim``'s communicators in ``layout``: runs of (degree, in the group).

    The coordinates of a rank, innermost first (:data:`~fabric_model.training.layout.
    DIMENSIONS`), with degree-1 coordinates dropped and neighbours on the same side (inside
    the group or not) merged into one coordinate of their product: a merged run enumerates
    the same ranks in the same order, so two layouts of one shape have the same group
    members and offsets, and so the same communicator (``TP8 PP4`` and ``TP8 PP2 CP2``
    share their TP groups on 1,024 GPUs).

    >>> group_shape(Layout(tp=8, cp=1, ep=1, pp=4, edp=32), "tp")
    ((8, True), (128, False))
    >>> group_shape(Layout(tp=8, cp=2, ep=1, pp=2, edp=32), "tp")
    ((8, True), (128, False))
    """
    inside = DIMENSIONS[dim]
    runs: list[list[Any]] = []
    for coord in ("tp", "cp", "ep", "pp", "edp"):
        degree = getattr(layout, coord)
        if degree == 1:
            continue
        flag = coord in inside
        if runs and runs[-1][1] == flag:
            runs[-1][0] *= degree
        else:
            runs.append([degree, flag])
    return tuple((int(d), bool(f)) for d, f in runs)


@dataclass(frozen=True)
class CommTime:
    """One collective's time and how it was run.

    Attributes
    ----------
    time_s : float
        Time of one call.
    algo, proto : str
        Algorithm and protocol chosen (NCCL-like ``auto``).
    busbw_GBps : float
        Bus bandwidth of the call.
    bottleneck : str
        ``nvlink`` or the link class that limits the network side.
    """

    time_s: float
    algo: str
    proto: str
    busbw_GBps: float
    bottleneck: str


class DimensionFabric:
    """Times of the collectives of each parallel dimension of one scenario and layout."""

    def __init__(self, scenario: Scenario, layout: Layout) -> None:
        self.scenario = scenario
        self.layout = layout
        self._fabric = _fabric_key(scenario)
        # the all-to-all alone reads the model (its hot-expert skew): see _dim_key
        self._skew = (scenario.model.routing_skew, scenario.model.hot_fraction)

    def _dim_key(self, dim: str) -> tuple[Hashable, ...]:
        """Return the cache key of ``dim``'s communicator.

        The fabric and the group's shape; for the expert all-to-all (the only collective
        that reads the model) also the hot-expert skew.
        """
        extra = self._skew if dim == "ep" else ()
        return (self._fabric, dim, group_shape(self.layout, dim), extra)

    @property
    def base(self) -> FabricContext:
        """The whole cluster's fabric (built once per cluster/fabric/what-if)."""
        return _BASES.get(
            _fabric_key(self.scenario), lambda: FabricContext.from_scenario(self.scenario)
        )

    def group(self, dim: str) -> GroupContext:
        """Return the communicator context of ``dim`` (cached with its solved patterns)."""
        return _MODELS.get(
            self._dim_key(dim),
            lambda: GroupContext.for_dimension(self.base, self.layout, dim, self.scenario),
        )

    def _models(self, dim: str, op: str) -> list[AlgoModel]:
        def make() -> list[AlgoModel]:
            return algo_models(self.group(dim), op, "auto")

        return _MODELS.get((*self._dim_key(dim), op), make)

    def collective(self, dim: str, op: str, size_bytes: float) -> CommTime:
        """Time of one ``op`` of ``size_bytes`` (nccl-tests size) in every group of ``dim``."""
        if size_bytes <= 0:
            return CommTime(0.0, "-", "-", 0.0, "-")
        models = self._models(dim, op)
        if not models:
            raise AlgorithmUnavailableError(f"no algorithm can run {op} for {dim}")
        row = times_from_models(models, [int(size_bytes)], "auto")[0]
        return CommTime(row.time_us * 1e-6, row.algo, row.proto, row.busbw_GBps, row.bottleneck)

    def p2p(self, size_bytes: float) -> CommTime:
        """Time of one pipeline send (stage ``i`` to ``i + 1``, all stages and groups at once).

        Neighbouring stages in one NVLink domain send over NVLink at the ring efficiency;
        across domains each GPU sends on its own NIC(s), at the rate the solver grants the
        pattern of every boundary of every pipeline at once. The slowest boundary counts.
        """

        def make() -> tuple[float, float, str]:
            ctx = self.group("pp")
            c = ctx.constants
            members = ctx.members
            dom = self.scenario.cluster.nvlink_domain
            a, b = members[:-1], members[1:]
            cross = (a // dom) != (b // dom)
            nvl_Bps = ctx.nvlink_Bps * c["nvlink_efficiency"]
            lat_nvl = (
                c["base_latency_us"]["ring"]["Simple"]
                + c["hw_latency_us"]["nvlink"]["ring"]["Simple"]
            )
            if not cross.any():
                return nvl_Bps, lat_nvl, "nvlink"
            nics = ctx.nics
            src = (a[cross][:, None] * nics + np.arange(nics)).ravel()
            dst = (b[cross][:, None] * nics + np.arange(nics)).ravel()
            res = ctx.solve(src, dst)
            net_Bps = res.rate_Bps * nics * c["net_efficiency"]
            lat_net = (
                c["base_latency_us"]["ring"]["Simple"]
                + c["hw_latency_us"]["net"]["ring"]["Simple"]
                + ctx.path_latency_us(res.mean_switch_hops)
            )
            if net_Bps < nvl_Bps or cross.all():
                return net_Bps, lat_net, res.bottleneck
            return nvl_Bps, lat_nvl, "nvlink"

        rate, lat_us, bottleneck = _MODELS.get((*self._dim_key("pp"), "p2p"), make)
        if size_bytes <= 0:
            return CommTime(0.0, "-", "-", 0.0, "-")
        t = lat_us * 1e-6 + size_bytes / rate
        return CommTime(t, "p2p", "Simple", rate / 1e9, bottleneck)
