"""Tables as the pages show them: every cell says something.

Streamlit draws a missing value (None, NaN, NA) in ``st.dataframe`` as "None", and an empty
string as nothing; a reader cannot tell "not modelled" from "zero" from a bug. The pages
show :func:`display_frame` of their tables instead (the CSV downloads keep the numbers):
a column without a gap stays numeric (sortable, formatted by the page's column config), a
column with one becomes text, each number printed with the column's format and each gap
as an em dash or the word the caller gives ("baseline" for the what-if table's deltas of
the baseline row).

Pure pandas, no streamlit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

__all__ = ["EMPTY_CELL", "display_frame", "is_missing"]

#: What a cell without a value prints.
EMPTY_CELL = "\u2014"


def is_missing(value: Any) -> bool:
    """Whether a cell would print as a placeholder: None, NaN, NA, an infinity or blank text."""
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, float):
        return not math.isfinite(value)
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # a list or an array: not a scalar
        return False


def _text(value: Any, fmt: str | None) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)) and fmt and "%" in fmt:  # not streamlit's "localized"
        return fmt % value
    if isinstance(value, float):
        return f"{value:,.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def display_frame(
    frame: pd.DataFrame,
    formats: Mapping[str, str] | None = None,
    *,
    missing: str = EMPTY_CELL,
) -> pd.DataFrame:
    """Return ``frame`` with no cell that prints as "None", "nan" or nothing.

    Parameters
    ----------
    frame
        The table as the model's builders return it (NaN where a value does not exist).
    formats
        printf formats by column (``"%.2f"``, ``"%+.1f%%"``), used for the numbers of a
        column that becomes text; other numbers print with 4 significant digits, counts
        with thousands separators.
    missing
        The text of a cell without a value.

    Returns
    -------
    pandas.DataFrame
        A copy: columns without a gap unchanged, the others as text.
    """
    fmts = dict(formats or {})
    out = frame.copy()
    for col in out.columns:
        values = out[col].tolist()
        gaps = [is_missing(v) for v in values]
        if not any(gaps):
            continue
        out[col] = pd.Series(
            [
                missing if gap else _text(v, fmts.get(str(col)))
                for v, gap in zip(values, gaps, strict=True)
            ],
            index=out.index,
            dtype=object,
        )
    return out
