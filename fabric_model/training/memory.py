"""Memory per GPU on the heaviest pipeline stage: weights, gradients, optimizer, activations.

- **Model states** (ZeRO, Rajbhandari et al. 2020, section 3: mixed-precision Adam keeps
  ``2 + 2 + 12`` bytes per parameter: bf16 weights, bf16 gradients, fp32 master weights,
  momentum and variance). ZeRO-1 shards the 12 optimizer bytes over the data-parallel group,
  ZeRO-2 the gradients too, ZeRO-3 (FSDP) everything. Non-expert weights are split by
  ``tp`` and the stage's share of layers; routed experts by ``ep x tp`` (expert tensor
  parallelism equal to ``tp``, Megatron's default), and their data-parallel group is
  ``dp / ep``. Both include ``cp`` in the data-parallel group, as Megatron does.
- **Activations** (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
  Transformer Models", eq. 2 with tensor and sequence parallelism): per layer and
  micro-batch ``s b h (34 + 5 a s / h) / t`` bytes, where 34 is the attention block's 11,
  the MLP's 19 and the two layer norms' 4 for a 4h GELU MLP. The terms are generalised to
  the shape: keys and values shrink with grouped-query attention, and a gated MLP of width
  ``f`` stores ``2 + 8 f / h`` (``3 + 4 f / h`` ungated; 19 at ``f = 4h``); an MoE layer stores
  its MLP once per routed copy (``top_k``) plus the shared experts. Selective recomputation
  drops the ``5 a s / h`` attention-score term, full recomputation keeps only each layer's
  input (``2 s b h / t``). With FlashAttention (``training.flash_attention``) the score
  term is never stored. Context parallelism divides ``s``. The first pipeline stage
  holds ``min(m, pp)`` micro-batches in flight, times ``1 + (pp - 1) / (pp v)`` when
  interleaved (same paper, section 4.2.3).
- **Usable memory**: the GPU's HBM less :data:`RESERVED_FRACTION` for the CUDA context,
  NCCL buffers and allocator fragmentation (an estimate; frameworks report 2-8 GiB).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fabric_model.scenario import Scenario
from fabric_model.training.constants import training_constant
from fabric_model.training.shapes import ShapeCounts

if TYPE_CHECKING:
    from fabric_model.training.step import Plan

__all__ = ["RESERVED_FRACTION", "TRAFFIC_PASSES", "MemoryBreakdown",
           "activation_bytes_per_layer", "activation_traffic_bytes_per_layer",
           "attention_score_bytes_per_layer", "memory_per_gpu"]

#: Share of HBM not available to the model (``assets/training_constants.yaml``).
RESERVED_FRACTION = training_constant("reserved_hbm_fraction")
#: Times each kept activation byte crosses HBM in a forward and backward pass
#: (``assets/training_constants.yaml``; see :func:`activation_traffic_bytes_per_layer`).
TRAFFIC_PASSES = training_constant("traffic_passes")
GIB = 2**30


@dataclass(frozen=True)
class MemoryBreakdown:
    """Memory of one GPU on the heaviest stage, GiB, and the parameters it holds."""

    weights_gib: float
    grads_gib: float
    optimizer_gib: float
    activations_gib: float
    capacity_gib: float
    params_dense: float
    params_expert: float

    @property
    def total_gib(self) -> float:
        """Everything the step needs."""
        return self.weights_gib + self.grads_gib + self.optimizer_gib + self.activations_gib

    @property
    def fits(self) -> bool:
        """Whether it fits in the usable HBM."""
        return self.total_gib <= self.capacity_gib


def activation_bytes_per_layer(s: Scenario, plan: Plan, moe_layer: bool,
                               recompute: str | None = None) -> float:
    """Bytes one layer stores for one micro-batch on one GPU (see the module docstring).

    ``recompute`` overrides the plan's mode (the traffic model asks for ``none``).
    """
    m = s.model
    seq = m.seq_len / plan.cp
    sbh = seq * plan.micro_batch * m.hidden
    t = plan.tp
    mode = recompute or plan.recompute
    if mode == "full":
        return 2.0 * sbh / t
    g = m.kv_heads / m.heads if not m.kv_lora_rank else 1.0
    attention = 11.0 - 4.0 * (1.0 - g)  # input, Q, K, V, projection input, dropout mask
    f = (m.ffn_hidden if moe_layer else (m.dense_ffn_hidden or m.ffn_hidden)) / m.hidden
    mlp = 2.0 + 8.0 * f if m.gated_mlp else 3.0 + 4.0 * f
    if moe_layer:
        mlp_input = 2.0
        mlp = mlp_input + (mlp - mlp_input) * (m.top_k + m.shared_experts)
    per = attention + mlp + 4.0
    if mode == "none" and not s.training.flash_attention:
        per += 5.0 * m.heads * seq / m.hidden
    return sbh * per / t


def attention_score_bytes_per_layer(s: Scenario, plan: Plan) -> float:
    """Bytes of the ``s x s`` score, softmax and dropout tensors (0 with FlashAttention)."""
    if s.training.flash_attention:
        return 0.0
    m = s.model
    seq = m.seq_len / plan.cp
    return 5.0 * m.heads * seq * seq * plan.micro_batch / plan.tp


def activation_traffic_bytes_per_layer(s: Scenario, plan: Plan, moe_layer: bool) -> float:
    """HBM bytes the memory-bound (elementwise) kernels of one layer move per micro-batch.

    Each activation tensor a layer keeps is written and read in the forward pass and read
    again, with its gradient written, in the backward pass: :data:`TRAFFIC_PASSES` times
    its size (an estimate: layer norms, activations, dropout and softmax read their input
    and write their output once per pass). Full recomputation runs the forward part
    again; selective recomputation reruns the score tensors.
    """
    stored = activation_bytes_per_layer(s, plan, moe_layer, recompute="none") \
        + attention_score_bytes_per_layer(s, plan)
    traffic = TRAFFIC_PASSES * stored
    if plan.recompute == "full":
        traffic += TRAFFIC_PASSES / 2 * stored
    elif plan.recompute == "selective":
        traffic += TRAFFIC_PASSES / 2 * attention_score_bytes_per_layer(s, plan)
    return traffic


def memory_per_gpu(s: Scenario, plan: Plan, counts: ShapeCounts,
                   hbm_gib: float) -> MemoryBreakdown:
    """Memory of one GPU on the heaviest stage (see the module docstring)."""
    m = s.model
    layers = m.layers
    stage = plan.layers_per_stage / layers
    # the first stage holds the input embedding, the last the output layer: one of them
    embed = counts.output_layer
    p_dense = (counts.non_expert_layer_params * stage + embed) / plan.tp
    p_expert = counts.expert_params * stage / (plan.ep * plan.tp)
    dp_dense = plan.dp * plan.cp
    dp_expert = max(1, plan.dp // plan.ep) * plan.cp  # an EP not dividing DP is reported
    weights = grads = optim = 0.0
    for p, n in ((p_dense, dp_dense), (p_expert, dp_expert)):
        if plan.zero_stage == 0:
            weights += 2 * p
            grads += 2 * p
            optim += 12 * p
        elif plan.zero_stage == 1:
            weights += 2 * p
            grads += 2 * p
            optim += 12 * p / n
        elif plan.zero_stage == 2:
            weights += 2 * p
            grads += 2 * p / n
            optim += 12 * p / n
        else:
            weights += 2 * p / n
            grads += 2 * p / n
            optim += 12 * p / n
    moe_share = counts.moe_layers / layers
    per_layer = (moe_share * activation_bytes_per_layer(s, plan, True)
                 + (1 - moe_share) * activation_bytes_per_layer(s, plan, False))
    in_flight = min(plan.micro_batches, plan.pp)
    interleave = 1.0 + (plan.pp - 1) / (plan.pp * plan.vpp) if plan.vpp > 1 else 1.0
    acts = per_layer * plan.layers_per_stage * in_flight * interleave
    return MemoryBreakdown(
        weights_gib=weights / GIB, grads_gib=grads / GIB, optimizer_gib=optim / GIB,
        activations_gib=acts / GIB, capacity_gib=hbm_gib * (1 - RESERVED_FRACTION),
        params_dense=p_dense, params_expert=p_expert)
