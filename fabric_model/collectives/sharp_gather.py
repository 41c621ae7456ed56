"""NVLS + IB SHARP all-gather and reduce-scatter across NVLink domains (NCCL 2.27+).

NCCL 2.27.3 (NVIDIA/nccl commit 72d24320) runs all-gather and reduce-scatter across nodes
as NVLS + CollNet: "Implement NVLS+IB SHARP support for AllGather and ReduceScatter with user
buffer registration". In ``src/device/all_gather.h`` ("NVLS + IB SHARP") every GPU of a node
is an NVLS head with its own NIC (rail); head ``r`` of each node sends its node's shard into
the SHARP tree of rail ``r`` (the SHARP plugin's ``ncclSharpIallgather``,
Mellanox/nccl-rdma-sharp-plugins ``sharp_plugin.c``), receives the rail's shards of every
node, and multicasts them to its node's GPUs over NVLS. Reduce-scatter runs the same way
backwards (NVLS reduction to the heads, ``ncclSharpIreducescatter`` across nodes).

``tuning.cc`` (NCCL 2.30.7) enables it only with CollNet (``NCCL_COLLNET_ENABLE=1`` and a
plugin with ``iallgather`` / ``ireducescatter``; ``auto`` considers it with ``fabric.sharp``
on, and asked for by name it runs as ``NCCL_ALGO=NVLS`` with CollNet enabled, as SHARP
all-reduce does) and when no node has more local ranks than NVLS heads (``localRanks <=
collNetHeadsNum``): an NVL72 rack (72 GPUs, at most 32 heads, 16 NICs between MNNVL
domains) never runs it.

Bandwidth (delivered): the smaller of the NVLink side, every GPU receiving (sending) the
whole ``S`` once through the NVSwitch at NCCL's ``nvlsEff`` (the NCCL maintainer, NVIDIA/nccl
issue 1506: NVLS all-gather transmits "size in one direction and 1/N x size in the other"),
and the network side, each NIC carrying its rail's ``S / (D x nics)`` through the SHARP tree
(the flow solve of each NIC's stream up to its leaf and back, as SHARP all-reduce). The
SHARP plugin reports the NIC's own rate (it adds no rate of its own). Latency: NCCL's NVLS
terms, ``intraLat + interLat`` = 25 + 18 us, plus the path up the aggregation tree and down.

NCCL's tuner (``ncclTopoTuneModel``) prices it as ``nCh x min(bwIntra x nvlsEff x (nCh -
1) / nCh x (ppn - 1) / ppn, bwInter)`` with ``nCh`` the NVLS heads; the model takes the
heads' total ``bwIntra`` as NCCL's NVLink figure and ``bwInter`` as each head's NIC rate.
"""

from __future__ import annotations

from fabric_model.collectives.algorithms import nvls_heads, sharp_model
from fabric_model.collectives.context import FabricContext
from fabric_model.collectives.model import AlgoModel, AlgorithmUnavailableError, bus_factor
from fabric_model.collectives.terms import assemble
from fabric_model.collectives.versions import FEATURES, has

__all__ = ["NCCL_MAX_NVLS_ARITY", "nvls_sharp_model", "sharp_any_model"]

#: ``src/include/device.h``: NVLS runs all-gather / reduce-scatter with at most this many
#: local ranks (``updateCollCostTable`` skips NVLS beyond it).
NCCL_MAX_NVLS_ARITY = 32


def sharp_any_model(ctx: FabricContext, op: str) -> AlgoModel:
    """SHARP as NCCL runs it: CollNet all-reduce, NVLS + IB SHARP all-gather / reduce-scatter."""
    if op in ("allgather", "reducescatter"):
        return nvls_sharp_model(ctx, op)
    return sharp_model(ctx, op)


