"""Print the step model's predictions against published training throughput.

Usage: ``python benchmarks/training_fidelity.py [--markdown]``. Rows and sources:
``tests/golden/training_public.yaml``; the method: ``fabric_model/validate/training_golden.py``.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabric_model.validate.training_golden import validation_table


def main() -> None:
    markdown = "--markdown" in sys.argv
    t0 = time.perf_counter()
    rows = validation_table()
    elapsed = time.perf_counter() - t0
    if markdown:
        print(
            "| run | GPUs | plan | use | published step (s) | model step (s) | error "
            "| published MFU | model MFU |"
        )
        print("|---|---:|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        st = r.step
        plan = st.plan.label() if st.plan else "-"
        if markdown:
            print(
                f"| {r.case.name} | {r.case.scenario.cluster.n_gpus:,} | {plan} | {r.case.use} "
                f"| {r.case.measured_step_time_s:.2f} | {st.step_time_s:.2f} "
                f"| {r.error:+.1%} | {r.measured_mfu:.1%} | {st.mfu:.1%} |"
            )
        else:
            print(
                f"{r.case.name:<62} {r.case.use:<11} eff {r.efficiency:.3f} "
                f"published {r.case.measured_step_time_s:8.2f} s  model "
                f"{st.step_time_s:8.2f} s  error {r.error:+6.1%}  ({plan})"
            )
    held = [abs(r.error) for r in rows if r.case.use == "held-out"]
    groups = sorted({(r.case.group, round(r.efficiency, 3)) for r in rows})
    print(
        f"\nheld-out rows: {len(held)}, median |error| {statistics.median(held):.1%}, "
        f"worst {max(held):.1%}; calibrated compute_efficiency: "
        + ", ".join(f"{g} {e}" for g, e in groups)
        + f"; {elapsed:.1f} s"
    )


if __name__ == "__main__":
    main()
