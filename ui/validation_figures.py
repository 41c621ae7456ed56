"""Validation figures: measured (nccl-tests) vs model bus bandwidth, ratios, the table.

Pure builders over ``fabric_model.validate.compare.SizeComparison`` rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from ui.figure_base import figure_layout, rgba, size_label, size_ticks
from ui.theme import ALGO_COLORS, OKABE_ITO

__all__ = [
    "PERCENTILE_COLUMNS",
    "has_percentiles",
    "validation_busbw_figure",
    "validation_frame",
    "validation_ratio_figure",
]


def _validation_hover(rows: Sequence[Any]) -> list[list[Any]]:
    return [
        [
            size_label(r.size_bytes),
            r.measured_time_us,
            r.model_time_us,
            r.ratio,
            r.model_algo,
            r.regime,
            r.verdict,
        ]
        for r in rows
    ]


_VALIDATION_HOVER = (
    "<b>%{customdata[0]}</b><br>measured %{customdata[1]:,.2f} us, "
    "model %{customdata[2]:,.2f} us<br>ratio %{customdata[3]:.2f} "
    "(model: %{customdata[4]}, %{customdata[5]})"
)


def validation_busbw_figure(rows: Sequence[Any], tolerance: float, title: str = "") -> go.Figure:
    """Measured (markers) vs model (line) bus bandwidth per size, log-log, with the band.

    ``rows`` are ``fabric_model.validate.compare.SizeComparison``; the shaded band spans
    model x (1 - tolerance) to model x (1 + tolerance). Measured sizes that nccl-tests printed
    as ``0.00`` GB/s cannot sit on a log axis and are left out of the markers (their ratio
    comes from the times; see the ratio figure).
    """
    x = [r.size_bytes for r in rows]
    model = [r.model_busbw_GBps for r in rows]
    color = ALGO_COLORS["ring"]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[m * (1 + tolerance) for m in model],
            mode="lines",
            line={"width": 0},
            legendgroup="band",
            showlegend=False,
            hoverinfo="skip",
            name="band upper",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[m * (1 - tolerance) for m in model],
            mode="lines",
            line={"width": 0},
            fill="tonexty",
            fillcolor=rgba(color, 0.18),
            legendgroup="band",
            hoverinfo="skip",
            name=f"model ±{tolerance:.0%}",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=model,
            mode="lines",
            name="model (auto)",
            line={"width": 2.5, "color": color},
            customdata=_validation_hover(rows),
            hovertemplate=_VALIDATION_HOVER + "<br>model busbw %{y:,.4~r} GB/s<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[r.measured_busbw_GBps if r.measured_busbw_GBps > 0 else None for r in rows],
            mode="markers",
            name="measured (out-of-place)",
            marker={
                "size": 9,
                "color": OKABE_ITO["vermillion"],
                "symbol": "circle",
                "line": {"width": 1, "color": "white"},
            },
            customdata=_validation_hover(rows),
            hovertemplate=_VALIDATION_HOVER + "<br>measured busbw %{y:,.4~r} GB/s<extra></extra>",
        )
    )
    return figure_layout(
        fig,
        title,
        height=460,
        hovermode="closest",
        legend={"orientation": "h", "y": -0.2, "x": 0.0},
        xaxis={"type": "log", "title": "message size (bytes per GPU)", **size_ticks(x)},
        yaxis={
            "type": "log",
            "exponentformat": "power",
            "title": "bus bandwidth (GB/s = 10^9 B/s)",
        },
    )


def validation_ratio_figure(rows: Sequence[Any], tolerance: float, title: str = "") -> go.Figure:
    """Measured / model per size (log x), the band 1 ± tolerance shaded, 1 dotted."""
    x = [r.size_bytes for r in rows]
    colors = [
        OKABE_ITO["green"] if abs(r.ratio - 1) <= tolerance else OKABE_ITO["vermillion"]
        for r in rows
    ]
    fig = go.Figure(
        go.Scatter(
            x=x,
            y=[r.ratio for r in rows],
            mode="lines+markers",
            name="measured / model",
            line={"width": 1.5, "color": OKABE_ITO["grey"]},
            marker={"size": 8, "color": colors, "line": {"width": 1, "color": "white"}},
            customdata=_validation_hover(rows),
            hovertemplate=_VALIDATION_HOVER + "<br>%{customdata[6]}<extra></extra>",
        )
    )
    fig.add_hrect(
        y0=1 - tolerance,
        y1=1 + tolerance,
        fillcolor=rgba(ALGO_COLORS["ring"], 0.15),
        line_width=0,
        layer="below",
    )
    fig.add_hline(y=1.0, line={"dash": "dot", "width": 1, "color": OKABE_ITO["grey"]})
    return figure_layout(
        fig,
        title,
        height=300,
        showlegend=False,
        hovermode="closest",
        xaxis={"type": "log", "title": "message size (bytes per GPU)", **size_ticks(x)},
        yaxis={"title": "measured / model", "rangemode": "tozero"},
    )


#: Per-iteration percentile columns of the comparison, after the measured mean. nccl-tests
#: with ``-I 1`` times every iteration; its JSON file (``-J``) carries the median and the
#: 99th percentile, its text table the 99th only. Shown as bus bandwidth next to the mean
#: (``busbw x time / p``), they expose a slow tail (a flapping link, a straggler).
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


def validation_frame(rows: Sequence[Any]) -> pd.DataFrame:
    """Tabulate the comparison, one row per size (the page's table and its CSV).

    The :data:`PERCENTILE_COLUMNS` follow the measured mean when the log has them.
    """
    frame = pd.DataFrame(
        {
            "size": [size_label(r.size_bytes) for r in rows],
            "bytes": [r.size_bytes for r in rows],
            "measured_busbw_GBps": [r.measured_busbw_GBps for r in rows],
            "model_busbw_GBps": [r.model_busbw_GBps for r in rows],
            "ratio": [r.ratio for r in rows],
            "measured_time_us": [r.measured_time_us for r in rows],
            "model_time_us": [r.model_time_us for r in rows],
            "regime": [r.regime for r in rows],
            "model_algo": [r.model_algo for r in rows],
            "bottleneck": [r.bottleneck for r in rows],
            "verdict": [r.verdict for r in rows],
        }
    )
    if has_percentiles(rows):
        at = list(frame.columns).index("measured_busbw_GBps") + 1
        for offset, name in enumerate(PERCENTILE_COLUMNS):
            values = [getattr(r, name) for r in rows]
            frame.insert(at + offset, name, pd.array(values, dtype="Float64"))
    return frame


def catches_frame(catches: Sequence[Any]) -> pd.DataFrame:
    """Tabulate which acceptance floors catch each failure mode (the Validate page's table).

    One row per failure mode that applies to the design: its label, the floor that catches
    it first (or that none does), how many floors catch it, its worst busbw as a share of
    the healthy expectation, and the setting to check.
    """
    return pd.DataFrame(
        {
            "failure mode": [c.label for c in catches],
            "caught by": [
                (
                    f"{c.caught[0][0].scope}, {c.caught[0][0].op} "
                    f"{size_label(c.caught[0][0].size_bytes)}: {c.caught[0][1]:.1f} < "
                    f"{c.caught[0][0].min_busbw_GBps:.1f} GB/s"
                )
                if c.caught
                else "no floor (inside the band)"
                for c in catches
            ],
            "floors caught": [len(c.caught) for c in catches],
            "worst share of expected": [c.worst_ratio for c in catches],
            "check": [c.check for c in catches],
        }
    )
