"""Folded-Clos (fat-tree) fabrics: 1, 2 or 3 switch tiers, oversubscribed or not, rail-optimized or not.

Sizing follows the way NVIDIA's DGX SuperPOD reference architectures size partial builds
(hardware-and-cost-facts section 6.1-6.2):

- A leaf of radix ``k`` with leaf oversubscription ``r`` has ``down = floor(k r / (r + 1))``
  ports to NICs and ``up = ceil(down / r)`` to spines (``k/2`` and ``k/2`` when ``r = 1``).
- Rail-optimized: NIC rail ``i`` of each of ``down`` consecutive servers (a scalable unit, SU)
  goes to that SU's leaf of rail ``i``; otherwise leaves fill with consecutive NICs (ToR style).
- 2 tiers: ``S`` = the smallest divisor of ``up`` that is ``>= ceil(L up / k)``, so every leaf
  has the same number of parallel links to every spine (balanced ECMP). This is how the
  DGX B300 XDR reference architecture gets 18 spines for 32 leaves of 72 uplinks (not 16)
  and 36 for 64 (not 32) [S49]; with ``up = 32`` it gives the B200 SuperPOD counts [S47].
- 3 tiers: a pod is ``down_spine`` leaves (the spine's down ports) and ``up`` spines (one per
  leaf uplink); spine uplinks (``ceil(leaves_in_pod / r_spine)`` each) go to ``up`` core
  planes of ``C`` cores, ``C`` the smallest divisor of a full spine's uplinks that is
  ``>= ceil(sum of a plane's uplinks / k)`` (balanced, as above).

The full non-blocking builds reproduce the textbook counts: ``k^2/2`` endpoints on ``3k/2``
switches (2 tiers) and ``k^3/4`` endpoints on ``5k^2/4`` switches (3 tiers; Al-Fares et al.,
SIGCOMM 2008).
"""

from __future__ import annotations

import math
from collections import Counter

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

__all__ = ["TIER_NAMES", "balanced_count", "build_fat_tree", "leaf_ports", "max_endpoints",
           "spine_uplinks"]

TIER_NAMES = ("leaf", "spine", "core")


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
    down = int(math.floor(radix * r / (r + 1.0) + 1e-9))
    up = int(math.ceil(down / r - 1e-9))
    while down + up > radix and down > 1:
        down -= 1
        up = int(math.ceil(down / r - 1e-9))
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


def balanced_count(needed: int, uplinks: int) -> int:
    """Smallest divisor of ``uplinks`` that is ``>= needed`` (equal parallel links per pair)."""
    for n in range(max(1, needed), uplinks + 1):
        if uplinks % n == 0:
            return n
    return needed


def _round_robin_groups(tier: str, n_items: int, n_bins: int, repeat: int = 1) -> tuple[PortGroup, ...]:
    q, rem = divmod(n_items, n_bins)
    groups = []
    if rem:
        groups.append(PortGroup(tier, q + 1, rem * repeat))
    if q:
        groups.append(PortGroup(tier, q, (n_bins - rem) * repeat))
    return tuple(groups)


