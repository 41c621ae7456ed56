"""The result types of the collective layer and the NCCL-like time formula.

A solved traffic pattern is a :class:`PatternResult` (its slowest connection per ECMP seed,
the link class that froze it, hops); :func:`link_class_name` names a routed link's class.

An algorithm reduces to an :class:`AlgoModel`: its bus bandwidth at large messages (from the
flow solver on the real fabric, before the protocol factor), its per-protocol latency (NCCL's
base + per-step terms, plus the path's extra switch hops and fiber), and the size-dependent
corrections NCCL applies. :meth:`AlgoModel.time_us` is NCCL's ``lat + bytes / bw``:

``time_us = latency_us[proto] x plateau + bus_factor x S / (busbw x proto_factor x tree_corr)``

with ``bus_factor`` the nccl-tests factor (all-reduce 2(n-1)/n; all-gather, reduce-scatter and
all-to-all (n-1)/n), so that ``busbw_GBps`` printed here compares with nccl-tests output.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from fabric_model.errors import FabricModelError

__all__ = [
    "CEILINGS",
    "MAX_CLASSES",
    "OPS",
    "AlgoModel",
    "AlgorithmUnavailableError",
    "CollectiveTime",
    "PatternResult",
    "bus_factor",
    "ceiling_name",
    "link_class_name",
    "link_tier",
]

#: Most flow classes a class-aggregated solve takes (the class and orbit solves refuse more).
MAX_CLASSES = 1_500_000

#: What a collective's bandwidth ceiling can be (besides a switch tier's link-class name,
#: e.g. ``leaf-spine``): the NIC line rate, NVLink (ring or tree over it), the NVSwitch's
#: in-network reduction (NVLS), the host link (PCIe) that feeds the NICs, host memory (a
#: host-staged transfer, GPUDirect RDMA off), the inter-socket link (a cross-socket NIC),
#: the InfiniBand switches' in-network reduction (SHARP), NCCL's per-channel software cap.
CEILINGS = (
    "nic",
    "nvlink",
    "nvls",
    "pcie",
    "host-memory",
    "socket-link",
    "sharp",
    "nccl-channels",
)


def link_class_name(rf: Any, link: int) -> str:
    """Name of the class of link ``link`` of a routed pattern (``nic`` when it has none)."""
    cls = int(rf.link_class[link]) if link >= 0 else -1
    return str(rf.class_names[cls]) if 0 <= cls < len(rf.class_names) else "nic"


@dataclass(frozen=True)
class PatternResult:
    """Rates of one traffic pattern's connections, over the ECMP seeds when hashing.

    Attributes
    ----------
    min_rate_Bps : np.ndarray
        Slowest connection's rate per seed (one entry when routing is deterministic).
    mean_rate_Bps : float
        Mean connection rate, averaged over seeds.
    bottleneck : str
        Link class that froze the slowest connection (first seed).
    mean_switch_hops : float
        Mean switches crossed by the pattern's connections.
    max_switch_hops : int
        Most switches crossed by any connection.
    """

    min_rate_Bps: np.ndarray
    mean_rate_Bps: float
    bottleneck: str
    mean_switch_hops: float
    max_switch_hops: int

    @property
    def rate_Bps(self) -> float:
        """Expected slowest-connection rate (mean over seeds)."""
        return float(self.min_rate_Bps.mean())


def link_tier(link_class: str) -> str:
    """Return the switch tier of a link class: ``nic-leaf``, ``leaf-spine``, ``spine-core``.

    The adaptive routing's link space bundles a switch's cables per direction
    (``leaf-up bundle``: the leaf's uplinks to the spine tier; ``pod-up bundle``: a pod's
    spine-to-core uplinks); other classes (torus, dragonfly+ global links, ...) are their own
    tier.
    """
    name = link_class.removesuffix(" bundle")
    if name in ("nic", "nic-leaf"):
        return "nic-leaf"
    if name in ("leaf-up", "leaf-down"):
        return "leaf-spine"
    if name in ("pod-up", "pod-down"):
        return "spine-core"
    if name.startswith("super-pod"):
        return "core-super"
    return name


def ceiling_name(algo: str, bottleneck: str) -> str:
    """Name the resource whose bound is an algorithm's bandwidth ceiling.

    ``bottleneck`` is the model's own label (``nvlink``, a link class, ``host link
    (PCIe)``, the per-channel cap, ``sharp aggregation``); NVLink under an NVLS algorithm is
    the NVSwitch's reduction (``nvls``), a NIC link (``nic-leaf``, ``nic``) is ``nic``, and a
    switch tier keeps its link-class name (``leaf-spine``, ``spine-core``, ``global``, ...).
    """
    if bottleneck == "nvlink":
        return "nvls" if algo in ("nvls", "nvls-tree", "nvls-sharp") else "nvlink"
    if bottleneck in ("nic-leaf", "nic", "nic-nic") or bottleneck.startswith("nic"):
        return "nic"
    if "PCIe" in bottleneck:
        return "pcie"
    if bottleneck.startswith("host memory"):
        return "host-memory"
    if bottleneck.startswith("inter-socket"):
        return "socket-link"
    if "per-channel" in bottleneck:
        return "nccl-channels"
    if bottleneck.startswith("sharp"):
        return "sharp"
    return link_tier(bottleneck)


OPS = ("allreduce", "allgather", "reducescatter", "alltoall")
# the algorithms (ALGOS, which operations each runs): fabric_model.collectives.registry


class AlgorithmUnavailableError(FabricModelError):
    """The algorithm cannot run on this design (the message says why and what can)."""


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' busbw / algbw factor for ``n`` ranks."""
    if n <= 1:
        return 1.0
    return 2.0 * (n - 1) / n if op == "allreduce" else (n - 1) / n


