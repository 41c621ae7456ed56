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
``_three_tier`` and :class:`~fabric_model.topology.fat_tree.PodLayout`): NIC cable ``e`` for
endpoint ``e``; leaf ``l`` uplink ``j`` is cable ``E + l*up + j`` and goes to spine
``(l*up + j) mod S`` (2 tiers) or to the pod's spine ``(local(l)*up + j) mod S_p`` (3 tiers);
spine-core cable ``base3 + c`` is uplink ``c - spine_first_uplink[s]`` of spine ``s`` and goes to
a core of its plane group, round-robin by its position in the group. Striping may be uneven (a
leaf has ``m`` or ``m + 1`` cables to a spine, a pod ``m`` or ``m + 1`` to a core), so a down
hop picks among the cables that reach the next switch, and a cross-pod path to a partial pod
that does not reach the chosen core is re-picked from the destination's cables (every full pod
reaches every core). The adaptive bundles then hold each leaf's and pod's real capacity; a
single pair of leaves (or pods) is only sure of ``params["leaf_pair_share"]`` (or
``"pod_pair_share"``) of it, a limit the bundles do not see. On a full build every pair is
joined by one cable and the paths are the textbook ones.

4 tiers (:func:`~fabric_model.topology.fat_tree.superpod_layout`): across super-pods a path
climbs to a super-spine (7 switches: leaf, spine, core, super, core, spine, leaf); inside a
super-pod, across pods, it turns at a core (5). ``adaptive`` adds two bundle kinds after the
four above, super-pod up and super-pod down (every core-super cable of the super-pod).
``ecmp`` and ``dmodk`` walk one explicit path per queue pair (:func:`_per_path_4`, 8 slots,
no kernel) where every pod is full and every super-pod reaches every super-spine, and are
refused (naming ``adaptive``) elsewhere.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from functools import cached_property
from types import ModuleType
from typing import Any

import numpy as np

from fabric_model._fastpaths import shortcuts
from fabric_model.caching import register
from fabric_model.errors import InfeasibleDesignError
from fabric_model.flows import FlowSet
from fabric_model.routing.base import ColumnRouted, RoutedFlows, hash_choices, kept_per_capacity
from fabric_model.topology import Topology
from fabric_model.topology.fat_tree import PodLayout, pod_layout, superpod_layout

__all__ = ["EcmpWalk", "route_fat_tree"]

_ADAPTIVE_CLASSES = ("leaf-up bundle", "pod-up bundle", "pod-down bundle", "leaf-down bundle")
_SUPERPOD_CLASSES = ("super-pod-up bundle", "super-pod-down bundle")

#: The routing layout of each built topology (keyed by its graph, dropped with it): every
#: pattern routed on one fabric (each ECMP seed, each collective) reuses it.
_LAYOUTS: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
_LAYOUTS_LOCK = threading.Lock()


def _clear_layouts() -> None:
    with _LAYOUTS_LOCK:
        _LAYOUTS.clear()


register(
    "routing.fat_tree._LAYOUTS",
    key="the fabric's graph object (weak: dropped with the fabric)",
    size="one routing layout per live fat-tree fabric",
    lock="_LAYOUTS_LOCK",
    clear=_clear_layouts,
)


def _layout(topo: Topology) -> dict[str, np.ndarray | int | PodLayout]:
    g = topo.graph
    with _LAYOUTS_LOCK:
        cached = _LAYOUTS.get(g)
    if cached is None:
        cached = _build_layout(topo)
        with _LAYOUTS_LOCK:
            _LAYOUTS[g] = cached
    return cached


def _build_layout(topo: Topology) -> dict[str, Any]:
    g = topo.graph
    p = topo.params
    n_e = topo.n_endpoints
    leaf_of_e = g.link_dst[0 : 2 * n_e : 2].astype(np.int64) - n_e
    order = np.argsort(leaf_of_e, kind="stable")
    leaf_major = np.empty(n_e, dtype=np.int64)
    leaf_major[order] = np.arange(n_e, dtype=np.int64)
    out: dict[str, np.ndarray | int | PodLayout] = {
        "E": n_e,
        "leaf_of_e": leaf_of_e,
        "L": int(p["n_leaves"]),
        "leaf_major": leaf_major,
    }
    if topo.tiers >= 2:
        out["u"] = int(p["up_per_leaf"])
    if topo.tiers == 2:
        out["S"] = int(p["n_spines"])
    if topo.tiers == 3:
        lpp, u = int(p["leaves_per_pod"]), int(p["up_per_leaf"])
        n_leaves = int(p["n_leaves"])
        pods = pod_layout(n_leaves, u, lpp, topo.request.spine_oversubscription, int(p["radix"]))
        out.update(lpp=lpp, pods=pods, base3=n_e + n_leaves * u)
        out["spine_by_cable"] = pods.spine_of_cable(np.arange(pods.n_uplinks, dtype=np.int64))
    if topo.tiers == 4:  # the pods and super-pods of every leaf (their wiring: on first use)
        lpp = int(p["leaves_per_pod"])
        out.update(lpp=lpp, spp=int(p["pods_per_super_pod"]))
    for value in out.values():
        if isinstance(value, np.ndarray):
            value.flags.writeable = False  # shared by every pattern routed on the fabric
    return out


