"""Scaling sweeps and the parallel-plan search: maps over independent scenario points.

Every point is a pure function of one :class:`~fabric_model.scenario.Scenario`
(:func:`evaluate_point`), so a sweep or a search is ``map(evaluate, scenarios)``: pass
``map_fn`` (e.g. a ``concurrent.futures`` executor's ``map``) to spread points over
processes or a cluster without changing anything else, and ``progress`` to hear about each
finished point.

Scaling modes (Narayanan et al. 2021 call them weak and strong scaling):

- ``weak``: the tokens per data-parallel replica stay those of the scenario, so the global
  batch grows with the data-parallel degree;
- ``strong``: the global batch stays ``training.global_batch_tokens``; replicas get fewer
  micro-batches as the cluster grows, until a replica has none left (infeasible).

Scaling efficiency at ``n`` GPUs = (tokens/s per GPU at ``n``) / (tokens/s per GPU at the
sweep's smallest feasible size).
"""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fabric_model.catalog import load_catalog
from fabric_model.cost import bill_of_materials
from fabric_model.errors import FabricModelError, ScenarioError
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.training.fabric import DimensionFabric
from fabric_model.training.memory import memory_per_gpu
from fabric_model.training.shapes import shape_counts
from fabric_model.training.step import Plan, StepResult, resolve_plan, training_step

__all__ = ["SCALING_MODES", "PlanCandidate", "SweepPoint", "evaluate_point", "expert_degrees",
           "search_plans", "sweep", "sweep_scenarios"]

SCALING_MODES = ("weak", "strong")
MapFn = Callable[[Callable[[Scenario], Any], Iterable[Scenario]], Iterator[Any]]
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class SweepPoint:
    """One cluster size of a sweep."""

    n_gpus: int
    step: StepResult
    network_capex_usd: float
    scaling_efficiency: float = math.nan
    error: str = ""

    @property
    def feasible(self) -> bool:
        """Whether the design builds and the plan runs."""
        return not self.error and self.step.feasible

    @property
    def reason(self) -> str:
        """Why the point is infeasible ('' when feasible)."""
        return self.error or self.step.reason

    def to_dict(self) -> dict[str, Any]:
        """Return the ``sweep`` JSON contract plus feasibility and the step breakdown."""
        st = self.step
        return {
            "n_gpus": self.n_gpus,
            "step_time_s": st.step_time_s,
            "mfu": st.mfu,
            "scaling_efficiency": self.scaling_efficiency,
            "network_capex_usd": self.network_capex_usd,
            "feasible": self.feasible,
            "reason": self.reason,
            "tokens_per_s": st.tokens_per_s,
            "global_batch_tokens": st.tokens_per_step,
            "compute_s": st.compute_s,
            "bubble_s": st.bubble_s,
            "exposed_comm_s": st.exposed_comm_s,
            "exposed_s": dict(st.exposed_s),
            "plan": st.plan.label() if st.plan else "",
        }


#: Network capex per (cluster, fabric, costs): a sweep point's price does not depend on the
#: model or the plan, so re-sweeping another model costs no bill of materials.
_CAPEX: OrderedDict[tuple[Any, ...], float] = OrderedDict()
_CAPEX_SIZE = 512


def _network_capex_usd(scenario: Scenario, step: StepResult) -> float:
    key = (scenario.cluster, scenario.fabric, scenario.costs)
    if key not in _CAPEX:
        topo = DimensionFabric(scenario, step.plan.layout).base.topology \
            if step.feasible and step.plan else None
        _CAPEX[key] = bill_of_materials(scenario, topology=topo).capex_usd
        if len(_CAPEX) > _CAPEX_SIZE:
            _CAPEX.popitem(last=False)
    return _CAPEX[key]


def evaluate_point(scenario: Scenario) -> SweepPoint:
    """Step and network capex of one scenario (a design that cannot be built says why)."""
    n = scenario.cluster.n_gpus
    try:
        step = training_step(scenario)
        capex = _network_capex_usd(scenario, step)
    except FabricModelError as exc:
        return SweepPoint(n, StepResult(n, False, ()), math.nan, error=str(exc))
    return SweepPoint(n, step, capex)


