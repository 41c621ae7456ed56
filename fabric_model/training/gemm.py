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

>>> from fabric_model.catalog import load_catalog
>>> round(gemm_utilisation(8192, 8192, load_catalog().gpu("h100")), 3)  # 64 x 32 tiles
0.97
"""

from __future__ import annotations

import math

from fabric_model.catalog import Gpu
from fabric_model.scenario import Scenario
from fabric_model.training.constants import training_constant

__all__ = ["TILE_M", "TILE_N", "gemm_utilisation", "linear_utilisation"]

TILE_M = int(training_constant("gemm_tile_m"))
TILE_N = int(training_constant("gemm_tile_n"))


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


def _gemms(
    s: Scenario, tp: int, ep: int, tokens: float, moe_layer: bool
) -> list[tuple[float, float, float, float]]:
    """``(M, N, K, count)`` of one layer's forward GEMMs on one GPU."""
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
        per_expert = tokens * m.top_k * ep / m.n_experts
        local = m.n_experts / ep  # every local expert runs its own GEMMs
        out += [(per_expert, mats * f / tp, h, local), (per_expert, h, f / tp, local)]
        if m.shared_experts:
            out += [
                (tokens, mats * f * m.shared_experts / tp, h, 1),
                (tokens, h, f * m.shared_experts / tp, 1),
            ]
    else:
        f = float(m.dense_ffn_hidden or m.ffn_hidden)
        out += [(tokens, mats * f / tp, h, 1), (tokens, h, f / tp, 1)]
    return out


def linear_utilisation(s: Scenario, tp: int, cp: int, ep: int, micro_batch: int, gpu: Gpu) -> float:
    """FLOP-weighted utilisation of the linear GEMMs of the model's layer mix (docstring)."""
    m = s.model
    tokens = micro_batch * m.seq_len / cp
    moe_layers = m.layers - m.dense_layers if m.kind == "moe" else 0
    flops = time = 0.0
    for moe, count in ((True, moe_layers), (False, m.layers - moe_layers)):
        if count <= 0:
            continue
        for gm, gn, gk, copies in _gemms(s, tp, ep, tokens, moe):
            work = gm * gn * gk * copies * count
            for a, b in ((gm, gn), (gm, gk), (gk, gn)):  # forward, data and weight gradient
                flops += work
                time += work / gemm_utilisation(a, b, gpu)
    return flops / time if time > 0 else 1.0
