"""The fabric as the collective layer sees it, and solving a traffic pattern on it.

A :class:`FabricContext` bundles a scenario's built topology, hardware, routing policy,
(degraded) link capacities, the job's placement and the NCCL-like constants. Its
:meth:`FabricContext.solve` routes a pattern of connections (source and destination NIC
endpoints) and returns the max-min fair rate of every connection. Each algorithm solves its
pattern once; every message size reuses it (the phases of a ring repeat the same pattern).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property, lru_cache, partial
from typing import Any

import numpy as np

from fabric_model._fastpaths import shortcuts
from fabric_model.caching import register
from fabric_model.catalog import Catalog, load_catalog
from fabric_model.collectives import first_round, symmetry
from fabric_model.collectives.model import (
    MAX_CLASSES,
    PatternResult,
    link_class_name,
    link_tier,
)
from fabric_model.collectives.transport import Incast, incast, keeps_max_min
from fabric_model.errors import InfeasibleDesignError
from fabric_model.families import family_names
from fabric_model.flows import FlowSet, solve_maxmin
from fabric_model.plant.design import Hardware, job_scenario, resolve_hardware, topology_request
from fabric_model.plant.host_path import HostPath, host_path
from fabric_model.resources import asset, load_yaml
from fabric_model.routing import POLICIES, degraded_capacities, route
from fabric_model.scenario import Scenario
from fabric_model.topology import Topology, build_topology_from_request
from fabric_model.topology.planes import failed_switch_capacities, plane_share
from fabric_model.transports import Transport, flap_stall_s, mtu_goodput_factor, transports
from fabric_model.units import FIBER_NS_PER_M, gbps_to_Bps

__all__ = [
    "CLASS_MIN_CONNECTIONS",
    "ECMP_SEEDS",
    "MAX_CLASSES",
    "FabricContext",
    "PatternResult",
    "ce_efficiency",
    "link_tier",
    "nccl_constants",
    "nvlink_efficiency",
    "routing_policy",
]

CONSTANTS_PATH = asset("nccl_constants.yaml")
#: Seeds over which static ECMP hashing is averaged (the spread is reported too).
ECMP_SEEDS = 5
#: Patterns of at least this many connections are solved by classes where that is exact.
CLASS_MIN_CONNECTIONS = 2048
#: Families whose adaptive routes depend only on the two ends' first-hop switches (the
#: class solve's condition; ``tests/test_training.py`` checks each against the full solve).
CLASS_FAMILIES = family_names(lambda f: f.class_solve)


#: Routed patterns kept across the communicators of a fabric: the MoE page's routing skews
#: (and a skewed step after its uniform twin) solve the same connections with other
#: demands, and routing does not depend on demands. Patterns of at least
#: ``ROUTE_CACHE_MIN_CONNECTIONS`` are kept, least recently used first out past
#: ``ROUTE_CACHE_BYTES`` (estimated from their arrays).
ROUTE_CACHE_BYTES = 256 * 2**20
ROUTE_CACHE_MIN_CONNECTIONS = 16_384
_ROUTES: OrderedDict[tuple[Any, ...], tuple[Any, ...]] = OrderedDict()
_ROUTES_LOCK = threading.Lock()


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a is b or (a.shape == b.shape and bool(np.array_equal(a, b)))


def _routed_bytes(rf: Any) -> int:
    """Estimated bytes a routed pattern holds (without building what it builds lazily)."""
    n = int(np.asarray(rf.switch_hops).size)
    held = 24 * n + 16 * int(np.asarray(rf.link_capacity_Bps).size)
    state = getattr(rf, "__dict__", {})
    flows = state.get("flows") if "flows" in state else None
    if flows is None and not hasattr(rf, "link_loads"):
        flows = rf.flows
    if flows is not None:
        held += 16 * int(flows.flow_link_indices.size)
    return held


def _route_cached(
    topo: Topology,
    src: np.ndarray,
    dst: np.ndarray,
    policy: str,
    cap: np.ndarray,
    qps: int,
    seed: int,
    *,
    keep: bool = True,
) -> Any:
    """``route(topo, src, dst, policy, cap, qps=qps, rng=default_rng(seed))``, kept a while.

    Patterns of at least :data:`ROUTE_CACHE_MIN_CONNECTIONS` are kept: the same arguments
    route the same way, so a kept pattern (found by its ends' first and last entries, then
    compared in full) is the one routing would return.
    """
    key: tuple[Any, ...] | None = None
    if keep and src.size >= ROUTE_CACHE_MIN_CONNECTIONS and src.size:
        mid = src.size // 2
        ends = (int(src[0]), int(src[mid]), int(src[-1]), int(dst[0]), int(dst[mid]))
        key = (id(topo), policy, qps, seed, src.size, *ends, int(dst[-1]))
        with _ROUTES_LOCK:
            hit = _ROUTES.get(key)
        if hit is not None and hit[0]() is topo:
            if _same(hit[1], src) and _same(hit[2], dst) and _same(hit[3], cap):
                with _ROUTES_LOCK:
                    if key in _ROUTES:
                        _ROUTES.move_to_end(key)
                return hit[4]
    rf = route(topo, src, dst, policy, cap, qps=qps, rng=np.random.default_rng(seed))
    if key is not None:
        size = _routed_bytes(rf) + src.nbytes + dst.nbytes
        with _ROUTES_LOCK:
            for k in [k for k, v in _ROUTES.items() if v[0]() is None]:  # fabric dropped
                del _ROUTES[k]
            _ROUTES[key] = (weakref.ref(topo), src, dst, cap, rf, size)
            total = sum(v[5] for v in _ROUTES.values())
            while total > ROUTE_CACHE_BYTES and len(_ROUTES) > 1:
                total -= _ROUTES.popitem(last=False)[1][5]
    return rf


def clear_route_cache() -> None:
    """Drop every kept routed pattern (:func:`_route_cached`)."""
    with _ROUTES_LOCK:
        _ROUTES.clear()


register(
    "collectives.context._ROUTES",
    key="the topology object (id, checked by weak reference), policy, qps, ECMP seed and the "
    "pattern's size and end points; then its source, destination and capacity arrays in full",
    size=f"patterns of >= {ROUTE_CACHE_MIN_CONNECTIONS:,} connections, "
    f"{ROUTE_CACHE_BYTES // 2**20} MiB estimated, LRU",
    lock="_ROUTES_LOCK",
    clear=clear_route_cache,
)


@lru_cache(maxsize=1)
def nccl_constants() -> dict[str, Any]:
    """Load the versioned NCCL-like constants (``assets/nccl_constants.yaml``)."""
    data: dict[str, Any] = load_yaml(CONSTANTS_PATH)
    return data


def nvlink_efficiency(constants: dict[str, Any], arch: str) -> float:
    """Fraction of a GPU's NVLink rate an SM-driven transfer reaches on ``arch``.

    NCCL's own figure for one NVLink over the link's line rate, per direction
    (``nvlink_nccl_link_GBps / nvlink_line_link_GBps``, ``src/graph/topo.h``): SMs move 128 B
    payloads per NVLink packet. An architecture without those entries takes
    ``nvlink_efficiency``.

    >>> c = nccl_constants()
    >>> round(nvlink_efficiency(c, "hopper"), 3), round(nvlink_efficiency(c, "blackwell"), 3)
    (0.824, 0.802)
    """
    nccl = constants.get("nvlink_nccl_link_GBps", {}).get(arch)
    line = constants.get("nvlink_line_link_GBps", {}).get(arch)
    if nccl is None or line is None:
        return float(constants["nvlink_efficiency"])
    return float(nccl) / float(line)


def ce_efficiency(constants: dict[str, Any], arch: str) -> float:
    """Fraction of a GPU's NVLink rate a copy engine reaches on ``arch``.

    A copy engine sends 256 B payloads per NVLink packet where an SM sends 128 B (the NCCL
    maintainer, nccl-tests issue 149); the per-packet overhead is what NCCL's SM figure
    leaves of the line rate, ``128 x (1 / nvlink_efficiency - 1)`` bytes, so
    ``ce = 256 / (256 + overhead)``.

    >>> c = nccl_constants()
    >>> round(ce_efficiency(c, "hopper"), 3), round(ce_efficiency(c, "blackwell"), 3)
    (0.904, 0.89)
    """
    sm = float(constants["nvlink_sm_payload_bytes"])
    ce = float(constants["nvlink_ce_payload_bytes"])
    overhead = sm * (1.0 / nvlink_efficiency(constants, arch) - 1.0)
    return ce / (ce + overhead)


def same_domain_group_pairs(group: np.ndarray, domain: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group ids of every ordered endpoint pair in one NVLink domain (self-pairs included).

    A domain holds a handful of the component's endpoints, so the pairs are listed per
    domain (a padded ``domains x k x k`` array) rather than through a dense product.
    Returns the source and destination group of each pair.
    """
    order = np.argsort(domain, kind="stable")
    d_sorted, g_sorted = domain[order], group[order]
    starts = np.flatnonzero(np.r_[True, d_sorted[1:] != d_sorted[:-1]])
    sizes = np.diff(np.r_[starts, d_sorted.size])
    k = int(sizes.max())
    slot = np.arange(d_sorted.size) - np.repeat(starts, sizes)
    padded = np.full((starts.size, k), -1, dtype=np.int64)
    padded[np.repeat(np.arange(starts.size), sizes), slot] = g_sorted
    a = np.repeat(padded, k, axis=1).ravel()
    b = np.tile(padded, (1, k)).ravel()
    ok = (a >= 0) & (b >= 0)
    return a[ok], b[ok]


