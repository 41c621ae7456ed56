"""Reading ``assets/catalog.yaml``: the strict YAML loader, the schema, the source notes.

:func:`load_catalog` validates once, at load time, and caches the shipped catalog.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import yaml

from fabric_model.catalog.checks import _CROSS_CHECKS
from fabric_model.catalog.entries import _SOURCE_REF, SECTIONS, FrozenMap, Source, _Entry
from fabric_model.catalog.schema import _COMMON_FIELDS, _REQUIRED, _SCHEMA, _FieldSpec
from fabric_model.catalog.store import Catalog
from fabric_model.errors import CatalogError
from fabric_model.resources import asset

__all__ = ["DEFAULT_CATALOG_PATH", "load_catalog"]


#: The shipped catalog, found relative to the package.
DEFAULT_CATALOG_PATH: Final[Path] = asset("catalog.yaml")
_NOTE_FORM = re.compile(r"^(?:\[S[A-Za-z0-9]+\]\s*)+|^estimate:\s*\S")
_SOURCE_KEY = re.compile(r"^S[A-Za-z0-9]+$")
_ENTRY_KEY = re.compile(r"^[a-z0-9][a-z0-9_\-]*$")


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------


def load_catalog(path: str | Path | None = None) -> Catalog:
    """Load and validate a hardware catalog.

    Parameters
    ----------
    path
        YAML file; ``None`` (or the default path) reads the shipped ``assets/catalog.yaml``,
        cached after the first call.

    Returns
    -------
    Catalog
        The validated catalog.

    Raises
    ------
    CatalogError
        If the file cannot be read or breaks a rule; the message names the section, the entry
        and the field.
    """
    if path is None or Path(path).resolve() == DEFAULT_CATALOG_PATH:
        return _load_default()
    return _load(Path(path))


@functools.lru_cache(maxsize=1)
def _load_default() -> Catalog:
    return _load(DEFAULT_CATALOG_PATH)


try:  # libyaml's parser is ~10x faster; the constructors (and so the safety) are the same
    from yaml import CSafeLoader as _SafeLoaderBase
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml import SafeLoader as _SafeLoaderBase  # type: ignore[assignment]


class _StrictLoader(_SafeLoaderBase):
    """Safe YAML loader that rejects duplicate mapping keys (PyYAML keeps the last one)."""


def _construct_unique_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if not isinstance(key, str | int | float | bool | None):
            continue  # construct_mapping reports unhashable keys itself
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_unique_mapping,
)


def _load(path: Path) -> Catalog:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"cannot read catalog {path}: {exc}") from exc
    try:
        doc = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: safe
    except yaml.YAMLError as exc:
        raise CatalogError(f"{path.name}: not valid YAML: {exc}") from exc
    return _build(doc, path)


def _build(doc: object, path: Path) -> Catalog:
    where = path.name
    if not isinstance(doc, dict):
        raise CatalogError(f"{where}: the top level must be a mapping of sections")
    expected = {"version", "sources", *SECTIONS}
    unknown = sorted(str(k) for k in doc if k not in expected)
    if unknown:
        raise CatalogError(f"{where}: unknown top-level section(s) {', '.join(unknown)}")
    missing = sorted(k for k in expected if k not in doc)
    if missing:
        raise CatalogError(f"{where}: missing top-level section(s) {', '.join(missing)}")
    version = doc["version"]
    if not isinstance(version, str) or not version:
        raise CatalogError(f'{where}: version must be a non-empty string, e.g. "2026.11"')

    sources = _parse_sources(doc["sources"], where)
    parsed: dict[str, FrozenMap[str, Any]] = {}
    for section in SECTIONS:
        raw = doc[section]
        if not isinstance(raw, dict) or not raw:
            raise CatalogError(f"{where}: {section} must be a non-empty mapping of key -> entry")
        entries = {}
        for key, entry in raw.items():
            entries[key] = _parse_entry(section, key, entry, sources, where)
        parsed[section] = FrozenMap(entries)

    catalog = Catalog(
        version=version,
        path=str(path),
        sources=sources,
        gpus=parsed["gpus"],
        servers=parsed["servers"],
        nics=parsed["nics"],
        switches=parsed["switches"],
        optics=parsed["optics"],
        cables=parsed["cables"],
        vendors=parsed["vendors"],
        ocs=parsed["ocs"],
    )
    for check in _CROSS_CHECKS:
        check(catalog, where)
    return catalog


def _parse_sources(raw: object, where: str) -> FrozenMap[str, Source]:
    if not isinstance(raw, dict) or not raw:
        raise CatalogError(f"{where}: sources must be a non-empty mapping of key -> source")
    out: dict[str, Source] = {}
    for key, item in raw.items():
        here = f"{where}: sources.{key}"
        if not isinstance(key, str) or not _SOURCE_KEY.match(key):
            raise CatalogError(f"{here}: a source key is S followed by letters/digits, e.g. S40")
        if not isinstance(item, dict):
            raise CatalogError(f"{here}: must be a mapping with title and url")
        extra = sorted(str(k) for k in item if k not in ("title", "url", "date"))
        if extra:
            raise CatalogError(f"{here}: unknown field(s) {', '.join(extra)}")
        title, url, date = item.get("title"), item.get("url"), item.get("date", "")
        if not isinstance(title, str) or not title.strip():
            raise CatalogError(f"{here}.title: missing or not a non-empty string")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise CatalogError(f"{here}.url: missing or not an http(s) URL")
        if not isinstance(date, str):
            raise CatalogError(f"{here}.date: must be a string")
        out[key] = Source(key=key, title=title.strip(), url=url, date=date)
    return FrozenMap(out)


def _parse_entry(
    section: str, key: object, raw: object, sources: Mapping[str, Source], where: str
) -> _Entry:
    here = f"{where}: {section}.{key}"
    if not isinstance(key, str) or not _ENTRY_KEY.match(key):
        raise CatalogError(f"{here}: entry keys are lower-case letters, digits, '_' and '-'")
    if not isinstance(raw, dict):
        raise CatalogError(f"{here}: an entry must be a mapping of field -> value")
    cls, specs = _SCHEMA[section]
    unknown = sorted(str(f) for f in raw if f not in specs and f not in _COMMON_FIELDS)
    if unknown:
        raise CatalogError(f"{here}: unknown field(s) {', '.join(unknown)}")

    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise CatalogError(f"{here}.name: missing or not a non-empty string")
    remark = raw.get("remark", "")
    if not isinstance(remark, str):
        raise CatalogError(f"{here}.remark: must be a string")

    values: dict[str, Any] = {}
    for fname, spec in specs.items():
        if fname not in raw:
            if spec.default is _REQUIRED:
                raise CatalogError(f"{here}.{fname}: required field is missing")
            values[fname] = spec.default
            continue
        values[fname] = _parse_value(raw[fname], spec, f"{here}.{fname}")

    notes = _parse_notes(raw.get("sources"), raw, specs, sources, here)
    return cls(key=key, name=name.strip(), sources=notes, remark=remark.strip(), **values)


def _parse_notes(
    raw: object,
    entry: Mapping[str, object],
    specs: Mapping[str, _FieldSpec],
    sources: Mapping[str, Source],
    here: str,
) -> FrozenMap[str, str]:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise CatalogError(f"{here}.sources: must be a mapping of field -> source note")
    for fname, spec in specs.items():
        if spec.numeric and fname in entry and fname not in raw:
            raise CatalogError(
                f"{here}.{fname}: numeric field has no source note; add "
                f'sources.{fname}: "[Sn] ..." or "estimate: <reasoning>"'
            )
    notes: dict[str, str] = {}
    for fname, note in raw.items():
        if fname not in specs or fname not in entry:
            raise CatalogError(f"{here}.sources.{fname}: note for a field the entry lacks")
        if not isinstance(note, str) or not _NOTE_FORM.match(note.strip()):
            raise CatalogError(
                f'{here}.{fname}: source note must start with source keys like "[S40]" or '
                f'with "estimate: <reasoning>"; got {note!r}'
            )
        for ref in _SOURCE_REF.findall(note):
            if ref not in sources:
                raise CatalogError(
                    f"{here}.{fname}: source note cites [{ref}], which is not in the "
                    f"top-level sources"
                )
        notes[fname] = " ".join(note.split())
    return FrozenMap(notes)


def _parse_value(value: object, spec: _FieldSpec, here: str) -> object:
    if value is None:
        if spec.nullable:
            return None
        raise CatalogError(f"{here}: must not be null")
    kind = spec.kind
    if kind in ("int", "float"):
        return _number(value, spec, here)
    if kind == "bool":
        if not isinstance(value, bool):
            raise CatalogError(f"{here}: must be true or false; got {value!r}")
        return value
    if kind == "str":
        if not isinstance(value, str) or not value.strip():
            raise CatalogError(f"{here}: must be a non-empty string; got {value!r}")
        return value.strip()
    if kind == "choice":
        if value not in spec.choices:
            raise CatalogError(f"{here}: must be one of {', '.join(spec.choices)}; got {value!r}")
        return value
    if kind == "ints":
        if not isinstance(value, list) or not value:
            raise CatalogError(f"{here}: must be a non-empty list of numbers; got {value!r}")
        items = [_number(v, _FieldSpec("int"), f"{here}[{i}]") for i, v in enumerate(value)]
        if any(b <= a for a, b in itertools.pairwise(items)):
            raise CatalogError(f"{here}: must be strictly ascending; got {value!r}")
        return tuple(items)
    if kind == "choices":
        if not isinstance(value, list) or not value or len(set(value)) != len(value):
            raise CatalogError(f"{here}: must be a non-empty list without repeats; got {value!r}")
        for v in value:
            if v not in spec.choices:
                raise CatalogError(f"{here}: items must be in {', '.join(spec.choices)}; got {v!r}")
        return tuple(value)
    if kind == "keys":
        if not isinstance(value, list) or not value or len(set(value)) != len(value):
            raise CatalogError(f"{here}: must be a non-empty list of keys without repeats")
        if not all(isinstance(v, str) and _ENTRY_KEY.match(v) for v in value):
            raise CatalogError(f"{here}: items must be catalog keys; got {value!r}")
        return tuple(value)
    if kind == "speed_map":
        if not isinstance(value, dict) or not value:
            raise CatalogError(f"{here}: must be a non-empty mapping of Gb/s -> key")
        for k, v in value.items():
            _number(k, _FieldSpec("int"), f"{here}[{k!r}]")
            if not isinstance(v, str) or not v:
                raise CatalogError(f"{here}[{k}]: must be a catalog key; got {v!r}")
        return FrozenMap(sorted(value.items()))
    raise AssertionError(f"unhandled field kind {kind}")  # pragma: no cover - schema bug


def _number(value: object, spec: _FieldSpec, here: str) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CatalogError(f"{here}: must be a number; got {value!r}")
    if spec.kind == "int" and not isinstance(value, int):
        raise CatalogError(f"{here}: must be a whole number; got {value!r}")
    if not math.isfinite(value):
        raise CatalogError(f"{here}: must be finite; got {value!r}")
    if value < 0 or (value == 0 and not spec.zero_ok):
        bound = ">= 0" if spec.zero_ok else "> 0"
        raise CatalogError(f"{here}: must be {bound}; got {value!r}")
    return value if spec.kind == "int" else float(value)
