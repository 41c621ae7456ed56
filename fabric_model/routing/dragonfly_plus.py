"""Routing on dragonfly+ fabrics: minimal, Valiant, UGAL, adaptive (bundles) and ECMP.

Paths (switches crossed in brackets), with the builder's layout
(:mod:`fabric_model.topology.dragonfly_plus`): leaf ``l`` is in group ``l // a``; leaf uplink
``j`` goes to spine ``j`` of its group (``j mod S`` for a lone group); the ``m`` global cables
of groups ``u < v`` are copies ``c = 0 .. m-1`` whose end in group ``u`` sits on spine
``(((v - u - 1) mod g) m + c) mod up`` (the same formula from either end).

- same leaf: NIC up, NIC down [1];
- same group: leaf -> spine -> leaf [3];
- minimal, other group: leaf -> the spine holding global copy ``c`` -> global cable ``c`` ->
  the spine at its far end -> leaf [4]. The ``m`` copies are the equal-cost minimal paths;
- Valiant, other group: minimal to an intermediate group ``z``, then minimal from ``z``.
  The packet arrives in ``z`` on a spine holding a global cable from ``x`` and must leave
  from a spine holding one to ``y``. With ``m >= up`` every spine holds cables to every group
  and it goes straight on [5]; with ``m < up`` each pair's copies sit on a window of ``m``
  spines, and unless the windows of (z, x) and (z, y) are the same spines it bounces
  spine -> leaf -> spine in ``z`` [7] (the builder's ``valiant_max_hops``).

Bundles
-------
Congestion-aware spraying is written as bundles (see :mod:`fabric_model.routing.base`): the
*global* bundle of an ordered group pair (its ``m`` cables), and per leaf its up and its down
cables split into *spine parts* of ``q = gcd(m, up)`` consecutive spines (``P = up / q``
parts; one part of all cables for a lone group). The copies of a group pair start at a
multiple of ``m`` (mod ``up``), so every pair's window is a union of whole parts whose spines
hold equal numbers of its copies: a flow to another group puts on each part of its window
exactly the share of copies the part holds (``1 / (m / q)`` each when ``m < up``), a flow
within the group ``1 / P`` on every part. This is exactly an even spray over the equal-cost
minimal paths on a symmetric build, whatever ``m`` and ``up`` (the tests compare against an
explicit spray over all shortest paths), and capacity-aware within each bundle. At 131,072
GPUs of radix 64 (``m = 8``, ``up = 32``) a leaf has 4 parts of 8 spines; with ``m`` odd the
parts are single cables (no aggregation, still exact).

Policies
--------
``minimal``
    Static minimal routing, choices made from the destination's leaf-major id ``D`` (hosts
    numbered leaf by leaf, as for D-mod-k): intra-group spine ``D mod up``, global copy
    ``D mod m``; one cable per hop.
``adaptive``
    Minimal, sprayed: leaf-up parts, global bundle, leaf-down parts (above).
``valiant``
    Every inter-group connection goes through an intermediate group drawn uniformly from the
    other ``g - 2`` groups with the seeded ``rng``, sprayed on the same bundles as
    ``adaptive``. A bounce in ``z`` goes through one leaf of ``z``, assigned round-robin over
    the connections crossing ``z`` (so the transit load is spread evenly over its leaves),
    down the parts of the (z, x) window and up the parts of the (z, y) window. Spraying
    within each hop is what the textbook Valiant result assumes (about half the line rate
    under any pattern); static per-cable choices would add hash collisions on every one of
    its hops. Intra-group connections stay minimal (the group's leaf/spine is a Clos, leaving
    it cannot help); with fewer than 3 groups Valiant is minimal. With ``m >= up`` and ``up``
    not dividing ``m`` the spines of ``z`` hold unequal numbers of the two pairs' copies, and
    going straight on then spreads the second global hop slightly unevenly, which the
    global bundle ignores.
``ugal``
    Per connection, minimal (as ``adaptive``) or Valiant by comparing estimated path loads
    computed from the pattern's own demand (UGAL-G with connection counts for queues): the
    load of a global bundle is its connections per cable, ``B / b`` cables for a bundle of
    capacity ``B`` at line rate ``b`` (a degraded cable counts at its rate). A Valiant path
    crosses two global bundles of, on average, the pattern's mean load ``rho`` (inter-group
    connections per global cable), so the minimal path is preferred while its load stays at
    most ``max(1, 2 rho)``: the connections of each ordered group pair (x, y), taken in
    pattern order, keep the minimal path up to ``floor(max(1, 2 rho) B / b)`` and the rest
    go via Valiant. So Valiant is chosen only when the minimal bundle is oversubscribed by the
    pattern (more connections than cables, the brief's rule) *and* loaded beyond what a
    Valiant detour would meet; a uniform all-to-all (every pair at ``rho``) stays minimal,
    a group-to-group shift sends all but ``2 rho m`` connections per pair via Valiant.
    Intra-group connections are minimal.
``ecmp``
    Minimal, each queue pair hashed (seeded ``rng``) over the intra-group spines or the ``m``
    global copies (and over parallel leaf-spine cables in a lone group); one cable per hop.

Link spaces: ``minimal`` and ``ecmp`` use the graph's cables; ``adaptive``, ``valiant`` and
``ugal`` use the cables plus the bundles of :func:`bundle_members`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fabric_model.families import FAMILIES
from fabric_model.flows import FlowSet
from fabric_model.routing.base import RoutedFlows, check_policy, hash_choices, kept_per_fabric
from fabric_model.topology import Topology
from fabric_model.units import gbps_to_Bps

__all__ = ["DRAGONFLY_PLUS_POLICIES", "bundle_members", "route_dragonfly_plus"]

#: The policies of the family registry's entry.
DRAGONFLY_PLUS_POLICIES = FAMILIES["dragonfly-plus"].policies

_BUNDLE_CLASSES = ("leaf-up part bundle", "global bundle", "leaf-down part bundle")


@dataclass(frozen=True)
class _Layout:
    n_e: int  # NIC endpoints
    n_leaves: int
    up: int  # uplinks per leaf
    spg: int  # spines per group (= up unless there is one group)
    a: int  # leaves per (full) group
    g: int  # groups
    m: int  # global cables per group pair
    leaf_of_e: np.ndarray
    leaf_major: np.ndarray  # endpoint id renumbered leaf by leaf (D-mod-k order)
    leaves_in_group: np.ndarray

    @property
    def base_global(self) -> int:
        """Cable id of the first global cable."""
        return self.n_e + self.n_leaves * self.up

    def up_link(self, leaf: np.ndarray, j: np.ndarray) -> np.ndarray:
        """Directed link leaf -> spine over the leaf's uplink ``j``."""
        return 2 * (self.n_e + leaf * self.up + j)

    def down_link(self, leaf: np.ndarray, j: np.ndarray) -> np.ndarray:
        """Directed link spine -> leaf over the leaf's uplink ``j``."""
        return 2 * (self.n_e + leaf * self.up + j) + 1

    def spine_of_copy(self, u: np.ndarray, v: np.ndarray, c: np.ndarray) -> np.ndarray:
        """Spine (index in group ``u``) holding group ``u``'s end of copy ``c`` of pair (u, v)."""
        return (((v - u - 1) % self.g) * self.m + c) % self.up

    def global_link(self, u: np.ndarray, v: np.ndarray, c: np.ndarray) -> np.ndarray:
        """Directed link of copy ``c`` of the global cables from group ``u`` to group ``v``."""
        lo, hi = np.minimum(u, v), np.maximum(u, v)
        pair = lo * (self.g - 1) - lo * (lo - 1) // 2 + (hi - lo - 1)
        return 2 * (self.base_global + pair * self.m + c) + (u > v)

    def pair_bundle(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Index of the ordered group pair (u, v), u != v, in ``0 .. g (g - 1) - 1``."""
        return u * (self.g - 1) + v - (v > u)


def _layout(topo: Topology) -> _Layout:
    return kept_per_fabric(topo.graph, "dragonfly+ layout", lambda: _build_layout(topo))


def _build_layout(topo: Topology) -> _Layout:
    p = topo.params
    n_e = topo.n_endpoints
    g = topo.graph
    leaf_of_e = g.link_dst[0 : 2 * n_e : 2].astype(np.int64) - n_e
    order = np.argsort(leaf_of_e, kind="stable")
    leaf_major = np.empty(n_e, dtype=np.int64)
    leaf_major[order] = np.arange(n_e, dtype=np.int64)
    n_leaves, a, n_groups = int(p["n_leaves"]), int(p["leaves_per_group"]), int(p["n_groups"])
    leaves_in_group = np.bincount(np.arange(n_leaves) // a, minlength=n_groups)
    return _Layout(
        n_e,
        n_leaves,
        int(p["up_per_leaf"]),
        int(p["spines_per_group"]),
        a,
        n_groups,
        int(p["global_links_per_group_pair"]),
        leaf_of_e,
        leaf_major,
        leaves_in_group.astype(np.int64),
    )


def _part_size(lay: _Layout) -> int:
    """Spines per *spine part*: ``q = gcd(m, up)`` (all ``up`` spines for a lone group).

    Every group pair's global copies sit on a window of consecutive spine slots that starts
    at a multiple of ``m`` (mod ``up``), so each window is a union of whole parts, every
    spine of a part holding the same number of the pair's copies.
    """
    return lay.up if lay.g == 1 else math.gcd(lay.m, lay.up)


def bundle_members(topo: Topology) -> tuple[np.ndarray, np.ndarray]:
    """Member cables of every bundle of the bundled policies, as directed link ids.

    Bundles, numbered from ``topo.graph.n_links`` in the link space of ``adaptive``,
    ``valiant`` and ``ugal``: leaf-up parts (leaf ``l``, part ``p``: the up cables from ``l``
    to spines ``p q .. p q + q - 1``; index ``l P + p`` with ``P = up / q``), global (one per
    ordered group pair ``(u, v)``, index ``u (g - 1) + v - [v > u]``), leaf-down parts (as
    leaf-up, down cables). See :func:`_part_size` for ``q``.

    Returns
    -------
    (indptr, links)
        CSR over bundles of directed link ids; a bundle's capacity is the sum of its members'.
    """
    return kept_per_fabric(
        topo.graph, "dragonfly+ bundle members", lambda: _build_bundle_members(topo)
    )


def _build_bundle_members(topo: Topology) -> tuple[np.ndarray, np.ndarray]:
    lay = _layout(topo)
    q = _part_size(lay)
    leaf = np.repeat(np.arange(lay.n_leaves, dtype=np.int64), lay.up)
    j = np.tile(np.arange(lay.up, dtype=np.int64), lay.n_leaves)  # part-major within a leaf
    u, v = np.divmod(np.arange(lay.g * lay.g, dtype=np.int64), lay.g)
    u, v = u[u != v], v[u != v]  # ordered pairs in bundle order
    c = np.tile(np.arange(lay.m, dtype=np.int64), u.size)
    uu, vv = np.repeat(u, lay.m), np.repeat(v, lay.m)
    links = np.concatenate(
        [lay.up_link(leaf, j), lay.global_link(uu, vv, c), lay.down_link(leaf, j)]
    )
    n_parts = lay.n_leaves * (lay.up // q)
    sizes = np.concatenate([np.full(n_parts, q), np.full(u.size, lay.m), np.full(n_parts, q)])
    indptr = np.zeros(sizes.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=indptr[1:])
    indptr.flags.writeable = False  # kept per fabric and shared
    links.flags.writeable = False
    return indptr, links


def route_dragonfly_plus(
    topo: Topology,
    src: np.ndarray,
    dst: np.ndarray,
    policy: str,
    capacity_Bps: np.ndarray,
    *,
    qps: int = 1,
    rng: np.random.Generator | None = None,
) -> RoutedFlows:
    """Route connections on a dragonfly+ fabric (the :class:`~.base.Router` interface).

    Policies: ``minimal``, ``valiant``, ``ugal``, ``adaptive`` or ``ecmp`` (module
    docstring). Switch hops 1, 3, 4 (minimal) and 5 or 7 (Valiant).
    """
    check_policy("dragonfly-plus", policy, DRAGONFLY_PLUS_POLICIES)
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    cap = np.asarray(capacity_Bps, dtype=np.float64)
    rng = rng or np.random.default_rng(0)
    lay = _layout(topo)
    a_leaf, b_leaf = lay.leaf_of_e[src], lay.leaf_of_e[dst]
    x, y = a_leaf // lay.a, b_leaf // lay.a
    same_leaf = a_leaf == b_leaf
    inter = x != y
    hops = np.where(same_leaf, 1, np.where(inter, 4, 3)).astype(np.int64)
    if policy in ("adaptive", "valiant", "ugal"):
        return _bundled(
            topo, lay, policy, src, dst, a_leaf, b_leaf, x, y, same_leaf, inter, hops, cap, rng
        )
    n_qp = qps if policy == "ecmp" else 1
    conn = np.repeat(np.arange(src.size, dtype=np.int64), n_qp)
    n = conn.size
    s, d = src[conn], dst[conn]
    a_l, b_l, xs, ys = a_leaf[conn], b_leaf[conn], x[conn], y[conn]
    off, gl = ~same_leaf[conn], inter[conn]
    if policy == "ecmp":
        j = hash_choices(rng, n, lay.up)
        t = hash_choices(rng, n, lay.up // lay.spg)
        c = hash_choices(rng, n, max(lay.m, 1))
    else:
        dd = lay.leaf_major[d]
        j = dd % lay.up
        t = (dd // lay.up) % (lay.up // lay.spg)
        c = dd % max(lay.m, 1)
    paths = np.full((n, 5), -1, dtype=np.int64)
    paths[:, 0] = 2 * s
    paths[:, 4] = 2 * d + 1
    intra = off & ~gl
    j_down = j % lay.spg + lay.spg * t  # the destination leaf's cable to the same spine
    paths[intra, 1] = lay.up_link(a_l, j)[intra]
    paths[intra, 3] = lay.down_link(b_l, j_down)[intra]
    paths[gl, 1] = lay.up_link(a_l, lay.spine_of_copy(xs, ys, c))[gl]
    paths[gl, 2] = lay.global_link(xs, ys, c)[gl]
    paths[gl, 3] = lay.down_link(b_l, lay.spine_of_copy(ys, xs, c))[gl]
    valid = paths >= 0
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(valid.sum(axis=1), out=indptr[1:])
    flows = FlowSet(indptr, paths[valid], np.ones(int(indptr[-1])), topo.graph.n_links)
    return RoutedFlows(
        flows=flows,
        link_capacity_Bps=cap,
        link_class=np.asarray(topo.graph.link_class, dtype=np.int16),
        class_names=tuple(lc.name for lc in topo.links),
        flow_of_connection=conn,
        flow_fraction=np.full(n, 1.0 / n_qp),
        switch_hops=hops,
        policy=policy,
    )


def _ugal_minimal(
    topo: Topology, lay: _Layout, x: np.ndarray, y: np.ndarray, inter: np.ndarray, cap: np.ndarray
) -> np.ndarray:
    """UGAL: which inter-group connections keep the minimal path (module docstring)."""
    n = x.size
    line_Bps = gbps_to_Bps(topo.request.link_gbps)
    key = np.where(inter, x * lay.g + y, -1)
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n, dtype=np.int64) - np.searchsorted(sorted_key, sorted_key)
    pairs = np.unique(key[inter])
    pu, pv = np.divmod(pairs, lay.g)
    copies = np.arange(lay.m, dtype=np.int64)
    cables = cap[lay.global_link(pu[:, None], pv[:, None], copies[None, :])].sum(axis=1) / line_Bps
    base = lay.base_global
    all_global = cap[2 * base : 2 * (base + lay.m * lay.g * (lay.g - 1) // 2)].sum() / line_Bps
    mean_load = inter.sum() / all_global if all_global > 0 else 0.0
    keep = np.floor(cables * max(1.0, 2.0 * mean_load) + 1e-9)
    allowed = np.zeros(n)
    allowed[inter] = keep[np.searchsorted(pairs, key[inter])]
    return inter & (rank < allowed)


def _window(lay: _Layout, q: int, u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Spine parts of group ``u`` holding its ends of pair (u, v), and the share of each.

    Returns ``(parts, share)``, both of shape ``(n, w)``: ``w = m / q`` parts of equal share
    when ``m < up``; all ``P`` parts when ``m >= up`` (every spine holds ``floor(m / up)``
    copies, the ``m mod up`` spines from the window's start one more).
    """
    n_parts = lay.up // q
    if u.size == 0 or lay.g == 1:  # no other group to reach
        return np.zeros((u.size, 0), dtype=np.int64), np.zeros((u.size, 0))
    start = ((((v - u - 1) % lay.g) * lay.m) % lay.up) // q
    if lay.m < lay.up:
        w = lay.m // q
        parts = (start[:, None] + np.arange(w)[None, :]) % n_parts
        return parts, np.full(parts.shape, 1.0 / w)
    parts = np.broadcast_to(np.arange(n_parts), (u.size, n_parts))
    extra = ((parts - start[:, None]) % n_parts) < (lay.m % lay.up) // q
    return parts, q * (lay.m // lay.up + extra) / lay.m


def _bundled(
    topo: Topology,
    lay: _Layout,
    policy: str,
    src: np.ndarray,
    dst: np.ndarray,
    a_leaf: np.ndarray,
    b_leaf: np.ndarray,
    x: np.ndarray,
    y: np.ndarray,
    same_leaf: np.ndarray,
    inter: np.ndarray,
    hops: np.ndarray,
    cap: np.ndarray,
    rng: np.random.Generator,
) -> RoutedFlows:
    """Adaptive, Valiant and UGAL on the bundle link space (:func:`bundle_members`).

    Hops in path order, each a block of entries whose weights add up to 1: NIC up; the
    source leaf's up parts (all ``P`` at ``1 / P`` for a flow within the group, else the
    window of the first global pair); global pair 1; [Valiant bounce: the down parts of the
    window (z, x) at one leaf of ``z``, then that leaf's up parts of the window (z, y)];
    global pair 2 (Valiant); the destination leaf's down parts; NIC down.
    """
    g = topo.graph
    n = src.size
    q = _part_size(lay)
    n_parts = lay.up // q
    n_pairs = lay.g * (lay.g - 1)
    b_up = g.n_links
    b_gl = b_up + lay.n_leaves * n_parts
    b_down = b_gl + n_pairs
    n_space = b_down + lay.n_leaves * n_parts
    indptr_m, members = bundle_members(topo)
    owner = np.repeat(np.arange(indptr_m.size - 1, dtype=np.int64), np.diff(indptr_m))
    b_cap = np.bincount(owner, weights=cap[members], minlength=indptr_m.size - 1)
    capacity = np.concatenate([cap, np.where(b_cap > 0, b_cap, 1.0)])

    val = np.zeros(n, dtype=bool)
    if policy != "adaptive" and lay.g >= 3:
        val = inter.copy()
        if policy == "ugal":
            val &= ~_ugal_minimal(topo, lay, x, y, inter, cap)
    z = y.copy()  # the group the first global hop leads to
    k = int(val.sum())
    if k:  # intermediate group: uniform over the g - 2 groups other than x and y
        lo, hi = np.minimum(x[val], y[val]), np.maximum(x[val], y[val])
        zz = hash_choices(rng, k, lay.g - 2)
        zz = zz + (zz >= lo)
        z[val] = zz + (zz >= hi)
    all_parts = np.arange(n_parts, dtype=np.int64)

    blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (rows, ids, weights)

    def add(rows: np.ndarray, ids: np.ndarray, w: np.ndarray | float = 1.0) -> None:
        if rows.size:
            ids2 = ids.reshape(rows.size, -1)
            blocks.append((rows, ids2, np.broadcast_to(np.asarray(w, float), ids2.shape)))

    every = np.arange(n, dtype=np.int64)
    intra_rows = np.flatnonzero(~same_leaf & ~inter)
    inter_rows = np.flatnonzero(inter)
    add(every, 2 * src)
    add(intra_rows, b_up + a_leaf[intra_rows, None] * n_parts + all_parts, 1.0 / n_parts)
    parts, share = _window(lay, q, x[inter_rows], z[inter_rows])
    add(inter_rows, b_up + a_leaf[inter_rows, None] * n_parts + parts, share)
    add(inter_rows, b_gl + lay.pair_bundle(x[inter_rows], z[inter_rows]))
    vr = np.flatnonzero(val)
    if lay.m < lay.up:  # straight on only when both windows are the same spines
        same = (((x[vr] - z[vr] - 1) % lay.g) * lay.m) % lay.up == (
            ((y[vr] - z[vr] - 1) % lay.g) * lay.m
        ) % lay.up
        br = vr[~same]
    else:
        br = vr[:0]
    if br.size:  # bounce leaves of z assigned round-robin over the connections crossing z
        order = np.argsort(z[br], kind="stable")
        zs = z[br][order]
        rank = np.empty(br.size, dtype=np.int64)
        rank[order] = np.arange(br.size) - np.searchsorted(zs, zs)
        leaf = z[br] * lay.a + rank % lay.leaves_in_group[z[br]]
        parts, share = _window(lay, q, z[br], x[br])
        add(br, b_down + leaf[:, None] * n_parts + parts, share)
        parts, share = _window(lay, q, z[br], y[br])
        add(br, b_up + leaf[:, None] * n_parts + parts, share)
    add(vr, b_gl + lay.pair_bundle(z[vr], y[vr]))
    add(intra_rows, b_down + b_leaf[intra_rows, None] * n_parts + all_parts, 1.0 / n_parts)
    last = np.where(val, z, x)  # the group the last global hop comes from
    parts, share = _window(lay, q, y[inter_rows], last[inter_rows])
    add(inter_rows, b_down + b_leaf[inter_rows, None] * n_parts + parts, share)
    add(every, 2 * dst + 1)

    lengths = np.zeros(n, dtype=np.int64)
    for rows, ids, _ in blocks:
        lengths[rows] += ids.shape[1]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    indices = np.empty(int(indptr[-1]), dtype=np.int32)  # the flow set's dtype: no copy
    weights = np.empty(indices.size)
    filled = indptr[:-1].copy()
    for rows, ids, w in blocks:  # each row's entries in block order (a numba loop)
        from fabric_model.routing import _kernels  # numba, loaded on first use

        _kernels.fill_rows(filled, rows, ids, w, indices, weights)
    hops = hops.copy()
    hops[vr] = 5
    hops[br] = 7
    names = tuple(lc.name for lc in topo.links)
    nb = len(names)
    labels = np.concatenate(
        [
            np.asarray(g.link_class, dtype=np.int16),
            np.full(lay.n_leaves * n_parts, nb, np.int16),
            np.full(n_pairs, nb + 1, np.int16),
            np.full(lay.n_leaves * n_parts, nb + 2, np.int16),
        ]
    )
    return RoutedFlows(
        flows=FlowSet.built(indptr, indices, weights, n_space),  # checked in the tests
        link_capacity_Bps=capacity,
        link_class=labels,
        class_names=names + _BUNDLE_CLASSES,
        flow_of_connection=np.arange(n, dtype=np.int64),
        flow_fraction=np.ones(n),
        switch_hops=hops,
        policy=policy,
    )
