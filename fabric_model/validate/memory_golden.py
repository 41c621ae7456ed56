"""Published peak memory per GPU the memory model is checked against (``tests/golden/``).

Each row is a measured peak from a framework's log or table, with the configuration of the
run; ``measure`` says what was measured, and the model's figure is taken to match:

- ``allocated``: PyTorch's max allocated, the model's weights, gradients, optimizer states,
  activations and transients of the heaviest rank;
- ``reserved``: PyTorch's max reserved, allocated plus the allocator's fragmentation;
- ``nvidia-smi``: the whole process, the runtime (CUDA context, NCCL buffers) included.

One constant is fitted: ``allocator_fragmentation`` (reserved over allocated) is solved on
the row labelled ``calibration`` (:func:`calibrated_fragmentation`); the ``held-out`` rows
are predicted with it. Rows labelled ``context`` use something the model does not represent
(``not_modelled`` says what) and are reported, not held to the tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from fabric_model.catalog import load_catalog
from fabric_model.scenario import Scenario
from fabric_model.scenario.shapes import shape_counts
from fabric_model.training.memory import MemoryBreakdown, memory_per_gpu
from fabric_model.training.step import resolve_plan
from fabric_model.validate.training_golden import golden_scenario

__all__ = [
    "MEASURES",
    "MEMORY_GOLDEN_PATH",
    "MemoryCase",
    "MemoryRow",
    "calibrated_fragmentation",
    "load_memory_golden",
    "memory_table",
]

MEMORY_GOLDEN_PATH = (
    Path(__file__).resolve().parents[2] / "tests" / "golden" / "training_memory.yaml"
)
MEASURES = ("allocated", "reserved", "nvidia-smi")


@dataclass(frozen=True)
class MemoryCase:
    """One published peak memory figure with the scenario of its run."""

    name: str
    use: str
    source: str
    quote: str
    measure: str
    measured_gib: float
    framework: str
    assumed: str
    scenario: Scenario
    not_modelled: str = ""


@dataclass(frozen=True)
class MemoryRow:
    """A case with the model's estimate of the same quantity."""

    case: MemoryCase
    memory: MemoryBreakdown
    estimate_gib: float

    @property
    def error(self) -> float:
        """(model - measured) / measured."""
        return self.estimate_gib / self.case.measured_gib - 1.0


def load_memory_golden(path: Path = MEMORY_GOLDEN_PATH) -> list[MemoryCase]:
    """Read the rows; a row with an unknown ``measure`` is an error naming it."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    out = []
    for row in data["rows"]:
        if row["measure"] not in MEASURES:
            raise ValueError(f"{row['name']}: measure must be one of {', '.join(MEASURES)}")
        out.append(
            MemoryCase(
                name=row["name"],
                use=row.get("use", "held-out"),
                source=row["source"],
                quote=str(row.get("quote", "")),
                measure=row["measure"],
                measured_gib=float(row["measured_gib"]),
                framework=row.get("framework", ""),
                assumed=row.get("assumed", ""),
                scenario=golden_scenario(row["scenario"]),
                not_modelled=row.get("not_modelled", ""),
            )
        )
    return out


def estimate(case: MemoryCase) -> MemoryRow:
    """Return the model's figure for what ``case`` measured."""
    s = case.scenario
    plan, problems = resolve_plan(s)
    if plan is None:
        raise ValueError(f"{case.name}: {'; '.join(str(p) for p in problems)}")
    gpu = load_catalog().gpu(s.cluster.gpu)
    mem = memory_per_gpu(s, plan, shape_counts(s.model), gpu.hbm_gib)
    value = {
        "allocated": mem.allocated_gib,
        "reserved": mem.reserved_gib,
        "nvidia-smi": mem.total_gib,
    }[case.measure]
    return MemoryRow(case, mem, value)


def memory_table(path: Path = MEMORY_GOLDEN_PATH) -> list[MemoryRow]:
    """Every row with the model's estimate."""
    return [estimate(c) for c in load_memory_golden(path)]


def calibrated_fragmentation(path: Path = MEMORY_GOLDEN_PATH) -> float:
    """Reserved over allocated - 1 on the calibration row (what the constant must be)."""
    (case,) = [c for c in load_memory_golden(path) if c.use == "calibration"]
    if case.measure != "reserved":
        raise ValueError(f"{case.name}: the calibration row must measure reserved memory")
    return case.measured_gib / estimate(case).memory.allocated_gib - 1.0
