"""Topology-native all-reduce, all-gather and reduce-scatter on switchless fabrics.

A 3D-torus node has ``2 k`` directed neighbour trunks (``k`` active dimensions, each direction
``c_i`` cables), a hypercube node ``d`` (one per dimension, ``c`` cables). NCCL's rank-order
ring leaves every node through the same ``+x`` trunk, so it uses one of them; the algorithms
here are the ones torus and hypercube machines run instead, and they keep every trunk busy.

Algorithms
----------
``ring`` on ``torus-3d``: *multi-colour bucket* all-reduce (Jain and Sabharwal, "Optimal
    bucket algorithms for large MPI collectives on torus interconnects", ICS 2010; the
    dimension-wise ring all-reduce of TPU pods, Jouppi et al., TPU v4, ISCA 2023; Blue Gene
    and Cray practice). The data is split into ``k`` colours; colour ``r`` runs a
    reduce-scatter along the dimensions in the rotated order ``(r, r+1, ..., r-1)``, then the
    all-gather back, each dimension as a *bidirectional* ring (half of the colour's data goes
    ``+``, half ``-``). Phase ``p`` of colour ``r`` works in dimension ``(r + p) mod k``, so in
    every phase the ``k`` colours occupy the ``k`` dimensions, both directions: all ``2 k``
    trunks of every node at once.
``hierarchical`` on ``torus-3d``: the single-colour dimension-wise all-reduce (reduce-scatter
    along x, then y, then z, all-gather back; bidirectional rings): two of the ``2 k``
    trunks at a time.
``ring`` on ``hypercube``: multi-colour recursive halving-doubling (Rabenseifner's
    reduce-scatter + all-gather, Thakur, Rabenseifner and Gropp, IJHPCA 2005; the multi-port
    form uses every dimension at once, as the torus colours do): colour ``r`` of ``d``
    exchanges with ``u XOR 2^((r + j) mod d)`` at step ``j``, halving its data each step.
``hierarchical`` on ``hypercube``: single-colour recursive halving-doubling, one dimension
    at a time.

Flow-graph solve
----------------
Within a phase every node sends to its neighbours along the phase's dimensions; the pattern
(node ``u`` to each neighbour, one connection per colour and direction, on distinct NIC
slots) is routed by the scenario's routing policy and solved max-min on the real graph
(:func:`_neighbour_rates`): a degraded cable or a shared trunk shows in the granted rate. The
multi-colour patterns are the same in every phase (all dimensions, both directions), so they
are solved once; the single-colour patterns once per dimension. Phases are synchronised: a
phase lasts as long as its slowest connection, ``T_p = max_r bytes_rp / rate_rp`` (a colour
on a slower dimension, or a slower node, holds the phase).

NVLink side, as :func:`~fabric_model.collectives.algorithms.hierarchical_model`: the GPUs of
a node reduce-scatter over NVLink first, the node's ``S`` is all-reduced across nodes over all
its trunks (the graph's internal links aggregate the domain's NIC ports), then all-gathered
over NVLink, pipelined; forwarding through a node's NVLink (a ``-x`` NIC on one GPU, the
``+x`` NIC on another) is not modelled (the graph aggregates the domain).
"""

from __future__ import annotations

import math

import numpy as np

from fabric_model.collectives.context import ECMP_SEEDS, FabricContext, PatternResult
from fabric_model.collectives.model import AlgoModel, AlgorithmUnavailableError, bus_factor
from fabric_model.collectives.terms import assemble, latencies, nvlink_ring_Bps
from fabric_model.flows import solve_maxmin
from fabric_model.plant.design import SWITCHLESS
from fabric_model.routing import route

__all__ = [
    "applies",
    "hierarchical_model",
    "node_link_Bps",
    "node_link_bound_Bps",
    "ring_model",
    "torus_phase_times",
]

_OPS = ("allreduce", "allgather", "reducescatter")
_PROTOS = ("LL", "LL128", "Simple")


# ------------------------------------------------------------------------ shape helpers


def applies(ctx: FabricContext) -> bool:
    """Return whether the topology-native algorithms model this collective.

    They need a switchless fabric, more than one node, and a communicator that is the whole
    machine on the plain solve: a training group placed on part of a torus
    (``fabric_model.training.layout.GroupContext``, which solves several groups at once) keeps
    the generic NCCL patterns, since its ranks do not own every neighbour link.
    """
    return (
        ctx.topology.family in SWITCHLESS
        and ctx.n_domains > 1
        and ctx.n_domains == int(ctx.topology.params["n_nodes"])
        and type(ctx).solve is FabricContext.solve
    )


