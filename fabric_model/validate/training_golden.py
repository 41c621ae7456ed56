"""Published training throughput the step model is checked against (``tests/golden/``).

One row per report group sets ``training.compute_efficiency`` (solved so the model
reproduces that row's step time); every other row of the group is predicted with it. See
``tests/golden/training_public.yaml`` for the rows and their sources.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from fabric_model.presets import load_preset
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.scenario.shapes import shape_counts
from fabric_model.training.step import StepResult, training_step

__all__ = [
    "TRAINING_GOLDEN_PATH",
    "TrainingCase",
    "borrowed_efficiencies",
    "calibrate",
    "golden_scenario",
    "load_training_golden",
    "validation_table",
]

TRAINING_GOLDEN_PATH = (
    Path(__file__).resolve().parents[2] / "tests" / "golden" / "training_public.yaml"
)


@dataclass(frozen=True)
class TrainingCase:
    """One published throughput figure with the scenario that describes its run."""

    name: str
    group: str
    use: str
    source: str
    quote: str
    assumed: str
    scenario: Scenario
    measured_kind: str
    measured_value: float
    finding: str = ""

    @property
    def measured_step_time_s(self) -> float:
        """The published figure as a step time, by the source's own FLOP count."""
        s = self.scenario
        n = s.cluster.n_gpus
        if self.measured_kind == "step_time_s":
            return self.measured_value
        if self.measured_kind == "hw_tflops_per_gpu_96":
            m = s.model
            b = s.training.global_batch_tokens / m.seq_len
            seq, h, layers = m.seq_len, m.hidden, m.layers
            flops = (
                96.0 * b * seq * layers * h * h * (1 + seq / (6 * h) + m.vocab / (16 * layers * h))
            )
            return flops / (n * self.measured_value * 1e12)
        if self.measured_kind == "tokens_per_s_per_gpu":  # no FLOP count to agree on
            return s.training.global_batch_tokens / (n * self.measured_value)
        if self.measured_kind == "model_tflops_per_gpu":
            flops = (
                shape_counts(s.model).model_flops_per_token(s.model.seq_len)
                * s.training.global_batch_tokens
            )
            return flops / (n * self.measured_value * 1e12)
        raise ValueError(f"{self.name}: unknown measured kind {self.measured_kind!r}")


def _flatten(prefix: str, data: Any, out: dict[str, Any]) -> None:
    for key, value in data.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            _flatten(dotted, value, out)
        else:
            out[dotted] = value


def golden_scenario(raw: Mapping[str, Any]) -> Scenario:
    """Return the scenario of a golden row's ``scenario:`` block.

    The block is a preset (``preset:``, optional; the default scenario without it) and the
    scenario keys that differ from it, nested by section as in a scenario file. The training
    and the memory golden sets describe their runs this way.

    Parameters
    ----------
    raw
        The row's ``scenario`` mapping, e.g. ``{"preset": "dgx-h100-ib-ndr", "cluster":
        {"n_gpus": 2048}}``.

    Returns
    -------
    Scenario
        The preset with the keys applied; ``model.name`` first, so the shape keys given
        beside it override the named shape.

    Raises
    ------
    ScenarioError
        For an unknown preset or key, or a value out of its bounds.

    Examples
    --------
    >>> s = golden_scenario({"preset": "dgx-h100-ib-ndr", "cluster": {"n_gpus": 2048},
    ...                      "model": {"name": "llama3-8b"}})
    >>> s.cluster.n_gpus, s.model.name, s.model.layers
    (2048, 'llama3-8b', 32)
    """
    rest = dict(raw)
    base = load_preset(rest.pop("preset")) if "preset" in rest else Scenario()
    flat: dict[str, Any] = {}
    _flatten("", rest, flat)
    # a model name first, so the keys given beside it override its shape
    if "model.name" in flat:
        base = apply_overrides(base, {"model.name": flat.pop("model.name")})
    return apply_overrides(base, flat)


def load_training_golden(path: Path = TRAINING_GOLDEN_PATH) -> list[TrainingCase]:
    """Read the rows (YAML anchors and merges resolved)."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    out = []
    for row in data["rows"]:
        out.append(
            TrainingCase(
                name=row["name"],
                group=row["group"],
                use=row.get("use", "held-out"),
                finding=str(row.get("finding", "")),
                source=row["source"],
                quote=row["quote"],
                assumed=row.get("assumed", ""),
                scenario=golden_scenario(row["scenario"]),
                measured_kind=row["measured"]["kind"],
                measured_value=float(row["measured"]["value"]),
            )
        )
    return out


def _with_efficiency(s: Scenario, eff: float) -> Scenario:
    return replace(s, training=replace(s.training, compute_efficiency=eff))


def calibrate(case: TrainingCase) -> float:
    """Return the compute efficiency at which the model reproduces ``case``'s step time.

    Step time falls monotonically with efficiency, so bisection on (0.05, 1] suffices.
    """
    target = case.measured_step_time_s
    lo, hi = 0.05, 1.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        st = training_step(_with_efficiency(case.scenario, mid))
        if not st.feasible:
            raise ValueError(f"{case.name}: infeasible: {st.reason}")
        if st.step_time_s > target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@dataclass(frozen=True)
class ValidationRow:
    """Predicted vs published for one row."""

    case: TrainingCase
    efficiency: float
    step: StepResult

    @property
    def error(self) -> float:
        """Relative error of the predicted step time (positive = model slower)."""
        return self.step.step_time_s / self.case.measured_step_time_s - 1.0

    @property
    def measured_mfu(self) -> float:
        """The published run's MFU by this model's (Megatron-LM) FLOP count."""
        return self.step.mfu * self.step.step_time_s / self.case.measured_step_time_s


def borrowed_efficiencies(path: Path = TRAINING_GOLDEN_PATH) -> dict[str, str]:
    """Return ``{group: group it takes its efficiency from}`` (``efficiency_from:``).

    A group with no calibration row of its own (one published run on a stack that has no
    other) is predicted with the efficiency of the named group: the same GPU and GEMM
    precision, so nothing is fitted to it.
    """
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {
        name: str(g["efficiency_from"])
        for name, g in data.get("calibration_groups", {}).items()
        if g.get("efficiency_from")
    }


def validation_table(cases: list[TrainingCase] | None = None) -> list[ValidationRow]:
    """Calibrate each group on its calibration row and predict every row."""
    cases = cases if cases is not None else load_training_golden()
    eff: dict[str, float] = {}
    for c in cases:
        if c.use == "calibration":
            eff[c.group] = calibrate(c)
    for group, source in borrowed_efficiencies().items():
        if source in eff:
            eff.setdefault(group, eff[source])
    rows = []
    for c in cases:
        e = eff.get(c.group, math.nan)
        rows.append(ValidationRow(c, e, training_step(_with_efficiency(c.scenario, e))))
    return rows
