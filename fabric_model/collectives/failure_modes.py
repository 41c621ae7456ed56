"""Failure modes and misconfigurations as scenario overrides (``assets/failure_modes.yaml``).

Each :class:`FailureMode` is a label, the scenario keys that produce it, its mechanism, the
setting an operator checks and its source. :func:`misconfigured` applies one to a design, or
says it does not apply (the design refuses its keys, as InfiniBand refuses ``what_if.pfc``,
or already has them). check-nccl names the mode whose modelled curve a log follows
(``fabric_model.validate.compare``) and acceptance lists the floors that catch each one: the
modes with a ``check`` (:func:`checkable_modes`; a slow GPU has no network signature). The
health view (``fabric_model.report.health``) ranks every mode by its cost to the step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from fabric_model.errors import FabricModelError
from fabric_model.plant.design import resolve_hardware
from fabric_model.resources import asset, load_yaml
from fabric_model.scenario import Scenario, apply_overrides, coerce_value

__all__ = [
    "FAILURE_MODES_PATH",
    "FailureMode",
    "checkable_modes",
    "failure_modes",
    "misconfigured",
]

FAILURE_MODES_PATH = asset("failure_modes.yaml")


@dataclass(frozen=True)
class FailureMode:
    """One failure mode: what produces it and what to check.

    Attributes
    ----------
    key, label : str
        Its ``id`` in the file and a label for tables.
    overrides : Mapping[str, Any]
        Scenario keys and values that produce it (validated at load).
    mechanism : str
        What breaks and how it reaches the step.
    check : str
        The NCCL, NIC or switch setting an operator checks (the diagnosis's advice); empty
        where none shows it on the network.
    source : str
        Where the mode and its size come from.
    """

    key: str
    label: str
    overrides: Mapping[str, Any]
    mechanism: str
    check: str
    source: str


@lru_cache(maxsize=1)
def failure_modes() -> tuple[FailureMode, ...]:
    """Return every failure mode of ``assets/failure_modes.yaml``, in file order.

    Raises
    ------
    FabricModelError
        An entry without a label, check or source, or with an override the scenario refuses.
    """
    doc = load_yaml(FAILURE_MODES_PATH)
    out = []
    for e in doc["modes"]:
        key = str(e.get("id", ""))
        for field in ("id", "label", "overrides", "mechanism", "source"):
            if not e.get(field):
                raise FabricModelError(f"{FAILURE_MODES_PATH.name}: {key}.{field} is missing")
        overrides = {k: coerce_value(k, v) for k, v in dict(e["overrides"]).items()}
        out.append(
            FailureMode(
                key=key,
                label=" ".join(str(e["label"]).split()),
                overrides=overrides,
                mechanism=" ".join(str(e["mechanism"]).split()),
                check=" ".join(str(e.get("check", "")).split()),
                source=" ".join(str(e["source"]).split()),
            )
        )
    return tuple(out)


def checkable_modes() -> tuple[FailureMode, ...]:
    """Return the modes with a ``check``: what check-nccl diagnoses and acceptance catches."""
    return tuple(m for m in failure_modes() if m.check)


def misconfigured(scenario: Scenario, mode: FailureMode) -> Scenario | None:
    """Return ``scenario`` with the failure mode's keys, or None where it does not apply.

    None when the design already has those values, or refuses them (the design cannot have
    this failure: PFC off on InfiniBand, a cross-socket NIC on a Grace tray).
    """
    if all(scenario.get(k) == v for k, v in mode.overrides.items()):
        return None
    try:
        out = apply_overrides(scenario, dict(mode.overrides))
        resolve_hardware(out)
    except FabricModelError:
        return None
    return out
