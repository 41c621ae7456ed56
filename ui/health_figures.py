"""Pure builders for the health view (What-if page): the step's tail and its failure modes.

:class:`~fabric_model.report.health.Health` in, ``pandas.DataFrame`` or
``plotly.graph_objects.Figure`` out; no streamlit.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from fabric_model.report.health import Health
from ui.figure_base import figure_layout
from ui.theme import OKABE_ITO

__all__ = ["health_figure", "health_frame", "skipped_frame"]


def health_frame(h: Health) -> pd.DataFrame:
    """Every failure mode that applies, costliest first: step p50/p99 and the p50's delta."""
    rows = [
        {
            "failure_mode": c.mode.label,
            "step_p50_s": c.step_time_p50_s,
            "step_p99_s": c.step_time_p99_s,
            "delta_s": c.delta_s,
            "delta_pct": 100.0 * h.delta_pct(c),
            "mechanism": c.mode.mechanism,
            "source": c.mode.source,
        }
        for c in h.costs
    ]
    columns = [
        "failure_mode",
        "step_p50_s",
        "step_p99_s",
        "delta_s",
        "delta_pct",
        "mechanism",
        "source",
    ]
    return pd.DataFrame(rows, columns=columns)


def skipped_frame(h: Health) -> pd.DataFrame:
    """Return the failure modes that do not apply to the design, with the reason."""
    return pd.DataFrame(
        [{"failure_mode": c.mode.label, "reason": c.reason} for c in h.skipped],
        columns=["failure_mode", "reason"],
    )


def health_figure(h: Health, top: int = 3) -> go.Figure:
    """Horizontal bars: the healthy step's p50 (and p99 whisker), then the ``top`` modes."""
    shown = h.top(top)
    labels = [
        "healthy",
        *(f"{c.mode.label}: +{c.delta_s:,.3g} s ({h.delta_pct(c):+.1%})" for c in shown),
    ]
    p50 = [h.step_time_p50_s, *(c.step_time_p50_s for c in shown)]
    p99 = [h.step_time_p99_s, *(c.step_time_p99_s for c in shown)]
    deltas = ["", *(f"+{c.delta_s:,.3g} s ({h.delta_pct(c):+.1%})" for c in shown)]
    colors = [OKABE_ITO["blue"], *([OKABE_ITO["vermillion"]] * len(shown))]
    fig = go.Figure(
        go.Bar(
            y=labels,
            x=p50,
            orientation="h",
            marker_color=colors,
            error_x={
                "type": "data",
                "symmetric": False,
                "array": [max(0.0, b - a) for a, b in zip(p50, p99, strict=True)],
                "arrayminus": [0.0] * len(p50),
                "color": OKABE_ITO["grey"],
            },
            customdata=list(zip(p99, deltas, strict=True)),
            hovertemplate="%{y}<br>step p50 %{x:,.3g} s, p99 %{customdata[0]:,.3g} s"
            "<br>%{customdata[1]}<extra></extra>",
        )
    )
    figure_layout(
        fig,
        "Step time: healthy and the failure modes that cost it most",
        xaxis_title="step time p50, s (whisker: p99)",
        yaxis={"autorange": "reversed"},
        showlegend=False,
    )
    return fig
