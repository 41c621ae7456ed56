"""Collective algorithms as traffic patterns on the fabric plus NCCL-like latency terms.

Each ``<algo>_model(ctx, op)`` returns an :class:`AlgoModel`. The network side of every
algorithm is the max-min fair rate the flow solver grants to the algorithm's own concurrent
connections on the scenario's topology and routing; the NVLink side uses the GPU's NVLink
rate. Phases that repeat (ring steps, tree pipelining) share one solve.

Patterns (``D`` GPUs per NVLink domain, ``m`` domains, ``k`` = NICs a ring or tree uses to
leave a domain, one per two channels as NCCL opens them):

- **ring**: NCCL's rail-aligned rings; per channel, the ring leaves domain ``d`` for domain
  ``d + 1`` on the same NIC slot: ``k`` concurrent connections per domain boundary, each
  carrying ``bus_factor x S / k``. Inside a domain the ring moves over NVLink.
- **tree**: NCCL's double binary tree over domains, one per channel: every tree edge carries
  half of its channel's data in both directions, all edges at once (reduce and broadcast are
  pipelined), so an interior NIC carries four concurrent streams.
- **hierarchical**: NVLink reduce-scatter, a ring over domains for every GPU's ``S / D``
  shard on its own NIC(s), NVLink all-gather, pipelined.
- **nvls**: NVSwitch in-network reduction (Hopper and later) inside the domain; across domains
  NCCL's NVLS-Tree (the ``S / D`` shards all-reduced over the double binary tree of domains).
  All-gather and reduce-scatter use NVLS inside one domain.
- **sharp**: in-switch reduction on InfiniBand: each NIC sends its ``S / (D x nics)`` shard up
  once and receives the result once; only the NIC links carry full streams.
- **direct / hierarchical all-to-all**: every GPU sends ``S / n`` to every other GPU; direct
  goes NIC to NIC, hierarchical (PXN) first moves data over NVLink to the GPU on the
  destination's rail so each NIC talks only to its own rail. With ``model.routing_skew = s``
  a seeded random share ``model.hot_fraction = h`` of the GPUs (hot experts) receives ``s``
  times the mean, the others ``(1 - h s) / (1 - h)``; the solve is progress-fair (each
  connection advances at the same fraction of its own bytes), so the busiest receivers set
  the pace, and the NVLink side slows by the hottest receiver's factor.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fabric_model.collectives import switchless
from fabric_model.collectives.context import FabricContext, PatternResult
from fabric_model.collectives.model import AlgoModel, AlgorithmUnavailableError, bus_factor
from fabric_model.collectives.terms import assemble, latencies, nvlink_ring_Bps, ring_channels
from fabric_model.collectives.transport import overload

__all__ = [
    "ALLTOALL_MAX_CONNECTIONS",
    "ModelLimitError",
    "direct_model",
    "hierarchical_model",
    "hierarchical_or_pxn_model",
    "nvls_heads",
    "nvls_model",
    "ring_model",
    "sharp_model",
    "tree_model",
]


class ModelLimitError(AlgorithmUnavailableError):
    """The algorithm runs on this design, but this model version cannot solve it.

    The message says why and gives the closed-form bounds.
    """


#: All-to-all is solved per connection up to this many concurrent flows (connections, times
#: the queue pairs ECMP hashes separately), and by flow classes (uniform traffic, see
#: ``FabricContext.solve_all_to_all``) beyond.
ALLTOALL_MAX_CONNECTIONS = 300_000


def _tree_channel_cap_Bps(ctx: FabricContext, key: str) -> float:
    """NCCL's per-channel cap on tree / NVLS-Tree all-reduce bus bandwidth, bytes/s.

    ``tuning.cc`` caps the tree at ``nChannels x perChMaxTreeBw`` (NVLS-Tree: its own
    table), indexed by 1 node, 2 nodes, more. A tree channel needs two SMs where a ring
    channel needs one, and NCCL gives the tree the ring's SM budget, so the tree runs with
    ``tree_channels_fraction`` of the ring's channels (the NCCL maintainer: "Tree will
    struggle to get better performance than ring without using 32 SMs (which we
    disallow)", nccl-tests issue 196).
    """
    return _per_channel_cap_Bps(ctx, key, ctx.constants["tree_channels_fraction"])


def _per_channel_cap_Bps(ctx: FabricContext, key: str, channel_fraction: float) -> float:
    """``channel_fraction x ring channels x`` the per-channel table value ``key``, bytes/s.

    The tables (``tuning.cc``) are indexed by 1 node, 2 nodes, more; a missing entry is no
    cap (``inf``).
    """
    per_channel = ctx.constants[key].get(ctx.arch)
    m = ctx.n_domains
    value = None if per_channel is None else per_channel[0 if m == 1 else 1 if m == 2 else 2]
    if value is None:
        return math.inf
    return ring_channels(ctx) * channel_fraction * float(value) * 1e9


def _tuner_ring_busbw_Bps(ctx: FabricContext) -> float:
    """Return the ring's Simple bus bandwidth in NCCL's tuner across domains, bytes/s.

    ``tuning.cc`` takes ``nChannels x bw`` of the ring graph: the search gives every channel
    the bandwidth its NIC and NVLink path can carry at nominal rates (NET speed, PCIe width;
    ``search.cc``), so over ``k`` NICs per domain the table holds
    ``min(k x NIC rate, NVLink ring rate)``. The tuner knows neither the fabric's
    congestion nor its oversubscription.
    """
    nic = min(ctx.nic_Bps, ctx.nic_feed_Bps)
    return min(ctx.nics_used_per_domain * nic, nvlink_ring_Bps(ctx))


def _tuner_tree_busbw_Bps(ctx: FabricContext) -> float:
    """Return the tree's Simple all-reduce bus bandwidth in NCCL's tuner, bytes/s.

    ``tuning.cc``: ``min(0.92 x nChannels x bw, nChannels x perChMaxTreeBw)`` on the graph's
    channels (not the execution channels the delivered tree runs with), indexed by 1 node,
    2 nodes, more.
    """
    base = _tuner_ring_busbw_Bps(ctx) if ctx.n_domains > 1 else nvlink_ring_Bps(ctx)
    cap = _per_channel_cap_Bps(ctx, "tree_per_channel_GBps", 1.0)
    return min(base * ctx.constants["tree_bw_factor"], cap)


def _ring_pattern(ctx: FabricContext, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Build connections domain d -> d+1 (logical ring order) on each given NIC slot."""
    m = ctx.n_domains
    d = np.repeat(np.arange(m, dtype=np.int64), slots.size)
    s = np.tile(slots, m)
    return ctx.endpoint(d, s), ctx.endpoint(d + 1, s)


