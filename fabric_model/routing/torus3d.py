"""Routing on 3D tori of NVLink domains: dimension-order, minimal adaptive and ECMP.

The graph (:mod:`fabric_model.topology.torus3d`) has one forwarding node per NVLink domain,
node ``u = x + X (y + Y z)``; per active dimension ``i`` (size ``L >= 2``) node ``u``'s ``c_i``
cables to its ``+1`` neighbour (``2 c_i`` cables per node pair and only from coordinate 0 when
``L = 2``); then one internal endpoint-to-domain link per NIC endpoint (link class -1). Every
path starts with the source endpoint's internal link into its domain and ends with the
destination's internal link out of its domain.

*Trunks*: the parallel cables of one hop (node ``u``, dimension, direction) are trunked, so a
hop is one bundle of the ``c_i`` (or ``2 c_i``) cables of dimension ``i``, capacity = the sum
of theirs taken from ``capacity_Bps``. Trunk ``(a, u, dir)`` (``a`` the active-dimension
index, ``dir`` 0 for ``+``, 1 for ``-``) is link ``n_links + 2 (a N + u) + dir`` of the link
space; :func:`bundle_members` lists the members. Size-2 dimensions only use ``dir = 0`` (both
neighbours are the same node).

Policies
--------
``dor``
    Dimension order X, then Y, then Z; in each dimension the shorter way round the ring,
    ties (distance exactly ``L / 2``) in the ``+`` direction; each hop one trunk.
``adaptive``
    Minimal adaptive, oblivious form: the connection is split evenly over the dimension
    orders (the 3! = 6 orders, i.e. evenly over the orders of the dimensions it has to
    cross), each a dimension-order path on trunks, and in a dimension where the distance is
    exactly ``L / 2`` (``L > 2``) evenly over the two directions. So dimension ``i`` is
    crossed with weight 1/3 in the source's row (it goes first), 1/3 in the destination's
    (last) and 1/6 in each of the two mixed rows (second), merged where rows coincide. The
    first hop is spread evenly over the dimensions to cross, as a minimal adaptive router
    does; the split is not congestion-aware between orders (the max-min solve sees fixed
    weights), only within a trunk.
``ecmp``
    ``dor``, with each queue pair hashed (seeded ``rng``) onto one cable of each hop's
    trunk.

Switch hops are the torus links crossed (the sum of the ring distances), the topology's hop
definition. A connection inside one domain crosses no torus link (its two internal links).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabric_model._jit import jit
from fabric_model.families import FAMILIES
from fabric_model.flows import FlowSet
from fabric_model.routing.base import RoutedFlows, check_policy, hash_choices
from fabric_model.topology import Topology

__all__ = ["TORUS_POLICIES", "bundle_members", "route_torus3d"]

#: The policies of the family registry's entry.
TORUS_POLICIES = FAMILIES["torus-3d"].policies

#: Class name of the internal endpoint-to-domain links (``link_class = -1`` in the graph).
INTERNAL_CLASS_NAME = "internal"


@dataclass(frozen=True)
class _Layout:
    n_e: int
    n_nodes: int
    dims: np.ndarray  # (3,) ring sizes
    stride: np.ndarray  # (3,) node-id strides
    active: np.ndarray  # (3,) active-dimension index, -1 for a size-1 dimension
    cable_base: np.ndarray  # (3,) first cable id of each active dimension
    c: np.ndarray  # (3,) cables per direction of each dimension (0 if inactive)
    n_cables: int  # torus cables (internal links come after)
    node_of_e: np.ndarray


def _layout(topo: Topology) -> _Layout:
    p = topo.params
    dims = np.array(p["dims"], dtype=np.int64)
    n_nodes = int(p["n_nodes"])
    c = np.array(p["cables_per_direction_by_dim"], dtype=np.int64)
    stride = np.array([1, dims[0], dims[0] * dims[1]], dtype=np.int64)
    active = np.full(3, -1, dtype=np.int64)
    cable_base = np.zeros(3, dtype=np.int64)
    n_active, first = 0, 0
    for i in range(3):
        if dims[i] >= 2:
            active[i] = n_active
            cable_base[i] = first
            first += n_nodes * int(c[i])  # L > 2: N nodes x c_i; L = 2: N/2 pairs x 2c_i
            n_active += 1
    req = topo.request
    gpu = np.arange(topo.n_endpoints, dtype=np.int64) // req.nics_per_gpu
    node_of_e = gpu // req.nvlink_domain
    return _Layout(topo.n_endpoints, n_nodes, dims, stride, active, cable_base, c, first, node_of_e)


def _cable(lay: _Layout, i: int, u: np.ndarray, direction: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Directed link of parallel cable ``k`` of the hop from node ``u`` along dimension ``i``."""
    length, st = int(lay.dims[i]), int(lay.stride[i])
    coord = (u // st) % length
    if length == 2:
        low = np.where(coord == 0, u, u - st)  # the coordinate-0 end owns the cables
        rank = (low // (2 * st)) * st + low % st
        return 2 * (lay.cable_base[i] + rank * 2 * lay.c[i] + k) + (coord == 1)
    back = u + st * ((coord - 1) % length - coord)
    owner = np.where(direction == 0, u, back)
    return 2 * (lay.cable_base[i] + owner * lay.c[i] + k) + (direction == 1)


def _cables_per_hop(lay: _Layout, i: int) -> int:
    return int(2 * lay.c[i] if lay.dims[i] == 2 else lay.c[i])


def bundle_members(topo: Topology) -> tuple[np.ndarray, np.ndarray]:
    """Member cables of every trunk, as directed link ids of ``topo.graph``.

    Returns
    -------
    (indptr, links)
        CSR over trunks ``2 (a N + u) + dir`` (link ``topo.graph.n_links + that`` of the link
        space); unused trunks (the ``-`` side of a size-2 dimension) are empty.
    """
    lay = _layout(topo)
    n = lay.n_nodes
    parts, sizes = [], []
    for i in range(3):
        if lay.active[i] < 0:
            continue
        per = _cables_per_hop(lay, i)
        u = np.repeat(np.arange(n, dtype=np.int64), 2)
        direction = np.tile(np.array([0, 1], dtype=np.int64), n)
        used = direction == 0 if lay.dims[i] == 2 else np.ones(2 * n, dtype=bool)
        k = np.arange(per, dtype=np.int64)
        links = _cable(lay, i, u[:, None], direction[:, None], k[None, :])
        parts.append(links[used].ravel())
        sizes.append(np.where(used, per, 0))
    size = np.concatenate(sizes) if sizes else np.zeros(0, dtype=np.int64)
    indptr = np.zeros(size.size + 1, dtype=np.int64)
    np.cumsum(size, out=indptr[1:])
    return indptr, np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _trunk_capacity(topo: Topology, cap: np.ndarray) -> np.ndarray:
    indptr, members = bundle_members(topo)
    owner = np.repeat(np.arange(indptr.size - 1, dtype=np.int64), np.diff(indptr))
    b_cap = np.bincount(owner, weights=cap[members], minlength=indptr.size - 1)
    return np.where(b_cap > 0, b_cap, 1.0)


def _ring_moves(
    lay: _Layout, s_node: np.ndarray, d_node: np.ndarray, i: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per connection in dimension ``i``: source coordinate, hops, direction (0 +, 1 -), tie."""
    length, st = int(lay.dims[i]), int(lay.stride[i])
    s = (s_node // st) % length
    t = (d_node // st) % length
    fwd = (t - s) % length
    back = (length - fwd) % length
    plus = fwd <= back
    h = np.where(plus, fwd, back)
    tie = (fwd == back) & (fwd > 0) & (length > 2)
    return s, h, np.where(plus, 0, 1), tie


def route_torus3d(
    topo: Topology,
    src: np.ndarray,
    dst: np.ndarray,
    policy: str,
    capacity_Bps: np.ndarray,
    *,
    qps: int = 1,
    rng: np.random.Generator | None = None,
) -> RoutedFlows:
    """Route connections on a 3D torus (the :class:`~fabric_model.routing.base.Router` interface).

    Policies: ``dor``, ``adaptive`` or ``ecmp`` (module docstring). Link space: the graph's
    links (cables and internal links), then (``dor``, ``adaptive``) the trunks.
    """
    check_policy("torus-3d", policy, TORUS_POLICIES)
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    cap = np.asarray(capacity_Bps, dtype=np.float64)
    rng = rng or np.random.default_rng(0)
    lay = _layout(topo)
    g = topo.graph
    n_trunks = 2 * int((lay.active >= 0).sum()) * lay.n_nodes
    s_node, d_node = lay.node_of_e[src], lay.node_of_e[dst]
    moves = [_ring_moves(lay, s_node, d_node, i) if lay.active[i] >= 0 else None for i in range(3)]
    hops = sum((mv[1] for mv in moves if mv is not None), np.zeros(src.size, dtype=np.int64))
    internal = 2 * lay.n_cables
    names, labels = _switchless_labels(topo)
    if policy == "adaptive":
        n = src.size
        indptr = np.zeros(n + 1, dtype=np.int64)
        _adaptive_count(s_node, d_node, lay.dims, lay.stride, lay.active, indptr)
        indices = np.empty(int(indptr[-1]), dtype=np.int64)
        weights = np.empty(indices.size)
        _adaptive_fill(
            src,
            dst,
            s_node,
            d_node,
            lay.dims,
            lay.stride,
            lay.active,
            np.int64(lay.n_nodes),
            np.int64(g.n_links),
            np.int64(internal),
            indptr,
            indices,
            weights,
        )
        return _result(
            topo,
            FlowSet(indptr, indices, weights, g.n_links + n_trunks),
            _trunk_capacity(topo, cap),
            cap,
            labels,
            names,
            np.arange(n, dtype=np.int64),
            np.ones(n),
            hops,
            policy,
        )
    n_qp = qps if policy == "ecmp" else 1
    conn = np.repeat(np.arange(src.size, dtype=np.int64), n_qp)
    n = conn.size
    cols = [(2 * (lay.n_cables + src[conn]))[:, None]]
    for i in range(3):  # X, then Y, then Z
        mv = moves[i]
        if mv is None:
            continue
        s, h, direction, _ = (v[conn] for v in mv)
        length, st = int(lay.dims[i]), int(lay.stride[i])
        # the ring crossed: dimensions before i already at the destination's coordinates,
        # dimensions after i still at the source's
        cur = d_node[conn] % st + (s_node[conn] // st) * st
        row_base = cur - ((cur // st) % length) * st
        k = np.arange(max(int(h.max(initial=0)), 0), dtype=np.int64)[None, :]
        step = np.where(direction == 0, 1, -1)[:, None]
        u = row_base[:, None] + st * ((s[:, None] + step * k) % length)
        if policy == "dor":
            link = g.n_links + 2 * (lay.active[i] * lay.n_nodes + u) + direction[:, None]
        else:
            pick = hash_choices(rng, u.size, _cables_per_hop(lay, i)).reshape(u.shape)
            link = _cable(lay, i, u, np.broadcast_to(direction[:, None], u.shape), pick)
        cols.append(np.where(k < h[:, None], link, -1))
    cols.append((2 * (lay.n_cables + dst[conn]) + 1)[:, None])
    paths = np.concatenate(cols, axis=1)
    valid = paths >= 0
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(valid.sum(axis=1), out=indptr[1:])
    n_space = g.n_links + (n_trunks if policy == "dor" else 0)
    flows = FlowSet(indptr, paths[valid], np.ones(int(indptr[-1])), n_space)
    trunks = _trunk_capacity(topo, cap) if policy == "dor" else None
    return _result(
        topo, flows, trunks, cap, labels, names, conn, np.full(n, 1.0 / n_qp), hops, policy
    )


def _switchless_labels(topo: Topology) -> tuple[tuple[str, ...], np.ndarray]:
    """Class names (cable classes, then ``internal``) and the graph links' labels."""
    names = (*(lc.name for lc in topo.links), INTERNAL_CLASS_NAME)
    cls = np.asarray(topo.graph.link_class, dtype=np.int16)
    return names, np.where(cls < 0, len(names) - 1, cls).astype(np.int16)


def _result(
    topo: Topology,
    flows: FlowSet,
    trunk_cap: np.ndarray | None,
    cap: np.ndarray,
    labels: np.ndarray,
    names: tuple[str, ...],
    conn: np.ndarray,
    frac: np.ndarray,
    hops: np.ndarray,
    policy: str,
    trunk_name: str = "trunk bundle",
) -> RoutedFlows:
    """Assemble a switchless result; trunks (if any) follow the graph's links."""
    if trunk_cap is not None:
        cap = np.concatenate([cap, trunk_cap])
        labels = np.concatenate([labels, np.full(trunk_cap.size, len(names), np.int16)])
        names = (*names, trunk_name)
    return RoutedFlows(
        flows=flows,
        link_capacity_Bps=cap,
        link_class=labels,
        class_names=names,
        flow_of_connection=conn,
        flow_fraction=frac,
        switch_hops=hops,
        policy=policy,
    )


# --------------------------------------------------------------------------------------
# adaptive: kernels over connections (entry counts vary per connection)
# --------------------------------------------------------------------------------------


@jit
def _segments(
    s: np.ndarray,
    t: np.ndarray,
    i: int,
    j: int,
    k: int,
    out_j: np.ndarray,
    out_k: np.ndarray,
    out_w: np.ndarray,
) -> int:
    """Rows (coordinates j, k) in which dimension ``i`` is crossed, and their weights.

    Averaged over the 6 dimension orders: both others at the source (``i`` first, 1/3), one
    moved (``i`` second, 1/6 each), both at the destination (``i`` last, 1/3). Rows that
    coincide (a dimension with nothing to cross) are merged.
    """
    cand_j = (s[j], t[j], s[j], t[j])
    cand_k = (s[k], s[k], t[k], t[k])
    cand_w = (1.0 / 3.0, 1.0 / 6.0, 1.0 / 6.0, 1.0 / 3.0)
    n = 0
    for q in range(4):
        merged = False
        for r in range(n):
            if out_j[r] == cand_j[q] and out_k[r] == cand_k[q]:
                out_w[r] += cand_w[q]
                merged = True
                break
        if not merged:
            out_j[n] = cand_j[q]
            out_k[n] = cand_k[q]
            out_w[n] = cand_w[q]
            n += 1
    return n


@jit
def _adaptive_count(
    s_node: np.ndarray,
    d_node: np.ndarray,
    dims: np.ndarray,
    stride: np.ndarray,
    active: np.ndarray,
    indptr: np.ndarray,
) -> None:
    """Write the CSR row pointer of the adaptive paths (entries per connection)."""
    s = np.empty(3, np.int64)
    t = np.empty(3, np.int64)
    rj = np.empty(4, np.int64)
    rk = np.empty(4, np.int64)
    rw = np.empty(4, np.float64)
    indptr[0] = 0
    for f in range(s_node.size):
        for i in range(3):
            s[i] = (s_node[f] // stride[i]) % dims[i]
            t[i] = (d_node[f] // stride[i]) % dims[i]
        total = 2
        for i in range(3):
            if active[i] < 0 or s[i] == t[i]:
                continue
            length = dims[i]
            fwd = (t[i] - s[i]) % length
            back = length - fwd
            h = min(fwd, back)
            n_dir = 2 if (fwd == back and length > 2) else 1
            n_rows = _segments(s, t, i, (i + 1) % 3, (i + 2) % 3, rj, rk, rw)
            total += n_rows * n_dir * h
        indptr[f + 1] = indptr[f] + total


@jit
def _adaptive_fill(
    src: np.ndarray,
    dst: np.ndarray,
    s_node: np.ndarray,
    d_node: np.ndarray,
    dims: np.ndarray,
    stride: np.ndarray,
    active: np.ndarray,
    n_nodes: np.int64,
    trunk0: np.int64,
    internal0: np.int64,
    indptr: np.ndarray,
    indices: np.ndarray,
    weights: np.ndarray,
) -> None:
    """Fill the adaptive paths: internal link in, weighted trunks, internal link out."""
    s = np.empty(3, np.int64)
    t = np.empty(3, np.int64)
    rj = np.empty(4, np.int64)
    rk = np.empty(4, np.int64)
    rw = np.empty(4, np.float64)
    for f in range(s_node.size):
        for i in range(3):
            s[i] = (s_node[f] // stride[i]) % dims[i]
            t[i] = (d_node[f] // stride[i]) % dims[i]
        p = indptr[f]
        indices[p] = internal0 + 2 * src[f]
        weights[p] = 1.0
        p += 1
        for i in range(3):
            if active[i] < 0 or s[i] == t[i]:
                continue
            length = dims[i]
            fwd = (t[i] - s[i]) % length
            back = length - fwd
            tie = fwd == back and length > 2
            j, k = (i + 1) % 3, (i + 2) % 3
            n_rows = _segments(s, t, i, j, k, rj, rk, rw)
            for r in range(n_rows):
                row = rj[r] * stride[j] + rk[r] * stride[k]
                for direction in range(2):
                    if direction == 0 and not (fwd <= back):
                        continue
                    if direction == 1 and not (back < fwd or tie):
                        continue
                    h = fwd if direction == 0 else back
                    w = rw[r] * (0.5 if tie else 1.0)
                    step = 1 if direction == 0 else -1
                    for q in range(h):
                        coord = (s[i] + step * q) % length
                        u = row + coord * stride[i]
                        indices[p] = trunk0 + 2 * (active[i] * n_nodes + u) + direction
                        weights[p] = w
                        p += 1
        indices[p] = internal0 + 2 * dst[f] + 1
        weights[p] = 1.0
