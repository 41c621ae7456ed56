"""Print the model against the public figures in ``tests/golden/nccl_public.yaml``.

Run: ``python benchmarks/fidelity.py``. Rows marked *calibration* set a model constant and
are shown for completeness; the summary counts the *held-out* rows only.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabric_model.cli import format_table  # noqa: E402
from fabric_model.validate.golden import load_golden, predict  # noqa: E402


def main() -> None:
    rows, held_out = [], []
    for case in load_golden():
        model = predict(case)
        err = model / case.busbw_GBps - 1
        if case.use == "held-out":
            held_out.append(abs(err))
        rows.append({"case": case.name, "use": case.use, "published_GBps": case.busbw_GBps,
                     "model_GBps": round(model, 1), "error": f"{err:+.1%}"})
    print(format_table(rows))
    print(f"held-out cases: {len(held_out)}, median |error| {statistics.median(held_out):.1%}, "
          f"worst {max(held_out):.1%}")


if __name__ == "__main__":
    main()
