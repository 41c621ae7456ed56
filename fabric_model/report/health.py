"""The health view: a design's step p50/p99 and the failure modes that would cost it most.

For a scenario, :func:`health` models the step with the tails enabled (the scenario's own
``tails.*`` values, ``tails.enabled`` forced on: the baseline's p50 and p99), then each failure
mode of ``assets/failure_modes.yaml`` (its overrides applied to that baseline) through the
same model, and ranks the modes by what they add to the step's p50. A mode whose keys do not
apply to the design (the scenario refuses them, or the design cannot be built with them) is
kept with the refusal as its reason; a mode whose plan cannot run says why. No number here is
written by hand: each is a training step the model computes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from fabric_model.errors import FabricModelError
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.scenario.failure_modes import FAILURE_MODES_PATH, FailureMode, failure_modes
from fabric_model.training import StepResult, training_step

__all__ = ["FAILURE_MODES_PATH", "FailureMode", "Health", "ModeCost", "failure_modes", "health"]


@dataclass(frozen=True)
class ModeCost:
    """What one failure mode does to the step.

    ``applies`` False: ``reason`` says why the mode was not evaluated (its keys do not apply
    to the design, or its plan cannot run); the times are NaN then.
    """

    mode: FailureMode
    applies: bool
    reason: str = ""
    step_time_p50_s: float = math.nan
    step_time_p99_s: float = math.nan
    delta_s: float = math.nan


@dataclass(frozen=True)
class Health:
    """A design's step tail and its failure modes, costliest first.

    Attributes
    ----------
    step_time_s, step_time_p50_s, step_time_p99_s : float
        The healthy step: deterministic, and its p50 and p99 over iterations (tails on).
    costs : tuple of ModeCost
        Every mode that applies, costliest (largest p50 delta) first.
    skipped : tuple of ModeCost
        The modes that do not apply, with the reason.
    """

    step_time_s: float
    step_time_p50_s: float
    step_time_p99_s: float
    costs: tuple[ModeCost, ...]
    skipped: tuple[ModeCost, ...]

    def top(self, k: int = 3) -> tuple[ModeCost, ...]:
        """Return the ``k`` modes that cost the step most."""
        return self.costs[:k]

    def delta_pct(self, cost: ModeCost) -> float:
        """Return ``cost.delta_s`` as a fraction of the healthy p50."""
        return cost.delta_s / self.step_time_p50_s


def _tails_on(scenario: Scenario) -> Scenario:
    return apply_overrides(scenario, {"tails.enabled": True})


def health(
    scenario: Scenario, step_of: Callable[[Scenario], StepResult] | None = None
) -> Health | None:
    """Model the healthy step's tail and every failure mode (None: the plan cannot run).

    ``step_of`` computes a step (a cached one in the dashboard); the model's
    :func:`~fabric_model.training.training_step` by default.
    """
    step_of = step_of or training_step
    base = _tails_on(scenario)
    healthy = step_of(base)
    if not healthy.feasible:
        return None
    costs, skipped = [], []
    for mode in failure_modes():
        try:
            changed = apply_overrides(base, dict(mode.overrides))
            step = step_of(changed)
        except FabricModelError as exc:
            skipped.append(ModeCost(mode, False, str(exc)))
            continue
        if not step.feasible:
            skipped.append(ModeCost(mode, False, f"the plan cannot run: {step.reason}"))
            continue
        costs.append(
            ModeCost(
                mode,
                True,
                step_time_p50_s=step.step_time_p50_s,
                step_time_p99_s=step.step_time_p99_s,
                delta_s=step.step_time_p50_s - healthy.step_time_p50_s,
            )
        )
    costs.sort(key=lambda c: -c.delta_s)
    return Health(
        healthy.step_time_s,
        healthy.step_time_p50_s,
        healthy.step_time_p99_s,
        tuple(costs),
        tuple(skipped),
    )
