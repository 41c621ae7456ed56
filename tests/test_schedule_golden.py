"""The shared-cluster simulation against published multi-job results (tests/golden/
schedule_public.yaml): each case's metric, its source and the tolerance it earns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from fabric_model.presets import load_preset
from fabric_model.run.cluster_sim import Cluster, schedule
from fabric_model.scenario import apply_overrides

CASES = yaml.safe_load((Path(__file__).parent / "golden" / "schedule_public.yaml").read_text())[
    "cases"
]


def _metric(case: dict[str, Any]) -> float:
    scenario = apply_overrides(load_preset(case["preset"]), case.get("set", {}))
    cluster = Cluster.build(scenario)

    def run(policy: str, seed: int) -> dict[str, Any]:
        return schedule(
            scenario,
            generate=case["generate"],
            days=float(case["days"]),
            seed=seed,
            policy=policy,
            cluster=cluster,
        )

    if case["metric"] == "utilization_block_vs_first_fit_mean":
        ff = np.mean([run("first-fit", s)["utilization"] for s in case["seeds"]])
        block = np.mean([run("block", s)["utilization"] for s in case["seeds"]])
        return float(abs(block - ff) / ff)
    if case["metric"] == "share_of_jobs_with_interference":
        (seed,) = case["seeds"]
        ran = [j for j in run(case["policy"], seed)["jobs"] if j["slowdown"] is not None]
        return sum(1 for j in ran if j["interference_slowdown"] > 1.001) / len(ran)
    raise KeyError(case["metric"])


def _params() -> list[Any]:
    out = []
    for case in CASES:
        marks = []
        if "expected_gap" in case:
            marks.append(pytest.mark.xfail(strict=True, reason=case["expected_gap"]["reason"]))
        out.append(pytest.param(case, id=case["name"], marks=marks))
    return out


@pytest.mark.parametrize("case", _params())
def test_published_multi_job_result(case: dict[str, Any]) -> None:
    assert case["use"] == "held-out" and case["source"]
    assert _metric(case) == pytest.approx(case["value"], abs=case["tolerance"])