@dataclass(frozen=True)
class AlgoModel:
    """One algorithm on one fabric: bandwidth, latency and corrections (size-independent).

    Attributes
    ----------
    busbw_Bps : float
        Bus bandwidth reached at large sizes with the Simple protocol, bytes/s (expected value
        over ECMP seeds).
    busbw_range_Bps : tuple[float, float]
        Lowest and highest over the ECMP seeds (equal when routing is deterministic).
    busbw_seeds_Bps : tuple[float, ...]
        The bus bandwidth at each ECMP seed the solver hashed (one entry, or empty, when
        routing is deterministic): the draws a tail (``tails.ecmp_redraw``) samples from.
    intra_Bps, inter_Bps : float
        The NVLink-side and network-side bus bandwidths the minimum was taken over (inter is
        ``inf`` inside one NVLink domain).
    bottleneck : str
        ``nvlink`` or the link class that limits the network side.
    latency_us : dict[str, float]
        Per-protocol latency of one call, microseconds.
    protocol_bw_factor, protocol_cap_Bps : dict[str, float]
        NCCL's per-protocol factor on the bus bandwidth and its cap (LL's ``llMaxBw``,
        LL128's channels x per-channel cap), bytes/s; a protocol without a cap is absent.
    tuner_busbw_Bps : float or None
        The Simple bus bandwidth NCCL's own tuner assumes for this algorithm
        (``tuning.cc``, ``ncclTopoTuneModel``: channels x per-channel graph bandwidth, with
        its refinements), bytes/s; ``None`` where the tuner's figure is the delivered one.
        NCCL picks the algorithm and protocol by its table, not by what the fabric
        delivers, so ``auto`` chooses with this figure and reports the delivered time.
    bypasses_tuner : bool
        NCCL runs this algorithm whenever it can, without consulting its tuner's table (the
        symmetric-memory kernels on registered buffers, ``symmetric_sched.cc``; the copy
        engines under ``NCCL_CTA_POLICY_ZERO``, ``enqueue.cc``): ``auto`` then chooses only
        among such models.
    bypass_from_bytes : float
        With ``bypasses_tuner``, the smallest call NCCL runs it for (bytes, the nccl-tests
        size): below it ``auto`` leaves the model out (``inf``: ``auto`` never runs it;
        the model answers when asked for by name).
    bypass_priority : int
        Among models that bypass the tuner at a size, NCCL runs those of the highest priority
        (``taskAppend`` tries the copy engines before the symmetric kernels).
    incast : Incast or None
        The transport's model of the pattern's incast (``collectives.transport``): its
        slowdown over the max-min network rate by the bytes a phase moves into the
        congested port, ``incast_port_bytes x S`` for a call of ``S`` bytes; ``None``
        where the max-min answer stands (no incast, or a transport that keeps the port
        busy).
    stall_fraction : float
        Share of wall time the job stalls on a flapping link (``what_if.
        flapping_link``): a call that crosses the network takes ``1 / (1 - f)``
        times as long on average.
    """

    op: str
    algo: str
    n_ranks: int
    busbw_Bps: float
    busbw_range_Bps: tuple[float, float]
    intra_Bps: float
    inter_Bps: float
    bottleneck: str
    latency_us: dict[str, float]
    protocol_bw_factor: dict[str, float]
    protocol_cap_Bps: dict[str, float] = field(default_factory=dict)
    tree_correction: tuple[tuple[float, ...], ...] | None = None
    tree_correction_protocols: tuple[str, ...] = ()
    plateau_factor: float = 1.0
    plateau_min_bytes: float = math.inf
    mean_switch_hops: float = 0.0
    notes: tuple[str, ...] = field(default=())
    tuner_busbw_Bps: float | None = None
    bypasses_tuner: bool = False
    bypass_from_bytes: float = 0.0
    bypass_priority: int = 0
    #: the network pattern solved for this algorithm, ``(src, dst, demand)`` NIC endpoints
    #: (``None``: NVLink only, or solved by flow classes); ``collective --links`` re-solves it
    pattern: Any = field(default=None, repr=False, compare=False)
    incast: Any = field(default=None, repr=False)
    incast_port_bytes: float = 0.0
    stall_fraction: float = 0.0
    busbw_seeds_Bps: tuple[float, ...] = ()

    @cached_property
    def ceiling(self) -> str:
        """The resource whose bound is this algorithm's bandwidth ceiling (:data:`CEILINGS`)."""
        return ceiling_name(self.algo, self.bottleneck)

    @property
    def ceiling_Bps(self) -> float:
        """The algorithm's bandwidth ceiling, bus bandwidth in bytes/s.

        ``ceiling_Bps = min(intra_Bps, inter_Bps, NCCL's per-channel cap)`` = ``busbw_Bps``:
        the bound of the bottleneck resource for this algorithm at large sizes with the
        Simple protocol (NVLink or NVLS side: the GPU's NVLink rate x the algorithm's
        efficiency; network side: the flow solve's slowest connection x the pattern's
        scale x ``net_efficiency``), before protocol factors and latency.
        """
        return self.busbw_Bps

    @cached_property
    def seed_time_scales(self) -> tuple[float, ...]:
        """Per ECMP seed, ``busbw / seed busbw``: the factor on a call's bandwidth term.

        ``inf`` for a seed that delivers nothing; empty when routing is deterministic.
        """
        if len(self.busbw_seeds_Bps) <= 1:
            return ()
        return tuple(
            (self.busbw_Bps / b if self.busbw_Bps else 1.0) if b > 0 else math.inf
            for b in self.busbw_seeds_Bps
        )

    @property
    def protocols(self) -> tuple[str, ...]:
        """Protocols this algorithm runs with."""
        return tuple(self.latency_us)

    def transport_slowdown(self, size_bytes: float) -> float:
        """Return the transport's slowdown of the network side at this size (1: none)."""
        if self.incast is None or size_bytes <= 0:
            return 1.0
        return float(self.incast.at(size_bytes * self.incast_port_bytes))

    def transport_slowdowns(self, sizes: Sequence[float]) -> list[float]:
        """Return :meth:`transport_slowdown` at each size (one pass over a whole curve)."""
        if self.incast is None:
            return [1.0] * len(sizes)
        x = np.asarray(sizes, dtype=np.float64) * self.incast_port_bytes
        out = self.incast.at_many(x)
        return [1.0 if s <= 0 else float(v) for s, v in zip(sizes, out, strict=True)]

    def pause_s(self, size_bytes: float) -> float:
        """Return how long one call of ``size_bytes`` holds PFC pause at its congested port, s.

        The incast phase moves ``X = incast_port_bytes x S`` into the port and takes
        ``s(X) x X / port`` (:meth:`Incast.at`); the port holds pause the share
        :meth:`Incast.pause_at` of it (the DCQCN fluid model's; 0 for the closed forms, whose
        control keeps the queue below Xoff, and without an incast).
        """
        if self.incast is None or size_bytes <= 0:
            return 0.0
        inc = self.incast
        x = size_bytes * self.incast_port_bytes
        share = inc.pause_at(x)
        return share * inc.at(x) * x / inc.port_Bps if share > 0 else 0.0

    def delivered_busbw_Bps(self, size_bytes: float, slowdown: float | None = None) -> float:
        """``busbw_Bps`` with the transport's incast slowdown on the network side, bytes/s.

        ``slowdown``: :meth:`transport_slowdown` at this size, when the caller has it.
        """
        slow = self.transport_slowdown(size_bytes) if slowdown is None else slowdown
        if slow <= 1.0:
            return self.busbw_Bps
        return min(self.intra_Bps, self.inter_Bps / slow)

    def bandwidth_Bps(self, size_bytes: float, proto: str, slowdown: float | None = None) -> float:
        """Bus bandwidth term for a call of ``size_bytes`` with ``proto``, bytes/s."""
        busbw = (
            self.busbw_Bps
            if self.incast is None
            else self.delivered_busbw_Bps(size_bytes, slowdown)
        )
        bw = min(
            busbw * self.protocol_bw_factor[proto],
            self.protocol_cap_Bps.get(proto, math.inf),
        )
        if self.tree_correction is not None and size_bytes >= 64:
            idx = int(math.log2(size_bytes / 64))
            if 0 <= idx < len(self.tree_correction[0]):
                row = self.tree_correction[self.tree_correction_protocols.index(proto)]
                bw *= row[idx]
        return bw

    def latency_term_us(self, size_bytes: float, proto: str) -> float:
        """Return the latency term of a call (ring plateau, a flapping link's stall), us."""
        lat = self.latency_us[proto]
        if proto == "Simple" and size_bytes >= self.plateau_min_bytes:
            lat *= self.plateau_factor
        return lat / (1.0 - self.stall_fraction) if self.stall_fraction else lat

    def time_us(self, size_bytes: float, proto: str, slowdown: float | None = None) -> float:
        """Time of one call, microseconds (see the module docstring).

        A flapping link stalls the whole job ``stall_fraction`` of the time, so every call
        that crosses the network takes ``1 / (1 - stall_fraction)`` as long on average.
        ``slowdown``: :meth:`transport_slowdown` at this size, when the caller has it.
        """
        lat = self.latency_us[proto]
        if proto == "Simple" and size_bytes >= self.plateau_min_bytes:
            lat *= self.plateau_factor
        if size_bytes > 0:
            bw = self.bandwidth_Bps(size_bytes, proto, slowdown)
            lat += bus_factor(self.op, self.n_ranks) * size_bytes / bw * 1e6
        return lat / (1.0 - self.stall_fraction) if self.stall_fraction else lat

    @cached_property
    def tuner_view(self) -> AlgoModel:
        """Return the model as NCCL's tuner sees it: its table bandwidth, the same latencies.

        The tuner knows neither the fabric's congestion control nor a flapping link.
        """
        if self.tuner_busbw_Bps is None and self.incast is None and not self.stall_fraction:
            return self
        busbw = self.busbw_Bps if self.tuner_busbw_Bps is None else self.tuner_busbw_Bps
        return replace(self, busbw_Bps=busbw, tuner_busbw_Bps=None, incast=None, stall_fraction=0.0)

    def tuner_time_us(self, size_bytes: float, proto: str) -> float:
        """Time NCCL's tuner predicts for a call (``ncclTopoGetAlgoTime``), microseconds."""
        return self.tuner_view.time_us(size_bytes, proto)

    def best_protocol(self, size_bytes: float) -> str:
        """Return the protocol NCCL's tuner picks for this size."""
        return min(self.protocols, key=lambda p: self.tuner_time_us(size_bytes, p))


