"""Routing on a hybrid fabric (:mod:`fabric_model.topology.hybrid`): partitions and shared tier.

- A connection inside one partition is routed by that partition's own router on the
  partition's graph (its links are the hybrid's links ``link_offset ..``; its bundles and
  trunks are appended to the hybrid's link space), so a job inside one partition sees exactly
  the fabric it would see alone.
- A connection between the partitions climbs its source partition to the top tier, crosses
  one shared core and descends the other partition: NIC up, then per level one *up bundle*
  (every cable from the set of switches reached so far to the next tier: a leaf's uplinks,
  then its pod's or group's), then the *shared-up bundle* (the shared uplinks of the top
  switches reached), the *shared-down bundle* of the destination's top switches, the
  destination's *down bundles* and its NIC down link. ``adaptive`` sprays over every core
  the top switches reach (capacity-aware: the shared bundles' capacities are their cables'
  sums); ``ecmp`` hashes each queue pair onto one shared core that both top sets reach and
  onto one cable up to it and one down from it (the seeded generator), so hash collisions
  on the shared tier, where the oversubscription sits, come out of the solver. Inside the
  partitions a crossing connection's climb stays sprayed (bundles) under both policies.
  With the round-robin wiring of the builder, a partition's top set (all cores of a
  3-tier fat-tree, a dragonfly+ group's spines) spreads its uplinks over every shared core
  as soon as it has at least ``C`` of them, so any core reaches the destination's top set.

Limit: the crossing connections' up and down bundles are links of their own, apart from the
bundles the partition's router gives the connections that stay inside, so a pattern mixing
both kinds counts a leaf's (or pod's) uplinks once for each kind. With non-blocking
partitions (``fabric.oversubscription = 1``, the default) those uplinks carry no more than
their leaf's NICs, which stay exact (they are graph links), so nothing changes; with a
tapered partition such a mixed pattern is optimistic by up to the taper.

A job on both partitions routes with one policy in both (``fabric.routing``, or
``fabric.vendor``'s default): :data:`HYBRID_POLICIES`, the ones every partition family has.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabric_model.errors import InfeasibleDesignError
from fabric_model.flows import FlowSet
from fabric_model.routing.base import RoutedFlows, check_policy, hash_choices
from fabric_model.topology import Topology
from fabric_model.topology.hybrid import HybridTopology, Partition

__all__ = ["HYBRID_POLICIES", "route_hybrid"]

#: Policies every partition family understands.
HYBRID_POLICIES = ("adaptive", "ecmp")


@dataclass
class _Space:
    """The link space being built: graph links, then appended bundles."""

    n_graph: int
    caps: list[np.ndarray]
    classes: list[np.ndarray]
    names: list[str]

    @property
    def size(self) -> int:
        return self.n_graph + sum(c.size for c in self.caps)

    def class_id(self, name: str) -> int:
        if name not in self.names:
            self.names.append(name)
        return self.names.index(name)

    def append(self, caps: np.ndarray, classes: np.ndarray) -> int:
        """Append links; return the id of the first."""
        first = self.size
        self.caps.append(np.asarray(caps, dtype=np.float64))
        self.classes.append(np.asarray(classes, dtype=np.int16))
        return first


def _partition_flows(
    topo: HybridTopology,
    p: Partition,
    conn: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    policy: str,
    cap: np.ndarray,
    space: _Space,
    qps: int,
    rng: np.random.Generator | None,
) -> tuple[FlowSet, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Route connections inside partition ``p`` with its router; map onto the hybrid."""
    from fabric_model.routing import route

    g = p.topology.graph
    n_local = g.n_links
    local_cap = cap[p.link_offset : p.link_offset + n_local]
    rf = route(
        p.topology,
        src - p.endpoint_offset,
        dst - p.endpoint_offset,
        policy,
        local_cap,
        qps=qps,
        rng=rng,
    )
    extra_cap = rf.link_capacity_Bps[n_local:]
    extra_cls = np.array(
        [space.class_id(f"{p.name} {rf.class_names[c]}") for c in rf.link_class[n_local:]],
        dtype=np.int16,
    )
    first = space.append(extra_cap, extra_cls)
    fl = rf.flows
    idx = fl.flow_link_indices.astype(np.int64)
    mapped = np.where(idx < n_local, idx + p.link_offset, idx - n_local + first)
    return (
        fl,
        mapped,
        conn[rf.flow_of_connection],
        rf.flow_fraction,
        rf.switch_hops,
    )


