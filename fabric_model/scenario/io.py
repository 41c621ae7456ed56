"""Scenario text in and out: ``--set`` assignments, overrides, YAML/JSON files and dumps."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from fabric_model.catalog import load_catalog
from fabric_model.errors import ScenarioError, ScenarioFileError, shown_value
from fabric_model.scenario.document import Scenario
from fabric_model.scenario.registry import coerce_value, field_spec
from fabric_model.scenario.workload import _expand_model_name

__all__ = [
    "MAX_SCENARIO_BYTES",
    "apply_overrides",
    "dump_scenario",
    "load_scenario",
    "parse_assignment",
    "scenario_from_text",
    "with_dependents",
]


#: Largest scenario document accepted (file, upload or URL), bytes.
MAX_SCENARIO_BYTES = 256 * 1024


def parse_assignment(text: str) -> tuple[str, str]:
    """Split ``"fabric.link_gbps=800"`` into key and raw value.

    Raises
    ------
    ScenarioError
        If there is no ``=`` or the key is unknown.
    """
    if "=" not in text:
        raise ScenarioError(
            text, ScenarioError.NO_VALUE, "expected KEY=VALUE, e.g. fabric.link_gbps=800"
        )
    key, value = text.split("=", 1)
    key = key.strip()
    field_spec(key)
    return key, value


def with_dependents(base: Scenario, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``overrides`` plus the keys that follow a changed GPU or vendor, unless set.

    A changed ``cluster.gpu`` brings its catalog server's ``cluster.gpus_per_node`` and
    ``cluster.nvlink_domain``; a changed ``fabric.vendor`` runs its own transport
    (``fabric.transport = auto``: a preset's transport belongs to its vendor, as
    meta-24k-roce's PFC-only RoCE does). The sidebar and ``explore --vary`` both use it.
    """
    over = dict(overrides)
    gpu = over.get("cluster.gpu")
    if gpu is not None and gpu != base.cluster.gpu:
        cat = load_catalog()
        server = cat.server(cat.gpu(gpu).server)
        over.setdefault("cluster.gpus_per_node", server.gpus_per_server)
        over.setdefault("cluster.nvlink_domain", server.nvlink_domain)
    if over.get("fabric.vendor", base.fabric.vendor) != base.fabric.vendor:
        over.setdefault("fabric.transport", "auto")
    return over


def apply_overrides(scenario: Scenario, overrides: Mapping[str, Any]) -> Scenario:
    """Return a copy of ``scenario`` with dotted keys set (values coerced and validated).

    ``name`` and ``description`` are accepted as top-level keys too.
    """
    sections: dict[str, dict[str, Any]] = {}
    top: dict[str, Any] = {}
    for key, raw in overrides.items():
        if key in ("name", "description"):
            top[key] = str(raw)
            continue
        value = coerce_value(key, raw)
        section, name = key.split(".", 1)
        sections.setdefault(section, {})[name] = value
    if "model" in sections:
        sections["model"] = _expand_model_name(sections["model"])
    replaced = {
        sec: dataclasses.replace(getattr(scenario, sec), **vals) for sec, vals in sections.items()
    }
    return dataclasses.replace(scenario, **top, **replaced)


# --------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping.

    PyYAML keeps the last of two equal keys, so ``cluster:`` written twice would drop the
    first section without a word.
    """

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            # plain keys only: a merge key (<<) may override what it merges, by design
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                continue
            key = self.construct_object(key_node)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"key {shown_value(key)} appears twice in one mapping (give it once)",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def scenario_from_text(text: str, *, source: str = "scenario") -> Scenario:
    """Parse YAML or JSON text (JSON is YAML) into a validated scenario.

    Raises
    ------
    ScenarioFileError
        If the text is too large, not YAML/JSON, or not a mapping.
    ScenarioError
        For a bad key or value.
    """
    if len(text.encode("utf-8", errors="replace")) > MAX_SCENARIO_BYTES:
        raise ScenarioFileError(
            f"{source}: larger than {MAX_SCENARIO_BYTES // 1024} KiB; a scenario is a few lines"
        )
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "not valid YAML/JSON"
        raise ScenarioFileError(f"{source}: malformed YAML/JSON{where}: {problem}") from None
    except RecursionError:  # thousands of nested brackets: no scenario looks like that
        raise ScenarioFileError(
            f"{source}: malformed YAML/JSON: nested too deeply to read; a scenario is "
            "sections of keys and values"
        ) from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        problem = "a number has too many digits" if "digits" in str(exc) else str(exc)
        raise ScenarioFileError(f"{source}: malformed YAML/JSON: {problem}") from None
    if data is not None and not isinstance(data, Mapping):
        raise ScenarioFileError(
            f"{source}: a scenario must be a mapping of sections (cluster, fabric, ...), "
            f"got {type(data).__name__}"
        )
    return Scenario.from_dict(data)


def load_scenario(path: str | Path) -> Scenario:
    """Read a scenario file (``.yaml``, ``.yml`` or ``.json``).

    Raises
    ------
    ScenarioFileError
        If the file cannot be read or parsed.
    """
    p = Path(path)
    try:
        if p.stat().st_size > MAX_SCENARIO_BYTES:
            raise ScenarioFileError(f"{p}: larger than {MAX_SCENARIO_BYTES // 1024} KiB")
        text = p.read_text(encoding="utf-8")
    except ScenarioFileError:
        raise
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ScenarioFileError(f"{p}: cannot read scenario file: {reason}") from None
    return scenario_from_text(text, source=str(p))


def dump_scenario(scenario: Scenario, fmt: str = "yaml", *, base: Scenario | None = None) -> str:
    """Serialise a scenario to YAML or JSON text.

    With ``base``, only the keys that differ from it are written (plus name and description),
    as a nested mapping that :func:`scenario_from_text` reads back.
    """
    if base is None:
        data = scenario.to_dict()
    else:
        data = {"name": scenario.name, "description": scenario.description}
        for key, value in scenario.diff(base).items():
            section, name = key.split(".", 1)
            data.setdefault(section, {})[name] = value
    if fmt == "json":
        return json.dumps(data, indent=2)
    if fmt == "yaml":
        return yaml.safe_dump(data, sort_keys=False)
    raise ValueError(f"unknown format {fmt!r}; use yaml or json")
