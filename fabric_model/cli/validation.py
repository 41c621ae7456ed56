"""Verbs that hold the model against a real cluster: ``check-nccl``, ``acceptance``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from fabric_model.cli.registry import _emit, format_table, scenario_from_args, verb
from fabric_model.errors import FabricModelError
from fabric_model.scenario import parse_assignment


def _check_nccl_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("log", metavar="LOG", help="nccl-tests output (all_reduce_perf, ...)")
    p.add_argument("--op", default=None, help="collective, when the log does not name its binary")
    p.add_argument(
        "--tolerance",
        type=float,
        default=0.15,
        help="relative band around the model counted as expected (default 0.15)",
    )


@verb(
    "check-nccl",
    "compare an nccl-tests log with the model of the scenario that describes the cluster",
    add_arguments=_check_nccl_args,
)
def _check_nccl(args: argparse.Namespace) -> int:
    from fabric_model.units import format_size_bytes
    from fabric_model.validate.compare import compare_log
    from fabric_model.validate.nccl_log import parse_nccl_tests_file

    scenario = scenario_from_args(args)
    log = parse_nccl_tests_file(args.log) if args.op is None else _parse_with_op(args.log, args.op)
    n_gpus_set = any(parse_assignment(item)[0] == "cluster.n_gpus" for item in args.set or [])
    result = compare_log(log, scenario, tolerance=args.tolerance, n_gpus_set=n_gpus_set)
    payload = [r.to_dict() for r in result.rows]
    # nccl-tests -I 1: the median and 99th-percentile iteration, as busbw
    pct = [
        (key, name)
        for key, name in (
            ("measured_p50_busbw_GBps", "p50_GBps"),
            ("measured_p99_busbw_GBps", "p99_GBps"),
        )
        if any(getattr(r, key) is not None for r in result.rows)
    ]
    table = [
        {
            "size": format_size_bytes(r.size_bytes),
            "measured_GBps": round(r.measured_busbw_GBps, 2),
            **{name: _round_or_dash(getattr(r, key)) for key, name in pct},
            "model_GBps": round(r.model_busbw_GBps, 2),
            "ratio": round(r.ratio, 3),
            "regime": r.regime,
            "model_algo": r.model_algo,
            "verdict": r.verdict,
        }
        for r in result.rows
    ]
    head = [
        f"# {log.op} on {result.n_ranks:,} ranks (ranks: {result.n_ranks:,} from "
        f"{result.n_ranks_source}): measured (out-of-place busbw) vs model; "
        f"median ratio {result.median_ratio:.2f}"
    ]
    head += [f"# note: {n}" for n in (*result.notes, *log.warnings)]
    head += [f"# advice: {a}" for a in result.advice]
    head += [f"# diagnosis: {d}" for d in result.diagnosis]
    _emit(args, payload, "\n".join(head) + "\n" + format_table(table))
    return 0


def _round_or_dash(value: float | None) -> float | str:
    return "-" if value is None else round(value, 2)


def _acceptance_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tolerance",
        type=float,
        default=0.15,
        help="band around the expected busbw (default 0.15)",
    )
    p.add_argument(
        "--script",
        metavar="FILE",
        help="also write a bash script that runs nccl-tests against the floors",
    )
    p.add_argument(
        "--no-catches",
        action="store_true",
        help="skip modelling each failure mode of assets/failure_modes.yaml (the '# catches:' "
        "lines: which floors catch it)",
    )


@verb(
    "acceptance",
    "what a healthy fabric of this design shows in nccl-tests (one node, one "
    "rail group, the whole cluster), with a tolerance band",
    add_arguments=_acceptance_args,
)
def _acceptance(args: argparse.Namespace) -> int:
    from pathlib import Path

    from fabric_model.units import format_size_bytes
    from fabric_model.validate.acceptance import acceptance_expectations

    table = acceptance_expectations(
        scenario_from_args(args), args.tolerance, catches=not args.no_catches
    )
    if args.script:
        try:
            Path(args.script).write_text(table.to_shell_script(), encoding="utf-8")
        except OSError as exc:
            raise FabricModelError(f"--script {args.script}: {exc.strerror or exc}") from None
    rows = [
        {
            "scope": r.scope,
            "gpus": r.n_gpus,
            "op": r.op,
            "size": format_size_bytes(r.size_bytes),
            "expected_GBps": r.expected_busbw_GBps,
            "floor_GBps": r.min_busbw_GBps,
            "ceiling_GBps": r.max_busbw_GBps,
            "time_us": r.expected_time_us,
            "algo": r.algo,
        }
        for r in table.rows
    ]
    notes = "".join(f"\n# not modelled: {s}" for s in table.skipped)
    notes += "".join(f"\n# catches: {c.describe()}" for c in table.catches)
    from dataclasses import asdict

    if args.json and notes:  # the JSON stays the contract's list; the rest goes to stderr
        print(notes.strip(), file=sys.stderr)
    _emit(args, [asdict(r) for r in table.rows], format_table(rows) + notes)
    return 0


def _parse_with_op(path: str, op: str) -> Any:
    from fabric_model.validate.nccl_log import parse_nccl_tests, parse_nccl_tests_file

    parse_nccl_tests_file(path)  # file checks (exists, size) with their messages
    with open(path, encoding="utf-8", errors="replace") as fh:
        return parse_nccl_tests(fh.read(), op=op)
