"""Measured vs model: an nccl-tests log against the collective model of a scenario.

The log says which collective ran and on how many ranks; the scenario describes the
cluster. Each size gets the model's time and bus bandwidth for NCCL's own choice of
algorithm (``auto``), the ratio measured / model, the regime (latency-bound when the model's
latency term exceeds its bandwidth term) and a plain verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabric_model.collectives import collective
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
        }


@dataclass(frozen=True)
class LogComparison:
    """A whole log against the model, with the notes on how the scenario was adapted."""

    op: str
    n_ranks: int
    rows: tuple[SizeComparison, ...]
    notes: tuple[str, ...]

    @property
    def median_ratio(self) -> float:
        """Median measured / model bus-bandwidth ratio over the bandwidth-bound sizes."""
        ratios = sorted(r.ratio for r in self.rows if r.regime == "bandwidth-bound") or sorted(
            r.ratio for r in self.rows
        )
        mid = len(ratios) // 2
        return ratios[mid] if len(ratios) % 2 else (ratios[mid - 1] + ratios[mid]) / 2


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
    where = "NVLink" if bottleneck == "nvlink" else f"the {bottleneck} links"
    return (
        f"below, bandwidth-bound: look at {where} (NIC and cable health, rails in "
        f"NCCL_IB_HCA, ECMP hashing and congestion control, oversubscription)"
    )


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
    model = collective(scenario, log.op, "auto", [max(r.size_bytes, 1) for r in rows_in])
    out = []
    for meas, mod in zip(rows_in, model, strict=True):
        mod_busbw = mod.busbw_GBps
        # measured / model bus bandwidth, from the times: the same ratio (busbw is
        # bus_factor x S / t) without the 2-decimal rounding nccl-tests prints busbw with
        ratio = mod.time_us / float(meas.oop_time_us or "nan")  # rows without times are dropped
        regime = "latency-bound" if mod.latency_us > mod.bandwidth_us else "bandwidth-bound"
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
            )
        )
    return LogComparison(log.op, scenario.cluster.n_gpus, tuple(out), tuple(notes))
