"""Memory per GPU of every pipeline stage: model states, activations, transients, runtime.

- **Model states** per parameter a rank holds (Megatron-LM's distributed-optimizer table,
  ``docs/source/api-guide/dist_optimizer.md``, "bf16 param, fp32 grads"): bf16 weights
  (:data:`WEIGHT_BYTES`), fp32 main gradients (:data:`GRAD_BYTES`), fp32 master weights with
  Adam's two moments (:data:`OPTIMIZER_BYTES`): 18 bytes without sharding, ``6 + 12 / d``
  with the distributed optimizer (ZeRO-1). ZeRO-2 shards the gradients too, ZeRO-3 (FSDP)
  everything (the stages of Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward
  Training Trillion Parameter Models", section 5), and then gathers two layers' bf16
  weights at a time (the one computing and the one prefetched). Non-expert weights are
  split by ``tp`` and the rank's layers, their data-parallel group is ``dp x cp``; routed
  experts by ``ep x etp`` (``parallel.etp``, expert tensor parallelism: Megatron-Core's
  ``expert_tensor_parallel_size``, ``tp`` by default), their data-parallel group the rest
  of the stage's GPUs, ``edp = tp cp dp / (etp ep)`` (MoE parallel folding, Megatron-Core
  ``parallel_state.py``). With FP8 GEMMs the
  rank also keeps an FP8 copy of its GEMM weights (:data:`FP8_WEIGHT_CACHE_BYTES`). With
  BF16 gradient buffers the distributed optimizer's FP32 copy of its gradient shard exists
  only from the optimizer step to the next step's ``zero_grad`` (Megatron-LM
  ``training.py`` ``train_step`` zeroes before the forward pass, ``set_to_none``), when no
  activations are held: the peak is the larger of the two moments. DualPipe holds two
  stages per rank, and ZeRO shards each over its ``2 dp`` replicas.
- **Activations** per layer and micro-batch, counted tensor by tensor as Korthikanti et al.
  2022 ("Reducing Activation Recomputation in Large Transformer Models", section 4.1) do,
  with tensor and sequence parallelism dividing every tensor by ``t`` and context
  parallelism the sequence. Per token (``h`` the hidden size, 2 bytes per element):

  ==============  ===========================================================================
  attention       norm input ``h``; QKV input ``h``; Q, K, V ``(heads d_qk + kv (d_qk + d_v))``
                  (grouped-query K and V shrink with ``kv_heads``; MLA adds its latents;
                  ``model.qk_norm`` the query and key heads again, the norms' inputs);
                  the attention output ``heads d_v`` (FlashAttention's saved output and the
                  projection's input); without FlashAttention the ``heads x s`` softmax (and
                  its dropout mask and output with dropout: Korthikanti's ``5 a s / h``)
  MLP             norm input ``h``; FC1 input ``h``; FC1 output ``2 f`` gated (gate and up,
                  SwiGLU fused as Megatron's ``bias_swiglu`` keeps it) or ``f``; FC2 input ``f``
  MoE layer       norm input and router/expert input ``h``; the router's FP32 scores and
                  routing map, ``5 n_experts`` bytes; per routed copy (``top_k``)
                  the permuted input ``h`` (gathered over the expert-TP group: ``etp /
                  tp`` of the stage's tokens per GPU, each whole), FC1 output and FC2 input
                  (``f / etp`` wide: ``f / tp`` per token on average); the expert output
                  ``h`` only where the combine weights it (torchtitan): Megatron-Core
                  (0.13 on, "memory efficient token permutation", ``experts.py``
                  ``activation_func_with_probs``) multiplies the routing probabilities
                  into the activation, so their gradient comes from the FC1 output it keeps
                  and the unpermute saves no tensor; shared experts' FC1 output and FC2
                  input
  dropout         a 1-byte mask after attention and after the MLP (``model.dropout``)
  ==============  ===========================================================================

  For a 4h GELU MLP with dropout and no FlashAttention this is Korthikanti's
  ``s b h (34 + 5 a s / h)``. An FP8 GEMM saves its input's FP8 copy and transpose (2 bytes,
  as BF16 would); ``training.activation_fp8_input_store`` keeps the SwiGLU input (the FC1
  output) in FP8 (:func:`activation_input_bytes`). Selective recomputation
  (Megatron: the core attention) drops the softmax terms, and with
  ``training.recompute_modules = cheap`` also the norms' outputs, the activation's output
  and MLA's up-projected heads (DeepSeek-V3 report, section 3.2.3); full recomputation keeps
  only each layer's input (``2 s b h / t``) and rematerialises one layer at a time in the
  backward pass (a transient).
- **In flight**: 1F1B pipelining keeps ``min(pp - i, m)`` micro-batches on rank ``i``; the
  interleaved schedule (Megatron-LM, ``virtual_pipeline_model_parallel_size = v``) keeps
  ``min(m v, 2 (pp - i - 1) + (v - 1) pp + 1)`` model chunks of ``layers / v`` layers: the
  first rank holds ``1 + (pp - 1) / (pp v)`` times 1F1B's (Korthikanti et al. section 4.2.3);
  DualPipe ``pp + 1`` micro-batches on every rank, through either of its two stages
  (:mod:`fabric_model.training.schedules`).
  When the layers do not divide evenly the missing layers come off the first and the last
  ranks first, as Llama 3's training did to balance the embedding, the output layer and the
  warm-up micro-batches (Llama 3 Herd of Models, arXiv 2407.21783, section 3.3.2).
- **Frameworks** (``training.framework``): the above is Megatron-Core's; torchtitan (FSDP2)
  keeps fp32 shards of the weights (:data:`FSDP_MASTER_BYTES`) and gradients (unsharded
  with pipelining: the reduce-scatter waits for the last micro-batch), the bf16 weights
  unsharded only without resharding after the forward pass (ZeRO-2), its loss holds
  the logits upcast to fp32 (:data:`TITAN_LOGITS_BYTES`; under tensor parallelism DTensor's
  loss-parallel decompositions, :data:`TITAN_LOSS_PARALLEL_BYTES`), its tensor-parallel
  linears keep their all-gathered inputs whole (:func:`gathered_input_bytes`), full
  checkpointing reruns the whole block, and its selective checkpointing is op-level
  (:func:`_op_sac_bytes_per_token`).
- **Transients**: the last rank's logits and cross-entropy softmax of one micro-batch
  (:data:`LOGITS_BYTES`), the rematerialised layer of full recomputation, ZeRO-3's gathered
  layers.
- **Runtime**: the CUDA context (:data:`CUDA_CONTEXT_GIB`), NCCL's buffers of every
  communicator that carries traffic, by NCCL's own sizes, channels and connection rules
  (:func:`~fabric_model.training.nccl_memory.nccl_bytes_per_gpu`), and the caching
  allocator's fragmentation (:data:`FRAGMENTATION` of everything allocated). nvidia-smi sees
  the runtime; PyTorch's max allocated and reserved do not.

The capacity is the device memory CUDA reports (the catalog's ``hbm_gib``). The estimate is
held to :data:`ACTIVATION_UNCERTAINTY` on activations and transients (the memory golden set)
and carries the fragmentation as uncertainty too (the allocator's settings decide it);
within that band of the capacity a plan is **tight** (it runs, with a warning), beyond it
**over** (refused with the breakdown).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fabric_model.scenario import Scenario
from fabric_model.scenario.shapes import ShapeCounts
from fabric_model.training.constants import training_constant
from fabric_model.training.nccl_memory import nccl_bytes_per_gpu
from fabric_model.training.schedules import in_flight_micro_batches, parameter_copies

if TYPE_CHECKING:
    from fabric_model.training.plan import Plan

__all__ = [
    "ACTIVATION_UNCERTAINTY",
    "TRAFFIC_PASSES",
    "MemoryBreakdown",
    "StageMemory",
    "activation_bytes_per_layer",
    "activation_traffic_bytes_per_layer",
    "attention_score_bytes_per_layer",
    "layers_on_rank",
    "memory_per_gpu",
    "micro_batches_in_flight",
    "model_state_bytes",
    "offload_bytes_per_gpu",
    "parse_pipeline_layout",
    "pipeline_layout_problem",
    "routed_copy_bytes_per_layer",
    "stage_layers",
]

#: Times each kept activation byte crosses HBM in a forward and backward pass
#: (``assets/training_constants.yaml``; see :func:`activation_traffic_bytes_per_layer`).
TRAFFIC_PASSES = training_constant("traffic_passes")
WEIGHT_BYTES = training_constant("weight_bytes_per_param")
GRAD_BYTES = training_constant("grad_bytes_per_param")
OPTIMIZER_BYTES = training_constant("optimizer_bytes_per_param")
FP8_WEIGHT_CACHE_BYTES = training_constant("fp8_weight_cache_bytes_per_param")
#: NVFP4 bytes per element with its block scales, and the linear layers kept in BF16.
NVFP4_BYTES = training_constant("nvfp4_bytes_per_element")
NVFP4_BF16_SHARE = training_constant("nvfp4_bf16_linear_share")
LOGITS_BYTES = training_constant("logits_bytes_per_element")
#: Bytes the top-k router keeps per token and expert (FP32 scores, 1-byte routing map).
ROUTER_BYTES_PER_EXPERT = training_constant("router_bytes_per_expert")
TITAN_LOGITS_BYTES = training_constant("torchtitan_logits_bytes_per_element")
#: torchtitan's loss under tensor parallelism (DTensor's loss_parallel decompositions).
TITAN_LOSS_PARALLEL_BYTES = training_constant("torchtitan_loss_parallel_bytes_per_element")
FSDP_MASTER_BYTES = training_constant("fsdp_master_bytes_per_param")
CUDA_CONTEXT_GIB = training_constant("cuda_context_gib")
FRAGMENTATION = training_constant("allocator_fragmentation")
ACTIVATION_UNCERTAINTY = training_constant("activation_uncertainty")
GIB = 2**30
BF16 = 2.0
FP8 = 1.0


@dataclass(frozen=True)
class StageMemory:
    """Memory of one GPU of one pipeline rank, GiB."""

    rank: int
    layers: int
    micro_batches_in_flight: float
    weights_gib: float
    grads_gib: float
    optimizer_gib: float
    activations_gib: float
    transient_gib: float
    runtime_gib: float

    @property
    def states_gib(self) -> float:
        """Weights, gradients and optimizer states."""
        return self.weights_gib + self.grads_gib + self.optimizer_gib

    @property
    def total_gib(self) -> float:
        """Everything the rank needs at its peak."""
        return self.states_gib + self.activations_gib + self.transient_gib + self.runtime_gib

    @property
    def uncertainty_gib(self) -> float:
        """How far the estimate may be off (activations, transients, fragmentation).

        The fragmentation is the allocator's settings' to decide (PyTorch's expandable
        segments remove most of it), so it counts as uncertainty.
        """
        allocated = self.states_gib + self.activations_gib + self.transient_gib
        return (
            ACTIVATION_UNCERTAINTY * (self.activations_gib + self.transient_gib)
            + FRAGMENTATION * allocated
        )


@dataclass(frozen=True)
class MemoryBreakdown:
    """Memory of one GPU on the heaviest pipeline rank, GiB, with the first, middle and last.

    ``status`` is ``fits``, ``tight`` (within the estimate's uncertainty of the capacity,
    either side: the plan runs, with a warning) or ``over`` (clearly does not fit).
    """

    weights_gib: float
    grads_gib: float
    optimizer_gib: float
    activations_gib: float
    capacity_gib: float
    params_dense: float
    params_expert: float
    transient_gib: float = 0.0
    runtime_gib: float = 0.0
    uncertainty_gib: float = 0.0
    heaviest_rank: int = 0
    stages: tuple[StageMemory, ...] = ()
    #: Activations the heaviest rank keeps in host memory (``training.offload_layers``).
    offloaded_gib: float = 0.0

    @property
    def total_gib(self) -> float:
        """Everything the heaviest rank needs at its peak."""
        return (
            self.weights_gib
            + self.grads_gib
            + self.optimizer_gib
            + self.activations_gib
            + self.transient_gib
            + self.runtime_gib
        )

    @property
    def allocated_gib(self) -> float:
        """What the framework's allocator hands out at the peak (PyTorch's max allocated)."""
        return (
            self.weights_gib
            + self.grads_gib
            + self.optimizer_gib
            + self.activations_gib
            + self.transient_gib
        )

    @property
    def reserved_gib(self) -> float:
        """Allocated plus the caching allocator's fragmentation (PyTorch's max reserved)."""
        return self.allocated_gib * (1.0 + FRAGMENTATION)

    @property
    def headroom_gib(self) -> float:
        """Capacity left on the heaviest rank (negative when over)."""
        return self.capacity_gib - self.total_gib

    @property
    def status(self) -> str:
        """``fits``, ``tight`` or ``over`` (see the class docstring)."""
        if abs(self.headroom_gib) <= self.uncertainty_gib:
            return "tight"
        return "fits" if self.headroom_gib > 0 else "over"

    @property
    def fits(self) -> bool:
        """Whether the plan may run (fits, or tight)."""
        return self.status != "over"

    def describe(self) -> str:
        """One line: the heaviest rank's breakdown against the capacity."""
        return (
            f"{self.total_gib:,.1f} +- {self.uncertainty_gib:,.1f} GiB per GPU on pipeline "
            f"rank {self.heaviest_rank} (weights {self.weights_gib:,.1f}, gradients "
            f"{self.grads_gib:,.1f}, optimizer {self.optimizer_gib:,.1f}, activations "
            f"{self.activations_gib:,.1f}, transient {self.transient_gib:,.1f}, runtime "
            f"{self.runtime_gib:,.1f}) of {self.capacity_gib:,.1f} GiB"
            + (
                f"; {self.offloaded_gib:,.1f} GiB of activations offloaded out of HBM"
                if self.offloaded_gib > 0
                else ""
            )
        )


