"""One training step: compute, pipeline bubble and exposed communication per dimension.

``step_time = compute + bubble + exposed communication`` for the slowest pipeline stage:

- **compute**: hardware FLOPs (model FLOPs plus what recomputation reruns) of one micro-batch
  on one GPU of the heaviest stage, divided by the GPU's dense BF16 peak times
  ``training.compute_efficiency``, plus the memory-bound kernels' HBM traffic
  (:func:`~fabric_model.training.memory.activation_traffic_bytes_per_layer`) divided by
  :data:`HBM_EFFICIENCY` of the GPU's HBM bandwidth; ``m`` micro-batches per step. MoE layers
  run their experts as grouped GEMMs of the tokens each expert gets and add the router, the
  token permutation and their small kernels (:mod:`fabric_model.training.moe`,
  ``moe_overhead_s``); the GPUs hosting hot experts (``model.routing_skew``, capped by
  ``training.moe_capacity_factor``) compute their expert GEMMs ``skew`` times over, and the
  step waits for them (``imbalance_s``).
- **bubble**: the pipeline schedule's idle time (``training.schedule``,
  :mod:`fabric_model.training.schedules`): 1F1B idles ``(pp - 1)`` micro-batch times
  (Narayanan et al. 2021), interleaving ``[(p - 1) + (v - 1) max(0, p - m)] / v`` (the
  pipeline never fills with fewer micro-batches than stages), DualPipe and zero-bubble
  schedules less; the heaviest rank paces it.
- **communication**, each term timed on the scenario's fabric by the collective layer
  (:mod:`fabric_model.training.fabric`), per step:

  ========  ==============================================================================
  ``tp``    Megatron sequence parallelism: per layer and micro-batch 2 all-gathers and 2
            reduce-scatters of the ``b s h`` activation forward, the same backward (and
            again when full recomputation reruns the forward); hidden by
            ``training.tp_overlap``.
  ``cp``    ring attention: per layer an all-gather of the keys and values forward, an
            all-gather and a reduce-scatter of their gradients backward; hidden behind the
            attention math, only the excess is exposed.
  ``ep``    per MoE layer a dispatch and a combine all-to-all forward and backward (top-k
            copies of each token's hidden state); hidden by ``training.ep_overlap``.
  ``pp``    a send of the ``b s h / tp`` activation per micro-batch, virtual stage and
            direction, plus the fill and drain: ``2 (v m + p - 1)`` sends, all exposed.
  ``dp``    gradient reduction in Megatron-core buckets of ``max(40M, 1M x dp)``
            parameters (bf16): all-reduce (ZeRO-0), reduce-scatter plus the parameter
            all-gather (ZeRO-1/2), or per micro-batch two all-gathers and a
            reduce-scatter (ZeRO-3/FSDP); hidden behind ``training.dp_overlap`` of the last
            micro-batch's backward (the all-gather behind the next forward), except the
            last bucket. Expert weights reduce over their own (``dp / ep``) groups.
  ========  ==============================================================================

MFU = model FLOPs (:mod:`fabric_model.scenario.shapes`) per step / (GPUs x dense BF16 peak x
step time), as the command-line contract defines it; ``mfu_precision_peak`` against the FP8 or
FP4 peak with ``training.precision``. The step computes ``dp x micro_batch x micro_batches``
sequences: a global batch they do not divide runs rounded down (Megatron's
``--decrease-batch-size-if-needed``), with a warning and ``tokens_per_step`` the tokens
computed. The exposed communication splits into the scale-out fabric (dimensions whose
groups span NVLink domains, pipeline sends that cross one) and NVLink
(``scale_out_share_of_step``, ``scale_up_share_of_step``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from fabric_model.caching import Lru, Reads
from fabric_model.catalog import Catalog, Gpu, Server, load_catalog
from fabric_model.collectives.context import ECMP_SEEDS
from fabric_model.collectives.model import AlgorithmUnavailableError
from fabric_model.errors import FabricModelError
from fabric_model.plant.design import job_scenario
from fabric_model.scenario import SECTIONS, Scenario, apply_overrides
from fabric_model.scenario.ocs import reconfig_ms, reduction_scenario
from fabric_model.scenario.shapes import ShapeCounts, shape_counts
from fabric_model.topology.ocs import OCS_DATA
from fabric_model.training.constants import training_constant
from fabric_model.training.fabric import CommTime, DimensionFabric
from fabric_model.training.gemm import linear_utilisation, precision_speedups
from fabric_model.training.layout import Layout
from fabric_model.training.memory import (
    MemoryBreakdown,
    activation_traffic_bytes_per_layer,
    memory_per_gpu,
    model_state_bytes,
    parse_pipeline_layout,
    pipeline_layout_problem,
)
from fabric_model.training.moe import dispatch_padding, moe_layer_time
from fabric_model.training.offload import offload_path
from fabric_model.training.schedules import (
    bubble_s,
    nearest_batches,
    parameter_copies,
    resolve_schedule,
    schedule_problems,
)
from fabric_model.training.tails import step_quantiles_s

__all__ = [
    "DIMS",
    "ComputeTimes",
    "Plan",
    "Problem",
    "StepResult",
    "compute_times",
    "dispatch_copies",
    "fanout_copies",
    "memory_fixes",
    "optimizer_step_s",
    "resolve_plan",
    "training_step",
]

#: Communication dimensions, in the order the breakdown shows them.
DIMS = ("dp", "tp", "pp", "ep", "cp")
#: Bytes per gradient / activation element (bf16).
BF16 = 2
GIB = 2**30
#: Achievable fraction of HBM bandwidth for elementwise kernels (assets/training_constants.yaml).
HBM_EFFICIENCY = training_constant("hbm_efficiency")
#: Megatron-core DDP bucket: max(40M, 1M x data-parallel size) parameters
#: (assets/training_constants.yaml, with the source).
BUCKET_MIN_PARAMS = int(training_constant("bucket_min_params"))
BUCKET_PARAMS_PER_DP = int(training_constant("bucket_params_per_dp"))


@dataclass(frozen=True)
class Problem:
    """Why a plan cannot run: the key to change and the rule it breaks."""

    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}"


@dataclass(frozen=True)
class Plan:
    """Resolved parallel degrees and batch shape of one step."""

    tp: int
    pp: int
    dp: int
    ep: int
    cp: int
    vpp: int
    zero_stage: int
    micro_batch: int
    micro_batches: int
    layers_per_stage: int
    recompute: str
    schedule: str = "1f1b"
    #: Expert tensor-parallel degree (``parallel.etp``); 0 = ``tp``.
    etp: int = 0

    @property
    def sequences_per_step(self) -> int:
        """Sequences the step computes: ``dp x micro_batch x micro_batches``."""
        return self.dp * self.micro_batch * self.micro_batches

    @property
    def expert_tp(self) -> int:
        """GPUs that split each routed expert (``parallel.etp``)."""
        return self.etp or self.tp

    @property
    def edp(self) -> int:
        """Expert data-parallel degree: ``tp x cp x dp / (etp x ep)`` (at least 1)."""
        return max(1, self.tp * self.cp * self.dp // (self.expert_tp * self.ep))

    @property
    def folded(self) -> bool:
        """Whether the experts run on their own grid (:attr:`expert_layout`).

        Megatron-Core's MoE parallel folding (``expert_tensor_parallel_size``, the expert
        rank generator of ``parallel_state.py``) forms the expert groups out of the same
        ``tp x cp x dp`` ranks as the attention's, expert TP innermost, then EP, then expert
        DP; torchtitan's FSDP2 + EP borrows EP from ``dp_shard x cp`` (and ``tp`` with
        ``etp = 1``) the same way. The grid is the attention's own when ``etp = tp`` and EP
        divides DP.
        """
        return (self.ep > 1 and self.dp % self.ep != 0) or self.expert_tp != self.tp

    @property
    def layout(self) -> Layout:
        """The rank layout (``dp = ep x edp``; with folding, EP sits in :attr:`expert_layout`)."""
        if self.folded:
            return Layout(tp=self.tp, cp=self.cp, ep=1, pp=self.pp, edp=self.dp)
        return Layout(tp=self.tp, cp=self.cp, ep=self.ep, pp=self.pp, edp=self.dp // self.ep)

    @property
    def expert_layout(self) -> Layout:
        """The rank layout the expert all-to-all, expert TP and expert gradients see.

        Without folding it is :attr:`layout`; folded, Megatron-Core's expert grid
        (:meth:`~fabric_model.training.layout.Layout.expert_grid`): expert TP innermost, EP
        on the next ranks (across the rest of TP and the context-parallel ranks first), the
        expert data-parallel group the rest of ``tp x cp x dp``.
        """
        if not self.folded:
            return self.layout
        return Layout.expert_grid(self.expert_tp, self.ep, self.pp, self.tp * self.cp * self.dp)

    def label(self) -> str:
        """Short text such as ``TP8 PP16 DP128`` (degrees above 1, DP always)."""
        parts = [
            f"TP{self.tp}" if self.tp > 1 else "",
            f"CP{self.cp}" if self.cp > 1 else "",
            f"EP{self.ep}" if self.ep > 1 else "",
            f"ETP{self.expert_tp}" if self.expert_tp != self.tp else "",
            f"PP{self.pp}" + (f"x{self.vpp}" if self.vpp > 1 else "") if self.pp > 1 else "",
            f"DP{self.dp}",
        ]
        return " ".join(p for p in parts if p)


@dataclass(frozen=True)
class StepResult:
    """One training step of a scenario (see the module docstring for every term).

    ``feasible`` is False when the plan cannot run (``problems`` says why, with the key to
    change); the memory figures are still filled in where the plan could be resolved.
    """

    n_gpus: int
    feasible: bool
    problems: tuple[Problem, ...]
    plan: Plan | None = None
    step_time_s: float = math.nan
    compute_s: float = math.nan
    imbalance_s: float = 0.0
    #: p50 and p99 over iterations (``tails.*``: stragglers, jitter, ECMP draws); both
    #: ``step_time_s`` with ``tails.enabled = false``
    step_time_p50_s: float = math.nan
    step_time_p99_s: float = math.nan
    bubble_s: float = math.nan
    exposed_comm_s: float = math.nan
    comm_s: dict[str, float] = field(default_factory=dict)
    exposed_s: dict[str, float] = field(default_factory=dict)
    comm_detail: dict[str, str] = field(default_factory=dict)
    mfu: float = math.nan
    tokens_per_s: float = math.nan
    tokens_per_step: float = math.nan
    model_flops_per_step: float = math.nan
    memory: MemoryBreakdown | None = None
    mfu_precision_peak: float = math.nan
    warnings: tuple[str, ...] = ()
    #: Activation offload to host memory not hidden behind compute (``training.offload_layers``).
    offload_s: float = 0.0
    #: The optimizer step (memory-bound, exposed; with ``training.dp_overlap = auto``).
    optimizer_s: float = 0.0
    #: Time a flapping NIC link stalls the rest of the step (``what_if.
    #: flapping_link``): every rank waits while the link retrains and the QPs
    #: time out, ``(step - exposed network) x f / (1 - f)`` for a stall share ``f`` (the
    #: network collectives already take ``1 / (1 - f)`` as long).
    stall_s: float = 0.0
    scale_out_dims: tuple[str, ...] = ()
    precision: str = "bf16"
    #: OCS reconfiguration per step (``ocs.reconfigure = phase``), in ``exposed_s["dp"]``.
    ocs_reconfig_s: float = 0.0
    #: The MoE router, permutation and small kernels (inside ``compute_s``; :mod:`.moe`).
    moe_overhead_s: float = 0.0
    #: Where offloaded activations go (``training.offload_target``) and the path's rate per
    #: GPU and direction, GB/s ('' and 0 without offload).
    offload_via: str = ""
    offload_GBps: float = 0.0

    @property
    def exposed_scale_out_s(self) -> float:
        """Exposed time of the dimensions whose groups cross NVLink domains (the network)."""
        if not self.feasible:
            return math.nan
        return sum(self.exposed_s.get(d, 0.0) for d in self.scale_out_dims)

    @property
    def exposed_scale_up_s(self) -> float:
        """Exposed time of the dimensions whose groups stay inside an NVLink domain."""
        if not self.feasible:
            return math.nan
        return self.exposed_comm_s - self.exposed_scale_out_s

    @property
    def ideal_scale_out_step_s(self) -> float:
        """The same step with an infinitely fast scale-out network (NVLink as modelled).

        What a better InfiniBand or Ethernet design can recover at most is
        ``step_time_s - ideal_scale_out_step_s``.
        """
        return self.step_time_s - self.exposed_scale_out_s if self.feasible else math.nan

    @property
    def scale_out_share_of_step(self) -> float:
        """Share of the step the scale-out fabric exposes (DP, PP, EP/CP across domains)."""
        return self.exposed_scale_out_s / self.step_time_s if self.feasible else math.nan

    @property
    def scale_up_share_of_step(self) -> float:
        """Share of the step NVLink exposes (TP, and whatever stays inside a domain)."""
        return self.exposed_scale_up_s / self.step_time_s if self.feasible else math.nan

    @property
    def reason(self) -> str:
        """The problems as one line ('' when feasible)."""
        return "; ".join(str(p) for p in self.problems)

    @property
    def ideal_network_step_s(self) -> float:
        """The same step with an infinitely fast network: compute, imbalance and bubble only.

        What the fabric costs this plan is ``step_time_s - ideal_network_step_s``, the
        exposed communication of every dimension (pipeline sends included).
        """
        if not self.feasible:
            return math.nan
        return self.compute_s + self.imbalance_s + self.bubble_s + self.offload_s + self.optimizer_s

    @property
    def bubble_fraction(self) -> float:
        """Share of the step the pipeline idles."""
        return self.bubble_s / self.step_time_s if self.feasible else math.nan

    def to_dict(self) -> dict[str, Any]:
        """Return the ``step`` JSON contract, plus plan, breakdown and feasibility."""
        mem = self.memory
        out: dict[str, Any] = {
            "n_gpus": self.n_gpus,
            "feasible": self.feasible,
            "reason": self.reason,
            "step_time_s": self.step_time_s,
            "step_time_p50_s": self.step_time_p50_s,
            "step_time_p99_s": self.step_time_p99_s,
            "compute_s": self.compute_s,
            "imbalance_s": self.imbalance_s,
            "bubble_s": self.bubble_s,
            "offload_s": self.offload_s,
            "optimizer_s": self.optimizer_s,
            "stall_s": self.stall_s,
            "ocs_reconfig_s": self.ocs_reconfig_s,
            "moe_overhead_s": self.moe_overhead_s,
            "offload_via": self.offload_via,
            "offload_GBps": self.offload_GBps,
            "exposed_comm_s": self.exposed_comm_s,
            "step_time_ideal_network_s": self.ideal_network_step_s,
            "network_share_of_step": (
                self.exposed_comm_s / self.step_time_s if self.feasible else math.nan
            ),
            "scale_out_share_of_step": self.scale_out_share_of_step,
            "scale_up_share_of_step": self.scale_up_share_of_step,
            "exposed_scale_out_s": self.exposed_scale_out_s,
            "exposed_scale_up_s": self.exposed_scale_up_s,
            "step_time_ideal_scale_out_s": self.ideal_scale_out_step_s,
            "scale_out_dims": list(self.scale_out_dims),
            "schedule": self.plan.schedule if self.plan else "",
            "comm_s": {d: self.comm_s.get(d, 0.0) for d in DIMS},
            "exposed_s": {d: self.exposed_s.get(d, 0.0) for d in DIMS},
            "comm_detail": dict(self.comm_detail),
            "mfu": self.mfu,
            "mfu_precision_peak": self.mfu_precision_peak,
            "precision": self.precision,
            "warnings": list(self.warnings),
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_step": self.tokens_per_step,
            "model_flops_per_step": self.model_flops_per_step,
            "memory_gib_per_gpu": mem.total_gib if mem else math.nan,
            "memory_status": mem.status if mem else "",
            "memory": _memory_dict(mem) if mem else None,
            "plan": asdict(self.plan) if self.plan else None,
        }
        return out


def _memory_dict(mem: MemoryBreakdown) -> dict[str, Any]:
    """Return the breakdown's fields, each pipeline rank with its total."""
    out = asdict(mem)
    for stage, st in zip(out["stages"], mem.stages, strict=True):
        stage["total_gib"] = st.total_gib
    return out


