"""Time the deployment exports (cabling CSV, Slurm topology, networkx JSON) at 1K to 131K GPUs.

Run: ``python benchmarks/bench_export.py``. Prints one row per design and format: the rows or
items written, the file size and the time to write it from a built plan (best of two warm
runs), and the time to lay out the plan itself (devices, ports and media of every cable).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabric_model.cli import format_table
from fabric_model.errors import FabricModelError
from fabric_model.presets import load_preset
from fabric_model.report.export import EXPORT_FORMATS, deployment_plan, export_design
from fabric_model.scenario import apply_overrides

#: (label, preset, overrides): a 2-tier fat-tree at 1K, a dragonfly+ at 16K, and 3-tier
#: Spectrum-X fat-tree, rail-only, dragonfly+ and torus designs at 131,072 GPUs.
DESIGNS = (
    ("1K fat-tree", "dgx-h100-ib-ndr", {}),
    ("16K dragonfly+", "dragonfly-plus-16k", {}),
    ("16K fat-tree", "dgx-h100-ib-ndr", {"cluster.n_gpus": 16384}),
    ("131K fat-tree", "colossus-100k-spectrum-x", {"cluster.n_gpus": 131072}),
    (
        "131K rail-only",
        "dgx-h100-ib-ndr",
        {"cluster.n_gpus": 131072, "fabric.topology": "rail-only"},
    ),
    (
        "131K dragonfly+",
        "dgx-h100-ib-ndr",
        {"cluster.n_gpus": 131072, "fabric.topology": "dragonfly-plus"},
    ),
    ("131K torus", "torus-3d-4k", {"cluster.n_gpus": 131072}),
)


def best_of(fn, repeat: int = 2) -> tuple[float, object]:
    """Return (best seconds, result) over ``repeat`` runs."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    rows = []
    for label, preset, overrides in DESIGNS:
        s = apply_overrides(load_preset(preset), overrides) if overrides else load_preset(preset)
        plan_s, plan = best_of(lambda s=s: deployment_plan(s))
        for fmt in EXPORT_FORMATS:
            try:
                secs, out = best_of(lambda fmt=fmt, plan=plan: export_design(plan, fmt))
            except FabricModelError as exc:
                rows.append({"design": label, "format": fmt, "items": 0, "note": str(exc)[:60]})
                continue
            rows.append(
                {
                    "design": label,
                    "format": fmt,
                    "plan_s": round(plan_s, 3),
                    "items": out.n_items,
                    "MB": round(len(out.text) / 1e6, 1),
                    "write_s": round(secs, 3),
                    "bom_cables": plan.bom.n_cables,
                }
            )
    print(
        format_table(rows, ["design", "format", "plan_s", "items", "MB", "write_s", "bom_cables"])
    )


if __name__ == "__main__":
    main()
