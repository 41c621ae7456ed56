"""Collective and point-to-point times of each parallel dimension, cached across evaluations.

A training step asks for a handful of (dimension, operation, size) times; a sweep or a plan
search asks for the same ones many times. Built fabrics and solved algorithm models are kept
in small LRU caches keyed by what they depend on: a communicator by its fabric's sections
(:data:`FABRIC_READS`: cluster, fabric, what-if, hybrid) and its group's shape
(:func:`group_shape`), the expert all-to-all also by the MoE skew (:data:`ALLTOALL_READS`),
so plans and models that share a TP, EP, PP or DP group share its solves (not the whole
scenario or rank layout), and a repeated evaluation costs arithmetic only. The
caches are shared by every thread (each Streamlit session runs in its own) and locked; they
are registered with every other cache of the model in :mod:`fabric_model.caching`.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fabric_model.caching import Lru, Reads, lru_cached
from fabric_model.caching import clear_caches as clear_all_caches
from fabric_model.collectives import (
    AlgoModel,
    AlgorithmUnavailableError,
    FabricContext,
    algo_models,
    times_from_models,
)
from fabric_model.scenario import Scenario
from fabric_model.scenario.ocs import ocs_plan_key
from fabric_model.training.layout import DIMENSIONS, GroupContext, Layout

__all__ = [
    "ALLTOALL_READS",
    "FABRIC_READS",
    "CommTime",
    "DimensionFabric",
    "FabricFacts",
    "clear_caches",
    "fabric_key",
    "group_shape",
]

#: What a built fabric reads of a scenario (:meth:`FabricContext.from_scenario`): the cluster
#: and fabric (the topology request and the hardware resolved from the catalog), the what-ifs
#: (degraded links, failed switches, placement), the hybrid's partitions (its shared tier,
#: and the partition ``hybrid.job`` runs on) and an OCS fabric's blocks and circuits; each
#: section whole. An OCS fabric whose circuits follow the job also reads the plan's degrees
#: (:func:`~fabric_model.scenario.ocs.ocs_plan_key`).
FABRIC_READS = Reads(
    "fabric", ("cluster", "fabric", "what_if", "hybrid", "ocs", "nccl"), derived=ocs_plan_key
)
#: What the expert all-to-all reads beyond its fabric: the hot-expert skew of the model
#: (``collectives.algorithms``' receive weights). No other collective reads the model.
ALLTOALL_READS = Reads("all-to-all skew", ("model.routing_skew", "model.hot_fraction"))

#: Whole-cluster fabrics (a 131,072-GPU topology holds tens of MB: keep few).
_BASES = Lru(6, "training.fabric._BASES", key=f"FABRIC_READS {FABRIC_READS.names}")
#: What a step reads of the whole cluster's fabric beyond its communicators (small: keep
#: many, so a cached step of a sweep that cycled :data:`_BASES` does not rebuild its fabric).
_FACTS = Lru(1024, "training.fabric._FACTS", key=f"FABRIC_READS {FABRIC_READS.names}")


@dataclass(frozen=True)
class FabricFacts:
    """The whole cluster's misconfiguration notes (bare) and its flapping-link stall share."""

    misconfiguration_notes: tuple[str, ...]
    stall_fraction: float

    @classmethod
    def of(cls, base: FabricContext) -> FabricFacts:
        """Read them from the built fabric (:meth:`FabricContext.notes`, ``stall_fraction``)."""
        notes = tuple(
            n.removeprefix("misconfiguration: ") for n in base.notes() if "misconfig" in n
        )
        return cls(notes, base.stall_fraction)


#: Group contexts and their solved algorithm models, per (fabric, layout, dimension, op).
_MODELS = Lru(
    2048,
    "training.fabric._MODELS",
    key=f"FABRIC_READS, dimension, group_shape(layout, dim), (EP) {ALLTOALL_READS.names}, op",
)
#: The class kept under its old name (tests reach it).
_Lru = Lru


def clear_caches() -> None:
    """Forget every cached result of the model (``fabric_model.caching.clear_caches``).

    Every registered cache: fabrics, communicators and their solves, routed patterns, routing
    state per fabric, fat-tree layouts, network prices (tests use it to measure cold paths).
    """
    clear_all_caches()


def fabric_key(s: Scenario) -> tuple[Hashable, ...]:
    """Return the cache key of ``s``'s built fabric (:data:`FABRIC_READS`)."""
    return FABRIC_READS.key(s)


