"""Copy-engine (CE) collectives inside one NVLink domain: NCCL 2.28+, zero SMs.

From 2.28 (NVIDIA/nccl commit f1308997) NCCL runs all-gather and all-to-all inside one
(MN)NVL domain on the GPU's copy engines instead of its SMs when the buffers are registered
into symmetric windows and the communicator's CTA policy is ``NCCL_CTA_POLICY_ZERO``
(``nccl.cta_policy = zero``); from 2.29 (commit ebd1e929) it also switches large
all-gathers on Blackwell to the copy engines by itself (``src/enqueue.cc``: per-rank count
above ``NCCL_SYM_CE_THRESHOLD``, 8 Mi elements). The copies go out as one
``cuMemcpyBatchAsync`` per call, fenced by two synchronisations over the NVLS multicast
object (``src/ce_coll.cc``).

Bandwidth: every GPU sends ``(n - 1) / n`` of the all-gather's (all-to-all's) bytes over its
NVLink and receives as much, so the nccl-tests bus bandwidth is the rate a copy engine moves
over NVLink: the NVLink rate x :func:`~fabric_model.collectives.context.ce_efficiency` (256 B
payloads per NVLink packet where SMs send 128 B, the NCCL maintainer in nccl-tests issue
149). Latency: ``copy_engine.latency_us`` (``assets/nccl_versions.yaml``, an estimate). SM
cost: none, so a CE collective takes no SMs from the compute it overlaps (the training step
does not model NCCL's SM share, so the step's time is unchanged by it).
"""

from __future__ import annotations

from fabric_model.collectives.context import FabricContext, ce_efficiency
from fabric_model.collectives.model import AlgoModel, AlgorithmUnavailableError, bus_factor
from fabric_model.collectives.versions import FEATURES, has, version_data

__all__ = ["CE_PRIORITY", "ce_auto_from_bytes", "ce_model"]

#: NCCL's ``taskAppend`` tries the copy engines before the symmetric kernels (priority 0).
CE_PRIORITY = 1


def ce_auto_from_bytes(ctx: FabricContext, op: str) -> float:
    """Return the smallest call (nccl-tests bytes) NCCL runs on the copy engines unasked.

    ``0`` under ``nccl.cta_policy = zero`` (NCCL uses zero CTAs "whenever it can"); from
    2.29 on Blackwell an all-gather whose per-rank count passes ``NCCL_SYM_CE_THRESHOLD``
    (counted in nccl-tests' float elements); ``inf`` otherwise (NCCL never picks it).
    """
    s = ctx.scenario
    if s.nccl.cta_policy == "zero":
        return 0.0
    auto_switch = has(s.nccl.version, "ce_large_allgather_blackwell")
    if op == "allgather" and ctx.arch == "blackwell" and auto_switch:
        ce = version_data()["copy_engine"]
        per_rank = float(ce["auto_threshold_elements"]) * float(ce["element_bytes"])
        return (per_rank + 1.0) * ctx.n_ranks  # count > threshold; S = count x n x element
    return float("inf")


def ce_model(ctx: FabricContext, op: str) -> AlgoModel:
    """Copy-engine all-gather or all-to-all inside one NVLink domain (``algo ce``).

    Asked for by name the buffers are taken as registered and the CTA policy as zero (what
    makes NCCL run it); ``auto`` considers it only with ``nccl.registered_buffers`` on and
    runs it from :func:`ce_auto_from_bytes` on.

    Raises
    ------
    AlgorithmUnavailableError
        The operation, the release, the job or the GPU cannot run it (the message names the
        key).
    """
    s = ctx.scenario
    if op not in ("allgather", "alltoall"):
        raise AlgorithmUnavailableError(
            f"ce (copy-engine collectives) runs allgather, alltoall only, not {op}"
        )
    if not has(s.nccl.version, "ce_collectives"):
        raise AlgorithmUnavailableError(
            f"ce needs NCCL {FEATURES['ce_collectives']} or later (nccl.version = "
            f"{s.nccl.version}; assets/nccl_versions.yaml, feature ce_collectives)"
        )
    if ctx.n_domains > 1:
        raise AlgorithmUnavailableError(
            f"ce runs inside one NVLink domain, (MN)NVL (ncclCeAvailable: every rank on "
            f"NVLink); this job spans {ctx.n_domains:,} domains (2.32's hierarchical CE "
            f"all-gather across domains is not modelled)"
        )
    c = ctx.constants
    if ctx.arch not in c["nvls_efficiency"] or ctx.n_ranks < 2 or not s.fabric.nvls:
        raise AlgorithmUnavailableError(
            f"ce synchronises over the NVLS multicast object: it needs an NVSwitch domain of "
            f"2+ Hopper or newer GPUs with fabric.nvls = true (cluster.gpu = {s.cluster.gpu}, "
            f"fabric.nvls = {str(s.fabric.nvls).lower()})"
        )
    bw = ctx.nvlink_Bps * ce_efficiency(c, ctx.arch)
    lat = float(version_data()["copy_engine"]["latency_us"])
    n = ctx.n_ranks
    return AlgoModel(
        op=op,
        algo="ce",
        n_ranks=n,
        busbw_Bps=bw,
        busbw_range_Bps=(bw, bw),
        intra_Bps=bw,
        inter_Bps=float("inf"),
        bottleneck="nvlink",
        latency_us={"Simple": lat},
        protocol_bw_factor={"Simple": 1.0},
        notes=(
            f"copy engines: 0 SMs; {bus_factor(op, n) * 100:.0f} % of the bytes cross each "
            f"GPU's NVLink at 256 B payloads",
        ),
        bypasses_tuner=True,
        bypass_from_bytes=ce_auto_from_bytes(ctx, op),
        bypass_priority=CE_PRIORITY,
    )
