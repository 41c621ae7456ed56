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
from dataclasses import dataclass
from typing import Any

from fabric_model.collectives import ALGORITHMS, ALGOS, CollectiveTime, collective
from fabric_model.errors import FabricModelError
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.validate.nccl_log import NcclTestsLog

__all__ = [
    "COMPARABLE_OPS",
    "DEFAULT_TOLERANCE",
    "LogComparison",
    "SizeComparison",
    "compare_log",
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
        }


@dataclass(frozen=True)
class LogComparison:
    """A whole log against the model, with the notes on how the scenario was adapted.

    ``advice`` is what follows from the model's fields: which algorithm the measurements
    match when it is not NCCL's choice, and where a bandwidth-bound shortfall sits.
    """

    op: str
    n_ranks: int
    rows: tuple[SizeComparison, ...]
    notes: tuple[str, ...]
    advice: tuple[str, ...] = ()

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


#: How a job makes NCCL run each algorithm, for the advice (the algorithm registry's).
_HOW_TO_RUN = {name: a.nccl for name, a in ALGORITHMS.items()}


def _alternatives(scenario: Scenario, op: str, sizes: list[int]) -> dict[str, list[CollectiveTime]]:
    """Every other algorithm's curve at ``sizes``; one the fabric cannot run is left out."""
    out = {}
    for algo in ALGOS:
        if algo == "auto":
            continue
        try:
            out[algo] = collective(scenario, op, algo, sizes)
        except FabricModelError:
            continue
    return out


def _advice(
    rows: list[SizeComparison],
    alternatives: dict[str, list[CollectiveTime]],
    measured_us: list[float],
    tol: float,
) -> tuple[str, ...]:
    """Say which algorithm the bandwidth-bound sizes follow, when it is not NCCL's choice."""
    idx = [i for i, r in enumerate(rows) if r.regime == "bandwidth-bound"] or list(range(len(rows)))
    auto_ratio = statistics.median([rows[i].ratio for i in idx])
    picked = sorted({rows[i].model_algo.split("/")[0] for i in idx})
    fits = {
        algo: statistics.median([curve[i].time_us / measured_us[i] for i in idx])
        for algo, curve in alternatives.items()
    }
    if not fits:
        return ()
    best, best_ratio = min(fits.items(), key=lambda kv: abs(math.log(kv[1])))
    advice = []
    if (
        best not in picked
        and abs(best_ratio - 1) <= tol
        and abs(math.log(best_ratio)) < abs(math.log(auto_ratio))
    ):
        advice.append(
            f"the bandwidth-bound sizes match a {best}-only run (measured / model "
            f"{best_ratio:.2f}) better than NCCL's own choice here, {' and '.join(picked)} "
            f"({auto_ratio:.2f}): the job probably ran {_HOW_TO_RUN.get(best, best)}, "
            f"or with NCCL's other algorithms disabled"
        )
    elif abs(auto_ratio - 1) > tol:
        bottleneck = rows[idx[len(idx) // 2]].bottleneck
        ahead = "above" if auto_ratio > 1 else "below"
        advice.append(
            f"{ahead} the model by {abs(auto_ratio - 1):.0%} at the bandwidth-bound sizes, and "
            f"no other algorithm explains it (closest: {best} at {best_ratio:.2f}); the "
            f"model's limit there is {bottleneck}"
        )
    return tuple(advice)


def compare_log(
    log: NcclTestsLog, scenario: Scenario, *, tolerance: float = DEFAULT_TOLERANCE
) -> LogComparison:
    """Compare a parsed nccl-tests log with the model of ``scenario``.

    The scenario's ``cluster.n_gpus`` is set to the log's rank count when the log states it.

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
    notes = []
    if log.n_ranks and log.n_ranks != scenario.cluster.n_gpus:
        notes.append(
            f"cluster.n_gpus set to the log's {log.n_ranks} ranks "
            f"(scenario had {scenario.cluster.n_gpus:,})"
        )
        scenario = apply_overrides(scenario, {"cluster.n_gpus": log.n_ranks})
    rows_in = [r for r in log.rows if r.oop_time_us and r.oop_busbw_GBps is not None]
    if not rows_in:
        raise FabricModelError("the log has no out-of-place timings to compare")
    sizes = [max(r.size_bytes, 1) for r in rows_in]
    model = collective(scenario, log.op, "auto", sizes)
    alternatives = _alternatives(scenario, log.op, sizes)
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
            )
        )
    advice = _advice(out, alternatives, [r.measured_time_us for r in out], tolerance)
    return LogComparison(log.op, scenario.cluster.n_gpus, tuple(out), tuple(notes), advice)
