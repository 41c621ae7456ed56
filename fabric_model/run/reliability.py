"""Failures, goodput, time to train and cost per training run of one design.

A synchronous training job stops whenever any part it runs on fails: a GPU, a server, a NIC,
or any switch, transceiver or cable of its fabric (a failed leaf stops every rank behind it,
and with them the job). Rates per component class are the ``reliability.*`` keys, whose
defaults and sources are in ``assets/reliability.yaml``; the counts come from the design's
bill of materials (:func:`fabric_model.plant.cost.bill_of_materials`), so more optics and switches
mean more interruptions.

Formulas (``lambda`` = interruptions per second, ``M = 1 / lambda`` the MTBF, ``delta`` the
checkpoint write time, ``tau`` the training time between checkpoints, ``R`` the restart
time):

- interruptions per day = sum over classes of count x failures per year / 365;
- ``delta`` = checkpoint bytes / (GPUs x write GB/s per GPU x 1e9); the checkpoint holds the
  bf16 weights and the fp32 optimizer state (``weight_bytes_per_param +
  optimizer_bytes_per_param`` of ``assets/training_constants.yaml``, 14 bytes per parameter);
- ``tau`` = ``sqrt(2 delta M)`` unless set (Young 1974, the first-order optimum; Daly 2006);
- goodput, the useful share of wall time, to first order as Young and Daly count the waste:
  each interval of ``tau`` trains and ``delta`` writes, and each failure costs the restart
  plus on average half an interval of lost work::

      goodput = tau / (tau + delta) x (1 - lambda x (R + (tau + delta) / 2))

  (at or below zero the run never finishes: failures come faster than it can recover);
- days to train = ``training.total_tokens`` / (tokens/s of the step x goodput) / 86,400;
- cost per run = the cluster's TCO per day x days, where the TCO is the servers' and the
  network's capex plus their energy at the PUE and $/kWh over ``costs.years``
  (:class:`~fabric_model.plant.cost.BillOfMaterials`), so capex is amortised over the horizon;
- $ per million tokens = cost per run / (total tokens / 1e6).

>>> goodput(interval_s=3600.0, write_s=60.0, restart_s=600.0, failures_per_s=1 / 86_400)
0.9559...
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from fabric_model.plant.cost import BillOfMaterials
from fabric_model.scenario import RELIABILITY_DATA, Scenario
from fabric_model.scenario.shapes import shape_counts
from fabric_model.training.memory import OPTIMIZER_BYTES, WEIGHT_BYTES
from fabric_model.units import GIB, HOURS_PER_YEAR

__all__ = [
    "CHECKPOINT_BYTES_PER_PARAM",
    "COMPONENT_CLASSES",
    "DAYS_PER_YEAR",
    "SECONDS_PER_DAY",
    "RunEstimate",
    "checkpoint_bytes",
    "component_counts",
    "estimate_run",
    "goodput",
    "interruptions_per_day",
    "run_cost_usd",
    "young_daly_interval_s",
]

SECONDS_PER_DAY = 86_400.0
DAYS_PER_YEAR = HOURS_PER_YEAR / 24.0
#: Bytes a checkpoint holds per parameter: bf16 weights and fp32 master weights + Adam moments.
CHECKPOINT_BYTES_PER_PARAM = WEIGHT_BYTES + OPTIMIZER_BYTES
#: Component class -> the ``reliability.*`` key of its rate.
COMPONENT_CLASSES = {
    "gpu": "gpu_failures_per_year",
    "server": "server_failures_per_year",
    "nic": "nic_failures_per_year",
    "switch": "switch_failures_per_year",
    "optic": "optic_failures_per_year",
    "cable": "cable_failures_per_year",
    "software": "software_failures_per_year",
}
#: The sources of the defaults (for reports).
SOURCES = RELIABILITY_DATA


def component_counts(bom: BillOfMaterials) -> dict[str, int]:
    """Return how many parts of each class the design has (software counts per GPU)."""
    return {
        "gpu": bom.n_gpus,
        "server": bom.n_servers,
        "nic": bom.n_nics,
        "switch": bom.topology.n_switches,
        "optic": bom.n_transceivers,
        "cable": bom.n_cables,
        "software": bom.n_gpus,
    }


def interruptions_per_day(scenario: Scenario, counts: dict[str, int]) -> dict[str, float]:
    """Return the job interruptions per day from each component class.

    ``count x failures per component-year / 365``.
    """
    rel = scenario.reliability
    return {
        cls: counts[cls] * float(getattr(rel, key)) / DAYS_PER_YEAR
        for cls, key in COMPONENT_CLASSES.items()
    }


def checkpoint_bytes(scenario: Scenario) -> float:
    """Return the checkpoint size, bytes (``reliability.checkpoint_gib`` or from the model)."""
    size = scenario.reliability.checkpoint_gib
    if size == "auto":
        return shape_counts(scenario.model).total * CHECKPOINT_BYTES_PER_PARAM
    return float(size) * GIB


def young_daly_interval_s(write_s: float, mtbf_s: float) -> float:
    """Return the optimum training time between checkpoints, s: ``sqrt(2 delta M)``.

    Young (1974), first order; Daly (2006) shows it within a few percent of the higher-order
    optimum while the write time is well below the MTBF. Infinite MTBF: never checkpoint.
    """
    if math.isinf(mtbf_s):
        return math.inf
    return math.sqrt(2.0 * write_s * mtbf_s)


def goodput(*, interval_s: float, write_s: float, restart_s: float, failures_per_s: float) -> float:
    """Return the useful share of wall time (may be <= 0: the run never finishes).

    ``tau / (tau + delta) x (1 - lambda x (R + (tau + delta) / 2))`` (module docstring).
    """
    if math.isinf(interval_s):
        return 1.0 if failures_per_s == 0 else -math.inf
    segment = interval_s + write_s
    return interval_s / segment * (1.0 - failures_per_s * (restart_s + segment / 2.0))


def run_cost_usd(bom: BillOfMaterials, days: float) -> float:
    """Return the cost of ``days`` of the whole cluster, USD.

    The cluster's TCO (servers' and network capex plus their energy at the PUE and $/kWh over
    ``costs.years``) per day of the horizon, times ``days``.
    """
    return _cluster_tco_usd(bom) / (bom.costs.years * DAYS_PER_YEAR) * days


def _cluster_tco_usd(bom: BillOfMaterials) -> float:
    return bom.cluster_capex_usd + bom.energy_usd(bom.cluster_power_w)


@dataclass(frozen=True)
class RunEstimate:
    """A training run of one design: failures, goodput, days and money.

    ``feasible`` is False when failures leave no time to train (``reason`` says why, naming
    the key); the interruption and cost-rate figures are still filled in.
    """

    interruptions_per_day: float
    interruptions_by_class: dict[str, float]
    mtbf_s: float
    checkpoint_bytes: float
    checkpoint_write_s: float
    checkpoint_interval_s: float
    goodput: float
    time_to_train_days: float
    network_capex_usd: float
    cluster_capex_usd: float
    tco_usd: float
    cost_per_run_usd: float
    usd_per_million_tokens: float
    feasible: bool = True
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Return every field as a plain dict."""
        return {
            "interruptions_per_day": self.interruptions_per_day,
            "interruptions_by_class": dict(self.interruptions_by_class),
            "mtbf_s": self.mtbf_s,
            "checkpoint_bytes": self.checkpoint_bytes,
            "checkpoint_write_s": self.checkpoint_write_s,
            "checkpoint_interval_s": self.checkpoint_interval_s,
            "goodput": self.goodput,
            "time_to_train_days": self.time_to_train_days,
            "network_capex_usd": self.network_capex_usd,
            "cluster_capex_usd": self.cluster_capex_usd,
            "tco_usd": self.tco_usd,
            "cost_per_run_usd": self.cost_per_run_usd,
            "usd_per_million_tokens": self.usd_per_million_tokens,
            "feasible": self.feasible,
            "reason": self.reason,
        }


