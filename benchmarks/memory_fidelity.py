"""Print the memory model's estimates against published peak memory per GPU.

Usage: ``python benchmarks/memory_fidelity.py [--markdown]``. Rows and sources:
``tests/golden/training_memory.yaml``; the method: ``fabric_model/validate/memory_golden.py``.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabric_model.validate.memory_golden import memory_table


def main() -> None:
    markdown = "--markdown" in sys.argv
    rows = memory_table()
    if markdown:
        print("| run | use | measured | published (GiB) | model (GiB) | error |")
        print("|---|---|---|---:|---:|---:|")
    for r in rows:
        c = r.case
        if markdown:
            print(
                f"| {c.name} | {c.use} | {c.measure} | {c.measured_gib:.1f} "
                f"| {r.estimate_gib:.1f} | {r.error:+.1%} |"
            )
        else:
            print(
                f"{c.name:<64} {c.use:<11} {c.measure:<10} published {c.measured_gib:6.1f}"
                f"  model {r.estimate_gib:6.1f} GiB  error {r.error:+6.1%}"
            )
    held = [abs(r.error) for r in rows if r.case.use == "held-out"]
    if held:
        print(
            f"\nheld-out rows: {len(held)}, median |error| {statistics.median(held):.1%}, "
            f"worst {max(held):.1%}"
        )


if __name__ == "__main__":
    main()
