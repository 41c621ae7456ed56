"""The "versus the best fabric" view: each design's gap to the best design at each size.

Pure figure builders (plotly, no streamlit) over :func:`fabric_model.report.summaries.versus_best`:
where the Scaling page's absolute curves lie on top of each other, the gap in percent shows
whether two fabrics differ by 2 % or by 40 %. The Scaling page compares (topology, vendor)
designs over cluster sizes, the MoE page topologies over expert-parallel degrees.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from fabric_model.report.summaries import (
    NEGLIGIBLE_GAP_PCT,
    VERSUS_BEST_METRICS,
    GapRow,
    fabric_gap_sentence,
    versus_best,
)
from fabric_model.scenario import MODEL_SHAPES
from fabric_model.training import SweepPoint
from ui.figure_base import rgba
from ui.theme import (
    BASE_LAYOUT,
    TOPOLOGY_COLORS,
    TOPOLOGY_LABELS,
    VENDOR_DASHES,
    VENDOR_LABELS,
)
from ui.training_figures import MoePoint, ScalingLine

__all__ = [
    "METRIC_LABELS",
    "MOE_METRICS",
    "design_name",
    "model_title",
    "moe_gap_rows",
    "moe_gap_sentence",
    "scaling_gap_rows",
    "scaling_gap_sentence",
    "scaling_styles",
    "versus_best_figure",
]

#: The selector's labels of :data:`fabric_model.report.summaries.VERSUS_BEST_METRICS`.
METRIC_LABELS: dict[str, str] = {
    "step_time_s": "step time",
    "mfu": "MFU",
    "network_capex_usd": "network capex",
}


def design_name(line: ScalingLine) -> str:
    """Return a design's name in the view and its sentence: "Fat-tree on InfiniBand"."""
    return (
        f"{TOPOLOGY_LABELS.get(line.topology, line.topology)} on "
        f"{VENDOR_LABELS.get(line.vendor, line.vendor)}"
    )


#: The MoE page's metrics (its points have no network capex of their own).
MOE_METRICS = ("step_time_s", "mfu")


def model_title(name: str) -> str:
    """Return a model's short name for a sentence: "Llama 3 70B", "DeepSeek-V3"."""
    shape = MODEL_SHAPES.get(name)
    if shape is None:
        return "the custom model"
    return str(shape["description"]).split(" (", 1)[0]


def _point_value(p: SweepPoint, metric: str) -> float:
    if not p.feasible:
        return math.nan
    if metric == "step_time_s":
        return float(p.step.step_time_s)
    if metric == "mfu":
        return float(p.step.mfu)
    return float(p.network_capex_usd)


def scaling_gap_rows(lines: Sequence[ScalingLine], metric: str) -> list[GapRow]:
    """:func:`~fabric_model.report.summaries.versus_best` of the Scaling page's lines (by label)."""
    values = {
        design_name(line): {p.n_gpus: _point_value(p, metric) for p in line.points if not p.skipped}
        for line in lines
    }
    return versus_best(values, metric)


def scaling_gap_sentence(lines: Sequence[ScalingLine], model: str) -> str:
    """Return the Scaling page's sentence: where the fabric changes the step time of ``model``."""
    return fabric_gap_sentence(scaling_gap_rows(lines, "step_time_s"), subject=f"With {model}")


def moe_gap_rows(points: Sequence[MoePoint], metric: str) -> list[GapRow]:
    """Return :func:`~fabric_model.report.summaries.versus_best` of the MoE topologies per EP."""
    values: dict[str, dict[int, float]] = {}
    for p in points:
        st = p.step
        v = math.nan
        if st.feasible:
            v = float(st.step_time_s) if metric == "step_time_s" else float(st.mfu)
        values.setdefault(TOPOLOGY_LABELS.get(p.topology, p.topology), {})[p.ep] = v
    return versus_best(values, metric)


def moe_gap_sentence(points: Sequence[MoePoint], model: str) -> str:
    """Return the MoE page's sentence: where the topology changes the MoE step time."""
    return fabric_gap_sentence(
        moe_gap_rows(points, "step_time_s"), lambda ep: f"EP {ep}", subject=f"With {model}"
    )


def _axis_title(metric: str) -> str:
    unit = VERSUS_BEST_METRICS[metric][1]
    what = VERSUS_BEST_METRICS[metric][2]
    return what if unit == "pts" else f"% {what}"


def versus_best_figure(
    rows: Sequence[GapRow],
    metric: str,
    *,
    styles: Mapping[str, Mapping[str, Any]] | None = None,
    x_title: str = "GPUs",
    x_text: Callable[[int], str] = lambda n: f"{n:,}",
    log_x: bool = True,
) -> go.Figure:
    """Each design's gap to the best design at each size, one line per design.

    The best design at a size sits on zero; a band marks the gaps the page's sentence calls
    "within" (:data:`~fabric_model.report.summaries.NEGLIGIBLE_GAP_PCT`). ``styles`` maps a design
    label to its plotly ``line`` (colour, dash, width), as in the absolute charts.
    """
    unit = VERSUS_BEST_METRICS[metric][1]
    designs = list(dict.fromkeys(r.design for r in rows))
    xs = sorted({r.x for r in rows})
    fig = go.Figure()
    if unit == "%":
        fig.add_hrect(
            y0=0,
            y1=NEGLIGIBLE_GAP_PCT,
            fillcolor=rgba("#7f7f7f", 0.15),
            line_width=0,
            annotation_text=f"within {NEGLIGIBLE_GAP_PCT:g} %",
            annotation_position="top left",
        )
    for d in designs:
        mine = sorted((r for r in rows if r.design == d), key=lambda r: r.x)
        fig.add_trace(
            go.Scatter(
                x=[r.x for r in mine],
                y=[r.gap if math.isfinite(r.gap) else None for r in mine],
                name=d,
                mode="lines+markers",
                line=dict((styles or {}).get(d, {})),
                customdata=[[r.best_design or "none runs", x_text(r.x)] for r in mine],
                hovertemplate=(
                    "%{customdata[1]}: %{y:.1f} "
                    + ("pts" if unit == "pts" else "%")
                    + " behind %{customdata[0]}<extra>%{fullData.name}</extra>"
                ),
            )
        )
    xaxis: dict[str, Any] = {
        "title": x_title,
        "tickvals": xs,
        "ticktext": [x_text(x) for x in xs],
    }
    if log_x:
        xaxis["type"] = "log"
    else:
        xaxis["type"] = "category"
    fig.update_layout(
        **{
            **BASE_LAYOUT,
            "xaxis": xaxis,
            "yaxis": {"title": _axis_title(metric), "rangemode": "tozero", "zeroline": True},
            "legend": {"orientation": "h", "y": -0.3},
            "height": 460,
            "margin": {"l": 60, "r": 20, "t": 60, "b": 40},
        },
        title={
            "text": f"Versus the best fabric: {METRIC_LABELS[metric]}, "
            f"{'points below' if unit == 'pts' else '% behind'} the best design at each size",
            "x": 0.0,
            "xanchor": "left",
        },
    )
    return fig


def scaling_styles(lines: Sequence[ScalingLine]) -> dict[str, dict[str, Any]]:
    """Return the Scaling page's line styles by label: colour = topology, dash = vendor."""
    return {
        design_name(line): {
            "color": TOPOLOGY_COLORS.get(line.topology, "#777"),
            "dash": VENDOR_DASHES.get(line.vendor, "solid"),
            "width": 4 if line.current else 2,
        }
        for line in lines
    }
