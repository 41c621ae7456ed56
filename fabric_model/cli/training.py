"""Training verbs: ``step``, ``sweep``, ``plan`` and ``explore``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from fabric_model.cli.registry import _emit, format_table, scenario_from_args, verb
from fabric_model.errors import FabricModelError

# ---------------------------------------------------------------------------- training


def _step_text(d: dict[str, Any], plan_label: str, comm: Sequence[Any] = ()) -> str:
    """Describe one step: its terms, the communication per dimension (``comm``), MFU, memory.

    ``comm`` is :func:`fabric_model.report.summaries.comm_breakdown` of the step.
    """
    lines = [
        f"# one training step: {plan_label}",
        format_table(
            [
                {"term": k, "seconds": d[k]}
                for k in (
                    "step_time_s",
                    "compute_s",
                    "imbalance_s",
                    "bubble_s",
                    "offload_s",
                    "optimizer_s",
                    "stall_s",
                    "exposed_comm_s",
                    "step_time_ideal_scale_out_s",
                    "step_time_ideal_network_s",
                )
            ]
        ),
        *(
            [
                f"MoE router, token permutation and their small kernels: "
                f"{d['moe_overhead_s']:.3f} s of compute_s"
            ]
            if d.get("moe_overhead_s")
            else []
        ),
        *(
            [
                f"activation offload to {d['offload_via']} at {d['offload_GBps']:.1f} GB/s per "
                f"GPU: {(d.get('memory') or {}).get('offloaded_gib', 0.0):.1f} GiB per GPU out "
                f"of HBM, {d['offload_s']:.3f} s of the step not hidden"
            ]
            if d.get("offload_via")
            else []
        ),
        *(
            [
                f"tails: step p50 {d['step_time_p50_s']:,.4g} s, p99 "
                f"{d['step_time_p99_s']:,.4g} s over iterations (the slowest of "
                f"{d['n_gpus']:,} ranks; tails.*), {d['step_time_s']:,.4g} s with every rank "
                "at its mean"
            ]
            if d["step_time_p99_s"] != d["step_time_s"] or d["step_time_p50_s"] != d["step_time_s"]
            else []
        ),
        f"scale-out fabric {d['scale_out_share_of_step']:.1%}, NVLink "
        f"{d['scale_up_share_of_step']:.1%} of the step (exposed communication "
        f"{d['network_share_of_step']:.1%}; over the scale-out network: "
        f"{', '.join(d['scale_out_dims']) or 'nothing'})",
        "",
        format_table(
            [
                {"dimension": c.dim, "comm_s": c.comm_s, "exposed_s": c.exposed_s, "how": c.detail}
                for c in comm
            ]
            or [{"dimension": "-", "comm_s": 0.0, "exposed_s": 0.0, "how": ""}]
        ),
        "",
        f"MFU {d['mfu']:.3f}"
        + (
            f" ({d['mfu_precision_peak']:.3f} of the {d['precision'].upper()} peak)"
            if d["mfu_precision_peak"] != d["mfu"]
            else ""
        )
        + f"   tokens/s {d['tokens_per_s']:,.0f}   "
        f"memory {d['memory_gib_per_gpu']:.1f} GiB per GPU ({d['memory_status']})",
    ]
    mem = d.get("memory") or {}
    if mem.get("stages"):
        lines.append(
            "memory by pipeline rank: "
            + "; ".join(
                f"rank {st['rank']} ({st['layers']} layers, {st['micro_batches_in_flight']:g} "
                f"in flight) {st['total_gib']:.1f} GiB"
                for st in mem["stages"]
            )
        )
    lines += [f"warning: {w}" for w in d.get("warnings", [])]
    return "\n".join(lines)


@verb(
    "step",
    "one training step: compute, pipeline bubble and exposed communication per "
    "parallel dimension, MFU, memory",
)
def _step(args: argparse.Namespace) -> int:
    from fabric_model.report.summaries import comm_breakdown
    from fabric_model.training import training_step

    result = training_step(scenario_from_args(args), suggest=True)
    payload = result.to_dict()
    if not result.feasible:
        if args.json:
            print(json.dumps(payload, indent=2, default=str))
        raise FabricModelError("infeasible plan: " + result.reason)
    assert result.plan is not None
    _emit(args, payload, _step_text(payload, result.plan.label(), comm_breakdown(result)))
    return 0


def _parse_gpus(text: str) -> list[int]:
    out = []
    for item in text.split(","):
        item = item.strip().replace("_", "")
        if not item.isdigit() or int(item) < 2:
            raise FabricModelError(
                f"--gpus: {item!r} is not a GPU count >= 2 (give a list such as 8,64,1024)"
            )
        out.append(int(item))
    return out


@contextmanager
def _mapper(workers: int) -> Iterator[Any]:
    """``map``, or a process pool's ``map`` for ``workers > 1`` (shut down on exit)."""
    if workers <= 1:
        yield map
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers) as pool:
        yield pool.map