# ------------------------------------------------------------------------------ plan


def resolve_plan(scenario: Scenario) -> tuple[Plan | None, list[Problem]]:
    """Resolve ``parallel.dp = auto`` and the micro-batch count; list every broken rule."""
    s, par, m, tr = scenario, scenario.parallel, scenario.model, scenario.training
    n = s.cluster.n_gpus
    problems: list[Problem] = []
    inner = par.tp * par.pp * par.cp
    if par.dp == "auto":
        if n % inner:
            problems.append(
                Problem(
                    "cluster.n_gpus",
                    f"{n:,} GPUs is not a multiple of parallel.tp x pp x cp = {inner:,}",
                )
            )
            return None, problems
        dp = n // inner
    else:
        dp = int(par.dp)
        if dp * inner != n:
            problems.append(
                Problem(
                    "parallel.dp",
                    f"tp x pp x cp x dp = {dp * inner:,} must "
                    f"equal cluster.n_gpus = {n:,} (or set dp to auto)",
                )
            )
            return None, problems
    if par.tp > s.cluster.nvlink_domain:
        problems.append(
            Problem(
                "parallel.tp",
                f"{par.tp} exceeds the NVLink domain of "
                f"{s.cluster.nvlink_domain} GPUs (tensor parallelism "
                f"needs NVLink bandwidth)",
            )
        )
    if m.heads % par.tp:
        problems.append(Problem("parallel.tp", f"must divide model.heads = {m.heads}"))
    elif not m.kv_lora_rank and m.kv_heads % par.tp:  # Megatron splits the KV groups by TP
        problems.append(
            Problem(
                "parallel.tp",
                f"must divide model.kv_heads = {m.kv_heads} "
                f"(each tensor-parallel rank holds whole key/value groups)",
            )
        )
    if m.layers < par.pp * par.vpp:
        problems.append(
            Problem(
                "parallel.pp", f"pp x vpp = {par.pp * par.vpp} exceeds model.layers = {m.layers}"
            )
        )
    if par.vpp > 1 and par.pp == 1:
        problems.append(
            Problem("parallel.vpp", "interleaving needs pipeline stages (parallel.pp > 1)")
        )
    if m.seq_len % par.cp:
        problems.append(Problem("parallel.cp", f"must divide model.seq_len = {m.seq_len:,}"))
    if par.ep > 1:
        if m.kind != "moe":
            problems.append(
                Problem("parallel.ep", "expert parallelism needs an MoE model (model.kind = moe)")
            )
        elif m.n_experts % par.ep:
            problems.append(Problem("parallel.ep", f"must divide model.n_experts = {m.n_experts}"))
    etp, etp_problems = _expert_tp(s, dp)
    problems += etp_problems
    layout_problem = pipeline_layout_problem(s, par.pp, par.vpp)
    if layout_problem:
        problems.append(Problem("parallel.pipeline_layout", layout_problem))
    if tr.moe_pad_to_capacity and tr.moe_capacity_factor <= 0:
        problems.append(
            Problem(
                "training.moe_pad_to_capacity",
                "needs an expert capacity: set training.moe_capacity_factor > 0 (0 is dropless)",
            )
        )
    if tr.fp8_param_gather and tr.precision != "fp8":
        problems.append(
            Problem("training.fp8_param_gather", "needs training.precision = fp8 (FP8 weights)")
        )
    if tr.activation_fp8_input_store and not m.gated_mlp:  # Megatron-Core's config check
        problems.append(
            Problem(
                "training.activation_fp8_input_store",
                "stores the SwiGLU activation's input: needs model.gated_mlp = true",
            )
        )
    if tr.offload_layers:  # Megatron-Core's TransformerConfig checks
        if par.pp > 1:
            problems.append(
                Problem(
                    "training.offload_layers",
                    "activation offload runs without pipeline parallelism (Megatron-Core: no "
                    "support for pipeline parallelism with CPU offloading); set parallel.pp = 1",
                )
            )
        if tr.recompute != "none":
            problems.append(
                Problem(
                    "training.offload_layers",
                    "activation offload runs without recomputation (Megatron-Core); set "
                    "training.recompute = none",
                )
            )
        if tr.offload_layers >= m.layers:
            problems.append(
                Problem(
                    "training.offload_layers",
                    f"must be less than model.layers = {m.layers} (at least one layer stays)",
                )
            )
    seqs = tr.global_batch_tokens / m.seq_len
    per_step = dp * tr.micro_batch
    if seqs < per_step:
        problems.append(
            Problem(
                "training.global_batch_tokens",
                f"{tr.global_batch_tokens:,} tokens = {seqs:,.1f} sequences "
                f"of {m.seq_len:,}, fewer than dp x micro_batch = "
                f"{per_step:,} (each replica needs a micro-batch)",
            )
        )
    # a batch that dp x micro_batch does not divide runs rounded down, as Megatron's
    # --decrease-batch-size-if-needed does (without it Megatron and torchtitan assert);
    # training_step says so and counts the tokens computed
    micro_batches = max(1, math.floor(seqs / per_step + 1e-9))
    schedule = resolve_schedule(tr.schedule, par.vpp)
    problems += [
        Problem(key, msg)
        for key, msg in schedule_problems(schedule, tr.framework, par.pp, par.vpp, micro_batches)
    ]
    layers_per_stage = math.ceil(m.layers / (par.pp * par.vpp)) * par.vpp
    if par.pipeline_layout != "auto" and not layout_problem:  # the heaviest rank's layers
        stages = parse_pipeline_layout(par.pipeline_layout)
        layers_per_stage = max(
            sum(stages[v * par.pp + r].count("t") for v in range(par.vpp)) for r in range(par.pp)
        )
    plan = Plan(
        tp=par.tp,
        pp=par.pp,
        dp=dp,
        ep=par.ep,
        cp=par.cp,
        vpp=par.vpp,
        zero_stage=par.zero_stage,
        micro_batch=tr.micro_batch,
        micro_batches=micro_batches,
        layers_per_stage=layers_per_stage,
        recompute=tr.recompute,
        schedule=schedule,
        etp=etp,
    )
    return plan, problems


