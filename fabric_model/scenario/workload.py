"""Sections ``model``, ``parallel`` and ``training``: what is trained and how it is split."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from fabric_model.resources import asset
from fabric_model.scenario.fields import FieldSpec, _f
from fabric_model.scenario.hardware import GPU_COUNT_MAX

__all__ = [
    "FRAMEWORK_RANK_ORDER",
    "MODELS_PATH",
    "MODEL_NAMES",
    "MODEL_SHAPES",
    "RANK_ORDERS",
    "SHAPE_KEYS",
    "ModelSpec",
    "ParallelismPlan",
    "TrainingSpec",
    "rank_order",
]


#: Published model shapes (``model.name``), from ``assets/models.yaml``.
MODELS_PATH = asset("models.yaml")
MODEL_SHAPES: dict[str, dict[str, Any]] = yaml.safe_load(MODELS_PATH.read_text(encoding="utf-8"))
MODEL_NAMES: tuple[str, ...] = tuple(MODEL_SHAPES)


@dataclass(frozen=True)
class ModelSpec:
    """What is trained: a dense or mixture-of-experts transformer."""

    name: str = _f(
        "llama3-70b",
        FieldSpec(
            "choice",
            "published model shape (assets/models.yaml); setting it sets the shape keys, "
            "keys given alongside it win; custom = the shape keys as given",
            choices=("custom", *MODEL_NAMES),
        ),
    )
    kind: str = _f("dense", FieldSpec("choice", "dense or MoE", choices=("dense", "moe")))
    params_b: float | str = _f(
        "auto",
        FieldSpec(
            "float",
            "total parameters; auto = counted from the shape (a number must agree with the "
            "shape within 5%)",
            "billions",
            min=0.01,
            max=100_000.0,
            auto=True,
        ),
    )
    layers: int = _f(80, FieldSpec("int", "transformer layers", "layers", min=1, max=1024))
    hidden: int = _f(8192, FieldSpec("int", "hidden size", "", min=64, max=131_072))
    ffn_hidden: int = _f(
        28672, FieldSpec("int", "feed-forward (per expert) hidden size", "", min=64, max=524_288)
    )
    heads: int = _f(64, FieldSpec("int", "attention heads", "heads", min=1, max=1024))
    kv_heads: int = _f(8, FieldSpec("int", "key/value heads (GQA)", "heads", min=1, max=1024))
    vocab: int = _f(128_256, FieldSpec("int", "vocabulary size", "tokens", min=2, max=2_000_000))
    seq_len: int = _f(8192, FieldSpec("int", "sequence length", "tokens", min=16, max=4_194_304))
    n_experts: int = _f(1, FieldSpec("int", "routed experts per MoE layer", "", min=1, max=4096))
    top_k: int = _f(1, FieldSpec("int", "experts chosen per token", "", min=1, max=64))
    shared_experts: int = _f(0, FieldSpec("int", "always-on shared experts", "", min=0, max=64))
    dense_layers: int = _f(
        0,
        FieldSpec(
            "int", "leading dense (non-MoE) layers of an MoE model", "layers", min=0, max=1024
        ),
    )
    dense_ffn_hidden: int = _f(
        0,
        FieldSpec(
            "int",
            "feed-forward hidden size of those dense layers; 0 = ffn_hidden",
            "",
            min=0,
            max=524_288,
        ),
    )
    head_dim: int = _f(
        0, FieldSpec("int", "attention head size; 0 = hidden / heads", "", min=0, max=1024)
    )
    q_lora_rank: int = _f(
        0, FieldSpec("int", "MLA query compression rank; 0 = none", "", min=0, max=65_536)
    )
    kv_lora_rank: int = _f(
        0,
        FieldSpec(
            "int",
            "MLA key/value compression rank; 0 = grouped-query attention",
            "",
            min=0,
            max=65_536,
        ),
    )
    rope_head_dim: int = _f(
        0,
        FieldSpec("int", "MLA decoupled rotary key size per head; 0 with GQA", "", min=0, max=1024),
    )
    gated_mlp: bool = _f(True, FieldSpec("bool", "gated (SwiGLU, 3 matrices) feed-forward"))
    tied_embeddings: bool = _f(
        False, FieldSpec("bool", "output layer shares the input embedding's weights")
    )
    qk_norm: bool = _f(
        False,
        FieldSpec(
            "bool",
            "RMSNorm on each query and key head before the rotary embedding (Qwen3, OLMo 2, "
            "Gemma 3; Megatron-Core qk_layernorm): the norms keep their inputs for the "
            "backward pass, a copy of the query and key heads per token",
        ),
    )
    max_nodes_per_token: int = _f(
        0,
        FieldSpec(
            "int",
            "node-limited routing: each token's experts sit on at most this many nodes "
            "(NVLink domains) of its expert-parallel group; 0 = no limit (DeepSeek-V3: 4)",
            "nodes",
            min=0,
            max=1024,
        ),
    )
    dropout: bool = _f(
        False,
        FieldSpec(
            "bool",
            "dropout after attention and MLP (GPT-3, Megatron 2021); off in Llama, Mixtral and "
            "DeepSeek-V3 training. Each dropout keeps a 1-byte mask per element",
        ),
    )
    routing_skew: float = _f(
        1.0,
        FieldSpec(
            "float",
            "hot-expert skew of the all-to-all: the GPUs hosting hot experts receive this many "
            "times the mean traffic (1 = uniform)",
            "x mean",
            min=1.0,
            max=64.0,
            step=0.25,
        ),
    )
    hot_fraction: float = _f(
        0.125,
        FieldSpec(
            "float",
            "share of GPUs hosting hot experts (with routing_skew; their load x share <= 1)",
            "",
            min=0.0,
            max=1.0,
            min_exclusive=True,
            step=0.025,
        ),
    )


#: Each framework's rank order (``parallel.order = auto``), innermost first, in
#: Megatron-Core's spelling. Megatron-LM: ``initialize_model_parallel(order="tp-cp-ep-dp-pp")``
#: (megatron/core/parallel_state.py, tag core_v0.15.0) and megatron/training/initialize.py
#: passes it unless ``--use-tp-pp-dp-mapping`` (then ``tp-cp-ep-pp-dp``); torchtitan's device
#: mesh ``["pp", "dp_replicate", "dp_shard", "cp", "tp"]``, outermost first (v0.1.0
#: torchtitan/distributed/parallel_dims.py; with EP, v0.2.0, ``dp_shard_in_ep`` innermost of
#: the data-parallel ranks, just outside ``cp``): the same order, pipeline outermost.
FRAMEWORK_RANK_ORDER: dict[str, str] = {
    "megatron": "tp-cp-ep-dp-pp",
    "torchtitan": "tp-cp-ep-dp-pp",
}
#: The rank orders ``parallel.order`` names (``auto`` = :data:`FRAMEWORK_RANK_ORDER`).
RANK_ORDERS: tuple[str, ...] = ("tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp")


@dataclass(frozen=True)
class ParallelismPlan:
    """How the model is parallelised, and in which order its ranks are numbered."""

    tp: int = _f(8, FieldSpec("int", "tensor-parallel degree", "", min=1, max=1024))
    pp: int = _f(4, FieldSpec("int", "pipeline-parallel stages", "", min=1, max=1024))
    dp: int | str = _f(
        "auto",
        FieldSpec(
            "int",
            "data-parallel degree; auto = n_gpus / (tp x pp x cp)",
            "",
            min=1,
            max=GPU_COUNT_MAX,
            auto=True,
        ),
    )
    ep: int = _f(1, FieldSpec("int", "expert-parallel degree", "", min=1, max=4096))
    etp: int | str = _f(
        "auto",
        FieldSpec(
            "int",
            "expert tensor-parallel degree: how many GPUs split each routed expert, apart "
            "from parallel.tp (Megatron-Core --expert-tensor-parallel-size, MoE parallel "
            "folding: the experts of a pipeline stage run on etp x ep x expert-data-parallel "
            "of its tp x cp x dp GPUs); auto = the framework's default (Megatron-Core: tp; "
            "torchtitan: 1)",
            "",
            min=1,
            max=1024,
            auto=True,
        ),
    )
    cp: int = _f(1, FieldSpec("int", "context-parallel degree", "", min=1, max=1024))
    vpp: int = _f(
        1, FieldSpec("int", "interleaved virtual pipeline stages per rank", "", min=1, max=64)
    )
    zero_stage: int = _f(
        1,
        FieldSpec(
            "choice", "ZeRO stage of the data-parallel optimizer (3 = FSDP)", choices=(0, 1, 2, 3)
        ),
    )
    order: str = _f(
        "auto",
        FieldSpec(
            "choice",
            "rank order of the parallel dimensions, innermost first: which communicators get "
            "consecutive GPUs (one NVLink domain, one leaf) and which cross the spine. "
            "tp-cp-ep-dp-pp = pipeline outermost, each stage's data-parallel ring on "
            "neighbouring nodes (Megatron-Core's default, order='tp-cp-ep-dp-pp' in "
            "parallel_state.py, core_v0.15.0; torchtitan's device mesh pp, dp, cp, tp); "
            "tp-cp-ep-pp-dp = data parallelism outermost, the pipeline's sends on neighbouring "
            "nodes (Megatron-LM --use-tp-pp-dp-mapping; Llama 3's [TP, CP, PP, DP], arXiv "
            "2407.21783 section 3.3.2). auto = the framework's default (training.framework: "
            "megatron and torchtitan both tp-cp-ep-dp-pp)",
            choices=("auto", *RANK_ORDERS),
        ),
    )
    pipeline_layout: str = _f(
        "auto",
        FieldSpec(
            "text",
            "layers per virtual pipeline stage in Megatron-Core's --pipeline-model-parallel-"
            "layout syntax: E embedding, t a transformer layer, L the loss, | between stages, "
            "(...)*n and t*n repeat; pp x vpp stages, stage k on rank k mod pp (e.g. "
            "Et|(tt|)*62tL for Llama 3.1 405B at PP16 VP4: embedding and loss each take a "
            "layer's place). auto = even split, the missing layers off the first and last ranks",
        ),
    )


@dataclass(frozen=True)
class TrainingSpec:
    """Batch, precision-independent efficiency and recomputation."""

    global_batch_tokens: int = _f(
        16_777_216,
        FieldSpec("int", "tokens per optimizer step", "tokens", min=1, max=2**40),
    )
    total_tokens: int = _f(
        15_000_000_000_000,
        FieldSpec(
            "int",
            "token budget of the whole training run, for time to train and cost per run (the "
            "default is Llama 3 70B's 15T; Llama 3 405B trained on 15.6T: Llama 3 paper, "
            "arXiv 2407.21783)",
            "tokens",
            min=1,
            max=10**17,
        ),
    )
    micro_batch: int = _f(1, FieldSpec("int", "sequences per micro-batch", "", min=1, max=4096))
    compute_efficiency: float = _f(
        0.661,
        FieldSpec(
            "float",
            "fraction of the GPU's dense tensor peak that the math kernels reach inside full "
            "waves of GEMM tiles (the one calibration scale; the default is the H100 "
            "calibration on Llama 3 405B's 8K-GPU run, 0.661; A100 calibrates to 0.685 on "
            "Megatron-LM 2021: tests/golden/training_public.yaml)",
            "",
            min=0.0,
            max=1.0,
            min_exclusive=True,
            step=0.01,
        ),
    )
    recompute: str = _f(
        "selective",
        FieldSpec("choice", "activation recomputation", choices=("none", "selective", "full")),
    )
    recompute_modules: str = _f(
        "core_attn",
        FieldSpec(
            "choice",
            "what selective recomputation reruns: core_attn (Megatron's default: the attention "
            "scores), or cheap = core_attn plus the norms, the SwiGLU activation and MLA's "
            "up-projections (DeepSeek-V3's set, section 3.2.3; Megatron-core's recompute_modules "
            "layernorm, moe_act, mla_up_proj): their outputs are rebuilt in the backward pass; "
            "mla_up_proj = core_attn plus MLA's up-projected queries, keys and values only "
            "(Megatron-Core's mla_up_proj, the NeMo DeepSeek-V3 recipes' setting)",
            choices=("core_attn", "cheap", "mla_up_proj"),
        ),
    )
    framework: str = _f(
        "megatron",
        FieldSpec(
            "choice",
            "whose memory conventions: megatron (Megatron-Core + Transformer Engine: fused "
            "vocab-parallel cross entropy, selective = core attention, distributed optimizer "
            "with fp32 main grads) or torchtitan (FSDP2: fp32 sharded parameters and gradients, "
            "the loss on fp32-upcast logits, selective = op-level checkpointing that saves "
            "every other matmul)",
            choices=("megatron", "torchtitan"),
        ),
    )
    precision: str = _f(
        "bf16",
        FieldSpec(
            "choice",
            "GEMM precision: bf16, or fp8 (Transformer Engine / DeepSeek-V3 style: the linear "
            "layers' GEMMs at the GPU's FP8 peak, their saved inputs in 1 byte; attention, "
            "norms and the output layer stay BF16). Needs a GPU with FP8 tensor cores; or "
            "fp4 (NVFP4, NVIDIA arXiv 2509.25149: the linear GEMMs at the GPU's FP4 peak "
            "except the ~16 % of linear layers the recipe keeps in BF16, E2M1 values with an "
            "FP8 scale per 16 elements and an FP32 scale per tensor; attention and the output "
            "layer in BF16). Needs a GPU with FP4 tensor cores (Blackwell)",
            choices=("bf16", "fp8", "fp4"),
        ),
    )
    dp_overlap: float | str = _f(
        "auto",
        FieldSpec(
            "float",
            "fraction of the backward pass that can hide data-parallel communication; auto = "
            "the mechanism: Megatron-Core's gradient buckets (max(40M, 1M x dp) parameters) "
            "each reduced once the backward pass has produced it, one after another, the "
            "last one and the optimizer step exposed, the parameter all-gather waited on by "
            "the forward pass (ZeRO-3/FSDP: per micro-batch); a number overrides it",
            "",
            min=0.0,
            max=1.0,
            step=0.05,
            auto=True,
        ),
    )
    flash_attention: bool = _f(
        True,
        FieldSpec(
            "bool",
            "fused attention kernels (FlashAttention): the s x s score matrix is never "
            "written to memory",
        ),
    )
    tp_overlap: float = _f(
        0.0,
        FieldSpec(
            "float",
            "fraction of tensor-parallel communication hidden behind GEMMs (0 = Megatron's "
            "default, 1 = perfect communication-GEMM overlap)",
            "",
            min=0.0,
            max=1.0,
            step=0.05,
        ),
    )
    ep_dispatch: str = _f(
        "per_expert",
        FieldSpec(
            "choice",
            "how the MoE dispatch sends a token: per_expert (Megatron's all-to-all token "
            "dispatcher: one copy per routed expert) or per_node (DeepEP: one copy per "
            "destination node over the scale-out network, fanned out over NVLink there). With "
            "training.precision = fp8 the forward dispatch travels in FP8",
            choices=("per_expert", "per_node"),
        ),
    )
    ep_overlap: float = _f(
        0.0,
        FieldSpec(
            "float",
            "fraction of the MoE all-to-all hidden behind computation (0 = none; schedules "
            "such as DeepSeek's DualPipe approach 1)",
            "",
            min=0.0,
            max=1.0,
            step=0.05,
        ),
    )
    schedule: str = _f(
        "auto",
        FieldSpec(
            "choice",
            "pipeline schedule: 1f1b (Narayanan et al. 2021, bubble (pp - 1) micro-batch "
            "times), interleaved (parallel.vpp > 1 model chunks per rank; Megatron needs the "
            "micro-batches to be a multiple of pp), dualpipe (DeepSeek-V3's bidirectional "
            "schedule: bubble (pp/2 - 1)(F&B + B - 3W), 2x parameters, pp + 1 micro-batches of "
            "activations; pp and the micro-batches even), zb (ZB-H1 of Qi et al., ICLR 2024: "
            "weight gradients deferred into the bubble, (pp - 1)(F + B - 2W) at 1F1B's memory) "
            "or zb-h2 (ZB-H2: (pp - 1)(F + B - 3W), 2 pp micro-batches of activations); auto "
            "= interleaved when parallel.vpp > 1, else 1f1b",
            choices=("auto", "1f1b", "interleaved", "dualpipe", "zb", "zb-h2"),
        ),
    )
    fp8_param_gather: bool = _f(
        False,
        FieldSpec(
            "bool",
            "keep the linear layers' weights in FP8 only (Megatron-Core fp8_param_gather, "
            "Transformer Engine FP8 primary weights): no BF16 copy and no separate FP8 cache, "
            "the parameter all-gather moves 1 byte per weight; needs training.precision = fp8",
        ),
    )
    grad_reduce_in_fp32: bool = _f(
        True,
        FieldSpec(
            "bool",
            "accumulate and reduce gradients in FP32 (4 bytes per parameter); false = BF16 "
            "gradient buffers and reduction (Megatron-Core grad_reduce_in_fp32 = false, the "
            "NeMo / Megatron-Bridge performance recipes' setting), with an FP32 copy of the "
            "optimizer's gradient shard",
        ),
    )
    optimizer_moments: str = _f(
        "fp32",
        FieldSpec(
            "choice",
            "dtype of Adam's two moments: fp32, or bf16 (Megatron-Core's precision-aware "
            "optimizer, use_precision_aware_optimizer with exp_avg / exp_avg_sq bf16, as "
            "DeepSeek-V3 trained: 2 + 2 bytes instead of 4 + 4; with BF16 weights the FP32 "
            "master keeps only its low 16 bits, store_param_remainders)",
            choices=("fp32", "bf16"),
        ),
    )
    offload_layers: int = _f(
        0,
        FieldSpec(
            "int",
            "transformer layers per pipeline rank whose saved activations go to host memory "
            "in the forward pass and come back for the backward (Megatron-Core "
            "cpu_offloading_num_layers), over NVLink-C2C on Grace or PCIe on x86: the "
            "transfer not hidden behind those layers' compute is added to the step, and the "
            "server's host memory must hold them",
            "layers",
            min=0,
            max=1024,
        ),
    )
    offload_target: str = _f(
        "host",
        FieldSpec(
            "choice",
            "where training.offload_layers puts the activations: host (the server's CPU "
            "memory over its CPU-GPU link: PCIe on x86, NVLink-C2C on Grace), grace (the "
            "Grace CPU's LPDDR5X over NVLink-C2C, 900 GB/s per Grace; only on Grace servers) "
            "or cxl (a CXL 2.0 memory pool of training.cxl_memory_gb per server behind the "
            "host CPU, x16 devices at PCIe 5.0 rate: the what-if of memory pooling)",
            choices=("host", "grace", "cxl"),
        ),
    )
    cxl_memory_gb: float = _f(
        1024.0,
        FieldSpec(
            "float",
            "CXL memory per server when training.offload_target = cxl (256 GB per x16 "
            "expander, as Samsung CMM-D and Micron CZ120 ship; the devices' count sets the "
            "pool's bandwidth)",
            "GB",
            min=256.0,
            max=16384.0,
            step=256.0,
        ),
    )
    precision_aware_optimizer: bool = _f(
        False,
        FieldSpec(
            "bool",
            "Megatron-Core's precision-aware optimizer (use_precision_aware_optimizer, "
            "Transformer Engine's FusedAdam) with FP32 states: over BF16 weights the FP32 "
            "master keeps only its low 16 bits (store_param_remainders) and the optimizer "
            "reads the BF16 gradient buffer as it is (no FP32 copy of the gradient shard); "
            "training.optimizer_moments = bf16 implies it",
        ),
    )
    optimizer_master: str = _f(
        "fp32",
        FieldSpec(
            "choice",
            "dtype of the optimizer's copy of the weights: fp32 (Megatron-Core), or bf16 "
            "(NeMo 1.0's Apex DistributedFusedAdam with optim.dtype = bf16 and fp8_params: "
            "the parameter shard is kept in the optimizer's dtype, 2 bytes instead of 4; "
            "NVIDIA's Nemotron-4 340B benchmark configuration)",
            choices=("fp32", "bf16"),
        ),
    )
    activation_fp8_input_store: bool = _f(
        False,
        FieldSpec(
            "bool",
            "keep the SwiGLU activation's input (the gated MLP's FC1 output, dense, shared "
            "and routed experts) in FP8 for the backward pass, 1 byte instead of 2 "
            "(Megatron-Core activation_func_fp8_input_store; DeepSeek-V3 report 3.3.2: the "
            "SwiGLU inputs of the MoE cached in FP8); needs model.gated_mlp",
        ),
    )
    moe_capacity_factor: float = _f(
        0.0,
        FieldSpec(
            "float",
            "expert capacity as a multiple of the balanced load (Megatron-Core "
            "moe_expert_capacity_factor); 0 = dropless (every token computed, the hottest "
            "expert sets the layer: model.routing_skew); above 0 the tokens beyond capacity "
            "are dropped, so the hottest expert computes at most this factor",
            "",
            min=0.0,
            max=16.0,
            step=0.25,
        ),
    )
    moe_pad_to_capacity: bool = _f(
        False,
        FieldSpec(
            "bool",
            "pad every expert's tokens to its capacity (Megatron-Core "
            "moe_pad_expert_input_to_capacity; GShard-style static shapes): every expert "
            "computes and exchanges capacity x the balanced load; needs "
            "training.moe_capacity_factor > 0",
        ),
    )


#: ModelSpec keys a published shape (``model.name``) sets.
SHAPE_KEYS = (
    "kind",
    "layers",
    "hidden",
    "ffn_hidden",
    "heads",
    "kv_heads",
    "vocab",
    "seq_len",
    "n_experts",
    "top_k",
    "shared_experts",
    "dense_layers",
    "dense_ffn_hidden",
    "head_dim",
    "q_lora_rank",
    "kv_lora_rank",
    "rope_head_dim",
    "gated_mlp",
    "tied_embeddings",
    "qk_norm",
    "max_nodes_per_token",
)


def _expand_model_name(values: dict[str, Any]) -> dict[str, Any]:
    """With ``name`` among ``values``: the named shape's keys, then the given keys.

    Shape keys the named shape leaves out take their defaults (so picking Llama after
    DeepSeek clears the MLA keys), and ``params_b`` goes back to ``auto`` unless given.
    """
    name = values.get("name")
    if name is None or name == "custom":
        return values
    defaults = ModelSpec()
    shape = {k: getattr(defaults, k) for k in SHAPE_KEYS}
    shape.update(MODEL_SHAPES[name]["shape"])
    shape["params_b"] = "auto"
    return {**shape, **values}


def _shape_name(model: ModelSpec) -> str:
    """Return the published shape ``model`` has, or ``custom``."""
    mine = {k: getattr(model, k) for k in SHAPE_KEYS}
    defaults = ModelSpec.__dataclass_fields__
    for name, entry in MODEL_SHAPES.items():
        shape = {k: defaults[k].default for k in SHAPE_KEYS}
        shape.update(entry["shape"])
        if shape == mine:
            return name
    return "custom"


def rank_order(parallel: ParallelismPlan, training: TrainingSpec) -> str:
    """Return the rank order a plan runs in: ``parallel.order``, or its framework's default.

    >>> rank_order(ParallelismPlan(), TrainingSpec())
    'tp-cp-ep-dp-pp'
    >>> rank_order(ParallelismPlan(order="tp-cp-ep-pp-dp"), TrainingSpec())
    'tp-cp-ep-pp-dp'
    """
    if parallel.order != "auto":
        return parallel.order
    return FRAMEWORK_RANK_ORDER[training.framework]
