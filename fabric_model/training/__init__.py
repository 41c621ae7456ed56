"""Training-step model: step time, MFU, memory and scaling on the modelled fabric.

>>> from fabric_model.scenario import Scenario
>>> result = training_step(Scenario())
>>> result.feasible, round(result.mfu, 2) > 0
(True, True)
"""

from fabric_model.scenario.shapes import ShapeCounts, shape_counts
from fabric_model.training.step import (
    DIMS,
    InfeasiblePlanError,
    Plan,
    Problem,
    StepResult,
    resolve_plan,
    step_or_raise,
    training_step,
)
from fabric_model.training.sweep import (
    SCALING_MODES,
    PlanCandidate,
    SweepPoint,
    evaluate_point,
    search_plans,
    sweep,
)

__all__ = [
    "DIMS",
    "SCALING_MODES",
    "InfeasiblePlanError",
    "Plan",
    "PlanCandidate",
    "Problem",
    "ShapeCounts",
    "StepResult",
    "SweepPoint",
    "evaluate_point",
    "resolve_plan",
    "search_plans",
    "shape_counts",
    "step_or_raise",
    "sweep",
    "training_step",
]
