"""Time collective curves (20 sizes, one scenario) across scales and families.

Run: ``python benchmarks/bench_collectives.py``. For each design it prints the wall time of a
cold call (topology, routing and solve) and of the warm evaluation of 20 sizes from an
already solved model (what the dashboard's cache serves), plus the busbw at 1 GiB.
Targets (ARCHITECTURE.md section 5): one curve under 100 ms warm up to 16,384 GPUs and
under 1 s at 131,072.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabric_model.cli import format_table
from fabric_model.collectives import (
    FabricContext,
    algo_models,
    times_from_models,
)
from fabric_model.errors import FabricModelError
from fabric_model.scenario import Scenario, apply_overrides

SIZES = [2**i for i in range(3, 43, 2)]  # 20 sizes, 8 B to 2 TiB
CASES = (
    [("fat-tree", "infiniband", 400, n) for n in (1024, 16384)]
    + [("fat-tree", "spectrum-x", 400, n) for n in (16384, 131072)]
    + [
        ("fat-tree", "roce", 400, 16384),
        ("fat-tree", "infiniband", 800, 131072),
        ("rail-only", "spectrum-x", 400, 131072),
        ("dragonfly-plus", "infiniband", 400, 131072),
        ("torus-3d", "infiniband", 400, 131072),
        ("hypercube", "infiniband", 400, 131072),
    ]
)


def main() -> None:
    rows = []
    for topo, vendor, gbps, n in CASES:
        for op, algo in (("allreduce", "auto"), ("alltoall", "hierarchical")):
            s = apply_overrides(
                Scenario(),
                {
                    "cluster.n_gpus": n,
                    "fabric.topology": topo,
                    "fabric.vendor": vendor,
                    "fabric.link_gbps": gbps,
                    **({"cluster.nics_per_gpu": 2} if topo == "hypercube" else {}),
                    # an H100's PCIe Gen5 link cannot feed 800G: that row runs on B300 (Gen6)
                    **({"cluster.gpu": "b300"} if gbps > 400 else {}),
                },
            )
            try:
                t0 = time.perf_counter()
                ctx = FabricContext.from_scenario(s)
                models = algo_models(ctx, op, algo)
                times_from_models(models, SIZES, algo)
                cold = time.perf_counter() - t0
                t0 = time.perf_counter()
                curve = times_from_models(models, SIZES, algo)
                warm = time.perf_counter() - t0
            except (FabricModelError, NotImplementedError) as exc:
                rows.append(
                    {
                        "design": f"{topo} {vendor} {gbps}G",
                        "gpus": n,
                        "op": op,
                        "note": str(exc)[:60] or type(exc).__name__,
                    }
                )
                continue
            at_1g = next(r for r in curve if r.size_bytes == 2**31 // 2 or r.size_bytes >= 2**30)
            rows.append(
                {
                    "design": f"{topo} {vendor} {gbps}G",
                    "gpus": n,
                    "op": op,
                    "cold_ms": round(cold * 1e3, 1),
                    "warm_ms": round(warm * 1e3, 2),
                    "busbw_1G_GBps": round(at_1g.busbw_GBps, 1),
                    "algo_1G": f"{at_1g.algo}/{at_1g.proto}",
                    "note": "",
                }
            )
    print(f"Collective curves: {len(SIZES)} sizes each (cold = build + route + solve)")
    print(
        format_table(
            rows, ["design", "gpus", "op", "cold_ms", "warm_ms", "busbw_1G_GBps", "algo_1G", "note"]
        )
    )


if __name__ == "__main__":
    main()
