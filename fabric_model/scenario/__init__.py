"""Scenario: what is trained, how it is parallelised, what it runs on, and what-ifs.

One frozen dataclass per section. The bounds of every key are written once, as field
metadata (:class:`FieldSpec`): validation, coercion of strings from the URL or ``--set``,
the CLI's error messages and the dashboard's slider ranges all read that one table.

Every key has a default, so ``{}`` is a valid scenario (the default preset: 1,024 H100 GPUs
on a rail-optimized InfiniBand NDR fat-tree).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fabric_model.catalog import load_catalog
from fabric_model.errors import ScenarioError, ScenarioFileError, shown_value
from fabric_model.families import FAMILIES
from fabric_model.resources import asset, load_yaml
from fabric_model.scenario.shapes import shape_counts
from fabric_model.transports import transport_names

__all__ = [
    "MAX_SCENARIO_BYTES",
    "MODEL_NAMES",
    "MODEL_SHAPES",
    "NCCL_ALGOS",
    "NCCL_VERSIONS",
    "SECTIONS",
    "SHAPE_KEYS",
    "VENDORS",
    "ClusterSpec",
    "CostSpec",
    "FabricSpec",
    "FacilitySpec",
    "FieldSpec",
    "HybridSpec",
    "ManagementSpec",
    "ModelSpec",
    "NcclSpec",
    "ParallelismPlan",
    "ReliabilitySpec",
    "Scenario",
    "StorageSpec",
    "TrainingSpec",
    "WhatIfSpec",
    "apply_overrides",
    "dump_scenario",
    "field_spec",
    "iter_field_specs",
    "load_scenario",
    "parse_assignment",
    "scenario_from_text",
]

#: Largest scenario document accepted (file, upload or URL), bytes.
MAX_SCENARIO_BYTES = 256 * 1024


#: ``fabric.vendor`` values: the shipped catalog's vendors (the vendor registry: a new vendor
#: is a data entry in ``assets/catalog.yaml``).
VENDORS: tuple[str, ...] = tuple(load_catalog().vendors)


@dataclass(frozen=True)
class FieldSpec:
    """Declared type, bounds, unit and help of one scenario key.

    ``kind`` is one of ``int``, ``float``, ``bool``, ``choice``, ``text``. ``auto`` marks keys
    that also accept the word ``"auto"``; ``optional`` keys accept ``null`` (meaning "use the
    catalog value"). ``min_exclusive`` makes ``min`` an open bound (``0 < x``).
    """

    kind: str
    help: str
    unit: str = ""
    min: float | None = None
    max: float | None = None
    min_exclusive: bool = False
    choices: tuple[Any, ...] = ()
    auto: bool = False
    optional: bool = False
    step: float | None = None

    def allowed(self) -> str:
        """Describe the allowed values in words, for error messages and help text."""
        extra = []
        if self.auto:
            extra.append("'auto'")
        if self.optional:
            extra.append("null (catalog value)")
        if self.kind == "choice":
            return "one of " + ", ".join(str(c) for c in (*extra_choices(self), *self.choices))
        if self.kind == "bool":
            base = "true or false"
        elif self.kind == "text":
            base = "a text"
        else:
            noun = "an integer" if self.kind == "int" else "a number"
            lo = "" if self.min is None else _fmt(self.min)
            hi = "" if self.max is None else _fmt(self.max)
            if self.min is not None and self.max is not None:
                op = "greater than" if self.min_exclusive else "from"
                base = (
                    f"{noun} {op} {lo} and at most {hi}"
                    if self.min_exclusive
                    else f"{noun} {op} {lo} to {hi}"
                )
            elif self.min is not None:
                base = f"{noun} {'>' if self.min_exclusive else '>='} {lo}"
            else:
                base = noun
        if self.unit and self.kind in ("int", "float"):
            base += f" ({self.unit})"
        return base + "".join(f", or {e}" for e in extra)


def extra_choices(spec: FieldSpec) -> tuple[str, ...]:
    """Return the non-numeric extras a choice key accepts (``auto``)."""
    return ("auto",) if spec.auto else ()


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _f(default: Any, spec: FieldSpec) -> Any:
    return field(default=default, metadata={"spec": spec})


# --------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------

GPU_COUNT_MAX = 1_048_576

#: Published model shapes (``model.name``), from ``assets/models.yaml``.
MODELS_PATH = asset("models.yaml")
MODEL_SHAPES: dict[str, dict[str, Any]] = yaml.safe_load(MODELS_PATH.read_text(encoding="utf-8"))
MODEL_NAMES: tuple[str, ...] = tuple(MODEL_SHAPES)


@dataclass(frozen=True)
class ClusterSpec:
    """What the job runs on: GPUs, servers and the scale-up (NVLink) domain."""

    n_gpus: int = _f(
        1024,
        FieldSpec("int", "GPUs in the job/cluster modelled", "GPUs", min=2, max=GPU_COUNT_MAX),
    )
    gpu: str = _f("h100", FieldSpec("text", "GPU model (catalog key, e.g. h100, b200, gb200)"))
    gpus_per_node: int = _f(
        8, FieldSpec("int", "GPUs per server (per compute tray for GB200)", "GPUs", min=1, max=16)
    )
    nvlink_domain: int = _f(
        8,
        FieldSpec(
            "int",
            "GPUs sharing one NVLink switch domain (8 for HGX, 72 for GB200 NVL72)",
            "GPUs",
            min=1,
            max=576,
        ),
    )
    nics_per_gpu: int = _f(
        1, FieldSpec("int", "scale-out NICs (rails) per GPU", "NICs", min=1, max=4)
    )


@dataclass(frozen=True)
class FabricSpec:
    """The scale-out network: vendor, speed, topology, routing and cabling."""

    vendor: str = _f(
        "infiniband",
        FieldSpec(
            "choice",
            "scale-out fabric: InfiniBand, NVIDIA Spectrum-X Ethernet, or plain RoCE Ethernet",
            choices=VENDORS,
        ),
    )
    link_gbps: int = _f(
        400,
        FieldSpec("choice", "per-NIC line rate", "Gb/s", choices=(100, 200, 400, 800, 1600)),
    )
    planes: int = _f(
        1,
        FieldSpec(
            "choice",
            "independent network planes: each NIC's line rate splits into this many links of "
            "fabric.link_gbps / planes, one per plane (a fabric of the chosen family each); "
            "traffic sprays over all planes",
            "planes",
            choices=(1, 2, 4, 8),
        ),
    )
    topology: str = _f(
        "fat-tree",
        FieldSpec(
            "choice",
            "topology family",
            choices=tuple(FAMILIES),  # the family registry (fabric_model.families)
        ),
    )
    rail_optimized: bool = _f(
        True,
        FieldSpec(
            "bool",
            "rail-optimized leaf wiring: NIC i of every server goes to the leaf of rail i",
        ),
    )
    tiers: int | str = _f(
        "auto",
        FieldSpec(
            "choice",
            "switch tiers of a fat-tree; auto picks the fewest that fit",
            choices=(1, 2, 3, 4),
            auto=True,
        ),
    )
    oversubscription: float = _f(
        1.0,
        FieldSpec(
            "float",
            "leaf downlink:uplink bandwidth ratio (1 = non-blocking)",
            ":1",
            min=1.0,
            max=16.0,
            step=0.5,
        ),
    )
    spine_oversubscription: float = _f(
        1.0,
        FieldSpec(
            "float",
            "spine (aggregation) downlink:uplink ratio toward the core of a 3-tier fat-tree",
            ":1",
            min=1.0,
            max=16.0,
            step=0.5,
        ),
    )
    routing: str = _f(
        "auto",
        FieldSpec(
            "choice",
            "routing policy; auto = the vendor's default (adaptive for InfiniBand and "
            "Spectrum-X, static per-flow ECMP hashing for RoCE)",
            choices=("adaptive", "spray", "ecmp", "dmodk", "minimal", "valiant", "ugal", "dor"),
            auto=True,
        ),
    )
    qps_per_connection: int = _f(
        1,
        FieldSpec(
            "int",
            "flows (queue pairs) per peer connection, hashed independently under ECMP",
            "QPs",
            min=1,
            max=64,
        ),
    )
    transport: str = _f(
        "auto",
        FieldSpec(
            "choice",
            "transport and congestion control (assets/transports.yaml): ib-credit "
            "(InfiniBand credits), roce-dcqcn (PFC + DCQCN), roce-pfc (PFC, collective-level "
            "admission, no DCQCN), spectrum-x (PFC + telemetry CC), uec (lossy, receiver "
            "credits, trimming), lossy-spray (lossy, sender CC, trimming); auto = the "
            "vendor's. Sets how an incast (a port receiving faster than its rate) runs",
            choices=transport_names(),
            auto=True,
        ),
    )
    sharp: bool = _f(
        False,
        FieldSpec("bool", "in-network reduction (SHARP) on the scale-out fabric (InfiniBand)"),
    )
    nvls: bool = _f(
        True,
        FieldSpec(
            "bool",
            "NVLink SHARP (NVLS, NVLS-Tree) available to NCCL; false = "
            "NCCL_NVLS_ENABLE=0, as many published multi-rack NVL72 runs set it",
        ),
    )
    switch: str = _f(
        "auto", FieldSpec("text", "switch model (catalog key); auto = the vendor's default")
    )
    nic: str = _f("auto", FieldSpec("text", "NIC model (catalog key); auto = the vendor's default"))
    nic_leaf_m: float = _f(
        20.0,
        FieldSpec(
            "float",
            "cable length NIC to leaf (<= 3 m allows copper at up to 400G); with "
            "facility.cable_lengths = floorplan the floor plan's run unless set away from 20",
            "m",
            min=0.5,
            max=2000.0,
        ),
    )
    leaf_spine_m: float = _f(
        50.0,
        FieldSpec(
            "float",
            "cable length leaf to spine (the floor plan's run unless set away from 50)",
            "m",
            min=0.5,
            max=2000.0,
        ),
    )
    spine_core_m: float = _f(
        150.0,
        FieldSpec(
            "float",
            "cable length spine to core, or of a dragonfly+ global link (the floor plan's run "
            "unless set away from 150)",
            "m",
            min=0.5,
            max=2000.0,
        ),
    )
    direct_link_m: float = _f(
        10.0,
        FieldSpec(
            "float",
            "cable length between neighbouring nodes of a torus or hypercube (the floor plan "
            "leaves switchless families at this key)",
            "m",
            min=0.5,
            max=2000.0,
        ),
    )
    optics: str = _f(
        "auto",
        FieldSpec(
            "choice",
            "switch-port optics: pluggable transceivers, or the switch's co-packaged-optics "
            "variant (cpo: optical engines and external lasers per port, catalog cpo_port_w / "
            "cpo_port_usd); auto = cpo for a switch sold only with CPO, else pluggable",
            choices=("pluggable", "cpo"),
            auto=True,
        ),
    )


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


@dataclass(frozen=True)
class ParallelismPlan:
    """How the model is parallelised (Megatron order: TP, CP, EP, PP inside, DP outside)."""

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


@dataclass(frozen=True)
class WhatIfSpec:
    """Degradations and placements applied to the fabric."""

    degraded_link_factor: float = _f(
        1.0,
        FieldSpec(
            "float",
            "one link runs at this fraction of its rate (1 = healthy)",
            "",
            min=0.0,
            max=1.0,
            min_exclusive=True,
            step=0.05,
        ),
    )
    degraded_link: str = _f(
        "nic",
        FieldSpec(
            "choice",
            "which link is degraded",
            choices=("nic", "leaf-spine", "spine-core"),
        ),
    )
    degraded_position: str = _f(
        "interior",
        FieldSpec(
            "choice",
            "where the degraded NIC sits: interior = GPU 0 of the middle NVLink domain (an "
            "interior node of NCCL's first tree: the typical and the worst position), root = "
            "rank 0 (root of NCCL's first tree, the least loaded NIC)",
            choices=("interior", "root"),
        ),
    )
    failed_planes: int = _f(
        0,
        FieldSpec(
            "int",
            "network planes that are down (fabric.planes >= 2); the job's traffic sprays over "
            "the others",
            "planes",
            min=0,
            max=7,
        ),
    )
    degraded_plane_factor: float = _f(
        1.0,
        FieldSpec(
            "float",
            "one healthy plane runs at this fraction of its rate (1 = healthy; needs "
            "fabric.planes >= 2)",
            "",
            min=0.0,
            max=1.0,
            min_exclusive=True,
            step=0.05,
        ),
    )
    failed_switch: str = _f(
        "none",
        FieldSpec(
            "choice",
            "one switch of one plane is down (needs fabric.planes >= 2): the leaf of the "
            "degraded position's NIC, or the first spine",
            choices=("none", "leaf", "spine"),
        ),
    )
    placement: str = _f(
        "contiguous",
        FieldSpec("choice", "where the job's GPUs sit", choices=("contiguous", "scattered")),
    )
    gdr: str = _f(
        "on",
        FieldSpec(
            "choice",
            "GPUDirect RDMA: off = host-staged (NCCL_NET_GDR_LEVEL below the path, or "
            "nvidia-peermem not loaded): every byte crosses PCIe to host memory and back, "
            "and host DRAM carries it four times",
            choices=("on", "off"),
        ),
    )
    pfc: str = _f(
        "on",
        FieldSpec(
            "choice",
            "priority flow control on a PFC transport (RoCE, Spectrum-X): off = a congested "
            "port drops and RoCE's go-back-N resends; refused on InfiniBand and lossy "
            "transports",
            choices=("on", "off"),
        ),
    )
    mtu: int = _f(
        4096,
        FieldSpec(
            "choice",
            "RDMA path MTU (payload per packet): 1024 is what RoCE gets when the interface "
            "MTU is left at 1500; per-packet headers cost more at smaller MTUs (RoCE's "
            "largest is 4096, whatever the Ethernet MTU)",
            "bytes",
            choices=(1024, 2048, 4096),
        ),
    )
    nic_affinity: str = _f(
        "local",
        FieldSpec(
            "choice",
            "which NIC each GPU uses: local = its own PCIe switch's; cross-socket = a NIC "
            "behind the other CPU (a wrong NCCL_IB_HCA or topology file), so every byte "
            "crosses the inter-socket link (UPI, xGMI)",
            choices=("local", "cross-socket"),
        ),
    )
    acs: str = _f(
        "off",
        FieldSpec(
            "choice",
            "PCIe Access Control Services on the GPU's PCIe switch: on = GPU-NIC "
            "peer-to-peer goes up to the root complex and back down the switch's uplink",
            choices=("off", "on"),
        ),
    )
    flapping_link_period_s: float = _f(
        0.0,
        FieldSpec(
            "float",
            "one NIC link retrains every this many seconds (0 = never): the job stalls "
            "each time until NCCL's QPs retransmit (4.096 us x 2^NCCL_IB_TIMEOUT)",
            "s",
            min=0.0,
            max=86400.0,
            step=10.0,
        ),
    )


@dataclass(frozen=True)
class CostSpec:
    """Price overrides (null = catalog value) and the TCO assumptions."""

    switch_usd: float | None = _f(
        None, FieldSpec("float", "price of one switch", "USD", min=0.0, max=1e7, optional=True)
    )
    nic_usd: float | None = _f(
        None, FieldSpec("float", "price of one NIC", "USD", min=0.0, max=1e6, optional=True)
    )
    optic_switch_usd: float | None = _f(
        None,
        FieldSpec(
            "float", "price of one switch-side transceiver", "USD", min=0.0, max=1e6, optional=True
        ),
    )
    optic_nic_usd: float | None = _f(
        None,
        FieldSpec(
            "float", "price of one NIC-side transceiver", "USD", min=0.0, max=1e6, optional=True
        ),
    )
    copper_cable_usd: float | None = _f(
        None,
        FieldSpec("float", "price of one copper cable", "USD", min=0.0, max=1e5, optional=True),
    )
    fiber_usd: float | None = _f(
        None,
        FieldSpec(
            "float",
            "price of the fiber for one optical link",
            "USD",
            min=0.0,
            max=1e5,
            optional=True,
        ),
    )
    server_usd: float | None = _f(
        None,
        FieldSpec(
            "float",
            "price of one GPU server without scale-out NICs",
            "USD",
            min=0.0,
            max=1e8,
            optional=True,
        ),
    )
    electricity_usd_per_kwh: float = _f(
        0.08,
        FieldSpec("float", "electricity price", "USD/kWh", min=0.0, max=2.0, step=0.01),
    )
    pue: float = _f(
        1.25, FieldSpec("float", "power usage effectiveness", "", min=1.0, max=3.0, step=0.05)
    )
    years: float = _f(5.0, FieldSpec("float", "TCO horizon", "years", min=0.5, max=15.0, step=0.5))


#: Failure rates and checkpoint defaults with their sources (``assets/reliability.yaml``).
RELIABILITY_DATA: dict[str, Any] = yaml.safe_load(
    asset("reliability.yaml").read_text(encoding="utf-8")
)


def _rate(component: str) -> float:
    return float(RELIABILITY_DATA["rates_per_year"][component]["value"])


def _rate_spec(what: str, source: str, unit: str = "") -> FieldSpec:
    return FieldSpec(
        "float",
        f"job-interrupting failures per {what} per year ({source}; "
        "assets/reliability.yaml gives the derivation)",
        unit or f"per {what}-year",
        min=0.0,
        max=100.0,
        step=0.001,
    )


_LLAMA3 = "Llama 3 paper Table 5: 419 interruptions in 54 days on 16,384 H100"


@dataclass(frozen=True)
class ReliabilitySpec:
    """Failures per component class, checkpoints and restarts (time to train, cost per run)."""

    gpu_failures_per_year: float = _f(_rate("gpu"), _rate_spec("GPU", _LLAMA3))
    server_failures_per_year: float = _f(
        _rate("server"), _rate_spec("server (host parts but the NIC)", _LLAMA3, "per server-year")
    )
    nic_failures_per_year: float = _f(_rate("nic"), _rate_spec("NIC", _LLAMA3))
    switch_failures_per_year: float = _f(
        _rate("switch"),
        _rate_spec("switch", "Singh et al. 2021: 2% of Microsoft's switches fail in 3 months"),
    )
    optic_failures_per_year: float = _f(
        _rate("optic"),
        _rate_spec(
            "transceiver",
            "thin data: Llama 3's 35 switch/cable interruptions less the switches' share, "
            "spread over a 16K-GPU fabric's transceivers and cables",
        ),
    )
    cable_failures_per_year: float = _f(
        _rate("cable"), _rate_spec("cable", "the same calibration as the transceivers")
    )
    software_failures_per_year: float = _f(
        _rate("software"),
        _rate_spec("GPU from software and NCCL hangs", _LLAMA3, "per GPU-year"),
    )
    checkpoint_gib: float | str = _f(
        "auto",
        FieldSpec(
            "float",
            "checkpoint size; auto = parameters x (bf16 weights + fp32 optimizer state), "
            "14 bytes per parameter",
            "GiB",
            min=0.0,
            max=1e7,
            min_exclusive=True,
            auto=True,
        ),
    )
    checkpoint_write_GBps_per_gpu: float = _f(
        float(RELIABILITY_DATA["checkpoint"]["write_GBps_per_gpu"]["value"]),
        FieldSpec(
            "float",
            "aggregate checkpoint write bandwidth per GPU of the job (the default: Llama 3's "
            "2 TB/s of storage for 16,384 GPUs)",
            "GB/s per GPU",
            min=0.0,
            max=100.0,
            min_exclusive=True,
            step=0.01,
        ),
    )
    restart_s: float = _f(
        float(RELIABILITY_DATA["checkpoint"]["restart_s"]["value"]),
        FieldSpec(
            "float",
            "time from a failure to training again: detect, reschedule, reload the checkpoint "
            "(an assumption: no public figure)",
            "s",
            min=0.0,
            max=86_400.0,
            step=30.0,
        ),
    )
    checkpoint_interval_s: float | str = _f(
        "auto",
        FieldSpec(
            "float",
            "training time between checkpoints; auto = the Young/Daly optimum "
            "sqrt(2 x write time x MTBF)",
            "s",
            min=0.0,
            max=1e7,
            min_exclusive=True,
            auto=True,
        ),
    )
    repair_h: float = _f(
        float(RELIABILITY_DATA["checkpoint"]["repair_h"]["value"]),
        FieldSpec(
            "float",
            "time a failed node or leaf switch stays out of the pool before it returns "
            "(schedule; an assumption: no public per-repair figure)",
            "h",
            min=0.0,
            max=8760.0,
            min_exclusive=True,
            step=1.0,
        ),
    )


#: Rack, floor and cooling data with their sources (``assets/facility.yaml``).
FACILITY_DATA: dict[str, Any] = yaml.safe_load(asset("facility.yaml").read_text(encoding="utf-8"))


@dataclass(frozen=True)
class FacilitySpec:
    """Racks, rows and cooling: the floor plan the cable lengths and power density come from."""

    cable_lengths: str = _f(
        "floorplan",
        FieldSpec(
            "choice",
            "where the BOM's cable lengths come from: floorplan = each link class's longest run "
            "on the floor plan (a fabric.*_m key set away from its default still wins for its "
            "class), keys = the fabric.nic_leaf_m, leaf_spine_m, spine_core_m and direct_link_m "
            "keys as given",
            choices=("floorplan", "keys"),
        ),
    )
    servers_per_rack: int | str = _f(
        "auto",
        FieldSpec(
            "int",
            "GPU servers (compute trays) per rack; auto = the server type's usual rack "
            "(4 DGX H100 at 40.8 kW, 18 trays of an NVL72 rack: assets/facility.yaml)",
            "servers",
            min=1,
            max=72,
            auto=True,
        ),
    )
    racks_per_row: int | str = _f(
        "auto",
        FieldSpec(
            "int",
            "compute racks per row; auto = whole leaf groups per row in a roughly square hall, "
            "at most 24 racks per row",
            "racks",
            min=1,
            max=200,
            auto=True,
        ),
    )
    hall_max_m2: float = _f(
        float(FACILITY_DATA["hall"]["max_m2"]["value"]),
        FieldSpec(
            "float",
            "largest floor of one data hall; a layout past it takes several halls side by side, "
            "and the fabric's top link class crosses between them (85,000 sq ft: the upper end "
            "of large data halls, assets/facility.yaml)",
            "m2",
            min=100.0,
            max=100000.0,
            step=100.0,
        ),
    )
    cooling: str = _f(
        "auto",
        FieldSpec(
            "choice",
            "how the racks are cooled; auto = the server type's own (air for HGX/DGX, "
            "direct-to-chip liquid for NVL72 racks)",
            choices=("air", "liquid"),
            auto=True,
        ),
    )
    air_limit_kw_per_rack: float = _f(
        float(FACILITY_DATA["cooling"]["air_limit_kw_per_rack"]["value"]),
        FieldSpec(
            "float",
            "most power an air-cooled rack takes (with containment and rear-door heat "
            "exchangers, ~40-60 kW; typical colocation air is ~10-15 kW: assets/facility.yaml); "
            "racks above it on air get a warning",
            "kW",
            min=1.0,
            max=1000.0,
            step=1.0,
        ),
    )


#: Families a hybrid partition may take: switched fabrics with a top tier to uplink.
HYBRID_PARTITION_FAMILIES = ("fat-tree", "rail-only", "dragonfly-plus")


@dataclass(frozen=True)
class HybridSpec:
    """Two partitions joined by a shared core tier (``fabric.topology = hybrid``).

    Partition A holds GPUs ``0 .. a_gpus - 1``, partition B the rest; each is a fabric of its
    own family and vendor, and the top-tier switches of both uplink into one tier of shared
    core switches (:mod:`fabric_model.topology.hybrid`).
    """

    a_topology: str = _f(
        "fat-tree",
        FieldSpec(
            "choice",
            "hybrid: topology family of partition A (GPUs 0 .. hybrid.a_gpus - 1)",
            choices=HYBRID_PARTITION_FAMILIES,
        ),
    )
    a_gpus: int | str = _f(
        "auto",
        FieldSpec(
            "int",
            "hybrid: GPUs in partition A; auto = half of cluster.n_gpus (rounded to whole "
            "NVLink domains); with hybrid.b_gpus they must add up to cluster.n_gpus",
            "GPUs",
            min=1,
            max=GPU_COUNT_MAX,
            auto=True,
        ),
    )
    a_vendor: str = _f(
        "auto",
        FieldSpec(
            "choice",
            "hybrid: vendor of partition A; auto = fabric.vendor (every vendor of a hybrid "
            "must share one link layer: InfiniBand or Ethernet)",
            choices=VENDORS,
            auto=True,
        ),
    )
    b_topology: str = _f(
        "dragonfly-plus",
        FieldSpec(
            "choice",
            "hybrid: topology family of partition B (the GPUs after partition A's)",
            choices=HYBRID_PARTITION_FAMILIES,
        ),
    )
    b_gpus: int | str = _f(
        "auto",
        FieldSpec(
            "int",
            "hybrid: GPUs in partition B; auto = cluster.n_gpus - partition A's GPUs",
            "GPUs",
            min=1,
            max=GPU_COUNT_MAX,
            auto=True,
        ),
    )
    b_vendor: str = _f(
        "auto",
        FieldSpec(
            "choice",
            "hybrid: vendor of partition B; auto = fabric.vendor",
            choices=VENDORS,
            auto=True,
        ),
    )
    shared_oversubscription: float = _f(
        7.0,
        FieldSpec(
            "float",
            "hybrid: a partition's injection bandwidth (its NIC ports at line rate) : its "
            "uplink bandwidth into the shared core tier; 1 = full bandwidth between the "
            "partitions; default 7, the cross-zone aggregation layer of Meta's RoCE training "
            "clusters (Gangidi et al., SIGCOMM 2024; Llama 3 paper sec. 3.3.1)",
            ":1",
            min=1.0,
            max=64.0,
        ),
    )
    job: str = _f(
        "a",
        FieldSpec(
            "choice",
            "hybrid: where the modelled job runs: a = partition A's GPUs only, b = partition "
            "B's only, both = every GPU (its traffic between the partitions crosses the "
            "shared core tier)",
            choices=("a", "b", "both"),
        ),
    )


@dataclass(frozen=True)
class StorageSpec:
    """The storage (North/South) Ethernet network to a parallel filesystem."""

    enabled: bool = _f(
        True,
        FieldSpec(
            "bool",
            "price a storage network (each server's storage ports into a Spectrum-4 Ethernet "
            "leaf-spine, as DGX SuperPOD and the HGX reference architectures do); shown apart "
            "from the compute fabric",
        ),
    )
    link_gbps: int = _f(
        int(FACILITY_DATA["storage"]["link_gbps"]["value"]),
        FieldSpec(
            "choice",
            "line rate of one storage port (the reference architectures: 2 x 200 GbE per node)",
            "Gb/s",
            choices=(100, 200, 400),
        ),
    )
    nics_per_node: int = _f(
        int(FACILITY_DATA["storage"]["ports_per_server"]["value"]),
        FieldSpec(
            "int", "storage ports per server (each to a different leaf)", "ports", min=1, max=8
        ),
    )


@dataclass(frozen=True)
class ManagementSpec:
    """The out-of-band management network (BMCs and switch management ports)."""

    enabled: bool = _f(
        True,
        FieldSpec(
            "bool",
            "price the out-of-band management network (one BMC port per server and one per "
            "switch into 48-port access switches, uplinked to an aggregation pair)",
        ),
    )
    link_gbps: int = _f(
        1,
        FieldSpec(
            "choice",
            "management port speed (1 GbE BMC ports as in DGX SuperPOD; 25 GbE access)",
            "Gb/s",
            choices=(1, 25),
        ),
    )


#: ``nccl.version`` values (``assets/nccl_versions.yaml``, oldest first; the last is the default).
NCCL_VERSIONS_PATH = asset("nccl_versions.yaml")
NCCL_VERSIONS: tuple[str, ...] = tuple(
    yaml.safe_load(NCCL_VERSIONS_PATH.read_text(encoding="utf-8"))["versions"]
)
#: ``nccl.algo`` values: NCCL_ALGO's names (lower case, as NCCL parses them), or auto.
NCCL_ALGOS: tuple[str, ...] = (
    "ring",
    "tree",
    "nvls",
    "nvlstree",
    "collnetdirect",
    "collnetchain",
    "pat",
)


@dataclass(frozen=True)
class NcclSpec:
    """The NCCL release the collective model follows, and NCCL's own knobs as what-ifs."""

    version: str = _f(
        NCCL_VERSIONS[-1],
        FieldSpec(
            "choice",
            "NCCL release whose algorithms, kernels and CTA cap the model follows "
            "(assets/nccl_versions.yaml: what each release changes, with its release note)",
            choices=NCCL_VERSIONS,
        ),
    )
    algo: str = _f(
        "auto",
        FieldSpec(
            "choice",
            "NCCL_ALGO: force NCCL's algorithm for all-reduce, all-gather and reduce-scatter "
            "(all-to-all is point-to-point and ignores it); auto = NCCL's tuner",
            choices=NCCL_ALGOS,
            auto=True,
        ),
    )
    proto: str = _f(
        "auto",
        FieldSpec(
            "choice",
            "NCCL_PROTO: force NCCL's protocol (all-to-all ignores it); auto = NCCL's tuner",
            choices=("LL", "LL128", "Simple"),
            auto=True,
        ),
    )
    max_channels: int | str = _f(
        "auto",
        FieldSpec(
            "int",
            "NCCL_MAX_NCHANNELS (and NCCL_MIN_NCHANNELS): at most this many channels; "
            "fewer channels use fewer NICs per NVLink domain and lower NCCL's per-channel "
            "caps; auto = NCCL's own count",
            "channels",
            min=1,
            max=int(load_yaml(asset("nccl_constants.yaml"))["max_channels"]),
            auto=True,
        ),
    )
    registered_buffers: bool = _f(
        False,
        FieldSpec(
            "bool",
            "user buffers registered with NCCL (ncclCommRegister / ncclCommWindowRegister "
            "with NCCL_WIN_COLL_SYMMETRIC): from 2.27 a job inside one NVLink domain runs "
            "NCCL's symmetric-memory kernels; the tuner CSV's regBuff column",
        ),
    )


#: Section name -> dataclass, in document order.
SECTIONS: dict[str, type] = {
    "cluster": ClusterSpec,
    "fabric": FabricSpec,
    "model": ModelSpec,
    "parallel": ParallelismPlan,
    "training": TrainingSpec,
    "what_if": WhatIfSpec,
    "costs": CostSpec,
    "reliability": ReliabilitySpec,
    "facility": FacilitySpec,
    "storage": StorageSpec,
    "management": ManagementSpec,
    "hybrid": HybridSpec,
    "nccl": NcclSpec,
}


def iter_field_specs() -> Iterator[tuple[str, FieldSpec, Any]]:
    """Yield ``(dotted_key, spec, default)`` for every scenario key."""
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            yield f"{section}.{f.name}", f.metadata["spec"], f.default


_SPECS: dict[str, tuple[FieldSpec, Any]] = {k: (s, d) for k, s, d in iter_field_specs()}


def field_spec(key: str) -> FieldSpec:
    """Return the :class:`FieldSpec` of a dotted key (``"fabric.link_gbps"``)."""
    try:
        return _SPECS[key][0]
    except KeyError:
        raise ScenarioError(key, ScenarioError.NO_VALUE, _unknown_key_hint(key)) from None


def _unknown_key_hint(key: str) -> str:
    close = difflib.get_close_matches(key, list(_SPECS), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    sections = ", ".join(SECTIONS)
    return f"unknown key (sections: {sections}; see `python -m fabric_model keys`){hint}"


# --------------------------------------------------------------------------------------
# Coercion and validation
# --------------------------------------------------------------------------------------

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def coerce_value(key: str, raw: Any) -> Any:
    """Convert a raw value (from YAML, JSON, a URL or ``--set``) to the key's type and check it.

    Raises
    ------
    ScenarioError
        Naming the key, the value and what is allowed. Values are never clamped.
    """
    spec = field_spec(key)
    bad = ScenarioError(key, raw, "must be " + spec.allowed())
    if isinstance(raw, str):
        text = raw.strip()
        if spec.auto and text.lower() == "auto":
            return "auto"
        if spec.optional and text.lower() in ("", "null", "none", "catalog"):
            return None
    else:
        text = None
        if spec.optional and raw is None:
            return None

    if spec.kind == "bool":
        if isinstance(raw, bool):
            return raw
        if text is not None and text.lower() in _TRUE | _FALSE:
            return text.lower() in _TRUE
        raise bad
    if spec.kind == "text":
        if not isinstance(raw, str) or not text:
            raise bad
        return text
    if spec.kind == "choice":
        if isinstance(raw, bool) and {"on", "off"} <= set(spec.choices):
            return "on" if raw else "off"  # YAML 1.1 reads on/off as booleans
        for choice in spec.choices:
            if isinstance(choice, int):
                if _as_int(raw, text) == choice:
                    return choice
            elif text is not None and text == choice:
                return choice
            elif isinstance(raw, float) and _numeric_text(choice) and float(choice) == raw:
                return choice  # YAML reads nccl.version: 2.30 as the float 2.3
        raise bad
    value: float | int
    if spec.kind == "int":
        as_int = _as_int(raw, text)
        if as_int is None:
            raise bad
        value = as_int
    else:  # float
        if isinstance(raw, bool):
            raise bad
        try:
            value = float(text if text is not None else raw)
        except (TypeError, ValueError):
            raise bad from None
        if value != value or value in (float("inf"), float("-inf")):
            raise bad
    if spec.min is not None and (value <= spec.min if spec.min_exclusive else value < spec.min):
        raise bad
    if spec.max is not None and value > spec.max:
        raise bad
    return value


def _numeric_text(text: str) -> bool:
    return text.replace(".", "", 1).isdigit()


def _as_int(raw: Any, text: str | None) -> int | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float):
        return int(raw) if raw.is_integer() else None
    if text is not None:
        try:
            return int(text.replace("_", ""))
        except ValueError:
            try:
                as_float = float(text)
            except ValueError:
                return None
            return int(as_float) if as_float.is_integer() else None
    return None


def _build_section(section: str, data: Any) -> Any:
    cls = SECTIONS[section]
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ScenarioError(section, data, "must be a mapping of keys to values")
    names = {f.name for f in dataclasses.fields(cls)}
    values = {}
    for name, raw in data.items():
        key = f"{section}.{name}"
        if name not in names:
            raise ScenarioError(key, ScenarioError.NO_VALUE, _unknown_key_hint(key))
        values[name] = coerce_value(key, raw)
    if section == "model":
        values = _expand_model_name(values)
    return cls(**values)


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


@dataclass(frozen=True)
class Scenario:
    """A whole what-if: cluster, fabric, model, parallelism, training, what-ifs and costs.

    Build with :meth:`from_dict` (validates every key) or :func:`apply_overrides`.
    """

    name: str = "custom"
    description: str = ""
    cluster: ClusterSpec = field(default_factory=ClusterSpec)
    fabric: FabricSpec = field(default_factory=FabricSpec)
    model: ModelSpec = field(default_factory=ModelSpec)
    parallel: ParallelismPlan = field(default_factory=ParallelismPlan)
    training: TrainingSpec = field(default_factory=TrainingSpec)
    what_if: WhatIfSpec = field(default_factory=WhatIfSpec)
    costs: CostSpec = field(default_factory=CostSpec)
    reliability: ReliabilitySpec = field(default_factory=ReliabilitySpec)
    facility: FacilitySpec = field(default_factory=FacilitySpec)
    storage: StorageSpec = field(default_factory=StorageSpec)
    management: ManagementSpec = field(default_factory=ManagementSpec)
    hybrid: HybridSpec = field(default_factory=HybridSpec)
    nccl: NcclSpec = field(default_factory=NcclSpec)

    def __post_init__(self) -> None:
        # the name follows the shape: a changed layer count makes it a custom model
        named = _shape_name(self.model)
        if named != self.model.name:
            object.__setattr__(self, "model", dataclasses.replace(self.model, name=named))
        _check_cross_fields(self)

    @classmethod
    def from_dict(cls, data: Any) -> Scenario:
        """Build and validate a scenario from a nested mapping (as read from YAML or JSON).

        Raises
        ------
        ScenarioError
            For an unknown key, a wrong type or an out-of-range value.
        """
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise ScenarioFileError(
                f"a scenario must be a mapping of sections (cluster, fabric, ...), "
                f"got {type(data).__name__}"
            )
        kwargs: dict[str, Any] = {}
        for top, value in data.items():
            if top in ("name", "description"):
                if value is not None and not isinstance(value, str):
                    raise ScenarioError(top, value, "must be a text")
                kwargs[top] = value or ""
            elif top in SECTIONS:
                kwargs[top] = _build_section(top, value)
            else:
                raise ScenarioError(str(top), ScenarioError.NO_VALUE, _unknown_key_hint(str(top)))
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        """Return the full nested mapping (every key), ready for YAML or JSON."""
        out: dict[str, Any] = {"name": self.name, "description": self.description}
        for section in SECTIONS:
            out[section] = dataclasses.asdict(getattr(self, section))
        return out

    def get(self, key: str) -> Any:
        """Return the value of a dotted key."""
        field_spec(key)
        section, name = key.split(".", 1)
        return getattr(getattr(self, section), name)

    def flat(self) -> dict[str, Any]:
        """Return ``{dotted_key: value}`` for every key."""
        return {key: self.get(key) for key in _SPECS}

    def diff(self, base: Scenario) -> dict[str, Any]:
        """Return the dotted keys whose value differs from ``base`` (for URLs and presets)."""
        mine, theirs = self.flat(), base.flat()
        return {k: v for k, v in mine.items() if v != theirs[k]}


def _check_cross_fields(s: Scenario) -> None:
    c = s.cluster
    if c.nvlink_domain % c.gpus_per_node:
        raise ScenarioError(
            "cluster.nvlink_domain",
            c.nvlink_domain,
            f"must be a multiple of cluster.gpus_per_node = {c.gpus_per_node}",
        )
    if c.n_gpus > c.gpus_per_node and c.n_gpus % c.gpus_per_node:
        raise ScenarioError(
            "cluster.n_gpus",
            c.n_gpus,
            f"must be a multiple of cluster.gpus_per_node = {c.gpus_per_node} "
            f"(or fewer GPUs than one server holds)",
        )
    _check_planes(s)
    _check_hybrid(s)
    if s.model.routing_skew * s.model.hot_fraction > 1.0 + 1e-9:
        raise ScenarioError(
            "model.routing_skew",
            s.model.routing_skew,
            f"must be at most 1 / model.hot_fraction = {1 / s.model.hot_fraction:g} (the hot "
            f"GPUs cannot receive more than all of the traffic)",
        )
    m = s.model
    if m.top_k > m.n_experts:
        raise ScenarioError(
            "model.top_k", m.top_k, f"must be at most model.n_experts = {m.n_experts}"
        )
    if m.kind == "moe" and m.n_experts < 2:
        raise ScenarioError(
            "model.n_experts", m.n_experts, "must be at least 2 for an MoE model (model.kind = moe)"
        )
    if m.kind == "dense" and (m.n_experts > 1 or m.top_k > 1 or m.shared_experts):
        key = (
            "model.n_experts"
            if m.n_experts > 1
            else ("model.top_k" if m.top_k > 1 else "model.shared_experts")
        )
        raise ScenarioError(
            key,
            s.get(key),
            "a dense model (model.kind = dense) has no "
            "experts: n_experts 1, top_k 1, shared_experts 0; or set "
            "model.kind = moe",
        )
    if m.kind == "moe" and m.dense_layers >= m.layers:
        raise ScenarioError(
            "model.dense_layers",
            m.dense_layers,
            f"must be less than model.layers = {m.layers} for an MoE model",
        )
    if not m.head_dim and m.hidden % m.heads:
        raise ScenarioError(
            "model.heads", m.heads, f"must divide model.hidden = {m.hidden} (or set model.head_dim)"
        )
    if m.kv_heads > m.heads or m.heads % m.kv_heads:
        raise ScenarioError("model.kv_heads", m.kv_heads, f"must divide model.heads = {m.heads}")
    if m.params_b != "auto":
        counted_b = shape_counts(m).total / 1e9
        if abs(float(m.params_b) - counted_b) > 0.05 * counted_b:
            raise ScenarioError(
                "model.params_b",
                m.params_b,
                f"must agree within 5% with the shape's {counted_b:,.1f} B parameters "
                f"(model.layers, hidden, ffn_hidden, ...), or be auto",
            )


def _check_hybrid(s: Scenario) -> None:
    """Refuse partitions that do not add up to the cluster (``fabric.topology = hybrid``)."""
    h, n = s.hybrid, s.cluster.n_gpus
    if s.fabric.topology != "hybrid":
        return
    if h.a_gpus != "auto" and h.b_gpus != "auto" and int(h.a_gpus) + int(h.b_gpus) != n:
        raise ScenarioError(
            "hybrid.b_gpus",
            h.b_gpus,
            f"hybrid.a_gpus + hybrid.b_gpus must equal cluster.n_gpus = {n:,} "
            f"(hybrid.a_gpus = {int(h.a_gpus):,}; set hybrid.b_gpus = auto or "
            f"{n - int(h.a_gpus):,})",
        )
    for key in ("hybrid.a_gpus", "hybrid.b_gpus"):
        v = s.get(key)
        if v != "auto" and int(v) >= n:
            raise ScenarioError(
                key, v, f"must be less than cluster.n_gpus = {n:,} (both partitions hold GPUs)"
            )


def _check_planes(s: Scenario) -> None:
    """Refuse plane what-ifs a design cannot have (one line naming the key and the bound)."""
    f, w = s.fabric, s.what_if
    if f.link_gbps % f.planes:
        raise ScenarioError(
            "fabric.planes",
            f.planes,
            f"must divide fabric.link_gbps = {f.link_gbps} into whole Gb/s per plane",
        )
    degraded = 1 if w.degraded_plane_factor < 1.0 else 0
    if f.planes == 1 and (w.failed_planes or degraded or w.failed_switch != "none"):
        key = (
            "what_if.failed_planes"
            if w.failed_planes
            else "what_if.degraded_plane_factor"
            if degraded
            else "what_if.failed_switch"
        )
        raise ScenarioError(key, s.get(key), "needs fabric.planes >= 2 (now 1)")
    if w.failed_planes + degraded > f.planes - 1:
        most = f.planes - 1 - degraded
        raise ScenarioError(
            "what_if.failed_planes",
            w.failed_planes,
            f"must be at most {most} (fabric.planes = {f.planes}"
            + (", one more plane degraded" if degraded else "")
            + "): at least one plane must stay healthy",
        )


def parse_assignment(text: str) -> tuple[str, str]:
    """Split ``"fabric.link_gbps=800"`` into key and raw value.

    Raises
    ------
    ScenarioError
        If there is no ``=`` or the key is unknown.
    """
    if "=" not in text:
        raise ScenarioError(
            text, ScenarioError.NO_VALUE, "expected KEY=VALUE, e.g. fabric.link_gbps=800"
        )
    key, value = text.split("=", 1)
    key = key.strip()
    field_spec(key)
    return key, value


def apply_overrides(scenario: Scenario, overrides: Mapping[str, Any]) -> Scenario:
    """Return a copy of ``scenario`` with dotted keys set (values coerced and validated).

    ``name`` and ``description`` are accepted as top-level keys too.
    """
    sections: dict[str, dict[str, Any]] = {}
    top: dict[str, Any] = {}
    for key, raw in overrides.items():
        if key in ("name", "description"):
            top[key] = str(raw)
            continue
        value = coerce_value(key, raw)
        section, name = key.split(".", 1)
        sections.setdefault(section, {})[name] = value
    if "model" in sections:
        sections["model"] = _expand_model_name(sections["model"])
    replaced = {
        sec: dataclasses.replace(getattr(scenario, sec), **vals) for sec, vals in sections.items()
    }
    return dataclasses.replace(scenario, **top, **replaced)


# --------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping.

    PyYAML keeps the last of two equal keys, so ``cluster:`` written twice would drop the
    first section without a word.
    """

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            # plain keys only: a merge key (<<) may override what it merges, by design
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                continue
            key = self.construct_object(key_node)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"key {shown_value(key)} appears twice in one mapping (give it once)",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def scenario_from_text(text: str, *, source: str = "scenario") -> Scenario:
    """Parse YAML or JSON text (JSON is YAML) into a validated scenario.

    Raises
    ------
    ScenarioFileError
        If the text is too large, not YAML/JSON, or not a mapping.
    ScenarioError
        For a bad key or value.
    """
    if len(text.encode("utf-8", errors="replace")) > MAX_SCENARIO_BYTES:
        raise ScenarioFileError(
            f"{source}: larger than {MAX_SCENARIO_BYTES // 1024} KiB; a scenario is a few lines"
        )
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "not valid YAML/JSON"
        raise ScenarioFileError(f"{source}: malformed YAML/JSON{where}: {problem}") from None
    except RecursionError:  # thousands of nested brackets: no scenario looks like that
        raise ScenarioFileError(
            f"{source}: malformed YAML/JSON: nested too deeply to read; a scenario is "
            "sections of keys and values"
        ) from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        problem = "a number has too many digits" if "digits" in str(exc) else str(exc)
        raise ScenarioFileError(f"{source}: malformed YAML/JSON: {problem}") from None
    if data is not None and not isinstance(data, Mapping):
        raise ScenarioFileError(
            f"{source}: a scenario must be a mapping of sections (cluster, fabric, ...), "
            f"got {type(data).__name__}"
        )
    return Scenario.from_dict(data)


def load_scenario(path: str | Path) -> Scenario:
    """Read a scenario file (``.yaml``, ``.yml`` or ``.json``).

    Raises
    ------
    ScenarioFileError
        If the file cannot be read or parsed.
    """
    p = Path(path)
    try:
        if p.stat().st_size > MAX_SCENARIO_BYTES:
            raise ScenarioFileError(f"{p}: larger than {MAX_SCENARIO_BYTES // 1024} KiB")
        text = p.read_text(encoding="utf-8")
    except ScenarioFileError:
        raise
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ScenarioFileError(f"{p}: cannot read scenario file: {reason}") from None
    return scenario_from_text(text, source=str(p))


def dump_scenario(scenario: Scenario, fmt: str = "yaml", *, base: Scenario | None = None) -> str:
    """Serialise a scenario to YAML or JSON text.

    With ``base``, only the keys that differ from it are written (plus name and description),
    as a nested mapping that :func:`scenario_from_text` reads back.
    """
    if base is None:
        data = scenario.to_dict()
    else:
        data = {"name": scenario.name, "description": scenario.description}
        for key, value in scenario.diff(base).items():
            section, name = key.split(".", 1)
            data.setdefault(section, {})[name] = value
    if fmt == "json":
        return json.dumps(data, indent=2)
    if fmt == "yaml":
        return yaml.safe_dump(data, sort_keys=False)
    raise ValueError(f"unknown format {fmt!r}; use yaml or json")
