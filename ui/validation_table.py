"""The Validate page's comparison table, with nccl-tests' per-iteration percentiles.

nccl-tests with ``-I 1`` times every iteration; its JSON file (``-J``) carries the median
and 99th-percentile iteration, its text table the 99th only. Where the log has them, the
table shows them as bus bandwidth next to the mean (``busbw x time / p``), so a tail of slow
iterations (a flapping link, a straggler) shows even when the mean looks healthy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from ui.figures import validation_frame

__all__ = ["PERCENTILE_COLUMNS", "has_percentiles", "validation_table"]

#: Percentile columns, in display order after the measured mean.
PERCENTILE_COLUMNS = (
    "measured_p50_busbw_GBps",
    "measured_p99_busbw_GBps",
    "measured_p50_time_us",
    "measured_p99_time_us",
)


def has_percentiles(rows: Sequence[Any]) -> bool:
    """Tell whether any compared size has a per-iteration percentile."""
    return any(
        getattr(r, "measured_p50_time_us", None) is not None
        or getattr(r, "measured_p99_time_us", None) is not None
        for r in rows
    )


def validation_table(rows: Sequence[Any]) -> pd.DataFrame:
    """Tabulate the comparison (one row per size), with p50/p99 columns when measured."""
    frame = validation_frame(rows)
    if not has_percentiles(rows):
        return frame
    at = list(frame.columns).index("measured_busbw_GBps") + 1
    for offset, name in enumerate(PERCENTILE_COLUMNS):
        values = [getattr(r, name) for r in rows]
        frame.insert(at + offset, name, pd.array(values, dtype="Float64"))
    return frame