# ----------------------------------------------------------------------------- ring


def ring_model(ctx: FabricContext, op: str) -> AlgoModel:
    """Ring all-reduce, all-gather or reduce-scatter."""
    if switchless.applies(ctx):  # torus / hypercube: every trunk of a node
        return switchless.ring_model(ctx, op)
    if op not in ("allreduce", "allgather", "reducescatter"):
        raise AlgorithmUnavailableError(f"ring runs allreduce, allgather, reducescatter; not {op}")
    n, m = ctx.n_ranks, ctx.n_domains
    protos = ("LL", "LL128", "Simple")
    steps = 2 * (n - 1) if op == "allreduce" else n - 1
    inter_steps = 2 * (m - 1) if op == "allreduce" else m - 1
    if m == 1:
        lat = latencies(ctx, "ring", protos, steps, 0, 0)
        return assemble(ctx, op, "ring", nvlink_ring_Bps(ctx), None, 0, lat)
    k = ctx.nics_used_per_domain
    res = ctx.solve(*_ring_pattern(ctx, ctx.slots_spread(k)))
    lat = latencies(ctx, "ring", protos, steps - inter_steps, inter_steps, res.mean_switch_hops)
    c = ctx.constants
    plateau = (
        dict(
            plateau_factor=c["ring_plateau_factor"],
            plateau_min_bytes=c["ring_plateau_bytes"] * 2 * k * n,
        )
        if op == "allreduce"
        else {}
    )
    return assemble(
        ctx,
        op,
        "ring",
        nvlink_ring_Bps(ctx),
        res,
        k,
        lat,
        tuner_busbw_Bps=_tuner_ring_busbw_Bps(ctx),
        **plateau,
    )


# ----------------------------------------------------------------------------- tree


