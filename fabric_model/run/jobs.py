"""A job mix for the shared-cluster simulation: read from a trace file or drawn from sources.

A job is ``id, submit_h, gpus, model, plan, tokens or duration_h, priority``. ``plan`` is
``auto`` or the parallel degrees as ``tp8-pp4`` (any of ``tp``, ``pp``, ``cp``, ``ep``; the
rest default to 1, data parallelism fills the job). ``duration_h`` is the job's run time alone
on a contiguous placement; with ``tokens`` instead it is ``tokens / tokens_per_s`` of the
training model's step on the job's GPUs.

:func:`load_jobs` reads CSV (a header row) or YAML (a list of mappings, or ``{jobs: [...]}``)
and refuses a bad row with the line and the field (:class:`TraceError`, exit 2 on the CLI).
:func:`generate_jobs` draws ``N`` jobs from ``assets/job_mix.yaml`` (size buckets, log-normal
durations, Poisson arrivals at an offered load; each number's source is in the file) with a
seeded :class:`numpy.random.Generator`: the same seed gives the same jobs.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from fabric_model.errors import FabricModelError
from fabric_model.resources import asset
from fabric_model.scenario import MODEL_NAMES

__all__ = [
    "FIELDS",
    "JOB_MIX",
    "Job",
    "TraceError",
    "generate_jobs",
    "load_jobs",
    "parse_plan",
]

#: The trace's columns (``tokens`` or ``duration_h``; ``plan`` and ``priority`` optional).
FIELDS = ("id", "submit_h", "gpus", "model", "plan", "tokens", "duration_h", "priority")
#: The generator's parameters and their sources (``assets/job_mix.yaml``).
JOB_MIX: dict[str, Any] = yaml.safe_load(asset("job_mix.yaml").read_text(encoding="utf-8"))
_PLAN_TOKEN = re.compile(r"(tp|pp|cp|ep)(\d+)")


class TraceError(FabricModelError):
    """A job trace that cannot be simulated: names the line and the field."""

    def __init__(self, where: str, field: str, message: str) -> None:
        super().__init__(f"{where}: {field}: {message}")
        self.where = where
        self.field = field


@dataclass(frozen=True)
class Job:
    """One job of the mix (see the module docstring)."""

    id: str
    submit_h: float
    gpus: int
    model: str
    plan: str = "auto"
    tokens: float | None = None
    duration_h: float | None = None
    priority: int = 0
    line: int = 0


def parse_plan(text: str) -> dict[str, int]:
    """Return the degrees a plan string names (``{}`` for ``auto``).

    Raises
    ------
    ValueError
        If the text is not ``auto`` or ``tp<N>[-pp<N>][-cp<N>][-ep<N>]``.
    """
    text = text.strip().lower()
    if text in ("", "auto"):
        return {}
    parts = text.replace("_", "-").split("-")
    out: dict[str, int] = {}
    for part in parts:
        m = _PLAN_TOKEN.fullmatch(part)
        if not m or m.group(1) in out or int(m.group(2)) < 1:
            raise ValueError(f"{text!r}: expected auto or e.g. tp8-pp4 (tp, pp, cp, ep >= 1)")
        out[m.group(1)] = int(m.group(2))
    return out


def _number(raw: Any, where: str, field: str, *, integer: bool = False) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise TraceError(where, field, f"{raw!r} is not a number") from None
    if not math.isfinite(value):
        raise TraceError(where, field, f"{raw!r} is not finite")
    if integer and value != int(value):
        raise TraceError(where, field, f"{raw!r} is not a whole number")
    return value


def _blank(raw: Any) -> bool:
    return raw is None or (isinstance(raw, str) and not raw.strip())


def _job(row: dict[str, Any], where: str, line: int) -> Job:
    unknown = sorted(k for k in row if k not in FIELDS)
    if unknown:
        raise TraceError(where, unknown[0], f"unknown column (allowed: {', '.join(FIELDS)})")
    for key in ("id", "submit_h", "gpus", "model"):
        if _blank(row.get(key)):
            raise TraceError(where, key, "missing")
    job_id = str(row["id"]).strip()
    submit = _number(row["submit_h"], where, "submit_h")
    if submit < 0:
        raise TraceError(where, "submit_h", f"{submit:g} is negative (hours from the start, >= 0)")
    gpus = _number(row["gpus"], where, "gpus", integer=True)
    if gpus < 1:
        raise TraceError(where, "gpus", f"{gpus:g}: a job needs at least 1 GPU")
    model = str(row["model"]).strip()
    if model not in MODEL_NAMES:
        raise TraceError(where, "model", f"{model!r} is unknown (one of {', '.join(MODEL_NAMES)})")
    plan = "auto" if _blank(row.get("plan")) else str(row["plan"]).strip()
    try:
        parse_plan(plan)
    except ValueError as exc:
        raise TraceError(where, "plan", str(exc)) from None
    tokens = None if _blank(row.get("tokens")) else _number(row["tokens"], where, "tokens")
    duration = (
        None if _blank(row.get("duration_h")) else _number(row["duration_h"], where, "duration_h")
    )
    if (tokens is None) == (duration is None):
        raise TraceError(where, "tokens", "give exactly one of tokens and duration_h")
    for name, value in (("tokens", tokens), ("duration_h", duration)):
        if value is not None and value <= 0:
            raise TraceError(where, name, f"{value:g} must be > 0")
    prio = (
        0
        if _blank(row.get("priority"))
        else _number(row["priority"], where, "priority", integer=True)
    )
    return Job(job_id, submit, int(gpus), model, plan, tokens, duration, int(prio), line)


def load_jobs(path: str | Path, text: str | None = None) -> list[Job]:
    """Read a job trace (CSV with a header, or YAML); ``text`` instead of reading ``path``.

    Raises
    ------
    TraceError
        For a bad row (the line and the field), a duplicate id, or no jobs.
    FabricModelError
        If the file cannot be read or parsed.
    """
    name = str(path)
    if text is None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise FabricModelError(f"--jobs {name}: {exc.strerror or exc}") from None
    rows: list[tuple[int, dict[str, Any]]]
    if name.lower().endswith((".yaml", ".yml")):
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise FabricModelError(f"--jobs {name}: not YAML ({exc})") from None
        if isinstance(data, dict):
            data = data.get("jobs")
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise FabricModelError(f"--jobs {name}: expected a list of jobs (mappings)")
        rows = [(i + 1, r) for i, r in enumerate(data)]
        label = "job"
    else:
        reader = csv.DictReader(io.StringIO(text))
        rows = []
        for r in reader:
            if None in r:
                raise TraceError(f"{name} line {reader.line_num}", "row", "more cells than columns")
            if all(_blank(v) for v in r.values()):
                continue
            rows.append((reader.line_num, {k.strip(): v for k, v in r.items() if k}))
        label = "line"
    jobs: list[Job] = []
    seen: dict[str, int] = {}
    for line, row in rows:
        where = f"{name} {label} {line}"
        job = _job(row, where, line)
        if job.id in seen:
            raise TraceError(where, "id", f"{job.id!r} repeats {label} {seen[job.id]}")
        seen[job.id] = line
        jobs.append(job)
    if not jobs:
        raise FabricModelError(f"--jobs {name}: no jobs")
    return jobs


def _pow2_between(rng: np.random.Generator, lo: int, hi: int, size: int) -> np.ndarray:
    k_lo, k_hi = int(math.log2(lo)), int(math.log2(hi))
    return np.left_shift(1, rng.integers(k_lo, k_hi + 1, size=size)).astype(np.int64)


def generate_jobs(
    n: int, cluster_gpus: int, rng: np.random.Generator, mix: dict[str, Any] | None = None
) -> list[Job]:
    """Draw ``n`` jobs from the job mix (``assets/job_mix.yaml``) for a cluster.

    Each job picks a size bucket by share, a power-of-two GPU count in the bucket (capped at
    ``cap.gpus_share_of_cluster`` of the cluster), a log-normal duration (the bucket's median
    and sigma) and the bucket's model. Arrivals are Poisson with the rate that offers
    ``arrivals.load`` of the cluster's GPU-hours over the span of the submissions (so ``n``
    sets the span; submissions past the simulated horizon never start).
    """
    if n < 1:
        raise FabricModelError(f"--generate {n}: must be at least 1")
    mix = mix or JOB_MIX
    buckets = mix["size_buckets"]
    cap = max(1, int(cluster_gpus * float(mix["cap"]["gpus_share_of_cluster"]["value"])))
    shares = np.array([float(b["share"]) for b in buckets])
    which = rng.choice(len(buckets), size=n, p=shares / shares.sum())
    gpus = np.zeros(n, dtype=np.int64)
    dur = np.zeros(n)
    for i, b in enumerate(buckets):
        idx = np.flatnonzero(which == i)
        if not idx.size:
            continue
        hi = min(int(b["gpus_max"]), 1 << int(math.log2(cap)))
        lo = min(int(b["gpus_min"]), hi)
        gpus[idx] = _pow2_between(rng, lo, hi, idx.size)
        dur[idx] = float(b["duration_h_median"]) * np.exp(
            float(b["duration_sigma"]) * rng.standard_normal(idx.size)
        )
    offered = float((gpus * dur).sum())
    load = float(mix["arrivals"]["load"]["value"])
    rate_per_h = n / max(offered / (load * cluster_gpus), 1e-9)  # jobs per hour
    submit = np.cumsum(rng.exponential(1.0 / rate_per_h, size=n))
    submit -= submit[0]
    return [
        Job(
            f"j{i}",
            round(float(submit[i]), 6),
            int(gpus[i]),
            str(buckets[which[i]]["model"]),
            "auto",
            None,
            round(float(dur[i]), 6),
            0,
            i + 1,
        )
        for i in range(n)
    ]
