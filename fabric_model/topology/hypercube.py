"""Hypercube fabrics: switchless, one node per NVLink domain, a power-of-two node count.

Design rules
------------
- A node is one full NVLink domain, as for the 3D torus (:mod:`.torus3d`); the node count
  ``N = n_gpus / nvlink_domain`` must be a power of two, ``N = 2^d`` (else
  :class:`InfeasibleDesignError` on ``cluster.n_gpus`` naming the nearest valid GPU counts
  below and above).
- Node ``u`` links to ``u XOR 2^i`` in each dimension ``i < d`` with ``c = P // d`` parallel
  cables, ``P = nvlink_domain x nics_per_gpu`` NIC ports per node; ``c >= 1`` is required, so
  at most ``2^P`` nodes (else :class:`InfeasibleDesignError` on ``cluster.nics_per_gpu``).
- Cables: ``N/2 x d x c``, one link class ``hypercube`` with ends ``("nic", "nic")``
  (one class per dimension would give 14 classes at ``d = 14``).
- Hops: links traversed between two domains = the Hamming distance of their ids, so the
  histogram over ordered node pairs is binomial: ``N C(d, h)`` pairs at ``h = 1 .. d`` hops,
  each pair carrying ``nvlink_domain^2`` GPU pairs. Diameter ``d``; mean over GPU pairs in
  different domains ``d 2^(d-1) / (2^d - 1) = (d / 2) N / (N - 1)``.
- Bisection (one direction): cutting one dimension crosses ``N/2 x c`` cables, times the
  link rate (for ``c = 1`` the textbook hypercube bisection width ``N/2``; Leighton,
  *Introduction to Parallel Algorithms and Architectures*, 1992, chapter 3).

Graph
-----
As the torus (:func:`fabric_model.topology.torus3d.switchless_graph`): endpoints, then one
forwarding node per domain (graph id ``E + u``), cables by dimension then node
(``u`` with bit ``i`` clear, ``c`` copies), then one internal aggregation link per endpoint
(``link_class = -1``, capacity ``P x link rate``).
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
    hop_histogram,
)
from fabric_model.topology.torus3d import INTERNAL_LINK_CLASS, switchless_graph
from fabric_model.units import gbps_to_GBps

__all__ = ["build_hypercube"]


def _node_count(req: TopologyRequest) -> int:
    """Domains, required to be full and a power of two (else an error with the nearest)."""
    dom = req.nvlink_domain
    n = req.n_gpus // dom
    if req.n_gpus % dom == 0 and n >= 1 and n & (n - 1) == 0:
        return n
    exact = req.n_gpus / dom
    below = dom * 2 ** math.floor(math.log2(exact)) if exact >= 1 else 0
    above = dom * 2 ** math.ceil(math.log2(exact)) if exact > 1 else dom
    if above <= req.n_gpus:
        above *= 2
    nearest = f"{below:,} or {above:,}" if below else f"{above:,}"
    raise InfeasibleDesignError(
        "cluster.n_gpus",
        f"a hypercube has 2^d nodes of one full NVLink domain ({dom} GPUs, "
        f"cluster.nvlink_domain) each, so cluster.n_gpus must be {dom} x a power of two; "
        f"got {req.n_gpus:,} ({exact:g} domains). Nearest valid: {nearest}",
    )


def build_hypercube(req: TopologyRequest) -> Topology:
    """Size a hypercube of NVLink domains for ``req`` and return it with exact counts.

    Parameters
    ----------
    req
        The request; ``radix`` is ignored (switchless), ``direct_link_m`` is the cable
        length.

    Returns
    -------
    Topology
        Family ``hypercube``, ``tiers = 0``, no switches, one link class ``hypercube``.

    Raises
    ------
    InfeasibleDesignError
        On ``cluster.n_gpus`` (not ``nvlink_domain x 2^d``) or ``cluster.nics_per_gpu``
        (fewer NIC ports per domain than dimensions).

    Notes
    -----
    ``N = 2^d`` nodes, ``c = P // d``, ``N d c / 2`` cables, diameter ``d``, Hamming-distance
    hop histogram ``C(d, h) / (N - 1)``, bisection ``N c / 2`` cables (textbook hypercube
    properties; Leighton 1992).
    """
    n_nodes = _node_count(req)
    d = n_nodes.bit_length() - 1
    ports = req.nvlink_domain * req.nics_per_gpu
    if d > ports:
        max_gpus = req.nvlink_domain * 2**ports
        raise InfeasibleDesignError(
            "cluster.nics_per_gpu",
            f"a hypercube of {n_nodes:,} nodes has {d} dimensions and needs >= {d} NIC ports "
            f"per NVLink domain; a domain has cluster.nvlink_domain x cluster.nics_per_gpu = "
            f"{req.nvlink_domain} x {req.nics_per_gpu} = {ports}, so at most 2^{ports} = "
            f"{2**ports:,} nodes ({max_gpus:,} GPUs). Allowed: cluster.n_gpus <= "
            f"{max_gpus:,}, or cluster.nics_per_gpu >= {-(-d // req.nvlink_domain)}",
        )
    c = ports // d if d else 0
    n_cables = n_nodes // 2 * d * c
    links = (
        (LinkClass("hypercube", n_cables, req.link_gbps, req.direct_link_m, ("nic", "nic")),)
        if d
        else ()
    )
    gpu_pairs = float(req.nvlink_domain) ** 2
    hist, hmax, hmean = hop_histogram(
        {h: float(n_nodes) * math.comb(d, h) * gpu_pairs for h in range(1, d + 1)}
    )
    cut_cables = n_nodes // 2 * c
    used = d * c
    notes = [
        f"hypercube of {n_nodes:,} NVLink domain(s) ({req.nvlink_domain} GPUs each): "
        f"{d} dimension(s)"
    ]
    if d == 0:
        notes.append("a single NVLink domain: no hypercube cables, all traffic stays on NVLink")
    else:
        notes.append(
            f"{c} cable(s) per dimension; {used} of {ports} NIC ports used per domain"
            + (f", {ports - used} unused" if ports > used else "")
        )
    notes.append(
        "hops = hypercube links between the two domains (Hamming distance); the graph joins "
        "each NIC endpoint to its domain's forwarding node by an internal aggregation link"
    )

    def graph() -> FabricGraph:
        node = np.arange(n_nodes, dtype=np.int64)
        a_parts = [np.repeat(node[(node >> i) & 1 == 0], c) for i in range(d)]
        a = np.concatenate(a_parts) if a_parts else np.zeros(0, dtype=np.int64)
        dim = np.repeat(np.arange(d, dtype=np.int64), n_nodes // 2 * c)
        b = a | (np.int64(1) << dim)
        return switchless_graph(req, n_nodes, a, b, np.zeros(a.size, dtype=np.int64), ports)

    return Topology(
        family="hypercube",
        request=req,
        tiers=0,
        switches_by_tier={},
        links=links,
        max_switch_hops=hmax,
        mean_switch_hops=hmean,
        hop_histogram=hist,
        bisection_GBps=cut_cables * gbps_to_GBps(req.link_gbps),
        oversubscription=1.0,
        params={
            "dimensions": d,
            "n_nodes": n_nodes,
            "ports_per_node": ports,
            "cables_per_dimension": c,
            "unused_ports_per_node": ports - used,
            "diameter": d,
            "bisection_cables": cut_cables,
            "max_nodes": 2**ports,
            "node_id": "domain index; neighbours differ in one bit; graph node = "
            "n_endpoints + node_id",
            "hop_unit": "hypercube links between domains (Hamming distance)",
            "internal_link_class": INTERNAL_LINK_CLASS,
            "n_internal_links": req.n_endpoints,
        },
        notes=tuple(notes),
        _graph_builder=graph,
    )