def _expert_tp(s: Scenario, dp: int) -> tuple[int, list[Problem]]:
    """Resolve ``parallel.etp`` and list the rules the expert grid breaks.

    ``auto`` is the framework's default: Megatron-Core's ``tp`` (``parallel_state.py``,
    ``initialize_model_parallel``: "expert_tensor_parallel_size (default = tp_size)"),
    torchtitan's 1 with expert parallelism (``job_config.py``,
    ``expert_tensor_parallel_degree = 1``, "no effect ... when ep = 1": its experts then
    follow ``tp``). The rules:
    Megatron-Core builds the expert grid ``etp x ep x edp`` out of each pipeline stage's
    ``tp x cp x dp`` GPUs ("world_size is not divisible by expert_tensor_model_pipeline_
    parallel size"), and Transformer Engine splits each expert's FFN by ``etp``
    (``divide(output_size, tp_size)`` of its grouped linear layers); torchtitan
    (``parallel_dims.py``) supports ``etp = tp`` with EP over ``dp_shard x cp`` (EP a
    multiple of CP) or ``etp = 1`` with EP over ``dp_shard x cp x tp`` (a multiple of
    ``cp x tp``). Expert TP is tensor parallelism: like ``tp``, inside one NVLink domain.
    """
    par, m, tr = s.parallel, s.model, s.training
    titan = tr.framework == "torchtitan"
    moe = m.kind == "moe"
    if par.etp == "auto":
        etp = 1 if titan and moe and par.ep > 1 else par.tp
    else:
        etp = int(par.etp)
    if not moe or (titan and par.ep == 1):  # nothing for the key to split
        if etp != par.tp:
            needs = "an MoE model" if not moe else "expert parallelism under torchtitan"
            return par.tp, [
                Problem(
                    "parallel.etp",
                    f"expert tensor parallelism needs {needs}; set it to parallel.tp "
                    f"= {par.tp} or auto",
                )
            ]
        return etp, []
    problems: list[Problem] = []
    key = "parallel.ep" if etp == par.tp else "parallel.etp"
    own = "parallel.tp" if par.etp == "auto" and etp == par.tp else "parallel.etp"
    grid, block = etp * par.ep, par.tp * par.cp * dp
    if block % grid:
        problems.append(
            Problem(
                key,
                f"etp x ep = {etp} x {par.ep} must divide tp x cp x dp = {block:,} (the experts "
                f"of a pipeline stage run on its tensor-, context- and data-parallel GPUs: "
                f"MoE parallel folding"
                + (
                    "; parallel.etp = 1 lets EP span the TP ranks too)"
                    if etp == par.tp > 1 and block % par.ep == 0
                    else ")"
                ),
            )
        )
    if m.ffn_hidden % etp:
        problems.append(
            Problem(
                own,
                f"must divide the experts' model.ffn_hidden = {m.ffn_hidden} (each routed "
                f"expert's FFN is split by the expert tensor-parallel degree, {etp})",
            )
        )
    if etp > s.cluster.nvlink_domain and etp != par.tp:  # tp's own rule says it otherwise
        problems.append(
            Problem(
                "parallel.etp",
                f"{etp} exceeds the NVLink domain of {s.cluster.nvlink_domain} GPUs (expert "
                f"tensor parallelism needs NVLink bandwidth, as tensor parallelism does)",
            )
        )
    if titan and par.ep > 1:
        if etp not in (1, par.tp):
            problems.append(
                Problem(
                    "parallel.etp",
                    f"torchtitan runs expert tensor parallelism at 1 or at parallel.tp = "
                    f"{par.tp} only",
                )
            )
        elif par.ep % (par.cp * (par.tp if etp == 1 else 1)):
            borrowed = "cp x tp" if etp == 1 else "cp"
            problems.append(
                Problem(
                    "parallel.ep",
                    f"torchtitan's EP borrows all of {borrowed} at etp = {etp}: it must be a "
                    f"multiple of {par.cp * (par.tp if etp == 1 else 1)}",
                )
            )
    return etp, problems