def _torus_active(ctx: FabricContext) -> list[tuple[int, int, int]]:
    """Active dimensions ``(index, size L_i, node-id stride)``, longest first."""
    dims = ctx.topology.params["dims"]
    stride = (1, dims[0], dims[0] * dims[1])
    return [(i, int(dims[i]), int(stride[i])) for i in range(3) if dims[i] >= 2]


def _torus_neighbour(ctx: FabricContext, node: np.ndarray, i: int, step: int) -> np.ndarray:
    """Node ``step`` (+1 or -1) along dimension ``i`` of each ``node``."""
    dims = ctx.topology.params["dims"]
    length = int(dims[i])
    st = (1, dims[0], dims[0] * dims[1])[i]
    coord = (node // st) % length
    return node + st * ((coord + step) % length - coord)


def _endpoint(ctx: FabricContext, node: np.ndarray, slot: np.ndarray) -> np.ndarray:
    """NIC endpoint of NIC ``slot`` of physical node (domain) ``node``.

    A topology-aware collective maps ranks onto the machine's coordinates, so the physical
    node is used (the placement what-if permutes NCCL's rank order, not the torus).
    """
    per_node = ctx.scenario.cluster.nvlink_domain * ctx.nics
    return np.asarray(node, np.int64) * per_node + np.asarray(slot, np.int64) % per_node


def _neighbour_rates(
    ctx: FabricContext, src: np.ndarray, dst: np.ndarray, group: np.ndarray, n_groups: int
) -> tuple[np.ndarray, str, float]:
    """Solve concurrent connections on the graph; slowest rate of each group, per seed.

    Parameters
    ----------
    ctx
        The fabric.
    src, dst
        NIC endpoints of the concurrent connections.
    group
        Group (colour and direction) of each connection, ``0 .. n_groups - 1``.
    n_groups
        Number of groups.

    Returns
    -------
    (rates_Bps, bottleneck, mean_hops)
        ``rates_Bps[seed, g]``: the slowest connection of group ``g`` (bytes/s), per ECMP seed
        (one row for deterministic routing); the link class that froze the slowest
        connection; the mean links crossed.

    Notes
    -----
    Max-min fair rates from the flow solver (progressive filling) on the routed pattern, as
    :meth:`FabricContext.solve`, with the per-group minimum kept.
    """
    seeds = range(ECMP_SEEDS) if ctx.policy == "ecmp" else range(1)
    rows, bottleneck, hops = [], "", 0.0
    for seed in seeds:
        rf = route(
            ctx.topology,
            src,
            dst,
            ctx.policy,
            ctx.capacity_Bps,
            qps=ctx.scenario.fabric.qps_per_connection,
            rng=np.random.default_rng(seed),
        )
        sol = solve_maxmin(rf.flows, rf.link_capacity_Bps)
        conn = np.full(rf.n_connections, np.inf)
        np.minimum.at(conn, rf.flow_of_connection, sol.rate_Bps / rf.flow_fraction)
        per = np.full(n_groups, np.inf)
        np.minimum.at(per, group, conn)
        rows.append(per)
        if not bottleneck:
            worst = int(np.argmin(sol.rate_Bps))
            link = int(sol.bottleneck_link[worst])
            cls = int(rf.link_class[link]) if link >= 0 else -1
            bottleneck = rf.class_names[cls] if 0 <= cls < len(rf.class_names) else "nic"
            hops = float(rf.switch_hops.mean())
    return np.asarray(rows), bottleneck, hops


def node_link_Bps(ctx: FabricContext) -> float:
    """Total cable rate leaving one node (domain), bytes/s: cables per node x line rate."""
    p = ctx.topology.params
    if ctx.topology.family == "torus-3d":
        dims = p["dims"]
        per = p["cables_per_direction_by_dim"]
        trunks = sum(2 * per[i] for i in range(3) if dims[i] >= 2)
    else:
        trunks = int(p["dimensions"]) * int(p["cables_per_dimension"])
    return trunks * ctx.nic_Bps


def node_link_bound_Bps(ctx: FabricContext, op: str) -> float:
    """Upper bound on the network-side bus bandwidth of any all-reduce-class algorithm, B/s.

    Notes
    -----
    Without in-network reduction every node must send (and receive) at least
    ``f_op (m - 1) / m x S`` bytes over its cables (``f = 2`` all-reduce, 1 all-gather and
    reduce-scatter; Patarasuk and Yuan, "Bandwidth optimal all-reduce algorithms for clusters
    of workstations", JPDC 2009, applied to the ``m`` nodes once the domain has reduced over
    NVLink), at most ``B_node`` = the node's total cable rate, so
    ``busbw = bus_factor(n) S / t <= B_node x eff x bus_factor(n) / bus_factor(m)``, ``eff``
    the Simple-protocol line-rate efficiency.
    """
    m, n = ctx.n_domains, ctx.n_ranks
    eff = float(ctx.constants["net_efficiency"])
    return node_link_Bps(ctx) * eff * bus_factor(op, n) / bus_factor(op, m)


# ----------------------------------------------------------------------------- torus


def torus_phase_times(
    sizes: list[int], rates_Bps: np.ndarray, colours: int
) -> tuple[float, np.ndarray]:
    """Reduce-scatter time of the (multi-)colour bucket algorithm per byte, and the split.

    Parameters
    ----------
    sizes
        Ring sizes ``L_i`` of the active dimensions, in dimension order.
    rates_Bps
        ``rates_Bps[i, dir]``: granted rate of a connection along dimension ``i``, direction
        ``dir`` (0 ``+``, 1 ``-``), bytes/s (for a multi-colour run the rates of one joint
        solve; for a single colour, of each dimension's own solve).
    colours
        ``k`` (one colour per dimension, rotated orders) or 1 (order x, y, z).

    Returns
    -------
    (seconds_per_byte, fractions)
        ``T_RS / S``, and the share of the data each colour carries.

    Notes
    -----
    Colour ``r`` carrying ``phi_r S`` reduce-scatters along ``o_r = (r, r+1, ...)``: in phase
    ``p`` it holds ``V_rp = phi_r S / prod_{q<p} L_{o_r[q]}`` and its bidirectional ring of
    ``L = L_{o_r[p]}`` nodes sends ``(L - 1) / L x V_rp / 2`` each way (``L - 1`` steps of
    ``V_rp / (2 L)``; Jain and Sabharwal, ICS 2010). Phase time
    ``T_p = max_r max_dir bytes / rate``, ``T_RS = sum_p T_p``; the all-gather mirrors it.
    The split ``phi_r`` is proportional to the first phase's rate per byte, so the dominant
    phase is balanced over the dimensions (a size-2 ring sends all ``V / 2`` to its one
    neighbour in each direction: ``(L - 1) / L = 1 / 2``).
    """
    k = len(sizes)
    rate = rates_Bps.min(axis=1)  # a bidirectional ring runs at its slower direction
    orders = [[(r + p) % k for p in range(k)] for r in range(colours)]

    def per_byte(i: int) -> float:
        return (sizes[i] - 1) / sizes[i] / 2.0 / rate[i]

    first = np.array([1.0 / per_byte(o[0]) for o in orders])
    phi = first / first.sum()
    total, shrink = 0.0, np.ones(colours)
    for p in range(k):
        times = [phi[r] * shrink[r] * per_byte(orders[r][p]) for r in range(colours)]
        total += max(times)
        shrink *= np.array([1.0 / sizes[orders[r][p]] for r in range(colours)])
    return total, phi


def _torus_network(ctx: FabricContext, op: str, multi: bool) -> tuple[PatternResult, float]:
    """Network-side bus bandwidth of the bucket algorithm, solved on the graph.

    Returns a :class:`PatternResult` whose ``min_rate_Bps`` per seed is already the bus
    bandwidth ``bus_factor x S / T`` (so the scale is 1), and the network steps.
    """
    act = _torus_active(ctx)
    k = len(act)
    n_nodes = int(ctx.topology.params["n_nodes"])
    node = np.arange(n_nodes, dtype=np.int64)
    seeds = ECMP_SEEDS if ctx.policy == "ecmp" else 1
    rates = np.zeros((seeds, k, 2))
    bottleneck, hops = "", 0.0
    patterns = [list(range(k))] if multi else [[a] for a in range(k)]
    for dims_in in patterns:
        src, dst, grp = [], [], []
        for a in dims_in:
            i = act[a][0]
            for direction, step in enumerate((1, -1)):
                slot = np.full(n_nodes, 2 * a + direction)
                src.append(_endpoint(ctx, node, slot))
                dst.append(_endpoint(ctx, _torus_neighbour(ctx, node, i, step), slot))
                grp.append(np.full(n_nodes, 2 * a + direction))
        r, b, h = _neighbour_rates(
            ctx, np.concatenate(src), np.concatenate(dst), np.concatenate(grp), 2 * k
        )
        for a in dims_in:
            rates[:, a, :] = r[:, 2 * a : 2 * a + 2]
        if not bottleneck:
            bottleneck, hops = b, h
    sizes = [length for _, length, _ in act]
    passes = 2.0 if op == "allreduce" else 1.0
    colours = k if multi else 1
    busbw = np.array(
        [
            bus_factor(op, ctx.n_ranks) / (passes * torus_phase_times(sizes, rates[s], colours)[0])
            for s in range(seeds)
        ]
    )
    steps = passes * sum(length - 1 for length in sizes)
    return PatternResult(busbw, float(busbw.mean()), bottleneck, hops, 1), steps


# ------------------------------------------------------------------------- hypercube


def _hypercube_network(ctx: FabricContext, op: str, multi: bool) -> tuple[PatternResult, float]:
    """Network-side bus bandwidth of recursive halving-doubling, solved on the graph.

    Notes
    -----
    Colour ``r`` of ``k`` (``k = d`` multi-colour, else 1) carries ``S / k``; at step ``j`` it
    exchanges ``S / (k 2^(j+1))`` with ``u XOR 2^((r + j) mod d)`` (Thakur, Rabenseifner and
    Gropp, IJHPCA 2005). Synchronised steps: ``T_RS = sum_j max_r bytes / rate``; the
    all-gather mirrors it. Multi-colour: one solve (all ``d`` dimensions at once);
    single colour: one solve per dimension.
    """
    d = int(ctx.topology.params["dimensions"])
    n_nodes = int(ctx.topology.params["n_nodes"])
    node = np.arange(n_nodes, dtype=np.int64)
    seeds = ECMP_SEEDS if ctx.policy == "ecmp" else 1
    rates = np.zeros((seeds, d))
    bottleneck, hops = "", 0.0
    patterns = [list(range(d))] if multi else [[i] for i in range(d)]
    for dims_in in patterns:
        src = np.concatenate([_endpoint(ctx, node, np.full(n_nodes, i)) for i in dims_in])
        dst = np.concatenate(
            [_endpoint(ctx, node ^ (1 << i), np.full(n_nodes, i)) for i in dims_in]
        )
        grp = np.repeat(np.arange(len(dims_in)), n_nodes)
        r, b, h = _neighbour_rates(ctx, src, dst, grp, len(dims_in))
        rates[:, dims_in] = r
        if not bottleneck:
            bottleneck, hops = b, h
    colours = d if multi else 1
    passes = 2.0 if op == "allreduce" else 1.0
    busbw = []
    for s in range(seeds):
        t_rs = 0.0
        for j in range(d):
            t_rs += max(
                1.0 / colours / 2 ** (j + 1) / rates[s, (r + j) % d] for r in range(colours)
            )
        busbw.append(bus_factor(op, ctx.n_ranks) / (passes * t_rs))
    arr = np.asarray(busbw)
    return PatternResult(arr, float(arr.mean()), bottleneck, hops, 1), passes * d


# ---------------------------------------------------------------------------- models


def _model(ctx: FabricContext, op: str, name: str, multi: bool) -> AlgoModel:
    """Assemble the model: NVLink reduce-scatter/all-gather, the network algorithm, latency.

    Notes
    -----
    NVLink side (as the hierarchical model): each GPU sends ``f_op (D - 1) / D x S`` over
    NVLink, so ``intra = bus_factor(n) / (f_op (D - 1) / D) x B_nvlink x eff_nvlink``.
    Latency: NCCL's ring base + ``f_op (D - 1)`` NVLink steps + the network steps
    (``f_op sum_i (L_i - 1)`` neighbour steps on the torus, ``f_op d`` on the hypercube),
    each one cable hop (NCCL's NET hwLat + the path's NIC forwarding and fiber).
    """
    if op not in _OPS:
        raise AlgorithmUnavailableError(
            f"{name} runs allreduce, allgather, reducescatter on {ctx.topology.family}; not {op}"
        )
    if name == "hierarchical" and op != "allreduce":
        raise AlgorithmUnavailableError(f"hierarchical runs allreduce only, not {op}")
    n, d = ctx.n_ranks, ctx.domain
    f = 2.0 if op == "allreduce" else 1.0
    intra = bus_factor(op, n) / (f * (d - 1) / d) * nvlink_ring_Bps(ctx) if d > 1 else math.inf
    if ctx.topology.family == "torus-3d":
        res, steps = _torus_network(ctx, op, multi)
    else:
        res, steps = _hypercube_network(ctx, op, multi)
    lat = latencies(ctx, "ring", _PROTOS, f * (d - 1), steps, res.mean_switch_hops)
    return assemble(ctx, op, name, intra, res, 1.0, lat)


def ring_model(ctx: FabricContext, op: str) -> AlgoModel:
    """Multi-colour all-reduce (torus: bucket; hypercube: halving-doubling) on every trunk."""
    return _model(ctx, op, "ring", multi=True)


def hierarchical_model(ctx: FabricContext, op: str) -> AlgoModel:
    """Single-colour dimension-wise all-reduce: one dimension (both directions) at a time."""
    return _model(ctx, op, "hierarchical", multi=False)
