"""The ``tails`` section: per-rank and per-link variability, and the slowest rank it makes.

A synchronous job runs at the pace of its slowest member. With ``tails.enabled`` the step and
every collective row report their p50 and p99 over iterations: each rank's compute time
varies (``gpu_spread``: clock, thermal and power management), each rank's software delays
its launches (``os_jitter``; ``call_jitter_us`` per collective call), one rank may be slow
(``slow_rank_factor``), and static ECMP hashing is drawn again every iteration
(``ecmp_redraw``) from the flow solver's hash seeds. Disabled (the default), p50 = p99 = the
deterministic value. Every default comes from ``assets/tails.yaml`` with its source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from fabric_model.resources import asset
from fabric_model.scenario.fields import FieldSpec, _f

__all__ = ["TAILS_DATA", "TailsSpec"]

#: Defaults of the ``tails.*`` keys with their sources (``assets/tails.yaml``).
TAILS_DATA: dict[str, Any] = yaml.safe_load(asset("tails.yaml").read_text(encoding="utf-8"))


def _default(key: str) -> Any:
    return TAILS_DATA[key]["value"]


@dataclass(frozen=True)
class TailsSpec:
    """Stragglers and jitter: what makes the p99 of a step or a collective exceed its p50."""

    enabled: bool = _f(
        False,
        FieldSpec(
            "bool",
            "report p50/p99 over iterations from per-rank variability, a slow rank and ECMP "
            "draws (false: p50 = p99 = the deterministic time)",
        ),
    )
    gpu_spread: float = _f(
        float(_default("gpu_spread")),
        FieldSpec(
            "float",
            "standard deviation of one GPU's compute time per iteration, as a fraction of the "
            "mean (clock, thermal and power management; Sinha et al. SC22: 8 % spread between "
            "GPUs of one SKU; assets/tails.yaml)",
            "fraction",
            min=0.0,
            max=0.5,
            step=0.005,
        ),
    )
    os_jitter: float = _f(
        float(_default("os_jitter")),
        FieldSpec(
            "float",
            "mean software delay of one rank per step (OS noise, launch delays, garbage "
            "collection), as a fraction of the step's compute, exponentially distributed "
            "(calibrated on ByteDance's OSDI'25 straggler traces; assets/tails.yaml)",
            "fraction",
            min=0.0,
            max=0.5,
            step=0.001,
        ),
    )
    call_jitter_us: float = _f(
        float(_default("call_jitter_us")),
        FieldSpec(
            "float",
            "mean launch delay of one rank per collective call, exponentially distributed "
            "(no published fleet figure: 0; set it from an nccl-tests -I 1 log's p99 - p50)",
            "us",
            min=0.0,
            max=100_000.0,
            step=1.0,
        ),
    )
    slow_rank_factor: float = _f(
        float(_default("slow_rank_factor")),
        FieldSpec(
            "float",
            "one rank computes at this fraction of its speed (a throttled or failing GPU; "
            "1 = no slow rank); the step waits for it every iteration",
            "",
            min=0.0,
            max=1.0,
            min_exclusive=True,
            step=0.05,
        ),
    )
    ecmp_redraw: bool = _f(
        True,
        FieldSpec(
            "bool",
            "draw the static ECMP hash anew every iteration from the solver's hash seeds "
            "(false: one hash for the whole job, whose expected time stands)",
        ),
    )
    iterations: int = _f(
        int(_default("iterations")),
        FieldSpec(
            "int",
            "iterations sampled where a draw is needed (ECMP hashes); closed forms need none",
            "iterations",
            min=100,
            max=100_000,
        ),
    )
    seed: int = _f(
        int(_default("seed")),
        FieldSpec("int", "seed of the iterations' random draws", "", min=0, max=2**31 - 1),
    )
