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
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from functools import cached_property
from typing import Any

import numpy as np

from fabric_model.errors import InfeasibleDesignError
from fabric_model.flows import FlowSet
from fabric_model.routing import _kernels
from fabric_model.routing.base import ColumnRouted, RoutedFlows, hash_choices
from fabric_model.topology import Topology
from fabric_model.topology.fat_tree import PodLayout, pod_layout

__all__ = ["EcmpWalk", "route_fat_tree"]

_ADAPTIVE_CLASSES = ("leaf-up bundle", "pod-up bundle", "pod-down bundle", "leaf-down bundle")

#: Off: ``ecmp`` always routes through the vectorised reference (the tests compare both).
KERNEL_ENABLED = True

#: The routing layout of each built topology (keyed by its graph, dropped with it): every
#: pattern routed on one fabric (each ECMP seed, each collective) reuses it.
_LAYOUTS: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
_LAYOUTS_LOCK = threading.Lock()


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
            "fabric.routing", f"a fat-tree routes with adaptive, ecmp or dmodk, not {policy}"
        )
    return _per_path(
        topo,
        lay,
        src,
        dst,
        same_leaf,
        cross_pod,
        hops,
        capacity_Bps,
        policy,
        qps if policy == "ecmp" else 1,
        rng,
    )


