"""The verb registry and what every verb shares.

A verb is a function registered in :data:`VERBS` with :func:`verb`; it builds its scenario
with :func:`scenario_from_args` and prints a table (:func:`format_table`) or, with
``--json``, the payload.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from fabric_model.errors import FabricModelError
from fabric_model.presets import DEFAULT_PRESET, load_preset
from fabric_model.scenario import Scenario, apply_overrides, load_scenario, parse_assignment

__all__ = ["EXIT_BAD_INPUT", "VERBS", "Verb", "format_table", "scenario_from_args", "verb"]


EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and exit 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"error: {message} (see `{self.prog} --help`)\n")
        sys.exit(EXIT_BAD_INPUT)


@dataclass(frozen=True)
class Verb:
    """A CLI verb: its help, how to add its own arguments, and what it runs."""

    help: str
    run: Callable[[argparse.Namespace], int]
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None
    takes_scenario: bool = True


VERBS: dict[str, Verb] = {}


def verb(
    name: str,
    help: str,
    *,
    takes_scenario: bool = True,
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    """Register a verb function under ``name``."""

    def wrap(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        VERBS[name] = Verb(help, fn, add_arguments, takes_scenario)
        return fn

    return wrap


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def scenario_from_args(args: argparse.Namespace) -> Scenario:
    """Build the scenario: ``--preset`` or ``--scenario`` (else the default), then ``--set``.

    Raises
    ------
    FabricModelError
        For any bad input, with the key named.
    """
    if args.scenario and args.preset:
        raise FabricModelError("use either --scenario or --preset, not both")
    if args.scenario:
        base = load_scenario(args.scenario)
    else:
        base = load_preset(args.preset or DEFAULT_PRESET)
    overrides = dict(parse_assignment(item) for item in args.set or [])
    return apply_overrides(base, overrides) if overrides else base


def _fmt_cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> str:
    """Format dict rows as an aligned text table (numbers right-aligned)."""
    if not rows:
        return "(no rows)"
    cols = list(columns or rows[0].keys())
    cells = [[_fmt_cell(r.get(c, "")) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    numeric = [all(isinstance(r.get(c), (int, float)) for r in rows) for c in cols]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ).rstrip()

    return "\n".join([line(cols), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def _emit(args: argparse.Namespace, payload: Any, text: str) -> None:
    if args.json:
        print(json.dumps(payload, indent=2, default=str))
    else:
        print(text)
