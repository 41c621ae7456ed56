"""Measured vs model: an nccl-tests log against the collective model of a scenario.

The log says which collective ran and on how many ranks; the scenario describes the
cluster. Each size gets the model's time and bus bandwidth for NCCL's own choice of
algorithm (``auto``), the ratio measured / model, the regime (latency-bound when the model's
latency term exceeds its bandwidth term) and a plain verdict. The same sizes are also modelled
with every other algorithm the fabric can run, so the advice can say which one the
measurements follow ("this matches a ring-only run") when it is not NCCL's own choice.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from typing import Any

from fabric_model.collectives import (
    ALGORITHMS,
    CollectiveTime,
    FabricContext,
    algo_models,
    times_from_models,
)
from fabric_model.collectives.failure_modes import FailureMode, checkable_modes, misconfigured
from fabric_model.collectives.versions import VERSIONS, version_key
from fabric_model.errors import FabricModelError
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.validate.nccl_log import NcclTestsLog

__all__ = [
    "COMPARABLE_OPS",
    "DEFAULT_TOLERANCE",
    "LogComparison",
    "SizeComparison",
    "compare_log",
    "nccl_setting",
]

#: nccl-tests collectives the model covers.
COMPARABLE_OPS = ("allreduce", "allgather", "reducescatter", "alltoall")
#: Relative band around the model inside which a measurement counts as expected.
DEFAULT_TOLERANCE = 0.15


@dataclass(frozen=True)
class SizeComparison:
    """One message size: measured (out-of-place, as nccl-tests' headline) vs model.

    ``measured_p50_*`` and ``measured_p99_*`` are the median and 99th-percentile iteration
    of nccl-tests' per-iteration timing (``-I 1``; the JSON has both, the text table p99
    only), as time and as bus bandwidth (``busbw x time / p``); None when not measured.
    """

    size_bytes: int
    measured_time_us: float
    model_time_us: float
    measured_busbw_GBps: float
    model_busbw_GBps: float
    ratio: float
    regime: str
    model_algo: str
    bottleneck: str
    verdict: str
    measured_p50_time_us: float | None = None
    measured_p99_time_us: float | None = None
    measured_p50_busbw_GBps: float | None = None
    measured_p99_busbw_GBps: float | None = None
    best_match_algo: str = ""
    best_match_ratio: float = math.nan
    failure_match: str = ""
    failure_match_ratio: float = math.nan

    def to_dict(self) -> dict[str, Any]:
        """JSON row: the contract's keys first."""
        return {
            "bytes": self.size_bytes,
            "measured_busbw_GBps": self.measured_busbw_GBps,
            "model_busbw_GBps": self.model_busbw_GBps,
            "ratio": self.ratio,
            "measured_time_us": self.measured_time_us,
            "model_time_us": self.model_time_us,
            "regime": self.regime,
            "model_algo": self.model_algo,
            "bottleneck": self.bottleneck,
            "verdict": self.verdict,
            "measured_p50_time_us": self.measured_p50_time_us,
            "measured_p99_time_us": self.measured_p99_time_us,
            "measured_p50_busbw_GBps": self.measured_p50_busbw_GBps,
            "measured_p99_busbw_GBps": self.measured_p99_busbw_GBps,
            "best_match_algo": self.best_match_algo,
            "best_match_ratio": self.best_match_ratio,
            "failure_match": self.failure_match,
            "failure_match_ratio": self.failure_match_ratio,
        }


