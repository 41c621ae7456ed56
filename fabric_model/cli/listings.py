"""Verbs that list what a scenario may choose: ``presets``, ``compat``, ``keys``."""

from __future__ import annotations

import argparse

from fabric_model.cli.registry import _emit, _fmt_cell, format_table, verb
from fabric_model.presets import list_presets
from fabric_model.scenario import iter_field_specs


@verb("presets", "list the presets", takes_scenario=False)
def _presets(args: argparse.Namespace) -> int:
    rows = [{"name": p.name, "description": p.description} for p in list_presets()]
    _emit(args, rows, format_table(rows))
    return 0


@verb(
    "compat",
    "which NVLink domain sizes, NICs and link speeds each GPU of the catalog can have",
    takes_scenario=False,
)
def _compat(args: argparse.Namespace) -> int:
    from fabric_model.catalog import compatibility, load_catalog

    rows = compatibility(load_catalog())
    table = [
        {
            "gpu": r["gpu"] + (" (announced)" if r["announced"] else ""),
            "server": r["server"],
            "nvlink_domain": r["nvlink_domains"],
            "host_link_GBps": r["host_link_GBps"],
            "link_gbps": ", ".join(map(str, r["link_gbps"])),
            "nics (speeds its host link feeds)": "; ".join(
                f"{k} {'/'.join(map(str, v))}" for k, v in r["nics"].items()
            ),
        }
        for r in rows
    ]
    _emit(args, rows, format_table(table))
    return 0


@verb(
    "keys",
    "list every scenario key with its default, allowed values and meaning",
    takes_scenario=False,
)
def _keys(args: argparse.Namespace) -> int:
    rows = [
        {"key": key, "default": default, "allowed": spec.allowed(), "help": spec.help}
        for key, spec, default in iter_field_specs()
    ]
    text = "\n".join(
        f"{r['key']:<34} default "
        f"{_fmt_cell(r['default']) if r['default'] is not None else 'null':<10}"
        f" {r['allowed']}\n{'':<34} {r['help']}"
        for r in rows
    )
    _emit(args, rows, text)
    return 0
