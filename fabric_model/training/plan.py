"""The parallel plan of a step: its degrees, the rules it must keep, and what a kept plan reads.

:func:`resolve_plan` turns the scenario's ``parallel.*`` and ``training.*`` keys into a
:class:`Plan` (``parallel.dp = auto``, the micro-batch count, the schedule, the expert grid of
``parallel.etp``) and lists every rule the plan breaks as a :class:`Problem` naming the key to
change. :class:`StepInputs` is what the step's later stages
(:mod:`fabric_model.training.step`) read once the plan and its memory have passed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fabric_model.catalog import Gpu, Server
from fabric_model.scenario import Scenario
from fabric_model.scenario.shapes import ShapeCounts
from fabric_model.scenario.workload import rank_order
from fabric_model.training.layout import Layout
from fabric_model.training.memory import (
    MemoryBreakdown,
    parse_pipeline_layout,
    pipeline_layout_problem,
)
from fabric_model.training.schedules import resolve_schedule, schedule_problems

__all__ = ["Plan", "Problem", "StepInputs", "order_problems", "resolve_plan"]


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
    #: Rank order (``parallel.order`` resolved: :func:`~fabric_model.scenario.workload.
    #: rank_order`), innermost first.
    order: str = "tp-cp-ep-dp-pp"

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
            return Layout(self.tp, self.cp, 1, self.pp, self.dp, self.order)
        return Layout(self.tp, self.cp, self.ep, self.pp, self.dp // self.ep, self.order)

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
        return Layout.expert_grid(
            self.expert_tp, self.ep, self.pp, self.tp * self.cp * self.dp, self.order
        )

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
class StepInputs:
    """A plan that passed every check, and what the step's later stages read of it.

    Built by the plan and memory stages of :func:`~fabric_model.training.step.training_step`;
    ``warnings`` are theirs (a rounded batch, tight memory).
    """

    scenario: Scenario
    plan: Plan
    counts: ShapeCounts
    gpu: Gpu
    server: Server
    memory: MemoryBreakdown
    warnings: tuple[str, ...] = ()


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
        order=rank_order(par, tr),
    )
    problems += order_problems(plan)
    return plan, problems


def order_problems(plan: Plan) -> list[Problem]:
    """List what the rank order cannot lay out: a folded expert grid off its stages' GPUs.

    Data parallelism outermost (``tp-cp-ep-pp-dp``), a pipeline stage's GPUs are not
    consecutive, and the expert grid (:meth:`~fabric_model.training.layout.Layout.
    expert_grid`, the same order) covers the attention's stage only when its
    ``etp x ep`` block is the attention's ``tp x cp`` block: Megatron-Core asserts "When
    not using pp-last rank ordering, the data parallel size of the attention and moe layers
    must be the same" (``parallel_state.py``, core_v0.15.0).
    """
    if plan.order.endswith("pp") or plan.pp == 1 or not plan.folded:
        return []
    if plan.expert_tp * plan.ep == plan.tp * plan.cp:
        return []
    return [
        Problem(
            "parallel.order",
            f"{plan.order} (data parallelism outermost) needs etp x ep = tp x cp for the "
            f"experts of a pipeline stage to sit on its GPUs ({plan.expert_tp} x {plan.ep} "
            f"!= {plan.tp} x {plan.cp}, as Megatron-Core asserts); set parallel.order = "
            "tp-cp-ep-dp-pp or auto",
        )
    ]


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
