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

The step is a pipeline of stages, each a function of what the ones before it return
(:func:`_training_step`): the **plan** (:func:`_plan_stage`: resolve the degrees and refuse
what cannot run, :mod:`.plan`), its **memory** (:func:`_memory_stage`: per GPU, refusing what
does not fit, :mod:`.memory`), the **compute** and the **bubble** (:mod:`.compute`), the
**communication** of each dimension (:mod:`.comm`, one term per dimension and an OCS fabric's
phases), the **host-side** terms (:func:`_host_stage`: activation offload, :mod:`.offload`,
and the optimizer step), the **tails** (:mod:`.tails`) and the **result**
(:mod:`.result`: the totals and :class:`StepResult`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from fabric_model.caching import Lru, Reads
from fabric_model.catalog import Catalog, Gpu, Server, load_catalog
from fabric_model.collectives.context import ECMP_SEEDS, routing_policy
from fabric_model.collectives.model import AlgorithmUnavailableError
from fabric_model.errors import FabricModelError
from fabric_model.plant.design import job_scenario
from fabric_model.scenario import SECTIONS, Scenario, apply_overrides
from fabric_model.scenario.shapes import ShapeCounts, shape_counts
from fabric_model.training.comm import (
    BF16,
    BUCKET_MIN_PARAMS,
    BUCKET_PARAMS_PER_DP,
    Communication,
    communication,
)
from fabric_model.training.comm import Buckets as _Buckets  # noqa: F401  (the tests' name)
from fabric_model.training.comm import (  # noqa: F401  (the tests' name)
    tensor_parallel_s as _tensor_parallel_s,
)
from fabric_model.training.compute import (
    HBM_EFFICIENCY,
    ComputeTimes,
    compute_times,
    optimizer_step_s,
    stage_compute,
    with_bubble,
)
from fabric_model.training.memory import memory_per_gpu
from fabric_model.training.moe import dispatch_copies, fanout_copies
from fabric_model.training.offload import host_memory_problem, offload_path, offload_time_s
from fabric_model.training.plan import Plan, Problem, StepInputs, resolve_plan
from fabric_model.training.result import (
    DIMS,
    HostTerms,
    StepResult,
    StepTotals,
    assemble,
    step_totals,
)
from fabric_model.training.schedules import nearest_batches
from fabric_model.training.tails import step_quantiles_s

__all__ = [
    "BF16",
    "BUCKET_MIN_PARAMS",
    "BUCKET_PARAMS_PER_DP",
    "DIMS",
    "HBM_EFFICIENCY",
    "ComputeTimes",
    "InfeasiblePlanError",
    "Plan",
    "Problem",
    "StepResult",
    "compute_times",
    "dispatch_copies",
    "fanout_copies",
    "memory_fixes",
    "offload_time_s",
    "optimizer_step_s",
    "resolve_plan",
    "step_or_raise",
    "training_step",
]


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


@dataclass(frozen=True)
class _Planned:
    """The plan stage's output: the resolved plan, the parts it runs on, its problems so far."""

    scenario: Scenario
    plan: Plan
    counts: ShapeCounts
    gpu: Gpu
    server: Server
    problems: tuple[Problem, ...]
    warnings: tuple[str, ...]


def _training_step(
    scenario: Scenario,
    catalog: Catalog | None,
    *,
    suggest: bool,
    ecmp_seed: int | None,
) -> StepResult:
    """Run the step's stages: plan, memory, compute, bubble, communication, host, tails, result."""
    s = job_scenario(scenario) if scenario.fabric.topology == "hybrid" else scenario
    cat = catalog or load_catalog()
    planned = _plan_stage(s, cat)
    if isinstance(planned, StepResult):
        return planned
    inputs = _memory_stage(planned, suggest)
    if isinstance(inputs, StepResult):
        return inputs
    work = stage_compute(s, inputs.plan, inputs.counts, inputs.gpu)
    ct = with_bubble(inputs.plan, work)
    comm = communication(inputs, ct, ecmp_seed)
    host = _host_stage(inputs, ct)
    totals = step_totals(ct, comm, host)
    quantiles = _tails_stage(inputs, cat, ct, comm, totals, ecmp_seed)
    return assemble(inputs, ct, comm, host, totals, quantiles)


def _plan_stage(s: Scenario, cat: Catalog) -> _Planned | StepResult:
    """Resolve the plan (:func:`~.plan.resolve_plan`) and refuse what the GPU cannot run.

    Reads the scenario and the catalog's GPU and server. Returns the refusal when the
    degrees do not multiply to the GPU count (nothing else can be resolved then); otherwise
    the plan with every problem so far (the plan rules, a precision the GPU has no tensor
    cores for) and the warning of a global batch the plan rounds down.
    """
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
    return _Planned(s, plan, counts, gpu, server, tuple(problems), tuple(warnings))


def _memory_stage(planned: _Planned, suggest: bool) -> StepInputs | StepResult:
    """Model the memory per GPU (:func:`~.memory.memory_per_gpu`) and refuse what does not fit.

    Reads the plan stage's output. Adds the problems of offloaded activations the target
    cannot hold and of a plan over the GPU's HBM (with ``suggest``, naming the fastest single
    change that fits: :func:`memory_fixes`), and the warning of tight memory. Returns the
    refusal (with the plan and the memory) when any problem stands, else the step's inputs.
    """
    s, plan, gpu, server = planned.scenario, planned.plan, planned.gpu, planned.server
    m, tr = s.model, s.training
    problems, warnings = list(planned.problems), list(planned.warnings)
    mem = memory_per_gpu(s, plan, planned.counts, gpu.hbm_gib)
    if tr.offload_layers:
        host_problem = host_memory_problem(s, mem, server)
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
        return StepResult(s.cluster.n_gpus, False, tuple(problems), plan=plan, memory=mem)
    return StepInputs(s, plan, planned.counts, gpu, server, mem, tuple(warnings))


def _host_stage(inputs: StepInputs, ct: ComputeTimes) -> HostTerms:
    """Time the step's terms off the network: activation offload and the optimizer step.

    Reads the step's inputs and its compute (what the offload's copies hide behind): the
    offload only with ``training.offload_layers`` (:func:`~.offload.offload_time_s`), the
    optimizer step only with ``training.dp_overlap = auto`` (:func:`~.compute.
    optimizer_step_s`; a fixed overlap is the older model without it).
    """
    s, plan, mem = inputs.scenario, inputs.plan, inputs.memory
    tr = s.training
    offload = offload_time_s(s, plan, mem, inputs.server, ct) if tr.offload_layers else 0.0
    path = offload_path(s, inputs.server)[0] if tr.offload_layers else None
    optimizer = optimizer_step_s(s, plan, mem, inputs.gpu) if tr.dp_overlap == "auto" else 0.0
    return HostTerms(offload, optimizer, path)


def _tails_stage(
    inputs: StepInputs,
    cat: Catalog,
    ct: ComputeTimes,
    comm: Communication,
    totals: StepTotals,
    ecmp_seed: int | None,
) -> tuple[float, float]:
    """Return the step's p50 and p99 over iterations (both the step without ``tails``).

    Reads ``tails.*``, the step's total, its compute and each dimension's exposed time, and
    (under static ECMP with ``tails.ecmp_redraw``) the same step at each of the solver's
    hash seeds (:func:`_exposed_per_seed`); :func:`~.tails.step_quantiles_s` draws the
    slowest rank and the jitter. The seeds' own steps (``ecmp_seed``) have no tails.
    """
    s, step = inputs.scenario, totals.step_s
    if not s.tails.enabled or ecmp_seed is not None:
        return step, step
    exposed = comm.exposed_s
    per_seed = _exposed_per_seed(s, cat, comm, exposed)
    return step_quantiles_s(
        step,
        ct.compute_s + ct.imbalance_s,
        s.cluster.n_gpus,
        tuple((exposed[d], per_seed.get(d, ())) for d in sorted(exposed)),
        s.tails,
    )


#: What the step's exposed time per ECMP seed reads: every section but ``tails`` (the
#: deterministic step's inputs; the tails only say whether to draw, checked before).
SEED_READS = Reads("exposed per ECMP seed", tuple(k for k in SECTIONS if k != "tails"))
_SEED_EXPOSED = Lru(64, "training.step._SEED_EXPOSED", key=f"SEED_READS {SEED_READS.names}")


def _exposed_per_seed(
    s: Scenario, cat: Catalog, comm: Communication, exposed: dict[str, float]
) -> dict[str, tuple[float, ...]]:
    """Each dimension's exposed time at each ECMP seed the solver hashes ({} when none).

    Static ECMP hashing is the one policy the solver draws several hashes for
    (:data:`~fabric_model.collectives.context.ECMP_SEEDS`); the step is timed again at each.
    """
    if not s.tails.ecmp_redraw or routing_policy(s, cat) != "ecmp":
        return {}

    def make() -> dict[str, tuple[float, ...]]:
        runs = [training_step(s, cat, ecmp_seed=k).exposed_s for k in range(ECMP_SEEDS)]
        return {d: tuple(r.get(d, 0.0) for r in runs) for d in exposed}

    return _SEED_EXPOSED.get(SEED_READS.key(s), make)


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
