"""The command line's entry point: the parser built from :data:`VERBS`, and :func:`main`.

Bad input exits with status 2 and one line on stderr naming the key and what is allowed;
never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from fabric_model import __version__
from fabric_model.cli.registry import EXIT_BAD_INPUT, VERBS, _Parser
from fabric_model.errors import FabricModelError
from fabric_model.presets import DEFAULT_PRESET

# Each verb module registers its verbs in VERBS when imported: the order of these imports is
# the order `--help` lists the verbs in, so the import sorter leaves them alone.
# isort: off
from fabric_model.cli import listings  # noqa: F401 (presets, compat, keys)
from fabric_model.cli import plant  # noqa: F401 (bom)
from fabric_model.cli import collectives  # noqa: F401 (collective)
from fabric_model.cli import validation  # noqa: F401 (check-nccl, acceptance)
from fabric_model.cli import training  # noqa: F401 (step, sweep, plan, explore)
from fabric_model.cli import outputs  # noqa: F401 (report, export)
from fabric_model.cli import schedule  # noqa: F401 (schedule)
# isort: on

__all__ = ["build_parser", "main"]


def build_parser(verb_name: str | None = None) -> argparse.ArgumentParser:
    """Return the argument parser with every registered verb.

    Parameters
    ----------
    verb_name
        Give only this verb its own arguments (the others are listed with their help, and
        ``VERB --help`` of another verb is never parsed by this parser). A verb's
        arguments may import its part of the model (``collective`` imports the collectives
        for the allowed ``--op`` values), so ``presets`` does not pay for them. ``""``: no
        verb gets its arguments (top-level ``--help``, an unknown verb); None: every verb.
    """
    parser = _Parser(
        prog="python -m fabric_model",
        description="Flow-level model of GPU-cluster network fabrics for LLM training.",
    )
    parser.add_argument("--version", action="version", version=f"fabric_model {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    for name, v in VERBS.items():
        p = sub.add_parser(name, help=v.help, description=v.help)
        if verb_name is not None and name != verb_name:
            continue
        if v.takes_scenario:
            p.add_argument("--scenario", metavar="FILE", help="scenario file (YAML or JSON)")
            p.add_argument(
                "--preset",
                metavar="NAME",
                help=f"named preset (see `presets`; default {DEFAULT_PRESET})",
            )
            p.add_argument(
                "--set",
                metavar="KEY=VALUE",
                action="append",
                help="override a dotted key, e.g. fabric.link_gbps=800 (repeatable)",
            )
        p.add_argument("--json", action="store_true", help="machine-readable JSON output")
        if v.add_arguments:
            v.add_arguments(p)
    return parser


#: Parsers built so far, per (verb, registered verbs): a process that calls :func:`main`
#: many times (tests, scripts) builds each one once.
_PARSERS: dict[tuple[str, tuple[str, ...]], argparse.ArgumentParser] = {}


def _parser_for(argv: Sequence[str]) -> argparse.ArgumentParser:
    """Return the (cached) parser for the verb ``argv`` names, if it names a known one.

    The top-level parser has no option that takes a value, so the verb is the first
    argument that is not an option.
    """
    name = next((a for a in argv if not a.startswith("-")), None)
    key = (name if name in VERBS else "", tuple(VERBS))
    if key not in _PARSERS:
        _PARSERS[key] = build_parser(key[0])
    return _PARSERS[key]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit status (0 ok, 2 bad input)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = _parser_for(argv)
    args = parser.parse_args(argv)
    if not args.verb:
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        return VERBS[args.verb].run(args)
    except FabricModelError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # `| head`
        return 0
