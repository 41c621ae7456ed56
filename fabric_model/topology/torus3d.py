"""3D-torus fabrics: switchless, one torus node per NVLink domain.

Design rules
------------
- A torus node is one NVLink domain (``n_nodes = n_gpus / nvlink_domain``; every domain must
  be full, else :class:`InfeasibleDesignError` on ``cluster.n_gpus`` with the nearest valid
  GPU counts). Its ``P = nvlink_domain x nics_per_gpu`` NIC ports are its torus ports; the
  GPUs of a domain forward for each other over NVLink.
- Dimensions ``X >= Y >= Z`` with ``X Y Z = n_nodes`` exactly, as cubic as possible (the
  smallest ``X``, then the smallest ``Y``); a prime node count gives a ring ``N x 1 x 1``.
- Each of the 6 torus directions gets at least ``c = P // 6`` cables (``c >= 1``, else
  :class:`InfeasibleDesignError` on ``cluster.nics_per_gpu``). *Every NIC is wired*: the
  ``r = P - 2 k c`` ports left over (``k`` active dimensions; ``r = P mod 6`` for a full 3D
  torus) become extra parallel cables, pairwise (one more cable per direction of a dimension
  uses two ports of every node, one towards ``+`` and one from ``-``, so both directions of a
  dimension stay equal), ``floor(r / 2)`` extra cables dealt round-robin over the active
  dimensions from the longest (``x``, then ``y``, then ``z``). Dimension ``i`` thus has
  ``c_i = c + e_i`` cables per direction; one port stays unused only when ``r`` is odd. A
  dimension of size 2 joins each node pair with ``2 c_i`` parallel cables, a dimension of size
  1 has no cables. Cables per dimension of size ``L >= 2``: ``n_nodes c_i`` (for ``L = 2``:
  ``n_nodes / 2`` pairs x ``2 c_i``); ``3 n_nodes c`` for a full 3D torus when ``P`` is a
  multiple of 6 (degree 6, ``3N`` links: hardware-and-cost-facts 6.5). Example: 8 NICs per
  H100 domain give ``c = 1`` and ``r = 2``, so ``c_x = 2``, ``c_y = c_z = 1``.
- Hops: links traversed between the two domains under minimal (dimension-order) routing,
  the sum of the per-dimension ring distances ``min(d, L - d)``; the packet crosses
  ``hops - 1`` intermediate domains. Diameter ``floor(X/2) + floor(Y/2) + floor(Z/2)``.
  The histogram is exact: the convolution of the three per-dimension distance counts, over
  ordered GPU pairs in different domains (every domain has the same GPU count).
- Bisection (one direction): cut across dimension ``i`` of size ``L_i``; the cut crosses two
  planes of ``n_nodes / L_i`` node pairs (the wrap-around) with ``c_i`` cables each,
  ``2 n_nodes c_i / L_i`` cables (for ``L_i = 2`` the two planes are the same node pairs with
  ``2 c_i`` cables: ``n_nodes c_i``, the same formula), times the link rate; the bisection is
  the smallest such cut (across the longest dimension when every ``c_i = c``).

Graph (modelling choice)
------------------------
Nodes ``0 .. E-1`` are the NIC endpoints, then one *forwarding node* per domain (tier 1),
node ``n = x + X (y + Y z)`` at graph id ``E + n``. Cables: per active dimension (x, y, z), node
``n`` to its ``+1`` neighbour (``c_i`` copies; for ``L = 2`` only from coordinate 0, ``2 c_i``
copies), node-major. Each endpoint then attaches to its domain's forwarding node by an
*internal* aggregation link (NVLink and the NIC port together) of capacity
``P x link rate``, so it is never the bottleneck: it is not a cable, has ``link_class = -1``
(:data:`INTERNAL_LINK_CLASS`) and comes after the cables. The graph therefore has
``2 (n_links + n_endpoints)`` directed links. This aggregates the domain: where inside a
domain a torus cable lands is not modelled.
"""

from __future__ import annotations

import math

import numpy as np

from fabric_model.errors import InfeasibleDesignError
from fabric_model.topology.base import (
    FabricGraph,
    LinkClass,
    Topology,
    TopologyRequest,
    graph_from_cables,
    hop_histogram,
)
from fabric_model.units import gbps_to_GBps

