"""Public measurements the collective model is checked against (``tests/golden/``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fabric_model.collectives import collective
from fabric_model.scenario import Scenario

__all__ = [
    "GOLDEN_PATH",
    "TOLERANCE",
    "ExpectedGap",
    "GoldenCase",
    "fabric_class",
    "load_golden",
    "predict",
    "scale_class",
]

GOLDEN_PATH = Path(__file__).resolve().parents[2] / "tests" / "golden" / "nccl_public.yaml"

#: Relative band the model must land in, by ``use``: calibration figures set a constant,
#: held-out figures were not used for anything.
TOLERANCE = {"calibration": 0.05, "held-out": 0.10}


@dataclass(frozen=True)
class ExpectedGap:
    """A documented reason why a case lands outside the default band.

    ``band`` is set only when the reason is a property of the measured system that the
    model does not describe (the test then asserts that wider band for this case alone);
    without a band the gap is a known model finding and the test expects it to fail.
    """

    reason: str
    band: float | None = None


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
    quote: str = ""
    expected_gap: ExpectedGap | None = None

    @property
    def tolerance(self) -> float:
        """The relative band this case is held to."""
        if self.expected_gap is not None and self.expected_gap.band is not None:
            return self.expected_gap.band
        return TOLERANCE[self.use]


def _gap(raw: Any) -> ExpectedGap | None:
    if raw is None:
        return None
    band = raw.get("band")
    return ExpectedGap(str(raw["reason"]), None if band is None else float(band))


def load_golden(path: Path = GOLDEN_PATH) -> list[GoldenCase]:
    """Read the golden cases."""
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [
        GoldenCase(
            c["name"],
            c["source"],
            c["use"],
            Scenario.from_dict(c["scenario"]),
            c["op"],
            c["algo"],
            int(c["size_bytes"]),
            float(c["busbw_GBps"]),
            str(c.get("quote", "")),
            _gap(c.get("expected_gap")),
        )
        for c in data["cases"]
    ]


def predict(case: GoldenCase) -> float:
    """Return the model's bus bandwidth for a case, GB/s."""
    return collective(case.scenario, case.op, case.algo, [case.size_bytes])[0].busbw_GBps


def scale_class(case: GoldenCase) -> str:
    """``NVLink`` (one NVLink domain), ``2 nodes`` or ``>2 nodes``."""
    cluster = case.scenario.cluster
    if cluster.n_gpus <= cluster.nvlink_domain:
        return "NVLink"
    return "2 nodes" if cluster.n_gpus <= 2 * cluster.gpus_per_node else ">2 nodes"


def fabric_class(case: GoldenCase) -> str:
    """``NVLink`` for single-domain cases, else ``InfiniBand`` or ``Ethernet``."""
    if scale_class(case) == "NVLink":
        return "NVLink"
    return "InfiniBand" if case.scenario.fabric.vendor == "infiniband" else "Ethernet"