# ------------------------------------------------------------------------------ step


def _layer_flops_per_token(c: ShapeCounts, seq_len: int) -> tuple[float, float, float]:
    """Model FLOPs of an average layer per token: (total, attention scores, routed experts)."""
    layers = c.moe_layers + c.dense_layers
    matmul = 6.0 * (c.non_expert_layer_params + c.moe_layers * c.top_k * c.ffn_per_expert)
    attn = c.attention_flops_per_token(seq_len)
    experts = 6.0 * c.moe_layers * c.top_k * c.ffn_per_expert
    return (matmul + attn) / layers, attn / layers, experts / layers


def _distinct(slots: int, per_slot: float, k: int) -> float:
    """Return the expected distinct slots among ``k`` of ``slots x per_slot`` items (no repeats)."""
    pool = round(per_slot * slots)
    if k > pool:
        return float(slots)
    return slots * (1.0 - math.comb(round(per_slot * (slots - 1)), k) / math.comb(pool, k))


def dispatch_copies(s: Scenario, ep: int) -> float:
    """Return the copies of a token's hidden state the MoE dispatch sends (and combine returns).

    ``per_expert``: one per routed expert (``top_k``). ``per_node`` (DeepEP): over the
    scale-out network one copy per destination node, the expected number of distinct nodes
    among the token's ``top_k`` experts when the ``n_experts`` are spread evenly over the
    ``G`` NVLink domains the expert-parallel group spans and routing is limited to
    ``M = model.max_nodes_per_token`` of them (all ``G`` when 0):
    ``M (1 - C(n (M - 1), k) / C(n M, k))`` with ``n`` experts per node. Inside a node the
    copy fans out over NVLink to every destination GPU (:func:`fanout_copies`): a group
    inside one NVLink domain sends those (review N7: DeepEP dedups the RDMA leg only).

    >>> from fabric_model.scenario import Scenario, apply_overrides
    >>> s = apply_overrides(Scenario(), {"model.name": "deepseek-v3",
    ...                                  "training.ep_dispatch": "per_node"})
    >>> round(dispatch_copies(s, 64), 2)  # 8 nodes, at most 4 per token
    3.63
    >>> round(dispatch_copies(s, 8), 2)  # one node: 8 (1 - C(224, 8) / C(256, 8)) GPUs
    5.29
    """
    m = s.model
    if s.training.ep_dispatch != "per_node":
        return float(m.top_k)
    nodes = max(1, math.ceil(ep / s.cluster.nvlink_domain))
    if nodes == 1:
        return fanout_copies(s, ep)
    limit = min(nodes, m.max_nodes_per_token or nodes)
    return _distinct(limit, m.n_experts / nodes, m.top_k)


def fanout_copies(s: Scenario, ep: int) -> float:
    """Return the distinct GPUs a token's ``top_k`` experts sit on (the NVLink fan-out).

    The experts spread evenly over the ``ep`` GPUs; with node-limited routing the token's
    experts are drawn from ``M`` nodes' GPUs: ``M g (1 - C(e (M g - 1), k) / C(e M g, k))``
    with ``g`` GPUs per node and ``e`` experts per GPU.
    """
    m = s.model
    nodes = max(1, math.ceil(ep / s.cluster.nvlink_domain))
    per_node = ep / nodes
    limit = min(nodes, m.max_nodes_per_token or nodes)
    return _distinct(round(per_node * limit), m.n_experts / ep, m.top_k)


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
class _Buckets:
    """One data-parallel collective over a rank's gradients or weights, in DDP buckets.

    Megatron-Core keeps one buffer per model chunk (``vpp`` of them), each cut into
    buckets of ``bucket_params``: ``n_full`` full ones and a remainder per chunk.
    """

    n_full: int
    full_s: float  # one full bucket
    rest_s: float  # a chunk's remainder bucket, 0 if none
    bucket_params: float
    call: CommTime | None
    rest_params: float = 0.0
    chunks: int = 1

    @property
    def total_s(self) -> float:
        """All buckets of every chunk, one after the other."""
        return self.chunks * (self.n_full * self.full_s + self.rest_s)

    @property
    def last_s(self) -> float:
        """The bucket reduced last (a remainder, if any)."""
        return self.rest_s or self.full_s

    def exposed_s(self, window_s: float, pp: int = 1) -> float:
        """Seconds the collective runs past the compute it overlaps.

        Megatron-Core's ``overlap_grad_reduce`` launches a bucket's collective as soon as
        the backward pass has produced all its gradients, one bucket after another on the
        data-parallel stream (``distributed/param_and_grad_buffer.py``). A chunk produces
        its gradients in its last micro-batch's backward (``window_s / chunks``), evenly,
        the remainder bucket last. With interleaving the chunks' last backwards come in
        groups of ``pp`` micro-batches (``pipeline_parallel/schedules.py`` launches each
        chunk's grad sync after its last backward), so chunk ``i`` finishes ``pp`` chunk
        times after chunk ``i - 1`` and the step's backward ends with chunk 0. A serial
        queue: each bucket starts when it is ready and the one before it is done; what
        runs past the end of the backward pass is exposed. The parameter all-gather the
        forward pass waits on (``overlap_param_gather``, each chunk's before its first
        forward) is the same queue reversed in time.
        """
        n, v = self.n_full, self.chunks
        slot = window_s / v  # one chunk's share of a micro-batch's backward
        chunk_params = n * self.bucket_params + self.rest_params
        stride = pp * slot if v > 1 else slot
        clock = 0.0
        for i in range(v):
            done = slot + i * stride  # chunk i's last backward ends
            start = done - slot
            for j in range(1, n + 1):
                ready = start + slot * j * self.bucket_params / chunk_params
                clock = max(clock, ready) + self.full_s
            if self.rest_s > 0:
                clock = max(clock, done) + self.rest_s
        end = slot + (v - 1) * stride
        return max(0.0, clock - end)