@dataclass(frozen=True)
class CollectiveTime:
    """One row of a collective curve (the CLI's and nccl-tests' columns, plus the breakdown)."""

    op: str
    algo: str
    proto: str
    size_bytes: int
    n_ranks: int
    time_us: float
    latency_us: float
    bandwidth_us: float
    algbw_GBps: float
    busbw_GBps: float
    busbw_min_GBps: float
    busbw_max_GBps: float
    bottleneck: str
    requested_algo: str
    fastest_algo: str
    fastest_proto: str
    fastest_time_us: float
    ceiling: str = ""
    ceiling_GBps: float = 0.0
    transport_efficiency: float = 1.0
    #: per ECMP seed the solver hashed, the factor on the bandwidth term
    #: (``AlgoModel.seed_time_scales``; empty when routing is deterministic)
    seed_scales: tuple[float, ...] = ()
    #: p50 and p99 over iterations (``tails.*``); the deterministic ``time_us`` when disabled
    time_us_p50: float = math.nan
    time_us_p99: float = math.nan

    @property
    def time_us_seeds(self) -> tuple[float, ...]:
        """The time at each ECMP seed the solver hashed (``(time_us,)`` when deterministic)."""
        if not self.seed_scales:
            return (self.time_us,)
        return tuple(self.latency_us + self.bandwidth_us * k for k in self.seed_scales)

    @property
    def regime(self) -> str:
        """``latency`` when the latency term exceeds the bandwidth term, else ``bandwidth``."""
        return "latency" if self.latency_us > self.bandwidth_us else "bandwidth"

    @property
    def pct_of_ceiling(self) -> float | None:
        """Bus bandwidth of the row as a percentage of the algorithm's ceiling.

        ``100 x busbw_GBps / ceiling_GBps``: below 100 by the latency term, the protocol's
        factor and cap (LL, LL128) and NCCL's size corrections. ``None`` (JSON null) when
        the ceiling is not a finite positive rate.
        """
        if not (0.0 < self.ceiling_GBps < math.inf):
            return None
        return 100.0 * self.busbw_GBps / self.ceiling_GBps

    def to_dict(self) -> dict[str, Any]:
        """JSON row: the contract's keys first, then the breakdown."""
        return {
            "op": self.op,
            "algo": self.algo,
            "bytes": self.size_bytes,
            "time_us": self.time_us,
            "time_us_p50": self.time_us if math.isnan(self.time_us_p50) else self.time_us_p50,
            "time_us_p99": self.time_us if math.isnan(self.time_us_p99) else self.time_us_p99,
            "algbw_GBps": self.algbw_GBps,
            "busbw_GBps": self.busbw_GBps,
            "proto": self.proto,
            "n_ranks": self.n_ranks,
            "latency_us": self.latency_us,
            "bandwidth_us": self.bandwidth_us,
            "busbw_min_GBps": self.busbw_min_GBps,
            "busbw_max_GBps": self.busbw_max_GBps,
            "bottleneck": self.bottleneck,
            "requested_algo": self.requested_algo,
            "fastest_algo": self.fastest_algo,
            "fastest_proto": self.fastest_proto,
            "fastest_time_us": self.fastest_time_us,
            "regime": self.regime,
            "ceiling": self.ceiling,
            "ceiling_GBps": self.ceiling_GBps,
            "pct_of_ceiling": self.pct_of_ceiling,
            "transport_efficiency": self.transport_efficiency,
        }
