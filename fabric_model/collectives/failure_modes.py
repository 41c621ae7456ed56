"""Failure modes applied to a design, and the ones the network shows.

The modes (``assets/failure_modes.yaml``, read by :mod:`fabric_model.scenario.failure_modes`)
are each a label, the scenario keys that produce it, its mechanism, the setting an operator
checks and its source. :func:`misconfigured` applies one to a design, or says it does not
apply (the design refuses its keys, as InfiniBand refuses ``what_if.pfc``, or already has
them). check-nccl names the mode whose modelled curve a log follows
(``fabric_model.validate.compare``) and acceptance lists the floors that catch each one: the
modes with a ``check`` (:func:`checkable_modes`; a slow GPU has no network signature). The
health view (``fabric_model.report.health``) ranks every mode by its cost to the step.
"""

from __future__ import annotations

from fabric_model.errors import FabricModelError
from fabric_model.plant.design import resolve_hardware
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.scenario.failure_modes import FAILURE_MODES_PATH, FailureMode, failure_modes

__all__ = [
    "FAILURE_MODES_PATH",
    "FailureMode",
    "checkable_modes",
    "failure_modes",
    "misconfigured",
]


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
