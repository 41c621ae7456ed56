"""Command line: ``python -m fabric_model <verb> [--scenario FILE] [--preset NAME] [--set K=V]``.

Every verb also takes ``--json``.

Bad input exits with status 2 and one line on stderr naming the key and what is allowed;
never a traceback. Each verb is a function registered in :data:`VERBS`, so new verbs slot in.

Where things live (import from ``fabric_model.cli``): ``registry`` (:data:`VERBS`, the
:func:`verb` decorator, the scenario from ``--scenario``/``--preset``/``--set``, tables and
``--json``), one module per subject of verbs (``listings``, ``plant``, ``collectives``,
``validation``, ``training``, ``outputs``, ``schedule``) and ``app`` (the parser and
:func:`main`). A new verb is a function decorated with :func:`verb` in the module of its
subject (or a new module, imported in ``app``'s ordered list).
"""

from __future__ import annotations

from fabric_model.cli.app import build_parser as build_parser
from fabric_model.cli.app import main
from fabric_model.cli.outputs import _EXPORT_FORMATS as _EXPORT_FORMATS
from fabric_model.cli.registry import EXIT_BAD_INPUT as EXIT_BAD_INPUT
from fabric_model.cli.registry import VERBS, Verb, format_table, scenario_from_args
from fabric_model.cli.registry import verb as verb

__all__ = ["VERBS", "Verb", "format_table", "main", "scenario_from_args"]
