"""A job's training step on a shared cluster, and the step when its traffic slows.

:func:`job_step` answers for one job alone on a contiguous placement (a fabric built for it):
the training model (:func:`fabric_model.training.step.training_step`) on the job's GPU count,
model and plan. :func:`step_with_factors` stretches each parallel dimension's communication
by the factor the scheduler's placement and neighbours impose, the compute that hid part of
it hiding as much of the slower one (:mod:`fabric_model.run.cluster_sim`).
"""

from __future__ import annotations

from typing import Any

from fabric_model.caching import lru_cached
from fabric_model.errors import FabricModelError
from fabric_model.run.jobs import parse_plan
from fabric_model.run.reliability import checkpoint_bytes
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.training.step import StepResult, training_step

__all__ = [
    "checkpoint_bytes_of",
    "job_scenario",
    "job_step",
    "step_with_factor",
    "step_with_factors",
]


@lru_cached("run.job_steps.job_scenario", 1024, key="the whole scenario and every argument")
def job_scenario(
    scenario: Scenario, model: str, gpus: int, degrees: tuple[tuple[str, int], ...]
) -> Scenario:
    """Return the scenario of one job: its GPUs, model and parallel degrees on the design."""
    # a job's plan is its own: the design's interleaving, expert tensor split and pipeline
    # layout belong to the design's model (meta-24k-roce's VP4 would not fit a 70B job)
    over: dict[str, Any] = {
        "cluster.n_gpus": gpus,
        "model.name": model,
        "parallel.dp": "auto",
        "parallel.vpp": 1,
        "parallel.etp": "auto",
        "parallel.pipeline_layout": "auto",
    }
    for k in ("tp", "pp", "cp", "ep"):
        over[f"parallel.{k}"] = dict(degrees).get(k, 1)
    return apply_overrides(scenario, over)


@lru_cached("run.job_steps.checkpoint_bytes_of", 256, key="the whole scenario and the model")
def checkpoint_bytes_of(scenario: Scenario, model: str) -> float:
    """Bytes of a checkpoint of ``model`` (its weights and optimizer state)."""
    return checkpoint_bytes(job_scenario(scenario, model, 2, ()))


@lru_cached("run.job_steps.job_step", 1024, key="the whole scenario and every argument")
def job_step(scenario: Scenario, model: str, gpus: int, plan: str) -> StepResult:
    """Return the training step of a job alone on a contiguous placement (its own fabric).

    ``plan = auto``: tensor parallelism over the node (at most 8), then the fewest pipeline
    stages (1, 2, 4, ...) whose memory fits. Raises :class:`ValueError` with the reason when
    no plan fits.
    """
    gpn = scenario.cluster.gpus_per_node
    degrees = parse_plan(plan)
    if degrees:
        trials = [tuple(sorted(degrees.items()))]
    else:
        tp = min(gpn, gpus, 8)
        trials = [(("pp", pp), ("tp", tp)) for pp in (1, 2, 4, 8, 16, 32) if gpus % (tp * pp) == 0]
    reason = f"no tp x pp divides {gpus} GPUs"
    for deg in trials:
        try:
            s = job_scenario(scenario, model, gpus, deg)
        except FabricModelError as exc:
            reason = str(exc)
            continue
        r = training_step(s)
        if r.feasible:
            return r
        reason = r.reason
    raise ValueError(reason)


def step_with_factors(
    step: StepResult, factors: dict[str, float], unhidden: frozenset[str] = frozenset()
) -> float:
    """Step time when dimension ``d``'s communication takes ``factors[d]`` x as long.

    The compute that hid part of a dimension's communication hides as much of the slower one:
    ``step + sum_d (max(0, comm_d x f_d - hidden_d) - exposed_d)``, ``hidden_d = comm_d -
    exposed_d``; a dimension not in ``factors`` keeps its time; one in ``unhidden`` hides
    nothing (an OCS reconfigured per phase reduces only after the backward).
    """
    extra = 0.0
    for d, f in factors.items():
        comm = step.comm_s.get(d, 0.0)
        exposed = step.exposed_s.get(d, 0.0)
        hidden = 0.0 if d in unhidden else comm - exposed
        extra += max(0.0, comm * f - hidden) - exposed
    return step.step_time_s + extra


def step_with_factor(step: StepResult, factor: float) -> float:
    """:func:`step_with_factors` with one factor for every dimension but tensor parallelism."""
    return step_with_factors(step, {d: factor for d in step.comm_s if d != "tp"})
