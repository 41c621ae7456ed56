"""Where the model's numbers and formulas come from, read from the model itself.

Provenance lives next to what it describes, and this module only collects it:

- **data**: every catalog entry carries a source note per numeric field (the catalog loader
  refuses one without), the NCCL-like constants a version and a ``sources`` table, the
  training constants a note each (their loader refuses one without), the published model
  shapes a ``source``. :func:`entry_sources`, :func:`nccl_sources`,
  :func:`training_constant_sources` and :func:`model_shape_source` turn them into
  :class:`NumberSource` rows, and :func:`bom_catalog_entries` names the entries a design
  uses.
- **formulas**: the numpydoc ``References`` (or ``Sources``) sections of the model's module,
  class and function docstrings, and the papers their prose cites as "Name et al. YEAR";
  :func:`model_references` reads them with :mod:`inspect` into :class:`Reference` rows.

Nothing here renders: the HTML report (``ui.report``) lays the rows out.

>>> docstring_references('''Solve it.
...
... References
... ----------
... .. [1] D. Bertsekas and R. Gallager, *Data Networks*,
...    section 6.5.2.
... ''')
('D. Bertsekas and R. Gallager, Data Networks, section 6.5.2.',)
>>> author_year_citations("The bubble (Narayanan et al. 2021) idles. Next.")
(('Narayanan et al. 2021', 'The bubble (Narayanan et al. 2021) idles.'),)
"""

from __future__ import annotations

import importlib
import inspect
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml

from fabric_model.catalog import Catalog
from fabric_model.collectives import nccl_constants
from fabric_model.scenario import MODEL_SHAPES
from fabric_model.training.constants import CONSTANTS_PATH, training_constants

if TYPE_CHECKING:
    from fabric_model.cost import BillOfMaterials