def _progress(args: argparse.Namespace, what: str) -> Any:
    if args.json or not sys.stderr.isatty():
        return None

    def report(done: int, total: int) -> None:
        sys.stderr.write(f"\r{what}: {done}/{total}")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return report


def _sweep_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--gpus",
        default=",".join(str(2**i) for i in range(3, 18)),
        metavar="LIST",
        help="cluster sizes (default powers of two 8..131072)",
    )
    p.add_argument(
        "--scaling",
        default="weak",
        choices=("weak", "strong"),
        help="weak: tokens per replica fixed (default); strong: global batch fixed",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="processes to spread the sizes over (default 1)",
    )


@verb(
    "sweep",
    "training step and network cost across cluster sizes (scaling efficiency)",
    add_arguments=_sweep_args,
)
def _sweep(args: argparse.Namespace) -> int:
    from fabric_model.report.summaries import tail_scaling_efficiency
    from fabric_model.training import sweep

    scenario = scenario_from_args(args)
    with _mapper(args.workers) as map_fn:
        points = sweep(
            scenario,
            _parse_gpus(args.gpus),
            scaling=args.scaling,
            map_fn=map_fn,
            progress=_progress(args, "sweep"),
        )
    # the same curve with the step at its p50: the slowest rank (tails.*, closed form)
    tail = tail_scaling_efficiency(points, dataclasses.replace(scenario.tails, enabled=True))
    payload = [
        {**p.to_dict(), "scaling_efficiency_p50": t if p.feasible else math.nan}
        for p, t in zip(points, tail, strict=True)
    ]
    table = [
        {
            "n_gpus": p.n_gpus,
            "step_time_s": p.step.step_time_s if p.feasible else "-",
            "mfu": p.step.mfu if p.feasible else "-",
            "scaling_eff": p.scaling_efficiency if p.feasible else "-",
            "scaling_eff_p50": t if p.feasible else "-",
            "network_capex_usd": p.network_capex_usd if p.feasible else "-",
            "plan": p.step.plan.label() if p.feasible and p.step.plan else "",
            "note": "" if p.feasible else p.reason[:90],
        }
        for p, t in zip(points, tail, strict=True)
    ]
    head = (
        f"# {args.scaling} scaling of {scenario.model.name} on {scenario.fabric.topology}, "
        f"{scenario.fabric.vendor} {scenario.fabric.link_gbps}G\n"
        "# scaling_eff puts every rank at its mean (an upper bound); scaling_eff_p50 waits "
        "for the slowest rank every step (tails.*: GPU spread, software jitter, a slow rank)\n"
    )
    _emit(args, payload, head + format_table(table))
    return 0


def _plan_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--top", type=int, default=5, metavar="N", help="plans to show (default 5)")
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="processes to spread the candidates over (default 1)",
    )


