"""NCCL's symmetric-memory kernels inside one NVLink domain (NCCL 2.27+, registered buffers).

From 2.27 (NVIDIA/nccl commit 72d24320) buffers registered with ``ncclCommWindowRegister``
and ``NCCL_WIN_COLL_SYMMETRIC`` run all-reduce, all-gather and reduce-scatter on
specialised kernels over the P2P and NVLS transports ("performance gains expected
particularly for small to medium message sizes"). NCCL prices each kernel with its own model
(``src/sym_kernels.cc``, ``queryModel_lsa`` and ``model``, NCCL 2.30.7)::

    time_us = baseLat + busBytes / min(nBlocks x smBw x busMultiplier, peakBw)

and, with both buffers registered, runs the best one without falling back to the tuner's
table (``src/scheduler/symmetric_sched.cc``). The model evaluates that same formula (its
softmin / softplus smoothing left out, under one microsecond) for the LL kernels (protocol
``LL``) and the load/store and multimem kernels (protocol ``Simple``), bounded by the GPU's
NVLink line rate. These are NCCL's predictions of its kernels, not measurements: the golden
set has no public nccl-tests run of them yet.
"""

from __future__ import annotations

import math

from fabric_model.collectives.context import FabricContext
from fabric_model.collectives.model import AlgoModel, AlgorithmUnavailableError, bus_factor
from fabric_model.collectives.versions import has, max_ctas, version_data

__all__ = ["MAX_BLOCKS", "kernel_times", "symmetric_model"]

#: ``ncclSymkMaxBlocks`` (``src/include/sym_kernels.h``).
MAX_BLOCKS = 64
_GIB = float(1 << 30)  # sym_kernels.cc: ``GBps = (1 << 30) / 1.e6`` bytes per microsecond


def kernel_times(ctx: FabricContext, op: str) -> dict[str, tuple[float, float, int, str]]:
    """Return, per protocol, ``(latency_us, busbw_Bps, blocks, kernel)`` of its fastest kernel.

    NCCL's ``queryModel_lsa``: bus bytes per kernel, its bandwidth ``min(blocks x smBw x
    busMultiplier, peakBw)``, turned into the nccl-tests bus bandwidth it delivers.

    ``S`` is the nccl-tests size (all-gather and reduce-scatter: the whole array, so NCCL's
    per-rank ``nBytes`` is ``S / n``).
    """
    n = ctx.n_ranks
    arch = ctx.arch
    k = version_data()["symmetric_kernels"]
    c = k[arch]
    cap = min(MAX_BLOCKS, max_ctas(ctx.scenario.nccl.version, arch))
    nvls_blocks = min(math.ceil(int(c["nvls_blocks"]) / n), cap)
    multimem = ctx.scenario.fabric.nvls and n > 2  # hasLsaMultimem: nvlsSupport, > 2 ranks
    ll = float(k["ll_bus_factor"])
    mc = float(k["multicast_allgather_multiplier_per_rank"])
    is_ar = op == "allreduce"
    per_rank = 1.0 if is_ar else 1.0 / n  # NCCL's nBytes per byte of S
    if arch == "hopper":
        lat_ll, lat = float(c["base_lat_ll_us"]), float(c["base_lat_us"])
        sm = float(c["sm_bw_allreduce_GiBps"] if is_ar else c["sm_bw_GiBps"]) * _GIB
    else:
        lat_ll = float(c["base_lat_ll_allgather_us"] if op == "allgather" else c["base_lat_ll_us"])
        lat = float(c["base_lat_allreduce_us"] if is_ar else c["base_lat_us"])
        sm = float(c["sm_bw_GiBps"]) * _GIB
    peak = float(c["peak_GiBps"]) * _GIB
    peak_mc = float(c["peak_multicast_allreduce_GiBps"]) * _GIB if is_ar else peak
    # (name, protocol, bus bytes per byte of S, busMultiplier, blocks, peak)
    kernels = [("LL", "LL", n * per_rank * ll, 1.0, cap, peak)]
    if multimem:
        kernels.append(
            ("LLMC", "LL", n * per_rank * ll, float(k["ll_multicast_multiplier"]), cap, peak)
        )
    if is_ar:
        kernels.append(("RSxLD_AGxST", "Simple", 2.0 * (n - 1) / n, 1.0, cap, peak))
        if multimem:
            kernels.append(
                ("RSxLDMC_AGxSTMC", "Simple", 1.0 / n + 1.0, float(n), nvls_blocks, peak_mc)
            )
    else:
        name = "ST" if op == "allgather" else "LD"
        kernels.append((name, "Simple", (n - 1) * per_rank, 1.0, cap, peak))
        if multimem:
            kernels.append((name + "MC", "Simple", (n - 1) * per_rank, mc * n, nvls_blocks, peak))
    out: dict[str, tuple[float, float, int, str]] = {}
    for name, proto, bus_per_s, mult, blocks, pk in kernels:
        bw = min(blocks * sm * mult, pk)
        eff = bus_factor(op, n) * bw / bus_per_s  # nccl-tests busbw this kernel delivers
        # physics: no GPU moves its bytes faster than its NVLink line rate. An all-reduce
        # receives at least S with multicast (its reduced shard, then the others' stores),
        # 2 (n-1)/n S without; all-gather and reduce-scatter (n-1)/n S. NCCL's own peakBw
        # (480 GiB/s on Hopper's multimem all-reduce) sits above that bound.
        least = (1.0 if "MC" in name else 2.0 * (n - 1) / n) if is_ar else (n - 1) / n
        eff = min(eff, bus_factor(op, n) * ctx.nvlink_Bps / least)
        if proto not in out or eff > out[proto][1]:
            out[proto] = (lat_ll if proto == "LL" else lat, eff, blocks, name)
    return out


