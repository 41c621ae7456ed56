"""Up-down routing on the fat-trees of :mod:`fabric_model.topology.fat_tree`, vectorised.

Paths: same leaf = NIC up, NIC down (1 switch); same pod (or 2 tiers) = NIC up, leaf->spine,
spine->leaf, NIC down (3 switches); across pods = NIC up, leaf->spine, spine->core,
core->spine, spine->leaf, NIC down (5 switches).

- ``adaptive``: the two to four switch-to-switch hops become bundles (leaf up, pod up,
  pod down, leaf down), exact for a congestion-aware spray over a symmetric build: every
  cable of a bundle carries the same share of every flow, so the bundle's one constraint
  equals each cable's.
- ``ecmp``: each queue pair hashes at the leaf (which spine), at the spine (which core
  uplink) and at each down hop among parallel cables.
- ``dmodk``: the same choices, made from the destination's leaf-major id (hosts under one
  leaf numbered consecutively, as the InfiniBand ftree engine orders LIDs), so the hosts of
  one leaf are spread over all up-ports and no two destinations share a down cable.

The cable id layout this relies on is the builder's (see ``fat_tree._two_tier`` and
``_three_tier``): NIC cable ``e`` for endpoint ``e``; leaf ``l`` uplink ``j`` is cable
``E + l*up + j``; spine ``p*up + j`` uplink ``t`` is cable ``base3 + up*pod_off[p] + j*up_p + t``.
"""

from __future__ import annotations

import numpy as np

from fabric_model.errors import InfeasibleDesignError
from fabric_model.flows import FlowSet
from fabric_model.routing.base import RoutedFlows, hash_choices
from fabric_model.topology import Topology
from fabric_model.topology.fat_tree import spine_uplinks

__all__ = ["route_fat_tree"]

_ADAPTIVE_CLASSES = ("leaf-up bundle", "pod-up bundle", "pod-down bundle", "leaf-down bundle")


def _layout(topo: Topology) -> dict[str, np.ndarray | int]:
    g = topo.graph
    p = topo.params
    n_e = topo.n_endpoints
    leaf_of_e = g.link_dst[0 : 2 * n_e : 2].astype(np.int64) - n_e
    order = np.argsort(leaf_of_e, kind="stable")
    leaf_major = np.empty(n_e, dtype=np.int64)
    leaf_major[order] = np.arange(n_e, dtype=np.int64)
    out: dict[str, np.ndarray | int] = {"E": n_e, "leaf_of_e": leaf_of_e,
                                         "L": int(p["n_leaves"]), "leaf_major": leaf_major}
    if topo.tiers >= 2:
        out["u"] = int(p["up_per_leaf"])
    if topo.tiers == 2:
        out["S"] = int(p["n_spines"])
    if topo.tiers == 3:
        lpp, u = int(p["leaves_per_pod"]), int(p["up_per_leaf"])
        n_leaves = int(p["n_leaves"])
        spine_up = spine_uplinks(n_leaves, lpp, topo.request.spine_oversubscription)
        out.update(lpp=lpp, C=int(p["cores_per_plane"]), spine_up=spine_up,
                   pod_off=np.cumsum(spine_up) - spine_up, base3=n_e + n_leaves * u)
    return out