@verb(
    "plan",
    "search TP/PP/CP/EP/interleaving/recomputation for the fastest feasible plan",
    add_arguments=_plan_args,
)
def _plan(args: argparse.Namespace) -> int:
    from fabric_model.training import search_plans

    scenario = scenario_from_args(args)
    with _mapper(args.workers) as map_fn:
        found = search_plans(
            scenario, top=args.top, map_fn=map_fn, progress=_progress(args, "plans")
        )
    if not found:
        raise FabricModelError(
            "parallel: no plan fits this model on this cluster (memory or "
            "batch); add GPUs, raise training.global_batch_tokens or use "
            "a GPU with more memory"
        )
    payload = [{"overrides": c.overrides, **c.step.to_dict()} for c in found]
    table = [
        {
            "plan": c.label,
            "step_time_s": c.step.step_time_s,
            "mfu": c.step.mfu,
            "memory_gib": c.step.memory.total_gib if c.step.memory else 0.0,
            "exposed_comm_s": c.step.exposed_comm_s,
            "bubble_s": c.step.bubble_s,
            "micro_batches": c.step.plan.micro_batches if c.step.plan else 0,
            "scale_out_share": c.step.scale_out_share_of_step,
        }
        for c in found
    ]
    _emit(args, payload, format_table(table))
    return 0


def _explore_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--vary",
        action="append",
        default=[],
        metavar="KEY=V1,V2[,...]",
        help="a scenario key and its values; every combination is a design (repeatable)",
    )
    p.add_argument(
        "--plan-search", action="store_true", help="give each design its fastest parallel plan"
    )
    p.add_argument(
        "--engine",
        choices=("local", "dask"),
        default=None,
        help="local (default) or dask: a dask.distributed cluster (embedded LocalCluster, or "
        "--scheduler)",
    )
    p.add_argument("--scheduler", metavar="ADDRESS", help="dask scheduler, e.g. tcp://host:8786")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="processes: local pool size (default 1) or LocalCluster workers (default: cores)",
    )
    p.add_argument(
        "--max-designs",
        type=int,
        default=10_000,
        metavar="N",
        help="refuse larger grids (default %(default)s)",
    )
    p.add_argument("--out", metavar="designs.csv", help="also write the designs as CSV")


@verb(
    "explore",
    "every combination of --vary values: time to train, cost per run (with failures and "
    "goodput) and the Pareto front",
    add_arguments=_explore_args,
)
def _explore(args: argparse.Namespace) -> int:
    from fabric_model.run.explore import explore, parse_vary, write_csv

    scenario = scenario_from_args(args)
    dims = [parse_vary(v) for v in args.vary]
    engine = args.engine or ("dask" if args.scheduler else "local")
    common = {
        "plan_search": args.plan_search,
        "engine": engine,
        "scheduler": args.scheduler,
        "workers": args.workers,
        "max_designs": args.max_designs,
        "progress": _progress(args, "designs"),
    }
    if engine == "local":
        with _mapper(args.workers or 1) as map_fn:
            result = explore(scenario, dims, map_fn=map_fn, **common)
    else:
        result = explore(scenario, dims, **common)
    if args.out:
        write_csv(result, args.out)
    keys = [d.key for d in dims]
    table = [
        {
            **{k.split(".", 1)[1]: d["keys"][k] for k in keys},
            "pareto": "*" if d["pareto"] else "",
            "days": d["time_to_train_days"] if d["feasible"] else "-",
            "cost_per_run_usd": d["cost_per_run_usd"] if d["feasible"] else "-",
            "goodput": d["goodput"] if d["feasible"] else "-",
            "mfu": d["mfu"] if d["feasible"] else "-",
            "switch": d.get("switch") or "-",
            "radix": d.get("switch_radix") or "-",
            "pod_nics": d.get("pod_nics") or "-",
            "note": "" if d["feasible"] else str(d["reason"])[:80],
        }
        for d in result.designs
    ]
    head = (
        f"# {len(table)} designs on {engine}; * = Pareto front of time to train vs cost per "
        f"run ({scenario.training.total_tokens:,} tokens)\n"
    )
    _emit(args, result.to_dict(), head + format_table(table))
    return 0
