"""The ``schedule`` verb: a shared cluster over time."""

from __future__ import annotations

import argparse
from typing import Any

from fabric_model.cli.registry import _emit, format_table, scenario_from_args, verb
from fabric_model.errors import FabricModelError

# ------------------------------------------------------------------------------ schedule


def _schedule_args(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--jobs",
        metavar="FILE",
        help="job trace, CSV or YAML (id, submit_h, "
        "gpus, model, plan, tokens or duration_h, priority)",
    )
    src.add_argument(
        "--generate",
        type=int,
        metavar="N",
        help="draw N jobs from assets/job_mix.yaml (sourced shapes)",
    )
    p.add_argument(
        "--policy",
        default=None,
        help="placement policy: first-fit, tree, block, tas; on fabric.topology = ocs the "
        "slice policies ocs-slice, ocs-any, ocs-box (default: tree, or ocs-slice on ocs)",
    )
    p.add_argument(
        "--preempt",
        action="store_true",
        help="a job that cannot start preempts running jobs of lower priority (Kueue's "
        "LowerPriority order; requeued from their last checkpoint)",
    )
    p.add_argument(
        "--compare-policies",
        action="store_true",
        help="also run every policy on the same jobs and failure draws",
    )
    p.add_argument("--days", type=float, default=30.0, help="horizon, days (default 30)")
    p.add_argument("--seed", type=int, default=0, help="seed of the draws (default 0)")
    p.add_argument(
        "--seeds",
        type=int,
        default=1,
        metavar="K",
        help="run seeds S .. S+K-1 (with --engine dask: in parallel)",
    )
    p.add_argument(
        "--engine",
        choices=("local", "dask"),
        default="local",
        help="local, or dask: the seeds on an embedded LocalCluster of 2 workers",
    )
    p.add_argument("--out", metavar="jobs.csv", help="also write the per-job rows as CSV")


def _schedule_text(d: dict[str, Any]) -> str:
    rows = [
        {
            "policy": name,
            "util": s["utilization"],
            "goodput": s["goodput"],
            "wait_h": s["mean_wait_h"] if s["mean_wait_h"] is not None else "-",
            "p95_wait_h": s["p95_wait_h"] if s["p95_wait_h"] is not None else "-",
            "slowdown_p95": s["slowdown_p95"] if s["slowdown_p95"] is not None else "-",
            "frag": s["fragmentation"],
            "shape_frag": s["shape_fragmentation"],
            "interrupted": s["interrupted_jobs"],
            "preempted": s["preempted_jobs"],
            "usd_per_useful_gpu_h": s["cost_per_useful_gpu_hour_usd"] or "-",
        }
        for name, s in d["policies"].items()
    ]
    bs = d["block_sizes"]
    sl = d.get("slices")
    where = (
        f"slices of {sl['block']} blocks of {sl['block_gpus']:,} GPUs on a "
        f"{' x '.join(map(str, sl['grid_blocks']))} grid, {sl['circuits']} circuits set "
        f"{'once' if sl['reconfigure'] == 'never' else 'per ' + sl['reconfigure']} "
        f"({sl['reconfig_ms']:g} ms), {sl['spare_blocks']} spare block(s)"
        if sl
        else f"BlockSizes {bs['BlockSizes']} (base block {bs['base_block_nodes']} nodes)"
    )
    head = f"# {d['n_jobs']:,} jobs over {d['days']:g} days, seed {d['seed']}; {where}\n"
    if sl:
        rows = [{**row, "spare_swaps": d["policies"][row["policy"]]["spare_swaps"]} for row in rows]
    return head + format_table(rows)


@verb(
    "schedule",
    "a shared cluster over time: a job mix placed by a Slurm/Kueue policy, slowdowns from "
    "the fabric, failures, goodput and cost per useful GPU-hour",
    add_arguments=_schedule_args,
)
def _schedule(args: argparse.Namespace) -> int:
    from fabric_model.run.cluster_sim import schedule
    from fabric_model.run.jobs import load_jobs
    from fabric_model.run.schedule_seeds import schedule_seeds, write_jobs_csv

    scenario = scenario_from_args(args)
    jobs = load_jobs(args.jobs) if args.jobs else None
    if args.generate is not None and args.generate < 1:
        raise FabricModelError(f"--generate {args.generate}: must be at least 1")
    if args.seeds < 1:
        raise FabricModelError(f"--seeds {args.seeds}: must be at least 1")
    seeds = list(range(args.seed, args.seed + args.seeds))
    common = {
        "generate": args.generate,
        "policy": args.policy,
        "compare": args.compare_policies,
        "days": args.days,
        "preempt": args.preempt,
    }
    if args.engine == "dask":
        results = schedule_seeds(scenario, jobs, seeds, **common)
    else:
        results = [schedule(scenario, jobs, seed=s, **common) for s in seeds]
    if args.out:
        write_jobs_csv(results[0], args.out)
    payload: Any = results[0] if len(results) == 1 else {"seeds": results}
    _emit(args, payload, "\n".join(_schedule_text(r) for r in results))
    return 0