__all__ = [
    "NumberSource",
    "Reference",
    "author_year_citations",
    "bom_catalog_entries",
    "cited_source_keys",
    "docstring_references",
    "entry_sources",
    "model_references",
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
_CATALOG_ORDER = ("gpus", "servers", "vendors", "switches", "nics", "optics", "cables")
#: Docstring section headings whose entries are references.
_REFERENCE_HEADINGS = ("References", "Sources")
_HEADING_RULE = re.compile(r"^-{3,}$")
_ENTRY_LABEL = re.compile(r"^\.\.\s+\[[^\]]+\]\s*")
#: "Narayanan et al. 2021", "Al-Fares et al., SIGCOMM 2008": a name, then the year after at
#: most three words (a venue).
_AUTHOR_YEAR = re.compile(
    r"\b([A-Z][A-Za-z-]+) et al\.,?\s+(?:[A-Za-z][\w-]*,?\s+){0,3}((?:19|20)\d{2})\b"
)
#: A full stop ends a sentence unless it ends one of these abbreviations.
_ABBREVIATIONS = frozenset({"al", "e.g", "i.e", "eq", "vs", "cf", "fig", "sec", "no", "ref"})
_RST_ROLE = re.compile(r":[a-z]+:`~?(?:[\w.]*\.)?([^`]+)`")
_RST_EMPHASIS = re.compile(r"(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])")


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
class Reference:
    """A published work the model's docstrings cite.

    Attributes
    ----------
    label : str
        ``"Narayanan et al. 2021"`` for a citation in prose; ``""`` for a numpydoc entry.
    text : str
        The numpydoc entry, or the first sentence that cites the work.
    cited_in : tuple of str
        Qualified names of the modules, classes and functions whose docstring cites it.
    """

    label: str
    text: str
    cited_in: tuple[str, ...]


# --------------------------------------------------------------------------------------
# docstrings
# --------------------------------------------------------------------------------------


def _plain(text: str) -> str:
    """Collapse whitespace and drop reST markup (``code``, **bold**, :role:`target`)."""
    text = _RST_ROLE.sub(r"\1", text).replace("``", "").replace("**", "")
    return " ".join(_RST_EMPHASIS.sub(r"\1", text).split())


def docstring_references(doc: str | None) -> tuple[str, ...]:
    """Return the entries of a docstring's numpydoc ``References`` or ``Sources`` section.

    Parameters
    ----------
    doc
        A docstring (indented or not).

    Returns
    -------
    tuple of str
        One entry per ``.. [n]`` item (or per paragraph when the section has no labels),
        label dropped and whitespace collapsed; empty when there is no such section.
    """
    lines = inspect.cleandoc(doc or "").splitlines()
    entries: list[list[str]] = []
    inside = False
    for i, line in enumerate(lines):
        underlined = i + 1 < len(lines) and _HEADING_RULE.match(lines[i + 1].strip())
        if underlined and line.strip():
            inside = line.strip() in _REFERENCE_HEADINGS
            continue
        if not inside or _HEADING_RULE.match(line.strip()):
            continue
        if not line.strip():
            entries.append([])
        elif _ENTRY_LABEL.match(line.strip()) or not entries or not entries[-1]:
            entries.append([_ENTRY_LABEL.sub("", line.strip())])
        else:
            entries[-1].append(line.strip())
    return tuple(_plain(" ".join(e)) for e in entries if e)


def _sentences(paragraph: str) -> list[str]:
    """Split collapsed text into sentences at ". " before a capital, not after "et al."."""
    out, start = [], 0
    for m in re.finditer(r"\.\s+(?=[A-Z(])", paragraph):
        word = paragraph[: m.start()].rsplit(None, 1)[-1].lstrip("(").lower()
        if word in _ABBREVIATIONS:
            continue
        out.append(paragraph[start : m.start() + 1])
        start = m.end()
    out.append(paragraph[start:])
    return [s for s in out if s]


def _as_sentence(text: str) -> str:
    return text[:-1] + "." if text.endswith((":", ";", ",")) else text


def author_year_citations(doc: str | None) -> tuple[tuple[str, str], ...]:
    """Return the works a docstring's prose cites as "Name et al. YEAR", with their sentence.

    Parameters
    ----------
    doc
        A docstring.

    Returns
    -------
    tuple of (str, str)
        ``("Narayanan et al. 2021", sentence)`` for the first sentence citing each work, in
        order; the sentence with reST markup dropped.
    """
    lines = inspect.cleandoc(doc or "").splitlines()
    # a numpydoc heading (a line over a rule of dashes) ends a paragraph and is not prose
    kept = [
        ""
        if _HEADING_RULE.match(line.strip())
        or (i + 1 < len(lines) and _HEADING_RULE.match(lines[i + 1].strip()))
        else line
        for i, line in enumerate(lines)
    ]
    found: dict[str, str] = {}
    # paragraphs and list items, so a sentence never runs across a bullet or a table
    for block in re.split(r"\n\s*\n|\n\s*(?=- )", "\n".join(kept)):
        for sentence in _sentences(_plain(block.strip().removeprefix("- "))):
            for m in _AUTHOR_YEAR.finditer(sentence):
                # a sentence that introduces a list ends in a colon; cite it as a sentence
                found.setdefault(f"{m.group(1)} et al. {m.group(2)}", _as_sentence(sentence))
    return tuple(found.items())


def _documented(module: Any) -> list[tuple[str, str]]:
    """(qualified name, docstring) of a module and the classes and functions it defines."""
    out = [(module.__name__, module.__doc__ or "")]
    for name, obj in inspect.getmembers(
        module, lambda o: inspect.isfunction(o) or inspect.isclass(o)
    ):
        if getattr(obj, "__module__", None) == module.__name__:
            out.append((f"{module.__name__}.{name}", inspect.getdoc(obj) or ""))
    return out


def model_references(modules: Iterable[str]) -> tuple[Reference, ...]:
    """Return the references the docstrings of these model modules cite.

    Parameters
    ----------
    modules
        Importable module names (``"fabric_model.training.step"``); each module's own
        docstring and those of the classes and functions it defines are read.

    Returns
    -------
    tuple of Reference
        The numpydoc ``References``/``Sources`` entries, then the "Name et al. YEAR" works
        of the prose, each once, with every place that cites it, in first-seen order.
    """
    entries: dict[str, list[str]] = {}
    prose: dict[str, tuple[str, list[str]]] = {}
    for module_name in dict.fromkeys(modules):
        for where, doc in _documented(importlib.import_module(module_name)):
            for text in docstring_references(doc):
                entries.setdefault(text, [])
                if where not in entries[text]:
                    entries[text].append(where)
            for label, sentence in author_year_citations(doc):
                _, places = prose.setdefault(label, (sentence, []))
                if where not in places:
                    places.append(where)
    return tuple(Reference("", text, tuple(w)) for text, w in entries.items()) + tuple(
        Reference(label, sentence, tuple(w)) for label, (sentence, w) in prose.items()
    )


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
    if bom.topology.n_switches:
        used.append(("switches", hw.switch.key))
    used.append(("nics", hw.nic.key))
    used += [(_BOM_SECTION[line.category], line.key) for line in bom.lines]
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
