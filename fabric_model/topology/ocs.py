"""Optical-circuit-switched fabrics: blocks whose uplinks land on optical circuit switches.

An optical circuit switch (OCS) is a passive, reconfigurable fiber cross-connect: a circuit
joins two of its ports and light crosses it both ways, with no buffering and no per-packet
switching (Urata et al., "Mission Apollo", 2022; Jouppi et al., "TPU v4", ISCA 2023). The
fabric is a set of *blocks*, each with its own internal fabric, whose uplinks are cabled to
OCS ports; the circuits decide which blocks are neighbours.

Design rules
------------
- **Blocks** (``ocs.block``): ``nvlink``, one NVLink domain (an 8-GPU server, an NVL72 rack)
  whose ``U = domain x nics`` NIC ports are its uplinks; ``cube``, a 4 x 4 x 4 torus cube of
  NVLink domains (TPU v4's rack) wired in copper inside, whose ``6 x 16 x c`` face links are
  the uplinks (``c = P // 6`` cables per direction of a domain of ``P`` NIC ports); ``pod``,
  ``ocs.block_gpus`` GPUs on their own non-blocking leaf-spine of the vendor's radix-``k``
  switches: ``L = ceil(E_b / (k/2))`` leaves with their NICs below and as many uplinks,
  ``S = ceil(E_b / (k/2))`` spines with ``k/2`` ports down and ``k/2`` up, so the pod has
  ``U = E_b`` uplinks (1:1) for its ``E_b`` NIC ports; a pod of at most ``k/2`` NIC ports is
  one leaf whose other half goes up. A pod holds at most ``k^2 / 4`` NIC ports. Every block
  is whole NVLink domains and the blocks divide ``cluster.n_gpus`` (``B`` blocks; plus
  ``ocs.spare_blocks``, ``B_b`` built).
- **OCS count** (closed form): an uplink takes ``f`` OCS ports (its transceiver's fibers: 1
  with a circulator, 2 on duplex LC; :meth:`~fabric_model.catalog.Catalog.ocs_optic_for`).
  Uplink ``u`` of every block lands on OCS ``u // p``, where ``p = floor((R / f) / B_b)`` is
  the uplinks each of the ``R``-port OCSes gives every block: ``n_ocs = ceil(U / p)``. With
  ``p >= 1`` every OCS reaches every block (TPU v4: 64 cubes x 2 of Palomar's 136 ports,
  ``U = 96``, ``p = 2``, 48 OCS); ``p = 0`` is refused on ``ocs.switch``.
- **Circuits**: slot ``s`` of every block is its uplink ``s``; each slot carries a matching
  of the blocks, and a matched pair ``(a, b)`` is one circuit between uplink ``s`` of ``a``
  and uplink ``s`` of ``b``, on the same OCS by construction. So no block ever has more
  circuits than uplinks and every circuit is realisable on the OCS ports it has. Patterns
  (``ocs.circuits``): ``uniform``, the round-robin tournament (circle method: ``B - 1``
  perfect matchings, one block idle per round when ``B`` is odd), slots cycling through the
  rounds, so every pair gets ``floor`` or ``ceil(U / (B - 1))`` circuits; ``ring``, the even
  and odd edges of the block ring alternately (an odd ring rotates ``B`` matchings, one
  block idle in each); ``torus``, the blocks as a torus of :func:`~fabric_model.topology.
  torus3d.torus_dims` shape with :func:`~fabric_model.topology.torus3d.cables_per_dimension`
  circuits per direction, even and odd edges of each dimension alternately (TPU v4);
  ``twisted-torus``, the same on ``2n x n x n`` (or ``2n x n``) blocks with the long
  dimension's wraparound shifted by half of each other dimension (Camara et al., "Twisted
  torus topologies for enhanced interconnection networks", IEEE TPDS 2010; TPU v4's twisted
  tori); ``job``, the job's DP-ring and PP-chain block pairs first, ``ring_circuits`` each
  (NCCL's NICs per domain boundary, one per two channels), greedily per slot, then the
  uniform rounds among the blocks still free.
- **Reconfiguration and failed blocks**: with ``ocs.reconfigure = never`` the pattern is
  installed over every built block (spares included); a failed block's circuits go dark and
  the routes go around it. Otherwise the pattern is formed over the job's blocks in job order
  (the healthy ones, spares taking the failed ones' places), so a failure costs nothing but
  the spare. The ``ocs.failed_blocks`` failed blocks are spread evenly over the job's
  original blocks.
- **Hops** (the hop histogram, over ordered GPU pairs in different NVLink domains): blocks
  ``a`` and ``b`` are ``D[a, b]`` circuits apart (breadth-first search over the live
  circuits). ``nvlink``: ``D``. ``pod``: 3 switches inside a pod (1 for a one-leaf pod),
  ``D + 3`` between pods (leaf, spine, a spine in each block relayed through, spine, leaf;
  ``D + 1`` for one-leaf pods). ``cube``: the Manhattan distance of the two domains in the
  cube's 4 x 4 x 4 mesh inside a cube; between cubes ``D`` plus each end domain's distance to
  its cube's nearest face (the circuit it leaves by is taken to be on that face).
- **Bisection** (one direction): the circuits between the first and the second half of the
  job's blocks, times the link rate, at most half the NIC ports at line rate (one pod:
  non-blocking; one cube: its mesh's 16 c middle links; one NVLink domain: 0).

Graph (modelling choice)
------------------------
Nodes: the NIC endpoints, then one forwarding node per built block (tier 1; graph id ``E +
b``), then the OCSes (tier 2). Cables: uplink ``u`` of block ``b`` is cable ``b U + u``
between the block's node and OCS ``u // p`` (class ``block-ocs``), then one internal link
per endpoint to its block's node (class -1, as the torus's): capacity ``U x`` link rate for
``nvlink`` and ``cube`` (NVLink and the cube's mesh, not modelled link by link: a
:data:`~fabric_model.topology.torus3d.INTERNAL_LINK_CLASS` aggregation) and the link rate for
``pod`` (the NIC's cable into the pod's non-blocking leaf-spine, aggregated). The circuits are
not cables: the router (:mod:`fabric_model.routing.ocs`) routes over them, a circuit ``a -> b``
on slot ``s`` crossing cable ``a U + s`` towards the OCS and cable ``b U + s`` away from it.
The pod's leaves and spines and the cube's mesh cables are counted (switches, link classes)
but not graph nodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from fabric_model.errors import InfeasibleDesignError
from fabric_model.resources import asset, load_yaml
from fabric_model.topology.base import (
    FabricGraph,
    LinkClass,
    PortGroup,
    Topology,
    TopologyRequest,
    graph_from_cables,
    hop_histogram,
)
from fabric_model.topology.torus3d import INTERNAL_LINK_CLASS, cables_per_dimension, torus_dims
from fabric_model.units import gbps_to_GBps

__all__ = [
    "BLOCK_LINK_CLASS",
    "OCS_DATA",
    "RING_CIRCUITS",
    "BlockShape",
    "Circuits",
    "OcsRequest",
    "block_hops",
    "block_hops_reference",
    "block_shape",
    "build_ocs",
    "circuit_matchings",
    "failed_block_ids",
    "ocs_count",
    "twisted_dims",
]

#: The model's OCS data with sources (``assets/ocs.yaml``).
OCS_DATA: dict[str, Any] = load_yaml(asset("ocs.yaml"))
#: Side of a torus cube block (TPU v4: 4 x 4 x 4).
CUBE_SIDE = int(OCS_DATA["cube"]["side"]["value"])
#: NCCL's NICs per NVLink-domain boundary (one per two channels, at most ``max_channels``):
#: the circuits ``ocs.circuits = job`` gives each DP-ring and PP-chain block pair.
_NCCL = load_yaml(asset("nccl_constants.yaml"))
RING_CIRCUITS = int(_NCCL["max_channels"]) // int(_NCCL["channels_per_nic"])
#: Name of the link class of the block-to-OCS fibers.
BLOCK_LINK_CLASS = "block-ocs"
_FACES = 6


@dataclass(frozen=True)
class OcsRequest(TopologyRequest):
    """A :class:`TopologyRequest` plus the blocks, the OCS and the circuits (plain numbers).

    Attributes
    ----------
    block
        ``ocs.block``: ``nvlink``, ``cube`` or ``pod``.
    block_gpus
        ``ocs.block_gpus`` (0 = auto).
    ocs_ports, ocs_key
        Ports of one OCS and its catalog key (``ocs.switch``).
    fibers_per_uplink
        OCS ports one uplink takes (its transceiver's fibers), count.
    optic_key
        The uplinks' transceiver (catalog key; for labels and the bill).
    circuits, reconfigure
        ``ocs.circuits`` and ``ocs.reconfigure``.
    spare_blocks, failed_blocks
        ``ocs.spare_blocks`` and ``ocs.failed_blocks``.
    job_tp, job_cp, job_ep, job_pp, job_order
        The plan's degrees and rank order (``parallel.order`` resolved), for ``circuits =
        job``.
    ring_circuits
        Circuits the job pattern gives each DP-ring and PP-chain block pair, count (NCCL's
        NICs per domain boundary, :data:`RING_CIRCUITS`).
    ocs_rack_units
        Height of one OCS, U (the floor plan).
    """

    block: str = "nvlink"
    block_gpus: int = 0
    ocs_ports: int = 136
    ocs_key: str = ""
    fibers_per_uplink: int = 1
    optic_key: str = ""
    circuits: str = "uniform"
    reconfigure: str = "job"
    spare_blocks: int = 0
    failed_blocks: int = 0
    job_tp: int = 1
    job_cp: int = 1
    job_ep: int = 1
    job_pp: int = 1
    job_order: str = "tp-cp-ep-dp-pp"
    ring_circuits: int = RING_CIRCUITS
    ocs_rack_units: int = 8


def _as_ocs(req: TopologyRequest) -> OcsRequest:
    """Return the request as an :class:`OcsRequest` (a plain request takes the defaults)."""
    if isinstance(req, OcsRequest):
        return req
    fields = {f: getattr(req, f) for f in TopologyRequest.__dataclass_fields__}
    return OcsRequest(**fields)


# ---------------------------------------------------------------------------------- blocks


@dataclass(frozen=True)
class BlockShape:
    """What one block is made of and how many there are.

    Attributes
    ----------
    kind
        ``nvlink``, ``cube`` or ``pod``.
    block_gpus, domains
        GPUs and NVLink domains per block.
    n_blocks, n_built
        Blocks the job runs on, and built (with the spares).
    uplinks
        Uplinks per block (``U``), each one OCS port (or ``f``).
    pod_tiers, pod_leaves, pod_spines
        A pod's leaf-spine (0 tiers for the other kinds).
    mesh_c, mesh_cables
        A cube's cables per torus direction of a domain and its mesh cables.
    unused_ports
        NIC ports per block left uncabled (a cube domain's ports beyond 6 c).
    """

    kind: str
    block_gpus: int
    domains: int
    n_blocks: int
    n_built: int
    uplinks: int
    pod_tiers: int = 0
    pod_leaves: int = 0
    pod_spines: int = 0
    mesh_c: int = 0
    mesh_cables: int = 0
    unused_ports: int = 0


def _nearest(n: int, unit: int) -> str:
    below, above = (n // unit) * unit, (n // unit + 1) * unit
    return f"{below:,} or {above:,}" if below > 0 else f"{above:,}"


def _pod_cap_gpus(req: OcsRequest) -> int:
    """Most GPUs (whole NVLink domains) a pod of one leaf-spine tier holds: ``k^2 / 4`` NICs."""
    half = req.radix // 2
    return (half * half // req.nics_per_gpu) // req.nvlink_domain * req.nvlink_domain


def block_shape(req: TopologyRequest) -> BlockShape:
    """Return the blocks of ``req`` (module docstring, *Blocks*).

    Raises
    ------
    InfeasibleDesignError
        On ``ocs.block_gpus`` (not the block kind's size, not whole NVLink domains, a pod
        larger than one leaf-spine tier holds), ``cluster.n_gpus`` (not whole blocks) or
        ``cluster.nics_per_gpu`` (a cube domain with fewer than 6 NIC ports).
    """
    r = _as_ocs(req)
    dom, nics, n = r.nvlink_domain, r.nics_per_gpu, r.n_gpus
    if n % dom:
        raise InfeasibleDesignError(
            "cluster.n_gpus",
            f"an OCS block is whole NVLink domains of {dom} GPUs (cluster.nvlink_domain); got "
            f"{n:,}. Nearest valid: {_nearest(n, dom)}",
        )
    mesh_c = mesh_cables = unused = tiers = leaves = spines = 0
    if r.block == "nvlink":
        bg, uplinks = dom, dom * nics
    elif r.block == "cube":
        bg = CUBE_SIDE**3 * dom
        ports = dom * nics
        mesh_c = ports // _FACES
        if mesh_c < 1:
            raise InfeasibleDesignError(
                "cluster.nics_per_gpu",
                f"a torus cube gives each domain's 6 directions at least one cable, so a "
                f"domain needs >= 6 NIC ports; it has {dom} x {nics} = {ports}. Allowed: "
                f"cluster.nics_per_gpu >= {-(-_FACES // dom)}, or ocs.block = nvlink or pod",
            )
        uplinks = int(OCS_DATA["cube"]["face_links"]["value"]) * mesh_c
        mesh_cables = int(OCS_DATA["cube"]["mesh_links"]["value"]) * mesh_c
        unused = (ports - _FACES * mesh_c) * CUBE_SIDE**3
    elif r.block == "pod":
        half = r.radix // 2
        cap = _pod_cap_gpus(r)
        if cap < dom:
            raise InfeasibleDesignError(
                "ocs.block",
                f"a pod of radix-{r.radix} switches holds {half * half} NIC ports, less than one "
                f"NVLink domain ({dom} x {nics}); allowed: nvlink or cube",
            )
        if r.block_gpus:
            bg = r.block_gpus
            if bg % dom or bg > cap:
                raise InfeasibleDesignError(
                    "ocs.block_gpus",
                    f"a pod is whole NVLink domains of {dom} GPUs and at most k^2 / 4 = "
                    f"{half * half:,} NIC ports on radix-{r.radix} switches ({cap:,} GPUs); got "
                    f"{bg:,}. Allowed: a multiple of {dom} up to {cap:,}, or auto",
                )
        else:
            top = min(cap, max(dom, (n // 2) // dom * dom))
            bg = next((m for m in range(top, 0, -dom) if n % m == 0), dom)
        ports = bg * nics
        uplinks = ports
        if ports <= half:
            tiers, leaves = 1, 1
        else:
            tiers, leaves, spines = 2, -(-ports // half), -(-ports // half)
    else:
        raise InfeasibleDesignError("ocs.block", f"{r.block!r}: allowed nvlink, cube, pod")
    if r.block != "pod" and r.block_gpus and r.block_gpus != bg:
        raise InfeasibleDesignError(
            "ocs.block_gpus",
            f"an ocs.block = {r.block} block is {bg:,} GPUs here; allowed: auto or {bg:,}",
        )
    if n % bg:
        raise InfeasibleDesignError(
            "cluster.n_gpus",
            f"the job runs on whole blocks of {bg:,} GPUs (ocs.block = {r.block}); got {n:,}. "
            f"Nearest valid: {_nearest(n, bg)}",
        )
    return BlockShape(
        kind=r.block,
        block_gpus=bg,
        domains=bg // dom,
        n_blocks=n // bg,
        n_built=n // bg + r.spare_blocks,
        uplinks=uplinks,
        pod_tiers=tiers,
        pod_leaves=leaves,
        pod_spines=spines,
        mesh_c=mesh_c,
        mesh_cables=mesh_cables,
        unused_ports=unused,
    )


def ocs_count(
    uplinks: int, n_built: int, ocs_ports: int, fibers_per_uplink: int
) -> tuple[int, int]:
    """Return ``(p, n_ocs)``: uplinks each OCS gives every block, and the OCS count.

    ``p = floor((R // f) / B_b)``, ``n_ocs = ceil(U / p)`` (module docstring); ``(0, 0)``
    when one OCS cannot reach every block.

    >>> ocs_count(96, 64, 136, 1)  # TPU v4: 64 cubes, 96 face links, Palomar
    (2, 48)
    """
    p = (ocs_ports // fibers_per_uplink) // max(1, n_built)
    if p < 1:
        return 0, 0
    return p, -(-uplinks // p)


def failed_block_ids(n_blocks: int, n_failed: int) -> np.ndarray:
    """Job blocks that fail in the what-if: ``n_failed`` spread evenly over the ``n_blocks``."""
    if n_failed <= 0:
        return np.zeros(0, dtype=np.int64)
    total = max(n_blocks, n_failed)
    return np.unique(((np.arange(n_failed) + 0.5) * total / n_failed).astype(np.int64))


# -------------------------------------------------------------------------------- circuits


def _tournament_round(n: int, r: int) -> np.ndarray:
    """Round ``r`` of the round-robin tournament of ``n`` blocks (circle method), -1 idle."""
    m = n + (n % 2)  # a dummy block makes the count even; its partner sits the round out
    x = np.arange(m, dtype=np.int64)
    partner = (2 * r - x) % (m - 1)
    partner[m - 1] = r
    partner[r] = m - 1
    partner = partner[:n].copy()
    partner[partner >= n] = -1
    return partner


def _spread_matching(n: int, slot: int) -> np.ndarray:
    """Return a seeded random matching of ``n`` blocks for ``slot`` (one idle when ``n`` is odd).

    With fewer slots than tournament rounds, rounds of the circle method would join each
    block to blocks a few places away only (every round is ``x -> 2 r - x``: two rounds make
    a shift, so ``k`` rounds reach ``O(k^2)`` blocks in two hops, a ring-like diameter of
    ``n / k``). Random matchings make an expander instead (diameter ``~ log n / log k``), as
    an OCS controller spreading circuits over many pairs would; seeded by ``(n, slot)``, so
    the same design always gets the same circuits.
    """
    order = np.random.default_rng([n, slot]).permutation(n)
    partner = np.full(n, -1, dtype=np.int64)
    half = n // 2
    partner[order[0 : 2 * half : 2]] = order[1 : 2 * half : 2]
    partner[order[1 : 2 * half : 2]] = order[0 : 2 * half : 2]
    return partner


def _slot_matching(n: int, slot: int, total: int) -> np.ndarray:
    """Return the uniform pattern's matching of ``slot`` (tournament rounds, or random)."""
    rounds = n - 1 + n % 2
    if total >= rounds:
        return _tournament_round(n, slot % rounds)
    return _spread_matching(n, slot)


def _uniform(n: int, slots: int, first: int = 0, total: int = 0) -> list[tuple[np.ndarray, int]]:
    """Return the uniform matchings of slots ``first .. first + slots - 1`` (of ``total``).

    With at least ``n - 1`` slots the round-robin tournament's rounds cycle, so every pair
    gets ``floor`` or ``ceil(slots / (n - 1))`` circuits; with fewer, seeded random
    matchings (:func:`_spread_matching`).
    """
    if n < 2 or slots <= 0:
        return []
    total = total or first + slots
    rounds = n - 1 + n % 2
    if total >= rounds:
        ids, counts = np.unique(np.arange(first, first + slots) % rounds, return_counts=True)
        return [(_tournament_round(n, int(r)), int(c)) for r, c in zip(ids, counts, strict=True)]
    return [(_spread_matching(n, s), 1) for s in range(first, first + slots)]


def _cycle(n: int, slots: int, nodes: np.ndarray, length: int) -> list[tuple[np.ndarray, int]]:
    """Return matchings covering rings of ``length`` nodes (``nodes[row, place]``), ``slots`` slots.

    ``nodes[row, k]`` is the node at place ``k`` of ring ``row``. Even rings alternate their
    even and odd edges (two perfect matchings); odd rings rotate ``length`` matchings, one
    node idle in each.
    """
    if slots <= 0 or length < 2:
        return []
    if length == 2:
        partner = np.full(n, -1, dtype=np.int64)
        partner[nodes[:, 0]], partner[nodes[:, 1]] = nodes[:, 1], nodes[:, 0]
        return [(partner, slots)]
    out = []
    k = np.arange(length)
    if length % 2 == 0:
        for parity, count in ((0, -(-slots // 2)), (1, slots // 2)):
            if not count:
                continue
            mate = np.where((k - parity) % 2 == 0, (k + 1) % length, (k - 1) % length)
            partner = np.empty(n, dtype=np.int64)
            partner[nodes.ravel()] = nodes[:, mate].ravel()
            out.append((partner, count))
        return out
    for rot in range(min(slots, length)):
        count = slots // length + (1 if rot < slots % length else 0)
        rel = (k - rot) % length
        idle = rel == length - 1
        mate = np.where(rel % 2 == 0, (k + 1) % length, (k - 1) % length)
        mate = np.where(idle, -1, mate)
        partner = np.full(n, -1, dtype=np.int64)
        for place in range(length):
            if mate[place] >= 0:
                partner[nodes[:, place]] = nodes[:, mate[place]]
        out.append((partner, count))
    return out


def twisted_dims(n: int) -> tuple[int, int, int] | None:
    """``(2m, m, m)`` or ``(2m, m, 1)`` for ``n`` blocks, else None."""
    for dims_of in (lambda m: (2 * m, m, m), lambda m: (2 * m, m, 1)):
        m = 2
        while 2 * m * m <= n:
            dims = dims_of(m)
            if math.prod(dims) == n:
                return dims
            m += 1
    return None


def _torus(n: int, slots: int, twisted: bool) -> tuple[list[tuple[np.ndarray, int]], Any]:
    """Return the matchings of a (twisted) torus of ``n`` blocks, and its dimensions."""
    if twisted:
        tw = twisted_dims(n)
        if tw is None:
            ok = sorted({2 * m**3 for m in range(2, 9)} | {2 * m * m for m in range(2, 23)})
            near = [v for v in ok if v <= 2 * max(n, 8)][-6:]
            raise InfeasibleDesignError(
                "ocs.circuits",
                f"a twisted torus needs 2m x m x m or 2m x m blocks; {n} blocks are neither. "
                f"Block counts that are: {', '.join(map(str, near))}; or ocs.circuits = torus",
            )
        dims = tw
    else:
        dims = torus_dims(n)
    node = np.arange(n, dtype=np.int64)
    stride = (1, dims[0], dims[0] * dims[1])
    active = [i for i in range(3) if dims[i] >= 2]
    per_dim = cables_per_dimension(slots, active)
    out: list[tuple[np.ndarray, int]] = []
    for i in active:
        length, st = dims[i], stride[i]
        others = node[(node // st) % length == 0]  # place 0 of every ring of dimension i
        rings = others[:, None] + st * np.arange(length)[None, :]
        if twisted and i == 0:  # the long dimension's wrap shifts the others by half
            out.extend(_twisted_x(n, 2 * per_dim[i], dims))
            continue
        out.extend(_cycle(n, 2 * per_dim[i], rings, length))
    return out, dims


def _twisted_x(n: int, slots: int, dims: tuple[int, int, int]) -> list[tuple[np.ndarray, int]]:
    """Return the long (x) dimension's matchings of a twisted torus (the wrap twisted)."""
    x_len, y_len, z_len = dims
    node = np.arange(n, dtype=np.int64)
    x, y, z = node % x_len, (node // x_len) % y_len, node // (x_len * y_len)

    def at(xx: np.ndarray, yy: np.ndarray, zz: np.ndarray) -> np.ndarray:
        return xx + x_len * (yy + y_len * zz)

    even = np.where(x % 2 == 0, at(x + 1, y, z), at(x - 1, y, z))
    dy, dz = y_len // 2, z_len // 2
    odd = np.where(
        x % 2 == 1,
        np.where(x == x_len - 1, at(0 * x, (y + dy) % y_len, (z + dz) % z_len), at(x + 1, y, z)),
        np.where(
            x == 0, at(x_len - 1 + 0 * x, (y - dy) % y_len, (z - dz) % z_len), at(x - 1, y, z)
        ),
    )
    return [(p, c) for p, c in ((even, -(-slots // 2)), (odd, slots // 2)) if c]


def _ring(n: int, slots: int) -> list[tuple[np.ndarray, int]]:
    if n < 2:
        return []
    return _cycle(n, slots, np.arange(n, dtype=np.int64)[None, :], n)


def _job(
    n: int, slots: int, ea: np.ndarray, eb: np.ndarray, demand: int
) -> list[tuple[np.ndarray, int]]:
    """Return the job pairs' matchings (``demand`` circuits each, greedily), then uniform."""
    remaining = np.full(ea.size, demand, dtype=np.int64)
    out: list[tuple[np.ndarray, int]] = []
    used = 0
    while used < slots and remaining.sum() > 0:
        partner = np.full(n, -1, dtype=np.int64)
        for e in np.argsort(-remaining, kind="stable").tolist():
            if remaining[e] <= 0:
                break
            a, b = int(ea[e]), int(eb[e])
            if partner[a] < 0 and partner[b] < 0:
                partner[a], partner[b] = b, a
                remaining[e] -= 1
        if n >= 2:  # the blocks still free: this slot's tournament round among them
            cand = _slot_matching(n, used, slots)
            ok = (partner < 0) & (cand >= 0)
            ok &= np.where(cand >= 0, partner[np.maximum(cand, 0)] < 0, False)
            partner[ok] = cand[ok]
        out.append((partner, 1))
        used += 1
    return out + _uniform(n, slots - used, first=used, total=slots)


def _job_pairs(r: OcsRequest, block_gpus: int, n_blocks: int) -> tuple[np.ndarray, np.ndarray, str]:
    """Block pairs of the job's DP rings and PP chains (in its rank order), and a note."""
    n = r.n_gpus
    tp, cp, ep, pp = r.job_tp, r.job_cp, r.job_ep, r.job_pp
    if n % (tp * cp * pp) or (n // (tp * cp * pp)) % ep:
        ring = np.arange(n_blocks, dtype=np.int64)
        note = (
            f"the plan (TP{tp} CP{cp} EP{ep} PP{pp}) does not tile {n:,} GPUs: the job "
            "circuits follow a ring of the blocks"
        )
        return ring, np.roll(ring, -1), note
    edp = n // (tp * cp * pp) // ep
    # rank = tp_r + tp (cp_r + cp (ep_r + ep x)), x = edp_r + edp pp_r (pipeline
    # outermost) or pp_r + pp edp_r (data parallelism outermost): training/layout.py
    t = np.arange(tp)[:, None, None, None, None]
    c = np.arange(cp)[None, :, None, None, None]
    e = np.arange(ep)[None, None, :, None, None]
    p = np.arange(pp)[None, None, None, :, None]
    d = np.arange(edp)[None, None, None, None, :]
    outer = d + edp * p if r.job_order.endswith("pp") else p + pp * d
    rank = t + tp * (c + cp * (e + ep * outer))
    block = rank // block_gpus
    # DP ring: cp fastest, then ep, then edp; per (tp, pp)
    dp = np.moveaxis(block, 3, 1).reshape(tp * pp, cp, ep, edp)
    dp = np.transpose(dp, (0, 3, 2, 1)).reshape(tp * pp, -1)
    a = [dp.ravel(), np.moveaxis(block, 3, -1).reshape(-1, pp)[:, :-1].ravel()]
    b = [np.roll(dp, -1, axis=1).ravel(), np.moveaxis(block, 3, -1).reshape(-1, pp)[:, 1:].ravel()]
    sa, sb = np.concatenate(a), np.concatenate(b)
    keep = sa != sb
    lo, hi = np.minimum(sa[keep], sb[keep]), np.maximum(sa[keep], sb[keep])
    pairs = np.unique(lo * n_blocks + hi)
    return pairs // n_blocks, pairs % n_blocks, ""


def circuit_matchings(
    req: TopologyRequest, n_nodes: int, slots: int, block_gpus: int
) -> tuple[list[tuple[np.ndarray, int]], dict[str, Any]]:
    """Return the per-slot matchings of ``ocs.circuits`` over ``n_nodes`` blocks, and facts.

    Each entry is ``(partner, count)``: ``partner[a]`` is the block matched with ``a`` in
    ``count`` consecutive slots (``-1``: idle); the counts add up to at most ``slots``.

    Raises
    ------
    InfeasibleDesignError
        On ``ocs.circuits`` for a twisted torus of a block count that is not ``2m x m x m``
        or ``2m x m``.
    """
    r = _as_ocs(req)
    facts: dict[str, Any] = {}
    if r.circuits == "uniform":
        return _uniform(n_nodes, slots), facts
    if r.circuits == "ring":
        return _ring(n_nodes, slots), facts
    if r.circuits in ("torus", "twisted-torus"):
        if n_nodes < 2:
            return [], facts
        out, dims = _torus(n_nodes, slots, r.circuits == "twisted-torus")
        facts["block_dims"] = dims
        return out, facts
    if r.circuits == "job":
        ea, eb, note = _job_pairs(r, block_gpus, n_nodes)
        facts["job_pairs"] = int(ea.size)
        if note:
            facts["job_note"] = note
        return _job(n_nodes, slots, ea, eb, r.ring_circuits), facts
    raise InfeasibleDesignError(
        "ocs.circuits", f"{r.circuits!r}: allowed uniform, torus, twisted-torus, ring, job"
    )


# ------------------------------------------------------------------------------------ hops


def block_hops_reference(n: int, a: np.ndarray, b: np.ndarray, alive: np.ndarray) -> np.ndarray:
    """Hops between every two blocks over the circuits ``a[i] - b[i]`` (readable twin).

    Returns an ``(n, n)`` int32 matrix, ``-1`` where unreachable or dead. Breadth-first search
    from every live block over the neighbour sets.
    """
    nbrs: list[set[int]] = [set() for _ in range(n)]
    for u, v in zip(a.tolist(), b.tolist(), strict=True):
        nbrs[u].add(v)
        nbrs[v].add(u)
    out = np.full((n, n), -1, dtype=np.int32)
    for s in range(n):
        if not alive[s]:
            continue
        out[s, s] = 0
        frontier = [s]
        while frontier:
            nxt = []
            for u in frontier:
                for v in nbrs[u]:
                    if alive[v] and out[s, v] < 0:
                        out[s, v] = out[s, u] + 1
                        nxt.append(v)
            frontier = nxt
    return out


def block_hops(n: int, a: np.ndarray, b: np.ndarray, alive: np.ndarray) -> np.ndarray:
    """:func:`block_hops_reference` by the numba kernel (``topology._kernels.bfs_all_pairs``)."""
    from fabric_model.topology._kernels import bfs_all_pairs  # numba loads on first use

    ends = np.concatenate([a, b]).astype(np.int64)
    other = np.concatenate([b, a]).astype(np.int64)
    order = np.argsort(ends, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(ends, minlength=n), out=indptr[1:])
    out = np.full((n, n), -1, dtype=np.int32)
    bfs_all_pairs(indptr, other[order], np.ascontiguousarray(alive, dtype=np.bool_), out)
    return out


def _mesh_distance_counts(side: int) -> np.ndarray:
    """Ordered domain pairs of a ``side^3`` mesh (no wraparound) at each Manhattan distance."""
    d = np.arange(side)
    one = np.bincount(np.abs(d[:, None] - d[None, :]).ravel()).astype(np.float64)
    return np.convolve(np.convolve(one, one), one)


def cube_face_distance(domain: np.ndarray) -> np.ndarray:
    """Distance of each domain of a cube to the cube's nearest face (0 on a face)."""
    side = CUBE_SIDE
    coords = [domain % side, (domain // side) % side, domain // (side * side)]
    return np.min([np.minimum(c, side - 1 - c) for c in coords], axis=0)


def cube_mesh_distance(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Manhattan distance of two domains of one cube (their indices ``x + 4 (y + 4 z)``)."""
    side = CUBE_SIDE
    out = np.zeros(np.broadcast(u, v).shape, dtype=np.int64)
    for div in (1, side, side * side):
        out += np.abs((u // div) % side - (v // div) % side)
    return out


# ----------------------------------------------------------------------------------- build


@dataclass(frozen=True, eq=False)
class Circuits:
    """The circuits of a built OCS fabric, as arrays (compared by identity, not by value).

    Attributes
    ----------
    a, b, slot
        Circuit ``i`` joins uplink ``slot[i]`` of built block ``a[i]`` and of ``b[i]``
        (``a < b`` in pattern order), on OCS ``slot[i] // p``.
    hops
        ``(built, built)`` circuits between every two built blocks (``-1``: unreachable).
    job_blocks
        Built block of each of the job's blocks, in job order.
    failed
        Built blocks that failed (the what-if).
    """

    a: np.ndarray
    b: np.ndarray
    slot: np.ndarray
    hops: np.ndarray
    job_blocks: np.ndarray
    failed: np.ndarray


def build_ocs(req: TopologyRequest) -> Topology:
    """Size an OCS fabric for ``req`` and return it with exact counts (module docstring).

    Parameters
    ----------
    req
        An :class:`OcsRequest` (a plain :class:`TopologyRequest` takes its defaults: NVLink
        blocks, 136-port OCS, uniform circuits).

    Returns
    -------
    Topology
        Family ``ocs``; tiers 0 (``nvlink``, ``cube``) or the pod's 1 or 2; switches by tier
        with ``ocs`` last; link classes ``nic-leaf``, ``leaf-spine`` (pods), ``cube-mesh``
        (cubes) and ``block-ocs``; ``params`` with the blocks, the OCS and the circuits.

    Raises
    ------
    InfeasibleDesignError
        On the ``ocs.*`` or ``cluster.*`` key that makes the design impossible: blocks that
        do not tile the job, an OCS that cannot reach every block (``ocs.switch``), circuits
        that leave a block unreachable (``ocs.circuits``), job circuits never set
        (``ocs.reconfigure``).
    """
    r = _as_ocs(req)
    shape = block_shape(r)
    B, built, U = shape.n_blocks, shape.n_built, shape.uplinks
    f = r.fibers_per_uplink
    p, n_ocs = ocs_count(U, built, r.ocs_ports, f)
    if p < 1:
        raise InfeasibleDesignError(
            "ocs.switch",
            f"every block needs ports on every OCS: {built:,} blocks x {f} fiber(s) per uplink "
            f"> {r.ocs_ports} ports of {r.ocs_key or 'the OCS'}; at most {r.ocs_ports // f:,} "
            f"blocks. Allowed: an OCS with more ports, larger blocks (ocs.block, "
            f"ocs.block_gpus), or fewer GPUs",
        )
    if r.circuits == "job" and r.reconfigure == "never":
        raise InfeasibleDesignError(
            "ocs.reconfigure", "ocs.circuits = job sets circuits at each job start: job or phase"
        )
    failed = failed_block_ids(B, r.failed_blocks) if r.failed_blocks else np.zeros(0, np.int64)
    if r.failed_blocks > r.spare_blocks:
        raise InfeasibleDesignError(
            "ocs.failed_blocks",
            f"{r.failed_blocks} failed blocks need as many spares (ocs.spare_blocks = "
            f"{r.spare_blocks})",
        )
    is_failed = np.zeros(built, dtype=bool)
    is_failed[failed] = True
    job_phys = np.flatnonzero(~is_failed)[:B].astype(np.int64)  # spares take failed places
    static = r.reconfigure == "never"
    pattern_phys = np.arange(built, dtype=np.int64) if static else job_phys
    matchings, facts = circuit_matchings(r, int(pattern_phys.size), U, shape.block_gpus)

    # circuits: slot s pairs uplink s of a with uplink s of b (same OCS, s // p)
    ca, cb, cs = [], [], []
    slot = 0
    for partner, count in matchings:
        x = np.arange(partner.size, dtype=np.int64)
        keep = partner > x
        pa, pb = pattern_phys[x[keep]], pattern_phys[partner[keep]]
        ca.append(np.tile(pa, count))
        cb.append(np.tile(pb, count))
        cs.append(np.repeat(np.arange(slot, slot + count, dtype=np.int64), pa.size))
        slot += count
    empty = np.zeros(0, dtype=np.int64)
    c_a = np.concatenate(ca) if ca else empty
    c_b = np.concatenate(cb) if cb else empty
    c_s = np.concatenate(cs) if cs else empty
    dark = is_failed[c_a] | is_failed[c_b]
    n_dark = int(dark.sum())
    c_a, c_b, c_s = c_a[~dark], c_b[~dark], c_s[~dark]

    hops = block_hops(built, c_a, c_b, ~is_failed) if built > 1 else np.zeros((1, 1), np.int32)
    job_hops = hops[np.ix_(job_phys, job_phys)]
    if B > 1 and (job_hops < 0).any():
        raise InfeasibleDesignError(
            "ocs.circuits",
            f"the {r.circuits} circuits leave some of the job's {B} blocks unreachable from "
            f"others ({U} uplinks per block); allowed: a pattern that joins every block "
            f"(uniform, ring, torus)",
        )

    rate = gbps_to_GBps(r.link_gbps)
    links, tiers, switches = _link_classes(r, shape, p, n_ocs)
    hist, hmax, hmean = _histogram(r, shape, job_hops)
    bisection = _bisection(r, shape, c_a, c_b, job_phys) * rate
    full = r.n_endpoints / 2 * gbps_to_GBps(r.nic_port_gbps)
    bisection = min(bisection, full)
    per_block = np.bincount(np.concatenate([c_a, c_b]), minlength=built)
    notes = _notes(r, shape, p, n_ocs, c_a.size, per_block, job_phys, failed, n_dark, facts)
    cls_index = [lc.name for lc in links].index(BLOCK_LINK_CLASS)

    def graph() -> FabricGraph:
        n_e = r.n_endpoints
        b_id = np.repeat(np.arange(built, dtype=np.int64), U)
        u_id = np.tile(np.arange(U, dtype=np.int64), built)
        e = np.arange(n_e, dtype=np.int64)
        block_of_e = job_phys[(e // r.nics_per_gpu) // shape.block_gpus]
        a = np.concatenate([n_e + b_id, e])
        b = np.concatenate([n_e + built + u_id // p, n_e + block_of_e])
        cls = np.concatenate([np.full(b_id.size, cls_index), np.full(n_e, INTERNAL_LINK_CLASS)])
        internal = float(r.link_gbps) * (1 if shape.kind == "pod" else U)
        gbps = np.concatenate([np.full(b_id.size, float(r.link_gbps)), np.full(n_e, internal)])
        tier = np.concatenate([np.zeros(n_e), np.ones(built), np.full(n_ocs, 2.0)])
        return graph_from_cables(
            n_e + built + n_ocs, tier, a, b, cls, gbps, r.n_gpus, r.nics_per_gpu
        )

    return Topology(
        family="ocs",
        request=r,
        tiers=tiers,
        switches_by_tier=switches,
        links=links,
        max_switch_hops=hmax,
        mean_switch_hops=hmean,
        hop_histogram=hist,
        bisection_GBps=bisection,
        oversubscription=1.0,
        params={
            "block": shape.kind,
            "block_gpus": shape.block_gpus,
            "domains_per_block": shape.domains,
            "n_blocks": B,
            "n_blocks_built": built,
            "uplinks_per_block": U,
            "ocs_uplinks_per_block": p,
            "n_ocs": n_ocs,
            "ocs_ports": r.ocs_ports,
            "ocs_key": r.ocs_key,
            "fibers_per_uplink": f,
            "ocs_ports_used": built * U * f,
            "optic_key": r.optic_key,
            "ocs_rack_units": r.ocs_rack_units,
            "circuits": r.circuits,
            "reconfigure": r.reconfigure,
            "n_circuits": int(c_a.size),
            "circuits_data": Circuits(c_a, c_b, c_s, hops, job_phys, failed),
            "n_failed_blocks": int(failed.size),
            "spare_blocks": r.spare_blocks,
            "pod_tiers": shape.pod_tiers,
            "pod_leaves": shape.pod_leaves,
            "pod_spines": shape.pod_spines,
            "mesh_cables_per_cube": shape.mesh_cables,
            "unused_ports_per_block": shape.unused_ports,
            "block_link_class": cls_index,
            "n_nodes": built,
            "n_internal_links": r.n_endpoints,
            "internal_link_class": INTERNAL_LINK_CLASS,
            "node_id": "graph node = n_endpoints + block; OCS k = n_endpoints + blocks + k",
            "hop_unit": (
                "switches (leaf, spine; a spine per block relayed through)"
                if shape.kind == "pod"
                else "circuits between blocks (cube: plus mesh links to the cube's face)"
            ),
            **{k: v for k, v in facts.items() if k != "job_note"},
        },
        notes=tuple(notes),
        _graph_builder=graph,
    )


def _spread(total: int, over: int) -> list[tuple[int, int]]:
    """``total`` items over ``over`` holders: ``[(per holder, holders), ...]`` (two sizes)."""
    q, rem = divmod(total, over)
    return [(q + 1, rem), (q, over - rem)] if rem else [(q, over)]


def _link_classes(
    r: OcsRequest, shape: BlockShape, p: int, n_ocs: int
) -> tuple[tuple[LinkClass, ...], int, dict[str, int]]:
    built, U = shape.n_built, shape.uplinks
    last = U - (n_ocs - 1) * p
    ocs_groups = [PortGroup("ocs", p * built, n_ocs - 1), PortGroup("ocs", last * built, 1)]
    ocs_groups = [g for g in ocs_groups if g.n_switches]
    links: list[LinkClass] = []
    if shape.kind == "pod":
        ports = shape.block_gpus * r.nics_per_gpu
        leaf_groups = [
            PortGroup("leaf", n, k * built) for n, k in _spread(ports, shape.pod_leaves) if k
        ]
        links.append(
            LinkClass(
                "nic-leaf",
                built * ports,
                r.link_gbps,
                r.nic_leaf_m,
                ("nic", "leaf"),
                tuple(leaf_groups),
            )
        )
        if shape.pod_tiers == 2:
            spine_groups = [
                PortGroup("spine", n, k * built) for n, k in _spread(ports, shape.pod_spines) if k
            ]
            links.append(
                LinkClass(
                    "leaf-spine",
                    built * ports,
                    r.link_gbps,
                    r.leaf_spine_m,
                    ("leaf", "spine"),
                    (*leaf_groups, *spine_groups),
                )
            )
            up_end, up_groups = "spine", spine_groups
        else:
            up_end, up_groups = "leaf", leaf_groups
        links.append(
            LinkClass(
                BLOCK_LINK_CLASS,
                built * U,
                r.link_gbps,
                r.direct_link_m,
                (up_end, "ocs"),
                (*up_groups, *ocs_groups),
            )
        )
        switches = {"leaf": shape.pod_leaves * built}
        if shape.pod_spines:
            switches["spine"] = shape.pod_spines * built
        switches["ocs"] = n_ocs
        return tuple(links), shape.pod_tiers, switches
    if shape.kind == "cube":
        links.append(
            LinkClass(
                "cube-mesh", built * shape.mesh_cables, r.link_gbps, r.direct_link_m, ("nic", "nic")
            )
        )
    links.append(
        LinkClass(
            BLOCK_LINK_CLASS,
            built * U,
            r.link_gbps,
            r.direct_link_m,
            ("nic", "ocs"),
            tuple(ocs_groups),
        )
    )
    return tuple(links), 0, {"ocs": n_ocs}


def _histogram(
    r: OcsRequest, shape: BlockShape, job_hops: np.ndarray
) -> tuple[dict[int, float], int, float]:
    """Return the hop histogram over ordered GPU pairs in different NVLink domains."""
    B, bg, dom = shape.n_blocks, shape.block_gpus, r.nvlink_domain
    off = ~np.eye(B, dtype=bool)
    d_counts = np.bincount(job_hops[off].astype(np.int64)) if B > 1 else np.zeros(1)
    counts: dict[int, float] = {}

    def add(h: int, n: float) -> None:
        if n > 0:
            counts[h] = counts.get(h, 0.0) + n

    if shape.kind == "nvlink":
        for d, k in enumerate(d_counts.tolist()):
            add(d, k * bg * bg)
    elif shape.kind == "pod":
        inside = 3 if shape.pod_tiers == 2 else 1
        add(inside, B * (bg * bg - shape.domains * dom * dom))
        for d, k in enumerate(d_counts.tolist()):
            add(d + inside, k * bg * bg)
    else:
        mesh = _mesh_distance_counts(CUBE_SIDE)
        for h, k in enumerate(mesh.tolist()):
            if h:
                add(h, B * k * dom * dom)
        face = np.bincount(cube_face_distance(np.arange(CUBE_SIDE**3))).astype(np.float64)
        ends = np.convolve(face, face)
        for d, k in enumerate(d_counts.tolist()):
            for h, m in enumerate(ends.tolist()):
                add(d + h, k * m * dom * dom)
    return hop_histogram(counts)


def _bisection(
    r: OcsRequest, shape: BlockShape, c_a: np.ndarray, c_b: np.ndarray, job_phys: np.ndarray
) -> float:
    """Cables across the cut between the first and second half of the job's blocks."""
    B = shape.n_blocks
    if B == 1:
        if shape.kind == "pod":
            return r.n_endpoints / 2 * r.planes
        if shape.kind == "cube":
            return float(CUBE_SIDE * CUBE_SIDE * shape.mesh_c)
        return 0.0
    half = np.full(shape.n_built, -1, dtype=np.int64)
    half[job_phys] = (np.arange(B) >= B // 2).astype(np.int64)
    ha, hb = half[c_a], half[c_b]
    return float(((ha >= 0) & (hb >= 0) & (ha != hb)).sum())


def _notes(
    r: OcsRequest,
    shape: BlockShape,
    p: int,
    n_ocs: int,
    n_circuits: int,
    per_block: np.ndarray,
    job_phys: np.ndarray,
    failed: np.ndarray,
    n_dark: int,
    facts: dict[str, Any],
) -> list[str]:
    B, U = shape.n_blocks, shape.uplinks
    kind = {
        "nvlink": f"NVLink domains of {shape.block_gpus} GPUs",
        "cube": f"4 x 4 x 4 torus cubes of NVLink domains ({shape.block_gpus:,} GPUs)",
        "pod": (
            f"pods of {shape.block_gpus:,} GPUs on a "
            + (
                f"{shape.pod_leaves}-leaf, {shape.pod_spines}-spine"
                if shape.pod_tiers == 2
                else "one-leaf"
            )
            + " fabric"
        ),
    }[shape.kind]
    spares = f" + {r.spare_blocks} spare" if r.spare_blocks else ""
    notes = [
        f"{B:,} blocks{spares}: {kind}, {U:,} uplinks each on {n_ocs:,} OCS "
        f"({r.ocs_key or 'OCS'}, {r.ocs_ports} ports; {p} uplink(s) per block on each, "
        f"{r.fibers_per_uplink} fiber(s) per uplink)"
    ]
    live = per_block[job_phys]
    idle = U * B - int(live.sum())
    notes.append(
        f"{r.circuits} circuits: {n_circuits:,} in all, {int(live.min()) if live.size else 0}"
        f"-{int(live.max()) if live.size else 0} per block"
        + (f"; {idle:,} uplink ports of the job's blocks idle" if idle else "")
    )
    if "block_dims" in facts:
        notes.append("blocks as a " + " x ".join(map(str, facts["block_dims"])) + " torus")
    if "job_note" in facts:
        notes.append(facts["job_note"])
    if shape.kind == "cube":
        notes.append(
            "a cube's 4 x 4 x 4 mesh is aggregated: traffic inside a cube is not limited by its "
            f"{shape.mesh_cables} copper links (fabric.topology = torus-3d models them)"
        )
        if shape.unused_ports:
            notes.append(f"{shape.unused_ports} NIC ports per cube are not cabled")
    if shape.kind == "pod":
        notes.append(
            "a pod's leaf-spine is non-blocking and aggregated; traffic relayed through a pod "
            "leaves on a circuit of the spine it arrived at"
        )
    if failed.size:
        how = (
            f"their {n_dark:,} circuits are dark and routes go around them"
            if r.reconfigure == "never"
            else "the circuits are re-formed among the job's blocks"
        )
        notes.append(
            f"{failed.size} failed block(s) (job blocks {', '.join(map(str, failed.tolist()))}) "
            f"replaced by spares; {how}"
        )
    return notes
