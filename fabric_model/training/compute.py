"""The compute side of a step: the heaviest stage's math and kernels, then the bubble.

:func:`stage_compute` times one micro-batch of the heaviest pipeline stage (its GEMMs at the
precision's peak slowed by their shapes, the memory-bound kernels' HBM traffic, the MoE
layers' router, permutation and hot experts) and :func:`with_bubble` adds the schedule's
idle time; :func:`compute_times` is the two (the step's formulas:
:mod:`fabric_model.training.step`). :func:`optimizer_step_s` is the memory-bound optimizer
step.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from fabric_model.catalog import Gpu
from fabric_model.scenario import Scenario
from fabric_model.scenario.shapes import ShapeCounts
from fabric_model.training.constants import training_constant
from fabric_model.training.gemm import linear_utilisation, precision_speedups
from fabric_model.training.memory import (
    MemoryBreakdown,
    activation_traffic_bytes_per_layer,
    model_state_bytes,
)
from fabric_model.training.moe import moe_layer_time
from fabric_model.training.plan import Plan
from fabric_model.training.schedules import bubble_s, parameter_copies

__all__ = [
    "HBM_EFFICIENCY",
    "ComputeTimes",
    "compute_times",
    "layer_flops_per_token",
    "optimizer_step_s",
    "stage_compute",
    "with_bubble",
]

#: Achievable fraction of HBM bandwidth for elementwise kernels (assets/training_constants.yaml).
HBM_EFFICIENCY = training_constant("hbm_efficiency")


def layer_flops_per_token(c: ShapeCounts, seq_len: int) -> tuple[float, float, float]:
    """Model FLOPs of an average layer per token: (total, attention scores, routed experts)."""
    layers = c.moe_layers + c.dense_layers
    matmul = 6.0 * (c.non_expert_layer_params + c.moe_layers * c.top_k * c.ffn_per_expert)
    attn = c.attention_flops_per_token(seq_len)
    experts = 6.0 * c.moe_layers * c.top_k * c.ffn_per_expert
    return (matmul + attn) / layers, attn / layers, experts / layers


def _cheap_recompute_flops(s: Scenario) -> float:
    """Forward FLOPs per token and layer that ``recompute_modules = cheap | mla_up_proj`` reruns.

    The norms and the activation are memory-bound (their traffic is in the HBM term); MLA's
    up-projections of the query and key/value latents are GEMMs: ``2 x`` their weights.
    """
    m = s.model
    if s.training.recompute_modules not in ("cheap", "mla_up_proj") or not m.kv_lora_rank:
        return 0.0
    d = float(m.head_dim or m.hidden // m.heads)
    q_up = m.q_lora_rank * m.heads * (d + m.rope_head_dim) if m.q_lora_rank else 0.0
    return 2.0 * (q_up + m.kv_lora_rank * m.heads * 2 * d)


@dataclass(frozen=True)
class ComputeTimes:
    """The compute side of a step on the heaviest stage, seconds.

    The formulas are the step's (:mod:`fabric_model.training.step`); ``bubble_s`` is 0 until
    :func:`with_bubble` adds the schedule's.
    """

    micro_batch_s: float
    forward_s: float
    compute_s: float
    imbalance_s: float
    bubble_s: float
    gemm_speedup: float
    weight_grad_s: float = 0.0
    #: The MoE router, permutation and small kernels of the step (inside ``compute_s``).
    moe_overhead_s: float = 0.0

    @property
    def backward_s(self) -> float:
        """Backward part of one micro-batch (recomputation included)."""
        return self.micro_batch_s - self.forward_s

    @property
    def busy_s(self) -> float:
        """Compute, imbalance and bubble: the step with a free network (a lower bound)."""
        return self.compute_s + self.imbalance_s + self.bubble_s


def compute_times(s: Scenario, plan: Plan, counts: ShapeCounts, gpu: Gpu) -> ComputeTimes:
    """Time the heaviest stage's math, memory-bound kernels, expert imbalance and bubble.

    :func:`stage_compute`, then :func:`with_bubble`.
    """
    return with_bubble(plan, stage_compute(s, plan, counts, gpu))


def stage_compute(s: Scenario, plan: Plan, counts: ShapeCounts, gpu: Gpu) -> ComputeTimes:
    """Time the heaviest stage's math, memory-bound kernels and expert imbalance (no bubble).

    Reads the model shape (``counts``), the plan's degrees, batch and recomputation, the
    GPU's peaks and HBM bandwidth and ``training.*`` (precision, efficiency, MoE capacity).
    FP8 runs the linear layers' GEMMs (not attention, not the output layer) at the FP8 peak,
    NVFP4 at the FP4 peak but for the share the recipe keeps in BF16
    (:func:`precision_speedups`); every linear GEMM is slowed by its shape's tile and wave
    quantization (:func:`~fabric_model.training.gemm.linear_utilisation`). Returns the
    micro-batch's forward and backward, ``weight_grad_s`` the weight-gradient GEMMs of one
    micro-batch (the zero-bubble schedules move them), and ``bubble_s = 0``.
    """
    m, tr = s.model, s.training
    peak = gpu.bf16_dense_tflops * 1e12 * tr.compute_efficiency
    gemm_speedup, linear_speedup = precision_speedups(tr.precision, gpu)
    seq = m.seq_len
    tokens_mb = plan.micro_batch * seq
    layer_flops, layer_attn, _ = layer_flops_per_token(counts, seq)
    out_flops = 6.0 * counts.output_layer
    stage_model = plan.layers_per_stage * layer_flops + out_flops  # per token, heaviest stage
    recompute = {
        "none": 0.0,
        "selective": layer_attn / 3.0 + _cheap_recompute_flops(s),
        "full": layer_flops / 3.0,
    }[plan.recompute] * plan.layers_per_stage
    # linear GEMMs: at the precision's peak, slowed by their shapes' tile and wave quantization
    util = linear_utilisation(s, plan.tp, plan.cp, plan.ep, plan.micro_batch, gpu, plan.expert_tp)
    linear_share = (layer_flops - layer_attn) / layer_flops
    stretch = 1.0 / (linear_speedup * util) - 1.0  # extra BF16-peak time per linear FLOP
    stage_eq = stage_model + stretch * plan.layers_per_stage * (layer_flops - layer_attn)
    recompute_eq = (
        recompute * (1.0 + stretch * linear_share) if plan.recompute == "full" else recompute
    )
    split = plan.tp * plan.cp
    # memory-bound kernels (norms, activations, softmax, dropout): HBM bytes / bandwidth
    moe_share = counts.moe_layers / m.layers
    traffic = plan.layers_per_stage * (
        moe_share * activation_traffic_bytes_per_layer(s, plan, True)
        + (1 - moe_share) * activation_traffic_bytes_per_layer(s, plan, False)
    )
    t_mem = traffic / (gpu.hbm_GBps * 1e9 * HBM_EFFICIENCY)
    t_fwd = stage_eq / 3.0 * tokens_mb / split / peak + t_mem / 2
    t_mb = (stage_eq + recompute_eq) * tokens_mb / split / peak + t_mem
    mb = plan.micro_batches
    imbalance = moe_overhead = 0.0
    if counts.moe_layers:  # router, permutation and small kernels; the hottest experts
        moe = moe_layer_time(s, plan, gpu)
        moe_stage = plan.layers_per_stage * moe_share
        rerun = 1.0 if plan.recompute == "full" else 0.0  # the forward's part runs again
        moe_mb = moe_stage * (moe.overhead_s + rerun * moe.forward_s)
        t_fwd += moe_stage * moe.forward_s
        t_mb += moe_mb
        moe_overhead = mb * moe_mb
        expert_s = moe.expert_gemm_s * (1.0 + rerun / 3.0)
        imbalance = mb * moe_stage * expert_s * (moe.hottest - 1.0)
    # W = the weight-gradient GEMMs, as many FLOPs as the forward's linear GEMMs
    t_w = (stage_eq - plan.layers_per_stage * layer_attn) / 3.0 * tokens_mb / split / peak
    return ComputeTimes(
        micro_batch_s=t_mb,
        forward_s=t_fwd,
        compute_s=mb * t_mb,
        imbalance_s=imbalance,
        bubble_s=0.0,
        gemm_speedup=gemm_speedup,
        weight_grad_s=t_w,
        moe_overhead_s=moe_overhead,
    )


def with_bubble(plan: Plan, ct: ComputeTimes) -> ComputeTimes:
    """Return ``ct`` with the pipeline schedule's bubble (:func:`~.schedules.bubble_s`).

    Reads the plan's schedule, ``pp``, ``vpp`` and micro-batch count and the stage's
    micro-batch times: the heaviest rank paces the bubble, and the ranks hosting hot experts
    run micro-batches ``1 + imbalance / compute`` times as long.
    """
    mb, t_mb, t_fwd = plan.micro_batches, ct.micro_batch_s, ct.forward_s
    hot = 1.0 + ct.imbalance_s / (mb * t_mb)  # the hot-expert ranks' micro-batches are longer
    bubble = bubble_s(
        plan.schedule,
        plan.pp,
        plan.vpp,
        mb,
        hot * t_fwd,
        hot * (t_mb - t_fwd),
        hot * ct.weight_grad_s,
    )
    return dataclasses.replace(ct, bubble_s=bubble)


def optimizer_step_s(s: Scenario, plan: Plan, mem: MemoryBreakdown, gpu: Gpu) -> float:
    """Seconds of the optimizer step: Adam is memory-bound (bytes it moves / HBM bandwidth).

    Per parameter of the rank's optimizer shard (``1 / (dp x cp)`` with ZeRO >= 1) it reads
    the gradient, reads and writes the master weight and both moments, and writes the
    weight: ``g + 2 o + w`` bytes (:func:`~fabric_model.training.memory.model_state_bytes`),
    30 bytes with FP32 gradients and states. It runs after the last gradient bucket and
    before the parameter all-gather, hidden by nothing.
    """
    w_b, g_b, o_b, g_shard_b = model_state_bytes(s)
    copies = parameter_copies(plan.schedule)  # DualPipe's mirror copies share the shard
    shard = 1 if plan.zero_stage == 0 else plan.dp * plan.cp * copies
    eshard = 1 if plan.zero_stage == 0 else plan.edp * copies
    params = mem.params_dense / shard + mem.params_expert / eshard
    moved = params * (max(g_b, g_shard_b) + 2 * o_b + w_b)
    return moved / (gpu.hbm_GBps * 1e9 * HBM_EFFICIENCY)
