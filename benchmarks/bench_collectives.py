"""Time collective curves (20 sizes, one scenario) across scales and families.

Run: ``python benchmarks/bench_collectives.py``. For each design it prints the wall time of a
cold call (topology, routing and solve) and of the warm evaluation of 20 sizes from an
already solved model (what the dashboard's cache serves), plus the busbw at 1 GiB.
Targets (ARCHITECTURE.md section 5): one curve under 100 ms warm up to 16,384 GPUs and
under 1 s at 131,072.

``--million`` times instead the 1,048,576-GPU designs that build (issue 17): each curve in a
fresh interpreter (so the cold time includes imports and numba's cached kernels, as the
command line pays them) with the process's peak RSS; target a few seconds per curve.
"""

from __future__ import annotations

import json
import resource
import subprocess
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
        ("ocs", "infiniband", 400, 1024),  # 128 NVLink domains (HGX) on 4 R300 OCS
        ("ocs-nvl72", "infiniband", 400, 9216),  # 128 GB200 NVL72 racks
        ("ocs-pod", "spectrum-x", 400, 131072),  # 32 pods of 4,096 GPUs
    ]
)
#: The OCS rows' keys beside fabric.topology = ocs (uniform circuits).
OCS_ROWS = {
    "ocs": {},
    "ocs-nvl72": {"cluster.gpu": "gb200", "cluster.gpus_per_node": 4, "cluster.nvlink_domain": 72},
    "ocs-pod": {"ocs.block": "pod"},
}


#: 1,048,576-GPU designs that build (``python -m fabric_model bom`` finds them): B300 (PCIe
#: Gen6 feeds 800G), 8 planes of 100G on Tomahawk 5 (3 tiers per plane), one 200G plane on
#: SN5600 (radix 256: 3 tiers), dragonfly+ on Quantum-X800, rail-only over 8 planes.
MILLION = 1_048_576
MILLION_CASES: tuple[tuple[str, dict[str, object], tuple[tuple[str, str], ...]], ...] = (
    (
        "fat-tree lossy-ethernet 800G, 8 planes",
        {"fabric.vendor": "lossy-ethernet", "fabric.link_gbps": 800, "fabric.planes": 8},
        (("allreduce", "auto"), ("alltoall", "direct"), ("alltoall", "hierarchical")),
    ),
    (
        "fat-tree spectrum-x 200G, 1 plane",
        {"fabric.vendor": "spectrum-x", "fabric.link_gbps": 200},
        (("allreduce", "auto"), ("alltoall", "direct"), ("alltoall", "hierarchical")),
    ),
    (
        "dragonfly-plus infiniband 800G",
        {
            "fabric.vendor": "infiniband",
            "fabric.link_gbps": 800,
            "fabric.topology": "dragonfly-plus",
        },
        (("allreduce", "auto"), ("alltoall", "direct"), ("alltoall", "hierarchical")),
    ),
    (
        "rail-only lossy-ethernet 800G, 8 planes",
        {
            "fabric.vendor": "lossy-ethernet",
            "fabric.link_gbps": 800,
            "fabric.planes": 8,
            "fabric.topology": "rail-only",
        },
        (("allreduce", "auto"), ("alltoall", "hierarchical")),
    ),
)


def _one_curve(overrides: dict[str, object], op: str, algo: str) -> dict[str, object]:
    """Time one cold curve in this process (the child of :func:`million`)."""
    t0 = time.perf_counter()
    s = apply_overrides(Scenario(), {"cluster.n_gpus": MILLION, "cluster.gpu": "b300", **overrides})
    try:
        ctx = FabricContext.from_scenario(s)
        models = algo_models(ctx, op, algo)
        curve = times_from_models(models, SIZES, algo)
        out: dict[str, object] = {"cold_s": time.perf_counter() - t0}
        at_2g = next(r for r in curve if r.size_bytes == 2**31)
        out.update(
            busbw_2G_GBps=at_2g.busbw_GBps,
            algo_2G=f"{at_2g.algo}/{at_2g.proto}",
            plateau_GBps=max(m.busbw_Bps for m in models) / 1e9,
        )
    except (FabricModelError, NotImplementedError) as exc:
        out = {"cold_s": time.perf_counter() - t0, "note": str(exc)[:70]}
    out["rss_MB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def million() -> None:
    """Print the 1,048,576-GPU curves, one fresh interpreter per curve (cold, peak RSS)."""
    rows = []
    for design, overrides, runs in MILLION_CASES:
        for op, algo in runs:
            t0 = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, __file__, "--one", json.dumps([overrides, op, algo])],
                capture_output=True,
                text=True,
                check=True,
            )
            wall = time.perf_counter() - t0
            res = json.loads(proc.stdout.strip().splitlines()[-1])
            rows.append(
                {
                    "design": design,
                    "op": f"{op} {algo}",
                    "process_s": round(wall, 2),
                    "curve_s": round(float(res["cold_s"]), 2),
                    "rss_MB": round(float(res["rss_MB"])),
                    "busbw_2G_GBps": round(float(res.get("busbw_2G_GBps", 0.0)), 1),
                    "algo_2G": res.get("algo_2G", ""),
                    "plateau_GBps": round(float(res.get("plateau_GBps", 0.0)), 1),
                    "note": res.get("note", ""),
                }
            )
    print(
        f"1,048,576 GPUs (B300): {len(SIZES)} sizes per curve, each in a fresh interpreter "
        "(process = whole run; curve = build + route + solve + 20 sizes; plateau = the\n"
        "bandwidth-bound busbw of the best candidate; the all-to-all at 2 GiB is latency-bound:\n"
        "1,048,575 peers x NCCL's per-peer cost)"
    )
    cols = [
        "design",
        "op",
        "process_s",
        "curve_s",
        "rss_MB",
        "busbw_2G_GBps",
        "algo_2G",
        "plateau_GBps",
        "note",
    ]
    print(format_table(rows, cols))


def main() -> None:
    if "--one" in sys.argv:  # a child of million(): one curve, its figures as JSON
        overrides, op, algo = json.loads(sys.argv[sys.argv.index("--one") + 1])
        print(json.dumps(_one_curve(overrides, op, algo)))
        return
    if "--million" in sys.argv:
        million()
        return
    rows = []
    for topo, vendor, gbps, n in CASES:
        for op, algo in (("allreduce", "auto"), ("alltoall", "hierarchical")):
            s = apply_overrides(
                Scenario(),
                {
                    "cluster.n_gpus": n,
                    "fabric.topology": "ocs" if topo in OCS_ROWS else topo,
                    "fabric.vendor": vendor,
                    "fabric.link_gbps": gbps,
                    **({"cluster.nics_per_gpu": 2} if topo == "hypercube" else {}),
                    **OCS_ROWS.get(topo, {}),
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