class _Climb:
    """Bundles up and down one partition, memoised per node set."""

    def __init__(self, topo: HybridTopology, p: Partition, cap: np.ndarray, space: _Space):
        self.p, self.cap, self.space = p, cap, space
        g = p.topology.graph
        self.g = g
        self.indptr, self.order = g.out_indptr_indices
        top_local = np.flatnonzero(g.node_tier == p.top_graph_tier)
        counts = p.uplink_counts()
        starts = p.first_shared_cable + np.concatenate([[0], np.cumsum(counts)[:-1]])
        self.top_cables = {
            int(n): np.arange(s, s + c, dtype=np.int64)
            for n, s, c in zip(top_local, starts, counts, strict=True)
        }
        self.memo: dict[int, tuple[list[int], list[int]]] = {}
        self.bundles: dict[tuple[int, ...], tuple[int, int]] = {}
        #: each climbed leaf's top set (index into ``set_cables``): its shared uplinks
        self.top_set: dict[int, int] = {}
        self.set_cables: list[np.ndarray] = []
        self._set_index: dict[tuple[int, ...], int] = {}
        self.up_cls = space.class_id(f"{p.name} up bundle")
        self.down_cls = space.class_id(f"{p.name} down bundle")
        self.sh_up_cls = space.class_id(f"{p.name} shared-up bundle")
        self.sh_down_cls = space.class_id(f"{p.name} shared-down bundle")

    def _bundle(self, key: tuple[int, ...], up_links: np.ndarray, shared: bool) -> tuple[int, int]:
        """Up and down bundle ids over ``up_links`` (hybrid ids of the up direction)."""
        got = self.bundles.get(key)
        if got is None:
            caps = np.array([self.cap[up_links].sum(), self.cap[up_links ^ 1].sum()])
            cls = (self.sh_up_cls, self.sh_down_cls) if shared else (self.up_cls, self.down_cls)
            first = self.space.append(caps, np.array(cls))
            got = (first, first + 1)
            self.bundles[key] = got
        return got

    def shared_ids(self, *, up: bool) -> list[int]:
        """Ids of the shared-up (or shared-down) bundles made so far."""
        return [ud[0 if up else 1] for key, ud in self.bundles.items() if key[0] == -1]

    def path(self, leaf: int) -> tuple[list[int], list[int]]:
        """Up and down bundle ids from ``leaf`` (local id) to the shared tier, in path order."""
        got = self.memo.get(leaf)
        if got is not None:
            return got
        g, p = self.g, self.p
        level = np.array([leaf], dtype=np.int64)
        ups: list[int] = []
        downs: list[int] = []
        depth = 0
        while True:
            out = np.concatenate(
                [self.order[self.indptr[n] : self.indptr[n + 1]] for n in level]
            ).astype(np.int64)
            climb = out[g.node_tier[g.link_dst[out]] > g.node_tier[g.link_src[out]]]
            if not climb.size:
                break
            key = (depth, *level.tolist())
            u, d = self._bundle(key, climb + p.link_offset, shared=False)
            ups.append(u)
            downs.append(d)
            level = np.unique(g.link_dst[climb]).astype(np.int64)
            depth += 1
        tops = [n for n in level.tolist() if n in self.top_cables]
        if not tops:
            raise InfeasibleDesignError(
                "fabric.topology",
                f"partition {p.name}: leaf {leaf} reaches no {p.top_tier} switch with shared "
                f"uplinks",
            )
        cables = np.concatenate([self.top_cables[n] for n in tops])
        u, d = self._bundle((-1, *tops), 2 * cables, shared=True)
        key = tuple(tops)
        if key not in self._set_index:
            self._set_index[key] = len(self.set_cables)
            self.set_cables.append(cables)
        self.top_set[leaf] = self._set_index[key]
        ups.append(u)
        downs.append(d)
        downs.reverse()
        self.memo[leaf] = (ups, downs)
        return ups, downs