# ------------------------------------------------------------------------- activations


def _attention_widths(s: Scenario) -> tuple[float, float, float]:
    """Per-token widths of (Q + K + V, attention output, MLA latents) in elements.

    With ``model.qk_norm`` the query and key heads are kept twice: Megatron-Core normalises
    them after the QKV projection (``attention.py``, ``get_query_key_value_tensors``:
    ``query = apply_module(self.q_layernorm)(query)``, likewise the key) and Transformer
    Engine's RMSNorm saves its input for the backward pass (``ops/basic/rmsnorm.py``:
    ``x = input_.contiguous()`` ... ``ctx.save_for_backward(x, rstdevs)``), while the
    attention kernel keeps the normalised, rotated heads.
    """
    m = s.model
    d = float(m.head_dim or m.hidden // m.heads)
    if m.kv_lora_rank:  # MLA: per-head keys carry the rotary part, values do not
        d_qk = d + m.rope_head_dim
        qkv = m.heads * d_qk * 2 + m.heads * d
        latents = 2.0 * (m.q_lora_rank + m.kv_lora_rank) + m.rope_head_dim  # input, normed
        return qkv, m.heads * d, latents
    qk_norm_inputs = (m.heads + m.kv_heads) * d if m.qk_norm else 0.0
    return (m.heads + 2 * m.kv_heads) * d + qk_norm_inputs, m.heads * d, 0.0


def _mlp_bytes(f: float, lin: float, gated: bool, keep_act: bool, act_in: float = BF16) -> float:
    """FC1 output and FC2 input of one feed-forward of width ``f`` (per token, bytes).

    ``act_in``: bytes per element of the stored FC1 output (the activation's input).
    """
    return (2.0 * f if gated else f) * act_in + (f * lin if keep_act else 0.0)


def activation_input_bytes(s: Scenario) -> float:
    """Bytes per element the SwiGLU activation keeps of its input for the backward pass.

    BF16, or with ``training.activation_fp8_input_store`` an FP8 (E4M3) cast, 1 byte,
    dequantized in the backward pass (Megatron-Core ``activation_func_fp8_input_store``:
    ``fused_bias_swiglu.py`` stores ``input.to(torch.float8_e4m3fn)``; DeepSeek-V3 report
    section 3.3.2, "we cache the inputs of the SwiGLU operator and recompute its output in
    the backward pass. These activations are also stored in FP8").
    """
    tr = s.training
    return FP8 if tr.activation_fp8_input_store and s.model.gated_mlp else BF16


def _op_sac_bytes_per_token(s: Scenario, moe_layer: bool, tp: int) -> float:
    """Bytes one layer keeps per token under torchtitan's op-level selective checkpointing.

    The policy (``torchtitan/models/llama3/infra/parallelize.py``, ``_save_list``) keeps the
    outputs of matmuls and attention except every second matmul of a block, and the block's
    input; everything else is rebuilt. In forward order the matmuls are wq, wk, wv, wo, w1,
    w3, w2: wq, wv, w1, w2 are kept with the attention output. w2's output is kept before
    its reduce-scatter, whole on every tensor-parallel rank.
    """
    m = s.model
    h = float(m.hidden)
    d = float(m.head_dim or m.hidden // m.heads)
    f = float(m.ffn_hidden if moe_layer else (m.dense_ffn_hidden or m.ffn_hidden))
    copies = (m.top_k + m.shared_experts) if moe_layer else 1
    per_rank = h + m.heads * d + m.kv_heads * d + m.heads * d + copies * f  # split by tp
    return BF16 * (per_rank + copies * h * tp)


def linear_input_bytes(s: Scenario, tp: int = 1) -> float:
    """Bytes per element a linear layer saves of its input for the backward pass.

    Megatron-Core with Transformer Engine FP8 (``framework = megatron``, ``precision = fp8``)
    saves the FP8 input it quantized, not the BF16 one (``transformer_engine/pytorch/
    module/linear.py``: ``inputmat.update_usage(rowwise_usage=False, columnwise_usage=True)``
    unless the backward must all-gather the input): 1 byte. On Hopper (no non-TN FP8
    GEMMs) the column-wise data is a transpose, and with sequence parallelism (``tp > 1``)
    the backward gathers the row-wise data as well: 2 bytes, as BF16. torchao's Float8
    linear (torchtitan) saves the high-precision input and casts again: 2 bytes.
    """
    tr = s.training
    if tr.precision != "fp8" or tr.framework != "megatron":
        return BF16
    from fabric_model.catalog import load_catalog

    hopper = load_catalog().gpu(s.cluster.gpu).arch == "hopper"
    return BF16 if hopper and tp > 1 else 1.0


def gathered_input_bytes(s: Scenario, tp: int) -> float:
    """Bytes per token a column-parallel linear keeps of its input, before tensor parallelism.

    Megatron-Core with sequence parallelism saves the sequence-sharded input and all-gathers
    it again in the backward pass (``tensor_parallel/layers.py``,
    ``LinearWithGradAccumulationAndAsyncCommunication``: ``ctx.save_for_backward(input,
    weight)`` before the gather, which the backward repeats for the weight gradient):
    ``h / tp`` per GPU, the count the callers divide by ``tp``. torchtitan's tensor-parallel
    plan (``parallelize_llama.py`` ``apply_tp``) all-gathers the norm's output in
    ``PrepareModuleInput`` (``Shard(1)`` to ``Replicate()``) before ``wq``/``wk``/``wv``
    and ``w1``/``w3`` (``ColwiseParallel``), and autograd saves that whole sequence for the
    weight gradient: ``tp`` times the sharded count, in FP8 under Float8 (torchao's
    ``PrepareFloat8ModuleInput`` casts before the all-gather, so the gathered, saved input
    is the FP8 one). Per element of the hidden size.
    """
    if s.training.framework == "torchtitan" and tp > 1:
        return (FP8 if s.training.precision == "fp8" else BF16) * tp
    return linear_input_bytes(s, tp)


def _layer_bytes_per_token(
    s: Scenario, moe_layer: bool, mode: str, tp: int = 1, etp: int | None = None
) -> float:
    """Bytes one layer keeps per token of a micro-batch, before tensor parallelism.

    Selective recomputation of the ``cheap`` modules drops the norms' outputs (the QKV, FC1
    and router inputs), the activation's output (FC2 input) and MLA's up-projected heads.

    A routed expert's input is what Megatron-Core's all-to-all dispatcher hands it: the
    tokens its EP peers sent, all-gathered over the ``etp`` GPUs that split the expert
    (``token_dispatcher.py``, ``dispatch_postprocess``), kept whole by the grouped linear
    layer for its weight gradient; a GPU holds ``etp / tp`` of its stage's routed copies
    (``etp`` defaults to ``tp``), in the dtype of an expert GEMM's saved input
    (Transformer Engine runs the grouped linear with ``tp_size = 1``: the dispatcher does
    the communication, so no backward all-gather of the input).
    """
    etp = tp if etp is None else etp
    m = s.model
    h = float(m.hidden)
    if mode == "full":
        return BF16 * h
    if mode == "selective" and s.training.framework == "torchtitan":
        return _op_sac_bytes_per_token(s, moe_layer, tp)
    cheap = mode == "selective" and s.training.recompute_modules == "cheap"
    lin = linear_input_bytes(s, tp)
    norm_out = 0.0 if cheap else gathered_input_bytes(s, tp) * h  # the QKV and FC1 inputs
    qkv, out, latents = _attention_widths(s)
    if cheap and m.kv_lora_rank:
        qkv, latents = 0.0, latents - (m.q_lora_rank + m.kv_lora_rank)
    elif mode == "selective" and s.training.recompute_modules == "mla_up_proj":
        qkv = 0.0 if m.kv_lora_rank else qkv  # rebuilt from the latents the layer keeps
    # the output projection's FP8 input is a copy beside FlashAttention's BF16 output
    proj_in = lin * out if lin < BF16 else 0.0
    attention = BF16 * h + norm_out + BF16 * (qkv + out + latents) + proj_in
    act_in = activation_input_bytes(s)
    if moe_layer:
        f = float(m.ffn_hidden)
        lin_e = linear_input_bytes(s)
        routed = lin_e * h * etp + _mlp_bytes(f, lin_e, m.gated_mlp, not cheap, act_in)
        if s.training.framework != "megatron":  # the expert output the combine weights
            routed += BF16 * h
        mlp = (
            BF16 * h
            + (0.0 if cheap else BF16 * h)
            + ROUTER_BYTES_PER_EXPERT * m.n_experts
            + m.top_k * routed
            + m.shared_experts * _mlp_bytes(f, lin, m.gated_mlp, not cheap, act_in)
        )
    else:
        f = float(m.dense_ffn_hidden or m.ffn_hidden)
        mlp = BF16 * h + norm_out + _mlp_bytes(f, lin, m.gated_mlp, not cheap, act_in)
    masks = 2.0 * h if m.dropout else 0.0
    return attention + mlp + masks


def attention_score_bytes_per_layer(s: Scenario, plan: Plan) -> float:
    """Bytes of the ``s x s`` softmax tensors one layer keeps (0 with FlashAttention)."""
    if s.training.flash_attention:
        return 0.0
    m = s.model
    seq = m.seq_len / plan.cp
    per = 5.0 if m.dropout else 2.0  # softmax output (+ dropout mask and output)
    return per * m.heads * seq * seq * plan.micro_batch / plan.tp


def activation_bytes_per_layer(
    s: Scenario, plan: Plan, moe_layer: bool, recompute: str | None = None
) -> float:
    """Bytes one layer stores for one micro-batch on one GPU (see the module docstring).

    ``recompute`` overrides the plan's mode (the traffic model asks for ``none``).
    """
    mode = recompute or plan.recompute
    tokens = s.model.seq_len / plan.cp * plan.micro_batch
    kept = tokens * _layer_bytes_per_token(s, moe_layer, mode, plan.tp, plan.expert_tp) / plan.tp
    if mode == "none":
        kept += attention_score_bytes_per_layer(s, plan)
    return kept


def routed_copy_bytes_per_layer(s: Scenario, plan: Plan, moe_layer: bool) -> float:
    """Bytes of the routed copies' expert inputs (and outputs, where kept) one MoE layer keeps.

    The token permutation writes and reads them (:mod:`fabric_model.training.moe` times it
    kernel by kernel), so the elementwise passes leave them out.
    """
    if not moe_layer:
        return 0.0
    m = s.model
    tokens = m.seq_len / plan.cp * plan.micro_batch
    out = BF16 if s.training.framework != "megatron" else 0.0  # see _layer_bytes_per_token
    per_gpu = tokens * m.top_k * m.hidden / plan.tp  # the stage's copies over its tp GPUs
    return per_gpu * (linear_input_bytes(s) * plan.expert_tp + out)


def activation_traffic_bytes_per_layer(s: Scenario, plan: Plan, moe_layer: bool) -> float:
    """HBM bytes the memory-bound (elementwise) kernels of one layer move per micro-batch.

    Each activation tensor a layer keeps is written and read in the forward pass and read
    again, with its gradient written, in the backward pass: :data:`TRAFFIC_PASSES` times
    its size (an estimate: layer norms, activations, dropout and softmax read their input
    and write their output once per pass). The routed copies' expert inputs and outputs
    are the token permutation's, timed with it (:func:`routed_copy_bytes_per_layer`). Full
    recomputation runs the forward part again; selective recomputation reruns the score
    tensors.
    """
    stored = activation_bytes_per_layer(s, plan, moe_layer, recompute="none")
    traffic = TRAFFIC_PASSES * (stored - routed_copy_bytes_per_layer(s, plan, moe_layer))
    if plan.recompute == "full":
        traffic += TRAFFIC_PASSES / 2 * stored
    elif plan.recompute == "selective":  # the rebuilt tensors: the scores, the cheap modules
        traffic += (
            TRAFFIC_PASSES
            / 2
            * (stored - activation_bytes_per_layer(s, plan, moe_layer, recompute="selective"))
        )
    return traffic


# ---------------------------------------------------------------------------- pipeline


def parse_pipeline_layout(text: str) -> list[str]:
    """Unroll Megatron-Core's ``--pipeline-model-parallel-layout`` into one string per stage.

    The syntax of ``megatron/core/transformer/pipeline_parallel_layer_layout.py``
    (``parse_str_to_list``): commas are cosmetic, ``(...)*n`` and ``x*n`` repeat, ``|``
    separates the ``pp x vpp`` virtual stages, and a stage lists its layers: ``E`` the
    embedding, ``t`` a transformer layer, ``m`` a multi-token-prediction layer, ``L`` the loss.

    >>> parse_pipeline_layout("Et|(tt|)*2tL")
    ['Et', 'tt', 'tt', 'tL']

    Raises
    ------
    ValueError
        For a character other than ``E t m L | ( ) * ,`` and digits after ``*``.
    """
    out = text.replace(",", "").replace(" ", "")
    for pattern in (r"\(([^()]+)\)\*(\d+)", r"(.)\*(\d+)"):
        while re.search(pattern, out):
            out = re.sub(pattern, lambda g: g.group(1) * int(g.group(2)), out)
    bad = set(out) - set("EtmL|")
    if bad:
        raise ValueError(f"unknown layout character(s) {''.join(sorted(bad))!r}")
    return out.split("|")


def pipeline_layout_problem(s: Scenario, pp: int, vpp: int) -> str:
    """Why ``parallel.pipeline_layout`` cannot run this plan ('' when it can, or is auto).

    Megatron-Core's checks: ``pp x vpp`` stages, one ``E`` on the first stage, one ``L`` on
    the last, and ``model.layers`` transformer layers in all.
    """
    text = s.parallel.pipeline_layout
    if text == "auto":
        return ""
    try:
        stages = parse_pipeline_layout(text)
    except ValueError as exc:
        return f"{exc} (allowed: E t m L | ( ) * n)"
    layers = sum(st.count("t") for st in stages)
    if len(stages) != pp * vpp:
        return f"{len(stages)} stages, but parallel.pp x vpp = {pp * vpp}"
    if "".join(stages).count("E") != 1 or "E" not in stages[0]:
        return "the embedding E must appear once, on the first stage"
    if "".join(stages).count("L") != 1 or "L" not in stages[-1]:
        return "the loss L must appear once, on the last stage"
    if layers != s.model.layers:
        return f"{layers} transformer layers t, but model.layers = {s.model.layers}"
    return ""


def _layout_chunks(s: Scenario, plan: Plan, rank: int) -> list[int] | None:
    """Return the transformer layers of each model chunk of ``rank`` (None: auto)."""
    if s.parallel.pipeline_layout == "auto" or pipeline_layout_problem(s, plan.pp, plan.vpp):
        return None
    stages = parse_pipeline_layout(s.parallel.pipeline_layout)
    return [stages[v * plan.pp + rank].count("t") for v in range(plan.vpp)]


def stage_layers(s: Scenario, plan: Plan, rank: int) -> int:
    """Return the transformer layers rank ``rank`` holds (``parallel.pipeline_layout``)."""
    chunks = _layout_chunks(s, plan, rank)
    if chunks is None:
        return layers_on_rank(plan, s.model.layers, rank)
    return sum(chunks)


def max_stage_layers(s: Scenario, plan: Plan) -> int:
    """Layers of the heaviest pipeline rank under ``parallel.pipeline_layout``."""
    return max(stage_layers(s, plan, r) for r in range(plan.pp))


def _layers_in_flight(s: Scenario, plan: Plan, rank: int, layers: int) -> float:
    """Layer-micro-batches of activations ``rank`` holds at its peak.

    An even split: ``layers x`` :func:`micro_batches_in_flight`. With a layout, the
    interleaved warm-up runs chunk ``(j // pp) mod v`` as its ``j``-th forward (Megatron-Core
    ``schedules.py``, micro-batch groups of ``pp`` per model chunk), so the first
    ``N`` forwards in flight hold the layers of the chunks they ran.
    """
    chunks = _layout_chunks(s, plan, rank)
    if chunks is None or plan.pp == 1:
        return layers * micro_batches_in_flight(plan, rank)
    if plan.vpp == 1:
        return chunks[0] * micro_batches_in_flight(plan, rank)
    pp, v, m = plan.pp, plan.vpp, plan.micro_batches
    n = min(m * v, 2 * (pp - rank - 1) + (v - 1) * pp + 1)
    return float(sum(chunks[(j // pp) % v] for j in range(n)))


def layers_on_rank(plan: Plan, layers: int, rank: int) -> int:
    """Layers pipeline rank ``rank`` holds.

    Every rank holds ``plan.layers_per_stage`` except that the layers missing to fill them
    come off the ends first (rank 0, the last, rank 1, the one before the last, ...), as
    Llama 3 balanced its first and last stages.
    """
    pp = plan.pp
    deficit = plan.layers_per_stage * pp - layers
    pos = 2 * rank if rank < (pp + 1) // 2 else 2 * (pp - 1 - rank) + 1
    removed = deficit // pp + (1 if pos < deficit % pp else 0)
    return max(1, plan.layers_per_stage - removed)


def micro_batches_in_flight(plan: Plan, rank: int) -> float:
    """Micro-batches whose activations rank ``rank`` holds at its peak (see the docstring).

    Interleaved schedules count model chunks of ``1 / v`` of the rank's layers, so the
    figure can be fractional.
    """
    pp, v, m = plan.pp, plan.vpp, plan.micro_batches
    if pp == 1:
        return 1.0
    if v == 1:  # 1F1B, ZB-H1; ZB-H2 and DualPipe hold more (training.schedules)
        return in_flight_micro_batches(plan.schedule, pp, rank, m)
    chunks = min(m * v, 2 * (pp - rank - 1) + (v - 1) * pp + 1)
    return chunks / v


def _ranks(pp: int) -> list[int]:
    """Return the ranks whose memory can be the largest: ends, their neighbours, middle."""
    return sorted({0, min(1, pp - 1), pp // 2, max(0, pp - 2), pp - 1})


def fp8_weight_bytes(s: Scenario) -> float:
    """Bytes per GEMM weight of its FP8 form (the cache, or the weight itself).

    :data:`FP8_WEIGHT_CACHE_BYTES` row-wise; Transformer Engine on a GPU without non-TN FP8
    GEMMs (Hopper; ``transformer_engine/pytorch/utils.py``, ``is_non_tn_fp8_gemm_supported``:
    compute capability 10.x or 13+) also keeps the transposed FP8 copy the backward GEMMs
    read, twice the bytes. torchao (torchtitan) casts as it goes: the row-wise figure.
    """
    if s.training.framework == "megatron":
        from fabric_model.catalog import load_catalog

        if load_catalog().gpu(s.cluster.gpu).arch == "hopper":
            return 2 * FP8_WEIGHT_CACHE_BYTES
    return FP8_WEIGHT_CACHE_BYTES


def fp8_casts_rebuilt(s: Scenario, plan: Plan) -> bool:
    """Whether the FP8 weight casts are rebuilt per layer instead of held through the step.

    torchtitan's Float8 linear (torchao, late 2024: ``Float8Linear.forward_fp8_matmul``)
    casts the weight on every call and ``manual_float8_matmul_with_args_in_float8``
    saves that FP8 copy for its backward pass, so without checkpointing every layer's copy
    is held until its backward pass. With activation checkpointing (torchtitan wraps every
    block, ``ptd_checkpoint_wrapper``, non-reentrant) a block keeps only its input and, with
    op-level selective checkpointing, the outputs of the ops on the policy's save list
    (torchtitan @9dec370 ``parallelize_llama.py``, ``_save_list``: ``mm``, the attention
    kernels, ``reduce_scatter``, ``abs`` and ``max``; every other op is
    ``PREFER_RECOMPUTE``): the cast is rebuilt with the block in the backward pass. The
    published Table 1 shows it: Float8 moves the compiled 8B run's peak by -0.2 GiB, not by
    the 7 GiB an FP8 copy of every weight would take. Transformer Engine (Megatron-Core)
    keeps its FP8 weight cache on the module, outside autograd, whatever the recomputation.
    """
    return s.training.framework == "torchtitan" and plan.recompute != "none"


def model_state_bytes(s: Scenario) -> tuple[float, float, float, float]:
    """Bytes per parameter of (GEMM weights, gradients, optimizer shard, FP32 grad shard).

    - weights: BF16 (:data:`WEIGHT_BYTES`), or with ``training.fp8_param_gather`` the FP8
      weight alone (:data:`FP8_WEIGHT_CACHE_BYTES`; Megatron-Core's ``fp8_param_gather``:
      "keep the compute param in fp8 (do not use any other intermediate dtype) and perform
      the param all-gather in fp8", ``distributed_data_parallel_config.py``);
    - gradients: FP32 main grads (:data:`GRAD_BYTES`), or BF16 with
      ``training.grad_reduce_in_fp32 = false`` (Megatron-Core's grad buffer then has the
      parameters' dtype), and the distributed optimizer then casts its shard to FP32
      (``distrib_optimizer.py``, ``_copy_model_grads_to_main_grads``): the last figure,
      which the precision-aware optimizer skips (it reads the BF16 gradients), held during
      the optimizer step only (:func:`memory_per_gpu`);
    - optimizer: FP32 master weights and Adam's moments (:data:`OPTIMIZER_BYTES` = 4 + 8);
      ``training.optimizer_moments = bf16`` (the precision-aware optimizer,
      ``use_precision_aware_optimizer``, exp_avg / exp_avg_sq bf16) halves the moments;
      the precision-aware optimizer (``training.precision_aware_optimizer``, implied by BF16
      moments) over BF16 weights lets Transformer Engine's FusedAdam manage the master and
      keep only its low 16 bits (``optimizer/__init__.py``: ``master_weights``,
      ``use_decoupled_grad``, ``store_param_remainders``, on by default,
      ``optimizer_config.py``; ``distrib_optimizer.py`` sizes that state ``torch.int16``)
      and read the BF16 gradient shard as it is (``_copy_model_grads_to_main_grads``:
      ``shard_main_param.decoupled_grad = shard_model_grad``): 2 + 4 + 4 with FP32
      moments, 2 + 2 + 2 with BF16 ones;
      ``training.optimizer_master = bf16`` keeps the optimizer's copy of the weights in BF16
      whatever the weights are: NeMo 1.0's Apex DistributedFusedAdam with ``optim.dtype:
      bf16`` stores its parameter shard in the optimizer's dtype when the weights are FP8
      (``megatron_base_model.setup_optimization``: ``store_params = True`` with
      ``fp8_params``), the setting of NVIDIA's Nemotron-4 340B benchmark
      (dgxc-benchmarking ``nemotron4-340b-synth.yaml``), and reads the BF16 gradient shard.
    """
    tr = s.training
    weights = fp8_weight_bytes(s) if tr.fp8_param_gather else WEIGHT_BYTES
    grads = GRAD_BYTES if tr.grad_reduce_in_fp32 else BF16
    precision_aware = tr.precision_aware_optimizer or tr.optimizer_moments == "bf16"
    # the precision-aware optimizer reads BF16 gradients as they are (decoupled_grad): no
    # FP32 copy of the shard; nor does Apex's optimizer with a BF16 parameter shard
    grad_shard = (
        0.0
        if tr.grad_reduce_in_fp32 or precision_aware or tr.optimizer_master == "bf16"
        else GRAD_BYTES
    )
    moments = OPTIMIZER_BYTES - GRAD_BYTES  # Adam's two FP32 moments (master: 4 bytes)
    master = OPTIMIZER_BYTES - moments
    if tr.optimizer_moments == "bf16":
        moments /= 2
    if precision_aware and not tr.fp8_param_gather:  # the master's 16-bit remainder
        master /= 2
    if tr.optimizer_master == "bf16":  # Apex DistributedFusedAdam's shard in optim.dtype
        master = BF16
    return weights, grads, master + moments, grad_shard


def offload_bytes_per_gpu(s: Scenario, plan: Plan, per_layer: float, layers: int) -> float:
    """Activation bytes one GPU keeps in host memory (``training.offload_layers``).

    Megatron-Core's CPU offloading (``cpu_offloading_num_layers``, Transformer Engine's
    ``get_cpu_offload_context``) moves the saved activations of that many of the rank's
    layers to host memory as the forward pass leaves them, and brings them back for the
    backward pass, one micro-batch at a time.
    """
    return per_layer * min(s.training.offload_layers, layers)


def memory_per_gpu(s: Scenario, plan: Plan, counts: ShapeCounts, hbm_gib: float) -> MemoryBreakdown:
    """Memory of one GPU on each candidate rank; the heaviest one (see the module docstring)."""
    m = s.model
    L = m.layers
    fp8 = s.training.precision == "fp8"
    fp4 = s.training.precision == "fp4"
    titan = s.training.framework == "torchtitan"
    dp_dense = plan.dp * plan.cp
    # expert data parallelism: the rest of the stage's tp x cp x dp GPUs after etp x ep
    # (Megatron-Core MoE parallel folding; torchtitan's FSDP2 + EP): a grid that does not
    # divide them is reported by the plan
    dp_expert = plan.edp
    w_b, g_b, o_b, g_shard_b = model_state_bytes(s)
    moe_share = counts.moe_layers / L
    per_layer = moe_share * activation_bytes_per_layer(s, plan, True) + (
        1 - moe_share
    ) * activation_bytes_per_layer(s, plan, False)
    dense_per_layer = counts.non_expert_layer_params / L
    expert_per_layer = counts.expert_params / L
    runtime_fixed = CUDA_CONTEXT_GIB + nccl_bytes_per_gpu(s, plan) / GIB
    tokens = m.seq_len / plan.cp * plan.micro_batch
    # the rematerialised layer of full recomputation keeps what the layer saves without
    # checkpointing: torchtitan reruns the whole block (ptd_checkpoint_wrapper); Megatron's
    # count is its selective one (FlashAttention keeps no score tensors either way)
    remat_mode = "none" if titan else "selective"
    remat = moe_share * activation_bytes_per_layer(s, plan, True, remat_mode) + (
        1 - moe_share
    ) * activation_bytes_per_layer(s, plan, False, remat_mode)
    loss_bytes = (
        (TITAN_LOSS_PARALLEL_BYTES if plan.tp > 1 else TITAN_LOGITS_BYTES)
        if titan
        else LOGITS_BYTES
    )
    # beside the loss: the final norm's input and the output layer's saved BF16 input, which
    # torchtitan's ColwiseParallel(input_layouts=Shard(1)) all-gathers whole (the output
    # layer is not converted to Float8) and Megatron's sequence parallelism keeps sharded
    output_input_share = 1.0 if titan else 1.0 / plan.tp
    head_inputs = BF16 * tokens * m.hidden * (output_input_share + 1.0 / plan.tp)
    loss_peak = tokens * m.vocab / plan.tp * loss_bytes + head_inputs
    stages: list[StageMemory] = []
    heaviest: tuple[StageMemory, float, float, float] | None = None
    # DualPipe: rank i runs stage i one way and stage pp - 1 - i the other (DeepSeek-V3
    # report Table 2, "2x" parameters); the two copies of a stage are data-parallel
    # replicas of each other (the DualPipe repository's examples/example_dualpipe.py sums
    # their gradients), so what ZeRO shards, it shards over dp x 2
    copies = parameter_copies(plan.schedule)
    for rank in _ranks(plan.pp):
        mirror = plan.pp - 1 - rank
        stage = stage_layers(s, plan, rank)
        layers = stage + (stage_layers(s, plan, mirror) if copies == 2 else 0)
        ends = (rank == 0) + (rank == plan.pp - 1)
        embed = counts.output_layer * (1 if m.tied_embeddings and plan.pp == 1 else ends)
        p_dense = (dense_per_layer * layers + copies * embed) / plan.tp
        p_expert = expert_per_layer * layers / (plan.ep * plan.expert_tp)
        p_gemm = p_dense + p_expert - copies * embed / plan.tp
        weights = grads = optim = step_grads = 0.0
        z = plan.zero_stage
        for p, n in ((p_dense, dp_dense * copies), (p_expert, dp_expert * copies)):
            if titan and z >= 2:  # FSDP2: fp32 shards of weights and gradients, Adam on them
                weights += (WEIGHT_BYTES if z == 2 else 0.0) * p + FSDP_MASTER_BYTES * p / n
                # with pipelining the reduce-scatter waits for the last micro-batch, so the
                # fp32 gradients accumulate unsharded (torch.distributed.pipelining)
                grads += GRAD_BYTES * p / (n if plan.pp == 1 else 1)
                optim += (o_b - FSDP_MASTER_BYTES) * p / n
                continue
            weights += WEIGHT_BYTES * p / (n if z >= 3 else 1)
            grads += g_b * p / (n if z >= 2 else 1)
            # the FP32 copy of the BF16 gradient shard is made by the optimizer step and
            # freed by the next step's zero_grad (set_to_none), before its forward pass
            step_grads += g_shard_b * p / (n if z >= 1 else 1)
            optim += o_b * p / (n if z >= 1 else 1)
        # torchao's Float8 linear saves its FP8 weight for the backward pass inside the
        # block; activation checkpointing keeps none of a block's saved tensors but the
        # policy's (see fp8_casts_rebuilt), so only the computing layer's casts exist
        layer_casts = 0.0
        if s.training.fp8_param_gather:  # the FP8 weight replaces the BF16 one (not the embedding)
            weights -= (WEIGHT_BYTES - w_b) * p_gemm / (dp_dense if z >= 3 else 1)
        elif fp8 and fp8_casts_rebuilt(s, plan):
            layer_casts = fp8_weight_bytes(s) * p_gemm / max(1, layers)
        elif fp8:  # an FP8 copy of the GEMM weights (Transformer Engine's cache, torchao's casts)
            weights += fp8_weight_bytes(s) * p_gemm
        elif fp4:  # NVFP4 copies (row- and column-wise) with their scales, on the FP4 layers
            weights += 2 * NVFP4_BYTES * (1 - NVFP4_BF16_SHARE) * p_gemm
        in_flight = micro_batches_in_flight(plan, rank)
        held = _layers_in_flight(s, plan, rank, stage)
        if copies == 2:  # DualPipe's p + 1 micro-batches run through either of its stages
            held = in_flight * layers / 2
        # a micro-batch can offload no more than it keeps (DualPipe runs each micro-batch
        # through one of the rank's two stages: half its layers)
        offloaded = min(
            offload_bytes_per_gpu(s, plan, per_layer, layers), per_layer * held / max(in_flight, 1)
        )
        # the offloaded layers of every micro-batch in flight sit in host memory; one layer
        # is in transit (the prefetch ahead of the backward pass)
        acts = per_layer * held - offloaded * in_flight + min(offloaded, per_layer)
        # one layer rematerialised (full recomputation), with its FP8 weight casts
        transient = (remat if plan.recompute == "full" else 0.0) + layer_casts
        if rank == plan.pp - 1 or (copies == 2 and rank == 0):  # the loss of one micro-batch
            transient = max(transient, loss_peak)
        if plan.zero_stage >= 3:  # two layers' weights gathered (computing, prefetched)
            transient += 2 * w_b * (p_dense + p_expert) / max(1, layers)
        # the peak is the backward pass's or the optimizer step's (no activations then)
        transient = max(transient, step_grads - acts)
        allocated = weights + grads + optim + acts + transient
        runtime = runtime_fixed * GIB + FRAGMENTATION * allocated
        stages.append(
            StageMemory(
                rank=rank,
                layers=layers,
                micro_batches_in_flight=in_flight,
                weights_gib=weights / GIB,
                grads_gib=grads / GIB,
                optimizer_gib=optim / GIB,
                activations_gib=acts / GIB,
                transient_gib=transient / GIB,
                runtime_gib=runtime / GIB,
            )
        )
        host = offloaded * in_flight
        if heaviest is None or stages[-1].total_gib > heaviest[0].total_gib:
            heaviest = (stages[-1], p_dense, p_expert, host)
    assert heaviest is not None  # _ranks is never empty
    top, p_dense, p_expert, host = heaviest
    shown = {0: "first", plan.pp // 2: "middle", plan.pp - 1: "last"}
    return MemoryBreakdown(
        weights_gib=top.weights_gib,
        grads_gib=top.grads_gib,
        optimizer_gib=top.optimizer_gib,
        activations_gib=top.activations_gib,
        capacity_gib=hbm_gib,
        params_dense=p_dense,
        params_expert=p_expert,
        transient_gib=top.transient_gib,
        runtime_gib=top.runtime_gib,
        uncertainty_gib=top.uncertainty_gib,
        heaviest_rank=top.rank,
        stages=tuple(st for st in stages if st.rank in shown or st.rank == top.rank),
        offloaded_gib=host / GIB,
    )