@dataclass(frozen=True)
class LogComparison:
    """A whole log against the model, with the notes on how the scenario was adapted.

    ``advice`` is what follows from the model's fields: which algorithm the measurements
    match when it is not NCCL's choice, and where a bandwidth-bound shortfall sits.
    ``diagnosis`` names the failure mode or misconfiguration (``assets/failure_modes.yaml``)
    whose modelled curve the log follows, with the setting to check; ``diagnosis_key`` is its
    key ('' when none does).
    """

    op: str
    n_ranks: int
    rows: tuple[SizeComparison, ...]
    notes: tuple[str, ...]
    advice: tuple[str, ...] = ()
    n_ranks_source: str = ""
    diagnosis: tuple[str, ...] = ()
    diagnosis_key: str = ""

    @property
    def median_ratio(self) -> float:
        """Median measured / model bus-bandwidth ratio over the bandwidth-bound sizes."""
        ratios = sorted(r.ratio for r in self.rows if r.regime == "bandwidth-bound") or sorted(
            r.ratio for r in self.rows
        )
        return statistics.median(ratios)


def _verdict(ratio: float, regime: str, bottleneck: str, tol: float) -> str:
    if abs(ratio - 1.0) <= tol:
        return "within the expected band"
    if ratio > 1.0:
        return (
            "above the model: check that the scenario matches the cluster (link speed, "
            "NICs per GPU, NVLink domain, GPU type)"
        )
    if regime == "latency-bound":
        return (
            "below, latency-bound: look at per-call overheads (NCCL protocol and "
            "launch cost, CPU/NUMA binding, PXN and GPUDirect RDMA settings)"
        )
    if "per-channel" in bottleneck:
        return f"below, bandwidth-bound at {_CHANNEL_LIMIT}"
    if bottleneck == "nvlink":
        return "below, bandwidth-bound on NVLink: look at NVLink/NVSwitch health and NVLS"
    if bottleneck.startswith("host link"):
        return (
            "below, bandwidth-bound on the host link (PCIe): look at PCIe width and "
            "generation, ACS and GPUDirect RDMA"
        )
    return (
        f"below, bandwidth-bound: look at the {bottleneck} links (NIC and cable health, "
        f"rails in NCCL_IB_HCA, ECMP hashing and congestion control, oversubscription)"
    )


#: The model's per-channel bottleneck in NCCL's terms: a software limit, not a link.
_CHANNEL_LIMIT = (
    "NCCL's software limit (channels x its per-channel rate, tuning.cc), not a link: "
    "more channels (NCCL_MIN_NCHANNELS) or another algorithm (NCCL_ALGO=Ring) lift it"
)

#: NCCL's settings that make it run each of the model's results (``CollectiveTime.algo``):
#: the algorithm registry's (the all-to-all variants are PXN on or off, below), and NVLS
#: across NVLink domains, which NCCL runs as NVLS-Tree.
_NCCL_SETTINGS = {
    **{n: a.nccl for n, a in ALGORITHMS.items() if n not in ("hierarchical", "direct")},
    "nvls-tree": "NCCL_ALGO=NVLSTree",
    "nvls-sharp": "NCCL_ALGO=NVLS with NCCL_COLLNET_ENABLE=1 and registered buffers",
}
#: All-to-all is point-to-point in NCCL: its model variants are PXN on or off.
_ALLTOALL_SETTINGS = {
    "hierarchical": "PXN (NCCL_PXN_DISABLE=0, NCCL's default)",
    "direct": "NCCL_PXN_DISABLE=1",
    "ce": ALGORITHMS["ce"].nccl,
}


def nccl_setting(algo: str, op: str) -> str | None:
    """Return the NCCL setting that runs the model's ``algo`` for ``op`` (None: none does).

    >>> nccl_setting("nvls-tree", "allreduce"), nccl_setting("hierarchical", "allreduce")
    ('NCCL_ALGO=NVLSTree', None)
    """
    if op == "alltoall":
        return _ALLTOALL_SETTINGS.get(algo)
    if algo.startswith("NCCL_PROTO="):
        return algo
    return _NCCL_SETTINGS.get(algo)


