"""Time the shared-cluster simulation (`schedule`) at the page's size and at fleet scale.

Run: ``python benchmarks/bench_schedule.py [--large] [--huge]``. Each case builds the cluster
once (topology, Slurm grouping, bill of materials), then runs the generated job mix under one
policy: the wall time of the run, the max-min solves it needed, the events' outcome, and the
CPU seconds of the process (the wall time on a shared machine waits for the other jobs).
Targets (issue 27): 500 jobs on 4,096 GPUs under 3 s; 10,000 jobs on 32,768 GPUs over 30 days
under 60 s on 2 cores (``--large``); 131,072 GPUs (40,000 jobs, 30 days) under 5 min
(``--huge``). The OCS row (issue 28) places slices of blocks on optical circuit switches
(2,048 H100 in 256 blocks of one server, job circuits): each slice's own fabric is built and
solved once per shape.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabric_model.cli import format_table
from fabric_model.presets import load_preset
from fabric_model.run.cluster_sim import Cluster, _seed_int, run_schedule
from fabric_model.run.jobs import generate_jobs
from fabric_model.scenario import apply_overrides

OCS = {"fabric.topology": "ocs", "ocs.circuits": "job"}
SMALL = [("dgx-h100-ib-ndr", 4096, 500, 7.0, p, {}) for p in ("first-fit", "tree")] + [
    ("dgx-h100-ib-ndr", 2048, 500, 7.0, "ocs-slice", OCS)
]
LARGE = [("dgx-h100-ib-ndr", 32768, 10_000, 30.0, "tree", {})]
HUGE = [("dgx-h100-ib-ndr", 131072, 40_000, 30.0, "tree", {})]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--large", action="store_true", help="also the 32,768-GPU, 10,000-job case")
    ap.add_argument("--huge", action="store_true", help="also the 131,072-GPU, 40,000-job case")
    args = ap.parse_args()
    rows = []
    cases = SMALL + (LARGE if args.large else []) + (HUGE if args.huge else [])
    for preset, gpus, n_jobs, days, policy, extra in cases:
        s = apply_overrides(load_preset(preset), {"cluster.n_gpus": gpus, **extra})
        t0 = time.perf_counter()
        c0 = time.process_time()
        cl = Cluster.build(s)
        t1 = time.perf_counter()
        jobs = generate_jobs(n_jobs, gpus, np.random.default_rng(_seed_int(0, "jobs")))
        res = run_schedule(cl, jobs, policy, days, 0)
        t2 = time.perf_counter()
        c2 = time.process_time()
        done = sum(1 for v in res.status.values() if v == "finished")
        rows.append(
            {
                "preset": preset + (" ocs" if extra else ""),
                "gpus": gpus,
                "jobs": n_jobs,
                "days": days,
                "policy": policy,
                "build_s": round(t1 - t0, 2),
                "run_s": round(t2 - t1, 2),
                "cpu_s": round(c2 - c0, 2),
                "solves": res.solves,
                "finished": done,
                "util": round(res.summary["utilization"], 3),
            }
        )
        print(format_table(rows[-1:]), flush=True)
    print(format_table(rows))


if __name__ == "__main__":
    main()
