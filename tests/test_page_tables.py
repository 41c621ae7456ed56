"""No table of any page shows "None", "nan" or an empty cell on the default scenario.

Streamlit draws a missing value (None, NaN, NA) as "None" in ``st.dataframe`` and
``st.table``; the table builders in ``ui/`` fill such cells with words instead (an em dash,
"baseline", the reason), so a page never shows a placeholder the reader has to decode.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import pytest
from apptest_helpers import open_page
from conftest import app_pages

#: What a cell must never print.
_PLACEHOLDERS = {"", "none", "nan", "nat", "<na>", "null", "inf", "-inf"}


def bad_cells(frame: pd.DataFrame) -> list[tuple[Any, str, Any]]:
    """Return the (row, column, value) of every cell that would print as a placeholder."""
    out = []
    for col in frame.columns:
        for idx, value in frame[col].items():
            missing = value is None or (isinstance(value, float) and not math.isfinite(value))
            if not missing:
                try:
                    missing = bool(pd.isna(value))
                except (TypeError, ValueError):  # a list or an array: not a scalar NA
                    missing = False
            if missing or str(value).strip().lower() in _PLACEHOLDERS:
                out.append((idx, str(col), value))
    return out


def test_bad_cells_finds_every_placeholder() -> None:
    frame = pd.DataFrame(
        {"a": [1.0, math.nan, 2.0], "b": ["x", None, "None"], "c": ["ok", "", "baseline"]}
    )
    assert {(i, c) for i, c, _ in bad_cells(frame)} == {(1, "a"), (1, "b"), (2, "b"), (1, "c")}
    assert bad_cells(pd.DataFrame({"a": [1, 2], "b": ["\u2014", "baseline"]})) == []


@pytest.mark.parametrize("page", [p.script for p in app_pages()])
def test_no_table_of_a_page_prints_none_or_nan(page: str) -> None:
    at = open_page(page)
    frames = [("dataframe", e.value) for e in at.dataframe] + [("table", e.value) for e in at.table]
    problems = {
        f"{kind} {i} ({', '.join(map(str, frame.columns[:3]))} ...)": bad_cells(frame)[:5]
        for i, (kind, frame) in enumerate(frames)
        if bad_cells(frame)
    }
    assert not problems, problems