def _same_domain_pairs(group: np.ndarray, domain: np.ndarray, n_groups: int) -> np.ndarray:
    """Ordered endpoint pairs in the same NVLink domain, counted per (group, group)."""
    a, b = same_domain_group_pairs(group, domain)
    flat = np.bincount(a * n_groups + b, minlength=n_groups * n_groups)
    return flat.reshape(n_groups, n_groups).astype(np.float64)


def _scenario_constants(scenario: Scenario, hw: Hardware) -> dict[str, Any]:
    """NCCL-like constants with the transport's goodput and the scenario's NCCL knobs.

    A lossy fabric has its own goodput fraction (``net_efficiency_lossy``); a smaller
    RDMA MTU (``what_if.mtu``) scales it by the per-packet headers
    (:func:`fabric_model.transports.mtu_goodput_factor`); ``nccl.max_channels``
    (NCCL_MAX_NCHANNELS) lowers the channel count, never raises it.
    """
    constants = nccl_constants()
    lossless = hw.vendor.lossless  # a vendor's transports share its lossless or lossy wire
    eff = constants["net_efficiency"] if lossless else constants["net_efficiency_lossy"]
    eff *= mtu_goodput_factor(hw.vendor.protocol, scenario.what_if.mtu)
    over: dict[str, Any] = {}
    if eff != constants["net_efficiency"]:
        over["net_efficiency"] = eff
    mc = scenario.nccl.max_channels
    if mc != "auto" and int(mc) < int(constants["max_channels"]):
        over["max_channels"] = int(mc)
    return {**constants, **over} if over else constants


def _routed_scenario(scenario: Scenario) -> Scenario:
    """Return the scenario whose fabric is routed: a hybrid's job partition(s) (``hybrid.job``)."""
    return job_scenario(scenario) if scenario.fabric.topology == "hybrid" else scenario


def routing_policy(scenario: Scenario, catalog: Catalog | None = None) -> str:
    """Return the routing policy :meth:`FabricContext.from_scenario` routes with, unbuilt."""
    return resolve_hardware(_routed_scenario(scenario), catalog or load_catalog()).routing


