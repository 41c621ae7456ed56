"""Collective and point-to-point times of each parallel dimension, cached across evaluations.

A training step asks for a handful of (dimension, operation, size) times; a sweep or a plan
search asks for the same ones many times. Built fabrics and solved algorithm models are kept
in small LRU caches keyed by what they depend on (the cluster, fabric and what-if sections,
the MoE skew, and the rank layout), so a repeated evaluation costs arithmetic only. The
caches are shared by every thread (each Streamlit session runs in its own) and locked.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass
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
from fabric_model.training.layout import GroupContext, Layout

__all__ = ["CommTime", "DimensionFabric", "clear_caches"]

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


def _fabric_key(s: Scenario) -> tuple[Hashable, ...]:
    return (s.cluster, s.fabric, s.what_if)


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
        self._key = (
            _fabric_key(scenario),
            scenario.model.routing_skew,
            scenario.model.hot_fraction,
            layout,
        )

    @property
    def base(self) -> FabricContext:
        """The whole cluster's fabric (built once per cluster/fabric/what-if)."""
        return _BASES.get(
            _fabric_key(self.scenario), lambda: FabricContext.from_scenario(self.scenario)
        )

    def group(self, dim: str) -> GroupContext:
        """Return the communicator context of ``dim`` (cached with its solved patterns)."""
        return _MODELS.get(
            (*self._key, dim),
            lambda: GroupContext.for_dimension(self.base, self.layout, dim, self.scenario),
        )

    def _models(self, dim: str, op: str) -> list[AlgoModel]:
        def make() -> list[AlgoModel]:
            return algo_models(self.group(dim), op, "auto")

        return _MODELS.get((*self._key, dim, op), make)

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

        rate, lat_us, bottleneck = _MODELS.get((*self._key, "pp", "p2p"), make)
        if size_bytes <= 0:
            return CommTime(0.0, "-", "-", 0.0, "-")
        t = lat_us * 1e-6 + size_bytes / rate
        return CommTime(t, "p2p", "Simple", rate / 1e9, bottleneck)