def build_fat_tree(req: TopologyRequest) -> Topology:
    """Size a fat-tree for ``req`` and return it with exact counts.

    Raises
    ------
    InfeasibleDesignError
        If the endpoints do not fit in the requested (or any, for ``auto``) tier count.
    """
    k = int(req.radix)
    if k < 2:
        raise InfeasibleDesignError("fabric.switch", f"a fat-tree needs switches of radix >= 2, got {k}")
    n_e = req.n_endpoints
    down, up = leaf_ports(k, req.oversubscription)
    spine_down, spine_up_full = leaf_ports(k, req.spine_oversubscription)

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
        plane_up = spine_uplinks(n_leaves, spine_down, req.spine_oversubscription).sum()
        return n_pods <= k and -(-int(plane_up) // k) <= spine_up_full

    if req.tiers == "auto":
        tiers = next((t for t in (1, 2, 3) if fits(t)), 0)
        if not tiers:
            raise InfeasibleDesignError("cluster.n_gpus", _too_big(req, 3, k, down, up))
    else:
        tiers = int(req.tiers)
        if not fits(tiers):
            raise InfeasibleDesignError("fabric.tiers", _too_big(req, tiers, k, down, up))

    builder = {1: _one_tier, 2: _two_tier, 3: _three_tier}[tiers]
    return builder(req, k, down, up, spine_down, leaf_of_e, n_leaves)


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


def spine_uplinks(n_leaves: int, spine_down: int, r_spine: float) -> np.ndarray:
    """Uplinks of one spine in each pod (pods of ``spine_down`` leaves, the last partial)."""
    n_pods = -(-n_leaves // spine_down)
    leaves_in_pod = np.full(n_pods, spine_down, dtype=np.int64)
    leaves_in_pod[-1] = n_leaves - spine_down * (n_pods - 1)
    return np.ceil(leaves_in_pod / r_spine - 1e-9).astype(np.int64)


# --------------------------------------------------------------------------------------
# hop statistics
# --------------------------------------------------------------------------------------


def _pair_counts(req: TopologyRequest, leaf_of_e: np.ndarray, pod_of_leaf: np.ndarray | None,
                 tiers: int) -> dict[int, float]:
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
        passes = [(leaf_of_e[(node * gpn + loc) * nics], node_dom, float(gpn)) for loc in range(gpn)]
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
        "nic-leaf", req.n_endpoints, req.link_gbps, req.nic_leaf_m, ("nic", "leaf"),
        _groups("leaf", ports),
    )


def _one_tier(req: TopologyRequest, k: int, down: int, up: int, spine_down: int,
              leaf_of_e: np.ndarray, n_leaves: int) -> Topology:
    n_e = req.n_endpoints
    links = (
        LinkClass("nic-leaf", n_e, req.link_gbps, req.nic_leaf_m, ("nic", "leaf"),
                  (PortGroup("leaf", n_e, 1),)),
    )
    hist, hmax, hmean = hop_histogram(_pair_counts(req, leaf_of_e, None, 1))

    def graph():  # type: ignore[no-untyped-def]
        a = np.arange(n_e, dtype=np.int64)
        tier = np.concatenate([np.zeros(n_e), [1]])
        return graph_from_cables(n_e + 1, tier, a, np.full(n_e, n_e), np.zeros(n_e),
                                 req.link_gbps, req.n_gpus, req.nics_per_gpu)

    return Topology(
        family="fat-tree", request=req, tiers=1, switches_by_tier={"leaf": 1}, links=links,
        max_switch_hops=hmax, mean_switch_hops=hmean, hop_histogram=hist,
        bisection_GBps=n_e / 2 * gbps_to_GBps(req.link_gbps), oversubscription=1.0,
        params={"radix": k, "down_per_leaf": n_e, "up_per_leaf": 0, "n_leaves": 1,
                "switch_key": req.switch_key},
        notes=(f"all {n_e:,} NIC ports fit on one radix-{k} switch",),
        _graph_builder=graph,
    )


def _two_tier(req: TopologyRequest, k: int, down: int, up: int, spine_down: int,
              leaf_of_e: np.ndarray, n_leaves: int) -> Topology:
    n_e, rate = req.n_endpoints, gbps_to_GBps(req.link_gbps)
    n_up = n_leaves * up
    n_spines = balanced_count(-(-n_up // k), up)
    links = (
        _nic_leaf_class(req, leaf_of_e, n_leaves),
        LinkClass("leaf-spine", n_up, req.link_gbps, req.leaf_spine_m, ("leaf", "spine"),
                  (PortGroup("leaf", up, n_leaves), *_round_robin_groups("spine", n_up, n_spines))),
    )
    hist, hmax, hmean = hop_histogram(_pair_counts(req, leaf_of_e, None, 2))
    bisection = min(n_e, n_up) / 2 * rate

    def graph():  # type: ignore[no-untyped-def]
        g = np.arange(n_up, dtype=np.int64)
        a = np.concatenate([np.arange(n_e), n_e + g // up])
        b = np.concatenate([n_e + leaf_of_e, n_e + n_leaves + g % n_spines])
        cls = np.concatenate([np.zeros(n_e), np.ones(n_up)])
        tier = np.concatenate([np.zeros(n_e), np.ones(n_leaves), np.full(n_spines, 2)])
        return graph_from_cables(n_e + n_leaves + n_spines, tier, a, b, cls, req.link_gbps,
                                 req.n_gpus, req.nics_per_gpu)

    return Topology(
        family="fat-tree", request=req, tiers=2,
        switches_by_tier={"leaf": n_leaves, "spine": n_spines}, links=links,
        max_switch_hops=hmax, mean_switch_hops=hmean, hop_histogram=hist,
        bisection_GBps=bisection, oversubscription=down / up,
        params={"radix": k, "down_per_leaf": down, "up_per_leaf": up, "n_leaves": n_leaves,
                "n_spines": n_spines, "switch_key": req.switch_key,
                "rail_optimized": req.rail_optimized},
        notes=_partial_notes(req, down, n_leaves),
        _graph_builder=graph,
    )


def _three_tier(req: TopologyRequest, k: int, down: int, up: int, spine_down: int,
                leaf_of_e: np.ndarray, n_leaves: int) -> Topology:
    n_e, rate = req.n_endpoints, gbps_to_GBps(req.link_gbps)
    n_pods = -(-n_leaves // spine_down)
    pod_of_leaf = np.arange(n_leaves, dtype=np.int64) // spine_down
    leaves_in_pod = np.bincount(pod_of_leaf, minlength=n_pods)
    spine_up = spine_uplinks(n_leaves, spine_down, req.spine_oversubscription)  # per pod
    plane_up = int(spine_up.sum())
    cores_per_plane = balanced_count(-(-plane_up // k), int(spine_up.max()))
    n_spines, n_cores = n_pods * up, cores_per_plane * up
    n_leaf_spine, n_spine_core = n_leaves * up, plane_up * up
    links = (
        _nic_leaf_class(req, leaf_of_e, n_leaves),
        LinkClass("leaf-spine", n_leaf_spine, req.link_gbps, req.leaf_spine_m, ("leaf", "spine"),
                  (PortGroup("leaf", up, n_leaves),
                   *_groups("spine", np.repeat(leaves_in_pod, up)))),
        LinkClass("spine-core", n_spine_core, req.link_gbps, req.spine_core_m, ("spine", "core"),
                  (*_groups("spine", np.repeat(spine_up, up)),
                   *_round_robin_groups("core", plane_up, cores_per_plane, repeat=up))),
    )
    hist, hmax, hmean = hop_histogram(_pair_counts(req, leaf_of_e, pod_of_leaf, 3))
    cut = min(n_e, n_leaf_spine, n_spine_core if n_pods > 1 else n_leaf_spine)
    spine_ratio = float(np.max(leaves_in_pod / spine_up))

    def graph():  # type: ignore[no-untyped-def]
        base_sp, base_co = n_e + n_leaves, n_e + n_leaves + n_spines
        leaf_rep = np.repeat(np.arange(n_leaves, dtype=np.int64), up)
        j = np.tile(np.arange(up, dtype=np.int64), n_leaves)
        ls_a, ls_b = n_e + leaf_rep, base_sp + pod_of_leaf[leaf_rep] * up + j
        spine_id = np.arange(n_spines, dtype=np.int64)
        spine_pod, spine_plane = np.divmod(spine_id, up)
        n_up_each = spine_up[spine_pod]
        src = np.repeat(spine_id, n_up_each)
        start = np.cumsum(n_up_each) - n_up_each
        t = np.arange(src.size, dtype=np.int64) - np.repeat(start, n_up_each)
        pod_off = np.cumsum(spine_up) - spine_up
        pos = pod_off[spine_pod[src]] + t
        sc_a, sc_b = base_sp + src, base_co + spine_plane[src] * cores_per_plane + pos % cores_per_plane
        a = np.concatenate([np.arange(n_e), ls_a, sc_a])
        b = np.concatenate([n_e + leaf_of_e, ls_b, sc_b])
        cls = np.concatenate([np.zeros(n_e), np.ones(ls_a.size), np.full(sc_a.size, 2)])
        tier = np.concatenate([np.zeros(n_e), np.ones(n_leaves), np.full(n_spines, 2),
                               np.full(n_cores, 3)])
        return graph_from_cables(n_e + n_leaves + n_spines + n_cores, tier, a, b, cls,
                                 req.link_gbps, req.n_gpus, req.nics_per_gpu)

    notes = list(_partial_notes(req, down, n_leaves))
    notes.append(
        f"{n_pods:,} pods of up to {spine_down} leaves and {up} spines; "
        f"{up} core planes of {cores_per_plane} cores"
    )
    return Topology(
        family="fat-tree", request=req, tiers=3,
        switches_by_tier={"leaf": n_leaves, "spine": n_spines, "core": n_cores}, links=links,
        max_switch_hops=hmax, mean_switch_hops=hmean, hop_histogram=hist,
        bisection_GBps=cut / 2 * rate, oversubscription=down / up,
        params={"radix": k, "down_per_leaf": down, "up_per_leaf": up, "n_leaves": n_leaves,
                "n_pods": n_pods, "leaves_per_pod": spine_down, "spines_per_pod": up,
                "cores_per_plane": cores_per_plane, "spine_oversubscription": spine_ratio,
                "switch_key": req.switch_key, "rail_optimized": req.rail_optimized},
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