def estimate_run(scenario: Scenario, tokens_per_s: float, bom: BillOfMaterials) -> RunEstimate:
    """Estimate the whole training run of ``scenario`` (see the module docstring).

    Parameters
    ----------
    scenario
        The design (its ``reliability``, ``training.total_tokens`` and ``costs`` keys).
    tokens_per_s
        Training throughput of its step, tokens/s
        (:attr:`~fabric_model.training.StepResult.tokens_per_s`).
    bom
        Its bill of materials (the component counts, capex and power).
    """
    rel = scenario.reliability
    by_class = interruptions_per_day(scenario, component_counts(bom))
    per_day = sum(by_class.values())
    rate_per_s = per_day / SECONDS_PER_DAY
    mtbf_s = 1.0 / rate_per_s if rate_per_s > 0 else math.inf
    ckpt = checkpoint_bytes(scenario)
    write_s = ckpt / (scenario.cluster.n_gpus * rel.checkpoint_write_GBps_per_gpu * 1e9)
    interval = (
        young_daly_interval_s(write_s, mtbf_s)
        if rel.checkpoint_interval_s == "auto"
        else float(rel.checkpoint_interval_s)
    )
    useful = goodput(
        interval_s=interval, write_s=write_s, restart_s=rel.restart_s, failures_per_s=rate_per_s
    )
    tco = _cluster_tco_usd(bom)
    common: dict[str, Any] = {
        "interruptions_per_day": per_day,
        "interruptions_by_class": by_class,
        "mtbf_s": mtbf_s,
        "checkpoint_bytes": ckpt,
        "checkpoint_write_s": write_s,
        "checkpoint_interval_s": interval,
        "network_capex_usd": bom.capex_usd,
        "cluster_capex_usd": bom.cluster_capex_usd,
        "tco_usd": tco,
    }
    if not useful > 0 or not tokens_per_s > 0:
        return RunEstimate(
            **common,
            goodput=max(useful, 0.0),
            time_to_train_days=math.nan,
            cost_per_run_usd=math.nan,
            usd_per_million_tokens=math.nan,
            feasible=False,
            reason=(
                f"reliability.restart_s: an interruption every {mtbf_s / 60:,.1f} min "
                f"({per_day:,.1f} a day) leaves no time to train with a "
                f"{rel.restart_s:g} s restart and a checkpoint every {interval:,.0f} s; "
                "lower the failure rates or the restart time, or use fewer parts"
            ),
        )
    days = scenario.training.total_tokens / (tokens_per_s * useful) / SECONDS_PER_DAY
    cost = run_cost_usd(bom, days)
    return RunEstimate(
        **common,
        goodput=useful,
        time_to_train_days=days,
        cost_per_run_usd=cost,
        usd_per_million_tokens=cost / (scenario.training.total_tokens / 1e6),
    )
