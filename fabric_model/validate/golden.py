"""Public measurements the collective model is checked against (``tests/golden/``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fabric_model.collectives import collective
from fabric_model.scenario import Scenario

__all__ = ["GOLDEN_PATH", "GoldenCase", "load_golden", "predict"]

GOLDEN_PATH = Path(__file__).resolve().parents[2] / "tests" / "golden" / "nccl_public.yaml"


@dataclass(frozen=True)
class GoldenCase:
    """One published figure with its configuration and source."""

    name: str
    source: str
    use: str
    scenario: Scenario
    op: str
    algo: str
    size_bytes: int
    busbw_GBps: float


def load_golden(path: Path = GOLDEN_PATH) -> list[GoldenCase]:
    """Read the golden cases."""
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [GoldenCase(c["name"], c["source"], c["use"], Scenario.from_dict(c["scenario"]),
                       c["op"], c["algo"], int(c["size_bytes"]), float(c["busbw_GBps"]))
            for c in data["cases"]]


def predict(case: GoldenCase) -> float:
    """Return the model's bus bandwidth for a case, GB/s."""
    return collective(case.scenario, case.op, case.algo, [case.size_bytes])[0].busbw_GBps