def _buckets(
    fab: DimensionFabric,
    dim: str,
    op: str,
    params: float,
    group_size: int,
    elem_bytes: float,
    chunks: int = 1,
) -> _Buckets:
    """Time ``op`` over ``params`` elements of ``elem_bytes`` in Megatron-Core's DDP buckets.

    The bucket size is Megatron-Core's default ``max(40M, 1M x dp)`` parameters
    (``distributed_data_parallel.py``: "larger DP sizes need larger buckets to ensure
    collectives do not become latency-bound"), per model chunk's buffer.
    """
    if params <= 0 or group_size <= 1:
        return _Buckets(0, 0.0, 0.0, 1.0, None)
    bucket = max(BUCKET_MIN_PARAMS, BUCKET_PARAMS_PER_DP * group_size)
    full, rest = divmod(params / chunks, bucket)
    t_full = fab.collective(dim, op, bucket * elem_bytes) if full else None
    t_rest = fab.collective(dim, op, rest * elem_bytes) if rest > 0 else None
    return _Buckets(
        n_full=int(full),
        full_s=t_full.time_s if t_full else 0.0,
        rest_s=t_rest.time_s if t_rest else 0.0,
        bucket_params=float(bucket),
        call=t_full or t_rest,
        rest_params=float(rest),
        chunks=chunks,
    )


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


def _describe(call: CommTime | None, count: float, size: float) -> str:
    if call is None:
        return ""
    return (
        f"{count:,.0f} x {call.algo}/{call.proto} of {size / 2**20:,.1f} MiB at "
        f"{call.busbw_GBps:,.1f} GB/s busbw ({call.bottleneck})"
    )