def _columns(climb: _Climb, leaves: np.ndarray, *, up: bool) -> list[np.ndarray]:
    """Bundle ids per path slot for connections leaving (``up``) or reaching ``leaves``."""
    uniq, inv = np.unique(leaves, return_inverse=True)
    rows = [climb.path(int(n))[0 if up else 1] for n in uniq.tolist()]
    width = max(len(r) for r in rows)
    table = np.full((uniq.size, width), -1, dtype=np.int64)
    for k, r in enumerate(rows):
        table[k, : len(r)] = r
    return [table[inv, j] for j in range(width)]


def _ecmp_shared(
    climb_s: _Climb,
    climb_d: _Climb,
    set_s: np.ndarray,
    set_d: np.ndarray,
    core_of_cable: np.ndarray,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Hash each flow onto one shared core its two top sets both reach, and one cable each way.

    Returns the up link (source top switch -> core) and the down link (core -> destination
    top switch) of every flow, as hybrid directed link ids.
    """
    up = np.empty(set_s.size, dtype=np.int64)
    down = np.empty(set_s.size, dtype=np.int64)
    pair = set_s * len(climb_d.set_cables) + set_d
    for code in np.unique(pair).tolist():
        on = np.flatnonzero(pair == code)
        cab_s = climb_s.set_cables[code // len(climb_d.set_cables)]
        cab_d = climb_d.set_cables[code % len(climb_d.set_cables)]
        core_s, core_d = core_of_cable[cab_s], core_of_cable[cab_d]
        cores = np.intersect1d(core_s, core_d)
        if not cores.size:
            raise InfeasibleDesignError(
                "hybrid.shared_oversubscription",
                "two top-tier sets share no shared core; allowed: a lower oversubscription",
            )
        core = cores[hash_choices(rng, on.size, cores.size)]
        for cab, core_of, out, direction in ((cab_s, core_s, up, 0), (cab_d, core_d, down, 1)):
            order = np.argsort(core_of, kind="stable")
            sorted_core = core_of[order]
            lo = np.searchsorted(sorted_core, core, "left")
            hi = np.searchsorted(sorted_core, core, "right")
            pick = lo + hash_choices(rng, on.size, hi - lo)
            out[on] = 2 * cab[order[pick]] + direction
    return up, down


def route_hybrid(
    topo: Topology,
    src: np.ndarray,
    dst: np.ndarray,
    policy: str,
    capacity_Bps: np.ndarray,
    *,
    qps: int = 1,
    rng: np.random.Generator | None = None,
) -> RoutedFlows:
    """Route ``src[i] -> dst[i]`` on a hybrid (see the module docstring).

    Raises
    ------
    InfeasibleDesignError
        On ``fabric.routing`` for a policy other than :data:`HYBRID_POLICIES`.
    """
    check_policy("hybrid", policy, HYBRID_POLICIES)
    if not isinstance(topo, HybridTopology):
        raise InfeasibleDesignError("fabric.topology", "route_hybrid needs a hybrid topology")
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    graph = topo.graph
    part_a, part_b = topo.partitions
    e_a = part_a.topology.n_endpoints
    in_b_s, in_b_d = src >= e_a, dst >= e_a
    space = _Space(graph.n_links, [], [], [lc.name for lc in topo.links])
    conn_all = np.arange(src.size, dtype=np.int64)
    lengths, indices, weights, f_conn, f_frac = [], [], [], [], []
    hops = np.zeros(src.size, dtype=np.int64)
    for p, mask in ((part_a, ~in_b_s & ~in_b_d), (part_b, in_b_s & in_b_d)):
        if not mask.any():
            continue
        fl, mapped, conn, frac, p_hops = _partition_flows(
            topo, p, conn_all[mask], src[mask], dst[mask], policy, capacity_Bps, space, qps, rng
        )
        lengths.append(np.diff(fl.flow_link_indptr))
        indices.append(mapped)
        weights.append(fl.flow_link_weights)
        f_conn.append(conn)
        f_frac.append(frac)
        hops[mask] = p_hops
    cross = np.flatnonzero(in_b_s != in_b_d)
    if cross.size:
        indptr_g, order_g = graph.out_indptr_indices
        nic_up = order_g[indptr_g[src[cross]]].astype(np.int64)
        nic_down = order_g[indptr_g[dst[cross]]].astype(np.int64) ^ 1
        climbs = {p.name: _Climb(topo, p, capacity_Bps, space) for p in (part_a, part_b)}
        rng = rng or np.random.default_rng(0)
        first = part_a.first_shared_cable
        core_of_cable = np.zeros(first + part_a.n_uplinks + part_b.n_uplinks, dtype=np.int64)
        core_of_cable[first:] = graph.link_dst[2 * np.arange(first, core_of_cable.size)]
        s_part = np.where(in_b_s[cross], 1, 0)
        leaf = graph.link_dst[nic_up].astype(np.int64)
        leaf_d = graph.link_src[nic_down].astype(np.int64)
        for side, (ps, pd) in enumerate(((part_a, part_b), (part_b, part_a))):
            on = s_part == side
            if not on.any():
                continue
            ls, ld = leaf[on] - ps.node_offset_switch, leaf_d[on] - pd.node_offset_switch
            up_cols = _columns(climbs[ps.name], ls, up=True)
            dn_cols = _columns(climbs[pd.name], ld, up=False)
            conn = cross[on]
            cols = [nic_up[on], *up_cols, *dn_cols, nic_down[on]]
            if policy == "ecmp":  # each queue pair hashed onto one core, one cable each way
                cols = [np.repeat(c, qps) for c in cols]
                conn = np.repeat(conn, qps)
                set_s = np.repeat([climbs[ps.name].top_set[int(x)] for x in ls.tolist()], qps)
                set_d = np.repeat([climbs[pd.name].top_set[int(x)] for x in ld.tolist()], qps)
                sh_up, sh_down = _ecmp_shared(
                    climbs[ps.name], climbs[pd.name], set_s, set_d, core_of_cable, rng
                )
            paths = np.stack(cols, axis=1)
            if policy == "ecmp":
                sh_ups = np.array(climbs[ps.name].shared_ids(up=True))
                sh_downs = np.array(climbs[pd.name].shared_ids(up=False))
                row_up, col_up = np.nonzero(np.isin(paths, sh_ups))
                row_dn, col_dn = np.nonzero(np.isin(paths, sh_downs))
                paths[row_up, col_up] = sh_up[row_up]
                paths[row_dn, col_dn] = sh_down[row_dn]
            valid = paths >= 0
            n_valid = valid.sum(axis=1)
            lengths.append(n_valid)
            indices.append(paths[valid])
            weights.append(np.ones(int(n_valid.sum())))
            f_conn.append(conn)
            f_frac.append(np.full(conn.size, 1.0 / (qps if policy == "ecmp" else 1)))
            hops[conn] = n_valid - 1  # links minus one: the switches crossed
    n_links = space.size
    all_len = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64)
    all_idx = np.concatenate(indices) if indices else np.zeros(0, dtype=np.int64)
    all_w = np.concatenate(weights) if weights else np.zeros(0)
    conn = np.concatenate(f_conn) if f_conn else np.zeros(0, dtype=np.int64)
    frac = np.concatenate(f_frac) if f_frac else np.zeros(0)
    # flows in connection order, as the families' routers give them (the class solves
    # rely on flow i being connection i when there is one flow per connection)
    order = np.argsort(conn, kind="stable")
    starts = np.concatenate([[0], np.cumsum(all_len)[:-1]])[order]
    lens = all_len[order]
    indptr = np.zeros(lens.size + 1, dtype=np.int64)
    np.cumsum(lens, out=indptr[1:])
    take = np.repeat(starts - indptr[:-1], lens) + np.arange(int(indptr[-1]))
    flows = FlowSet(indptr, all_idx[take], all_w[take], n_links)
    return RoutedFlows(
        flows=flows,
        link_capacity_Bps=np.concatenate([capacity_Bps, *space.caps]),
        link_class=np.concatenate([graph.link_class, *space.classes]).astype(np.int16),
        class_names=tuple(space.names),
        flow_of_connection=conn[order],
        flow_fraction=frac[order],
        switch_hops=hops,
        policy=policy,
    )
