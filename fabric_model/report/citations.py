"""Where the model's numbers and formulas come from, read from the model's data files.

Provenance lives next to what it describes, and this module only collects it:

- **data**: every catalog entry carries a source note per numeric field (the catalog loader
  refuses one without), the NCCL-like constants a version and a ``sources`` table, the
  training constants a note each (their loader refuses one without), the published model
  shapes a ``source``. :func:`entry_sources`, :func:`nccl_sources`,
  :func:`training_constant_sources` and :func:`model_shape_source` turn them into
  :class:`NumberSource` rows, and :func:`bom_catalog_entries` names the entries a design
  uses.
- **formulas**: ``assets/formulas.yaml`` holds one entry per formula the report cites, with
  the formula, the module and function implementing it and its source (a catalog source key
  such as ``[S49]`` in it refers to the catalog's sources); :func:`load_formulas` reads it
  into :class:`Formula` rows and :func:`formula_citations` picks those of a design.

Nothing here renders: the HTML report (``ui.report``) lays the rows out.

>>> [f.key for f in formula_citations("torus-3d")][:2]
['maxmin_fair_rates', 'collective_time']
>>> "fat_tree_sizing" in {f.key for f in formula_citations("torus-3d")}
False
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from fabric_model.catalog import Catalog
from fabric_model.collectives import nccl_constants
from fabric_model.errors import CatalogError
from fabric_model.resources import asset, load_yaml
from fabric_model.scenario import MODEL_SHAPES, field_spec
from fabric_model.training.constants import CONSTANTS_PATH, training_constants

if TYPE_CHECKING:
    from fabric_model.plant.cost import BillOfMaterials

__all__ = [
    "FORMULAS_PATH",
    "Formula",
    "NumberSource",
    "bom_catalog_entries",
    "cited_source_keys",
    "entry_sources",
    "formula_citations",
    "formula_target",
    "load_formulas",
    "model_shape_source",
    "nccl_sources",
    "training_constant_sources",
    "used_catalog_entries",
    "value_text",
]

#: Catalog notes cite their sources as ``[S40]`` (the catalog loader checks each key exists).
_SOURCE_KEY = re.compile(r"\[(S[A-Za-z0-9]+)\]")
#: BOM line category -> catalog section.
_BOM_SECTION = {"switches": "switches", "nics": "nics", "optics": "optics", "cables": "cables"}
#: Catalog sections in the order a design's parts are listed.
_CATALOG_ORDER = ("gpus", "servers", "vendors", "switches", "ocs", "nics", "optics", "cables")
#: The formulas the report cites, with their code and sources.
FORMULAS_PATH: Path = asset("formulas.yaml")
#: The text fields every formula entry must give.
_FORMULA_FIELDS = ("title", "formula", "module", "function", "source")


@dataclass(frozen=True)
class NumberSource:
    """One number of the model's data and the source its data file gives for it.

    Attributes
    ----------
    name : str
        What the number is: ``"gpus.h100.bf16_dense_tflops"``, ``"bucket_min_params"``.
    value : str
        The value as text (``""`` for a source that covers a whole file).
    source : str
        The source note, as the data file states it (``"[S1] ..."`` or ``"estimate: ..."``).
    """

    name: str
    value: str
    source: str


@dataclass(frozen=True)
class Formula:
    """One formula the report cites (an entry of ``assets/formulas.yaml``).

    Attributes
    ----------
    key : str
        The entry's key (``"maxmin_fair_rates"``).
    title : str
        What the formula gives.
    formula : str
        The formula, as text.
    module, function : str
        The module implementing it and the function, class or ``Class.method`` in it.
    source : str
        Where the formula comes from (may cite catalog sources as ``[S49]``).
    families : tuple of str
        The ``fabric.topology`` families it applies to; empty for every design.
    """

    key: str
    title: str
    formula: str
    module: str
    function: str
    source: str
    families: tuple[str, ...] = ()

    @property
    def implemented_by(self) -> str:
        """The qualified name of the code: ``"fabric_model.flows.solver.solve_maxmin"``."""
        return f"{self.module}.{self.function}"


# --------------------------------------------------------------------------------------
# formulas
# --------------------------------------------------------------------------------------


def _formula(key: str, raw: Any, families: tuple[str, ...]) -> Formula:
    where = f"formulas.yaml: formulas.{key}"
    if not isinstance(raw, Mapping):
        raise CatalogError(f"{where}: must be a mapping of {', '.join(_FORMULA_FIELDS)}")
    text = {}
    for name in _FORMULA_FIELDS:
        value = raw.get(name)
        if not isinstance(value, str) or not value.strip():
            raise CatalogError(f"{where}.{name}: must be non-empty text")
        text[name] = " ".join(value.split())
    applies = raw.get("families") or []
    if not isinstance(applies, list) or not all(isinstance(f, str) for f in applies):
        raise CatalogError(f"{where}.families: must be a list of family names")
    unknown = [f for f in applies if f not in families]
    if unknown:
        raise CatalogError(
            f"{where}.families: unknown {', '.join(unknown)}; allowed: {', '.join(families)}"
        )
    extra = set(raw) - {*_FORMULA_FIELDS, "families"}
    if extra:
        raise CatalogError(f"{where}: unknown field(s) {', '.join(sorted(extra))}")
    return Formula(key, families=tuple(applies), **text)


@cache
def load_formulas(path: Path = FORMULAS_PATH) -> tuple[Formula, ...]:
    """Return the formulas of ``assets/formulas.yaml`` (or ``path``), in file order.

    Raises
    ------
    CatalogError
        If the file is malformed: an entry without one of its text fields, an unknown
        field or an unknown topology family, naming the entry.
    """
    data = load_yaml(path)
    entries = data.get("formulas") if isinstance(data, Mapping) else None
    if not isinstance(entries, Mapping) or not entries:
        raise CatalogError(f"{path.name}: must hold a non-empty 'formulas' mapping")
    families = field_spec("fabric.topology").choices or ()
    return tuple(_formula(str(k), v, tuple(families)) for k, v in entries.items())


def formula_citations(family: str, path: Path = FORMULAS_PATH) -> tuple[Formula, ...]:
    """Return the formulas behind a design of this ``fabric.topology`` family, in file order.

    The entries without ``families`` (the flow solver, the collective and training models,
    the cost model) and those listing ``family``.
    """
    return tuple(f for f in load_formulas(path) if not f.families or family in f.families)


def formula_target(formula: Formula) -> Any:
    """Return the code object a formula names (imports its module).

    Raises
    ------
    ImportError
        If the module does not exist.
    AttributeError
        If the module has no such function, class or method.
    """
    obj: Any = importlib.import_module(formula.module)
    for part in formula.function.split("."):
        obj = getattr(obj, part)
    return obj


# --------------------------------------------------------------------------------------
# data files
# --------------------------------------------------------------------------------------


def value_text(value: Any) -> str:
    """Format a data value: numbers grouped, booleans yes/no, lists and mappings spelled out.

    >>> value_text({"a": 1234.7, "b": [True, 0.25]})
    'a: 1,235, b: yes, 0.25'
    """
    if isinstance(value, Mapping):
        return ", ".join(f"{value_text(k)}: {value_text(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(value_text(v) for v in value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:,.4g}"
    return "null" if value is None else str(value)


def bom_catalog_entries(bom: BillOfMaterials) -> tuple[tuple[str, str], ...]:
    """Return the ``(section, key)`` of every catalog entry a bill of materials uses.

    The GPU, server, vendor, switch (when the design has switches) and NIC it resolved to,
    and every optic and cable on its lines; in catalog-section order.
    """
    hw = bom.hardware
    used = [("gpus", hw.gpu.key), ("servers", hw.server.key), ("vendors", hw.vendor.key)]
    electrical = bom.topology.n_switches - bom.topology.switches_by_tier.get("ocs", 0)
    if electrical:
        used.append(("switches", hw.switch.key))
    used.append(("nics", hw.nic.key))
    # an OCS fabric's optical circuit switches are the catalog's section ``ocs``
    used += [
        ("ocs" if line.where == "ocs" else _BOM_SECTION[line.category], line.key)
        for line in bom.lines
    ]
    order = {s: i for i, s in enumerate(_CATALOG_ORDER)}
    return tuple(sorted(dict.fromkeys(used), key=lambda e: order.get(e[0], len(order))))


def used_catalog_entries(
    designs: Iterable[tuple[str, BillOfMaterials]],
) -> dict[tuple[str, str], tuple[str, ...]]:
    """Return every catalog entry some of the bills use, with the labels of those that do.

    Parameters
    ----------
    designs
        ``(label, bill)`` pairs, e.g. ``("this design", bom)``.

    Returns
    -------
    dict
        ``(section, key)`` -> the labels of the bills using it, in catalog-section order
        (GPUs, servers, vendors, switches, NICs, optics, cables), then first use.
    """
    used: dict[tuple[str, str], list[str]] = {}
    for label, bom in designs:
        for entry in bom_catalog_entries(bom):
            labels = used.setdefault(entry, [])
            if label not in labels:
                labels.append(label)
    order = {s: i for i, s in enumerate(_CATALOG_ORDER)}
    ranked = sorted(used.items(), key=lambda kv: order.get(kv[0][0], len(order)))
    return {entry: tuple(labels) for entry, labels in ranked}


def entry_sources(catalog: Catalog, section: str, key: str) -> tuple[NumberSource, ...]:
    """Return each sourced field of one catalog entry with its value and note.

    Raises
    ------
    UnknownCatalogKeyError
        If ``section`` is not a catalog section.
    KeyError
        If the entry is not in the section.
    """
    entry = catalog.section(section)[key]
    return tuple(
        NumberSource(f"{section}.{key}.{field}", value_text(getattr(entry, field, None)), note)
        for field, note in entry.sources.items()
    )


def cited_source_keys(notes: Iterable[str]) -> tuple[str, ...]:
    """Return the catalog source keys (``"S40"``) the notes cite, in first-seen order."""
    return tuple(dict.fromkeys(k for note in notes for k in _SOURCE_KEY.findall(note)))


def nccl_sources() -> tuple[str, tuple[NumberSource, ...]]:
    """Return the NCCL-like constants' version and their sources (``assets/nccl_constants.yaml``).

    Each source covers the constants its key is cited by in the file; the ``tuning`` one
    names the NCCL release and commit of ``tuning.cc`` the constants were read from.
    """
    data = nccl_constants()
    rows = tuple(NumberSource(str(k), "", str(v)) for k, v in (data.get("sources") or {}).items())
    return str(data.get("version", "?")), rows


def training_constant_sources() -> tuple[str, tuple[NumberSource, ...]]:
    """Return the training constants' version and each constant with its value and note.

    Read from ``assets/training_constants.yaml`` after
    :func:`fabric_model.training.constants.training_constants` has checked every entry
    has a note.
    """
    values = training_constants()
    data = yaml.safe_load(CONSTANTS_PATH.read_text(encoding="utf-8"))
    rows = tuple(
        NumberSource(name, value_text(values[name]), str(entry["note"]))
        for name, entry in data["constants"].items()
    )
    return str(data.get("version", "?")), rows


def model_shape_source(name: str) -> NumberSource | None:
    """Return the published shape's source (``assets/models.yaml``); ``None`` for a custom one.

    ``value`` is the published parameter count in billions (``""`` when not given).
    """
    entry = MODEL_SHAPES.get(name)
    if entry is None:
        return None
    params = entry.get("published_params_b")
    return NumberSource(
        str(entry.get("description", name)),
        "" if params is None else f"{params:g}",
        str(entry.get("source", "")),
    )
