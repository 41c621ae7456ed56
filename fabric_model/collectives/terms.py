"""The NCCL-like terms every collective algorithm's model is assembled from.

:func:`assemble` turns an algorithm's NVLink side and solved network pattern into an
:class:`~fabric_model.collectives.model.AlgoModel` with NCCL's per-protocol factors and
caps (:func:`protocol_terms`); :func:`latencies` is NCCL's latency (base + NVLink steps +
network steps with the path's extra hops and fiber); :func:`ring_channels` the channels a
ring runs with. The NCCL-topology algorithms (:mod:`.algorithms`) and the switchless ones
(:mod:`.switchless`) both build on them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from fabric_model.collectives.context import FabricContext
from fabric_model.collectives.model import AlgoModel, PatternResult, bus_factor

__all__ = [
    "assemble",
    "latencies",
    "nvlink_ring_Bps",
    "protocol_terms",
    "ring_channel_count",
    "ring_channels",
]


def latencies(
    ctx: FabricContext,
    algo_key: str,
    protocols: tuple[str, ...],
    steps_intra: float,
    steps_inter: float,
    hops: float,
    *,
    base: bool = True,
    per_step_floor: bool = True,
) -> dict[str, float]:
    """NCCL latency: base + intra steps x NVLink hwLat + inter steps x (NET hwLat + path)."""
    c = ctx.constants
    out = {}
    path = ctx.path_latency_us(hops)
    for p in protocols:
        intra = c["hw_latency_us"]["nvlink"][algo_key][p]
        if per_step_floor and steps_inter > 0:  # multi-node: per-step network overhead floor
            intra = max(intra, 3.0 if p == "Simple" else 1.0)
        inter = c["hw_latency_us"]["net"][algo_key][p] + path
        b = c["base_latency_us"][algo_key][p] if base else 0.0
        out[p] = b + steps_intra * intra + steps_inter * inter
    return out


def assemble(
    ctx: FabricContext,
    op: str,
    algo: str,
    intra: float,
    inter: PatternResult | None,
    inter_scale: float,
    latency: dict[str, float],
    cap_Bps: float = math.inf,
    fan: tuple[int, float] = (1, 1.0),
    port_weight: float = 1.0,
    **kw: object,
) -> AlgoModel:
    """Assemble the model: busbw = min(NVLink side, network side x scale, protocol cap).

    ``fan`` is the pattern's incast (:func:`fabric_model.collectives.transport.overload`:
    connections into its worst port and their start rates over the port's rate); where the
    NIC link binds the network side and the transport models that incast, the model carries
    it (:attr:`AlgoModel.incast`), the port receiving ``fan_in x port_weight`` of a
    connection's bytes per phase. A pattern over the network carries the flapping link's
    stall (:attr:`FabricContext.stall_fraction`).
    """
    c = ctx.constants
    if inter is None:
        inter_bw = math.inf
        seeds = np.array([math.inf])
        bottleneck = "nvlink"
    else:
        eff = c["net_efficiency"]
        seeds = inter.min_rate_Bps * inter_scale * eff
        inter_bw = float(seeds.mean())
        bottleneck = "nvlink" if intra <= inter_bw else inter.bottleneck
    nic_bound = inter is not None and inter.bottleneck in ("nic-leaf", "nic")
    if (
        inter is not None
        and bottleneck in ("nic-leaf", "nic")
        and ctx.host_limited
        and ctx.scenario.what_if.degraded_link_factor >= 1.0
    ):  # else the degraded NIC binds
        bottleneck = ctx.host_label
    extra: dict[str, object] = {}
    if inter is not None:
        extra["stall_fraction"] = ctx.stall_fraction
        model = ctx.incast_model(fan[0], fan[1], inter.mean_switch_hops) if nic_bound else None
        if model is not None:
            extra["incast"] = model
            extra["incast_port_bytes"] = (
                fan[0] * port_weight * bus_factor(op, ctx.n_ranks) / (inter_scale)
            )
    if cap_Bps < min(intra, inter_bw):
        bottleneck = "tree channels (NCCL per-channel cap)"
    intra = min(intra, cap_Bps)
    busbw = min(intra, inter_bw)
    lo, hi = float(min(intra, seeds.min())), float(min(intra, seeds.max()))
    family = "tree" if algo == "tree" else "ring"
    factors, caps = protocol_terms(ctx, family)
    return AlgoModel(
        op=op,
        algo=algo,
        n_ranks=ctx.n_ranks,
        busbw_Bps=busbw,
        busbw_range_Bps=(lo, hi),
        busbw_seeds_Bps=tuple(float(min(intra, b)) for b in seeds) if inter is not None else (),
        intra_Bps=intra,
        inter_Bps=inter_bw,
        bottleneck=bottleneck,
        latency_us=latency,
        protocol_bw_factor=factors,
        protocol_cap_Bps=caps,
        mean_switch_hops=inter.mean_switch_hops if inter else 0.0,
        **extra,  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


def ring_channels(ctx: FabricContext) -> int:
    """Channels a ring runs with: two per NIC that leaves the domain, or all on one node."""
    return ring_channel_count(ctx.constants, ctx.n_domains, ctx.nics_used_per_domain)


def ring_channel_count(
    constants: Mapping[str, Any], n_domains: int, nics: int, max_channels: int | None = None
) -> int:
    """Channels a ring of ``n_domains`` NVLink domains runs with, ``nics`` NICs per domain.

    Two per NIC that leaves the domain (at most ``max_channels``, NCCL_MAX_NCHANNELS), or
    ``max_channels / channels_per_nic`` inside one domain; ``max_channels`` defaults to
    NCCL's cap (``nccl.max_channels`` lowers it).

    >>> from fabric_model.collectives.context import nccl_constants
    >>> c = nccl_constants()
    >>> ring_channel_count(c, 1, 8), ring_channel_count(c, 2, 4), ring_channel_count(c, 2, 1, 8)
    (16, 8, 2)
    """
    cap = int(constants["max_channels"])
    if max_channels is not None:
        cap = min(cap, int(max_channels))
    per_nic = int(constants["channels_per_nic"])
    if n_domains > 1:  # NCCL_MAX_NCHANNELS below two per NIC: fewer channels on one NIC
        return int(min(cap, min(nics, max(1, cap // per_nic)) * per_nic))
    return int(max(1, cap // per_nic))


def protocol_terms(ctx: FabricContext, family: str) -> tuple[dict[str, float], dict[str, float]]:
    """NCCL's per-protocol bus-bandwidth factors and caps for a ring- or tree-family algorithm.

    Notes
    -----
    ``tuning.cc`` (NCCL 2.30, ``ncclTopoTuneModel``): ring LL ``min(llMaxBw, 0.5 busBw)``,
    ring LL128 ``min(0.92 busBw, nCh x perChMaxRingLL128Bw)``, tree LL
    ``min(busBw / 3.8, llMaxBw)``, tree LL128 ``min(busBw x 120/128 (7/9 on one node),
    nCh x perChMaxTreeLL128Bw)``. ``llMaxBw`` is compared with the collective's bus
    bandwidth itself: 141 GB/s on one Hopper node, 39 GB/s on 2 nodes and 20.4 GB/s on more
    (Intel hosts), whatever the GPUs per node. Algorithms outside the ring and tree families
    (NVLS, SHARP, all-to-all) run Simple only, where no factor or cap applies.
    """
    c = ctx.constants
    m = ctx.n_domains
    factors = dict(c["protocol_bw_factor"][family])
    if family == "tree" and m == 1:
        factors["LL128"] = float(c["tree_ll128_one_node_factor"])
    ll = c["ll_max_busbw_GBps"]
    ll_cap = (
        ll["one_node"].get(ctx.arch, math.inf)
        if m == 1
        else ll["multinode_intel"][0 if m == 2 else 1]
    )
    idx = 0 if m == 1 else 1 if m == 2 else 2
    per_ch = c[f"{family}_ll128_per_channel_GBps"].get(ctx.arch)
    channels = ring_channels(ctx) * (c["tree_channels_fraction"] if family == "tree" else 1.0)
    ll128_cap = math.inf if per_ch is None else channels * float(per_ch[idx])
    return factors, {"LL": ll_cap * 1e9, "LL128": ll128_cap * 1e9}


def nvlink_ring_Bps(ctx: FabricContext) -> float:
    """Return an SM-driven ring's NVLink side, bytes/s.

    The NVLink rate x NCCL's per-link efficiency, at most channels x NCCL's fastest
    intra-node channel (``intra_per_channel_max_GBps``; binds with few channels,
    ``nccl.max_channels``).
    """
    c = ctx.constants
    per_ch = c.get("intra_per_channel_max_GBps", {}).get(ctx.arch)
    cap = math.inf if per_ch is None else ring_channels(ctx) * float(per_ch) * 1e9
    return min(ctx.nvlink_Bps * ctx.nvlink_efficiency, cap)
