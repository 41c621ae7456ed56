"""Hybrid fabrics: two partitions, each of its own family, joined by a shared core tier.

The multi-tenant design of the seed articles: a fat-tree partition for dense training and a
dragonfly+ partition for MoE, joined through a shared spine. Partition A holds GPUs
``0 .. n_A - 1`` (NIC endpoints ``0 .. E_A - 1``), partition B the rest; each is built by its
family's own builder at its own size and with its own vendor's switch radix, and keeps every
switch and cable the builder gives it.

Shared tier (closed form)
-------------------------
For partition ``P`` with ``E`` NIC ports at the common line rate ``b``, a top tier of
``T`` switches of radix ``R`` whose internal cables take ``D`` of their ports (the builder's
port groups of that tier), and ``s = hybrid.shared_oversubscription`` (the partition's
injection bandwidth ``E b`` : its uplink bandwidth into the shared tier):

- shared uplinks ``U = ceil(E / s)`` (so ``U b >= E b / s``), spread over the ``T`` top-tier
  switches: ``floor(U / T)`` each and one more on the first ``U mod T``;
- the top tier must now hold ``D + U`` ports: ``T' = max(T, ceil((D + U) / R))`` switches.
  A full-size design has no free top-tier port (a 3-tier fat-tree's cores and a dragonfly+'s
  spines use all ``R``), so the top tier grows by ``T' - T`` switches that take the spill-over
  of the internal cables; the cable counts stay the builder's;
- shared core switches (radix ``R_c`` of ``fabric.vendor``'s switch at the line rate):
  ``C = ceil((U_A + U_B) / R_c)``; uplink ``i`` of the concatenated list (A's top switches in
  order, then B's) lands on core ``i mod C``, so the cores load evenly.

``s`` defaults to 7: the cross-zone aggregation layer (ATSW) of Meta's RoCE training clusters,
oversubscribed 1:7 between AI zones (Gangidi et al., "RDMA over Ethernet for Distributed AI
Training at Meta Scale", SIGCOMM 2024; the Llama 3 paper, Dubey et al. 2024, sec. 3.3.1:
3,072-GPU pods joined by an aggregation layer at 1:7), the published instance of a tier that joins
otherwise separate training fabrics; ``s = 1`` gives the partitions full bandwidth between
them.

Hops: a pair inside one partition crosses what its family says; a pair across crosses
``depth_A + 1 + depth_B`` switches (each side's leaf up to its top tier, then one core).
Bisection: the smaller of the partition cut ``min(U_A, U_B) b`` and the sum of the two
partitions' own bisections (a cut that halves both), the worst balanced cut when the
partitions are of equal size and an upper bound on it otherwise.

Graph
-----
Nodes: A's endpoints, B's endpoints, A's switches (in A's order), B's switches, then the
``C`` shared cores (``node_tier`` one above the partitions' highest tier,
:attr:`HybridTopology.shared_graph_tier`). Cables: A's, then B's (each in its builder's
order, so a partition's link ``l`` is hybrid link ``l + link_offset``), then A's shared
uplinks (top switch by top switch, :meth:`Partition.uplink_counts` each), then B's. The graph
keeps the builder's ``T`` top-tier nodes: each stands for ``T' / T`` switches when the shared
ports needed more, which changes no capacity (the added switches carry the same cables).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from fabric_model.errors import FabricModelError, InfeasibleDesignError
from fabric_model.topology.base import (
    FabricGraph,
    LinkClass,
    PortGroup,
    Topology,
    TopologyRequest,
    hop_histogram,
)
from fabric_model.units import gbps_to_Bps, gbps_to_GBps

__all__ = [
    "HYBRID_FAMILIES",
    "HybridRequest",
    "HybridTopology",
    "Partition",
    "build_hybrid",
    "shared_uplinks",
]

#: Families a partition may take: switched fabrics whose top tier can uplink.
HYBRID_FAMILIES = ("fat-tree", "rail-only", "dragonfly-plus")


@dataclass(frozen=True)
class HybridRequest(TopologyRequest):
    """A :class:`TopologyRequest` for the whole cluster plus the two partitions' requests.

    Attributes
    ----------
    a_family, b_family
        Partition families (``hybrid.a_topology``, ``hybrid.b_topology``).
    a, b
        Each partition's own request (its size, its vendor's radix and switch).
    a_label, b_label
        ``family, vendor`` of each partition, for notes and labels.
    core_radix, core_switch_key
        Ports at the line rate of a shared core switch, and its catalog key.
    shared_oversubscription
        ``hybrid.shared_oversubscription``: injection : shared-uplink bandwidth per partition.
    """

    a_family: str = "fat-tree"
    a: TopologyRequest | None = None
    b_family: str = "dragonfly-plus"
    b: TopologyRequest | None = None
    a_label: str = ""
    b_label: str = ""
    core_radix: int = 64
    core_switch_key: str = ""
    shared_oversubscription: float = 7.0


@dataclass(frozen=True)
class Partition:
    """One partition inside a hybrid: its topology, offsets and shared uplinks.

    Attributes
    ----------
    name
        ``"A"`` or ``"B"``.
    topology
        The partition built alone by its family's builder.
    endpoint_offset, node_offset_switch, link_offset
        Hybrid id of the partition's first endpoint; amount added to the partition's switch
        node ids; hybrid id of its first directed link.
    top_tier, top_graph_tier
        Name of its top switch tier and that tier's ``node_tier`` in its graph.
    n_top, n_top_built
        Top-tier switches the builder made (``T``) and after the shared ports (``T'``).
    n_uplinks
        Shared uplinks of the partition (``U``).
    first_shared_cable
        Hybrid cable id of the partition's first shared uplink.
    """

    name: str
    topology: Topology
    endpoint_offset: int
    node_offset_switch: int
    link_offset: int
    top_tier: str
    top_graph_tier: int
    n_top: int
    n_top_built: int
    n_uplinks: int
    first_shared_cable: int

    def uplink_counts(self) -> np.ndarray:
        """Shared uplinks of each builder top switch.

        ``floor(U / T)`` each, one more on the first ``U mod T``.
        """
        k = np.arange(self.n_top)
        return self.n_uplinks // self.n_top + (k < self.n_uplinks % self.n_top).astype(np.int64)

    @property
    def depth(self) -> int:
        """Switch levels from a leaf up to the top tier (leaf = 1)."""
        return list(self.topology.switches_by_tier).index(self.top_tier) + 1

    def hybrid_node(self, local: np.ndarray) -> np.ndarray:
        """Hybrid node id of partition-local node ids."""
        local = np.asarray(local, dtype=np.int64)
        n_e = self.topology.n_endpoints
        return np.where(local < n_e, local + self.endpoint_offset, local + self.node_offset_switch)


@dataclass(frozen=True)
class HybridTopology(Topology):
    """A :class:`Topology` of family ``hybrid`` that also carries its two partitions."""

    partitions: tuple[Partition, ...] = ()
    n_shared_cores: int = 0

    @property
    def shared_graph_tier(self) -> int:
        """``FabricGraph.node_tier`` of the shared cores: above every partition tier."""
        return max(p.top_graph_tier for p in self.partitions) + 1

    @cached_property
    def top_nodes(self) -> tuple[np.ndarray, np.ndarray]:
        """Partition-local node ids of each partition's top-tier switches (A, B)."""
        out = []
        for p in self.partitions:
            g = p.topology.graph
            out.append(np.flatnonzero(g.node_tier == p.top_graph_tier))
        return out[0], out[1]


def shared_uplinks(n_endpoints: int, oversubscription: float) -> int:
    """Shared uplinks of a partition: ``ceil(E / s)`` (see the module notes)."""
    return max(1, math.ceil(n_endpoints / oversubscription - 1e-9))


def _top_tier(topo: Topology) -> str:
    tiers = [t for t, n in topo.switches_by_tier.items() if n]
    if not tiers:
        raise InfeasibleDesignError(
            "fabric.topology", f"a {topo.family} partition has no switch tier to uplink"
        )
    return tiers[-1]


def _top_ports(topo: Topology, tier: str) -> int:
    """Ports the builder's internal cables take on the switches of ``tier`` (``D``)."""
    return sum(g.n_ports for lc in topo.links for g in lc.port_groups if g.tier == tier)


def _build_partition(name: str, family: str, req: TopologyRequest | None) -> Topology:
    from fabric_model.topology import build_topology_from_request

    key = f"hybrid.{name.lower()}_topology"
    if req is None:
        raise InfeasibleDesignError(key, "the hybrid request has no partition request")
    if family not in HYBRID_FAMILIES:
        raise InfeasibleDesignError(
            key, f"{family} cannot join a shared tier; allowed: {', '.join(HYBRID_FAMILIES)}"
        )
    try:
        return build_topology_from_request(family, req)
    except FabricModelError as exc:
        raise InfeasibleDesignError(
            key, f"partition {name} ({req.n_gpus:,} GPUs of {family}) cannot be built: {exc}"
        ) from None


def _prefixed(lc: LinkClass, prefix: str) -> LinkClass:
    return dataclasses.replace(
        lc,
        name=f"{prefix} {lc.name}",
        ends=tuple(e if e == "nic" else f"{prefix} {e}" for e in lc.ends),  # type: ignore[arg-type]
        port_groups=tuple(
            PortGroup(f"{prefix} {g.tier}", g.ports_per_switch, g.n_switches)
            for g in lc.port_groups
        ),
    )


def _core_groups(counts: np.ndarray) -> tuple[PortGroup, ...]:
    """Port groups of the shared cores from each core's cable count."""
    values, n = np.unique(counts[counts > 0], return_counts=True)
    return tuple(PortGroup("shared core", int(v), int(k)) for v, k in zip(values, n, strict=True))


def build_hybrid(req: TopologyRequest) -> Topology:
    """Build the hybrid of ``req`` (a :class:`HybridRequest`): partitions and shared tier.

    Raises
    ------
    InfeasibleDesignError
        On ``hybrid.a_topology`` / ``hybrid.b_topology`` for a family that cannot join a
        shared tier or a partition its builder refuses (its message follows).
    """
    if not isinstance(req, HybridRequest):
        raise InfeasibleDesignError(
            "fabric.topology", "hybrid needs the hybrid.* keys (build it from a scenario)"
        )
    topo_a = _build_partition("A", req.a_family, req.a)
    topo_b = _build_partition("B", req.b_family, req.b)
    s = req.shared_oversubscription
    tops = []
    for topo in (topo_a, topo_b):
        tier = _top_tier(topo)
        n_top = int(topo.switches_by_tier[tier])
        n_up = shared_uplinks(topo.n_endpoints, s)
        d = _top_ports(topo, tier)
        n_built = max(n_top, math.ceil((d + n_up) / topo.request.radix))
        tops.append((tier, n_top, n_up, n_built))
    (tier_a, top_a, n_up_a, built_a), (tier_b, top_b, n_up_b, built_b) = tops
    n_cores = math.ceil((n_up_a + n_up_b) / req.core_radix)
    core_of = np.arange(n_up_a + n_up_b) % n_cores
    cables_a = sum(lc.n_links for lc in topo_a.links)
    cables_b = sum(lc.n_links for lc in topo_b.links)
    graph_tier = {"leaf": 1, "spine": 2, "core": 3}
    part_a = Partition(
        "A",
        topo_a,
        0,
        topo_b.n_endpoints,
        0,
        tier_a,
        graph_tier.get(tier_a, len(topo_a.switches_by_tier)),
        top_a,
        built_a,
        n_up_a,
        cables_a + cables_b,
    )
    part_b = Partition(
        "B",
        topo_b,
        topo_a.n_endpoints,
        0,  # set below: B's switches follow all of A's nodes
        2 * cables_a,
        tier_b,
        graph_tier.get(tier_b, len(topo_b.switches_by_tier)),
        top_b,
        built_b,
        n_up_b,
        cables_a + cables_b + n_up_a,
    )
    n_nodes_a = topo_a.n_endpoints + topo_a.n_switches
    part_b = dataclasses.replace(part_b, node_offset_switch=n_nodes_a)
    switches: dict[str, int] = {}
    for p, built in ((part_a, built_a), (part_b, built_b)):
        for t, n in p.topology.switches_by_tier.items():
            switches[f"{p.name} {t}"] = built if t == p.top_tier else int(n)
    switches["shared core"] = n_cores
    shared_m = req.spine_core_m
    link_a = LinkClass(
        f"A {tier_a}-shared",
        n_up_a,
        req.link_gbps,
        shared_m,
        (f"A {tier_a}", "shared core"),
        (
            PortGroup(f"A {tier_a}", math.ceil(n_up_a / built_a), built_a),
            *_core_groups(np.bincount(core_of[:n_up_a], minlength=n_cores)),
        ),
    )
    link_b = LinkClass(
        f"B {tier_b}-shared",
        n_up_b,
        req.link_gbps,
        shared_m,
        (f"B {tier_b}", "shared core"),
        (
            PortGroup(f"B {tier_b}", math.ceil(n_up_b / built_b), built_b),
            *_core_groups(np.bincount(core_of[n_up_a:], minlength=n_cores)),
        ),
    )
    links = (
        *(_prefixed(lc, "A") for lc in topo_a.links),
        *(_prefixed(lc, "B") for lc in topo_b.links),
        link_a,
        link_b,
    )
    # hops over ordered GPU pairs in different NVLink domains
    n_a, n_b = topo_a.n_gpus, topo_b.n_gpus
    dom = req.nvlink_domain
    pairs: dict[int, float] = {}
    for topo, n in ((topo_a, n_a), (topo_b, n_b)):
        inside = float(n) * (n - min(dom, n))
        for h, f in topo.hop_histogram.items():
            pairs[h] = pairs.get(h, 0.0) + f * inside
    cross_hops = part_a.depth + 1 + part_b.depth
    pairs[cross_hops] = pairs.get(cross_hops, 0.0) + 2.0 * n_a * n_b
    hist, hmax, hmean = hop_histogram(pairs)
    link_GBps = gbps_to_GBps(req.link_gbps)
    bisection = min(min(n_up_a, n_up_b) * link_GBps, topo_a.bisection_GBps + topo_b.bisection_GBps)
    notes = [
        f"partition A: {n_a:,} GPUs, {req.a_label} ({topo_a.tiers} tiers); partition B: "
        f"{n_b:,} GPUs, {req.b_label} ({topo_b.tiers} tiers)",
        f"shared tier: {n_cores:,} core switches ({req.core_switch_key}, radix "
        f"{req.core_radix}); A's {top_a:,} {tier_a} switches give {n_up_a:,} ports up, B's "
        f"{top_b:,} {tier_b} switches {n_up_b:,} "
        f"(injection : shared uplink = {topo_a.n_endpoints / n_up_a:.2f} : 1 and "
        f"{topo_b.n_endpoints / n_up_b:.2f} : 1, hybrid.shared_oversubscription = {s:g})",
    ]
    for p, built in ((part_a, built_a), (part_b, built_b)):
        if built > p.n_top:
            notes.append(
                f"partition {p.name}: its {p.n_top:,} {p.top_tier} switches had no ports left "
                f"for the shared uplinks: {built - p.n_top:,} more {p.top_tier} switches take "
                f"the spill-over"
            )
    params: dict[str, Any] = {
        "a_family": req.a_family,
        "b_family": req.b_family,
        "a_gpus": n_a,
        "b_gpus": n_b,
        "a_label": req.a_label,
        "b_label": req.b_label,
        "n_shared_cores": n_cores,
        "a_shared_uplinks": n_up_a,
        "b_shared_uplinks": n_up_b,
        "shared_oversubscription": s,
        "cross_partition_hops": cross_hops,
    }

    topo = HybridTopology(
        family="hybrid",
        request=req,
        tiers=max(topo_a.tiers, topo_b.tiers) + 1,
        switches_by_tier=switches,
        links=links,
        max_switch_hops=hmax,
        mean_switch_hops=hmean,
        hop_histogram=hist,
        bisection_GBps=bisection,
        oversubscription=max(topo_a.oversubscription, topo_b.oversubscription),
        params=params,
        notes=(*notes, *(f"A: {n}" for n in topo_a.notes), *(f"B: {n}" for n in topo_b.notes)),
        warnings=(*(f"A: {w}" for w in topo_a.warnings), *(f"B: {w}" for w in topo_b.warnings)),
        partitions=(part_a, part_b),
        n_shared_cores=n_cores,
    )
    object.__setattr__(topo, "_graph_builder", lambda: _graph(topo, core_of))
    return topo


def _graph(topo: HybridTopology, core_of: np.ndarray) -> FabricGraph:
    """Compose the partitions' graphs and the shared uplinks (see the module notes)."""
    part_a, part_b = topo.partitions
    ga, gb = part_a.topology.graph, part_b.topology.graph
    e_a, e_b = part_a.topology.n_endpoints, part_b.topology.n_endpoints
    n_nodes = ga.n_nodes + gb.n_nodes + topo.n_shared_cores
    core0 = ga.n_nodes + gb.n_nodes
    tier = np.concatenate(
        [
            ga.node_tier[:e_a],
            gb.node_tier[:e_b],
            ga.node_tier[e_a:],
            gb.node_tier[e_b:],
            np.full(topo.n_shared_cores, topo.shared_graph_tier, dtype=np.int8),
        ]
    ).astype(np.int8)
    top_a, top_b = topo.top_nodes
    k_a = len(part_a.topology.links)
    k_b = len(part_b.topology.links)
    cab_a = np.concatenate(
        [
            np.repeat(part_a.hybrid_node(top_a), part_a.uplink_counts()),
            np.repeat(part_b.hybrid_node(top_b), part_b.uplink_counts()),
        ]
    )
    cab_b = core0 + core_of
    cab_class = np.concatenate(
        [np.full(part_a.n_uplinks, k_a + k_b), np.full(part_b.n_uplinks, k_a + k_b + 1)]
    )
    src_sh = np.empty(2 * cab_a.size, dtype=np.int64)
    dst_sh = np.empty(2 * cab_a.size, dtype=np.int64)
    src_sh[0::2], src_sh[1::2] = cab_a, cab_b
    dst_sh[0::2], dst_sh[1::2] = cab_b, cab_a
    cap_sh = np.full(src_sh.size, gbps_to_Bps(topo.request.link_gbps))
    return FabricGraph(
        n_nodes=n_nodes,
        node_tier=tier,
        link_src=np.concatenate(
            [part_a.hybrid_node(ga.link_src), part_b.hybrid_node(gb.link_src), src_sh]
        ).astype(np.int32),
        link_dst=np.concatenate(
            [part_a.hybrid_node(ga.link_dst), part_b.hybrid_node(gb.link_dst), dst_sh]
        ).astype(np.int32),
        link_capacity_Bps=np.concatenate(
            [ga.link_capacity_Bps, gb.link_capacity_Bps, cap_sh]
        ).astype(np.float64),
        link_class=np.concatenate(
            [ga.link_class, gb.link_class + k_a, np.repeat(cab_class, 2)]
        ).astype(np.int16),
        endpoint_node=np.arange(e_a + e_b, dtype=np.int32).reshape(
            topo.n_gpus, topo.request.nics_per_gpu
        ),
    )