@dataclass(frozen=True, eq=False)
class FabricContext:
    """A scenario's fabric, ready to solve patterns on."""

    scenario: Scenario
    topology: Topology
    hardware: Hardware
    policy: str
    capacity_Bps: np.ndarray = field(repr=False)
    constants: dict[str, Any] = field(repr=False)

    @classmethod
    def from_scenario(cls, scenario: Scenario, catalog: Catalog | None = None) -> FabricContext:
        """Build the topology and capacities (with the what-if degradation) for a scenario."""
        cat = catalog or load_catalog()
        scenario = _routed_scenario(scenario)
        hw = resolve_hardware(scenario, cat)
        topo = build_topology_from_request(scenario.fabric.topology, topology_request(scenario, hw))
        allowed = POLICIES.get(topo.family)
        if allowed is not None and hw.routing not in allowed:
            # refused with the fabric, not at the first routed pattern: every collective of
            # the design would route with it
            raise InfeasibleDesignError(
                "fabric.routing",
                f"a {topo.family} routes with {', '.join(allowed)} (or auto); got {hw.routing!r}",
            )
        constants = _scenario_constants(scenario, hw)
        ctx = cls(scenario, topo, hw, hw.routing, topo.graph.link_capacity_Bps, constants)
        w = scenario.what_if
        cap = topo.graph.link_capacity_Bps
        if w.degraded_link_factor < 1.0:
            cap = degraded_capacities(
                topo, w.degraded_link, w.degraded_link_factor, ctx.degraded_endpoint
            )
        cap = ctx._plane_what_ifs(cap)
        cap = ctx._host_capped(cap)
        if cap is topo.graph.link_capacity_Bps:
            return ctx
        return cls(scenario, topo, hw, hw.routing, cap, constants)

    def _plane_what_ifs(self, cap: np.ndarray) -> np.ndarray:
        """Capacities with the plane what-ifs: planes down, one plane slow, one switch down.

        The array form bundles each cable's copies over the planes (``topology.planes``), so
        a whole plane scales every bundle by :func:`plane_share` (adaptive spraying adds the
        planes' rates; static hashing is paced by the slowest plane) and a switch down in one
        plane removes one copy at that switch (:func:`failed_switch_capacities`).
        """
        w, planes = self.scenario.what_if, self.topology.planes
        if planes == 1:
            return cap
        share = plane_share(
            planes, w.failed_planes, w.degraded_plane_factor, self.policy == "adaptive"
        )
        if share < 1.0:
            cap = cap * share
        if w.failed_switch != "none":
            cap = failed_switch_capacities(
                self.topology, cap, w.failed_switch, self.degraded_endpoint
            )
        return cap

    @property
    def nic_feed_Bps(self) -> float:
        """Most payload one NIC moves each way, fed over PCIe (see ``Hardware``), bytes/s.

        With a host-side misconfiguration (:attr:`host_path`: GDR off, ACS on, a
        cross-socket NIC) the slower stage it adds, shared by the GPU's NICs.
        """
        healthy = self.hardware.nic_feed_GBps(self.nics) * 1e9
        return min(healthy, self.host_path.feed_GBps * 1e9 / self.nics)

    @cached_property
    def host_path(self) -> HostPath:
        """The host-side stage the misconfiguration what-ifs add (``plant.host_path``)."""
        return host_path(self.scenario, self.hardware.server)

    @property
    def host_limited(self) -> bool:
        """Whether the host side (PCIe, or a misconfigured stage), not the NIC, caps each NIC."""
        line = self.nic_Bps * self.constants["net_efficiency"]
        return bool(self.topology.tiers) and self.nic_feed_Bps < line

    @property
    def host_label(self) -> str:
        """The host-side resource that caps the NICs (``host link (PCIe)`` when healthy)."""
        healthy = self.hardware.nic_feed_GBps(self.nics) * 1e9
        if self.host_path.feed_GBps * 1e9 / self.nics < healthy:
            return self.host_path.label
        return "host link (PCIe)"

    @property
    def transport(self) -> Transport:
        """The fabric's transport (``fabric.transport``, the vendor's unless set)."""
        tr = self.hardware.transport
        return tr if tr is not None else transports()[self.hardware.vendor.transport]

    @property
    def stall_fraction(self) -> float:
        """Share of wall time a flapping NIC link stalls the job.

        ``what_if.flapping_link``: a NIC link retrains every so many seconds.

        Each retrain stalls every rank of a synchronous job for the reliable connection's
        retransmission timeout rounded up past the link's down time
        (:func:`fabric_model.transports.flap_stall_s`): ``stall / period`` of the time.
        """
        period = self.scenario.what_if.flapping_link
        if period <= 0 or not self.topology.tiers:
            return 0.0
        return flap_stall_s()[0] / period

    def base_rtt_s(self, switch_hops: float) -> float:
        """Return the base round trip over ``switch_hops`` switches (NICs, hops, fiber), s."""
        f = self.scenario.fabric
        nic_ns = 2.0 * float(self.hardware.nic.latency_ns)
        hop_ns = max(1.0, switch_hops) * float(self.hardware.switch.hop_latency_ns)
        length = 2 * f.nic_leaf_m + max(0.0, switch_hops - 1.0) * f.leaf_spine_m
        return 2.0 * (nic_ns + hop_ns + length * FIBER_NS_PER_M) * 1e-9

    @property
    def models_incast(self) -> bool:
        """Whether an incast can run below the max-min answer on this fabric's transport."""
        return bool(self.topology.tiers) and not keeps_max_min(
            self.transport.key, self.hardware.pfc
        )

    def incast_model(self, fan_in: int, load: float, switch_hops: float) -> Incast | None:
        """Return the incast model of ``fan_in`` connections at ``load`` x a NIC's rate.

        The port is a NIC's downlink (its rate and, per port, the leaf's buffer); ``None``
        without an incast or where the transport keeps the max-min answer
        (:func:`fabric_model.collectives.transport.incast`).
        """
        if fan_in <= 1 or load <= 1.0 or not self.models_incast:
            return None
        sw = self.hardware.switch
        port_gbps = self.scenario.fabric.link_gbps / max(1, self.topology.planes)
        buffer = sw.buffer_per_port_bytes(port_gbps)
        if buffer is None:
            return None
        port = min(self._nominal_nic_Bps, self.nic_Bps) * self.constants["net_efficiency"]
        return incast(
            self.transport.key,
            pfc=self.hardware.pfc,
            fan_in=fan_in,
            load=load,
            port_Bps=port,
            buffer_bytes=buffer * max(1, self.topology.planes),
            rtt_s=self.base_rtt_s(switch_hops),
            mtu_bytes=self.scenario.what_if.mtu,
            cable_m=self.scenario.fabric.nic_leaf_m,
        )

    def _host_capped(self, cap: np.ndarray) -> np.ndarray:
        """NIC link capacities with every GPU's network injection capped at its host link.

        Every byte a GPU sends to or receives from the scale-out network crosses its PCIe
        path to the NIC(s) (``Hardware.host_link_GBps``). NCCL spreads a GPU's channels
        evenly over its NICs, so with ``nics`` NICs each carries at most ``host / nics``;
        the cap is set on the NIC links in line-rate units (``/ net_efficiency``, which
        ``terms.assemble`` applies to every network rate), so the achievable payload per GPU is the
        host link's. A single NIC slower than the host link (400G behind PCIe Gen5 x16) is
        unaffected. Switchless fabrics (torus, hypercube) forward through NICs and are left
        as they are.
        """
        if not self.host_limited:
            return cap
        up, down, _ = self._endpoint_links
        per_nic = self.nic_feed_Bps / self.constants["net_efficiency"]
        out = cap.copy()
        out[up] = np.minimum(out[up], per_nic)
        out[down] = np.minimum(out[down], per_nic)
        return out

    def _wire_notes(self) -> list[str]:
        """Describe the MTU, PFC, channel and flapping misconfigurations, each with its figure."""
        out = []
        w, tr = self.scenario.what_if, self.transport
        if w.mtu != 4096:
            factor = mtu_goodput_factor(self.hardware.vendor.protocol, w.mtu)
            out.append(
                f"misconfiguration: RDMA MTU {w.mtu} B (what_if.mtu): per-packet headers leave "
                f"{factor:.1%} of the 4096 B goodput"
            )
        if tr.has_pfc and not self.hardware.pfc:
            out.append(
                f"misconfiguration: PFC off (what_if.pfc) on {tr.name}: a port receiving faster "
                f"than its rate drops, and go-back-N resends everything after the loss"
            )
        mc = self.scenario.nccl.max_channels
        if mc != "auto" and int(mc) < int(nccl_constants()["max_channels"]):
            out.append(
                f"misconfiguration: NCCL_MAX_NCHANNELS={mc} (nccl.max_channels): rings leave "
                f"each NVLink domain on {self.nics_used_per_domain} NIC(s)"
            )
        if self.stall_fraction > 0:
            stall, down, _ = flap_stall_s()
            out.append(
                f"misconfiguration: a NIC link retrains every "
                f"{w.flapping_link:g} s (what_if.flapping_link): each time "
                f"the job stalls {stall:.1f} s ({down:g} s down, then the QPs' ACK timeout), "
                f"{self.stall_fraction:.1%} of the time"
            )
        return out

    def notes(self) -> tuple[str, ...]:
        """Return what in this design shapes the numbers and the scenario keys do not show.

        The degraded link (which NIC), a host link (PCIe) that caps the NICs, and a partial
        NVLink domain; each line says the mechanism and its figure.
        """
        out = []
        w, planes = self.scenario.what_if, self.topology.planes
        if self.scenario.what_if.degraded_link_factor < 1.0:
            out.append("degraded: " + self.degraded_description())
        if planes > 1 and (w.failed_planes or w.degraded_plane_factor < 1.0):
            share = plane_share(
                planes, w.failed_planes, w.degraded_plane_factor, self.policy == "adaptive"
            )
            how = (
                "traffic sprays over the planes by what each offers"
                if self.policy == "adaptive"
                else "static hashing gives every plane an equal share, so the slowest sets the pace"
            )
            out.append(
                f"planes: {w.failed_planes} of {planes} down, one at "
                f"{w.degraded_plane_factor:.0%}; {how}: every link keeps {share:.1%} of its "
                f"healthy aggregate"
            )
        if planes > 1 and w.failed_switch != "none":
            out.append(
                f"a {w.failed_switch} of one plane is down: its links keep "
                f"{planes - 1} of {planes} plane copies"
            )
        out += [f"misconfiguration: {n}" for n in self.host_path.notes]
        healthy = self.hardware.nic_feed_GBps(self.nics) * 1e9
        if self.host_limited and healthy <= self.nic_feed_Bps:
            hw = self.hardware
            out.append(
                f"host link: each GPU's {self.nics} NICs share its PCIe path "
                f"({hw.host_link_GBps:g} GB/s of payload each way, {hw.server.name}), so a NIC "
                f"carries at most {self.nic_feed_Bps / 1e9:.1f} GB/s of its "
                f"{self.nic_Bps / 1e9:g} GB/s line rate"
            )
        out += self._wire_notes()
        if self.n_ranks % self.physical_domain:
            out.append(
                f"partial NVLink domain: {self.n_ranks:,} GPUs fill {self.n_domains - 1:,} "
                f"domain(s) of {self.physical_domain} and one of {self.domain}; the smaller "
                f"sets the pace of the network patterns"
            )
        return tuple(out)

    @property
    def degraded_rank(self) -> int:
        """Rank whose NIC 0 the ``nic`` what-if degrades (``what_if.degraded_position``).

        ``interior``: GPU 0 of the middle NVLink domain. In NCCL's double binary tree over
        domains (``ncclGetDtree``) that domain is an interior node of the first tree, whose
        NIC carries four concurrent streams (two children and a parent, both ways) where
        the root's carries two; every NIC of a ring or an all-to-all carries the same load,
        so this is both the typical and the worst position. ``root``: rank 0, the root of
        NCCL's first tree, the least loaded NIC (the best case).
        """
        if self.scenario.what_if.degraded_position == "root":
            return 0
        return (self.n_domains // 2) * self.physical_domain

    @property
    def degraded_endpoint(self) -> int:
        """NIC endpoint the ``nic`` what-if degrades (NIC 0 of :attr:`degraded_rank`)."""
        return int(self.rank_endpoint(np.asarray(self.degraded_rank), 0))

    def degraded_description(self) -> str:
        """Which link the what-if degrades, in words ('' when every link is healthy)."""
        w = self.scenario.what_if
        if w.degraded_link_factor >= 1.0:
            return ""
        pct = f"{w.degraded_link_factor:.0%}"
        if w.degraded_link != "nic" or not self.topology.tiers:
            return f"the first {w.degraded_link} cable runs at {pct} of its rate"
        rank = self.degraded_rank
        where = (
            "root of NCCL's first tree"
            if w.degraded_position == "root"
            else "interior node of NCCL's first tree"
        )
        return (
            f"NIC 0 of rank {rank:,} (NVLink domain {rank // self.physical_domain:,} of "
            f"{self.n_domains:,}, {where}) runs at {pct} of its rate"
        )

    # shape ------------------------------------------------------------------------------
    @property
    def n_ranks(self) -> int:
        """GPUs (ranks) in the collective."""
        return self.scenario.cluster.n_gpus

    @property
    def physical_domain(self) -> int:
        """GPUs per physical NVLink domain (the stride between domains' first GPUs)."""
        return min(self.scenario.cluster.nvlink_domain, self.n_ranks)

    @property
    def domain(self) -> int:
        """GPUs per NVLink domain that every domain of the job holds.

        A job whose GPU count is not a multiple of the NVLink domain (128 GPUs on 72-GPU
        NVL72 racks: one full rack and 56 GPUs of a second) ends in a partial domain. A
        synchronous collective runs at the pace of its slowest domain, and the partial one
        has the fewest GPUs and NICs to share the domain's traffic, so ring, tree and NVLS
        use its size: each domain contributes ``domain`` GPUs (the first ones) to the network
        patterns, and per-NIC shares are ``S / domain``. All-to-all, whose traffic between
        two domains grows with both sizes, uses :attr:`domain_sizes` instead.
        """
        d = self.physical_domain
        partial = self.n_ranks % d
        return partial if partial else d

    @property
    def domain_sizes(self) -> np.ndarray:
        """GPUs in each logical NVLink domain: full ones, then a partial last one if any.

        Where every domain holds :attr:`domain` GPUs (no partial domain, or a communicator
        that overrides the shape) all are that size.
        """
        m, d = self.n_domains, self.domain
        if d * m == self.n_ranks:
            return np.full(m, d, dtype=np.int64)
        sizes = np.full(m, self.physical_domain, dtype=np.int64)
        sizes[-1] = self.n_ranks - self.physical_domain * (m - 1)
        return sizes

    @property
    def n_domains(self) -> int:
        """NVLink domains the job spans (a partial last domain counts)."""
        return -(-self.n_ranks // self.physical_domain)

    @property
    def nics(self) -> int:
        """NICs per GPU."""
        return self.scenario.cluster.nics_per_gpu

    @property
    def arch(self) -> str:
        """GPU architecture (``ampere``, ``hopper``, ``blackwell``)."""
        return str(self.hardware.gpu.arch)

    @property
    def nic_Bps(self) -> float:
        """Line rate of one NIC, bytes/s."""
        return gbps_to_Bps(self.scenario.fabric.link_gbps)

    @property
    def nvlink_Bps(self) -> float:
        """Per-direction NVLink bandwidth of one GPU, bytes/s."""
        return float(self.hardware.gpu.nvlink_GBps) * 1e9

    @property
    def nvlink_efficiency(self) -> float:
        """Fraction of the NVLink rate an SM-driven transfer reaches (:func:`nvlink_efficiency`)."""
        return nvlink_efficiency(self.constants, self.arch)

    @property
    def nics_used_per_domain(self) -> int:
        """NICs a ring/tree uses to leave a domain: one per channel pair, channels capped."""
        c = self.constants
        per_nic = int(c["channels_per_nic"])
        return int(min(self.domain * self.nics, max(1, int(c["max_channels"]) // per_nic)))

    @cached_property
    def domain_order(self) -> np.ndarray:
        """Physical domain of each logical domain (ring order): identity or scattered.

        Scattering permutes the full domains only: a partial last domain holds fewer GPUs
        than a full one, so the job's last (partial) logical domain stays on it.
        """
        n_dom = self.n_domains
        if self.scenario.what_if.placement == "scattered":
            n_full = self.n_ranks // self.physical_domain
            order = np.random.default_rng(12345).permutation(n_full)
            return np.concatenate([order, np.arange(n_full, n_dom)])
        return np.arange(n_dom)

    def endpoint(self, logical_domain: np.ndarray, slot: np.ndarray) -> np.ndarray:
        """NIC endpoint id of NIC ``slot`` (0 .. domain x nics - 1) of a logical domain."""
        phys = self.domain_order[np.asarray(logical_domain) % self.n_domains]
        gpu = phys * self.physical_domain + np.asarray(slot) // self.nics
        return gpu * self.nics + np.asarray(slot) % self.nics

    def rank_domain(self, rank: np.ndarray) -> np.ndarray:
        """NVLink domain (logical) of each rank."""
        return np.asarray(rank) // self.physical_domain

    def rank_endpoint(self, rank: np.ndarray, nic: np.ndarray | int) -> np.ndarray:
        """NIC endpoint of NIC ``nic`` of each rank (ranks fill domains in order)."""
        rank = np.asarray(rank)
        d = self.physical_domain
        phys = self.domain_order[rank // d]
        return (phys * d + rank % d) * self.nics + np.asarray(nic)

    def endpoints(self) -> np.ndarray:
        """Every NIC endpoint of the communicator (the whole cluster here)."""
        return np.arange(self.topology.n_endpoints, dtype=np.int64)

    def slots_spread(self, n: int) -> np.ndarray:
        """``n`` NIC slots of a domain, spread over GPUs (and so over rails)."""
        total = self.domain * self.nics
        return (np.arange(n) * total // max(n, 1)).astype(np.int64)

    # latency ----------------------------------------------------------------------------
    def path_latency_us(self, switch_hops: float) -> float:
        """Wire latency beyond NCCL's one-switch NET constant: extra hops and fiber.

        NCCL's ``hwLat[NET]`` was measured through one switch; each further switch adds the
        switch model's hop latency, and every metre of cable 5 ns.
        """
        f = self.scenario.fabric
        hop_ns = float(self.hardware.switch.hop_latency_ns) if self.topology.tiers else 0.0
        extra_hops = max(0.0, switch_hops - 1.0)
        if self.topology.tiers == 0:  # switchless: a NIC-to-NIC cable per hop, forwarding in NICs
            hop_ns = 2.0 * float(self.hardware.nic.latency_ns)
            length = f.direct_link_m * switch_hops
        else:
            length = 2 * f.nic_leaf_m + max(0.0, switch_hops - 1.0) * (
                f.leaf_spine_m if switch_hops <= 3 else (f.leaf_spine_m + f.spine_core_m) / 2
            )
        return (extra_hops * hop_ns + length * FIBER_NS_PER_M) / 1000.0

    # solving ----------------------------------------------------------------------------
    def solve(
        self, src: np.ndarray, dst: np.ndarray, demand: np.ndarray | None = None
    ) -> PatternResult:
        """Route and solve a pattern of concurrent connections.

        With ``demand`` (each connection's bytes relative to a reference connection), the
        solve is *progress-fair*: every connection advances at the same fraction of its own
        bytes where links allow, i.e. max-min fairness on the progress rate, with each
        connection's link weights multiplied by its demand. The returned rates are in
        reference bytes per second, so a phase takes ``reference bytes / min rate``. For one
        shared bottleneck this is the work-conserving optimum; equal demands give the plain
        max-min solve.

        Static ECMP hashing is solved for :data:`ECMP_SEEDS` seeds; its slowest connection is
        reported per seed. A connection split over several queue pairs finishes when its
        slowest queue pair does: its rate is ``qps x`` the slowest queue pair's rate.
        """
        if demand is not None:  # connections with nothing to send are not in the phase
            keep = demand > 0
            src, dst, demand = src[keep], dst[keep], demand[keep]
        # algorithms often share a pattern (tree and NVLS-Tree, ring and the shard ring)
        key = (
            np.asarray(src, np.int64).tobytes(),
            np.asarray(dst, np.int64).tobytes(),
            None if demand is None else demand.tobytes(),
        )
        cached = self._solved.get(key)
        # the pattern, as views on the key's bytes (kept by the cache anyway), for
        # ``busiest_links``
        self._last_pattern[0] = (
            np.frombuffer(key[0], np.int64),
            np.frombuffer(key[1], np.int64),
            demand,
        )
        if cached is not None:
            return cached
        # views on the key's bytes: a result that solves its mean later keeps no extra copy
        src, dst = np.frombuffer(key[0], np.int64), np.frombuffer(key[1], np.int64)
        result = None
        if demand is None and src.size >= CLASS_MIN_CONNECTIONS:
            result = self._solve_by_class(src, dst)
        if result is None and demand is None:  # k copies over NIC slots: one (symmetry.py)
            result = symmetry.solve_slot_copies(self, src, dst)
        if result is None:
            result = self._solve(src, dst, demand)
        self._solved[key] = result
        return result

    def _solve_by_class(
        self, src: np.ndarray, dst: np.ndarray, *, full: bool = False
    ) -> PatternResult | None:
        """Solve a one-connection-per-NIC pattern by (source leaf, destination leaf) classes.

        On a fat-tree, rail-only or dragonfly+ fabric with adaptive routing a connection's
        route depends only on its two leaves. When every endpoint sends at most one
        connection and receives at most one (rings, pipeline sends, SHARP's up-and-down),
        the members of a class share every switch link and each owns its NIC links, so by
        symmetry max-min fairness gives them one rate: the class is solved as one flow whose
        shared-link weights are multiplied by the member count and whose NIC links are the
        members' links summed. A NIC below nominal rate (a degraded-link what-if) keeps a
        class of its own. The result equals the per-connection solve
        (``tests/test_training.py`` checks it); patterns outside these conditions return
        None and are solved per connection.
        """
        topo = self.topology
        if topo.family not in CLASS_FAMILIES or (self.policy != "adaptive" and topo.tiers > 1):
            return None
        n_e = topo.n_endpoints
        if np.bincount(src, minlength=n_e).max() > 1 or np.bincount(dst, minlength=n_e).max() > 1:
            return None
        up, down, attach = self._endpoint_links
        cap = self.capacity_Bps
        nominal = self._nominal_nic_Bps
        n_nodes = topo.graph.n_nodes
        key_s = np.where(cap[up[src]] != nominal, n_nodes + src, attach[src])
        key_d = np.where(cap[down[dst]] != nominal, n_nodes + dst, attach[dst])
        span = n_nodes + n_e
        key = key_s * span + key_d
        order = np.argsort(key, kind="stable")
        ks = key[order]
        starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
        first = order[starts]
        members = np.diff(np.r_[starts, ks.size])
        rep_s, rep_d = src[first], dst[first]
        n_cls = rep_s.size
        rf = route(topo, rep_s, rep_d, "adaptive", cap)
        n_base = rf.link_capacity_Bps.size
        # the fabric's links, then each class's aggregate NIC links (not copied: the first
        # round reads the few it crosses)
        capacity = first_round.Appended(
            rf.link_capacity_Bps,
            np.concatenate([members * cap[up[rep_s]], members * cap[down[rep_d]]]),
        )

        # each class's NIC links become its members' summed links, its weights x members
        flows = first_round.class_flows(rf, up[rep_s], down[rep_d], members, capacity.size)
        hops = rf.switch_hops

        def name(link: int) -> str:
            return "nic-leaf" if link >= n_base or link < 0 else link_class_name(rf, link)

        fast = None if full else first_round.slowest(flows, capacity, rf.flow_fraction, name)
        if fast is not None:  # the slowest class from the first round (first_round.py)
            return first_round.DeferredMean(
                np.array([fast[0]]),
                fast[1],
                float(np.average(hops, weights=members)),
                int(hops.max()),
                lambda: self._solve_by_class(src, dst, full=True),
            )
        sol = solve_maxmin(getattr(flows, "flows", flows), np.asarray(capacity))
        rate = np.full(n_cls, np.inf)
        np.minimum.at(rate, rf.flow_of_connection, sol.rate_Bps / rf.flow_fraction)
        worst = int(np.argmin(sol.rate_Bps))
        bottleneck = name(int(sol.bottleneck_link[worst]))
        return PatternResult(
            np.array([rate.min()]),
            float(np.average(rate, weights=members)),
            bottleneck,
            float(np.average(hops, weights=members)),
            int(hops.max()),
        )

    @cached_property
    def _solved(self) -> dict[tuple[bytes, bytes, bytes | None], PatternResult]:
        return {}

    @cached_property
    def _last_pattern(self) -> list[Any]:
        """``[(src, dst, demand)]`` of the last pattern :meth:`solve` was given, or ``[None]``."""
        return [None]

    def take_last_pattern(self) -> Any:
        """Return the last solved pattern ``(src, dst, demand)`` (or None) and forget it."""
        out, self._last_pattern[0] = self._last_pattern[0], None
        return out

    def busiest_links(
        self, src: np.ndarray, dst: np.ndarray, demand: np.ndarray | None, top: int
    ) -> list[dict[str, Any]]:
        """Return the ``top`` most utilised links of a pattern, from its full max-min solve.

        The pattern is routed as :meth:`solve` routes it (the first ECMP seed under static
        hashing) and solved in full (every filling round): each link's load is
        ``sum_f w[f, l] r_f`` and its utilisation ``load / capacity``. Each row: the link's
        index in the routed link space, its class (the routing's label, e.g. ``nic-leaf``,
        ``leaf-up bundle``), its switch tier (:func:`link_tier`), load and capacity in GB/s,
        the utilisation (0-1), the flows crossing it and the flows it froze (the max-min
        bottleneck of); equally full links are listed binding ones first.
        """
        qps = self.scenario.fabric.qps_per_connection
        rf = _route_cached(
            self.topology, src, dst, self.policy, self.capacity_Bps, qps, 0, keep=False
        )
        flows = first_round.weighted_flows(rf, demand)
        sol = solve_maxmin(flows, rf.link_capacity_Bps)
        load = np.asarray(sol.link_load_Bps)
        cap = np.asarray(rf.link_capacity_Bps)
        util = np.where(cap > 0, load / cap, 0.0)
        # among equally full links, first those that froze the most flows (the binding ones;
        # max-min also fills links that only carry flows frozen elsewhere)
        bn = np.asarray(sol.bottleneck_link, np.int64)
        frozen = np.bincount(bn[bn >= 0], minlength=cap.size)
        order = np.lexsort((-frozen, -np.round(util, 9)))[: max(0, int(top))]
        fl = getattr(flows, "flows", flows)
        counts = np.bincount(np.asarray(fl.flow_link_indices, np.int64), minlength=cap.size)
        rows = []
        for link in order:
            name = link_class_name(rf, int(link))
            rows.append(
                {
                    "link": int(link),
                    "class": name,
                    "tier": link_tier(name),
                    "load_GBps": float(load[link]) / 1e9,
                    "capacity_GBps": float(cap[link]) / 1e9,
                    "utilisation": float(util[link]),
                    "flows": int(counts[link]),
                    "frozen_flows": int(frozen[link]),
                }
            )
        return rows

    def _solve(
        self, src: np.ndarray, dst: np.ndarray, demand: np.ndarray | None, *, full: bool = False
    ) -> PatternResult:
        policy = self.policy
        seeds = range(ECMP_SEEDS) if policy == "ecmp" else range(1)
        mins, means = [], []
        bottleneck, hops = "", np.zeros(0)
        cap = self.capacity_Bps
        qps = self.scenario.fabric.qps_per_connection
        for seed in seeds:
            # a full solve builds the pattern's flow set: not kept (the cache counts no such)
            rf = _route_cached(self.topology, src, dst, policy, cap, qps, seed, keep=not full)
            name = partial(link_class_name, rf)
            # the slowest connection from the first round (first_round.py); the bottleneck's
            # name only on the first seed
            fast = None if full else first_round.slowest_routed(rf, demand, name, not bottleneck)
            # a pattern no hash can move (every connection under one leaf) routes alike for
            # every seed: the first seed's solve stands for all (``FastPaths.seed_shortcut``)
            seed_free = getattr(rf, "seed_free", False) and shortcuts().seed_shortcut
            alike = len(seeds) - 1 if seed_free else 0
            if fast is not None:
                mins += [fast[0]] * (1 + alike)
                if not bottleneck:
                    bottleneck, hops = fast[1], rf.switch_hops
                if alike:
                    break
                continue
            flows = first_round.weighted_flows(rf, demand)  # progress-fair with demands
            sol = solve_maxmin(flows, rf.link_capacity_Bps)
            conn = np.full(rf.n_connections, np.inf)
            np.minimum.at(conn, rf.flow_of_connection, sol.rate_Bps / rf.flow_fraction)
            mins += [conn.min()] * (1 + alike)
            means += [conn.mean()] * (1 + alike)
            if not bottleneck:
                bottleneck = name(int(sol.bottleneck_link[int(np.argmin(sol.rate_Bps))]))
                hops = rf.switch_hops
            if alike:
                break
        if len(means) < len(mins):
            return first_round.DeferredMean(
                np.asarray(mins),
                bottleneck,
                float(hops.mean()) if hops.size else 0.0,
                int(hops.max()) if hops.size else 0,
                lambda: self._solve(src, dst, demand, full=True),
            )
        return PatternResult(
            np.asarray(mins),
            float(np.mean(means)),
            bottleneck,
            float(hops.mean()) if hops.size else 0.0,
            int(hops.max()) if hops.size else 0,
        )

    # class aggregation -------------------------------------------------------------------
    @cached_property
    def _endpoint_links(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each endpoint's up link, down link and first-hop node (leaf or domain node)."""
        g = self.topology.graph
        indptr, order = g.out_indptr_indices
        n_e = self.topology.n_endpoints
        up = order[indptr[:n_e]].astype(np.int64)
        return up, up ^ 1, g.link_dst[up].astype(np.int64)

    @cached_property
    def _nominal_nic_Bps(self) -> float:
        """The NICs' nominal up-link rate (their median: a degraded NIC is the exception)."""
        up, _, _ = self._endpoint_links
        return float(np.median(self.capacity_Bps[up]))

    def solve_all_to_all(
        self,
        components: list[np.ndarray],
        dst_weight: np.ndarray | None = None,
        *,
        full: bool = False,
    ) -> tuple[PatternResult, int]:
        """Solve a uniform all-to-all by flow classes, without listing its connections.

        Each component is a set of NIC endpoints that exchange equal amounts all-to-all (every
        ordered pair whose GPUs sit in different NVLink domains). Connections from endpoints
        behind one first-hop node (leaf switch, or NVLink domain when switchless) to
        endpoints behind another form a class: in a uniform pattern all members see the same
        paths and load, so a class is solved as one entry - a representative's route, its NIC
        links replaced by the group's aggregate links (the sum of the members' NIC
        capacities), its weights multiplied by the member count - whose rate is the
        per-member rate. An endpoint whose NIC runs below nominal (a degraded-link what-if)
        keeps a group of its own. With ``dst_weight`` (each endpoint's received traffic
        relative to the mean, for skewed patterns) endpoints of different weight never share
        a group, and each class's weights also carry its destination's weight (progress-fair,
        see :meth:`solve`). Static ECMP and D-mod-k spread a uniform pattern's many
        flows evenly over equal-cost paths (in expectation, by construction), so classes
        route them adaptively. ``tests/test_collectives.py`` holds the result equal to the
        per-connection solve where both run.

        A uniform pattern on a torus, hypercube or dragonfly+ is solved on one orbit
        representative's classes (:func:`fabric_model.collectives.symmetry.
        solve_all_to_all_by_symmetry`, exact; off with ``fast_paths(symmetry=False)``); where
        the symmetry does not hold, every class is solved.

        With ``full`` the slowest class comes from the full max-min solve, not its first
        round (:mod:`fabric_model.collectives.first_round`; the tests compare the two).

        Returns the result and the number of classes.
        """
        return self._solve_all_to_all(components, dst_weight, full)

    def _solve_all_to_all(
        self, components: list[np.ndarray], dst_weight: np.ndarray | None, full: bool = False
    ) -> tuple[PatternResult, int]:
        """:meth:`solve_all_to_all`; with ``full`` the slowest class is found by a full solve."""
        if dst_weight is None:
            by_orbit = symmetry.solve_all_to_all_by_symmetry(self, components)
            if by_orbit is not None:
                return by_orbit
        up, down, attach = self._endpoint_links
        cap = self.capacity_Bps
        nominal = self._nominal_nic_Bps
        n_nodes = self.topology.graph.n_nodes
        odd = (cap[up] < nominal) | (cap[down] < nominal)
        group_of = np.where(odd, n_nodes + np.arange(up.size), attach)
        if dst_weight is not None:  # hot and cold endpoints behind one switch: two groups
            levels, level = np.unique(dst_weight, return_inverse=True)
            group_of = group_of * levels.size + level
        gpu_domain = (
            np.arange(self.topology.n_endpoints) // self.nics // self.scenario.cluster.nvlink_domain
        )
        # members per (source group, destination group), summed over components: classes
        # of different components between the same groups route identically
        all_ep = np.unique(np.concatenate(components))
        groups = np.unique(group_of[all_ep])
        n_groups = groups.size
        if n_groups * n_groups > 4 * MAX_CLASSES:
            raise ValueError(f"{n_groups:,}^2 group pairs")
        members = np.zeros((n_groups, n_groups))
        rep = np.empty(n_groups, dtype=np.int64)
        for ep in components:
            g = np.searchsorted(groups, group_of[ep])
            n_g = np.bincount(g, minlength=n_groups).astype(np.float64)
            members += np.outer(n_g, n_g) - _same_domain_pairs(g, gpu_domain[ep], n_groups)
            rep[g] = ep  # any endpoint of each group
        a, b = np.nonzero(members > 0.5)
        if a.size > MAX_CLASSES:
            raise ValueError(f"{a.size:,} flow classes (at most {MAX_CLASSES:,})")
        rep_s, rep_d, n_members = rep[a], rep[b], members[a, b]
        demand = np.ones(rep_d.size) if dst_weight is None else dst_weight[rep_d]
        if dst_weight is not None:  # classes with nothing to send are not in the phase
            keep = demand > 0
            rep_s, rep_d = rep_s[keep], rep_d[keep]
            n_members, demand = n_members[keep], demand[keep]
        # static per-destination choices (ecmp hashing, D-mod-k, dragonfly+ minimal) spread a
        # class's many members evenly over the equal-cost paths: route the class adaptively
        spread = ("ecmp", "dmodk", "minimal", "dor")
        policy = "adaptive" if self.policy in spread else self.policy
        rf = route(self.topology, rep_s, rep_d, policy, cap)
        fl = rf.flows
        lengths = np.diff(fl.flow_link_indptr)
        row = np.repeat(np.arange(lengths.size), lengths)
        idx = fl.flow_link_indices.astype(np.int64).copy()
        n_base = rf.link_capacity_Bps.size
        is_up = idx == up[rep_s][row]
        is_dn = idx == down[rep_d][row]
        idx[is_up] = n_base + np.searchsorted(groups, group_of[rep_s][row[is_up]])
        idx[is_dn] = n_base + groups.size + np.searchsorted(groups, group_of[rep_d][row[is_dn]])
        gi = np.searchsorted(groups, group_of[all_ep])
        up_cap = np.bincount(gi, weights=cap[up[all_ep]], minlength=groups.size)
        dn_cap = np.bincount(gi, weights=cap[down[all_ep]], minlength=groups.size)
        capacity = np.concatenate([rf.link_capacity_Bps, up_cap, dn_cap])
        flows = FlowSet.built(
            fl.flow_link_indptr,
            idx,
            fl.flow_link_weights * (n_members * demand)[row],
            capacity.size,
            max_weight=np.inf,
        )
        hops = rf.switch_hops

        def name(link: int) -> str:
            if link >= n_base or link < 0:
                return "nic-leaf" if self.topology.tiers else "nic"
            return link_class_name(rf, link)

        fast = None if full else first_round.slowest(flows, capacity, np.ones(1), name)
        if fast is not None:  # the slowest class from the first round (first_round.py)
            deferred = first_round.DeferredMean(
                np.array([fast[0]]),
                fast[1],
                float(np.average(hops, weights=n_members)),
                int(hops.max()),
                lambda: FabricContext._solve_all_to_all(self, components, dst_weight, True)[0],
            )
            return deferred, int(rep_s.size)
        sol = solve_maxmin(flows, capacity)
        rate = sol.rate_Bps
        bottleneck = name(int(sol.bottleneck_link[int(np.argmin(rate))]))
        return (
            PatternResult(
                np.array([rate.min()]),
                float(np.average(rate, weights=n_members)),
                bottleneck,
                float(np.average(hops, weights=n_members)),
                int(hops.max()),
            ),
            int(rep_s.size),
        )