@dataclass(frozen=True)
class ComputeTimes:
    """The compute side of a step on the heaviest stage, seconds (see the module docstring)."""

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

    FP8 runs the linear layers' GEMMs (not attention, not the output layer) at the FP8 peak,
    NVFP4 at the FP4 peak but for the share the recipe keeps in BF16
    (:func:`precision_speedups`); every linear GEMM is slowed by its shape's tile and wave
    quantization (:func:`~fabric_model.training.gemm.linear_utilisation`). The bubble is the
    schedule's (:func:`~fabric_model.training.schedules.bubble_s`), with ``weight_grad_s``
    the weight-gradient GEMMs of one micro-batch.
    """
    m, tr = s.model, s.training
    peak = gpu.bf16_dense_tflops * 1e12 * tr.compute_efficiency
    gemm_speedup, linear_speedup = precision_speedups(tr.precision, gpu)
    seq = m.seq_len
    tokens_mb = plan.micro_batch * seq
    layer_flops, layer_attn, _ = _layer_flops_per_token(counts, seq)
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
    # the schedule's bubble (training.schedules), the heaviest rank's micro-batch pacing it;
    # W = the weight-gradient GEMMs, as many FLOPs as the forward's linear GEMMs
    t_w = (stage_eq - plan.layers_per_stage * layer_attn) / 3.0 * tokens_mb / split / peak
    hot = 1.0 + imbalance / (mb * t_mb)  # the hot-expert ranks' micro-batches are longer
    bubble = bubble_s(
        plan.schedule, plan.pp, plan.vpp, mb, hot * t_fwd, hot * (t_mb - t_fwd), hot * t_w
    )
    return ComputeTimes(
        micro_batch_s=t_mb,
        forward_s=t_fwd,
        compute_s=mb * t_mb,
        imbalance_s=imbalance,
        bubble_s=bubble,
        gemm_speedup=gemm_speedup,
        weight_grad_s=t_w,
        moe_overhead_s=moe_overhead,
    )


def _tensor_parallel_s(
    s: Scenario, plan: Plan, counts: ShapeCounts, fab: DimensionFabric, efab: DimensionFabric
) -> tuple[float, str]:
    """Seconds per step of tensor parallelism's collectives, and what they are.

    Megatron sequence parallelism: an all-gather before and a reduce-scatter after each
    tensor-parallel block (attention, a dense MLP, an MoE layer's shared experts) of the
    ``b s h`` activation, forward and backward (and the forward again under full
    recomputation). An MoE layer's routed experts are not a TP block: Megatron-Core's
    all-to-all dispatcher all-gathers the routed tokens each GPU received over the expert
    tensor-parallel group, ``etp x b s / (cp tp) x top_k`` rows, and reduce-scatters the
    experts' output back (``token_dispatcher.py``, ``dispatch_postprocess`` and
    ``combine_preprocess``), forward and backward, on the expert grid's ``etp`` GPUs:
    nothing at ``etp = 1``.
    """
    m = s.model
    mb, seq, h = plan.micro_batches, m.seq_len, m.hidden
    act = plan.micro_batch * (seq / plan.cp) * h * BF16
    rounds = 3 if plan.recompute == "full" else 2
    moe_stage = plan.layers_per_stage * counts.moe_layers / m.layers
    blocks = 2 * plan.layers_per_stage - moe_stage * (0 if m.shared_experts else 1)
    total, parts = 0.0, []
    if plan.tp > 1:
        n_each = rounds * blocks * mb
        ag = fab.collective("tp", "allgather", act)
        rs = fab.collective("tp", "reducescatter", act)
        total += n_each * (ag.time_s + rs.time_s)
        parts += [_describe(ag, n_each, act), _describe(rs, n_each, act)]
    if plan.expert_tp > 1 and moe_stage > 0:
        routed = act * m.top_k * dispatch_padding(s) * plan.expert_tp / plan.tp
        n_each = rounds * moe_stage * mb
        ag = efab.collective("tp", "allgather", routed)
        rs = efab.collective("tp", "reducescatter", routed)
        total += n_each * (ag.time_s + rs.time_s)
        parts.append("expert TP " + _describe(ag, n_each, routed))
        parts.append("expert TP " + _describe(rs, n_each, routed))
    return total, "; ".join(parts)


def _host_memory_problem(s: Scenario, mem: MemoryBreakdown, server: Server) -> str:
    """Why the offload target cannot hold the offloaded activations ('' when it can)."""
    path, problem = offload_path(s, server)
    if path is None:
        return problem
    need_gb = mem.offloaded_gib * GIB / 1e9 * s.cluster.gpus_per_node
    if need_gb > path.capacity_gb:
        return (
            f"{s.cluster.gpus_per_node} GPUs x {mem.offloaded_gib:,.1f} GiB of offloaded "
            f"activations = {need_gb:,.0f} GB, more than the {path.capacity_gb:,.0f} GB "
            f"of {path.target} memory of {server.name}; offload fewer layers"
            + (" or raise training.cxl_memory_gb" if path.target == "cxl" else "")
        )
    return ""


def offload_time_s(
    s: Scenario, plan: Plan, mem: MemoryBreakdown, server: Server, ct: ComputeTimes
) -> float:
    """Seconds per step the activation offload adds: the transfer not hidden by compute.

    Per micro-batch the offloaded layers' activations go to the offload target during the
    forward pass and come back during the backward pass, each way over the target's path
    (:func:`~fabric_model.training.offload.offload_path`: PCIe or NVLink-C2C to host
    memory, or on to a CXL pool; its bandwidth per GPU and its start-up latency per layer)
    on its own copy stream, overlapping the compute of the rest of that pass (Transformer
    Engine's CPU-offload context overlaps the copy of one layer with the next layer's
    compute). What the pass's compute does not cover is exposed: ``max(0, transfer - pass
    time)`` forward and backward.
    """
    path, _ = offload_path(s, server)
    if path is None or mem.offloaded_gib <= 0:
        return 0.0
    # offload runs without pipelining, so one micro-batch's layers are offloaded at a time
    layers = min(s.training.offload_layers, plan.layers_per_stage)
    transfer = path.transfer_s(mem.offloaded_gib * GIB, layers)
    exposed = max(0.0, transfer - ct.forward_s) + max(0.0, transfer - ct.backward_s)
    return exposed * plan.micro_batches


def memory_fixes(scenario: Scenario) -> list[tuple[str, Any, StepResult]]:
    """Single-key changes that make a plan fit in memory, fastest first.

    Tries one step each of: a higher ZeRO stage, more recomputation, a smaller micro-batch,
    no interleaving, twice the tensor, pipeline or context parallelism; returns
    ``(key, value, step)`` for every change whose step is feasible.
    """
    s, par, tr, m = scenario, scenario.parallel, scenario.training, scenario.model
    tries: list[tuple[str, Any]] = [
        ("parallel.zero_stage", z) for z in range(par.zero_stage + 1, 4)
    ]
    tries += [
        ("training.recompute", r)
        for r in ("selective", "full")
        if ("none", "selective", "full").index(r)
        > ("none", "selective", "full").index(tr.recompute)
    ]
    if tr.micro_batch > 1:
        tries.append(("training.micro_batch", tr.micro_batch // 2))
    if par.vpp > 1:
        tries.append(("parallel.vpp", 1))
    if 2 * par.tp <= s.cluster.nvlink_domain and m.heads % (2 * par.tp) == 0:
        tries.append(("parallel.tp", 2 * par.tp))
    if 2 * par.pp * par.vpp <= m.layers:
        tries.append(("parallel.pp", 2 * par.pp))
    if m.seq_len % (2 * par.cp) == 0:
        tries.append(("parallel.cp", 2 * par.cp))
    out = []
    for key, value in tries:
        try:
            step = training_step(apply_overrides(s, {key: value, "parallel.dp": "auto"}))
        except FabricModelError:
            continue
        if step.feasible:
            out.append((key, value, step))
    out.sort(key=lambda kv: kv[2].step_time_s)
    return out


def training_step(
    scenario: Scenario,
    catalog: Catalog | None = None,
    *,
    suggest: bool = False,
    ecmp_seed: int | None = None,
) -> StepResult:
    """Model one optimizer step of ``scenario`` (see the module docstring).

    Never raises for an infeasible plan: the result says why, and with ``suggest`` a plan
    that does not fit in memory also names the fastest single change that makes it fit
    (:func:`memory_fixes`). Raises :class:`~fabric_model.errors.FabricModelError` for a
    design that cannot be built at all. With ``ecmp_seed`` every collective is timed at that
    one of the solver's ECMP hash seeds instead of their expectation (the tails' draws, see
    :mod:`fabric_model.training.tails`).

    A forced ``nccl.algo`` or ``nccl.proto`` that cannot run one of the plan's collectives
    makes the plan infeasible, naming the key: NCCL returns ``ncclInvalidUsage`` ("no
    algorithm/protocol available for function ...", ``src/enqueue.cc``) when NCCL_ALGO or
    NCCL_PROTO leave a collective nothing to run.
    """
    try:
        return _training_step(scenario, catalog, suggest=suggest, ecmp_seed=ecmp_seed)
    except AlgorithmUnavailableError as exc:
        forced = [k for k in ("algo", "proto") if getattr(scenario.nccl, k) != "auto"]
        if not forced:
            raise
        return StepResult(
            scenario.cluster.n_gpus,
            False,
            (
                Problem(
                    f"nccl.{forced[0]}",
                    f"NCCL refuses this job (ncclInvalidUsage: no algorithm/protocol available "
                    f"for one of its collectives): {exc}",
                ),
            ),
        )


def _training_step(
    scenario: Scenario,
    catalog: Catalog | None,
    *,
    suggest: bool,
    ecmp_seed: int | None,
) -> StepResult:
    s = scenario
    if s.fabric.topology == "hybrid":  # the job runs where hybrid.job puts it
        s = job_scenario(s)
    cat = catalog or load_catalog()
    gpu = cat.gpu(s.cluster.gpu)
    plan, problems = resolve_plan(s)
    n = s.cluster.n_gpus
    if plan is None:
        return StepResult(n, False, tuple(problems))
    m, tr = s.model, s.training
    counts = shape_counts(m)
    if tr.precision == "fp8" and not gpu.fp8_dense_tflops:
        problems.append(
            Problem(
                "training.precision",
                f"fp8 needs FP8 tensor cores; {s.cluster.gpu} has none (allowed: bf16)",
            )
        )
    if tr.precision == "fp4" and not gpu.fp4_tflops:
        allowed = "bf16, fp8" if gpu.fp8_dense_tflops else "bf16"
        problems.append(
            Problem(
                "training.precision",
                f"fp4 (NVFP4) needs FP4 tensor cores (Blackwell); {s.cluster.gpu} "
                f"({gpu.arch}) has none (allowed: {allowed})",
            )
        )
    mem = memory_per_gpu(s, plan, counts, gpu.hbm_gib)
    warnings: list[str] = []
    computed = plan.sequences_per_step * m.seq_len
    if computed != tr.global_batch_tokens and not problems:
        lo, hi = nearest_batches(
            tr.global_batch_tokens / m.seq_len, plan.dp * plan.micro_batch, m.seq_len
        )
        warnings.append(
            f"training.global_batch_tokens = {tr.global_batch_tokens:,} is not a multiple of "
            f"dp x micro_batch x seq_len = {plan.dp * plan.micro_batch * m.seq_len:,}: the step "
            f"computes {plan.sequences_per_step:,} sequences ({computed:,} tokens, "
            f"tokens_per_step), as Megatron's --decrease-batch-size-if-needed does (without it "
            f"Megatron and torchtitan refuse the batch); {lo:,} or {hi:,} tokens divide evenly"
        )
    server = cat.server(gpu.server)
    if tr.offload_layers:
        host_problem = _host_memory_problem(s, mem, server)
        if host_problem:
            path_missing = offload_path(s, server)[0] is None and tr.offload_target != "host"
            key = "training.offload_target" if path_missing else "training.offload_layers"
            problems.append(Problem(key, host_problem))
    if mem.status == "over":
        advice = (
            "Raise parallel.tp/pp/cp or the ZeRO stage, lower training.micro_batch, or "
            "set training.recompute = full"
        )
        fixes = memory_fixes(s) if suggest and not problems else []
        if fixes:
            key, value, fixed = fixes[0]
            need = fixed.memory.total_gib if fixed.memory else math.nan
            advice = (
                f"The fastest single change that fits: {key} = {value} ({need:,.1f} GiB, "
                f"step {fixed.step_time_s:,.2f} s)"
            )
        problems.append(
            Problem(
                "parallel.pp" if plan.pp < m.layers else "training.recompute",
                f"needs {mem.describe()}. {advice}",
            )
        )
    elif mem.status == "tight":
        warnings.append(
            f"memory is tight: {mem.describe()}; the estimate's uncertainty "
            f"spans the capacity, so the plan may or may not fit"
        )
    if problems:
        return StepResult(n, False, tuple(problems), plan=plan, memory=mem)

    # ---- compute ------------------------------------------------------------------------
    ct = compute_times(s, plan, counts, gpu)
    compute, imbalance, bubble = ct.compute_s, ct.imbalance_s, ct.bubble_s
    t_fwd, t_bwd, mb = ct.forward_s, ct.backward_s, plan.micro_batches
    gemm_speedup = ct.gemm_speedup
    peak = gpu.bf16_dense_tflops * 1e12 * tr.compute_efficiency
    seq = m.seq_len
    tokens_mb = plan.micro_batch * seq
    layer_attn = _layer_flops_per_token(counts, seq)[1]
    split = plan.tp * plan.cp

    # ---- communication ------------------------------------------------------------------
    fab = DimensionFabric(s, plan.layout, ecmp_seed)
    # EP, expert grads
    efab = DimensionFabric(s, plan.expert_layout, ecmp_seed) if plan.folded else fab
    # the gradient reduction's fabric: an OCS that reconfigures per phase reduces on ring
    # circuits, paying ocs.reconfig_ms at each switch (_ocs_phases)
    rfab, refab, reconfig_s, phase_note = _ocs_phases(s, plan, fab, efab, ecmp_seed)
    comm: dict[str, float] = {}
    exposed: dict[str, float] = {}
    detail: dict[str, str] = {}
    h = m.hidden
    act = plan.micro_batch * (seq / plan.cp) * h * BF16
    full_rc = plan.recompute == "full"
    if plan.tp > 1 or plan.expert_tp > 1:
        comm["tp"], detail["tp"] = _tensor_parallel_s(s, plan, counts, fab, efab)
        exposed["tp"] = comm["tp"] * (1.0 - tr.tp_overlap)
    if plan.cp > 1:
        d_head = m.head_dim or h // m.heads
        kv_width = (
            m.heads * (2 * d_head + m.rope_head_dim) if m.kv_lora_rank else 2 * m.kv_heads * d_head
        )
        kv = plan.micro_batch * seq * kv_width * BF16 / plan.tp
        ag = fab.collective("cp", "allgather", kv)
        rs = fab.collective("cp", "reducescatter", kv)
        per_layer = (2 + (1 if full_rc else 0)) * ag.time_s + rs.time_s
        attn_time = (
            layer_attn * (1 + (1 / 3 if plan.recompute != "none" else 0)) * tokens_mb / split / peak
        )
        comm["cp"] = per_layer * plan.layers_per_stage * mb
        exposed["cp"] = max(0.0, per_layer - attn_time) * plan.layers_per_stage * mb
        detail["cp"] = _describe(ag, plan.layers_per_stage * mb * (2 + full_rc), kv)
    if plan.ep > 1:
        moe_stage = plan.layers_per_stage * counts.moe_layers / m.layers
        tokens_local = plan.micro_batch * seq / plan.cp / plan.tp
        copies = dispatch_copies(s, plan.ep)
        # forward dispatch in FP8 with fp8 training (DeepSeek-V3 3.3.2), the rest in BF16
        elem = (1.0 + 3 * BF16) / 4 if tr.precision == "fp8" else BF16
        a2a_bytes = tokens_local * copies * h * elem * dispatch_padding(s)
        a2a = efab.collective("ep", "alltoall", a2a_bytes)
        n_a2a = (4 + (2 if full_rc else 0)) * moe_stage * mb
        per_call = a2a.time_s
        fanout = ""
        if tr.ep_dispatch == "per_node" and plan.ep > s.cluster.nvlink_domain:
            # DeepEP forwards each node's copy over NVLink to its destination GPUs while the
            # RDMA leg runs: the call takes the longer of the two
            fan_bytes = tokens_local * fanout_copies(s, plan.ep) * h * elem * dispatch_padding(s)
            fan_s = fan_bytes / (gpu.nvlink_GBps * 1e9)
            per_call = max(per_call, fan_s)
            fanout = f"; NVLink fan-out {fan_bytes / 2**20:,.1f} MiB in {fan_s * 1e3:,.2f} ms"
        comm["ep"] = n_a2a * per_call
        exposed["ep"] = comm["ep"] * (1.0 - tr.ep_overlap)
        detail["ep"] = _describe(a2a, n_a2a, a2a_bytes) + fanout
    pp_network = False
    if plan.pp > 1:
        p2p_bytes = act / plan.tp
        p2p = fab.p2p(p2p_bytes)
        n_p2p = 2 * (plan.vpp * mb + plan.pp - 1)
        comm["pp"] = exposed["pp"] = n_p2p * p2p.time_s
        pp_network = p2p.bottleneck != "nvlink"
        detail["pp"] = _describe(p2p, n_p2p, p2p_bytes)
    for dim in ("tp", "cp", "ep"):  # degrees that do not tile the NVLink domain
        if dim in detail:
            g = (efab if dim == "ep" else fab).group(dim)
            if g.straddling_groups:
                detail[dim] += (
                    f"; {g.straddling_groups:,} of {g.concurrent_groups:,} groups "
                    f"straddle NVLink domains (timed: the slowest)"
                )
    # data parallel: non-expert weights over dp x cp, expert weights over (dp x cp) / ep;
    # gradients in their reduction dtype, weights gathered in theirs (FP8 with
    # fp8_param_gather); exposure by the bucket mechanism, or the training.dp_overlap override
    dp_group = plan.dp * plan.cp
    edp_group = plan.edp
    p_dense, p_expert = mem.params_dense, mem.params_expert
    w_b, g_b, _, _ = model_state_bytes(s)
    ag_b = w_b if tr.fp8_param_gather else BF16
    auto = tr.dp_overlap == "auto"
    ov = 0.0 if auto else float(tr.dp_overlap)
    dp_total = dp_exposed = 0.0
    dp_detail = []
    for dim, params, group in (("dp", p_dense, dp_group), ("edp", p_expert, edp_group)):
        if params <= 0 or group <= 1:
            continue
        fab_d = refab if dim == "edp" else rfab
        if plan.zero_stage == 0:
            allr = _buckets(fab_d, dim, "allreduce", params, group, g_b, plan.vpp)
            dp_total += allr.total_s
            dp_exposed += (
                allr.exposed_s(t_bwd, plan.pp)
                if auto
                else max(allr.last_s, allr.total_s - ov * t_bwd)
            )
            dp_detail.append(
                _describe(allr.call, allr.n_full + (allr.rest_s > 0), allr.bucket_params * g_b)
            )
        elif plan.zero_stage in (1, 2):
            red = _buckets(fab_d, dim, "reducescatter", params, group, g_b, plan.vpp)
            gat = _buckets(fab_d, dim, "allgather", params, group, ag_b, plan.vpp)
            dp_total += red.total_s + gat.total_s
            if auto:
                dp_exposed += red.exposed_s(t_bwd, plan.pp) + gat.exposed_s(t_fwd, plan.pp)
            else:
                dp_exposed += max(red.last_s, red.total_s - ov * t_bwd) + max(
                    gat.last_s, gat.total_s - ov * t_fwd
                )
            dp_detail.append("reduce-scatter + all-gather: " + _describe(red.call, 1, params * g_b))
        else:  # ZeRO-3 / FSDP: gather weights twice and scatter gradients per micro-batch
            red = _buckets(fab_d, dim, "reducescatter", params, group, g_b)
            gat = _buckets(fab_d, dim, "allgather", params, group, ag_b)
            t = mb * (2 * gat.total_s + red.total_s)
            dp_total += t
            if auto:  # per micro-batch: gathers behind the forward, gather + scatter backward
                both = _Buckets(
                    gat.n_full,
                    gat.full_s + red.full_s,
                    gat.rest_s + red.rest_s,
                    gat.bucket_params,
                    gat.call,
                    gat.rest_params,
                )
                dp_exposed += mb * (gat.exposed_s(t_fwd) + both.exposed_s(t_bwd))
            else:
                dp_exposed += max(red.last_s, t - ov * compute)
            dp_detail.append(
                "per micro-batch 2 all-gathers + reduce-scatter: "
                + _describe(red.call, 1, params * g_b)
            )
    if dp_total > 0 and reconfig_s > 0:
        # the ring circuits are up only after the backward's last cross-block transfer and
        # go before the next forward: nothing of the reduction hides, and the two
        # reconfigurations add their time
        dp_total += reconfig_s
        dp_exposed = dp_total
        dp_detail.append(phase_note)
    if dp_total > 0:
        comm["dp"], exposed["dp"] = dp_total, dp_exposed
        detail["dp"] = "; ".join(dp_detail)

    offload = offload_time_s(s, plan, mem, server, ct) if tr.offload_layers else 0.0
    path = offload_path(s, server)[0] if tr.offload_layers else None
    optimizer = optimizer_step_s(s, plan, mem, gpu) if auto else 0.0
    # scale-out vs scale-up: a dimension whose (slowest) group spans NVLink domains runs on
    # the scale-out network; pipeline sends by the link their slowest boundary crosses
    scale_out = tuple(
        d
        for d in exposed
        if (d == "pp" and pp_network) or (d != "pp" and _crosses_domains(fab, efab, d, plan))
    )
    exposed_total = sum(exposed.values())
    step = compute + imbalance + bubble + offload + optimizer + exposed_total
    # a flapping link stalls every rank: the network collectives already stretch by
    # 1 / (1 - f); the rest of the step waits as long in proportion
    base = fab.base
    f = base.stall_fraction if scale_out else 0.0
    stall = (step - sum(exposed[d] for d in scale_out)) * f / (1.0 - f)
    step += stall
    warnings += [n.removeprefix("misconfiguration: ") for n in base.notes() if "misconfig" in n]
    tokens = float(plan.sequences_per_step * seq)  # the batch computed (warned when rounded)
    flops = counts.model_flops_per_token(seq) * tokens
    mfu = flops / (n * gpu.bf16_dense_tflops * 1e12 * step)
    p50 = p99 = step
    if s.tails.enabled and ecmp_seed is None:
        per_seed = _exposed_per_seed(s, cat, fab, exposed)
        p50, p99 = step_quantiles_s(
            step,
            compute + imbalance,
            n,
            tuple((exposed[d], per_seed.get(d, ())) for d in sorted(exposed)),
            s.tails,
        )
    return StepResult(
        n_gpus=n,
        feasible=True,
        problems=(),
        plan=plan,
        step_time_s=step,
        step_time_p50_s=p50,
        step_time_p99_s=p99,
        compute_s=compute,
        imbalance_s=imbalance,
        bubble_s=bubble,
        exposed_comm_s=exposed_total,
        comm_s=comm,
        exposed_s=exposed,
        comm_detail=detail,
        mfu=mfu,
        tokens_per_s=tokens / step,
        tokens_per_step=tokens,
        model_flops_per_step=flops,
        memory=mem,
        mfu_precision_peak=mfu / gemm_speedup,
        warnings=tuple(warnings),
        scale_out_dims=scale_out,
        precision=tr.precision,
        offload_s=offload,
        optimizer_s=optimizer,
        stall_s=stall,
        ocs_reconfig_s=reconfig_s if dp_total > 0 else 0.0,
        moe_overhead_s=ct.moe_overhead_s,
        offload_via=f"{path.target}: {path.via}" if path else "",
        offload_GBps=path.GBps if path else 0.0,
    )


#: What the step's exposed time per ECMP seed reads: every section but ``tails`` (the
#: deterministic step's inputs; the tails only say whether to draw, checked before).
SEED_READS = Reads("exposed per ECMP seed", tuple(k for k in SECTIONS if k != "tails"))
_SEED_EXPOSED = Lru(64, "training.step._SEED_EXPOSED", key=f"SEED_READS {SEED_READS.names}")


def _exposed_per_seed(
    s: Scenario, cat: Catalog, fab: DimensionFabric, exposed: dict[str, float]
) -> dict[str, tuple[float, ...]]:
    """Each dimension's exposed time at each ECMP seed the solver hashes ({} when none).

    Static ECMP hashing is the one policy the solver draws several hashes for
    (:data:`~fabric_model.collectives.context.ECMP_SEEDS`); the step is timed again at each.
    """
    if not s.tails.ecmp_redraw or fab.base.policy != "ecmp":
        return {}

    def make() -> dict[str, tuple[float, ...]]:
        runs = [training_step(s, cat, ecmp_seed=k).exposed_s for k in range(ECMP_SEEDS)]
        return {d: tuple(r.get(d, 0.0) for r in runs) for d in exposed}

    return _SEED_EXPOSED.get(SEED_READS.key(s), make)


def _ocs_phases(
    s: Scenario,
    plan: Plan,
    fab: DimensionFabric,
    efab: DimensionFabric,
    ecmp_seed: int | None = None,
) -> tuple[DimensionFabric, DimensionFabric, float, str]:
    """Return the reduction's fabrics, its reconfiguration time per step and a note.

    ``ocs.reconfigure = phase`` on an OCS fabric: the forward and backward (expert
    all-to-all, pipeline sends, any TP or CP group that leaves a block) run on
    ``ocs.circuits`` and the data-parallel reduction on ring circuits
    (:func:`~fabric_model.scenario.ocs.reduction_scenario`). When both need circuits
    between blocks and the two sets differ, each step switches twice (to the ring before
    the reduction, back before the next forward: ``assets/ocs.yaml``
    ``switches_per_step``), ``2 x ocs.reconfig_ms``; when only one of them crosses blocks,
    its circuits stay up (0 s). Every other scenario reduces on ``fab`` and ``efab``.
    """
    red = reduction_scenario(s)
    if red is s:
        return fab, efab, 0.0, ""
    rfab = DimensionFabric(red, plan.layout, ecmp_seed)
    refab = DimensionFabric(red, plan.expert_layout, ecmp_seed) if plan.folded else rfab
    block = int(fab.base.topology.params["block_gpus"])

    def crosses(layout: Layout, dim: str) -> bool:
        if layout.size(dim) <= 1:
            return False
        ranks = layout.offsets(dim)[:, None] + layout.members(dim)[None, :]
        blocks = ranks // block
        return bool((blocks.min(axis=1) != blocks.max(axis=1)).any())

    forward = any(crosses(plan.layout, d) for d in ("tp", "cp", "pp")) or crosses(
        plan.expert_layout, "ep"
    )
    reduce = crosses(plan.layout, "dp") or (plan.ep > 1 and crosses(plan.expert_layout, "edp"))
    if not reduce:  # the reduction stays inside blocks: the forward's circuits stay up
        return fab, efab, 0.0, ""
    if not forward:  # nothing but the reduction leaves a block: the ring stays up
        return rfab, refab, 0.0, ""
    switches = int(OCS_DATA["reconfiguration"]["switches_per_step"]["value"])
    ms = reconfig_ms(s)
    note = (
        f"per phase: {s.ocs.circuits} circuits for the forward and backward, ring circuits for "
        f"the reduction, {switches} reconfigurations of {ms:g} ms per step (the reduction "
        f"cannot overlap the backward)"
    )
    return rfab, refab, switches * ms / 1000.0, note


def _crosses_domains(fab: DimensionFabric, efab: DimensionFabric, dim: str, plan: Plan) -> bool:
    """Whether the slowest group of ``dim`` spans more than one NVLink domain.

    Data parallelism counts its dense (``dp``) and expert (``edp``) groups, tensor
    parallelism its expert-TP groups; the expert groups are those of the expert grid
    (``efab``).
    """
    groups = {"dp": [(fab, "dp")], "ep": [(efab, "ep")], "tp": [(fab, "tp")]}.get(dim, [(fab, dim)])
    if dim == "dp" and plan.ep > 1:
        groups.append((efab, "edp"))
    if dim == "tp" and plan.expert_tp > 1:
        groups.append((efab, "tp"))
    for f, d in groups:
        g = f.group(d)
        if g.n_ranks > 1 and (g.n_domains > 1 or g.straddling_groups):
            return True
    return False


def step_or_raise(scenario: Scenario) -> StepResult:
    """:func:`training_step` that raises for an infeasible plan (for the command line)."""
    result = training_step(scenario)
    if not result.feasible:
        first = result.problems[0]
        raise InfeasiblePlanError(first.key, result.reason)
    return result


class InfeasiblePlanError(FabricModelError):
    """The parallel plan cannot run on this cluster (the message lists every reason)."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(message)
