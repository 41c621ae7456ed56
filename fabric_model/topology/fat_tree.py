"""Folded-Clos (fat-tree) fabrics: 1, 2 or 3 switch tiers, tapered or not, rail-optimized or not.

Sizing (hardware-and-cost-facts sections 6.1-6.2; Al-Fares et al., SIGCOMM 2008):

- A leaf of radix ``k`` with leaf oversubscription ``r`` has ``down = floor(k r / (r + 1))``
  ports to NICs and ``up = ceil(down / r)`` to spines (``k/2`` and ``k/2`` when ``r = 1``).
- Rail-optimized: NIC rail ``i`` of each of ``down`` consecutive servers (a scalable unit, SU)
  goes to that SU's leaf of rail ``i``; otherwise leaves fill with consecutive NICs (ToR style).
- Every switch layer above the leaves is the fewest switches whose ports carry every cable
  from below, ``ceil(cables / ports per switch)`` (facts 6.1: ``S = ceil(N / k)`` spines for a
  partial 2-tier build). When that count does not divide a switch's uplinks, uplinks are
  striped round-robin and a pair of switches below gets ``m`` or ``m + 1`` parallel cables
  (uneven striping); the notes and ``params`` report it, with the spine count of a balanced
  build (the smallest divisor of the uplinks, as NVIDIA's DGX B300 XDR reference architecture
  picks: 18 spines for 32 leaves of 72 uplinks and 36 for 64 [S49], where 16 and 32 carry the
  same cables).
- 2 tiers: ``L`` leaves, ``S = ceil(L up / k)`` spines; leaf ``l`` uplink ``j`` goes to spine
  ``(l up + j) mod S``.
- 3 tiers: a pod is up to ``spine_down`` leaves (a spine's down ports at the spine ratio);
  pod ``p`` of ``L_p`` leaves has ``S_p = ceil(L_p up / spine_down)`` spines (``up`` for a
  full pod, fewer for the partial last pod), wired inside the pod as a 2-tier fabric. A spine
  with ``d`` leaf cables has ``ceil(d / r_spine)`` uplinks. The cores are the port minimum
  ``C = ceil(U / k)`` (``U`` = every spine uplink): each leaf uplink plane (spine ``j`` of every
  full pod) has its own cores as in the textbook tree when that costs nothing, else the fewest
  consecutive planes share a pool; a group's uplinks, numbered pod by pod, go round-robin to
  its cores, so every full pod reaches every core of every group.

The full non-blocking builds reproduce the textbook counts: ``k^2/2`` endpoints on ``3k/2``
switches (2 tiers) and ``k^3/4`` endpoints on ``5k^2/4`` switches (3 tiers; the ``(k/2)^2``
cores each take one cable from every pod).
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from fabric_model.errors import InfeasibleDesignError
from fabric_model.topology.base import (
    LinkClass,
    PortGroup,
    Topology,
    TopologyRequest,
    graph_from_cables,
    hop_histogram,
    same_group_pairs,
)
from fabric_model.units import gbps_to_GBps

__all__ = [
    "TIER_NAMES",
    "PodLayout",
    "balanced_count",
    "build_fat_tree",
    "leaf_ports",
    "max_endpoints",
    "pair_share",
    "pod_layout",
]

TIER_NAMES = ("leaf", "spine", "core")
_PLURAL = {"leaf": "leaves", "pod": "pods"}


def leaf_ports(radix: int, oversubscription: float) -> tuple[int, int]:
    """Split a switch's ports into (down, up) for a down:up bandwidth ratio.

    Parameters
    ----------
    radix
        Ports at the link speed.
    oversubscription
        Down:up ratio ``r >= 1``.

    Returns
    -------
    (down, up)
        ``down = floor(k r / (r + 1))``, ``up = ceil(down / r)``, reduced until they fit.
    """
    r = float(oversubscription)
    down = math.floor(radix * r / (r + 1.0) + 1e-9)
    up = math.ceil(down / r - 1e-9)
    while down + up > radix and down > 1:
        down -= 1
        up = math.ceil(down / r - 1e-9)
    return down, max(up, 1)


def max_endpoints(radix: int, tiers: int, r_leaf: float = 1.0, r_spine: float = 1.0) -> int:
    """Largest endpoint count a fat-tree of this radix and tiers holds.

    ``k`` (1 tier), ``k * down`` (2 tiers), ``k * down_spine * down`` (3 tiers); with
    ``r = 1`` these are k, k^2/2 and k^3/4.
    """
    down, _ = leaf_ports(radix, r_leaf)
    if tiers == 1:
        return radix
    if tiers == 2:
        return radix * down
    spine_down, _ = leaf_ports(radix, r_spine)
    return radix * spine_down * down


def balanced_count(needed: int, uplinks: int) -> int:
    """Smallest divisor of ``uplinks`` that is ``>= needed`` (equal parallel links per pair).

    This is the switch count of a balanced build (every pair of tiers joined by the same
    number of parallel cables), reported next to the minimal count the builder uses.
    """
    for n in range(max(1, needed), uplinks + 1):
        if uplinks % n == 0:
            return n
    return needed


def pair_share(cables: int, n_switches: int) -> float:
    """Share of ``cables`` uplinks that two switches striped round-robin are sure to share.

    Parameters
    ----------
    cables
        Uplinks of each of the two lower switches (both the same).
    n_switches
        Upper switches the uplinks are striped over, ``<= cables``.

    Returns
    -------
    float
        ``(m S + max(0, 2e - S)) / cables`` with ``m = cables // S`` and ``e = cables mod S``:
        each lower switch has ``m + 1`` cables to ``e`` upper switches and ``m`` to the rest,
        so two of them have at least ``m`` common cables per upper switch plus the overlap of
        their two ``e``-sets. It bounds the traffic between the two (max-flow over the upper
        switches is the sum of the per-switch minima); 1.0 for balanced striping.
    """
    if cables <= 0 or n_switches <= 0:
        return 1.0
    m, e = divmod(cables, n_switches)
    return (m * n_switches + max(0, 2 * e - n_switches)) / cables


def _endpoint_leaf_keys(req: TopologyRequest, down: int) -> np.ndarray:
    """Raw leaf key of every endpoint (not yet compacted)."""
    e = np.arange(req.n_endpoints, dtype=np.int64)
    if not req.rail_optimized:
        return e // down
    gpu, nic = np.divmod(e, req.nics_per_gpu)
    node, local = np.divmod(gpu, req.gpus_per_node)
    rail = local * req.nics_per_gpu + nic
    result: np.ndarray = (node // down) * req.rails + rail
    return result


def _groups(tier: str, ports_per_switch: np.ndarray | list[int]) -> tuple[PortGroup, ...]:
    counts = Counter(int(p) for p in np.asarray(ports_per_switch).ravel() if p > 0)
    return tuple(PortGroup(tier, p, n) for p, n in sorted(counts.items(), reverse=True))


def _round_robin_groups(tier: str, n_items: int, n_bins: int) -> tuple[PortGroup, ...]:
    q, rem = divmod(n_items, n_bins)
    groups = []
    if rem:
        groups.append(PortGroup(tier, q + 1, rem))
    if q:
        groups.append(PortGroup(tier, q, n_bins - rem))
    return tuple(groups)


@dataclass(frozen=True, eq=False)
class PodLayout:
    """Pods, spines, core groups and cores of a 3-tier fat-tree, as the builder wires them.

    Spines are numbered pod by pod; spine-core cables (index ``c`` within that class) spine by
    spine, so cable ``c`` is uplink ``c - spine_first_uplink[s]`` of its spine ``s``. Inside pod
    ``p``, uplink ``j`` of the pod's leaf ``l`` (local index) goes to the pod's spine
    ``(l up + j) mod spines_in_pod[p]``; a full pod's spine ``j`` thus carries plane ``j``.
    Planes are grouped ``planes_per_group`` at a time; a core group's cables are numbered in
    cable order (``position`` within the group, pod by pod) and go round-robin to its cores.

    Attributes
    ----------
    leaves_in_pod, spines_in_pod : int64 arrays, shape (n_pods,)
        Leaves and spines per pod (all pods full but the last).
    pod_first_spine, pod_first_uplink, pod_uplinks : int64 arrays, shape (n_pods,)
        First spine, first spine-core cable and spine-core cables of each pod.
    spine_pod, spine_down, spine_up, spine_first_uplink : int64 arrays, shape (n_spines,)
        Pod, leaf cables, core cables and first spine-core cable of each spine.
    plane_uplinks : int64 array, shape (up,)
        Spine-core cables of each leaf uplink plane.
    planes_per_group : int
        Leaf uplink planes whose spines share one pool of cores.
    group_cores, group_first_core, group_first_cable : int64 arrays, shape (n_groups,)
        Cores of each group (``ceil(group cables / radix)``), its first core and the start
        of its cables in ``cable_by_position``.
    block_start, block_size : int64 arrays, shape (n_groups, n_pods)
        First position and number of a pod's cables in a group.
    cable_group, cable_position, cable_core : int64 arrays, shape (n_uplinks,)
        Group, position within the group and core of each spine-core cable.
    cable_by_position : int64 array, shape (n_uplinks,)
        Cable at ``group_first_cable[g] + position``.
    """

    leaves_in_pod: np.ndarray
    spines_in_pod: np.ndarray
    pod_first_spine: np.ndarray
    pod_first_uplink: np.ndarray
    pod_uplinks: np.ndarray
    spine_pod: np.ndarray
    spine_down: np.ndarray
    spine_up: np.ndarray
    spine_first_uplink: np.ndarray
    plane_uplinks: np.ndarray
    planes_per_group: int
    group_cores: np.ndarray
    group_first_core: np.ndarray
    group_first_cable: np.ndarray
    block_start: np.ndarray
    block_size: np.ndarray
    cable_group: np.ndarray
    cable_position: np.ndarray
    cable_core: np.ndarray
    cable_by_position: np.ndarray

    @property
    def n_pods(self) -> int:
        """Pods."""
        return int(self.leaves_in_pod.size)

    @property
    def n_spines(self) -> int:
        """Spines over all pods."""
        return int(self.spine_pod.size)

    @property
    def n_uplinks(self) -> int:
        """Spine-core cables."""
        return int(self.spine_up.sum())

    @property
    def n_cores(self) -> int:
        """Cores over all groups."""
        return int(self.group_cores.sum())

    def spine_of_cable(self, cable: np.ndarray) -> np.ndarray:
        """Spine that owns each spine-core cable (index within the class)."""
        out: np.ndarray = np.searchsorted(self.spine_first_uplink, cable, side="right") - 1
        return out


def pod_layout(n_leaves: int, up: int, spine_down: int, r_spine: float, radix: int) -> PodLayout:
    """Size and number the pods, spines and cores of a 3-tier fat-tree.

    Parameters
    ----------
    n_leaves
        Leaves.
    up
        Uplinks per leaf (= leaf uplink planes).
    spine_down
        Most leaf cables one spine takes (its down ports at ratio ``r_spine``); also the
        leaves of a full pod.
    r_spine
        Down:up ratio at the spines.
    radix
        Ports per switch.

    Returns
    -------
    PodLayout

    Notes
    -----
    ``P = ceil(L / spine_down)`` pods; ``S_p = ceil(L_p up / spine_down)`` spines in pod ``p``
    (``up`` when full); spine ``y`` of the pod takes ``floor(L_p up / S_p)`` leaf cables, one
    more for ``y < (L_p up) mod S_p``, and ``ceil(d / r_spine)`` uplinks (uplink ``t`` of a
    spine with ``d`` leaf cables belongs to the plane of its leaf cable ``floor(t d / u)``).
    The cores are the port minimum ``C = ceil(U / k)`` for ``U`` spine uplinks. As in a
    textbook fat-tree (Al-Fares et al. 2008) each plane's spines have their own cores when
    that costs nothing (``sum over planes of ceil(U_plane / k) = C``); otherwise the fewest
    consecutive planes per group that reach ``C`` share a pool of cores.
    """
    n_pods = -(-n_leaves // spine_down)
    leaves = np.full(n_pods, spine_down, dtype=np.int64)
    leaves[-1] = n_leaves - spine_down * (n_pods - 1)
    cables = leaves * up
    spines = -(-cables // spine_down)
    first_spine = np.cumsum(spines) - spines
    spine_pod = np.repeat(np.arange(n_pods, dtype=np.int64), spines)
    local = np.arange(spine_pod.size, dtype=np.int64) - first_spine[spine_pod]
    q, rem = np.divmod(cables[spine_pod], spines[spine_pod])
    spine_down_cables = q + (local < rem)
    spine_up = np.ceil(spine_down_cables / float(r_spine) - 1e-9).astype(np.int64)
    first_uplink = np.cumsum(spine_up) - spine_up
    pod_uplinks = np.bincount(spine_pod, weights=spine_up, minlength=n_pods).astype(np.int64)
    pod_first_uplink = np.cumsum(pod_uplinks) - pod_uplinks

    # plane of every spine uplink, through the leaf cables of its spine sorted by plane
    leaf = np.repeat(np.arange(n_leaves, dtype=np.int64), up)
    plane = np.tile(np.arange(up, dtype=np.int64), n_leaves)
    pod = leaf // spine_down
    ls_spine = first_spine[pod] + ((leaf - pod * spine_down) * up + plane) % spines[pod]
    plane_sorted = plane[np.lexsort((leaf, plane, ls_spine))]
    n_up = int(spine_up.sum())
    cable_spine = np.repeat(np.arange(spine_pod.size, dtype=np.int64), spine_up)
    t = np.arange(n_up, dtype=np.int64) - first_uplink[cable_spine]
    first_down = np.cumsum(spine_down_cables) - spine_down_cables
    down_of_up = (
        first_down[cable_spine] + t * spine_down_cables[cable_spine] // spine_up[cable_spine]
    )
    cable_plane = plane_sorted[down_of_up]

    per_plane = np.bincount(cable_plane, minlength=up)
    fewest = -(-n_up // radix)
    per_group = 1
    for per_group in range(1, up + 1):
        sums = np.add.reduceat(per_plane, np.arange(0, up, per_group))
        if int((-(-sums // radix)).sum()) <= fewest:
            break
    group_cables = np.add.reduceat(per_plane, np.arange(0, up, per_group)).astype(np.int64)
    group_cores = -(-group_cables // radix)  # a plane without uplinks gets no core
    n_groups = group_cables.size
    cable_group = cable_plane // per_group
    by_position = np.argsort(cable_group, kind="stable").astype(np.int64)
    group_first_cable = np.cumsum(group_cables) - group_cables
    position = np.empty(n_up, dtype=np.int64)
    position[by_position] = (
        np.arange(n_up, dtype=np.int64) - group_first_cable[cable_group[by_position]]
    )
    group_first_core = np.cumsum(group_cores) - group_cores
    cable_core = group_first_core[cable_group] + position % group_cores[cable_group]
    block_size = np.bincount(
        cable_group * n_pods + spine_pod[cable_spine], minlength=n_groups * n_pods
    ).reshape(n_groups, n_pods)
    block_start = np.cumsum(block_size, axis=1) - block_size
    return PodLayout(
        leaves_in_pod=leaves,
        spines_in_pod=spines,
        pod_first_spine=first_spine,
        pod_first_uplink=pod_first_uplink,
        pod_uplinks=pod_uplinks,
        spine_pod=spine_pod,
        spine_down=spine_down_cables,
        spine_up=spine_up,
        spine_first_uplink=first_uplink,
        plane_uplinks=per_plane.astype(np.int64),
        planes_per_group=per_group,
        group_cores=group_cores,
        group_first_core=group_first_core,
        group_first_cable=group_first_cable,
        block_start=block_start,
        block_size=block_size,
        cable_group=cable_group,
        cable_position=position,
        cable_core=cable_core,
        cable_by_position=by_position,
    )


def build_fat_tree(req: TopologyRequest) -> Topology:
    """Size a fat-tree for ``req`` and return it with exact counts.

    A forced ``fabric.tiers`` above the fewest tiers that fit is built as asked, with a
    warning that names the smaller build.

    Raises
    ------
    InfeasibleDesignError
        If the endpoints do not fit in the requested (or any, for ``auto``) tier count.
    """
    k = int(req.radix)
    if k < 2:
        raise InfeasibleDesignError(
            "fabric.switch", f"a fat-tree needs switches of radix >= 2, got {k}"
        )
    n_e = req.n_endpoints
    down, up = leaf_ports(k, req.oversubscription)
    spine_down, _ = leaf_ports(k, req.spine_oversubscription)

    leaf_key = _endpoint_leaf_keys(req, down)
    _, leaf_of_e = np.unique(leaf_key, return_inverse=True)
    leaf_of_e = leaf_of_e.astype(np.int64)
    n_leaves = int(leaf_of_e.max()) + 1

    def fits(t: int) -> bool:
        if t == 1:
            return n_e <= k
        if t == 2:
            return n_leaves <= k
        # every core takes a cable from every full pod: at most k pods
        return -(-n_leaves // spine_down) <= k

    fewest = next((t for t in (1, 2, 3) if fits(t)), 0)
    if req.tiers == "auto":
        tiers = fewest
        if not tiers:
            raise InfeasibleDesignError("cluster.n_gpus", _too_big(req, 3, k, down, up))
    else:
        tiers = int(req.tiers)
        if not fits(tiers):
            raise InfeasibleDesignError("fabric.tiers", _too_big(req, tiers, k, down, up))

    builder = {1: _one_tier, 2: _two_tier, 3: _three_tier}
    topo = builder[tiers](req, k, down, up, spine_down, leaf_of_e, n_leaves)
    if fewest and tiers > fewest:
        smaller = builder[fewest](req, k, down, up, spine_down, leaf_of_e, n_leaves)
        topo = dataclasses.replace(topo, warnings=(_forced_tiers_warning(topo, smaller),))
    return topo


def _too_big(req: TopologyRequest, tiers: int, k: int, down: int, up: int) -> str:
    cap = max_endpoints(k, tiers, req.oversubscription, req.spine_oversubscription)
    plural = "tier" if tiers == 1 else "tiers"
    return (
        f"a fat-tree of {tiers} {plural} of radix-{k} switches ({down} down / {up} up per leaf) "
        f"holds at most {cap:,} NIC ports; this design needs {req.n_endpoints:,} "
        f"({req.n_gpus:,} GPUs x {req.nics_per_gpu} NICs). Allowed: cluster.n_gpus x "
        f"cluster.nics_per_gpu <= {cap:,}, or more tiers, a higher-radix switch "
        f"(fabric.switch / fabric.link_gbps), more fabric.oversubscription, or "
        f"fabric.topology = dragonfly-plus"
    )


def _forced_tiers_warning(topo: Topology, smaller: Topology) -> str:
    """Say what a forced tier count costs over the fewest tiers that fit."""

    def tiers_text(t: Topology) -> str:
        return ", ".join(f"{n:,} {tier}" for tier, n in t.switches_by_tier.items())

    plural = "tier" if smaller.tiers == 1 else "tiers"
    text = (
        f"fabric.tiers = {topo.tiers} is more than these {topo.n_endpoints:,} NIC ports need: "
        f"{smaller.tiers} {plural} hold them on {smaller.n_switches:,} switches "
        f"({tiers_text(smaller)}); built as asked with {topo.n_switches:,} "
        f"({tiers_text(topo)})"
    )
    top = TIER_NAMES[topo.tiers - 1]
    if topo.tiers == 3 and int(topo.params["n_pods"]) == 1:
        text += (
            f"; all {int(topo.params['n_leaves']):,} leaves are in one pod, so the "
            f"{topo.switches_by_tier[top]:,} {top} switches carry no traffic"
        )
    elif topo.tiers == 2 and int(topo.params["n_leaves"]) == 1:
        text += (
            f"; there is one leaf, so the {topo.switches_by_tier[top]:,} spines carry no traffic"
        )
    return text


# --------------------------------------------------------------------------------------
# hop statistics
# --------------------------------------------------------------------------------------


def _pair_counts(
    req: TopologyRequest, leaf_of_e: np.ndarray, pod_of_leaf: np.ndarray | None, tiers: int
) -> dict[int, float]:
    """Count ordered GPU pairs in different NVLink domains by switch hops (1, 3 or 5).

    Rail-optimized: the pair (i, j) uses rail ``local(j)`` on both servers (PXN), so for each
    local index the count runs over server pairs and is weighted by the GPUs per server.
    """
    n = req.n_gpus
    domain = np.arange(n, dtype=np.int64) // req.nvlink_domain
    dom_sizes = np.bincount(domain).astype(np.float64)
    total = float(n) * n - float(dom_sizes @ dom_sizes)
    if total <= 0:
        return {}
    if tiers == 1:
        return {1: total}
    nics, gpn = req.nics_per_gpu, req.gpus_per_node
    if req.rail_optimized and n >= gpn:
        node = np.arange(n // gpn, dtype=np.int64)
        node_dom = node * gpn // req.nvlink_domain
        passes = [
            (leaf_of_e[(node * gpn + loc) * nics], node_dom, float(gpn)) for loc in range(gpn)
        ]
    else:
        passes = [(leaf_of_e[np.arange(n, dtype=np.int64) * nics], domain, 1.0)]
    same_leaf = same_pod = 0.0
    for leaf, dom, weight in passes:
        same_leaf += weight * _pairs_not_same_domain(leaf, dom)
        if pod_of_leaf is not None:
            same_pod += weight * _pairs_not_same_domain(pod_of_leaf[leaf], dom)
    if tiers == 2:
        return {1: same_leaf, 3: total - same_leaf}
    return {1: same_leaf, 3: same_pod - same_leaf, 5: total - same_pod}


def _pairs_not_same_domain(keys: np.ndarray, dom: np.ndarray) -> float:
    """Ordered pairs sharing ``keys`` but not ``dom``."""
    both = np.unique(keys * (int(dom.max()) + 1) + dom, return_inverse=True)[1]
    return same_group_pairs(keys, keys) - same_group_pairs(both, both)


# --------------------------------------------------------------------------------------
# builders per tier count
# --------------------------------------------------------------------------------------


def _nic_leaf_class(req: TopologyRequest, leaf_of_e: np.ndarray, n_leaves: int) -> LinkClass:
    ports = np.bincount(leaf_of_e, minlength=n_leaves)
    return LinkClass(
        "nic-leaf",
        req.n_endpoints,
        req.link_gbps,
        req.nic_leaf_m,
        ("nic", "leaf"),
        _groups("leaf", ports),
    )


def _one_tier(
    req: TopologyRequest,
    k: int,
    down: int,
    up: int,
    spine_down: int,
    leaf_of_e: np.ndarray,
    n_leaves: int,
) -> Topology:
    n_e = req.n_endpoints
    links = (_nic_leaf_class(req, leaf_of_e, 1),)
    hist, hmax, hmean = hop_histogram(_pair_counts(req, leaf_of_e, None, 1))

    def graph():  # type: ignore[no-untyped-def]
        a = np.arange(n_e, dtype=np.int64)
        tier = np.concatenate([np.zeros(n_e), [1]])
        return graph_from_cables(
            n_e + 1,
            tier,
            a,
            np.full(n_e, n_e),
            np.zeros(n_e),
            req.link_gbps,
            req.n_gpus,
            req.nics_per_gpu,
        )

    return Topology(
        family="fat-tree",
        request=req,
        tiers=1,
        switches_by_tier={"leaf": 1},
        links=links,
        max_switch_hops=hmax,
        mean_switch_hops=hmean,
        hop_histogram=hist,
        bisection_GBps=n_e / 2 * gbps_to_GBps(req.link_gbps),
        oversubscription=1.0,
        params={
            "radix": k,
            "down_per_leaf": n_e,
            "up_per_leaf": 0,
            "n_leaves": 1,
            "switch_key": req.switch_key,
        },
        notes=(f"all {n_e:,} NIC ports fit on one radix-{k} switch",),
        _graph_builder=graph,
    )


def _striping_note(lower: str, upper: str, cables: int, n_upper: int, balanced: int) -> str:
    """Describe round-robin striping of ``cables`` uplinks over ``n_upper`` switches."""
    m, e = divmod(cables, n_upper)
    return (
        f"uneven striping: each {lower}'s {cables} uplinks give {m + 1} cables to {e} of the "
        f"{n_upper:,} {upper} switches and {m} to the rest; two {_PLURAL[lower]} are sure to share "
        f"{pair_share(cables, n_upper):.1%} of that bandwidth (a balanced build needs "
        f"{balanced:,} {upper} switches)"
    )


def _two_tier(
    req: TopologyRequest,
    k: int,
    down: int,
    up: int,
    spine_down: int,
    leaf_of_e: np.ndarray,
    n_leaves: int,
) -> Topology:
    n_e, rate = req.n_endpoints, gbps_to_GBps(req.link_gbps)
    n_up = n_leaves * up
    n_spines = -(-n_up // k)  # facts 6.1: S = ceil(N / k) for a non-blocking leaf
    balanced = balanced_count(n_spines, up)
    links = (
        _nic_leaf_class(req, leaf_of_e, n_leaves),
        LinkClass(
            "leaf-spine",
            n_up,
            req.link_gbps,
            req.leaf_spine_m,
            ("leaf", "spine"),
            (PortGroup("leaf", up, n_leaves), *_round_robin_groups("spine", n_up, n_spines)),
        ),
    )
    hist, hmax, hmean = hop_histogram(_pair_counts(req, leaf_of_e, None, 2))
    bisection = min(n_e, n_up) / 2 * rate

    def graph():  # type: ignore[no-untyped-def]
        g = np.arange(n_up, dtype=np.int64)
        a = np.concatenate([np.arange(n_e), n_e + g // up])
        b = np.concatenate([n_e + leaf_of_e, n_e + n_leaves + g % n_spines])
        cls = np.concatenate([np.zeros(n_e), np.ones(n_up)])
        tier = np.concatenate([np.zeros(n_e), np.ones(n_leaves), np.full(n_spines, 2)])
        return graph_from_cables(
            n_e + n_leaves + n_spines, tier, a, b, cls, req.link_gbps, req.n_gpus, req.nics_per_gpu
        )

    notes = list(_partial_notes(req, down, n_leaves))
    if up % n_spines and n_leaves > 1:
        notes.append(_striping_note("leaf", "spine", up, n_spines, balanced))
    return Topology(
        family="fat-tree",
        request=req,
        tiers=2,
        switches_by_tier={"leaf": n_leaves, "spine": n_spines},
        links=links,
        max_switch_hops=hmax,
        mean_switch_hops=hmean,
        hop_histogram=hist,
        bisection_GBps=bisection,
        oversubscription=down / up,
        params={
            "radix": k,
            "down_per_leaf": down,
            "up_per_leaf": up,
            "n_leaves": n_leaves,
            "n_spines": n_spines,
            "balanced_spines": balanced,
            "leaf_pair_share": pair_share(up, n_spines),
            "switch_key": req.switch_key,
            "rail_optimized": req.rail_optimized,
        },
        notes=tuple(notes),
        _graph_builder=graph,
    )


def _three_tier(
    req: TopologyRequest,
    k: int,
    down: int,
    up: int,
    spine_down: int,
    leaf_of_e: np.ndarray,
    n_leaves: int,
) -> Topology:
    n_e, rate = req.n_endpoints, gbps_to_GBps(req.link_gbps)
    pods = pod_layout(n_leaves, up, spine_down, req.spine_oversubscription, k)
    n_pods, n_spines, n_cores = pods.n_pods, pods.n_spines, pods.n_cores
    pod_of_leaf = np.arange(n_leaves, dtype=np.int64) // spine_down
    n_leaf_spine, n_spine_core = n_leaves * up, pods.n_uplinks
    links = (
        _nic_leaf_class(req, leaf_of_e, n_leaves),
        LinkClass(
            "leaf-spine",
            n_leaf_spine,
            req.link_gbps,
            req.leaf_spine_m,
            ("leaf", "spine"),
            (PortGroup("leaf", up, n_leaves), *_groups("spine", pods.spine_down)),
        ),
        LinkClass(
            "spine-core",
            n_spine_core,
            req.link_gbps,
            req.spine_core_m,
            ("spine", "core"),
            (
                *_groups("spine", pods.spine_up),
                *_groups("core", np.bincount(pods.cable_core, minlength=n_cores)),
            ),
        ),
    )
    hist, hmax, hmean = hop_histogram(_pair_counts(req, leaf_of_e, pod_of_leaf, 3))
    cut = min(n_e, n_leaf_spine, n_spine_core if n_pods > 1 else n_leaf_spine)
    spine_ratio = float(np.max(pods.spine_down / pods.spine_up))

    def graph():  # type: ignore[no-untyped-def]
        base_sp, base_co = n_e + n_leaves, n_e + n_leaves + n_spines
        leaf_rep = np.repeat(np.arange(n_leaves, dtype=np.int64), up)
        j = np.tile(np.arange(up, dtype=np.int64), n_leaves)
        pod = pod_of_leaf[leaf_rep]
        local = leaf_rep - pod * spine_down
        spine = pods.pod_first_spine[pod] + (local * up + j) % pods.spines_in_pod[pod]
        ls_a, ls_b = n_e + leaf_rep, base_sp + spine
        sc_a = base_sp + np.repeat(np.arange(n_spines, dtype=np.int64), pods.spine_up)
        sc_b = base_co + pods.cable_core
        a = np.concatenate([np.arange(n_e), ls_a, sc_a])
        b = np.concatenate([n_e + leaf_of_e, ls_b, sc_b])
        cls = np.concatenate([np.zeros(n_e), np.ones(ls_a.size), np.full(sc_a.size, 2)])
        tier = np.concatenate(
            [np.zeros(n_e), np.ones(n_leaves), np.full(n_spines, 2), np.full(n_cores, 3)]
        )
        return graph_from_cables(
            n_e + n_leaves + n_spines + n_cores,
            tier,
            a,
            b,
            cls,
            req.link_gbps,
            req.n_gpus,
            req.nics_per_gpu,
        )

    notes = list(_partial_notes(req, down, n_leaves))
    last_leaves, last_spines = int(pods.leaves_in_pod[-1]), int(pods.spines_in_pod[-1])
    pod_text = (
        f"{n_pods:,} pods of {spine_down} leaves and {up} spines"
        if n_pods > 1
        else f"one pod of {spine_down} leaves and {up} spines"
    )
    if last_leaves < spine_down:
        pod_text = (
            f"{n_pods - 1:,} pods of {spine_down} leaves and {up} spines, and a partial pod of "
            f"{last_leaves} leaves and {last_spines} spines"
            if n_pods > 1
            else f"one partial pod of {last_leaves} leaves and {last_spines} spines"
        )
    n_groups = int(pods.group_cores.size)
    group_text = (
        f"{up} planes of {int(pods.group_cores[0]):,} cores"
        if pods.planes_per_group == 1
        and n_groups > 1
        and np.all(pods.group_cores == pods.group_cores[0])
        else f"{n_groups:,} groups of {pods.planes_per_group} planes sharing their cores"
        if n_groups > 1
        else "one pool of cores for all planes"
    )
    notes.append(
        f"{pod_text}; {n_cores:,} cores = ceil({n_spine_core:,} spine uplinks / {k} ports), "
        f"{group_text}"
    )
    if last_spines < up and up % last_spines and last_leaves > 1:
        notes.append(
            "partial pod: "
            + _striping_note("leaf", "spine", up, last_spines, balanced_count(last_spines, up))
        )
    # a full pod's cables into the first group against that group's cores
    full_block, group_cores = int(pods.block_size[0, 0]), int(pods.group_cores[0])
    core_pair_share = pair_share(full_block, group_cores)
    spine_up_full = int(pods.spine_up[0])
    balanced_cores = up * balanced_count(-(-int(pods.plane_uplinks.max()) // k), spine_up_full)
    if n_pods > 1 and full_block % group_cores:
        m, e = divmod(full_block, group_cores)
        notes.append(
            f"uneven striping: a full pod's {full_block:,} uplinks into a group give {m + 1} "
            f"cables to {e} of its {group_cores:,} cores and {m} to the rest; two pods are sure "
            f"to share {core_pair_share:.1%} of that bandwidth (a balanced build needs "
            f"{balanced_cores:,} cores)"
        )
    return Topology(
        family="fat-tree",
        request=req,
        tiers=3,
        switches_by_tier={"leaf": n_leaves, "spine": n_spines, "core": n_cores},
        links=links,
        max_switch_hops=hmax,
        mean_switch_hops=hmean,
        hop_histogram=hist,
        bisection_GBps=cut / 2 * rate,
        oversubscription=down / up,
        params={
            "radix": k,
            "down_per_leaf": down,
            "up_per_leaf": up,
            "n_leaves": n_leaves,
            "n_pods": n_pods,
            "leaves_per_pod": spine_down,
            "spines_per_pod": up,
            "spines_last_pod": last_spines,
            "n_cores": n_cores,
            "planes_per_core_group": pods.planes_per_group,
            "balanced_cores": balanced_cores,
            "pod_pair_share": core_pair_share,
            "spine_oversubscription": spine_ratio,
            "switch_key": req.switch_key,
            "rail_optimized": req.rail_optimized,
        },
        notes=tuple(notes),
        _graph_builder=graph,
    )


def _partial_notes(req: TopologyRequest, down: int, n_leaves: int) -> tuple[str, ...]:
    used = req.n_endpoints
    free = n_leaves * down - used
    notes = []
    if req.rail_optimized:
        notes.append(
            f"rail-optimized: {req.rails} rails; a scalable unit is {down} servers "
            f"({down * req.gpus_per_node:,} GPUs) with one leaf per rail"
        )
    if free > 0:
        notes.append(f"{free:,} leaf down-ports left free for growth (partial build)")
    return tuple(notes)
