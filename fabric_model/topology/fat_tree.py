"""Folded-Clos (fat-tree) fabrics: 1 to 4 switch tiers, tapered or not, rail-optimized or not.

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

- 4 tiers (super-pods; the recursive folded Clos of Leiserson, IEEE Trans. Comput. 1985,
  with Al-Fares et al.'s pod construction applied one level up): the pods and spines are
  those of 3 tiers; a core (tier 3) splits its ports 1:1, ``k/2`` down and ``k/2`` up, so a
  super-pod is ``k/2`` pods. Cable ``i`` of a pod's spine-core cables (numbered spine by
  spine) goes to core ``i`` of its super-pod (a full pod's ``Q = up x spine uplinks`` cables
  reach its super-pod's ``Q`` cores once each; a partial last super-pod of ``P_m`` pods puts
  ``floor((k/2) / P_m)`` positions on each core); a core with ``d`` pod cables has ``d``
  uplinks. The super-spines (tier 4) are the port minimum ``T = ceil(U4 / k)`` (``U4`` =
  every core uplink); core uplink ``u`` (numbered core by core over all super-pods) goes to
  super-spine ``u mod T``, so no super-spine takes more than ``k`` cables and every full
  super-pod (``>= T`` consecutive uplinks) reaches every super-spine, with
  ``k / n_super_pods`` parallel cables when that divides. At most ``k`` super-pods.

The full non-blocking builds reproduce the textbook counts, ``2 (k/2)^t`` endpoints on
``(2t - 1) (k/2)^(t-1)`` switches for ``t`` tiers (tiers 1 to ``t - 1`` have ``2 (k/2)^(t-1)``
switches each, the top tier ``(k/2)^(t-1)``): ``k^2/2`` endpoints on ``3k/2`` switches
(2 tiers), ``k^3/4`` on ``5k^2/4`` (3 tiers; the ``(k/2)^2`` cores each take one cable from
every pod) and ``k^4/8`` on ``7k^3/8`` (4 tiers; k = 64: 2,097,152 endpoints on 229,376
switches, 65,536 per lower tier and 32,768 super-spines).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from fabric_model.caching import lru_cached
from fabric_model.errors import InfeasibleDesignError
from fabric_model.topology.base import (
    LinkClass,
    PortGroup,
    Topology,
    TopologyRequest,
    graph_from_cables,
    hop_histogram,
    pairs_not_same_domain_rows,
    same_group_pairs,
)
from fabric_model.units import gbps_to_GBps

__all__ = [
    "MAX_TIERS",
    "TIER_NAMES",
    "PodLayout",
    "balanced_count",
    "build_fat_tree",
    "clear_layout_cache",
    "leaf_ports",
    "max_endpoints",
    "pair_share",
    "pod_layout",
]

TIER_NAMES = ("leaf", "spine", "core", "super")

#: Most switch tiers a fat-tree is built with.
MAX_TIERS = 4
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

    ``k`` (1 tier), ``k * down`` (2 tiers), ``k * down_spine * down`` (3 tiers),
    ``k * (k // 2) * down_spine * down`` (4 tiers: ``k`` super-pods of ``k // 2`` pods); with
    ``r = 1`` these are k, k^2/2, k^3/4 and k^4/8 = ``2 (k/2)^t``.
    """
    down, _ = leaf_ports(radix, r_leaf)
    if tiers == 1:
        return radix
    if tiers == 2:
        return radix * down
    spine_down, _ = leaf_ports(radix, r_spine)
    if tiers == 3:
        return radix * spine_down * down
    return radix * (radix // 2) * spine_down * down


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
    """Switches of ``tier`` grouped by port count, most ports first (zero-port ones dropped)."""
    ports = np.asarray(ports_per_switch).ravel()
    values, counts_ = np.unique(ports[ports > 0], return_counts=True)
    return tuple(
        PortGroup(tier, int(p), int(n)) for p, n in zip(values[::-1], counts_[::-1], strict=True)
    )


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
    """Size and number the pods, spines and cores of a 3-tier fat-tree (see :func:`_pod_layout`).

    Kept for the last few shapes, read-only: the builder and the router of one fabric (and
    the rails of a rail-only fabric, which share one shape) ask for the same layout.
    """
    return _pod_layout_cached(int(n_leaves), int(up), int(spine_down), float(r_spine), int(radix))


def clear_layout_cache() -> None:
    """Forget the kept pod layouts (a cold start: ``training.fabric.clear_caches``)."""
    _pod_layout_cached.cache_clear()


@lru_cached("topology.fat_tree.pod_layout", 16, key="(n_leaves, up, spine_down, r_spine, radix)")
def _pod_layout_cached(
    n_leaves: int, up: int, spine_down: int, r_spine: float, radix: int
) -> PodLayout:
    layout = _pod_layout(n_leaves, up, spine_down, r_spine, radix)
    for f in dataclasses.fields(layout):
        value = getattr(layout, f.name)
        if isinstance(value, np.ndarray):
            value.flags.writeable = False  # shared by every caller of this shape
    return layout


def _pod_layout(n_leaves: int, up: int, spine_down: int, r_spine: float, radix: int) -> PodLayout:
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
        n_pods = -(-n_leaves // spine_down)
        if t == 3:
            # every core takes a cable from every full pod: at most k pods
            return n_pods <= k
        # every super-spine takes a cable from every full super-pod of k // 2 pods
        return k >= 4 and -(-n_pods // (k // 2)) <= k

    fewest = next((t for t in range(1, MAX_TIERS + 1) if fits(t)), 0)
    if req.tiers == "auto":
        tiers = fewest
        if not tiers:
            raise InfeasibleDesignError("cluster.n_gpus", _too_big(req, MAX_TIERS, k, down, up))
    else:
        tiers = int(req.tiers)
        if not fits(tiers):
            raise InfeasibleDesignError("fabric.tiers", _too_big(req, tiers, k, down, up))

    builder = {1: _one_tier, 2: _two_tier, 3: _three_tier, 4: _four_tier}
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
    if topo.tiers == 4 and int(topo.params["n_super_pods"]) == 1:
        text += (
            f"; all {int(topo.params['n_pods']):,} pods are in one super-pod, so the "
            f"{topo.switches_by_tier[top]:,} {top} switches carry no traffic"
        )
    elif topo.tiers == 3 and int(topo.params["n_pods"]) == 1:
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
    req: TopologyRequest,
    leaf_of_e: np.ndarray,
    pod_of_leaf: np.ndarray | None,
    tiers: int,
    superpod_of_leaf: np.ndarray | None = None,
) -> dict[int, float]:
    """Count ordered GPU pairs in different NVLink domains by switch hops (1, 3, 5 or 7).

    Rail-optimized: the pair (i, j) uses rail ``local(j)`` on both servers (PXN), so for each
    local index the count runs over server pairs and is weighted by the GPUs per server.
    """
    n = req.n_gpus
    domain = np.arange(n, dtype=np.int64) // req.nvlink_domain
    total = float(n) * n - same_group_pairs(domain, domain)
    if total <= 0:
        return {}
    if tiers == 1:
        return {1: total}
    nics, gpn = req.nics_per_gpu, req.gpus_per_node
    if req.rail_optimized and n >= gpn:
        node = np.arange(n // gpn, dtype=np.int64)
        dom = node * gpn // req.nvlink_domain
        # one row per local index: that rail's leaf of every server
        leaf = leaf_of_e[(node[None, :] * gpn + np.arange(gpn, dtype=np.int64)[:, None]) * nics]
        weight = float(gpn)
    else:
        leaf = leaf_of_e[np.arange(n, dtype=np.int64) * nics][None, :]
        dom, weight = domain, 1.0
    same_pod = same_sp = 0.0
    same_leaf = weight * pairs_not_same_domain_rows(leaf, dom)
    if pod_of_leaf is not None:
        same_pod = weight * pairs_not_same_domain_rows(pod_of_leaf[leaf], dom)
    if superpod_of_leaf is not None:
        same_sp = weight * pairs_not_same_domain_rows(superpod_of_leaf[leaf], dom)
    if tiers == 2:
        return {1: same_leaf, 3: total - same_leaf}
    if tiers == 3:
        return {1: same_leaf, 3: same_pod - same_leaf, 5: total - same_pod}
    return {1: same_leaf, 3: same_pod - same_leaf, 5: same_sp - same_pod, 7: total - same_sp}


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


# --------------------------------------------------------------------------------------
# 4 tiers
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class SuperPodLayout:
    """Super-pods, cores and super-spines of a 4-tier fat-tree, as the builder wires them.

    Cable ``c`` of the spine-core class (numbered spine by spine, as in :class:`PodLayout`)
    is position ``i = c - pod_first_uplink[p]`` of its pod ``p`` and goes to core
    ``sp_first_core[m] + i // sp_group[m]`` of the pod's super-pod ``m = p // pods_per_sp``.
    Core-super cable ``u`` (numbered core by core) is uplink ``j = u - sp_first_uplink[m]`` of its
    super-pod; it goes to super-spine ``u mod n_super`` (round-robin over all super-pods, as
    the 3-tier cores take a group's cables pod by pod).

    Attributes
    ----------
    pods_per_sp : int
        Pods of a full super-pod (``k // 2``).
    sp_group : int64 array, shape (n_sp,)
        Cable positions per core (1 in a full super-pod).
    sp_first_core, sp_cores, sp_first_uplink, sp_uplinks : int64 arrays, shape (n_sp,)
        First core, cores, first core-super cable and core-super cables of each super-pod.
    core_sp, core_down : int64 arrays, shape (n_cores,)
        Super-pod and pod cables (= uplinks) of each core.
    cable_core : int64 array, shape (spine-core cables,)
        Core of each spine-core cable.
    n_super : int
        Super-spines.
    """

    pods_per_sp: int
    sp_group: np.ndarray
    sp_first_core: np.ndarray
    sp_cores: np.ndarray
    sp_first_uplink: np.ndarray
    sp_uplinks: np.ndarray
    core_sp: np.ndarray
    core_down: np.ndarray
    cable_core: np.ndarray
    n_super: int

    @property
    def n_sp(self) -> int:
        """Super-pods."""
        return int(self.sp_cores.size)

    @property
    def n_cores(self) -> int:
        """Cores over all super-pods."""
        return int(self.core_sp.size)

    @property
    def n_uplinks(self) -> int:
        """Core-super cables."""
        return int(self.core_down.sum())


def superpod_layout(pods: PodLayout, radix: int) -> SuperPodLayout:
    """Group the pods of ``pods`` into super-pods of ``radix // 2`` and wire tiers 3 and 4.

    Notes
    -----
    ``M = ceil(P / (k/2))`` super-pods. Cable position ``i`` of a pod is its ``i``-th
    spine-core cable (``U_p`` of them; ``Q = up x spine uplinks`` for a full pod). A
    super-pod of ``P_m`` pods groups ``g = floor((k/2) / P_m)`` positions per core (1 for a
    full super-pod: the textbook core takes one cable from each of ``k/2`` pods; a partial
    last super-pod fills its cores instead of leaving them half empty), so it has
    ``ceil(max_p U_p / g)`` cores; core ``c`` takes positions ``c g .. c g + g - 1`` of every
    pod that has them and has as many uplinks (1:1). ``T = ceil(U4 / k)`` super-spines for
    ``U4`` core uplinks (the port minimum, as every upper tier of the 2- and 3-tier builds).
    """
    per_sp = radix // 2
    n_pods = pods.n_pods
    pod_sp = np.arange(n_pods, dtype=np.int64) // per_sp
    n_sp = int(pod_sp[-1]) + 1
    pods_in_sp = np.bincount(pod_sp, minlength=n_sp)
    sp_group = np.maximum(1, per_sp // pods_in_sp).astype(np.int64)
    sp_positions = np.zeros(n_sp, dtype=np.int64)
    np.maximum.at(sp_positions, pod_sp, pods.pod_uplinks)
    sp_cores = -(-sp_positions // sp_group)
    sp_first_core = np.cumsum(sp_cores) - sp_cores
    core_sp = np.repeat(np.arange(n_sp, dtype=np.int64), sp_cores)
    # cables into core c: over the pods of its super-pod, the positions c g .. c g + g - 1
    # that the pod has (positions < U_p)
    core_down = np.zeros(core_sp.size, dtype=np.int64)
    for m in range(n_sp):  # at most k super-pods
        u_p = pods.pod_uplinks[pod_sp == m]
        g = int(sp_group[m])
        lo = np.arange(int(sp_cores[m]), dtype=np.int64)[:, None] * g
        have = np.clip(np.minimum(u_p[None, :], lo + g) - lo, 0, None)
        core_down[sp_first_core[m] : sp_first_core[m] + sp_cores[m]] = have.sum(axis=1)
    n_up = pods.n_uplinks
    cable_pod = np.repeat(np.arange(n_pods, dtype=np.int64), pods.pod_uplinks)
    position = np.arange(n_up, dtype=np.int64) - pods.pod_first_uplink[cable_pod]
    cable_sp = pod_sp[cable_pod]
    cable_core = sp_first_core[cable_sp] + position // sp_group[cable_sp]
    sp_uplinks = np.bincount(core_sp, weights=core_down, minlength=n_sp).astype(np.int64)
    sp_first_uplink = np.cumsum(sp_uplinks) - sp_uplinks
    n_super = -(-int(sp_uplinks.sum()) // radix)
    return SuperPodLayout(
        pods_per_sp=per_sp,
        sp_group=sp_group,
        sp_first_core=sp_first_core,
        sp_cores=sp_cores,
        sp_first_uplink=sp_first_uplink,
        sp_uplinks=sp_uplinks,
        core_sp=core_sp,
        core_down=core_down,
        cable_core=cable_core,
        n_super=n_super,
    )


def _four_tier(
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
    sps = superpod_layout(pods, k)
    n_pods, n_spines = pods.n_pods, pods.n_spines
    n_sp, n_cores, n_super = sps.n_sp, sps.n_cores, sps.n_super
    pod_of_leaf = np.arange(n_leaves, dtype=np.int64) // spine_down
    sp_of_leaf = pod_of_leaf // sps.pods_per_sp
    n_ls, n_sc, n_cs = n_leaves * up, pods.n_uplinks, sps.n_uplinks
    core_super = np.arange(n_cs, dtype=np.int64)
    cs_super = core_super % n_super  # round-robin over every super-pod: <= k per super-spine
    links = (
        _nic_leaf_class(req, leaf_of_e, n_leaves),
        LinkClass(
            "leaf-spine",
            n_ls,
            req.link_gbps,
            req.leaf_spine_m,
            ("leaf", "spine"),
            (PortGroup("leaf", up, n_leaves), *_groups("spine", pods.spine_down)),
        ),
        LinkClass(
            "spine-core",
            n_sc,
            req.link_gbps,
            req.spine_core_m,
            ("spine", "core"),
            (*_groups("spine", pods.spine_up), *_groups("core", sps.core_down)),
        ),
        LinkClass(
            "core-super",
            n_cs,
            req.link_gbps,
            req.spine_core_m,  # fabric.spine_core_m: both upper classes run to the centre rows
            ("core", "super"),
            (
                *_groups("core", sps.core_down),
                *_groups("super", np.bincount(cs_super, minlength=n_super)),
            ),
        ),
    )
    hist, hmax, hmean = hop_histogram(_pair_counts(req, leaf_of_e, pod_of_leaf, 4, sp_of_leaf))
    cut = min(
        n_e,
        n_ls,
        n_sc if n_pods > 1 else n_ls,
        n_cs if n_sp > 1 else (n_sc if n_pods > 1 else n_ls),
    )
    spine_ratio = float(np.max(pods.spine_down / pods.spine_up))

    def graph():  # type: ignore[no-untyped-def]
        base_sp = n_e + n_leaves
        base_co = base_sp + n_spines
        base_su = base_co + n_cores
        leaf_rep = np.repeat(np.arange(n_leaves, dtype=np.int64), up)
        j = np.tile(np.arange(up, dtype=np.int64), n_leaves)
        pod = pod_of_leaf[leaf_rep]
        local = leaf_rep - pod * spine_down
        spine = pods.pod_first_spine[pod] + (local * up + j) % pods.spines_in_pod[pod]
        sc_a = base_sp + np.repeat(np.arange(n_spines, dtype=np.int64), pods.spine_up)
        cs_a = base_co + np.repeat(np.arange(n_cores, dtype=np.int64), sps.core_down)
        a = np.concatenate([np.arange(n_e), n_e + leaf_rep, sc_a, cs_a])
        b = np.concatenate(
            [n_e + leaf_of_e, base_sp + spine, base_co + sps.cable_core, base_su + cs_super]
        )
        cls = np.concatenate([np.zeros(n_e), np.ones(n_ls), np.full(n_sc, 2), np.full(n_cs, 3)])
        tier = np.concatenate(
            [
                np.zeros(n_e),
                np.ones(n_leaves),
                np.full(n_spines, 2),
                np.full(n_cores, 3),
                np.full(n_super, 4),
            ]
        )
        return graph_from_cables(
            base_su + n_super, tier, a, b, cls, req.link_gbps, req.n_gpus, req.nics_per_gpu
        )

    notes = list(_partial_notes(req, down, n_leaves))
    pods_in_sp = np.bincount(np.arange(n_pods) // sps.pods_per_sp, minlength=n_sp)
    full_sp = int(np.sum(pods_in_sp == sps.pods_per_sp))
    notes.append(
        f"{n_pods:,} pods of up to {spine_down} leaves and {up} spines in {n_sp:,} super-pods "
        f"of up to {sps.pods_per_sp} pods and {int(sps.sp_cores[0]):,} cores (each core "
        f"{sps.pods_per_sp} down / {sps.pods_per_sp} up); {n_super:,} super-spines = "
        f"ceil({n_cs:,} core uplinks / {k} ports)"
    )
    if int(sps.sp_group[-1]) > 1:
        notes.append(
            f"the partial last super-pod's {int(pods_in_sp[-1])} pods share "
            f"{int(sps.sp_cores[-1]):,} cores ({int(sps.sp_group[-1])} cable positions of "
            "every pod per core)"
        )
    per_sp_cables = int(sps.sp_uplinks[0])
    if n_sp > 1 and per_sp_cables % n_super:
        m, e = divmod(per_sp_cables, n_super)
        notes.append(
            f"uneven striping: a full super-pod's {per_sp_cables:,} uplinks give {m + 1} cables "
            f"to {e:,} of the {n_super:,} super-spines and {m} to the rest"
        )
    return Topology(
        family="fat-tree",
        request=req,
        tiers=4,
        switches_by_tier={"leaf": n_leaves, "spine": n_spines, "core": n_cores, "super": n_super},
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
            "spines_last_pod": int(pods.spines_in_pod[-1]),
            "n_cores": n_cores,
            "n_super_pods": n_sp,
            "full_super_pods": full_sp,
            "pods_per_super_pod": sps.pods_per_sp,
            "cores_per_super_pod": int(sps.sp_cores[0]),
            "n_super": n_super,
            "superpod_pair_share": pair_share(per_sp_cables, n_super) if n_sp > 1 else 1.0,
            "spine_oversubscription": spine_ratio,
            "switch_key": req.switch_key,
            "rail_optimized": req.rail_optimized,
        },
        notes=tuple(notes),
        _graph_builder=graph,
    )