def sweep_scenarios(scenario: Scenario, gpus: Sequence[int],
                    scaling: str = "weak") -> list[Scenario | str]:
    """Return the scenario of each size (or why that size cannot be expressed)."""
    if scaling not in SCALING_MODES:
        raise ScenarioError("scaling", scaling, "must be one of " + ", ".join(SCALING_MODES))
    base_plan, _ = resolve_plan(scenario)
    m, tr = scenario.model, scenario.training
    per_replica = tr.global_batch_tokens / base_plan.dp if base_plan else \
        m.seq_len * tr.micro_batch
    inner = scenario.parallel.tp * scenario.parallel.pp * scenario.parallel.cp
    out: list[Scenario | str] = []
    for n in gpus:
        over: dict[str, Any] = {"cluster.n_gpus": n, "parallel.dp": "auto"}
        if scaling == "weak" and n % inner == 0:
            over["training.global_batch_tokens"] = max(1, round(per_replica * (n // inner)))
        try:
            out.append(apply_overrides(scenario, over))
        except FabricModelError as exc:
            out.append(str(exc))
    return out


def sweep(scenario: Scenario, gpus: Sequence[int], *, scaling: str = "weak",
          map_fn: MapFn = map, progress: Progress | None = None) -> list[SweepPoint]:
    """Evaluate ``scenario`` at each GPU count (see the module docstring)."""
    points = sweep_scenarios(scenario, gpus, scaling)
    todo = [p for p in points if isinstance(p, Scenario)]
    results: list[SweepPoint] = []
    for i, res in enumerate(map_fn(evaluate_point, todo)):
        results.append(res)
        if progress:
            progress(i + 1, len(todo))
    done = iter(results)
    out = []
    for n, p in zip(gpus, points, strict=True):
        if isinstance(p, str):
            out.append(SweepPoint(n, StepResult(n, False, ()), math.nan, error=p))
        else:
            out.append(next(done))
    base = next((p for p in out if p.feasible), None)
    if base is None:
        return out
    per_gpu0 = base.step.tokens_per_s / base.n_gpus
    return [replace(p, scaling_efficiency=p.step.tokens_per_s / p.n_gpus / per_gpu0)
            if p.feasible else p for p in out]


# ---------------------------------------------------------------------------- search


@dataclass(frozen=True)
class PlanCandidate:
    """A plan the search evaluated: its scenario overrides and result."""

    overrides: dict[str, Any]
    step: StepResult

    @property
    def label(self) -> str:
        """Plan label with recomputation and micro-batch."""
        st = self.step
        if st.plan is None:
            return str(self.overrides)
        return (f"{st.plan.label()} mb{st.plan.micro_batch} {st.plan.recompute} "
                f"ZeRO-{st.plan.zero_stage}")


def _powers(limit: int) -> list[int]:
    return [2**i for i in range(int(math.log2(max(1, limit))) + 1)]


def expert_degrees(scenario: Scenario, dp: int | None = None) -> list[int]:
    """Return the expert-parallel degrees a plan may use.

    Powers of two dividing the expert count (and ``dp``, the data-parallel degree, when
    given); ``[1]`` for a dense model.
    """
    m = scenario.model
    if m.kind != "moe":
        return [1]
    return [e for e in _powers(m.n_experts)
            if m.n_experts % e == 0 and (dp is None or dp % e == 0)]


def plan_space(scenario: Scenario) -> list[dict[str, Any]]:
    """Candidate plans: power-of-two degrees that divide the cluster and fit the shape."""
    s, m = scenario, scenario.model
    n = s.cluster.n_gpus
    tps = [t for t in _powers(min(s.cluster.nvlink_domain, m.heads)) if m.heads % t == 0]
    pps = _powers(min(64, m.layers))
    cps = [c for c in _powers(max(1, m.seq_len // 4096)) if c <= 32 and m.seq_len % c == 0]
    eps = expert_degrees(s)
    out = []
    for tp, pp, cp, ep, vpp, rc, mb in itertools.product(
            tps, pps, cps, eps, (1, 2, 4), ("selective", "full"), (1, 2)):
        inner = tp * pp * cp
        if n % inner or (vpp > 1 and pp == 1) or pp * vpp > m.layers:
            continue
        dp = n // inner
        if dp % ep:
            continue
        out.append({"parallel.tp": tp, "parallel.pp": pp, "parallel.cp": cp, "parallel.ep": ep,
                    "parallel.vpp": vpp, "parallel.dp": "auto", "training.recompute": rc,
                    "training.micro_batch": mb})
    return out


def _lower_bound_s(s: Scenario) -> float:
    """Compute plus bubble with no communication (inf when the plan cannot run)."""
    plan, problems = resolve_plan(s)
    if plan is None or problems:
        return math.inf
    counts = shape_counts(s.model)
    gpu = load_catalog().gpu(s.cluster.gpu)
    if not memory_per_gpu(s, plan, counts, gpu.hbm_gib).fits:
        return math.inf
    peak = gpu.bf16_dense_tflops * 1e12 * s.training.compute_efficiency
    tokens_mb = plan.micro_batch * s.model.seq_len
    flops = counts.model_flops_per_token(s.model.seq_len) * (
        4 / 3 if plan.recompute == "full" else 1.0)
    t_mb = flops * tokens_mb / s.cluster.n_gpus * plan.dp / peak
    return (plan.micro_batches + (plan.pp - 1) / plan.vpp) * t_mb


def _plan_of(st: StepResult) -> Plan | None:
    return st.plan


def search_plans(scenario: Scenario, *, top: int = 5, shortlist: int = 16,
                 map_fn: MapFn = map, progress: Progress | None = None) -> list[PlanCandidate]:
    """Return the fastest feasible plans for the scenario's model and cluster, best first.

    Every candidate of :func:`plan_space` is screened by memory and a communication-free
    lower bound (compute and bubble); the ``shortlist`` best are modelled in full on the
    fabric and the ``top`` fastest feasible ones returned. Never returns an infeasible plan
    (an empty list when nothing fits).
    """
    space = plan_space(scenario)
    screened = []
    for over in space:
        try:
            cand = apply_overrides(scenario, over)
        except FabricModelError:
            continue
        bound = _lower_bound_s(cand)
        if math.isfinite(bound):
            screened.append((bound, over, cand))
    screened.sort(key=lambda t: t[0])
    chosen = screened[:shortlist]
    results: list[PlanCandidate] = []
    for i, st in enumerate(map_fn(training_step, [c for _, _, c in chosen])):
        results.append(PlanCandidate(chosen[i][1], st))
        if progress:
            progress(i + 1, len(chosen))
    feasible = [r for r in results if r.step.feasible]
    feasible.sort(key=lambda r: r.step.step_time_s)
    return feasible[:top]
