"""Sections ``costs`` and ``reliability``: prices and running costs; failure rates and restarts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from fabric_model.resources import asset
from fabric_model.scenario.fields import FieldSpec, _f

__all__ = ["RELIABILITY_DATA", "CostSpec", "ReliabilitySpec"]


@dataclass(frozen=True)
class CostSpec:
    """Price overrides (null = catalog value) and the TCO assumptions."""

    switch_usd: float | None = _f(
        None, FieldSpec("float", "price of one switch", "USD", min=0.0, max=1e7, optional=True)
    )
    nic_usd: float | None = _f(
        None, FieldSpec("float", "price of one NIC", "USD", min=0.0, max=1e6, optional=True)
    )
    optic_switch_usd: float | None = _f(
        None,
        FieldSpec(
            "float", "price of one switch-side transceiver", "USD", min=0.0, max=1e6, optional=True
        ),
    )
    optic_nic_usd: float | None = _f(
        None,
        FieldSpec(
            "float", "price of one NIC-side transceiver", "USD", min=0.0, max=1e6, optional=True
        ),
    )
    copper_cable_usd: float | None = _f(
        None,
        FieldSpec("float", "price of one copper cable", "USD", min=0.0, max=1e5, optional=True),
    )
    fiber_usd: float | None = _f(
        None,
        FieldSpec(
            "float",
            "price of the fiber for one optical link",
            "USD",
            min=0.0,
            max=1e5,
            optional=True,
        ),
    )
    server_usd: float | None = _f(
        None,
        FieldSpec(
            "float",
            "price of one GPU server without scale-out NICs",
            "USD",
            min=0.0,
            max=1e8,
            optional=True,
        ),
    )
    electricity_usd_per_kwh: float = _f(
        0.08,
        FieldSpec("float", "electricity price", "USD/kWh", min=0.0, max=2.0, step=0.01),
    )
    pue: float = _f(
        1.25, FieldSpec("float", "power usage effectiveness", "", min=1.0, max=3.0, step=0.05)
    )
    years: float = _f(5.0, FieldSpec("float", "TCO horizon", "years", min=0.5, max=15.0, step=0.5))


#: Failure rates and checkpoint defaults with their sources (``assets/reliability.yaml``).
RELIABILITY_DATA: dict[str, Any] = yaml.safe_load(
    asset("reliability.yaml").read_text(encoding="utf-8")
)


def _rate(component: str) -> float:
    return float(RELIABILITY_DATA["rates_per_year"][component]["value"])


def _rate_spec(what: str, source: str, unit: str = "") -> FieldSpec:
    return FieldSpec(
        "float",
        f"job-interrupting failures per {what} per year ({source}; "
        "assets/reliability.yaml gives the derivation)",
        unit or f"per {what}-year",
        min=0.0,
        max=100.0,
        step=0.001,
    )


_LLAMA3 = "Llama 3 paper Table 5: 419 interruptions in 54 days on 16,384 H100"


@dataclass(frozen=True)
class ReliabilitySpec:
    """Failures per component class, checkpoints and restarts (time to train, cost per run)."""

    gpu_failures_per_year: float = _f(_rate("gpu"), _rate_spec("GPU", _LLAMA3))
    server_failures_per_year: float = _f(
        _rate("server"), _rate_spec("server (host parts but the NIC)", _LLAMA3, "per server-year")
    )
    nic_failures_per_year: float = _f(_rate("nic"), _rate_spec("NIC", _LLAMA3))
    switch_failures_per_year: float = _f(
        _rate("switch"),
        _rate_spec("switch", "Singh et al. 2021: 2% of Microsoft's switches fail in 3 months"),
    )
    optic_failures_per_year: float = _f(
        _rate("optic"),
        _rate_spec(
            "transceiver",
            "thin data: Llama 3's 35 switch/cable interruptions less the switches' share, "
            "spread over a 16K-GPU fabric's transceivers and cables",
        ),
    )
    cable_failures_per_year: float = _f(
        _rate("cable"), _rate_spec("cable", "the same calibration as the transceivers")
    )
    software_failures_per_year: float = _f(
        _rate("software"),
        _rate_spec("GPU from software and NCCL hangs", _LLAMA3, "per GPU-year"),
    )
    checkpoint_gib: float | str = _f(
        "auto",
        FieldSpec(
            "float",
            "checkpoint size; auto = parameters x (bf16 weights + fp32 optimizer state), "
            "14 bytes per parameter",
            "GiB",
            min=0.0,
            max=1e7,
            min_exclusive=True,
            auto=True,
        ),
    )
    checkpoint_write_GBps_per_gpu: float = _f(
        float(RELIABILITY_DATA["checkpoint"]["write_GBps_per_gpu"]["value"]),
        FieldSpec(
            "float",
            "aggregate checkpoint write bandwidth per GPU of the job (the default: Llama 3's "
            "2 TB/s of storage for 16,384 GPUs)",
            "GB/s per GPU",
            min=0.0,
            max=100.0,
            min_exclusive=True,
            step=0.01,
        ),
    )
    restart_s: float = _f(
        float(RELIABILITY_DATA["checkpoint"]["restart_s"]["value"]),
        FieldSpec(
            "float",
            "time from a failure to training again: detect, reschedule, reload the checkpoint "
            "(an assumption: no public figure)",
            "s",
            min=0.0,
            max=86_400.0,
            step=30.0,
        ),
    )
    checkpoint_interval_s: float | str = _f(
        "auto",
        FieldSpec(
            "float",
            "training time between checkpoints; auto = the Young/Daly optimum "
            "sqrt(2 x write time x MTBF)",
            "s",
            min=0.0,
            max=1e7,
            min_exclusive=True,
            auto=True,
        ),
    )
    repair_h: float = _f(
        float(RELIABILITY_DATA["checkpoint"]["repair_h"]["value"]),
        FieldSpec(
            "float",
            "time a failed node or leaf switch stays out of the pool before it returns "
            "(schedule; an assumption: no public per-repair figure)",
            "h",
            min=0.0,
            max=8760.0,
            min_exclusive=True,
            step=1.0,
        ),
    )