def _alternatives(ctx: FabricContext, op: str, sizes: list[int]) -> dict[str, list[CollectiveTime]]:
    """Every curve NCCL can be made to run at ``sizes``, by the model's result name.

    Each algorithm NCCL has a setting for (``NCCL_ALGO``, PXN for all-to-all), and NCCL's own
    choice under each ``NCCL_PROTO`` (keyed ``NCCL_PROTO=<p>``); one the fabric cannot run is
    left out, and so is the model's hierarchical all-reduce (no NCCL setting runs it).
    """
    out: dict[str, list[CollectiveTime]] = {}
    for algo in ALGORITHMS:
        try:
            curve = times_from_models(algo_models(ctx, op, algo), sizes, algo)
        except FabricModelError:
            continue
        name = curve[0].algo
        if nccl_setting(name, op) is not None:
            out[name] = curve
    if op != "alltoall":
        try:
            auto = algo_models(ctx, op, "auto")
        except FabricModelError:
            auto = []
        for proto in ("LL", "LL128", "Simple"):
            models = [
                replace(m, latency_us={proto: m.latency_us[proto]})
                for m in auto
                if proto in m.latency_us
            ]
            if models:
                out[f"NCCL_PROTO={proto}"] = times_from_models(models, sizes, "auto")
    return out