def route_fat_tree(topo: Topology, src: np.ndarray, dst: np.ndarray, policy: str,
                   capacity_Bps: np.ndarray, *, qps: int = 1,
                   rng: np.random.Generator | None = None) -> RoutedFlows:
    """Route connections on a fat-tree (the :class:`~fabric_model.routing.base.Router` interface).

    Policies: ``adaptive`` (bundles), ``ecmp`` or ``dmodk``; a 1-tier tree routes every
    policy as ``adaptive``.
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    lay = _layout(topo)
    leaf_of_e = lay["leaf_of_e"]
    assert isinstance(leaf_of_e, np.ndarray)
    a, b = leaf_of_e[src], leaf_of_e[dst]
    same_leaf = a == b
    if topo.tiers == 3:
        lpp = int(lay["lpp"])  # type: ignore[arg-type]
        cross_pod = ~same_leaf & (a // lpp != b // lpp)
    else:
        cross_pod = np.zeros_like(same_leaf)
    hops = np.where(same_leaf, 1, np.where(cross_pod, 5, 3)).astype(np.int64)

    if policy == "adaptive" or topo.tiers == 1:
        return _adaptive(topo, lay, src, dst, same_leaf, cross_pod, hops, capacity_Bps)
    if policy not in ("ecmp", "dmodk"):
        raise InfeasibleDesignError(
            "fabric.routing", f"a fat-tree routes with adaptive, ecmp or dmodk, not {policy}")
    return _per_path(topo, lay, src, dst, same_leaf, cross_pod, hops, capacity_Bps,
                     policy, qps if policy == "ecmp" else 1, rng)


def _csr(paths: np.ndarray, n_links: int) -> FlowSet:
    valid = paths >= 0
    indptr = np.zeros(paths.shape[0] + 1, dtype=np.int64)
    np.cumsum(valid.sum(axis=1), out=indptr[1:])
    indices = paths[valid]
    return FlowSet(indptr, indices, np.ones(indices.size), n_links)


def _class_labels(topo: Topology, extra: tuple[str, ...]) -> tuple[np.ndarray, tuple[str, ...]]:
    names = tuple(lc.name for lc in topo.links) + extra
    return topo.graph.link_class.astype(np.int16), names


def _adaptive(topo: Topology, lay: dict, src: np.ndarray, dst: np.ndarray,
              same_leaf: np.ndarray, cross_pod: np.ndarray, hops: np.ndarray,
              cap: np.ndarray) -> RoutedFlows:
    g = topo.graph
    n_links = g.n_links
    n_leaves = int(lay["L"])
    leaf_of_e = lay["leaf_of_e"]
    a, b = leaf_of_e[src], leaf_of_e[dst]
    # bundle capacities: sum of member cable capacities (capacity-aware spraying)
    up_cls = 1
    leaf_up_cap: np.ndarray = np.zeros(n_leaves)
    leaf_down_cap: np.ndarray = np.zeros(n_leaves)
    is_up = (g.link_class == up_cls)
    if topo.tiers >= 2:
        up_links = np.flatnonzero(is_up & (np.arange(n_links) % 2 == 0))
        n_e = int(lay["E"])
        leaf_up_cap = np.bincount(g.link_src[up_links] - n_e, weights=cap[up_links],
                                  minlength=n_leaves)
        leaf_down_cap = np.bincount(g.link_src[up_links] - n_e, weights=cap[up_links + 1],
                                    minlength=n_leaves)
    pod_caps: list[np.ndarray] = []
    n_pods = 0
    if topo.tiers == 3:
        lpp = int(lay["lpp"])
        n_pods = -(-n_leaves // lpp)
        sc = np.flatnonzero((g.link_class == 2) & (np.arange(n_links) % 2 == 0))
        spine_pod = (g.link_src[sc] - int(lay["E"]) - n_leaves) // int(lay["u"])
        pod_caps = [np.bincount(spine_pod, weights=cap[sc], minlength=n_pods),
                    np.bincount(spine_pod, weights=cap[sc + 1], minlength=n_pods)]
    b_lu = n_links
    b_pu = b_lu + n_leaves
    b_pd = b_pu + n_pods
    b_ld = b_pd + n_pods
    total = b_ld + n_leaves
    capacity = np.concatenate([cap, leaf_up_cap, *(pod_caps or [np.zeros(0), np.zeros(0)]),
                               leaf_down_cap])
    paths = np.full((src.size, 6), -1, dtype=np.int64)
    paths[:, 0] = 2 * src
    paths[:, 5] = 2 * dst + 1
    off = ~same_leaf
    paths[off, 1] = b_lu + a[off]
    paths[off, 4] = b_ld + b[off]
    if topo.tiers == 3:
        lpp = int(lay["lpp"])
        paths[cross_pod, 2] = b_pu + a[cross_pod] // lpp
        paths[cross_pod, 3] = b_pd + b[cross_pod] // lpp
    labels, names = _class_labels(topo, _ADAPTIVE_CLASSES)
    base = len(names) - len(_ADAPTIVE_CLASSES)
    link_class = np.concatenate([
        labels,
        np.full(n_leaves, base, np.int16), np.full(n_pods, base + 1, np.int16),
        np.full(n_pods, base + 2, np.int16), np.full(n_leaves, base + 3, np.int16),
    ])
    keep = capacity > 0
    if not keep[paths[paths >= 0]].all():  # a bundle with no cables cannot be on a path
        raise AssertionError("fat-tree adaptive routing used an empty bundle")
    return RoutedFlows(
        flows=_csr(paths, total), link_capacity_Bps=np.where(keep, capacity, 1.0),
        link_class=link_class, class_names=names,
        flow_of_connection=np.arange(src.size, dtype=np.int64),
        flow_fraction=np.ones(src.size), switch_hops=hops, policy="adaptive",
    )


def _per_path(topo: Topology, lay: dict, src: np.ndarray, dst: np.ndarray,
              same_leaf: np.ndarray, cross_pod: np.ndarray, hops: np.ndarray,
              cap: np.ndarray, policy: str, qps: int,
              rng: np.random.Generator | None) -> RoutedFlows:
    n_conn = src.size
    conn = np.repeat(np.arange(n_conn, dtype=np.int64), qps)
    s, d = src[conn], dst[conn]
    a, b = lay["leaf_of_e"][s], lay["leaf_of_e"][d]
    sl, xp = same_leaf[conn], cross_pod[conn]
    n = conn.size
    rng = rng or np.random.default_rng(0)
    d_id = lay["leaf_major"][d]  # destination-mod-k numbers hosts leaf by leaf
    u = int(lay["u"])
    n_e = int(lay["E"])

    def choose(k: np.ndarray | int, salt: int) -> np.ndarray:
        if policy == "ecmp":
            return hash_choices(rng, n, k)
        kk = np.broadcast_to(np.asarray(k, dtype=np.int64), (n,))
        return (d_id // max(1, salt)) % np.maximum(kk, 1)  # destination-mod-k

    paths = np.full((n, 6), -1, dtype=np.int64)
    paths[:, 0] = 2 * s
    paths[:, 5] = 2 * d + 1
    j = choose(u, 1)  # leaf uplink (= spine within the pod for 3 tiers)
    off = ~sl
    if topo.tiers == 2:
        n_sp = int(lay["S"])
        spine = (a * u + j) % n_sp
        m = u // n_sp  # parallel cables per leaf-spine pair (n_sp divides u)
        j_down = (spine - b * u) % n_sp + n_sp * choose(m, u)
        paths[off, 1] = 2 * (n_e + a * u + j)[off]
        paths[off, 4] = 2 * (n_e + b * u + j_down)[off] + 1
    else:
        # same pod: up to spine j of the pod and straight down to leaf b (one cable each)
        inpod = off & ~xp
        paths[inpod, 1] = 2 * (n_e + a * u + j)[inpod]
        paths[inpod, 4] = 2 * (n_e + b * u + j)[inpod] + 1
        lpp, n_c = int(lay["lpp"]), int(lay["C"])
        spine_up, pod_off, base3 = lay["spine_up"], lay["pod_off"], int(lay["base3"])
        pa, pb = a // lpp, b // lpp
        up_a, up_b = spine_up[pa], spine_up[pb]
        t = choose(up_a, u)
        core = (pod_off[pa] + t) % n_c
        t0 = (core - pod_off[pb]) % n_c
        n_par = np.maximum(0, (up_b - t0 + n_c - 1) // n_c)
        # a partial destination pod may not reach this core: re-pick from its own cables
        reach = n_par > 0
        t_b = np.where(reach, t0 + n_c * choose(np.maximum(n_par, 1), u * n_c),
                       choose(up_b, u))
        core = np.where(reach, core, (pod_off[pb] + t_b) % n_c)
        # ... and climb to that core from the source pod (a full pod reaches every core)
        t_fix = (core - pod_off[pa]) % n_c
        t = np.where(reach | (t_fix >= up_a), t, t_fix)
        paths[xp, 1] = 2 * (n_e + a * u + j)[xp]
        paths[xp, 2] = 2 * (base3 + u * pod_off[pa] + j * up_a + t)[xp]
        paths[xp, 3] = 2 * (base3 + u * pod_off[pb] + j * up_b + t_b)[xp] + 1
        paths[xp, 4] = 2 * (n_e + b * u + j)[xp] + 1
    labels, names = _class_labels(topo, ())
    return RoutedFlows(
        flows=_csr(paths, topo.graph.n_links), link_capacity_Bps=cap, link_class=labels,
        class_names=names, flow_of_connection=conn, flow_fraction=np.full(n, 1.0 / qps),
        switch_hops=hops, policy=policy,
    )