def _refuse_where_nccl_does_not_run_it(ctx: FabricContext, op: str) -> int:
    """Raise naming the first missing condition; return the NVLS heads per domain."""
    s = ctx.scenario
    m, d = ctx.n_domains, ctx.domain
    if m == 1:
        raise AlgorithmUnavailableError(
            f"sharp {op} runs across NVLink domains (NVLS + IB SHARP); this job fits in one "
            f"domain, where NCCL runs NVLS alone (use nvls or ring)"
        )
    feature = "nvls_sharp_allgather_reducescatter"
    if not has(s.nccl.version, feature):
        raise AlgorithmUnavailableError(
            f"sharp {op} (NVLS + IB SHARP) needs NCCL {FEATURES[feature]} or later "
            f"(nccl.version = {s.nccl.version}; assets/nccl_versions.yaml, feature {feature})"
        )
    sw = ctx.hardware.switch
    if ctx.topology.family == "ocs":
        raise AlgorithmUnavailableError(
            f"sharp {op} reduces in electrical switches; an optical circuit switch passes light "
            "without reducing it. Use ring"
        )
    if not getattr(sw, "sharp", False) or ctx.topology.tiers == 0:
        raise AlgorithmUnavailableError(
            f"sharp needs InfiniBand switches with SHARP; {sw.name} "
            f"(fabric.vendor = {s.fabric.vendor}) has no switch-resident reduction. Use ring"
        )
    if ctx.arch not in ctx.constants["nvls_efficiency"] or d < 2 or not s.fabric.nvls:
        raise AlgorithmUnavailableError(
            f"sharp {op} runs NVLS inside each domain: it needs NVSwitch domains of 2+ Hopper "
            f"or newer GPUs with fabric.nvls = true (cluster.gpu = {s.cluster.gpu}, "
            f"{d} per domain, fabric.nvls = {str(s.fabric.nvls).lower()})"
        )
    if not s.nccl.registered_buffers:
        raise AlgorithmUnavailableError(
            f"sharp {op} (NVLS + IB SHARP) runs on user-registered buffers: set "
            f"nccl.registered_buffers = true (NCCL 2.27.3 release note)"
        )
    heads = nvls_heads(ctx)
    if d > min(heads, NCCL_MAX_NVLS_ARITY):
        raise AlgorithmUnavailableError(
            f"NCCL runs NVLS + IB SHARP {op} only when every GPU of a domain is an NVLS head "
            f"with its own NIC (tuning.cc: localRanks <= nHeads): these domains have {d} "
            f"GPUs and {heads} heads (use ring or pat)"
        )
    return heads


def nvls_sharp_model(ctx: FabricContext, op: str) -> AlgoModel:
    """NVLS + IB SHARP all-gather or reduce-scatter across NVLink domains.

    Raises
    ------
    AlgorithmUnavailableError
        Where NCCL does not run it; the message names the missing condition (``nccl.version``,
        the switches, NVLS, ``nccl.registered_buffers``, heads).
    """
    if op not in ("allgather", "reducescatter"):
        raise AlgorithmUnavailableError(f"NVLS + IB SHARP runs allgather, reducescatter; not {op}")
    heads = _refuse_where_nccl_does_not_run_it(ctx, op)
    n, d = ctx.n_ranks, ctx.domain
    c = ctx.constants
    nvls_eff = float(c["nvls_efficiency"][ctx.arch])
    factor = bus_factor(op, n)
    intra = factor * ctx.nvlink_Bps * nvls_eff  # every GPU receives (sends) S once
    ep = ctx.endpoints()
    res = ctx.solve(ep, ep)  # each NIC: its rail's stream up the SHARP tree and back
    scale = factor * d * ctx.nics  # a NIC carries S / (D x nics)
    hops = float(ctx.topology.max_switch_hops) if ctx.topology.max_switch_hops else 1.0
    sw = ctx.hardware.switch
    lat = {
        "Simple": c["hw_latency_us"]["nvlink"]["nvls"]["Simple"]
        + c["hw_latency_us"]["net"]["nvls"]["Simple"]
        + ctx.path_latency_us(hops)
        + 2 * (hops - 1) * sw.hop_latency_ns / 1000.0
    }
    # NCCL's tuner: nCh (heads, one per GPU here) x min(bwIntra x nvlsEff x (nCh-1)/nCh x
    # (ppn-1)/ppn, bwInter), used as the algorithm bandwidth
    tuner_algbw = min(
        ctx.nvlink_Bps * ctx.nvlink_efficiency * nvls_eff * (heads - 1) / heads * (d - 1) / d,
        d * ctx.nics * min(ctx.nic_Bps, ctx.nic_feed_Bps),
    )
    return assemble(
        ctx, op, "nvls-sharp", intra, res, scale, lat, tuner_busbw_Bps=factor * tuner_algbw
    )