def _csr(paths: np.ndarray, n_links: int) -> FlowSet:
    valid = paths >= 0
    indptr = np.zeros(paths.shape[0] + 1, dtype=np.int64)
    np.cumsum(valid.sum(axis=1), out=indptr[1:])
    indices = paths[valid]
    return FlowSet(indptr, indices, np.ones(indices.size), n_links)


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
) -> RoutedFlows:
    space = _bundle_space(topo, lay, cap)
    leaf_of_e = lay["leaf_of_e"]
    a, b = leaf_of_e[src], leaf_of_e[dst]
    off = ~same_leaf
    none = np.int64(-1)
    # one link per path slot, slots in path order: NIC up, leaf up, pod up, pod down, leaf
    # down, NIC down (each slot its own range of link ids)
    columns = [2 * src, np.where(off, space["b_lu"] + a, none)]
    if topo.tiers == 3:
        lpp = int(lay["lpp"])
        columns += [
            np.where(cross_pod, space["b_pu"] + a // lpp, none),
            np.where(cross_pod, space["b_pd"] + b // lpp, none),
        ]
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


def _bundle_space(topo: Topology, lay: dict, cap: np.ndarray) -> dict[str, Any]:
    """Return the adaptive link space of ``cap``: cables, then leaf and pod bundles.

    Kept per fabric for the few capacity arrays last routed on (by identity: a fabric's
    context passes the same array to every pattern it routes).
    """
    with _LAYOUTS_LOCK:
        for held, space in lay.get("_bundle_spaces", ()):
            if held is cap:
                return space  # type: ignore[no-any-return]
    g = topo.graph
    n_links = g.n_links
    n_leaves = int(lay["L"])
    # bundle capacities: sum of member cable capacities (capacity-aware spraying)
    up_cls = 1
    leaf_up_cap: np.ndarray = np.zeros(n_leaves)
    leaf_down_cap: np.ndarray = np.zeros(n_leaves)
    is_up = g.link_class == up_cls
    if topo.tiers >= 2:
        up_links = np.flatnonzero(is_up & (np.arange(n_links) % 2 == 0))
        n_e = int(lay["E"])
        leaf_up_cap = np.bincount(
            g.link_src[up_links] - n_e, weights=cap[up_links], minlength=n_leaves
        )
        leaf_down_cap = np.bincount(
            g.link_src[up_links] - n_e, weights=cap[up_links + 1], minlength=n_leaves
        )
    pod_caps: list[np.ndarray] = []
    n_pods = 0
    if topo.tiers == 3:
        lpp = int(lay["lpp"])
        n_pods = -(-n_leaves // lpp)
        sc = np.flatnonzero((g.link_class == 2) & (np.arange(n_links) % 2 == 0))
        pods = lay["pods"]
        assert isinstance(pods, PodLayout)
        spine_pod = pods.spine_pod[g.link_src[sc] - int(lay["E"]) - n_leaves]
        pod_caps = [
            np.bincount(spine_pod, weights=cap[sc], minlength=n_pods),
            np.bincount(spine_pod, weights=cap[sc + 1], minlength=n_pods),
        ]
    b_lu = n_links
    b_pu = b_lu + n_leaves
    b_pd = b_pu + n_pods
    b_ld = b_pd + n_pods
    total = b_ld + n_leaves
    capacity = np.concatenate(
        [cap, leaf_up_cap, *(pod_caps or [np.zeros(0), np.zeros(0)]), leaf_down_cap]
    )
    labels, names = _class_labels(topo, _ADAPTIVE_CLASSES)
    base = len(names) - len(_ADAPTIVE_CLASSES)
    link_class = np.concatenate(
        [
            labels,
            np.full(n_leaves, base, np.int16),
            np.full(n_pods, base + 1, np.int16),
            np.full(n_pods, base + 2, np.int16),
            np.full(n_leaves, base + 3, np.int16),
        ]
    )
    keep = capacity > 0
    space = {
        "b_lu": b_lu,
        "b_pu": b_pu,
        "b_pd": b_pd,
        "b_ld": b_ld,
        "total": total,
        "capacity": np.where(keep, capacity, 1.0),
        "link_class": link_class,
        "names": names,
        "keep": keep,
    }
    for value in space.values():
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    with _LAYOUTS_LOCK:
        held = [e for e in lay.get("_bundle_spaces", ()) if e[0] is not cap][-3:]
        lay["_bundle_spaces"] = (*held, (cap, space))
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
    if policy == "ecmp" and KERNEL_ENABLED and src.size:
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
    labels, names = _class_labels(topo, ())
    return RoutedFlows(
        flows=_csr(paths, topo.graph.n_links),
        link_capacity_Bps=cap,
        link_class=labels,
        class_names=names,
        flow_of_connection=conn,
        flow_fraction=np.full(n, 1.0 / qps),
        switch_hops=hops,
        policy=policy,
    )


#: Connections walked per kernel call: their uniforms are drawn into a buffer of
#: ``draws x CHUNK_CONNECTIONS x qps`` doubles, never the pattern's whole (a fresh array of
#: tens of MB costs more in page faults than the walk itself).
CHUNK_CONNECTIONS = 16384


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
        if flags & _kernels.NEEDS_REFERENCE:
            return None
        drawn = rows if not three or flags & _kernels.UNEVEN_DOWN else rows - 1
        rng.bit_generator.advance(drawn * n)
        return walk

    def _unit_walk(self) -> int:
        """Walk every queue pair once: the unit loads and each link's first queue pair."""
        loads = np.zeros(self._n_links)
        first = np.full(self._n_links, -1, np.int64)
        flags = self._walk(_kernels.ADD_LOADS, np.zeros(0), out_loads=loads, out_first=first)
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
        i64 = np.zeros(0, np.int64)
        i64_2d = np.zeros((1, 1), np.int64)
        three = self._tiers == 3
        pods = lay["pods"] if three else None
        tables = (
            lay["leaf_of_e"],
            int(lay["E"]),
            int(lay["u"]),
            self._tiers,
            0 if three else int(lay["S"]),
            int(lay["lpp"]) if three else 1,
            int(lay["base3"]) if three else 0,
            pods.spines_in_pod if pods else i64,
            pods.pod_first_spine if pods else i64,
            pods.spine_up if pods else i64,
            pods.spine_first_uplink if pods else i64,
            pods.cable_group if pods else i64,
            pods.group_cores if pods else i64,
            pods.block_start if pods else i64_2d,
            pods.block_size if pods else i64_2d,
            pods.cable_position if pods else i64,
            pods.group_first_cable if pods else i64,
            pods.cable_by_position if pods else i64,
            pods.pod_first_uplink if pods else i64,
            pods.pod_uplinks if pods else i64,
            lay["spine_by_cable"] if three else i64,
        )
        gens = []
        for r in range(self._rows):
            bg = np.random.PCG64()
            bg.state = self._state
            bg.advance(r * n + c_first * qps)
            gens.append(np.random.Generator(bg))
        weight = np.ascontiguousarray(flow_weight, np.float64)
        loads = np.zeros(0) if out_loads is None else out_loads
        first = np.zeros(0, np.int64) if out_first is None else out_first
        one_path = np.zeros((1, 6), np.int64)
        buf = np.empty((self._rows, min(c_stop - c_first, CHUNK_CONNECTIONS) * qps))
        flags = 0
        for c0 in range(c_first, c_stop, CHUNK_CONNECTIONS):
            c1 = min(c0 + CHUNK_CONNECTIONS, c_stop)
            f0, f1 = (c0 - c_first) * qps, (c1 - c_first) * qps
            uni = buf[:, : f1 - f0]
            for r, g in enumerate(gens):
                g.random(out=uni[r])
            paths = out_paths[f0:f1] if out_paths is not None else one_path
            got = int(
                _kernels.fat_tree_ecmp_walk(
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
        self._walk(_kernels.ADD_LOADS, weight, out_loads=loads)
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
        self._walk(_kernels.WRITE_PATHS, np.zeros(0), out_paths=paths, connections=(c, c + 1))
        path = paths[f - c * self._qps]
        return f, path[path >= 0]

    @cached_property
    def paths(self) -> np.ndarray:
        """Every queue pair's six path slots (``-1`` = none), as the reference lays them."""
        out = np.empty((self.n_flows, 6), np.int64)
        self._walk(_kernels.WRITE_PATHS, np.zeros(0), out_paths=out)
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
