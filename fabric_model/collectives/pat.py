"""PAT (Parallel Aggregated Trees) all-gather and reduce-scatter, as NCCL 2.23+ runs them.

NCCL added PAT in 2.23 ("a variation of Bruck algorithm ... Logarithmic number of network
steps for small sizes at scale. Only supports one rank per node", NVIDIA/nccl commit
68b54236); ``tuning.cc`` enables it only when ``nNodes == nRanks``. From 2.31 PAT runs across
nodes while NVLS runs inside the node (the 2.31.2 release note). NCCL's tuner prices PAT on
the ring graph's bandwidth times 0.75 with latency ``base + log2(nNodes) x interLat / 3.5 +
2.8 us x nRanks``; the model takes the ring's network side from the flow solve (the same
bytes leave every domain) with that factor, and, with NVLS inside, the NVLS multicast
bandwidth and one NVLS step of latency inside the domain.

Assumption (2.31's tuning code is after the NVIDIA/nccl snapshot read here): with NVLS
inside, PAT's ranks are the domains, one per domain as in 2.23's one-rank-per-node PAT, so
the linear latency term is ``2.8 us x domains``, not ``x GPUs``.
"""

from __future__ import annotations

import math
from dataclasses import replace

from fabric_model.collectives.algorithms import ring_model
from fabric_model.collectives.context import FabricContext
from fabric_model.collectives.model import AlgoModel, AlgorithmUnavailableError
from fabric_model.collectives.versions import has, version_data

__all__ = ["pat_model"]


def pat_model(ctx: FabricContext, op: str) -> AlgoModel:
    """PAT all-gather or reduce-scatter across NVLink domains (``NCCL_ALGO=PAT``).

    Raises
    ------
    AlgorithmUnavailableError
        Not all-gather / reduce-scatter, one domain, or several ranks per domain without
        NCCL 2.31's NVLS inside (the message names ``nccl.version`` or ``fabric.nvls``).
    """
    if op not in ("allgather", "reducescatter"):
        raise AlgorithmUnavailableError(f"pat runs allgather, reducescatter only, not {op}")
    version = ctx.scenario.nccl.version
    m, d = ctx.n_domains, ctx.domain
    if m == 1:
        raise AlgorithmUnavailableError(
            "pat runs across nodes (NVLink domains); this job fits in one domain (use ring or nvls)"
        )
    c = ctx.constants
    nvls_eff = c["nvls_efficiency"].get(ctx.arch)
    if d > 1:
        if not has(version, "pat_with_nvls"):
            raise AlgorithmUnavailableError(
                f"pat runs with one rank per node (NVLink domain) in NCCL before 2.31 "
                f"(nccl.version = {version}); this job has {d} per domain (2.31 runs PAT "
                f"across domains with NVLS inside)"
            )
        if nvls_eff is None or not ctx.scenario.fabric.nvls:
            raise AlgorithmUnavailableError(
                f"pat with {d} ranks per NVLink domain needs NVLS inside the domain "
                f"(fabric.nvls = true and an NVSwitch domain of Hopper or newer; "
                f"cluster.gpu = {ctx.scenario.cluster.gpu})"
            )
    ring = ring_model(ctx, op)
    p = version_data()["pat"]
    factor = float(p["busbw_factor"])
    intra = ctx.nvlink_Bps * nvls_eff if d > 1 and nvls_eff is not None else math.inf
    busbw = factor * min(intra, ring.inter_Bps)
    lo, hi = (factor * min(intra, b) for b in ring.busbw_range_Bps)
    tuner_ring = ring.tuner_busbw_Bps if ring.tuner_busbw_Bps is not None else ring.busbw_Bps
    inter_lat = float(p["hw_latency_net_us"]) + ctx.path_latency_us(ring.mean_switch_hops)
    lat = (
        float(p["base_latency_us"])
        + math.log2(m) * inter_lat / float(p["log_step_divisor"])
        + float(p["per_rank_us"]) * m
    )
    if d > 1:  # one NVLS step inside the domain (NCCL's NVLS intraLat)
        lat += c["hw_latency_us"]["nvlink"]["nvls"]["Simple"]
    return replace(
        ring,
        algo="pat",
        busbw_Bps=busbw,
        busbw_range_Bps=(min(lo, busbw), max(hi, busbw)),
        intra_Bps=intra,
        bottleneck="nvlink" if intra < ring.inter_Bps else ring.bottleneck,
        latency_us={"Simple": lat},
        protocol_bw_factor={"Simple": 1.0},
        protocol_cap_Bps={},
        tree_correction=None,
        tree_correction_protocols=(),
        plateau_factor=1.0,
        plateau_min_bytes=math.inf,
        tuner_busbw_Bps=factor * min(intra, tuner_ring),
    )
