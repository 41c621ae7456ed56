"""Routing on hypercubes of NVLink domains: e-cube, minimal adaptive and ECMP.

The graph (:mod:`fabric_model.topology.hypercube`) has one forwarding node per NVLink domain
(``u = 0 .. 2^d - 1``); dimension ``i`` joins ``u`` (bit ``i`` clear) and ``u | 2^i`` by ``c``
parallel cables, numbered dimension-major, then by the rank of ``u`` among the nodes with bit
``i`` clear; then one internal endpoint-to-domain link per NIC endpoint (link class -1), the
first and last hop of every path.

*Trunks*: the ``c`` parallel cables of a hop (node ``u``, dimension ``i``; the direction is
given by ``u``'s bit ``i``) form one bundle, link ``n_links + i 2^d + u`` of the link space,
capacity = the sum of its cables' capacities from ``capacity_Bps``;
:func:`bundle_members` lists them.

Policies
--------
``dor``
    E-cube routing: fix the differing bits from the lowest to the highest, each hop one
    trunk (deadlock-free, deterministic).
``adaptive``
    Minimal adaptive, oblivious form: split evenly over the ``h`` cyclic rotations of the
    e-cube order (``h`` = Hamming distance): rotation ``r`` fixes the differing bits
    ``b_r, b_{r+1}, ..., b_{r-1}`` in that order, each with weight ``1 / h`` on its trunks.
    Spreading evenly over *all* ``h!`` minimal paths cannot be written with a few bundles:
    it puts weight on ``h 2^(h-1)`` trunks per connection (114,688 at ``h = 14``). The
    rotations match it exactly on the first and the last hop (each differing dimension
    carries ``1 / h`` of the flow out of the source and into the destination), and put the
    middle hops on ``h`` of the ``2^(h-1)`` rows each dimension could be crossed in, with
    ``h^2`` entries per connection. Not congestion-aware between paths (fixed weights), only
    within a trunk.
``ecmp``
    E-cube, each queue pair hashed (seeded ``rng``) onto one cable of each hop's trunk.

Switch hops are the hypercube links crossed (the Hamming distance of the two domains), the
topology's hop definition; a connection inside one domain crosses none.
"""

from __future__ import annotations

import numpy as np

from fabric_model._jit import jit
from fabric_model.families import FAMILIES
from fabric_model.flows import FlowSet
from fabric_model.routing.base import RoutedFlows, check_policy, hash_choices
from fabric_model.routing.torus3d import _result, _switchless_labels
from fabric_model.topology import Topology

__all__ = ["HYPERCUBE_POLICIES", "bundle_members", "route_hypercube"]

#: The policies of the family registry's entry.
HYPERCUBE_POLICIES = FAMILIES["hypercube"].policies


def _shape(topo: Topology) -> tuple[int, int, int, int]:
    """Return ``(nodes N, dimensions d, cables per node and dimension c, cables N d c / 2)``."""
    p = topo.params
    n, d, c = int(p["n_nodes"]), int(p["dimensions"]), int(p["cables_per_dimension"])
    return n, d, c, n // 2 * d * c