def _advice(
    rows: list[SizeComparison],
    alternatives: dict[str, list[CollectiveTime]],
    measured_us: list[float],
    tol: float,
    diagnosed: str | None = None,
) -> tuple[str, ...]:
    """Say which algorithm the bandwidth-bound sizes follow, when it is not NCCL's choice.

    ``diagnosed`` is the label of the misconfiguration :func:`_diagnose` found: the gap is
    then put down to it rather than to the healthy model's limit (which more channels would
    not lift on a misconfigured cluster).
    """
    idx = [i for i, r in enumerate(rows) if r.regime == "bandwidth-bound"] or list(range(len(rows)))
    auto_ratio = statistics.median([rows[i].ratio for i in idx])
    picked = sorted({rows[i].model_algo.split("/")[0] for i in idx})
    protos = sorted({rows[i].model_algo.split("/")[1] for i in idx})
    fits = {
        algo: statistics.median([curve[i].time_us / measured_us[i] for i in idx])
        for algo, curve in alternatives.items()
    }
    if not fits:
        return ()

    def nearest(keys: list[str]) -> tuple[str, float]:
        return min(((k, fits[k]) for k in keys), key=lambda kv: abs(math.log(kv[1])))

    # an algorithm (NCCL_ALGO) first; NCCL_PROTO only when no algorithm fits the band
    algos = [k for k in fits if not k.startswith("NCCL_PROTO=")]
    best, best_ratio = nearest(algos or list(fits))
    if abs(best_ratio - 1) > tol and len(algos) < len(fits):
        best, best_ratio = nearest(list(fits))
    op = alternatives[best][0].op
    chosen = " and ".join(nccl_setting(a, op) or a for a in picked)
    same_as_choice = best in picked or (
        best.startswith("NCCL_PROTO=") and best.split("=")[1] in protos
    )
    advice = []
    if (
        not same_as_choice
        and abs(best_ratio - 1) <= tol
        and abs(math.log(best_ratio)) < abs(math.log(auto_ratio))
    ):
        setting = nccl_setting(best, op) or best
        also = ""
        if best in ("ring", "tree") and any(a.startswith("nvls") for a in picked):
            also = " or NCCL_NVLS_ENABLE=0 (NCCL then chooses between ring and tree)"
        advice.append(
            f"the bandwidth-bound sizes match a run with {setting} (measured / model "
            f"{best_ratio:.2f}) better than NCCL's own choice here, {chosen} "
            f"({auto_ratio:.2f}): the job probably ran with {setting}{also}"
        )
    elif abs(auto_ratio - 1) > tol and diagnosed:
        advice.append(
            f"{'above' if auto_ratio > 1 else 'below'} the model by {abs(auto_ratio - 1):.0%} "
            f"at the bandwidth-bound sizes, and no NCCL setting explains it (closest: "
            f"{nccl_setting(best, op) or best} at {best_ratio:.2f}); a misconfiguration does: "
            f"{diagnosed} (diagnosis below)"
        )
    elif abs(auto_ratio - 1) > tol:
        bottleneck = rows[idx[len(idx) // 2]].bottleneck
        limit = _CHANNEL_LIMIT if "per-channel" in bottleneck else bottleneck
        ahead = "above" if auto_ratio > 1 else "below"
        closest = nccl_setting(best, op) or best
        advice.append(
            f"{ahead} the model by {abs(auto_ratio - 1):.0%} at the bandwidth-bound sizes, and "
            f"no NCCL setting explains it (closest: {closest} at {best_ratio:.2f}); the "
            f"model's limit there ({bottleneck}) is {limit}"
            if limit != bottleneck
            else f"{ahead} the model by {abs(auto_ratio - 1):.0%} at the bandwidth-bound sizes, "
            f"and no NCCL setting explains it (closest: {closest} at {best_ratio:.2f}); the "
            f"model's limit there is {bottleneck}"
        )
    return tuple(advice)


def _failure_curves(
    scenario: Scenario, op: str, sizes: list[int]
) -> dict[str, tuple[FailureMode, list[CollectiveTime]]]:
    """Model ``sizes`` under each failure mode that applies to the design (by its key).

    The same scenario with each mode's keys (:func:`misconfigured`); a mode the design
    refuses or already has, or under which ``op`` cannot run, is left out.
    """
    out = {}
    for mode in checkable_modes():
        s = misconfigured(scenario, mode)
        if s is None:
            continue
        try:
            ctx = FabricContext.from_scenario(s)
            out[mode.id] = (mode, times_from_models(algo_models(ctx, op, "auto"), sizes, "auto"))
        except FabricModelError:
            continue
    return out


def _diagnose(
    rows: list[SizeComparison],
    failures: dict[str, tuple[FailureMode, list[CollectiveTime]]],
    alternatives: dict[str, list[CollectiveTime]],
    measured_us: list[float],
    tol: float,
) -> tuple[tuple[str, ...], str]:
    """Name the failure mode whose modelled curve the log follows (signature from the model).

    Over the bandwidth-bound sizes (all sizes if none is), each mode's fit is the median of
    model / measured time. A mode is named when the healthy model misses the log by more
    than the tolerance, the mode lands within it, closer than the healthy model and than
    every NCCL setting (an ``NCCL_ALGO`` or ``NCCL_PROTO`` run explains it otherwise: the
    advice says so), and its curve has the log's shape: the largest departure of a size's
    ratio from the median (in log terms) is no larger than the healthy model's, give or take
    a third of the tolerance for noise. A log uniformly at half the healthy model is a slow
    cluster, not GPUDirect RDMA off, whose flat host-staged ceiling bends the curve at the
    middle sizes. Other modes within the band are named as also consistent.
    """
    if not failures:
        return (), ""
    idx = [i for i, r in enumerate(rows) if r.regime == "bandwidth-bound"] or list(range(len(rows)))
    healthy = statistics.median([rows[i].ratio for i in idx])
    if abs(healthy - 1) <= tol:
        return (), ""

    def fit(curve: list[CollectiveTime]) -> float:
        return statistics.median([curve[i].time_us / measured_us[i] for i in idx])

    def shape(ratios: list[float]) -> float:
        mid = math.log(statistics.median(ratios))
        return max(abs(math.log(r) - mid) for r in ratios)

    slack = shape([rows[i].ratio for i in idx]) + tol / 3
    fits = {
        k: fit(curve)
        for k, (_, curve) in failures.items()
        if shape([curve[i].time_us / measured_us[i] for i in idx]) <= slack
    }
    if not fits:
        return (), ""
    best = min(fits, key=lambda k: abs(math.log(fits[k])))
    ratio = fits[best]
    settings = [abs(math.log(fit(c))) for c in alternatives.values()]
    if abs(ratio - 1) > tol or abs(math.log(ratio)) >= abs(math.log(healthy)):
        return (), ""
    if settings and min(settings) < abs(math.log(ratio)):
        return (), ""
    mode = failures[best][0]
    keys = ", ".join(f"{k} = {v}" for k, v in mode.overrides.items())
    line = (
        f"the bandwidth-bound sizes follow the model with {mode.label} ({keys}; measured / "
        f"model {ratio:.2f}, against {healthy:.2f} for the healthy design): {mode.check}"
    )
    also = sorted(
        (k for k in fits if k != best and abs(fits[k] - 1) <= tol),
        key=lambda k: abs(math.log(fits[k])),
    )
    out = [line]
    if also:
        out.append(
            "also consistent with: "
            + "; ".join(f"{failures[k][0].label} ({fits[k]:.2f})" for k in also)
        )
    return tuple(out), best


_RANK_ORIGINS = {
    "rank lines": "the log's header ('#  Rank' lines)",
    "nccl info": "the log's NCCL INFO nranks",
    "launch line": "the log's launch line (processes x nThread x nGpus)",
    "json devices": "the JSON's devices x nthreads x ngpus",
}


def _ranks(
    log: NcclTestsLog, scenario: Scenario, n_gpus_set: bool
) -> tuple[Scenario, str, list[str]]:
    """Pick the rank count: the log's '#  Rank' lines (2 or more), else ``--set`` wins.

    Returns the scenario to model, where its ``cluster.n_gpus`` came from, and notes.
    """
    n, origin = log.n_ranks, log.n_ranks_source
    said = "--set cluster.n_gpus" if n_gpus_set else "the scenario's cluster.n_gpus"
    notes: list[str] = []
    if not n or n < 2:
        if n == 1:
            notes.append(
                f"the log shows 1 rank ({_RANK_ORIGINS.get(origin, origin)}), a partial "
                f"header: ranks from {said}"
            )
        return scenario, said, notes
    if n_gpus_set and origin != "rank lines":
        if n != scenario.cluster.n_gpus:
            notes.append(
                f"{said} = {scenario.cluster.n_gpus:,} kept over {n:,} from "
                f"{_RANK_ORIGINS.get(origin, origin)} (the log has no rank lines)"
            )
        return scenario, said, notes
    where = _RANK_ORIGINS.get(origin, "the log")
    if n != scenario.cluster.n_gpus:
        notes.append(
            f"cluster.n_gpus set to the log's {n} ranks from {where} "
            f"(scenario had {scenario.cluster.n_gpus:,})"
        )
        scenario = apply_overrides(scenario, {"cluster.n_gpus": n})
    return scenario, where, notes


def _log_version(log: NcclTestsLog, scenario: Scenario) -> tuple[Scenario, list[str]]:
    """Follow the log's NCCL release (the newest ``nccl.version`` not after it)."""
    if not log.nccl_version or scenario.nccl.version != VERSIONS[-1]:
        return scenario, []
    try:
        major, minor = (int(p) for p in log.nccl_version.split("+")[0].split(".")[:2])
    except ValueError:
        return scenario, []
    known = [v for v in VERSIONS if version_key(v) <= (major, minor)]
    if not known or known[-1] == scenario.nccl.version:
        return scenario, []
    note = f"nccl.version set to {known[-1]} from the log's NCCL {log.nccl_version}"
    return apply_overrides(scenario, {"nccl.version": known[-1]}), [note]


def compare_log(
    log: NcclTestsLog,
    scenario: Scenario,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    n_gpus_set: bool = False,
) -> LogComparison:
    """Compare a parsed nccl-tests log with the model of ``scenario``.

    The scenario's ``cluster.n_gpus`` is set to the log's rank count when the log's header
    lists 2 or more ``#  Rank`` lines, or when it states a count some other way (NCCL INFO,
    the launch line) and ``n_gpus_set`` is false (``--set cluster.n_gpus`` wins over those);
    a count of 1 is a partial header and never used. ``LogComparison.n_ranks_source`` says
    which. The scenario's ``nccl.version``, at its default (the newest), follows the log's
    NCCL release when the log prints it.

    Raises
    ------
    FabricModelError
        The log's collective is not modelled, or its rank count does not fit the scenario.
    """
    if log.op not in COMPARABLE_OPS:
        raise FabricModelError(
            f"the model covers {', '.join(COMPARABLE_OPS)} logs; this log is {log.op!r}"
        )
    if not 0 < tolerance < 1:
        raise FabricModelError(f"--tolerance = {tolerance}: must be between 0 and 1")
    scenario, origin, notes = _ranks(log, scenario, n_gpus_set)
    scenario, version_notes = _log_version(log, scenario)
    notes += version_notes
    rows_in = [r for r in log.rows if r.oop_time_us and r.oop_busbw_GBps is not None]
    if not rows_in:
        raise FabricModelError("the log has no out-of-place timings to compare")
    sizes = [max(r.size_bytes, 1) for r in rows_in]
    ctx = FabricContext.from_scenario(scenario)
    model = times_from_models(algo_models(ctx, log.op, "auto"), sizes, "auto")
    alternatives = _alternatives(ctx, log.op, sizes)
    failures = _failure_curves(scenario, log.op, sizes)
    out: list[SizeComparison] = []
    for meas, mod in zip(rows_in, model, strict=True):
        mod_busbw = mod.busbw_GBps
        # measured / model bus bandwidth, from the times: the same ratio (busbw is
        # bus_factor x S / t) without the 2-decimal rounding nccl-tests prints busbw with
        ratio = mod.time_us / float(meas.oop_time_us or "nan")  # rows without times are dropped
        regime = "latency-bound" if mod.latency_us > mod.bandwidth_us else "bandwidth-bound"
        measured_us = float(meas.oop_time_us or "nan")
        fit = {a: c[len(out)].time_us / measured_us for a, c in alternatives.items()}
        best = min(fit, key=lambda a: abs(math.log(fit[a]))) if fit else ""
        f_fit = {k: c[len(out)].time_us / measured_us for k, (_, c) in failures.items()}
        f_best = min(f_fit, key=lambda k: abs(math.log(f_fit[k]))) if f_fit else ""
        out.append(
            SizeComparison(
                size_bytes=meas.size_bytes,
                measured_time_us=float(meas.oop_time_us or 0.0),
                model_time_us=mod.time_us,
                measured_busbw_GBps=float(meas.oop_busbw_GBps or 0.0),
                model_busbw_GBps=mod_busbw,
                ratio=ratio,
                regime=regime,
                model_algo=f"{mod.algo}/{mod.proto}",
                bottleneck=mod.bottleneck,
                verdict=_verdict(ratio, regime, mod.bottleneck, tolerance),
                measured_p50_time_us=meas.oop_p50_us,
                measured_p99_time_us=meas.oop_p99_us,
                measured_p50_busbw_GBps=meas.oop_p50_busbw_GBps,
                measured_p99_busbw_GBps=meas.oop_p99_busbw_GBps,
                best_match_algo=best,
                best_match_ratio=fit.get(best, math.nan),
                failure_match=f_best,
                failure_match_ratio=f_fit.get(f_best, math.nan),
            )
        )
    measured = [r.measured_time_us for r in out]
    diagnosis, key = _diagnose(out, failures, alternatives, measured, tolerance)
    label = failures[key][0].label if key else None
    advice = _advice(out, alternatives, measured, tolerance, label)
    return LogComparison(
        log.op,
        scenario.cluster.n_gpus,
        tuple(out),
        tuple(notes),
        advice,
        n_ranks_source=origin,
        diagnosis=diagnosis,
        diagnosis_key=key,
    )