@lru_cached("training.fabric.group_shape", 4096, key="(layout, dim)")
def group_shape(layout: Layout, dim: str) -> tuple[tuple[int, bool], ...]:
    """Return what fixes ``dim``'s communicators in ``layout``: runs of (degree, in the group).

    The coordinates of a rank, innermost first in the layout's rank order
    (:attr:`~fabric_model.training.layout.Layout.coords`), with degree-1 coordinates
    dropped and neighbours on the same side (inside the group or not) merged into one
    coordinate of their product: a merged run enumerates
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
    for coord in layout.coords:
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
    pause_s : float
        How long the call's congested port holds PFC pause
        (:meth:`~fabric_model.collectives.model.AlgoModel.pause_s`; 0 without one).
    """

    time_s: float
    algo: str
    proto: str
    busbw_GBps: float
    bottleneck: str
    pause_s: float = 0.0


class DimensionFabric:
    """Times of the collectives of each parallel dimension of one scenario and layout."""

    def __init__(self, scenario: Scenario, layout: Layout, ecmp_seed: int | None = None) -> None:
        self.scenario = scenario
        self.layout = layout
        #: time every call at this ECMP seed of the solver's hashes (None: the expected time)
        self.ecmp_seed = ecmp_seed
        self._fabric = fabric_key(scenario)
        # the all-to-all alone reads the model (its hot-expert skew): see _dim_key
        self._skew = ALLTOALL_READS.key(scenario)

    def _dim_key(self, dim: str) -> tuple[Hashable, ...]:
        """Return the cache key of ``dim``'s communicator.

        The fabric and the group's shape; for the expert all-to-all (the only collective
        that reads the model) also the hot-expert skew.
        """
        extra = self._skew if dim == "ep" else ()
        return (self._fabric, dim, group_shape(self.layout, dim), extra)

    @property
    def base(self) -> FabricContext:
        """The whole cluster's fabric (built once per :data:`FABRIC_READS`)."""
        return _BASES.get(self._fabric, lambda: FabricContext.from_scenario(self.scenario))

    @property
    def facts(self) -> FabricFacts:
        """The whole cluster's notes and stall share (cached apart from :attr:`base`)."""
        return _FACTS.get(self._fabric, lambda: FabricFacts.of(self.base))

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
        t_us = row.time_us
        if self.ecmp_seed is not None:
            t_us = row.time_us_seeds[self.ecmp_seed % len(row.time_us_seeds)]
        chosen = next(m for m in models if m.algo == row.algo)
        return CommTime(
            t_us * 1e-6,
            row.algo,
            row.proto,
            row.busbw_GBps,
            row.bottleneck,
            chosen.pause_s(size_bytes),
        )

    def p2p(self, size_bytes: float) -> CommTime:
        """Time of one pipeline send (stage ``i`` to ``i + 1``, all stages and groups at once).

        Neighbouring stages in one NVLink domain send over NVLink at the ring efficiency;
        across domains each GPU sends on its own NIC(s), at the rate the solver grants the
        pattern of every boundary of every pipeline at once. The slowest boundary counts.
        """
        rate, lat_us, bottleneck, seeds = self._p2p()
        if size_bytes <= 0:
            return CommTime(0.0, "-", "-", 0.0, "-")
        if self.ecmp_seed is not None:
            rate = seeds[self.ecmp_seed % len(seeds)]
        t = lat_us * 1e-6 + size_bytes / rate
        return CommTime(t, "p2p", "Simple", rate / 1e9, bottleneck)

    def _p2p(self) -> tuple[float, float, str, tuple[float, ...]]:
        """Rate, latency and bottleneck of a pipeline send, and its rate at each ECMP seed."""

        def make() -> tuple[float, float, str, tuple[float, ...]]:
            ctx = self.group("pp")
            c = ctx.constants
            members = ctx.members
            dom = self.scenario.cluster.nvlink_domain
            a, b = members[:-1], members[1:]
            cross = (a // dom) != (b // dom)
            nvl_Bps = ctx.nvlink_Bps * ctx.nvlink_efficiency
            lat_nvl = (
                c["base_latency_us"]["ring"]["Simple"]
                + c["hw_latency_us"]["nvlink"]["ring"]["Simple"]
            )
            if not cross.any():
                return nvl_Bps, lat_nvl, "nvlink", (nvl_Bps,)
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
                seeds = res.min_rate_Bps * nics * c["net_efficiency"]
                return net_Bps, lat_net, res.bottleneck, tuple(float(x) for x in seeds)
            return nvl_Bps, lat_nvl, "nvlink", (nvl_Bps,)

        return _MODELS.get((*self._dim_key("pp"), "p2p"), make)
