"""The ``SECTIONS`` registry and the key table built from it.

:func:`field_spec` looks up a dotted key, :func:`coerce_value` converts and checks a raw value,
and :func:`_build_section` builds one section's dataclass from a mapping.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterator, Mapping
from typing import Any

from fabric_model.errors import ScenarioError
from fabric_model.scenario.costs import CostSpec, ReliabilitySpec
from fabric_model.scenario.fields import FieldSpec
from fabric_model.scenario.hardware import ClusterSpec, FabricSpec
from fabric_model.scenario.hybrid import HybridSpec
from fabric_model.scenario.nccl import NcclSpec
from fabric_model.scenario.ocs import OcsSpec
from fabric_model.scenario.plant import FacilitySpec, ManagementSpec, StorageSpec
from fabric_model.scenario.tails import TailsSpec
from fabric_model.scenario.whatif import WhatIfSpec
from fabric_model.scenario.workload import (
    ModelSpec,
    ParallelismPlan,
    TrainingSpec,
    _expand_model_name,
)

__all__ = ["SECTIONS", "coerce_value", "field_spec", "iter_field_specs"]


#: Section name -> dataclass, in document order.
SECTIONS: dict[str, type] = {
    "cluster": ClusterSpec,
    "fabric": FabricSpec,
    "model": ModelSpec,
    "parallel": ParallelismPlan,
    "training": TrainingSpec,
    "what_if": WhatIfSpec,
    "costs": CostSpec,
    "reliability": ReliabilitySpec,
    "facility": FacilitySpec,
    "storage": StorageSpec,
    "management": ManagementSpec,
    "hybrid": HybridSpec,
    "ocs": OcsSpec,
    "nccl": NcclSpec,
    "tails": TailsSpec,
}


def iter_field_specs() -> Iterator[tuple[str, FieldSpec, Any]]:
    """Yield ``(dotted_key, spec, default)`` for every scenario key."""
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            yield f"{section}.{f.name}", f.metadata["spec"], f.default


_SPECS: dict[str, tuple[FieldSpec, Any]] = {k: (s, d) for k, s, d in iter_field_specs()}


def field_spec(key: str) -> FieldSpec:
    """Return the :class:`FieldSpec` of a dotted key (``"fabric.link_gbps"``)."""
    try:
        return _SPECS[key][0]
    except KeyError:
        raise ScenarioError(key, ScenarioError.NO_VALUE, _unknown_key_hint(key)) from None


def _unknown_key_hint(key: str) -> str:
    close = difflib.get_close_matches(key, list(_SPECS), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    sections = ", ".join(SECTIONS)
    return f"unknown key (sections: {sections}; see `python -m fabric_model keys`){hint}"


# --------------------------------------------------------------------------------------
# Coercion and validation
# --------------------------------------------------------------------------------------

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def coerce_value(key: str, raw: Any) -> Any:
    """Convert a raw value (from YAML, JSON, a URL or ``--set``) to the key's type and check it.

    Raises
    ------
    ScenarioError
        Naming the key, the value and what is allowed. Values are never clamped.
    """
    spec = field_spec(key)
    bad = ScenarioError(key, raw, "must be " + spec.allowed())
    if isinstance(raw, str):
        text = raw.strip()
        if spec.auto and text.lower() == "auto":
            return "auto"
        if spec.optional and text.lower() in ("", "null", "none", "catalog"):
            return None
    else:
        text = None
        if spec.optional and raw is None:
            return None

    if spec.kind == "bool":
        if isinstance(raw, bool):
            return raw
        if text is not None and text.lower() in _TRUE | _FALSE:
            return text.lower() in _TRUE
        raise bad
    if spec.kind == "text":
        if not isinstance(raw, str) or not text:
            raise bad
        return text
    if spec.kind == "choice":
        if isinstance(raw, bool) and {"on", "off"} <= set(spec.choices):
            return "on" if raw else "off"  # YAML 1.1 reads on/off as booleans
        for choice in spec.choices:
            if isinstance(choice, int):
                if _as_int(raw, text) == choice:
                    return choice
            elif text is not None and text == choice:
                return choice
            elif isinstance(raw, float) and _numeric_text(choice) and float(choice) == raw:
                return choice  # YAML reads nccl.version: 2.30 as the float 2.3
        raise bad
    value: float | int
    if spec.kind == "int":
        as_int = _as_int(raw, text)
        if as_int is None:
            raise bad
        value = as_int
    else:  # float
        if isinstance(raw, bool):
            raise bad
        try:
            value = float(text if text is not None else raw)
        except (TypeError, ValueError):
            raise bad from None
        if value != value or value in (float("inf"), float("-inf")):
            raise bad
    if spec.min is not None and (value <= spec.min if spec.min_exclusive else value < spec.min):
        raise bad
    if spec.max is not None and value > spec.max:
        raise bad
    return value


def _numeric_text(text: str) -> bool:
    return text.replace(".", "", 1).isdigit()


def _as_int(raw: Any, text: str | None) -> int | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float):
        return int(raw) if raw.is_integer() else None
    if text is not None:
        try:
            return int(text.replace("_", ""))
        except ValueError:
            try:
                as_float = float(text)
            except ValueError:
                return None
            return int(as_float) if as_float.is_integer() else None
    return None


def _build_section(section: str, data: Any) -> Any:
    cls = SECTIONS[section]
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ScenarioError(section, data, "must be a mapping of keys to values")
    names = {f.name for f in dataclasses.fields(cls)}
    values = {}
    for name, raw in data.items():
        key = f"{section}.{name}"
        if name not in names:
            raise ScenarioError(key, ScenarioError.NO_VALUE, _unknown_key_hint(key))
        values[name] = coerce_value(key, raw)
    if section == "model":
        values = _expand_model_name(values)
    return cls(**values)
