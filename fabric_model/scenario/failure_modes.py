"""Failure modes and misconfigurations as named sets of scenario overrides.

``assets/failure_modes.yaml`` lists what goes wrong in a cluster (a NIC at half rate, a
scattered job, PFC off, a flapping link, ...), each as the scenario keys that produce it, its
mechanism, the setting an operator checks and its source. Its overrides are checked against
the key table as the file is read, so a mode is a scenario change like any other: the
health view (``fabric_model.report.health``) ranks every mode by its cost to the step, and
check-nccl and acceptance (``fabric_model.collectives.failure_modes``) diagnose and catch
the modes with a ``check``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from fabric_model.errors import FabricModelError
from fabric_model.resources import asset, load_yaml
from fabric_model.scenario.registry import coerce_value

__all__ = ["FAILURE_MODES_PATH", "FailureMode", "failure_modes"]

FAILURE_MODES_PATH = asset("failure_modes.yaml")


@dataclass(frozen=True)
class FailureMode:
    """One failure mode: what produces it and what to check.

    Attributes
    ----------
    id, label : str
        Its ``id`` in the file and a label for tables.
    overrides : Mapping[str, Any]
        Scenario keys and values that produce it (validated at load), in file order.
    mechanism : str
        What breaks and how it reaches the step.
    check : str
        The NCCL, NIC or switch setting an operator checks (the diagnosis's advice); empty
        where none shows it on the network.
    source : str
        Where the mode and its size come from.
    """

    id: str
    label: str
    overrides: Mapping[str, Any]
    mechanism: str
    check: str
    source: str

    @property
    def key(self) -> str:
        """The mode's ``id`` (the name the diagnosis and acceptance rows carry)."""
        return self.id


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
                id=key,
                label=" ".join(str(e["label"]).split()),
                overrides=overrides,
                mechanism=" ".join(str(e["mechanism"]).split()),
                check=" ".join(str(e.get("check", "")).split()),
                source=" ".join(str(e["source"]).split()),
            )
        )
    return tuple(out)