def _btree_parents(m: int) -> np.ndarray:
    """Parent of each rank in NCCL's binary tree over ``0..m-1`` (-1 for the root).

    ``ncclGetBtree``: for rank ``r > 0`` with lowest set bit ``b``, the parent is
    ``(r ^ b) | (b << 1)``, or ``r ^ b`` when that is out of range. Odd ranks are leaves.
    """
    r = np.arange(m, dtype=np.int64)
    low = r & -r
    parent = (r ^ low) | (low << 1)
    parent = np.where(parent >= m, r ^ low, parent)
    parent[0] = -1
    return parent


def _dtree_edges(m: int) -> np.ndarray:
    """(child, parent) edges of NCCL's double binary tree (``ncclGetDtree``).

    The second tree mirrors the first (``r -> m-1-r``) for an even rank count and shifts it by
    one for an odd count, so every rank is interior in at most one of the two trees.
    """
    p1 = _btree_parents(m)
    r = np.arange(m, dtype=np.int64)
    if m % 2 == 0:
        src = m - 1 - r
        p2 = np.where(p1[src] < 0, -1, m - 1 - p1[src])
    else:
        src = (r - 1) % m
        p2 = np.where(p1[src] < 0, -1, (p1[src] + 1) % m)
    e1 = np.flatnonzero(p1 >= 0)
    e2 = np.flatnonzero(p2 >= 0)
    return np.concatenate([np.stack([e1, p1[e1]], 1), np.stack([e2, p2[e2]], 1)])


def tree_model(ctx: FabricContext, op: str) -> AlgoModel:
    """NCCL's double binary tree all-reduce (chain inside the domain, trees across)."""
    if op != "allreduce":
        raise AlgorithmUnavailableError(f"tree runs allreduce only, not {op}")
    m, d = ctx.n_domains, ctx.domain
    c = ctx.constants
    protos = ("LL", "LL128", "Simple")
    corr: dict[str, Any] = dict(
        tree_correction=tuple(tuple(c["tree_correction"][p]) for p in protos),
        tree_correction_protocols=protos,
    )
    intra = nvlink_ring_Bps(ctx) * c["tree_bw_factor"]
    cap = _tree_channel_cap_Bps(ctx, "tree_per_channel_GBps")
    # on a torus or hypercube NCCL's graph is the node's trunks, whose ring the model solves
    # (switchless.ring_model); the tuner's view of the tree there is not modelled: None
    corr["tuner_busbw_Bps"] = None if switchless.applies(ctx) else _tuner_tree_busbw_Bps(ctx)
    if m == 1:
        lat = latencies(ctx, "tree", protos, 2 * (d - 1), 0, 0)
        return assemble(ctx, op, "tree", intra, None, 0, lat, cap_Bps=cap, **corr)
    edges = _dtree_edges(m)
    k = ctx.nics_used_per_domain
    slots = ctx.slots_spread(k)
    a = np.repeat(np.concatenate([edges[:, 0], edges[:, 1]]), k)
    b = np.repeat(np.concatenate([edges[:, 1], edges[:, 0]]), k)
    s = np.tile(slots, 2 * edges.shape[0])
    src, dst = ctx.endpoint(a, s), ctx.endpoint(b, s)
    res = ctx.solve(src, dst)
    # an interior node: two children at line rate and its parent
    fan = overload(src, dst) if ctx.models_incast else (1, 1.0)
    # each edge stream carries S / (2k); bus bandwidth = bus_factor x S / time
    scale = 2 * k * bus_factor(op, ctx.n_ranks)
    lat = latencies(ctx, "tree", protos, 2 * (d - 1), 2 * math.log2(m), res.mean_switch_hops)
    model = assemble(
        ctx,
        op,
        "tree",
        intra,
        res,
        scale * c["tree_bw_factor"],
        lat,
        cap_Bps=cap,
        fan=fan,
        **corr,
    )
    return model


# --------------------------------------------------------------------- hierarchical


def _shard_ring(ctx: FabricContext) -> tuple[PatternResult, float]:
    """Ring over domains on every NIC: each carries 2(m-1)/m x S / (D x nics) for all-reduce.

    Returns the pattern result and the scale from the slowest connection's rate to the
    all-reduce bus bandwidth (bus_factor x S / time).
    """
    m, n = ctx.n_domains, ctx.n_ranks
    slots = np.arange(ctx.domain * ctx.nics, dtype=np.int64)
    res = ctx.solve(*_ring_pattern(ctx, slots))
    per_conn_fraction = (2.0 * (m - 1) / m) / (ctx.domain * ctx.nics)
    return res, bus_factor("allreduce", n) / per_conn_fraction