def _cable(n_nodes: int, c: int, i: np.ndarray | int, u: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Directed link of parallel cable ``k`` of the hop from node ``u`` along dimension ``i``."""
    bit = (u >> i) & 1
    low = u & ~(np.int64(1) << i)
    rank = ((low >> (i + 1)) << i) | (low & ((np.int64(1) << i) - 1))
    return 2 * (i * (n_nodes // 2) * c + rank * c + k) + bit


def bundle_members(topo: Topology) -> tuple[np.ndarray, np.ndarray]:
    """Member cables of every trunk, as directed link ids of ``topo.graph``.

    Returns
    -------
    (indptr, links)
        CSR over trunks ``i 2^d + u`` (link ``topo.graph.n_links + that`` of the link space).
    """
    n, d, c, _ = _shape(topo)
    i = np.repeat(np.arange(d, dtype=np.int64), n)
    u = np.tile(np.arange(n, dtype=np.int64), d)
    k = np.arange(c, dtype=np.int64)
    links = _cable(n, c, i[:, None], u[:, None], k[None, :]).ravel()
    return np.arange(0, links.size + 1, max(c, 1), dtype=np.int64)[: n * d + 1], links


def _trunk_capacity(topo: Topology, cap: np.ndarray) -> np.ndarray:
    n, d, c, _ = _shape(topo)
    _, links = bundle_members(topo)
    return cap[links].reshape(n * d, c).sum(axis=1) if c else np.zeros(0)


def route_hypercube(
    topo: Topology,
    src: np.ndarray,
    dst: np.ndarray,
    policy: str,
    capacity_Bps: np.ndarray,
    *,
    qps: int = 1,
    rng: np.random.Generator | None = None,
) -> RoutedFlows:
    """Route connections on a hypercube (the :class:`~fabric_model.routing.base.Router` interface).

    Policies: ``dor``, ``adaptive`` or ``ecmp`` (module docstring). Link space: the graph's
    links, then (``dor``, ``adaptive``) the trunks.
    """
    check_policy("hypercube", policy, HYPERCUBE_POLICIES)
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    cap = np.asarray(capacity_Bps, dtype=np.float64)
    rng = rng or np.random.default_rng(0)
    g = topo.graph
    n_nodes, d, c, n_cables = _shape(topo)
    req = topo.request
    per_node = req.nics_per_gpu * req.nvlink_domain
    u, v = src // per_node, dst // per_node
    diff = u ^ v
    hops = np.zeros(src.size, dtype=np.int64)
    for i in range(d):
        hops += (diff >> i) & 1
    names, labels = _switchless_labels(topo)
    trunk0 = g.n_links
    n_space = g.n_links + n_nodes * d
    if policy == "adaptive":
        n = src.size
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(2 + hops * hops, out=indptr[1:])
        indices = np.empty(int(indptr[-1]), dtype=np.int64)
        weights = np.empty(indices.size)
        _rotations_fill(
            src,
            dst,
            u,
            v,
            np.int64(d),
            np.int64(n_nodes),
            np.int64(trunk0),
            np.int64(2 * n_cables),
            indptr,
            indices,
            weights,
        )
        return _result(
            topo,
            FlowSet(indptr, indices, weights, n_space),
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
    uc, vc = u[conn], v[conn]
    paths = np.full((n, d + 2), -1, dtype=np.int64)
    paths[:, 0] = 2 * (n_cables + src[conn])
    paths[:, -1] = 2 * (n_cables + dst[conn]) + 1
    for i in range(d):  # e-cube: bits below i already fixed to the destination's
        low = (np.int64(1) << i) - 1
        cur = (vc & low) | (uc & ~low)
        move = ((uc ^ vc) >> i) & 1 == 1
        if policy == "dor":
            link = trunk0 + i * n_nodes + cur
        else:
            link = _cable(n_nodes, c, i, cur, hash_choices(rng, n, c))
        paths[move, i + 1] = link[move]
    valid = paths >= 0
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(valid.sum(axis=1), out=indptr[1:])
    dor = policy == "dor"
    flows = FlowSet(indptr, paths[valid], np.ones(int(indptr[-1])), n_space if dor else g.n_links)
    return _result(
        topo,
        flows,
        _trunk_capacity(topo, cap) if dor else None,
        cap,
        labels,
        names,
        conn,
        np.full(n, 1.0 / n_qp),
        hops,
        policy,
    )


@jit
def _rotations_fill(
    src: np.ndarray,
    dst: np.ndarray,
    u: np.ndarray,
    v: np.ndarray,
    d: np.int64,
    n_nodes: np.int64,
    trunk0: np.int64,
    internal0: np.int64,
    indptr: np.ndarray,
    indices: np.ndarray,
    weights: np.ndarray,
) -> None:
    """Fill the adaptive paths: internal link in, ``h`` rotations of ``h`` trunks, link out."""
    bits = np.empty(64, np.int64)
    for f in range(src.size):
        p = indptr[f]
        indices[p] = internal0 + 2 * src[f]
        weights[p] = 1.0
        p += 1
        diff = u[f] ^ v[f]
        h = 0
        for i in range(d):
            if (diff >> i) & 1:
                bits[h] = i
                h += 1
        for r in range(h):
            cur = u[f]
            for q in range(h):
                b = bits[(r + q) % h]
                indices[p] = trunk0 + b * n_nodes + cur
                weights[p] = 1.0 / h
                p += 1
                cur ^= np.int64(1) << b
        indices[p] = internal0 + 2 * dst[f] + 1
        weights[p] = 1.0
