"""Page building blocks: a chart with its export buttons, a table's CSV download.

Pages call :func:`chart` instead of a bare ``st.plotly_chart``: it draws the figure at full
width and, under it, one compact row of download buttons: PNG and SVG (rendered on the
server by kaleido only when clicked, see ``ui.exports``) and standalone HTML. Without a
Chromium on the server the row offers HTML only and says why.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from ui.exports import (
    export_file_name,
    figure_html,
    figure_png,
    figure_svg,
    static_export_available,
)

__all__ = ["chart", "csv_download", "current_preset", "export_key", "number_or_text_column"]


def current_preset() -> str | None:
    """Return the sidebar's preset name (None before the sidebar ran)."""
    state = st.session_state.get("scenario_state")
    return getattr(state, "preset", None)


def number_or_text_column(frame: pd.DataFrame, key: str, header: str, fmt: str) -> Any:
    """Return a column's configuration: numbers with ``fmt``, or text.

    Text when :func:`ui.tables.display_frame` turned the column into text (it had a gap).
    """
    if pd.api.types.is_numeric_dtype(frame[key]):
        return st.column_config.NumberColumn(header, format=fmt)
    return st.column_config.TextColumn(header)


def export_key(chart_key: str, fmt: str) -> str:
    """Return the widget key of a chart's export button (``fmt`` is png, svg or html).

    Streamlit adds the CSS class ``st-key-<key>`` to the button, which the browser tests use.
    """
    return f"export_{fmt}_{chart_key}"


def chart(fig: go.Figure, *, key: str, name: str) -> None:
    """Draw ``fig`` full width with PNG / SVG / HTML downloads under it.

    Parameters
    ----------
    fig
        The figure (from a pure ``ui.*_figures`` builder).
    key
        The chart's element key; the export buttons derive theirs with :func:`export_key`.
    name
        Short chart name for file names, e.g. ``"collectives busbw"`` ->
        ``collectives-busbw_<preset>.png``.
    """
    st.plotly_chart(fig, width="stretch", key=key)
    preset = current_preset()
    # the callables run on the server only when a button is clicked, in a worker thread
    formats: list[tuple[str, str, Callable[[], bytes | str], str]] = []
    if static_export_available():
        formats += [
            (
                "png",
                "image/png",
                partial(figure_png, fig),
                "PNG image, twice the chart's size in pixels",
            ),
            (
                "svg",
                "image/svg+xml",
                partial(figure_svg, fig),
                "SVG vector image, for papers and slides",
            ),
        ]
    formats.append(
        (
            "html",
            "text/html",
            partial(figure_html, fig),
            "interactive page with plotly.js inside; opens offline",
        )
    )
    with st.container(
        horizontal=True, gap="small", vertical_alignment="center", key=f"export_row_{key}"
    ):
        st.caption("Download chart:", width="content")
        for fmt, mime, data, help_text in formats:
            st.download_button(
                fmt.upper(),
                data=data,
                file_name=export_file_name(name, preset, fmt),
                mime=mime,
                key=export_key(key, fmt),
                help=help_text,
                on_click="ignore",
                type="tertiary",
            )
        if len(formats) == 1:
            st.caption("(PNG/SVG need Chromium on the server)", width="content")


def csv_download(frame: pd.DataFrame, *, label: str, name: str, key: str) -> None:
    """Offer ``frame`` as a CSV file named from ``name`` and the preset (no index column)."""
    st.download_button(
        label,
        frame.to_csv(index=False).encode(),
        file_name=export_file_name(name, current_preset(), "csv"),
        mime="text/csv",
        key=key,
        on_click="ignore",
    )
