"""Time the explore verb: 500 designs locally, on a process pool and on Dask.

Usage: ``python benchmarks/bench_explore.py [--workers 2] [--plan-search]``

(``--plan-search`` gives every design its best plan, on a 100-design grid: 5 sizes x 5
oversubscriptions x 4 topologies.)

The grid is 5 cluster sizes (512 to 8,192 H100) x 5 leaf oversubscriptions x 5 topologies x
2 link speeds x 1 or 2 NICs per GPU = 500 designs on the default preset (Llama 3 70B). Each
engine runs in a fresh interpreter through the command line, as a user runs it
(``python -m fabric_model explore ... --json``), so every run starts cold (no fabric solved
yet) and pays its own start: the interpreter and imports, and for Dask the embedded
LocalCluster's scheduler and worker processes. Prints the wall time, the time per design and
the speed-up over the local engine, and checks that every engine returns the same designs.
Wall times on this machine (shared with other work: figures vary from run to run); nothing
here is asserted by the tests.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GRID = [
    "cluster.n_gpus=512,1024,2048,4096,8192",
    "fabric.oversubscription=1,1.5,2,3,4",
    "fabric.topology=fat-tree,rail-only,dragonfly-plus,torus-3d,hypercube",
    "fabric.link_gbps=200,400",
    "cluster.nics_per_gpu=1,2",
]
#: With ``--plan-search`` (a branch and bound per design, 0.1 to 1 s each): 100 designs.
GRID_PLAN = [*GRID[:2], "fabric.topology=fat-tree,rail-only,dragonfly-plus,torus-3d"]


def _run(extra: list[str], plan_search: bool) -> tuple[float, dict[str, Any]]:
    cmd = [sys.executable, "-m", "fabric_model", "explore", "--json"]
    for v in GRID_PLAN if plan_search else GRID:
        cmd += ["--vary", v]
    if plan_search:
        cmd.append("--plan-search")
    t0 = time.perf_counter()
    done = subprocess.run(cmd + extra, cwd=ROOT, capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="pool / Dask workers (default 2)")
    parser.add_argument("--plan-search", action="store_true", help="best plan per design")
    args = parser.parse_args()
    w = str(args.workers)
    engines = [
        ("local (1 process)", []),
        (f"local, process pool of {w}", ["--workers", w]),
        (f"dask, LocalCluster of {w} workers", ["--engine", "dask", "--workers", w]),
    ]
    base_s = None
    reference = None
    grid = GRID_PLAN if args.plan_search else GRID
    print(f"explore: {len(grid)} dimensions, plan search {'on' if args.plan_search else 'off'}")
    for label, extra in engines:
        wall, out = _run(extra, args.plan_search)
        designs = out["designs"]
        if reference is None:
            reference, base_s = designs, wall
        same = "same designs" if designs == reference else "DIFFERENT designs"
        n_ok = sum(d["feasible"] for d in designs)
        n_front = sum(d["pareto"] for d in designs)
        print(
            f"  {label:<32} {len(designs)} designs ({n_ok} feasible, {n_front} on the front) "
            f"in {wall:6.2f} s wall = {wall / len(designs) * 1e3:6.1f} ms per design, "
            f"speed-up {base_s / wall:4.2f}x vs local; {same}"
        )


if __name__ == "__main__":
    main()
