"""Print the model against the public figures in ``tests/golden/nccl_public.yaml``.

Run: ``python benchmarks/fidelity.py``. Rows marked *calibration* set a model constant and
are shown for completeness; the summary counts the *held-out* rows only, overall and split
by fabric (NVLink, InfiniBand, Ethernet) and scale (one NVLink domain, 2 nodes, more).
Rows with a documented ``expected_gap`` are marked ``gap`` (a wider band for a stated
reason) or ``finding`` (a known model gap).
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabric_model.cli import format_table
from fabric_model.validate.golden import fabric_class, load_golden, predict, scale_class


def _summary(label: str, errors: list[float]) -> str:
    if not errors:
        return f"{label}: no held-out case"
    return (
        f"{label}: {len(errors)} case(s), median |error| {statistics.median(errors):.1%}, "
        f"worst {max(errors):.1%}"
    )


def main() -> None:
    rows, held_out = [], []
    by_fabric: dict[str, list[float]] = defaultdict(list)
    by_scale: dict[str, list[float]] = defaultdict(list)
    for case in load_golden():
        model = predict(case)
        err = model / case.busbw_GBps - 1
        gap = case.expected_gap
        flag = "" if gap is None else ("gap" if gap.band is not None else "finding")
        if case.use == "held-out":
            held_out.append(abs(err))
            by_fabric[fabric_class(case)].append(abs(err))
            by_scale[scale_class(case)].append(abs(err))
        rows.append(
            {
                "case": case.name,
                "use": case.use,
                "published_GBps": case.busbw_GBps,
                "model_GBps": round(model, 1),
                "error": f"{err:+.1%}",
                "note": flag,
            }
        )
    print(format_table(rows))
    print(_summary("held-out", held_out))
    for label in ("InfiniBand", "Ethernet"):
        print("  " + _summary(label, by_fabric[label]))
    for label in ("NVLink", "2 nodes", ">2 nodes"):
        print("  " + _summary(label, by_scale[label]))


if __name__ == "__main__":
    main()