__all__ = [
    "INTERNAL_LINK_CLASS",
    "build_torus3d",
    "cables_per_dimension",
    "full_domain_count",
    "switchless_graph",
    "torus_dims",
]

#: ``FabricGraph.link_class`` of an internal endpoint-to-forwarding-node link (not a cable).
INTERNAL_LINK_CLASS = -1

_DIM_NAMES = ("x", "y", "z")


def full_domain_count(req: TopologyRequest, family: str) -> int:
    """Return the number of NVLink domains, requiring every domain to be full.

    Raises
    ------
    InfeasibleDesignError
        On ``cluster.n_gpus`` when it is not a positive multiple of ``nvlink_domain``; the
        message names the nearest valid GPU counts.
    """
    dom = req.nvlink_domain
    if req.n_gpus % dom == 0 and req.n_gpus > 0:
        return req.n_gpus // dom
    below, above = (req.n_gpus // dom) * dom, (req.n_gpus // dom + 1) * dom
    nearest = f"{below:,} or {above:,}" if below > 0 else f"{above:,}"
    raise InfeasibleDesignError(
        "cluster.n_gpus",
        f"a {family} node is one full NVLink domain of {dom} GPUs (cluster.nvlink_domain), "
        f"so cluster.n_gpus must be a multiple of {dom}; got {req.n_gpus:,}. Nearest valid: "
        f"{nearest}",
    )


def torus_dims(n_nodes: int) -> tuple[int, int, int]:
    """Return ``(X, Y, Z)``, ``X >= Y >= Z``, ``X Y Z = n_nodes``, as cubic as possible.

    Among exact factorizations, the smallest ``X`` wins, then the smallest ``Y``.

    Parameters
    ----------
    n_nodes
        Torus nodes, >= 1.

    Returns
    -------
    tuple of int
        The dimensions; ``(n, 1, 1)`` for a prime ``n`` (a ring).
    """
    best = (n_nodes, 1, 1)
    z = 1
    while z * z * z <= n_nodes:
        if n_nodes % z == 0:
            rest = n_nodes // z
            ys = np.arange(z, math.isqrt(rest) + 1, dtype=np.int64)
            ys = ys[rest % ys == 0]
            if ys.size:
                y = int(ys[-1])  # the largest y <= sqrt(rest) gives the smallest x
                cand = (rest // y, y, z)
                if (cand[0], cand[1]) < (best[0], best[1]):
                    best = cand
        z += 1
    return best


def cables_per_dimension(ports: int, active: list[int]) -> tuple[int, int, int]:
    """Return the cables per direction of each dimension, wiring every port it can.

    Parameters
    ----------
    ports
        NIC ports per torus node ``P``.
    active
        Indices (0 x, 1 y, 2 z) of the dimensions of size >= 2, longest first.

    Returns
    -------
    tuple of int
        ``(c_x, c_y, c_z)``, 0 for an inactive dimension.

    Notes
    -----
    ``c = P // 6`` per direction everywhere; the ``r = P - 2 k c`` leftover ports of the ``k``
    active dimensions give ``floor(r / 2)`` extra cables per direction, dealt round-robin from
    the longest dimension (a cable per direction takes two ports of every node, one out
    towards ``+``, one in from ``-``). ``P = 8``, 3D: ``(2, 1, 1)``; ``P = 16``: ``(3, 3, 2)``.
    """
    c = ports // 6
    out = [0, 0, 0]
    if not active:
        return (0, 0, 0)
    for i in active:
        out[i] = c
    for q in range((ports - 2 * c * len(active)) // 2):
        out[active[q % len(active)]] += 1
    return (out[0], out[1], out[2])


def _ring_distance_counts(length: int) -> np.ndarray:
    """Destinations at each ring distance from one node of a ring of ``length`` nodes."""
    d = np.arange(length, dtype=np.int64)
    return np.bincount(np.minimum(d, length - d)).astype(np.float64)


def switchless_graph(
    req: TopologyRequest,
    n_nodes: int,
    cable_a: np.ndarray,
    cable_b: np.ndarray,
    cable_class: np.ndarray,
    ports_per_node: int,
) -> FabricGraph:
    """Build the graph of a switchless fabric whose nodes are NVLink domains.

    Parameters
    ----------
    req
        The request (endpoints, link rate).
    n_nodes
        Forwarding nodes (domains); graph ids ``E .. E + n_nodes - 1``.
    cable_a, cable_b, cable_class
        Cables between forwarding nodes (node indices ``0 .. n_nodes-1``) and their class.
    ports_per_node
        NIC ports per domain ``P``; an internal link has capacity ``P x link_gbps``.

    Returns
    -------
    FabricGraph
        The cables first (``2 n_cables`` directed links), then one internal link per
        endpoint to its forwarding node (``2 E`` directed links, class
        :data:`INTERNAL_LINK_CLASS`).
    """
    n_e = req.n_endpoints
    e = np.arange(n_e, dtype=np.int64)
    node_of_e = (e // req.nics_per_gpu) // req.nvlink_domain
    n_c = cable_a.shape[0]
    a = np.concatenate([n_e + cable_a.astype(np.int64), e])
    b = np.concatenate([n_e + cable_b.astype(np.int64), n_e + node_of_e])
    cls = np.concatenate([cable_class.astype(np.int64), np.full(n_e, INTERNAL_LINK_CLASS)])
    gbps = np.concatenate(
        [np.full(n_c, float(req.link_gbps)), np.full(n_e, float(req.link_gbps) * ports_per_node)]
    )
    tier = np.concatenate([np.zeros(n_e), np.ones(n_nodes)])
    return graph_from_cables(n_e + n_nodes, tier, a, b, cls, gbps, req.n_gpus, req.nics_per_gpu)


def build_torus3d(req: TopologyRequest) -> Topology:
    """Size a 3D torus of NVLink domains for ``req`` and return it with exact counts.

    Parameters
    ----------
    req
        The request; ``radix`` is ignored (switchless), ``direct_link_m`` is the cable
        length.

    Returns
    -------
    Topology
        Family ``torus-3d``, ``tiers = 0``, no switches, one link class per active dimension
        (``torus-x``, ``torus-y``, ``torus-z``) with ends ``("nic", "nic")``.

    Raises
    ------
    InfeasibleDesignError
        On ``cluster.n_gpus`` when a domain would be partial; on ``cluster.nics_per_gpu``
        when a domain has fewer than 6 NIC ports.

    Notes
    -----
    ``N = XYZ`` nodes, ``c_i = P // 6 + e_i`` cables per direction of dimension ``i`` (every
    port wired, :func:`cables_per_dimension`), ``3 N c`` cables for a full 3D torus when ``P``
    is a multiple of 6, diameter ``floor(X/2) + floor(Y/2) + floor(Z/2)``, bisection
    ``min_i 2 N c_i / L_i`` cables (``2 N c / X`` when ``P`` is a multiple of 6)
    (hardware-and-cost-facts 6.5, derived; TPU v4 pods are 4x4x4-cube tori, Jouppi et al.,
    ISCA 2023).
    """
    n_nodes = full_domain_count(req, "torus-3d")
    ports = req.nvlink_domain * req.nics_per_gpu
    c = ports // 6
    dims = torus_dims(n_nodes)
    if n_nodes > 1 and c < 1:
        need = -(-6 // req.nvlink_domain)
        raise InfeasibleDesignError(
            "cluster.nics_per_gpu",
            f"a 3D torus gives each of its 6 directions at least one cable, so an NVLink "
            f"domain needs >= 6 NIC ports; it has cluster.nvlink_domain x "
            f"cluster.nics_per_gpu = {req.nvlink_domain} x {req.nics_per_gpu} = {ports}. "
            f"Allowed: cluster.nics_per_gpu >= {need}, or a larger cluster.nvlink_domain",
        )
    active = [(i, length) for i, length in enumerate(dims) if length >= 2]
    per_dim = cables_per_dimension(ports, [i for i, _ in active]) if n_nodes > 1 else (0, 0, 0)
    rate = gbps_to_GBps(req.link_gbps)
    links = tuple(
        LinkClass(
            f"torus-{_DIM_NAMES[i]}",
            n_nodes * per_dim[i],
            req.link_gbps,
            req.direct_link_m,
            ("nic", "nic"),
        )
        for i, _ in active
    )
    counts = np.convolve(
        np.convolve(_ring_distance_counts(dims[0]), _ring_distance_counts(dims[1])),
        _ring_distance_counts(dims[2]),
    )
    gpu_pairs_per_node_pair = float(req.nvlink_domain) ** 2
    pair_counts = {
        d: float(counts[d]) * n_nodes * gpu_pairs_per_node_pair for d in range(1, counts.size)
    }
    hist, hmax, hmean = hop_histogram(pair_counts)
    cut_cables = min((2 * n_nodes * per_dim[i] // length for i, length in active), default=0)
    used = 2 * sum(per_dim)
    shape = " x ".join(str(d) for d in dims)

    notes = [f"3D torus of {n_nodes:,} NVLink domain(s) ({req.nvlink_domain} GPUs each): {shape}"]
    if n_nodes == 1:
        notes.append("a single NVLink domain: no torus cables, all traffic stays on NVLink")
    elif len(active) == 1:
        notes.append(f"{n_nodes:,} is prime: the torus is a ring")
    elif len(active) == 2:
        notes.append("the node count factors into two dimensions only: a 2D torus")
    if any(length == 2 for _, length in active):
        notes.append("a dimension of size 2 joins each node pair with 2 c_i parallel cables")
    if n_nodes > 1:
        by_dim = ", ".join(f"{_DIM_NAMES[i]} {per_dim[i]}" for i, _ in active)
        notes.append(
            f"cables per direction: {by_dim} (the {ports - 2 * c * len(active)} ports beyond "
            f"{c} per direction are extra cables in the longest dimensions); {used} of "
            f"{ports} NIC ports used per domain"
            + (f", {ports - used} unused (an odd leftover)" if ports > used else "")
        )
    notes.append(
        "hops = torus links between the two domains (minimal routing); the graph joins each "
        "NIC endpoint to its domain's forwarding node by an internal aggregation link"
    )

    def graph() -> FabricGraph:
        node = np.arange(n_nodes, dtype=np.int64)
        stride = (1, dims[0], dims[0] * dims[1])
        a_parts, b_parts, cls_parts = [], [], []
        for cls_id, (i, length) in enumerate(active):
            coord = (node // stride[i]) % length
            nbr = node + stride[i] * ((coord + 1) % length - coord)
            src = node if length > 2 else node[coord == 0]
            reps = per_dim[i] if length > 2 else 2 * per_dim[i]
            a_parts.append(np.repeat(src, reps))
            b_parts.append(np.repeat(nbr[src], reps))
            cls_parts.append(np.full(src.size * reps, cls_id, dtype=np.int64))
        empty = np.zeros(0, dtype=np.int64)
        a = np.concatenate(a_parts) if a_parts else empty
        b = np.concatenate(b_parts) if b_parts else empty
        cls = np.concatenate(cls_parts) if cls_parts else empty
        return switchless_graph(req, n_nodes, a, b, cls, ports)

    return Topology(
        family="torus-3d",
        request=req,
        tiers=0,
        switches_by_tier={},
        links=links,
        max_switch_hops=hmax,
        mean_switch_hops=hmean,
        hop_histogram=hist,
        bisection_GBps=cut_cables * rate,
        oversubscription=1.0,
        params={
            "dims": dims,
            "n_nodes": n_nodes,
            "ports_per_node": ports,
            "cables_per_direction": c,
            "cables_per_direction_by_dim": per_dim,
            "unused_ports_per_node": ports - used if n_nodes > 1 else ports,
            "diameter": sum(d // 2 for d in dims),
            "bisection_cables": cut_cables,
            "node_id": "x + X * (y + Y * z); graph node = n_endpoints + node_id",
            "hop_unit": "torus links between domains (intermediate domains = hops - 1)",
            "internal_link_class": INTERNAL_LINK_CLASS,
            "n_internal_links": req.n_endpoints,
        },
        notes=tuple(notes),
        _graph_builder=graph,
    )
