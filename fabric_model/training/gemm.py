"""How well a layer's GEMMs fill the GPU: tile and wave quantization of each GEMM's shape.

A GEMM producing an ``M x N`` output is cut into output tiles of :data:`TILE_M` x
:data:`TILE_N` (the large tile of CUTLASS / cuBLAS BF16 and FP8 kernels from Ampere to
Blackwell), which run on the GPU's ``n_sms`` streaming multiprocessors in waves; the last
wave and the ragged edge tiles leave SMs idle (NVIDIA, "Matrix Multiplication Background
User's Guide": tile quantization and wave quantization). The share of the tensor peak the
shape allows is

``utilisation = M N / (waves x n_sms x TILE_M x TILE_N)``,
``waves = ceil(ceil(M / TILE_M) ceil(N / TILE_N) / n_sms)``,

taken in the better of the two tile orientations. Each linear layer runs three GEMMs per
micro-batch: forward ``(M, N)``, data gradient ``(M, K)`` and weight gradient ``(K, N)``,
with ``M`` the tokens it sees (sequence parallelism gathers the whole ``s / cp`` sequence,
an expert sees the tokens routed to it) and ``N``, ``K`` the weight's sides on one rank.
:func:`linear_utilisation` is the FLOP-weighted mean over a layer's GEMMs (a harmonic
mean: time adds up), the factor the step divides the linear FLOPs' time by; the one
calibration scale ``training.compute_efficiency`` covers the rest (kernel efficiency inside
a full wave, clocks). Large models' GEMMs fill the machine (utilisation > 0.9); small
per-rank GEMMs (a small model at high tensor parallelism, experts with few tokens) do not.

Routed experts run as one **grouped GEMM** per local expert set (Megatron-Core
``--moe-grouped-gemm``: all local experts' tiles scheduled over the SMs together,
:func:`grouped_gemm_utilisation`), each expert with the ``M`` tokens routed to it. With
dropless routing these counts vary from micro-batch to micro-batch, so an expert's last
row tile is on average half full (MegaBlocks, Gale et al. 2022, pads each expert to its
block size of 128 rows), and the grouped kernel's last wave half empty; with capacity
padding the shapes are fixed and quantized exactly. At few tokens per expert the GEMM
becomes memory-bound on its weights, read (or their gradient written) once per expert
whatever ``M`` is: a roofline (Williams et al. 2009) of ``2 M N K`` FLOPs against
``(N K + M (N + K))`` elements over the HBM bandwidth.

>>> from fabric_model.catalog import load_catalog
>>> round(gemm_utilisation(8192, 8192, load_catalog().gpu("h100")), 3)  # 64 x 32 tiles
0.97
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fabric_model.catalog import Gpu
from fabric_model.scenario import Scenario
from fabric_model.training.constants import training_constant

__all__ = [
    "TILE_M",
    "TILE_N",
    "GemmRates",
    "expert_gemm_utilisation",
    "expert_tokens",
    "gemm_rates",
    "gemm_utilisation",
    "grouped_gemm_utilisation",
    "linear_utilisation",
    "precision_speedups",
]

TILE_M = int(training_constant("gemm_tile_m"))
TILE_N = int(training_constant("gemm_tile_n"))
#: Achievable share of the HBM bandwidth (assets/training_constants.yaml).
HBM_EFFICIENCY = training_constant("hbm_efficiency")
#: NVFP4 bytes per element with its block scales, and the linear layers kept in BF16.
NVFP4_BYTES = training_constant("nvfp4_bytes_per_element")
NVFP4_BF16_SHARE = training_constant("nvfp4_bf16_linear_share")


def _one_orientation(m: float, n: float, tile_m: int, tile_n: int, sms: int) -> float:
    tiles = math.ceil(m / tile_m) * math.ceil(n / tile_n)
    waves = math.ceil(tiles / sms)
    return m * n / (waves * sms * tile_m * tile_n)


def gemm_utilisation(m: float, n: float, gpu: Gpu) -> float:
    """Share of the tensor peak an ``m x n`` output GEMM can reach (see the module docstring)."""
    if m <= 0 or n <= 0:
        return 1.0
    return max(
        _one_orientation(m, n, TILE_M, TILE_N, gpu.n_sms),
        _one_orientation(m, n, TILE_N, TILE_M, gpu.n_sms),
    )


@dataclass(frozen=True)
class GemmRates:
    """What a GEMM can reach: the math rate and the HBM rate it streams operands at.

    ``flops`` is the achievable math rate of the GEMM's precision (the dense BF16 peak times
    ``training.compute_efficiency`` times the precision's speedup), FLOP/s; ``hbm_Bps`` the
    achievable HBM bandwidth, bytes/s; ``elem_bytes`` the bytes per operand element
    (2 BF16, 1 FP8); ``grad_bytes`` the bytes per weight-gradient element the weight-
    gradient GEMM accumulates into (read and written: Megatron's fused accumulation into
    the main gradient).
    """

    flops: float
    hbm_Bps: float
    elem_bytes: float = 2.0
    grad_bytes: float = 4.0


def _smooth_tiles(m: float, tile: int) -> float:
    """Return the expected row tiles of an expert whose token count varies around ``m``.

    A count spread over more than a tile leaves the last tile half full on average:
    ``(m + tile / 2) / tile``; at least one tile.
    """
    return max(1.0, (m + tile / 2) / tile)


def _grouped_tiles_util(
    m: float, n: float, groups: int, sms: int, tile_m: int, tile_n: int, exact: bool
) -> float:
    col_tiles = math.ceil(n / tile_n)
    if exact:
        tiles = groups * math.ceil(m / tile_m) * col_tiles
        waves = float(math.ceil(tiles / sms))
    else:
        tiles_f = groups * _smooth_tiles(m, tile_m) * col_tiles
        waves = max(1.0, tiles_f / sms + 0.5)  # the last wave half empty on average
    return groups * m * n / (waves * sms * tile_m * tile_n)


def grouped_gemm_utilisation(
    m: float,
    n: float,
    k: float,
    groups: int,
    gpu: Gpu,
    rates: GemmRates | None = None,
    *,
    exact: bool = False,
    weight_grad: bool = False,
) -> float:
    """Share of the math rate a grouped GEMM of ``groups`` experts reaches (module docstring).

    Each expert multiplies ``m`` tokens: output ``m x n``, reduction ``k``. With
    ``weight_grad`` the GEMM is the weight gradient: output ``k x n`` (the weight's shape,
    whatever ``m``), reduction over the ``m`` tokens. ``exact`` quantizes fixed shapes
    (capacity padding); otherwise the dropless expectation (half a row tile and half a
    wave lost on average), which never falls as ``m`` grows. With ``rates`` the result is
    capped by the roofline of the bytes the GEMM must move.

    >>> from fabric_model.catalog import load_catalog
    >>> h100 = load_catalog().gpu("h100")
    >>> round(grouped_gemm_utilisation(4096, 1536, 2048, 8, h100), 3)  # 8 experts, 4K tokens
    0.945
    >>> round(grouped_gemm_utilisation(32, 1536, 2048, 8, h100), 3)  # a partial wave
    0.091
    """
    if m <= 0 or n <= 0 or k <= 0 or groups <= 0:
        return 1.0
    sms = gpu.n_sms
    if weight_grad:
        tiles = max(
            _grouped_tiles_util(k, n, groups, sms, TILE_M, TILE_N, True),
            _grouped_tiles_util(k, n, groups, sms, TILE_N, TILE_M, True),
        )
    else:
        tiles = max(
            _grouped_tiles_util(m, n, groups, sms, TILE_M, TILE_N, exact),
            _grouped_tiles_util(m, n, groups, sms, TILE_N, TILE_M, exact),
        )
    if rates is None:
        return tiles
    e = rates.elem_bytes
    weight_bytes = n * k * (2 * rates.grad_bytes if weight_grad else e)
    moved = groups * (weight_bytes + m * (n + k) * e)
    roofline = 2.0 * groups * m * n * k / rates.flops / (moved / rates.hbm_Bps)
    return min(tiles, roofline)


def expert_gemm_utilisation(
    m: float,
    f: float,
    h: float,
    gated: bool,
    groups: int,
    gpu: Gpu,
    rates: GemmRates | None = None,
    *,
    exact: bool = False,
) -> float:
    """FLOP-weighted utilisation of one expert MLP's GEMMs, forward and backward.

    FC1 (``h -> f``, twice ``f`` gated) and FC2 (``f -> h``), each run forward, as the data
    gradient and as the weight gradient, over ``groups`` local experts of ``m`` tokens;
    ``f`` is the expert width on one rank (after expert tensor parallelism).
    """
    f1 = (2.0 if gated else 1.0) * f
    flops = time = 0.0
    for n_out, k_in in ((f1, h), (h, f)):
        work = m * n_out * k_in
        for kind in ("fwd", "dgrad", "wgrad"):
            if kind == "fwd":
                u = grouped_gemm_utilisation(m, n_out, k_in, groups, gpu, rates, exact=exact)
            elif kind == "dgrad":
                u = grouped_gemm_utilisation(m, k_in, n_out, groups, gpu, rates, exact=exact)
            else:
                u = grouped_gemm_utilisation(m, n_out, k_in, groups, gpu, rates, weight_grad=True)
            flops += work
            time += work / u
    return flops / time if time > 0 else 1.0


def precision_speedups(precision: str, gpu: Gpu) -> tuple[float, float]:
    """Return ``(peak ratio, linear-GEMM speedup)`` of ``training.precision`` over BF16.

    The peak ratio is the precision's dense peak over BF16's (MFU against the precision's
    peak divides by it). FP8 runs every linear GEMM at its peak. NVFP4 runs the linear
    GEMMs at the FP4 peak except :data:`NVFP4_BF16_SHARE` of them, kept in BF16 (arXiv
    2509.25149): ``1 / ((1 - s) / r + s)``. ``(1, 1)`` for BF16 or a GPU without the
    precision's tensor cores (the step refuses that plan).

    >>> from fabric_model.catalog import load_catalog
    >>> r, lin = precision_speedups("fp4", load_catalog().gpu("gb300"))
    >>> r, round(lin, 4)  # 15,000 / 2,500; 1 / (0.84 / 6 + 0.16)
    (6.0, 3.3333)
    """
    if precision == "fp8" and gpu.fp8_dense_tflops:
        ratio = gpu.fp8_dense_tflops / gpu.bf16_dense_tflops
        return ratio, ratio
    if precision == "fp4" and gpu.fp4_tflops:
        ratio = gpu.fp4_tflops / gpu.bf16_dense_tflops
        return ratio, 1.0 / ((1.0 - NVFP4_BF16_SHARE) / ratio + NVFP4_BF16_SHARE)
    return 1.0, 1.0


def gemm_rates(s: Scenario, gpu: Gpu) -> GemmRates:
    """Return the linear GEMMs' :class:`GemmRates` at the scenario's precision and efficiency."""
    tr = s.training
    speedup = precision_speedups(tr.precision, gpu)[1]
    elem = {"fp8": 1.0, "fp4": NVFP4_BYTES}.get(tr.precision, 2.0)
    if elem != 2.0 and speedup == 1.0:  # no such tensor cores: the step refuses the plan
        elem = 2.0
    return GemmRates(
        flops=gpu.bf16_dense_tflops * 1e12 * tr.compute_efficiency * speedup,
        hbm_Bps=gpu.hbm_GBps * 1e9 * HBM_EFFICIENCY,
        elem_bytes=elem,
        grad_bytes=4.0 if tr.grad_reduce_in_fp32 else 2.0,
    )


def expert_tokens(
    s: Scenario, cp: int, ep: int, micro_batch: int, gathered: float = 1.0
) -> tuple[float, bool]:
    """Return ``(M, exact)``: the tokens each local expert multiplies per micro-batch.

    Balanced routing gives every expert ``b s / cp x top_k x ep / n_experts x etp / tp``
    tokens: the ``ep`` ranks of its EP group each send their ``b s / (cp tp)`` sequence-
    parallel tokens' copies, and the ``etp`` ranks splitting the expert gather theirs
    (``gathered = etp / tp``; 1 at ``etp = tp``: its tensor-parallel group's sequence,
    gathered); capacity padding (``training.moe_pad_to_capacity``) raises every expert to
    the capacity, ``moe_capacity_factor`` times that, in fixed shapes (``exact``).
    """
    m, tr = s.model, s.training
    balanced = micro_batch * m.seq_len / cp * m.top_k * ep / max(1, m.n_experts) * gathered
    if tr.moe_pad_to_capacity and tr.moe_capacity_factor > 0:
        return balanced * tr.moe_capacity_factor, True
    return balanced, False


def _gemms(
    s: Scenario, tp: int, tokens: float, moe_layer: bool
) -> list[tuple[float, float, float, float]]:
    """``(M, N, K, count)`` of one layer's forward GEMMs on one GPU, routed experts aside."""
    m = s.model
    h = float(m.hidden)
    d = float(m.head_dim or m.hidden // m.heads)
    out: list[tuple[float, float, float, float]] = []
    if m.kv_lora_rank:  # MLA: down-projections are replicated, up-projections split by tp
        d_qk = d + m.rope_head_dim
        if m.q_lora_rank:
            out += [(tokens, m.q_lora_rank, h, 1), (tokens, m.heads * d_qk / tp, m.q_lora_rank, 1)]
        else:
            out.append((tokens, m.heads * d_qk / tp, h, 1))
        out += [
            (tokens, m.kv_lora_rank + m.rope_head_dim, h, 1),
            (tokens, m.heads * 2 * d / tp, m.kv_lora_rank, 1),
        ]
    else:
        out.append((tokens, (m.heads + 2 * m.kv_heads) * d / tp, h, 1))
    out.append((tokens, h, m.heads * d / tp, 1))
    mats = 2.0 if m.gated_mlp else 1.0
    if moe_layer:
        f = float(m.ffn_hidden)
        if m.shared_experts:
            out += [
                (tokens, mats * f * m.shared_experts / tp, h, 1),
                (tokens, h, f * m.shared_experts / tp, 1),
            ]
    else:
        f = float(m.dense_ffn_hidden or m.ffn_hidden)
        out += [(tokens, mats * f / tp, h, 1), (tokens, h, f / tp, 1)]
    return out


def linear_utilisation(
    s: Scenario, tp: int, cp: int, ep: int, micro_batch: int, gpu: Gpu, etp: int | None = None
) -> float:
    """FLOP-weighted utilisation of the linear GEMMs of the model's layer mix (docstring).

    Dense GEMMs by their tile and wave quantization; the routed experts as grouped GEMMs
    (:func:`expert_gemm_utilisation`) of :func:`expert_tokens` each, ``ffn_hidden / etp``
    wide (expert tensor parallelism, ``tp`` when None), under the roofline of
    :func:`gemm_rates`.
    """
    etp = tp if etp is None else etp
    m = s.model
    tokens = micro_batch * m.seq_len / cp
    moe_layers = m.layers - m.dense_layers if m.kind == "moe" else 0
    flops = time = 0.0
    for moe, count in ((True, moe_layers), (False, m.layers - moe_layers)):
        if count <= 0:
            continue
        for gm, gn, gk, copies in _gemms(s, tp, tokens, moe):
            work = gm * gn * gk * copies * count
            for a, b in ((gm, gn), (gm, gk), (gk, gn)):  # forward, data and weight gradient
                flops += work
                time += work / gemm_utilisation(a, b, gpu)
        if moe:
            m_e, exact = expert_tokens(s, cp, ep, micro_batch, etp / tp)
            padding = s.training.moe_capacity_factor if exact else 1.0
            local = max(1, m.n_experts // ep)
            f, h = m.ffn_hidden / etp, float(m.hidden)
            u = expert_gemm_utilisation(
                m_e, f, h, m.gated_mlp, local, gpu, gemm_rates(s, gpu), exact=exact
            )
            # the model's expert FLOPs are the balanced tokens'; the GEMMs run the padded ones
            work = 3.0 * m_e / padding * f * h * (2.0 if m.gated_mlp else 1.0) * local * count
            work += 3.0 * m_e / padding * f * h * local * count
            flops += work
            time += work * padding / u
    return flops / time if time > 0 else 1.0