def hierarchical_model(ctx: FabricContext, op: str) -> AlgoModel:
    """NVLink reduce-scatter, inter-domain ring per NIC on the shard, NVLink all-gather."""
    if switchless.applies(ctx):  # torus / hypercube: dimension-wise
        return switchless.hierarchical_model(ctx, op)
    if op != "allreduce":
        raise AlgorithmUnavailableError(f"hierarchical runs allreduce only, not {op}")
    m, d, n = ctx.n_domains, ctx.domain, ctx.n_ranks
    protos = ("LL", "LL128", "Simple")
    # reduce-scatter + all-gather over NVLink: each GPU sends 2 (D-1)/D x S
    intra = bus_factor(op, n) / (2.0 * (d - 1) / d) * nvlink_ring_Bps(ctx) if d > 1 else math.inf
    if m == 1:
        lat = latencies(ctx, "ring", protos, 2 * (d - 1), 0, 0)
        return assemble(ctx, op, "hierarchical", intra, None, 0, lat)
    res, scale = _shard_ring(ctx)
    lat = latencies(ctx, "ring", protos, 2 * (d - 1), 2 * (m - 1), res.mean_switch_hops)
    return assemble(ctx, op, "hierarchical", intra, res, scale, lat)


# ----------------------------------------------------------------------------- NVLS