def symmetric_model(ctx: FabricContext, op: str) -> AlgoModel:
    """NCCL's symmetric-memory kernels: one NVLink domain, registered buffers, NCCL 2.27+.

    Asked for by name the buffers are taken as registered (the kernels need them); ``auto``
    considers them only with ``nccl.registered_buffers`` on (the registry's flag).

    Raises
    ------
    AlgorithmUnavailableError
        The release, the buffers, the job or the GPU cannot run them (the message names the
        key).
    """
    s = ctx.scenario
    if op not in ("allreduce", "allgather", "reducescatter"):
        raise AlgorithmUnavailableError(
            f"symmetric runs allreduce, allgather, reducescatter only, not {op}"
        )
    if not has(s.nccl.version, "symmetric_kernels"):
        raise AlgorithmUnavailableError(
            f"symmetric-memory kernels arrived in NCCL 2.27 (nccl.version = {s.nccl.version})"
        )
    if ctx.n_domains > 1:
        raise AlgorithmUnavailableError(
            f"symmetric-memory kernels run inside one NVLink domain (P2P and NVLS transports); "
            f"this job spans {ctx.n_domains:,} domains"
        )
    if ctx.arch not in version_data()["symmetric_kernels"] or ctx.n_ranks < 2:
        raise AlgorithmUnavailableError(
            f"symmetric-memory kernels are modelled for Hopper and Blackwell NVSwitch domains "
            f"of 2+ GPUs (NCCL's sym_kernels.cc constants); cluster.gpu = {s.cluster.gpu}"
        )
    kt = kernel_times(ctx, op)
    simple = kt["Simple"][1]
    notes = tuple(
        f"symmetric {p}: kernel {name}, {blocks} CTAs (SMs)"
        for p, (_, _, blocks, name) in kt.items()
    )
    return AlgoModel(
        op=op,
        algo="symmetric",
        n_ranks=ctx.n_ranks,
        busbw_Bps=simple,
        busbw_range_Bps=(simple, simple),
        intra_Bps=simple,
        inter_Bps=math.inf,
        bottleneck="nvlink",
        latency_us={p: v[0] for p, v in kt.items()},
        protocol_bw_factor={p: v[1] / simple for p, v in kt.items()},
        notes=notes,
        bypasses_tuner=True,
    )
