"""Time building the largest topologies and their bills of materials (131,072 GPUs).

Run: ``python benchmarks/bench_topology.py``. Prints one row per family and vendor: build
time of the counted topology, of its flow-solver arrays, and of the priced BOM (best of
several warm runs; the first, cold run is shown separately).
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabric_model.cli import format_table
from fabric_model.errors import FabricModelError
from fabric_model.plant.cost import bill_of_materials
from fabric_model.plant.design import build_topology
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.topology import BUILDERS

N_GPUS = 131_072
# Per family: overrides that make a 131,072-GPU design buildable with catalog parts.
FAMILY_OVERRIDES = {
    "fat-tree": {},
    "rail-only": {},
    "dragonfly-plus": {},
    "torus-3d": {},
    "hypercube": {"cluster.nics_per_gpu": 2},
    # 16,384 NVLink domains are more blocks than an OCS has ports: pods of a leaf-spine tier
    "ocs": {"ocs.block": "pod"},
}


def best_of(fn, repeat: int = 3) -> tuple[float, float]:
    """Return (cold seconds, best warm seconds)."""
    t0 = time.perf_counter()
    fn()
    cold = time.perf_counter() - t0
    warm = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        warm.append(time.perf_counter() - t0)
    return cold, min(warm)


def main() -> None:
    rows = []
    for family in BUILDERS:
        # NDR (radix 64) tops out at 65,536 NICs in 3 tiers, so InfiniBand runs XDR 800G here,
        # on a GPU whose PCIe Gen6 host link feeds an 800G NIC (an H100's Gen5 cannot)
        for vendor, gbps in (("infiniband", 800), ("spectrum-x", 400)):
            gpu = {"cluster.gpu": "b300"} if gbps > 400 else {}
            s: Scenario = apply_overrides(
                Scenario(),
                {
                    "cluster.n_gpus": N_GPUS,
                    "fabric.topology": family,
                    "fabric.vendor": vendor,
                    "fabric.link_gbps": gbps,
                    **gpu,
                    **FAMILY_OVERRIDES.get(family, {}),
                },
            )
            try:
                topo = build_topology(s)
            except FabricModelError as exc:
                rows.append(
                    {"family": family, "vendor": f"{vendor} {gbps}G", "note": str(exc)[:70]}
                )
                continue
            _, t_topo = best_of(lambda s=s: build_topology(s))
            _, t_graph = best_of(lambda s=s: replace(build_topology(s)).graph)
            _, t_bom = best_of(lambda s=s: bill_of_materials(s))
            rows.append(
                {
                    "family": family,
                    "vendor": f"{vendor} {gbps}G",
                    "tiers": topo.tiers,
                    "switches": topo.n_switches,
                    "cables": topo.n_links,
                    "directed_links": topo.graph.n_links,
                    "topology_ms": round(t_topo * 1e3, 1),
                    "topology+arrays_ms": round(t_graph * 1e3, 1),
                    "bom_ms": round(t_bom * 1e3, 1),
                    "note": "",
                }
            )
    print(f"Building {N_GPUS:,}-GPU designs (warm, best of 3)")
    print(
        format_table(
            rows,
            [
                "family",
                "vendor",
                "tiers",
                "switches",
                "cables",
                "directed_links",
                "topology_ms",
                "topology+arrays_ms",
                "bom_ms",
                "note",
            ],
        )
    )


if __name__ == "__main__":
    main()