def nvls_model(ctx: FabricContext, op: str) -> AlgoModel:
    """NVSwitch in-network collectives (NVLink SHARP, Hopper and later).

    All-reduce: in-switch reduction inside the domain (algbw bound ``nvls_algbw_fraction`` of
    the NVLink rate); across domains NCCL's NVLS-Tree: each GPU's reduced ``S / D`` shard is
    all-reduced over NCCL's double binary tree of domains on its own NIC(s), latency
    ``intraLat + 2 log2(m) interLat``. All-gather and reduce-scatter: multicast or in-switch
    reduction inside one domain at NCCL's ``nvlsEff`` of the NVLink rate on the side that
    carries the whole buffer (busbw = that rate x (n - 1) / n).
    """
    c = ctx.constants
    frac = c["nvls_algbw_fraction"].get(ctx.arch)
    if frac is None or ctx.domain < 2:
        raise AlgorithmUnavailableError(
            f"nvls needs an NVSwitch domain with NVLink SHARP (Hopper or newer) of 2+ GPUs; "
            f"cluster.gpu = {ctx.scenario.cluster.gpu} ({ctx.arch}), domain {ctx.domain}"
        )
    n, m = ctx.n_ranks, ctx.n_domains
    if op in ("allgather", "reducescatter"):
        if m > 1:
            raise AlgorithmUnavailableError(
                f"nvls {op} runs inside one NVLink domain; this job spans {m} domains (use ring)"
            )
        # multicast moves the whole buffer S through each GPU's busier NVLink side (all-gather
        # receives S, reduce-scatter sends S; the ring moves (n - 1) S / n each way), so the
        # bus bandwidth is that side's rate times (n - 1) / n (NVIDIA/nccl issues #1083 and
        # #1506, the maintainer: NVLS "does not promise a bandwidth improvement" for them)
        intra = ctx.nvlink_Bps * c["nvls_efficiency"][ctx.arch] * bus_factor(op, n)
        lat = latencies(ctx, "nvls", ("Simple",), 1, 0, 0, base=False)
        return assemble(ctx, op, "nvls", intra, None, 0, lat)
    if op != "allreduce":
        raise AlgorithmUnavailableError(f"nvls runs allreduce, allgather, reducescatter; not {op}")
    intra = ctx.nvlink_Bps * frac * bus_factor(op, n)  # algbw bound -> bus bandwidth
    if m == 1:
        lat = latencies(ctx, "nvls", ("Simple",), 1, 0, 0, base=False)
        return assemble(ctx, op, "nvls", intra, None, 0, lat)
    edges = _dtree_edges(m)
    heads = nvls_heads(ctx)
    # one NIC per head GPU (the NVLS graph's channel c runs on its head's NIC), heads spread
    # over the domain's GPUs
    slots = (np.arange(heads) * ctx.domain // heads).astype(np.int64) * ctx.nics
    a = np.repeat(np.concatenate([edges[:, 0], edges[:, 1]]), slots.size)
    b = np.repeat(np.concatenate([edges[:, 1], edges[:, 0]]), slots.size)
    s = np.tile(slots, 2 * edges.shape[0])
    src, dst = ctx.endpoint(a, s), ctx.endpoint(b, s)
    res = ctx.solve(src, dst)
    fan = overload(src, dst) if ctx.models_incast else (1, 1.0)
    # every tree edge carries half of a head's S / heads shard, both ways at once
    scale = bus_factor(op, n) * 2 * heads
    # tuning.cc: NVLS-Tree latency = base (0) + intraLat + 2 x log2i(nNodes) x interLat,
    # interLat = hwLat[NET][NVLSTree][Simple] (+ the NIC's latencyInter, 0 for IB); log2i is
    # the integer floor of log2 (src/include/utils.h)
    intra_lat = c["hw_latency_us"]["nvlink"]["nvls"]["Simple"]
    inter_lat = c["hw_latency_us"]["net"]["nvls_tree"]["Simple"] + ctx.path_latency_us(
        res.mean_switch_hops
    )
    lat = {"Simple": intra_lat + 2 * math.floor(math.log2(m)) * inter_lat}
    # tuning.cc caps NVLS-Tree at nChannels x perChMaxNVLSTreeBw, nChannels of the NVLS
    # graph = its heads (one search channel per head)
    per_ch = c["nvls_tree_per_channel_GBps"].get(ctx.arch)
    value = None if per_ch is None else per_ch[1 if m == 2 else 2]
    cap = math.inf if value is None else heads * float(value) * 1e9
    # across domains NCCL runs NVLS-Tree (NCCL_ALGO=NVLSTree), its own algorithm and label
    return assemble(ctx, op, "nvls-tree", intra, res, scale, lat, cap_Bps=cap, fan=fan)


def nvls_heads(ctx: FabricContext) -> int:
    """NVLS heads per NVLink domain: the NICs NVLS-Tree crosses domains on.

    The NVLS graph search finds one head per GPU that owns a NIC (``search.cc``,
    ``ncclTopoSearchRecNet``; a GPU with two NICs is still one head), at most
    ``NCCL_MAX_NVLS_ARITY = 32`` (``ncclTopoCompute``); between MNNVL domains (an NVLink
    domain spanning several hosts) NCCL uses 16 NICs on GB200 (2.27.3 release note). Each
    head all-reduces ``S / heads`` over NCCL's double binary tree of domains
    (``connectNvls``), so the network side is ``heads x`` one NIC's tree rate: a
    full NVL72 rack on 400G NICs reaches ``16 x 47 = 752`` GB/s busbw across 4+ racks
    (an interior head's NIC carries four streams), below its NVLS bound (~945); on 2 racks
    twice that (each head's NIC carries half its data each way, the ``x 2`` tuning.cc gives
    NVLS-Tree on 2 nodes) and on 3 the trees are chains of at most three streams a NIC.
    """
    c = ctx.constants
    heads = min(ctx.domain, int(c["nvls_max_heads"]))
    mnnvl = ctx.scenario.cluster.gpus_per_node < ctx.scenario.cluster.nvlink_domain
    cap = c["mnnvl_inter_domain_nics"].get(ctx.arch)
    if mnnvl and cap is not None:
        heads = min(heads, int(cap))
    return max(1, heads)


# ---------------------------------------------------------------------------- SHARP


def sharp_model(ctx: FabricContext, op: str) -> AlgoModel:
    """In-switch reduction (SHARP, NCCL CollNet-Direct) on InfiniBand.

    The network bound is the NIC links: each NIC sends its ``S / (D x nics)`` shard up once
    and receives the result once (the flow solve). SHARP adds no rate of its own: the SHARP
    plugin (Mellanox/nccl-rdma-sharp-plugins ``src/sharp_plugin.c``,
    ``ncclSharpGetProperties_v11``) reports the IB NIC's own properties (its speed) to NCCL,
    with streaming aggregation (SAT) at that rate, and only ``maxCollBytes`` (512 MiB per
    call in SHARP 3.6 and older) as a limit; ``tuning.cc`` gives CollNet-Direct
    ``nChannels x bwIntra`` derated x 0.85 on Hopper and later. The intra-domain stage
    (NVLS, or the NVLink reduce-scatter to the NIC heads) is the other bound.
    """
    if op != "allreduce":
        raise AlgorithmUnavailableError(f"sharp is modelled for allreduce only, not {op}")
    sw = ctx.hardware.switch
    if ctx.topology.family == "ocs":
        raise AlgorithmUnavailableError(
            "sharp reduces in electrical switches, and an optical circuit switch passes light "
            "without reducing it (a pod's spines reduce only their own pod). Use ring, tree "
            "or nvls"
        )
    if not getattr(sw, "sharp", False) or ctx.topology.tiers == 0:
        raise AlgorithmUnavailableError(
            f"sharp needs InfiniBand switches with SHARP; {sw.name} "
            f"(fabric.vendor = {ctx.scenario.fabric.vendor}) has no switch-resident "
            f"reduction. Use ring, tree or nvls"
        )
    m, d, n = ctx.n_domains, ctx.domain, ctx.n_ranks
    if m == 1:
        raise AlgorithmUnavailableError(
            "sharp reduces across NVLink domains; this job fits in one domain (use nvls or ring)"
        )
    c = ctx.constants
    frac = c["nvls_algbw_fraction"].get(ctx.arch)
    if frac is not None and d > 1 and ctx.scenario.fabric.nvls:
        # the intra-domain part runs on NVLS (NCCL's multi-node NVLS = NVLS + CollNet)
        intra = ctx.nvlink_Bps * frac * bus_factor(op, n)
    else:
        # CollNet Direct: NVLink reduce-scatter to the NIC heads and all-gather back; on
        # Hopper and later tuning.cc derates the whole CollNet-Direct bus bandwidth x 0.85
        intra = (
            bus_factor(op, n) / (2.0 * (d - 1) / d) * nvlink_ring_Bps(ctx) if d > 1 else math.inf
        )
        if frac is not None:
            intra *= c["sharp_efficiency"]
    ep = ctx.endpoints()
    res = ctx.solve(ep, ep)  # each NIC: its shard up to the leaf and the result back
    scale = bus_factor(op, n) * d * ctx.nics * c["sharp_efficiency"]
    hops = 2.0 * ctx.topology.max_switch_hops / 2 if ctx.topology.max_switch_hops else 1.0
    lat_intra = c["hw_latency_us"]["nvlink"]["collnet_direct"]["Simple"]
    lat = {
        "Simple": 2 * (min(1, d - 1) * lat_intra + 0.4 * (d - 1))
        + c["hw_latency_us"]["net"]["collnet_direct"]["Simple"]
        + ctx.path_latency_us(hops)
        + 2 * (hops - 1) * sw.hop_latency_ns / 1000.0
    }
    return assemble(ctx, op, "sharp", intra, res, scale, lat)


# ------------------------------------------------------------------------- all-to-all


def receive_weights(n: int, skew: float, hot_fraction: float) -> np.ndarray:
    """Traffic each GPU receives relative to the mean, for a hot-expert skew.

    ``ceil(h n)`` GPUs chosen by a fixed seed (spread over domains and rails) receive ``s``
    times the mean; the rest share what is left, so the total is conserved.
    """
    w = np.ones(n)
    if skew <= 1.0 or n < 2:
        return w
    n_hot = min(n, max(1, math.ceil(hot_fraction * n)))
    hot = np.random.default_rng(7).choice(n, size=n_hot, replace=False)
    h = n_hot / n
    if h >= 1.0:
        return w
    w[:] = max(0.0, (1.0 - h * skew) / (1.0 - h))
    w[hot] = skew
    return w


def _rail_pairs(ctx: FabricContext, slots: np.ndarray) -> tuple[np.ndarray, ...]:
    """Rail-aligned (PXN) all-to-all connections: (source domain, destination domain, slot).

    Domain ``A`` sends ``|A| |B| S / n`` to domain ``B`` (every GPU ``S / n`` to every
    GPU). With PXN each byte first moves over NVLink to the GPU on the destination's rail,
    so ``A`` and ``B`` talk on the slots both have: ``min(|A|, |B|) x nics`` connections of
    ``max(|A|, |B|) S / (n nics)`` each. With one partial last domain ``P`` of ``p`` GPUs
    (``D`` per full domain) every pair has a full end, so every connection carries
    ``D S / (n nics)`` and ``P`` exchanges with a full domain on its ``p x nics`` slots only:
    each of ``P``'s NICs (and the NICs of the same slots in full domains) carries
    ``(n - p) S / (n nics)``, the most any NIC carries (expert review 2, defect N1: weight
    each domain pair by ``|A| x |B|``). The former pattern used ``p`` for every pair,
    ``|A| / |B|`` times too little data per pair (9x at 72 + 8 GPUs).
    """
    m = ctx.n_domains
    src_dom, dst_off = np.divmod(np.arange(m * (m - 1), dtype=np.int64), m - 1)
    dst_dom = (src_dom + 1 + dst_off) % m
    sizes = ctx.domain_sizes * ctx.nics
    both = np.minimum(sizes[src_dom], sizes[dst_dom])  # slots the pair shares
    keep = slots[None, :] < both[:, None]
    sd = np.repeat(src_dom, slots.size)[keep.ravel()]
    dd = np.repeat(dst_dom, slots.size)[keep.ravel()]
    s = np.tile(slots, m * (m - 1))[keep.ravel()]
    return sd, dd, s


def alltoall_model(ctx: FabricContext, op: str, rail_aligned: bool) -> AlgoModel:
    """Uniform all-to-all: direct NIC-to-NIC, or rail-aligned through NVLink first (PXN)."""
    name = "hierarchical" if rail_aligned else "direct"
    if op != "alltoall":
        raise AlgorithmUnavailableError(f"{name} runs alltoall only here, not {op}")
    n, d, m = ctx.n_ranks, ctx.domain, ctx.n_domains
    c = ctx.constants
    topo = ctx.topology
    parts = (topo.params.get("a_family"), topo.params.get("b_family"))  # a hybrid's partitions
    if not rail_aligned and "rail-only" in (topo.family, *parts) and m > 1:
        raise AlgorithmUnavailableError(
            "rail-only has no path between rails: all-to-all must move data onto the "
            "destination's rail over NVLink first (algo hierarchical)"
        )
    # NVLink: each GPU sends (D-1)/n x S to its domain peers; with PXN it also forwards the
    # data of its D-1 peers for its rail: about (D-1)/D x S in all; a full domain's GPUs
    # carry the most (a partial last domain has fewer peers), so D is the full size
    d = int(ctx.domain_sizes.max())
    nvl_fraction = (d - 1) / d if rail_aligned else (d - 1) / n
    mdl = ctx.scenario.model
    gpu_w = receive_weights(n, mdl.routing_skew, mdl.hot_fraction)
    skewed = bool(gpu_w.max() > 1.0)
    intra = (
        (bus_factor(op, n) / nvl_fraction * nvlink_ring_Bps(ctx) / gpu_w.max())
        if d > 1
        else math.inf
    )
    if m == 1:
        lat = {
            "Simple": c["base_latency_us"]["ring"]["Simple"]
            + c["hw_latency_us"]["nvlink"]["ring"]["Simple"]
            + (n - 1) * c["alltoall_per_peer_us"]
        }
        return assemble(ctx, op, name, intra, None, 0, lat)
    if rail_aligned:
        # every slot of a full domain; a partial last domain has only its own GPUs' slots,
        # so it exchanges with each full domain on those alone (_rail_pairs)
        full = d
        slots = np.arange(full * ctx.nics, dtype=np.int64)
        sizes = ctx.domain_sizes * ctx.nics
        # connections: every ordered domain pair on the slots both have (not listed here:
        # a large job is solved by flow classes without them)
        # sum over ordered pairs of min(|A|, |B|) nics: ascending sizes, the k-th is the
        # smaller end of its pairs with the m - 1 - k larger ones
        asc = np.sort(sizes)
        n_conn = int(2 * (asc * (m - 1 - np.arange(m))).sum())
        # of S: a connection carries the data of all the GPUs behind its source slot's
        # rail for the GPU behind its destination slot: max(|A|, |B|) = the full domain's
        # size whenever one end is full (a job has at most one partial domain)
        conn_bytes_fraction = full / n / ctx.nics
    else:
        n_conn = n * (n - d) * ctx.nics
        conn_bytes_fraction = 1 / n / ctx.nics
    # ECMP hashes every queue pair as its own flow: the per-connection solve routes that many
    qps = ctx.scenario.fabric.qps_per_connection if ctx.policy == "ecmp" else 1
    if n_conn * qps > ALLTOALL_MAX_CONNECTIONS:  # uniform: solve by flow classes
        if rail_aligned:
            sizes = ctx.domain_sizes * ctx.nics  # the slots each domain has
            components = [
                ctx.endpoint(np.flatnonzero(sizes > k), np.full(int((sizes > k).sum()), k))
                for k in slots
            ]
        else:
            gpu = np.arange(n, dtype=np.int64)
            components = [ctx.rank_endpoint(gpu, k) for k in range(ctx.nics)]
        ep_w = None
        if skewed:  # weight of each NIC endpoint = its GPU's received share
            ep_w = np.zeros(ctx.topology.n_endpoints)
            all_gpu = np.arange(n, dtype=np.int64)
            for k in range(ctx.nics):
                ep_w[ctx.rank_endpoint(all_gpu, k)] = gpu_w
        # a uniform all-to-all has no incast (every sender's NIC spreads its rate over its
        # destinations); with hot receivers, their senders have only them left at the end:
        # each hot port then receives n / n_hot times its rate from its fan-in
        n_hot = int((gpu_w >= gpu_w.max() * (1 - 1e-9)).sum())
        fan = (int(m - 1 if rail_aligned else n - d), n / n_hot if skewed else 1.0)
        try:
            res, _ = ctx.solve_all_to_all(components, ep_w)
        except ValueError as exc:
            # a limit of the model, not of the design: say so and give the closed-form bounds
            # (half of a uniform all-to-all crosses the bisection: busbw <= 4 B_bis / N)
            bis_GBps = 4.0 * ctx.topology.bisection_GBps / n
            nic_GBps = ctx.nics * ctx.nic_Bps / 1e9
            raise ModelLimitError(
                f"{name} all-to-all on {n:,} GPUs: {exc} is more flow classes than this model "
                f"version solves (a limit of the model, not of the design: an all-to-all always "
                f"runs). Closed-form bounds per GPU: bisection 4 B_bis / N = {bis_GBps:,.2f} "
                f"GB/s, NIC line rate {nic_GBps:,.1f} GB/s"
                + ("" if rail_aligned else "; or use the hierarchical (rail-aligned) variant")
            ) from None
    else:
        if rail_aligned:
            sd, dd, s = _rail_pairs(ctx, slots)
            src, dst = ctx.endpoint(sd, s), ctx.endpoint(dd, s)
        else:
            gpu = np.arange(n, dtype=np.int64)
            i = np.repeat(gpu, n)
            j = np.tile(gpu, n)
            keep = ctx.rank_domain(i) != ctx.rank_domain(j)
            i, j = i[keep], j[keep]
            nic = np.tile(np.arange(ctx.nics), i.size)
            i, j = np.repeat(i, ctx.nics), np.repeat(j, ctx.nics)
            src = ctx.rank_endpoint(i, nic)
            dst = ctx.rank_endpoint(j, nic)
        demand = None
        if skewed:
            gpu_of_dst_ep = np.zeros(ctx.topology.n_endpoints, dtype=np.int64)
            all_gpu = np.arange(n, dtype=np.int64)
            for k in range(ctx.nics):
                gpu_of_dst_ep[ctx.rank_endpoint(all_gpu, k)] = all_gpu
            demand = gpu_w[gpu_of_dst_ep[dst]]
        fan = overload(src, dst, demand) if ctx.models_incast and skewed else (1, 1.0)
        res = ctx.solve(src, dst, demand)
    scale = bus_factor(op, n) / conn_bytes_fraction
    lat = {
        "Simple": c["base_latency_us"]["ring"]["Simple"]
        + c["hw_latency_us"]["net"]["ring"]["Simple"]
        + ctx.path_latency_us(res.mean_switch_hops)
        + (n - 1) * c["alltoall_per_peer_us"]
    }
    return assemble(ctx, op, name, intra, res, scale, lat, fan=fan, port_weight=float(gpu_w.max()))


def hierarchical_or_pxn_model(ctx: FabricContext, op: str) -> AlgoModel:
    """Hierarchical all-reduce, or the rail-aligned (PXN) all-to-all."""
    if op == "alltoall":
        return alltoall_model(ctx, op, True)
    return hierarchical_model(ctx, op)


def direct_model(ctx: FabricContext, op: str) -> AlgoModel:
    """Direct NIC-to-NIC all-to-all."""
    return alltoall_model(ctx, op, False)


# The registry of algorithms (which operations each runs, its label, where it is valid):
# fabric_model.collectives.registry; MODELS there is the view of these functions.