def route_fat_tree(
    topo: Topology,
    src: np.ndarray,
    dst: np.ndarray,
    policy: str,
    capacity_Bps: np.ndarray,
    *,
    qps: int = 1,
    rng: np.random.Generator | None = None,
) -> RoutedFlows:
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
    if topo.tiers >= 3:
        lpp = int(lay["lpp"])  # type: ignore[arg-type]
        cross_pod = ~same_leaf & (a // lpp != b // lpp)
    else:
        cross_pod = np.zeros_like(same_leaf)
    hops = np.where(same_leaf, 1, np.where(cross_pod, 5, 3)).astype(np.int64)
    cross_sp = None
    if topo.tiers == 4:
        spp = int(lay["spp"])  # type: ignore[arg-type]
        cross_sp = cross_pod & (a // lpp // spp != b // lpp // spp)
        hops[cross_sp] = 7
    if policy == "adaptive" or topo.tiers == 1:
        return _adaptive(topo, lay, src, dst, same_leaf, cross_pod, hops, capacity_Bps, cross_sp)
    if policy not in ("ecmp", "dmodk"):
        raise InfeasibleDesignError(
            "fabric.routing", f"a fat-tree routes with adaptive, ecmp or dmodk, not {policy}"
        )
    queue_pairs = qps if policy == "ecmp" else 1
    if cross_sp is not None:
        return _per_path_4(
            topo,
            lay,
            src,
            dst,
            same_leaf,
            cross_pod,
            cross_sp,
            hops,
            capacity_Bps,
            policy,
            queue_pairs,
            rng,
        )
    return _per_path(
        topo, lay, src, dst, same_leaf, cross_pod, hops, capacity_Bps, policy, queue_pairs, rng
    )


def _csr(paths: np.ndarray, n_links: int) -> FlowSet:
    valid = paths >= 0
    indptr = np.zeros(paths.shape[0] + 1, dtype=np.int64)
    np.cumsum(valid.sum(axis=1), out=indptr[1:])
    indices = paths[valid]
    return FlowSet.built(indptr, indices, np.ones(indices.size), n_links)  # checked in the tests


def _explicit_routes(
    topo: Topology,
    paths: np.ndarray,
    cap: np.ndarray,
    conn: np.ndarray,
    qps: int,
    hops: np.ndarray,
    policy: str,
) -> RoutedFlows:
    """One flow per queue pair along ``paths`` (rows of directed link ids, -1 = no hop)."""
    labels, names = _class_labels(topo, ())
    return RoutedFlows(
        flows=_csr(paths, topo.graph.n_links),
        link_capacity_Bps=cap,
        link_class=labels,
        class_names=names,
        flow_of_connection=conn,
        flow_fraction=np.full(conn.size, 1.0 / qps),
        switch_hops=hops,
        policy=policy,
    )


def _class_labels(topo: Topology, extra: tuple[str, ...]) -> tuple[np.ndarray, tuple[str, ...]]:
    names = tuple(lc.name for lc in topo.links) + extra
    return topo.graph.link_class.astype(np.int16), names


def _adaptive(
    topo: Topology,
    lay: dict,
    src: np.ndarray,
    dst: np.ndarray,
    same_leaf: np.ndarray,
    cross_pod: np.ndarray,
    hops: np.ndarray,
    cap: np.ndarray,
    cross_sp: np.ndarray | None = None,
) -> RoutedFlows:
    space = _bundle_space(topo, lay, cap)
    leaf_of_e = lay["leaf_of_e"]
    a, b = leaf_of_e[src], leaf_of_e[dst]
    off = ~same_leaf
    none = np.int64(-1)
    # one link per path slot, slots in path order: NIC up, leaf up, pod up, pod down, leaf
    # down, NIC down (each slot its own range of link ids)
    columns = [2 * src, np.where(off, space["b_lu"] + a, none)]
    if topo.tiers >= 3:
        lpp = int(lay["lpp"])
        columns.append(np.where(cross_pod, space["b_pu"] + a // lpp, none))
        if cross_sp is not None:  # 4 tiers: up to and down from a super-spine
            spp = int(lay["spp"])
            columns += [
                np.where(cross_sp, space["b_su"] + a // lpp // spp, none),
                np.where(cross_sp, space["b_sd"] + b // lpp // spp, none),
            ]
        columns.append(np.where(cross_pod, space["b_pd"] + b // lpp, none))
    columns += [np.where(off, space["b_ld"] + b, none), 2 * dst + 1]
    keep = space["keep"]
    if not all(keep[col[col >= 0]].all() for col in columns):
        # a bundle with no cables cannot be on a path
        raise AssertionError("fat-tree adaptive routing used an empty bundle")
    return ColumnRouted(
        columns,
        space["total"],
        link_capacity_Bps=space["capacity"],
        link_class=space["link_class"],
        class_names=space["names"],
        switch_hops=hops,
        policy="adaptive",
    )


def _cables_of_class(g: Any, cls: int) -> np.ndarray:
    """Return the first directed link (``2c``) of every cable ``c`` of class ``cls``, ascending."""
    out: np.ndarray = 2 * np.flatnonzero(g.link_class[0::2] == cls)
    return out


def _bundle_space(topo: Topology, lay: dict, cap: np.ndarray) -> dict[str, Any]:
    """Return the adaptive link space of ``cap``: cables, then leaf and pod bundles.

    Kept per fabric for the few capacity arrays last routed on (by identity: a fabric's
    context passes the same array to every pattern it routes).
    """
    return kept_per_capacity(
        topo.graph, "fat-tree bundle space", cap, lambda: _build_bundle_space(topo, lay, cap)
    )


def _build_bundle_space(topo: Topology, lay: dict, cap: np.ndarray) -> dict[str, Any]:
    g = topo.graph
    n_links = g.n_links
    n_leaves = int(lay["L"])
    # bundle capacities: sum of member cable capacities (capacity-aware spraying)
    up_cls = 1
    leaf_up_cap: np.ndarray = np.zeros(n_leaves)
    leaf_down_cap: np.ndarray = np.zeros(n_leaves)
    if topo.tiers >= 2:
        up_links = _cables_of_class(g, up_cls)
        n_e = int(lay["E"])
        leaf_up_cap = np.bincount(
            g.link_src[up_links] - n_e, weights=cap[up_links], minlength=n_leaves
        )
        leaf_down_cap = np.bincount(
            g.link_src[up_links] - n_e, weights=cap[up_links + 1], minlength=n_leaves
        )
    pod_caps: list[np.ndarray] = []
    sp_caps: list[np.ndarray] = []
    n_pods = n_sp = 0
    if topo.tiers == 3:
        lpp = int(lay["lpp"])
        n_pods = -(-n_leaves // lpp)
        sc = _cables_of_class(g, 2)
        pods = lay["pods"]
        assert isinstance(pods, PodLayout)
        spine_pod = pods.spine_pod[g.link_src[sc] - int(lay["E"]) - n_leaves]
        pod_caps = [
            np.bincount(spine_pod, weights=cap[sc], minlength=n_pods),
            np.bincount(spine_pod, weights=cap[sc + 1], minlength=n_pods),
        ]
    if topo.tiers == 4:
        p = topo.params
        lpp, spp = int(lay["lpp"]), int(lay["spp"])
        n_pods, n_sp = -(-n_leaves // lpp), int(p["n_super_pods"])
        pods = pod_layout(
            n_leaves,
            int(p["up_per_leaf"]),
            lpp,
            topo.request.spine_oversubscription,
            int(p["radix"]),
        )
        sps = superpod_layout(pods, int(p["radix"]))
        sc = _cables_of_class(g, 2)  # spine-core cables, in cable order
        cable_pod = np.repeat(np.arange(n_pods, dtype=np.int64), pods.pod_uplinks)
        cs = _cables_of_class(g, 3)  # core-super cables, core by core
        cable_sp = np.repeat(sps.core_sp, sps.core_down)
        pod_caps = [
            np.bincount(cable_pod, weights=cap[sc], minlength=n_pods),
            np.bincount(cable_pod, weights=cap[sc + 1], minlength=n_pods),
        ]
        sp_caps = [
            np.bincount(cable_sp, weights=cap[cs], minlength=n_sp),
            np.bincount(cable_sp, weights=cap[cs + 1], minlength=n_sp),
        ]
        assert spp == sps.pods_per_sp
    b_lu = n_links
    b_pu = b_lu + n_leaves
    b_pd = b_pu + n_pods
    b_ld = b_pd + n_pods
    b_su = b_ld + n_leaves  # 4 tiers: the super-pod bundles after the 3-tier layout
    b_sd = b_su + n_sp
    total = b_sd + n_sp
    capacity = np.concatenate(
        [
            cap,
            leaf_up_cap,
            *(pod_caps or [np.zeros(0), np.zeros(0)]),
            leaf_down_cap,
            *(sp_caps or [np.zeros(0), np.zeros(0)]),
        ]
    )
    extra = _ADAPTIVE_CLASSES + (_SUPERPOD_CLASSES if n_sp else ())
    labels, names = _class_labels(topo, extra)
    base = len(names) - len(extra)
    link_class = np.concatenate(
        [
            labels,
            np.full(n_leaves, base, np.int16),
            np.full(n_pods, base + 1, np.int16),
            np.full(n_pods, base + 2, np.int16),
            np.full(n_leaves, base + 3, np.int16),
            np.full(n_sp, base + 4, np.int16),
            np.full(n_sp, base + 5, np.int16),
        ]
    )
    keep = capacity > 0
    space = {
        "b_lu": b_lu,
        "b_pu": b_pu,
        "b_pd": b_pd,
        "b_ld": b_ld,
        "b_su": b_su,
        "b_sd": b_sd,
        "total": total,
        "capacity": np.where(keep, capacity, 1.0),
        "link_class": link_class,
        "names": names,
        "keep": keep,
    }
    for value in space.values():
        if isinstance(value, np.ndarray):
            value.flags.writeable = False  # shared by every pattern routed on the fabric
    return space


def _per_path(
    topo: Topology,
    lay: dict,
    src: np.ndarray,
    dst: np.ndarray,
    same_leaf: np.ndarray,
    cross_pod: np.ndarray,
    hops: np.ndarray,
    cap: np.ndarray,
    policy: str,
    qps: int,
    rng: np.random.Generator | None,
) -> RoutedFlows:
    # ``ecmp`` walked by the kernel; off (``FastPaths.ecmp_kernel``), and where the walk
    # declines, the vectorised paths below (also ``dmodk``'s router)
    if policy == "ecmp" and shortcuts().ecmp_kernel and src.size:
        walk = EcmpWalk.route(topo, lay, src, dst, hops, cap, qps, rng)
        if walk is not None:
            return walk
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

    def choose(k: np.ndarray | int, salt: np.ndarray | int) -> np.ndarray:
        if policy == "ecmp":
            return hash_choices(rng, n, k)
        kk = np.broadcast_to(np.asarray(k, dtype=np.int64), (n,))
        return (d_id // np.maximum(1, salt)) % np.maximum(kk, 1)  # destination-mod-k

    def choose_if_any(k: np.ndarray, salt: np.ndarray | int) -> np.ndarray:
        # draw only where there is a choice, so full builds hash exactly as before
        if np.all(k <= 1):
            return np.zeros(n, dtype=np.int64)
        return choose(k, salt)

    def leaf_cable(
        spine: np.ndarray, leaf: np.ndarray, n_sp: np.ndarray | int, pick: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Uplinks ``j0 + n_sp * i`` of ``leaf`` reach ``spine`` (both local): j0 and count."""
        j0 = (spine - leaf * u) % n_sp
        return j0, np.where(pick, (u - j0 + n_sp - 1) // n_sp, 1)

    paths = np.full((n, 6), -1, dtype=np.int64)
    paths[:, 0] = 2 * s
    paths[:, 5] = 2 * d + 1
    j = choose(u, 1)  # leaf uplink
    off = ~sl
    if topo.tiers == 2:
        n_sp = int(lay["S"])
        spine = (a * u + j) % n_sp
        j0, n_par = leaf_cable(spine, b, n_sp, off)
        j_down = j0 + n_sp * choose(n_par, u)
        paths[off, 1] = 2 * (n_e + a * u + j)[off]
        paths[off, 4] = 2 * (n_e + b * u + j_down)[off] + 1
    else:
        pods = lay["pods"]
        assert isinstance(pods, PodLayout)
        lpp, base3 = int(lay["lpp"]), int(lay["base3"])
        pa, pb = a // lpp, b // lpp
        la, lb = a - pa * lpp, b - pb * lpp
        sp_a, sp_b = pods.spines_in_pod[pa], pods.spines_in_pod[pb]
        first_a, first_b = pods.pod_first_spine[pa], pods.pod_first_spine[pb]
        spine_a = first_a + (la * u + j) % sp_a
        t = choose(pods.spine_up[spine_a], u)
        cab_a = pods.spine_first_uplink[spine_a] + t  # spine-core cable (index in the class)

        def down_into(
            cab: np.ndarray, pod: np.ndarray, pick: Callable[[np.ndarray, np.ndarray], np.ndarray]
        ) -> tuple[np.ndarray, np.ndarray]:
            """Pick a cable of ``pod`` on the core of ``cab``; say whether ``pod`` has one.

            The pod's cables in the group sit at positions ``q0 + C i`` of its block.
            """
            grp = pods.cable_group[cab]
            n_c = pods.group_cores[grp]
            start, size = pods.block_start[grp, pod], pods.block_size[grp, pod]
            q0 = (pods.cable_position[cab] - start) % n_c
            n_par = np.maximum(0, (size - q0 + n_c - 1) // n_c)
            pos = start + q0 + n_c * pick(np.maximum(n_par, 1), u * n_c)
            slot = np.minimum(pods.group_first_cable[grp] + pos, pods.n_uplinks - 1)
            return pods.cable_by_position[slot], n_par > 0

        cab_b, reach = down_into(cab_a, pb, choose)
        # a partial destination pod may not reach this core: re-pick from its own cables
        cab_b = np.where(reach, cab_b, pods.pod_first_uplink[pb] + choose(pods.pod_uplinks[pb], u))
        fix = xp & ~reach
        if fix.any():
            # ... and climb to that core from the source pod (a full pod reaches every core
            # of every group)
            cab_fix, _ = down_into(cab_b, pa, choose_if_any)
            cab_a = np.where(fix, cab_fix, cab_a)
            new_spine = pods.spine_of_cable(cab_a)
            j0, n_up = leaf_cable(new_spine - first_a, la, sp_a, fix)
            j = np.where(fix, j0 + sp_a * choose_if_any(n_up, u), j)
        spine_down = pods.spine_of_cable(cab_b)
        spine_b = np.where(xp, spine_down, spine_a)  # inside a pod: down from the same spine
        j0, n_down = leaf_cable(spine_b - first_b, lb, sp_b, off)
        j_b = j0 + sp_b * choose_if_any(n_down, u)
        paths[off, 1] = 2 * (n_e + a * u + j)[off]
        paths[xp, 2] = 2 * (base3 + cab_a)[xp]
        paths[xp, 3] = 2 * (base3 + cab_b)[xp] + 1
        paths[off, 4] = 2 * (n_e + b * u + j_b)[off] + 1
    return _explicit_routes(topo, paths, cap, conn, qps, hops, policy)


def _wiring_4(topo: Topology, lay: dict[str, Any]) -> dict[str, Any]:
    """Return the 4-tier wiring the per-cable policies walk (built once, kept in ``lay``).

    Refuses a build whose per-cable paths would need re-picking (a partial pod, or a
    super-pod that does not reach every super-spine); adaptive routing has no such limit.
    """
    with _LAYOUTS_LOCK:
        held = lay.get("_wiring_4")
    if held is not None:
        return held  # type: ignore[no-any-return]
    p = topo.params
    n_e, n_leaves, u, k = (
        topo.n_endpoints,
        int(p["n_leaves"]),
        int(p["up_per_leaf"]),
        int(p["radix"]),
    )
    lpp = int(p["leaves_per_pod"])
    pods = pod_layout(n_leaves, u, lpp, topo.request.spine_oversubscription, k)
    sps = superpod_layout(pods, k)
    full_pods = n_leaves % lpp == 0 and bool(np.all(pods.spines_in_pod == u))
    if not full_pods or int(sps.sp_uplinks.min()) < sps.n_super:
        raise InfeasibleDesignError(
            "fabric.routing",
            "ecmp and dmodk on a 4-tier fat-tree are modelled where every pod is full and every "
            "super-pod reaches every super-spine (this build has a partial pod or super-pod); "
            "allowed: adaptive, spray",
        )
    core_first = np.cumsum(sps.core_down) - sps.core_down
    wiring = {
        "pods": pods,
        "sps": sps,
        "core_first": core_first,
        "base3": n_e + n_leaves * u,
        "base4": n_e + n_leaves * u + pods.n_uplinks,
        "spine_by_cable": pods.spine_of_cable(np.arange(pods.n_uplinks, dtype=np.int64)),
    }
    with _LAYOUTS_LOCK:
        lay["_wiring_4"] = wiring
    return wiring


def _per_path_4(
    topo: Topology,
    lay: dict,
    src: np.ndarray,
    dst: np.ndarray,
    same_leaf: np.ndarray,
    cross_pod: np.ndarray,
    cross_sp: np.ndarray,
    hops: np.ndarray,
    cap: np.ndarray,
    policy: str,
    qps: int,
    rng: np.random.Generator | None,
) -> RoutedFlows:
    """ECMP or D-mod-k on a 4-tier fat-tree, one explicit path per queue pair (8 slots).

    Up: the leaf hashes over its uplinks, the spine over its core uplinks, the core over its
    super-spine uplinks; down: the super-spine over its cables into the destination
    super-pod (cables ``u = s mod T``), then the one cable of that core to the destination
    pod (core ``i`` of a super-pod takes cable ``i`` of every pod) and the spine's cables to
    the destination leaf. Same arithmetic as the 3-tier reference (:func:`_per_path`).
    """
    w = _wiring_4(topo, lay)
    pods, sps = w["pods"], w["sps"]
    assert isinstance(pods, PodLayout)
    n_conn = src.size
    conn = np.repeat(np.arange(n_conn, dtype=np.int64), qps)
    s, d = src[conn], dst[conn]
    a, b = lay["leaf_of_e"][s], lay["leaf_of_e"][d]
    sl, xp, xs = same_leaf[conn], cross_pod[conn], cross_sp[conn]
    n = conn.size
    rng = rng or np.random.default_rng(0)
    d_id = lay["leaf_major"][d]
    u = int(lay["u"])
    n_e, lpp, spp = int(lay["E"]), int(lay["lpp"]), int(lay["spp"])
    n_super = int(sps.n_super)

    def choose(kk: np.ndarray | int, salt: np.ndarray | int) -> np.ndarray:
        if policy == "ecmp":
            return hash_choices(rng, n, kk)
        kb = np.broadcast_to(np.asarray(kk, dtype=np.int64), (n,))
        return (d_id // np.maximum(1, salt)) % np.maximum(kb, 1)  # destination-mod-k

    pa, pb = a // lpp, b // lpp
    la, lb = a - pa * lpp, b - pb * lpp
    sa, sb = pa // spp, pb // spp
    j = choose(u, 1)  # leaf uplink (every pod full: spine j of the pod)
    spine_a = pods.pod_first_spine[pa] + (la * u + j) % u
    t = choose(pods.spine_up[spine_a], u)
    cab_a = pods.spine_first_uplink[spine_a] + t  # spine-core cable
    i_a = cab_a - pods.pod_first_uplink[pa]  # its position in the pod
    core_a = sps.sp_first_core[sa] + i_a // sps.sp_group[sa]
    v = choose(sps.core_down[core_a], u * pods.spine_up[spine_a])
    up4 = w["core_first"][core_a] + v  # core-super cable (global index)
    sup = up4 % n_super
    # down into the destination super-pod: its cables F + ((s - F) mod T) + T r
    first_b, count_b = sps.sp_first_uplink[sb], sps.sp_uplinks[sb]
    off = (sup - first_b) % n_super
    n_r = np.maximum(1, (count_b - off + n_super - 1) // n_super)
    dn4 = first_b + off + n_super * choose(n_r, u * n_super)
    core_b = np.searchsorted(w["core_first"], dn4, side="right") - 1
    # that core's positions c g .. c g + g - 1 (a partial last super-pod's cores hold several;
    # every pod full: each has them all)
    g_b = sps.sp_group[sb]
    lo_b = (core_b - sps.sp_first_core[sb]) * g_b
    n_pos = np.minimum(g_b, pods.pod_uplinks[pb] - lo_b)
    i_b = np.where(xs, lo_b + choose(n_pos, u * n_super * 2), i_a)  # same super-pod: same core
    cab_b = pods.pod_first_uplink[pb] + i_b  # that core's cable to the destination pod
    spine_b = np.where(xp, w["spine_by_cable"][np.minimum(cab_b, pods.n_uplinks - 1)], spine_a)
    y = spine_b - pods.pod_first_spine[pb]
    j_b = (y - lb * u) % u  # full pods: one cable from each leaf to each spine
    paths = np.full((n, 8), -1, dtype=np.int64)
    paths[:, 0] = 2 * s
    paths[:, 7] = 2 * d + 1
    offl = ~sl
    base3, base4 = int(w["base3"]), int(w["base4"])
    paths[offl, 1] = 2 * (n_e + a * u + j)[offl]
    paths[xp, 2] = 2 * (base3 + cab_a)[xp]
    paths[xs, 3] = 2 * (base4 + up4)[xs]
    paths[xs, 4] = 2 * (base4 + dn4)[xs] + 1
    paths[xp, 5] = 2 * (base3 + cab_b)[xp] + 1
    paths[offl, 6] = 2 * (n_e + b * u + j_b)[offl] + 1
    return _explicit_routes(topo, paths, cap, conn, qps, hops, policy)


#: Connections walked per kernel call: their uniforms are drawn into a buffer of
#: ``draws x CHUNK_CONNECTIONS x qps`` doubles, never the pattern's whole (a fresh array of
#: tens of MB costs more in page faults than the walk itself).
CHUNK_CONNECTIONS = 16384


def _walk_tables(lay: dict[str, Any], tiers: int) -> tuple[tuple[Any, ...], tuple[bool, ...]]:
    """Return the ECMP walk kernel's tables for a routing layout, and the draw rows it reads.

    Built once per fabric (kept in the layout). Beyond the layout's own arrays, the kernel
    takes each leaf's ``local x up mod S_p``, ``j mod S_p`` per pod and uplink, ``up`` as
    ``quot S_p + rem`` per pod, each core cable's position and each block's start modulo
    the group's cores, and each block's size as ``quot C + rem``: the reference's modulo
    and ceiling divisions become table reads (see the kernel). A draw row is needed only
    where some choice has more than one option; the re-pick row (3 tiers, row 3) never is
    in a walk that succeeds (a cross-pod re-pick sends the pattern to the reference, and
    inside a pod the re-picked cable is not used).
    """
    cached = lay.get("_walk_tables")
    if cached is not None and cached[0] == tiers:
        return cached[1], cached[2]
    i64 = np.zeros(0, np.int64)
    i64_2d = np.zeros((1, 1), np.int64)
    n_e, up = int(lay["E"]), int(lay["u"])
    leaf_of_e = lay["leaf_of_e"]
    if tiers == 3:
        pods = lay["pods"]
        assert isinstance(pods, PodLayout)
        lpp = int(lay["lpp"])
        leaf = np.arange(int(lay["L"]), dtype=np.int64)
        sp = pods.spines_in_pod
        leaf_up_mod = (leaf % lpp) * up % sp[leaf // lpp]
        up_mod = np.arange(up, dtype=np.int64)[None, :] % sp[:, None]
        up_quot, up_rem = up // sp, up % sp
        n_c = pods.group_cores
        cores = np.maximum(n_c, 1)[:, None]  # a group without cores has no cables to walk
        cable_pos_mod = pods.cable_position % cores[pods.cable_group, 0]
        block_start_mod = pods.block_start % cores
        block_quot, block_rem = pods.block_size // cores, pods.block_size % cores
        block_quot[n_c == 0], block_rem[n_c == 0] = 0, 0
        tables: tuple[Any, ...] = (
            leaf_of_e,
            n_e,
            up,
            tiers,
            0,
            lpp,
            int(lay["base3"]),
            sp,
            pods.pod_first_spine,
            pods.spine_up,
            pods.spine_first_uplink,
            pods.cable_group,
            n_c,
            pods.block_start,
            pods.group_first_cable,
            pods.cable_by_position,
            pods.pod_first_uplink,
            pods.pod_uplinks,
            lay["spine_by_cable"],
        )
        n_par_max = int((block_quot + (block_rem > 0)).max()) if block_quot.size else 0
        needed: tuple[bool, ...] = (
            True,
            int(pods.spine_up.max()) > 1,
            n_par_max > 1,
            False,
            int((up_quot + (up_rem > 0)).max()) > 1,
        )
    else:
        n_sp = int(lay["S"])
        leaf = np.arange(int(lay["L"]), dtype=np.int64)
        leaf_up_mod = leaf * up % n_sp
        up_mod = (np.arange(up, dtype=np.int64) % n_sp)[None, :]
        up_quot, up_rem = np.array([up // n_sp]), np.array([up % n_sp])
        cable_pos_mod, block_start_mod, block_quot, block_rem = i64, i64_2d, i64_2d, i64_2d
        tables = (leaf_of_e, n_e, up, tiers, n_sp, 1, 0, *([i64] * 4), i64, i64, i64_2d)
        tables += (i64, i64, i64, i64, i64)
        needed = (True, int(up_quot[0] + (up_rem[0] > 0)) > 1)
    extra = [
        np.ascontiguousarray(x, np.int64)
        for x in (
            leaf_up_mod,
            up_mod,
            up_quot,
            up_rem,
            cable_pos_mod,
            block_start_mod,
            block_quot,
            block_rem,
        )
    ]
    for x in extra:
        x.flags.writeable = False
    out = (*tables, *extra)
    with _LAYOUTS_LOCK:
        lay["_walk_tables"] = (tiers, out, needed)
    return out, needed


def _walk_kernels() -> ModuleType:
    """Return the ECMP walk's numba kernels, imported on first use (no compiler until then)."""
    from fabric_model.routing import _kernels

    return _kernels


class EcmpWalk(RoutedFlows):
    """ECMP hashing on a 2- or 3-tier fat-tree, walked by a kernel when asked; no path matrix.

    The same flows as the vectorised reference (:func:`_per_path`, ``ecmp``): it draws one
    ``rng.random(n)`` per hashing step (``n`` queue pairs); here the ``r``-th is regenerated
    in chunks from the generator's state advanced by ``r n`` draws (PCG64 draws one 64-bit
    word per double, so the numbers are the reference's), and
    :func:`fabric_model.routing._kernels.fat_tree_ecmp_walk` follows its arithmetic queue
    pair by queue pair. ``flows`` (the solver's CSR), ``paths``, ``flow_of_connection`` and
    ``flow_fraction`` are built on first use; :meth:`link_loads` and :meth:`first_flow_on`
    give what the max-min solve's first round needs
    (:mod:`fabric_model.collectives.first_round`) without them.
    """

    uniform_fraction: float
    _n_links: int
    _qps: int
    _src: np.ndarray
    _dst: np.ndarray
    _state: Any  # the PCG64 state before the first draw
    _rows: int
    _use_down_draw: bool
    _lay: dict[str, Any]
    _tiers: int
    _unit_loads: np.ndarray | None
    _first_touch: np.ndarray | None  # per link, the first queue pair crossing it (-1: none)

    @classmethod
    def route(
        cls,
        topo: Topology,
        lay: dict[str, Any],
        src: np.ndarray,
        dst: np.ndarray,
        hops: np.ndarray,
        cap: np.ndarray,
        qps: int,
        rng: np.random.Generator | None,
    ) -> EcmpWalk | None:
        """Route on the kernel; None (``rng`` untouched) where the reference must route.

        Afterwards ``rng`` stands where the reference leaves it.
        """
        rng = rng or np.random.default_rng(0)
        state: Any = rng.bit_generator.state
        if not isinstance(rng.bit_generator, np.random.PCG64) or state["has_uint32"]:
            return None
        n = src.size * qps
        three = topo.tiers == 3
        # 3 tiers: the reference draws the down cables only where some leaf is reached by
        # several (UNEVEN_DOWN); walked with that draw always, the paths are the same when
        # none is (one cable: pick 0 whatever the draw), so one walk serves both
        rows = 5 if three else 2
        walk = cls(topo, lay, src, dst, hops, cap, qps, state, rows, three)
        flags = walk._unit_walk()
        if flags & _walk_kernels().NEEDS_REFERENCE:
            return None
        drawn = rows if not three or flags & _walk_kernels().UNEVEN_DOWN else rows - 1
        rng.bit_generator.advance(drawn * n)
        return walk

    def _unit_walk(self) -> int:
        """Walk every queue pair once: the unit loads and each link's first queue pair."""
        loads = np.zeros(self._n_links)
        first = np.full(self._n_links, -1, np.int64)
        flags = self._walk(_walk_kernels().ADD_LOADS, np.zeros(0), out_loads=loads, out_first=first)
        loads.flags.writeable = False
        first.flags.writeable = False
        object.__setattr__(self, "_unit_loads", loads)
        object.__setattr__(self, "_first_touch", first)
        return flags

    def __init__(
        self,
        topo: Topology,
        lay: dict[str, Any],
        src: np.ndarray,
        dst: np.ndarray,
        hops: np.ndarray,
        cap: np.ndarray,
        qps: int,
        state: Any,
        rows: int,
        use_down_draw: bool,
    ) -> None:
        labels, names = _class_labels(topo, ())
        for key, value in (
            ("link_capacity_Bps", cap),
            ("link_class", labels),
            ("class_names", names),
            ("switch_hops", hops),
            ("policy", "ecmp"),
            ("notes", ()),
            ("uniform_fraction", 1.0 / qps),
            ("_n_links", topo.graph.n_links),
            ("_qps", qps),
            ("_src", np.ascontiguousarray(src, np.int64)),
            ("_dst", np.ascontiguousarray(dst, np.int64)),
            ("_state", state),
            ("_rows", rows),
            ("_use_down_draw", use_down_draw),
            ("_lay", lay),
            ("_tiers", topo.tiers),
            ("_unit_loads", None),
            ("_first_touch", None),
        ):
            object.__setattr__(self, key, value)

    def __repr__(self) -> str:
        return f"EcmpWalk({self._src.size:,} connections x {self._qps} queue pairs)"

    @property
    def n_flows(self) -> int:
        """Queue pairs routed."""
        return int(self._src.size * self._qps)

    @cached_property
    def seed_free(self) -> bool:
        """Whether every connection stays under one leaf (NIC up, NIC down).

        No draw is then read, so every seed routes the pattern the same way.
        """
        leaf = self._lay["leaf_of_e"]
        return bool(np.array_equal(leaf[self._src], leaf[self._dst]))

    def _walk(
        self,
        mode: int,
        flow_weight: np.ndarray,
        *,
        out_paths: np.ndarray | None = None,
        out_loads: np.ndarray | None = None,
        out_first: np.ndarray | None = None,
        connections: tuple[int, int] | None = None,
    ) -> int:
        """Run the kernel over the connections chunk by chunk (see the kernel's ``mode``).

        ``connections`` (first, stop) walks only those; flow indices (``flow_weight``,
        ``out_paths``) count from the first.
        """
        lay, qps, n = self._lay, self._qps, self.n_flows
        c_first, c_stop = connections or (0, self._src.size)
        tables, needed = _walk_tables(lay, self._tiers)
        gens = []
        for r in range(self._rows):
            if not needed[r]:  # no path reads these draws: the row stays zero
                continue
            bg = np.random.PCG64()
            bg.state = self._state
            bg.advance(r * n + c_first * qps)
            gens.append((r, bg, np.random.Generator(bg)))
        leaf = lay["leaf_of_e"]
        lpp = int(lay["lpp"]) if self._tiers == 3 else 0
        weight = np.ascontiguousarray(flow_weight, np.float64)
        loads = np.zeros(0) if out_loads is None else out_loads
        first = np.zeros(0, np.int64) if out_first is None else out_first
        one_path = np.zeros((1, 6), np.int64)
        buf = np.zeros((self._rows, min(c_stop - c_first, CHUNK_CONNECTIONS) * qps))
        flags = 0
        for c0 in range(c_first, c_stop, CHUNK_CONNECTIONS):
            c1 = min(c0 + CHUNK_CONNECTIONS, c_stop)
            f0, f1 = (c0 - c_first) * qps, (c1 - c_first) * qps
            uni = buf[:, : f1 - f0]
            # a chunk whose connections all stay under one leaf (or in one pod) reads none of
            # the draws (or none past the leaf's): those rows skip it, still zero
            a, b = leaf[self._src[c0:c1]], leaf[self._dst[c0:c1]]
            off = bool((a != b).any())
            xp = off and (lpp == 0 or bool((a // lpp != b // lpp).any()))
            for r, bg, g in gens:
                if off and (xp or r not in (1, 2)):
                    g.random(out=uni[r])
                else:
                    uni[r] = 0.0
                    bg.advance(f1 - f0)
            paths = out_paths[f0:f1] if out_paths is not None else one_path
            got = int(
                _walk_kernels().fat_tree_ecmp_walk(
                    mode,
                    self._src[c0:c1],
                    self._dst[c0:c1],
                    qps,
                    np.ascontiguousarray(uni),
                    self._use_down_draw,
                    *tables,
                    weight[f0:f1] if weight.size else weight,
                    paths,
                    loads,
                    c0 * qps,
                    first,
                )
            )
            flags |= got
        return flags

    def link_loads(self, flow_weight: np.ndarray | None = None) -> np.ndarray:
        """Return the summed weight of the queue pairs on every link (or ``flow_weight``).

        Added queue pair by queue pair, in the order the solver's kernel adds a flow set's
        weights, so the sums are the kernel's bit for bit.
        """
        if flow_weight is None:
            if self._unit_loads is None:
                self._unit_walk()
            assert self._unit_loads is not None
            return self._unit_loads
        loads = np.zeros(self._n_links)
        weight = np.zeros(0) if flow_weight is None else flow_weight
        self._walk(_walk_kernels().ADD_LOADS, weight, out_loads=loads)
        return loads

    def first_flow_on(self, marked: np.ndarray) -> tuple[int, np.ndarray]:
        """Return the first queue pair that crosses a ``marked`` link, and its links.

        The first queue pair of each link was noted while walking the unit loads, so only
        that queue pair's connection is walked again.
        """
        if self._first_touch is None:
            self._unit_walk()
        assert self._first_touch is not None
        touch = self._first_touch[np.asarray(marked, bool)]
        touch = touch[touch >= 0]
        if touch.size == 0:
            return -1, np.zeros(0, np.int64)
        f = int(touch.min())
        c = f // self._qps
        paths = np.full((self._qps, 6), -1, np.int64)
        kernels = _walk_kernels()
        self._walk(kernels.WRITE_PATHS, np.zeros(0), out_paths=paths, connections=(c, c + 1))
        path = paths[f - c * self._qps]
        return f, path[path >= 0]

    @cached_property
    def paths(self) -> np.ndarray:
        """Every queue pair's six path slots (``-1`` = none), as the reference lays them."""
        out = np.empty((self.n_flows, 6), np.int64)
        self._walk(_walk_kernels().WRITE_PATHS, np.zeros(0), out_paths=out)
        return out

    @cached_property
    def flows(self) -> FlowSet:  # type: ignore[override]
        """The solver's flow set (built on first use)."""
        return _csr(self.paths, self._n_links)

    @cached_property
    def flow_of_connection(self) -> np.ndarray:  # type: ignore[override]
        """Connection of each queue pair."""
        return np.repeat(np.arange(self._src.size, dtype=np.int64), self._qps)

    @cached_property
    def flow_fraction(self) -> np.ndarray:  # type: ignore[override]
        """``1 / qps`` for every queue pair."""
        return np.full(self.n_flows, self.uniform_fraction)
