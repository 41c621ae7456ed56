"""The training model's constants, read from ``assets/training_constants.yaml``.

Each entry carries a source or an ``estimate:`` note in the file; the loader refuses an
entry without one, as the catalog does.
"""

from __future__ import annotations

from functools import lru_cache

import yaml

from fabric_model.errors import CatalogError
from fabric_model.resources import asset

__all__ = ["CONSTANTS_PATH", "training_constant", "training_constants"]

CONSTANTS_PATH = asset("training_constants.yaml")


@lru_cache(maxsize=1)
def training_constants() -> dict[str, float]:
    """Return ``{name: value}`` of every constant (each checked to have a note)."""
    data = yaml.safe_load(CONSTANTS_PATH.read_text(encoding="utf-8"))
    out = {}
    for name, entry in data["constants"].items():
        if (
            not isinstance(entry, dict)
            or "value" not in entry
            or not str(entry.get("note", "")).strip()
        ):
            raise CatalogError(
                f"{CONSTANTS_PATH.name}: {name} needs a value and a note "
                f"(its source, or 'estimate: ...')"
            )
        out[name] = float(entry["value"])
    return out


def training_constant(name: str) -> float:
    """Return one constant by name."""
    return training_constants()[name]
