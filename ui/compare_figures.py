"""Pure builders for the What-if and Compare pages: tables and figures, no streamlit.

Both pages show a few scenarios side by side through :class:`ScenarioMetrics` (one
scenario's headline results, or why its design cannot be built: defined in
``fabric_model.report.summaries``, filled in by ``ui.facade.scenario_metrics``). Results in,
``pandas.DataFrame`` or ``plotly.graph_objects.Figure`` out, so the HTML report can reuse
them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from fabric_model.collectives import CollectiveTime
from fabric_model.report.summaries import ScenarioMetrics
from fabric_model.training import StepResult
from ui.figure_base import size_label
from ui.tables import display_frame
from ui.theme import BASE_LAYOUT, OKABE_ITO, STEP_TERM_LABELS
from ui.training_figures import TERMS, step_terms, term_marker

__all__ = [
    "AFTER_COLOR",
    "BEFORE_COLOR",
    "METRICS",
    "SCENARIO_COLORS",
    "SCENARIO_DASHES",
    "WHATIF_COLUMNS",
    "Metric",
    "ScenarioMetrics",
    "WhatIfRow",
    "compare_busbw_figure",
    "compare_display_frame",
    "compare_frame",
    "compare_step_figure",
    "unique_labels",
    "whatif_busbw_figure",
    "whatif_display_frame",
    "whatif_frame",
    "whatif_step_figure",
]

#: Before (the sidebar's scenario) and after (with the what-ifs): a colour-blind-safe pair.
BEFORE_COLOR = OKABE_ITO["blue"]
AFTER_COLOR = OKABE_ITO["orange"]
#: One colour and dash per compared scenario, in column order (at most four columns); the
#: dashes keep curves that lie on top of each other apart.
SCENARIO_COLORS = (
    OKABE_ITO["blue"],
    OKABE_ITO["orange"],
    OKABE_ITO["green"],
    OKABE_ITO["purple"],
    OKABE_ITO["vermillion"],
)
SCENARIO_DASHES = ("solid", "dash", "dot", "dashdot", "longdash")

NAN = math.nan


@dataclass(frozen=True)
class Metric:
    """One row of the comparison table.

    ``share`` metrics are fractions, shown as percent with deltas in percentage points;
    ``scale`` converts the model's unit to the table's (capex in millions of USD).
    """

    key: str
    label: str
    unit: str
    fmt: str = "{:,.2f}"
    share: bool = False
    scale: float = 1.0


METRICS: tuple[Metric, ...] = (
    Metric("n_gpus", "GPUs", "GPUs", "{:,.0f}"),
    Metric("step_time_s", "Step time", "s", "{:,.2f}"),
    Metric("mfu", "MFU", "%", share=True),
    Metric("tokens_per_s", "Tokens per second", "tokens/s", "{:,.0f}"),
    Metric("exposed_comm_share", "Exposed communication", "% of step", share=True),
    Metric("bubble_share", "Pipeline bubble", "% of step", share=True),
    Metric("allreduce_busbw_GBps", "All-reduce busbw, 1 GiB", "GB/s", "{:,.1f}"),
    Metric("allreduce_time_us", "All-reduce time, 1 GiB", "us", "{:,.0f}"),
    Metric("alltoall_busbw_GBps", "All-to-all busbw, 1 GiB", "GB/s", "{:,.1f}"),
    Metric("alltoall_time_us", "All-to-all time, 1 GiB", "us", "{:,.0f}"),
    Metric("capex_usd", "Network capex", "M USD", "{:,.2f}", scale=1e-6),
    Metric("capex_per_gpu_usd", "Network capex per GPU", "USD", "{:,.0f}"),
    Metric("power_per_gpu_w", "Network power per GPU", "W", "{:,.0f}"),
    Metric("n_switches", "Switches", "switches", "{:,.0f}"),
    Metric("max_switch_hops", "Max switch hops", "hops", "{:,.0f}"),
)


def _layout(fig: go.Figure, title: str, **kw: Any) -> go.Figure:
    fig.update_layout(**BASE_LAYOUT, title={"text": title, "x": 0.0, "xanchor": "left"}, **kw)
    return fig


def _delta_pct(new: float, old: float) -> float:
    """Relative change in percent (NaN when either side is missing or the base is 0)."""
    if math.isnan(new) or math.isnan(old) or old == 0:
        return NAN
    return (new / old - 1.0) * 100.0


def unique_labels(labels: Sequence[str]) -> list[str]:
    """Make column labels unique: a repeated label gets `` #2``, `` #3`` ..."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        label = label.strip() or "scenario"
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} #{seen[label]}")
    return out


# ------------------------------------------------------------------------------ compare


def compare_frame(columns: Sequence[tuple[str, ScenarioMetrics]]) -> pd.DataFrame:
    """Build the comparison table: one row per metric, one column per scenario, with deltas.

    Every column after the first gets ``<label> Δ`` (in the row's unit; percentage points
    for shares) and ``<label> Δ%`` (relative change) against the first column.
    Labels must be unique (see :func:`unique_labels`).
    """
    values = [(label, m.values()) for label, m in columns]
    rows = []
    for metric in METRICS:
        factor = 100.0 if metric.share else metric.scale
        row: dict[str, Any] = {"metric": metric.label, "unit": metric.unit}
        ref = values[0][1][metric.key] * factor if values else NAN
        for i, (label, vals) in enumerate(values):
            v = vals[metric.key] * factor
            row[label] = v
            if i:
                row[f"{label} Δ"] = v - ref
                row[f"{label} Δ%"] = _delta_pct(v, ref)
        rows.append(row)
    return pd.DataFrame(rows)


def _signed(fmt: str, value: float) -> str:
    text = fmt.format(abs(value))
    return ("+" if value > 0 else "−" if value < 0 else "±") + text


def compare_display_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Format a :func:`compare_frame` as text, each row in its own format ('n/a': missing)."""
    fmts = {m.label: ("{:,.1f}" if m.share else m.fmt) for m in METRICS}
    out = frame.copy().astype(object)
    for i, row in frame.iterrows():
        fmt = fmts[row["metric"]]
        for col in frame.columns[2:]:
            v = row[col]
            if not isinstance(v, (int, float)) or math.isnan(v):
                out.at[i, col] = "n/a"
            elif col.endswith(" Δ%"):
                out.at[i, col] = _signed("{:,.1f}", v) + "%"
            elif col.endswith(" Δ"):
                out.at[i, col] = _signed(fmt, v)
            else:
                out.at[i, col] = fmt.format(v)
    return out


def compare_busbw_figure(
    columns: Sequence[tuple[str, ScenarioMetrics]], highlight: int | None = None
) -> go.Figure:
    """All-reduce bus bandwidth vs message size, one line per scenario (NCCL-like choice).

    ``highlight`` is the column drawn thicker (the sidebar's current scenario); it is drawn
    first, so the pinned curves stay visible on top of it where they coincide.
    """
    fig = go.Figure()
    sizes: list[int] = []
    order = sorted(range(len(columns)), key=lambda i: i != highlight)
    for i in order:
        label, m = columns[i]
        rows = m.allreduce_curve
        if not rows:
            continue
        sizes += [r.size_bytes for r in rows]
        fig.add_trace(
            go.Scatter(
                x=[r.size_bytes for r in rows],
                y=[r.busbw_GBps for r in rows],
                mode="lines+markers",
                name=label,
                legendrank=i,
                line={
                    "color": SCENARIO_COLORS[i % len(SCENARIO_COLORS)],
                    "dash": SCENARIO_DASHES[i % len(SCENARIO_DASHES)],
                    "width": 5 if i == highlight else 2,
                },
                customdata=[
                    [size_label(r.size_bytes), r.time_us, f"{r.algo}/{r.proto}"] for r in rows
                ],
                hovertemplate=(
                    "%{customdata[0]}: busbw %{y:,.1f} GB/s, %{customdata[1]:,.1f} us "
                    "(%{customdata[2]})<extra>%{fullData.name}</extra>"
                ),
            )
        )
    ticks = sorted(set(sizes))[::2]
    return _layout(
        fig,
        "All-reduce bus bandwidth vs message size (NCCL-like choice)",
        xaxis={
            "type": "log",
            "title": "message size per GPU (bytes)",
            "tickvals": ticks,
            "ticktext": [size_label(s) for s in ticks],
        },
        yaxis={"type": "log", "title": "bus bandwidth (GB/s)"},
        legend={"orientation": "h", "y": -0.25},
        height=440,
    )


def _stacked_terms(
    fig: go.Figure, x: Sequence[str], steps: Sequence[StepResult | None], hover_x: str
) -> None:
    for term in TERMS:
        secs = [step_terms(s)[term] if s is not None else None for s in steps]
        if not any(v for v in secs if v):
            continue
        fig.add_trace(
            go.Bar(
                x=list(x),
                y=secs,
                name=STEP_TERM_LABELS[term],
                marker=term_marker(term),
                hovertemplate=f"{hover_x}: %{{y:.3f}} s<extra>{STEP_TERM_LABELS[term]}</extra>",
            )
        )


def compare_step_figure(columns: Sequence[tuple[str, ScenarioMetrics]]) -> go.Figure:
    """Where each scenario's step goes: stacked seconds per term, scenarios side by side.

    A scenario without a step (design or plan infeasible) gets an 'n/a' label instead of a bar.
    """
    x = [label for label, _ in columns]
    steps = [m.step if m.feasible else None for _, m in columns]
    fig = go.Figure()
    _stacked_terms(fig, x, steps, "%{x}")
    for label, step in zip(x, steps, strict=True):
        if step is None:
            fig.add_annotation(x=label, y=0, text="n/a", showarrow=False, yanchor="bottom")
    return _layout(
        fig,
        "Where the step goes, per scenario",
        barmode="stack",
        xaxis={"title": "scenario", "type": "category"},
        yaxis={"title": "seconds per step", "rangemode": "tozero"},
        legend={"orientation": "h", "y": -0.25},
        height=440,
    )


# ------------------------------------------------------------------------------ what-if


@dataclass(frozen=True)
class WhatIfRow:
    """One what-if (or all of them combined) applied to the sidebar's scenario.

    ``metrics`` is None when the change itself is not a valid scenario (``error`` says why);
    a design the change makes impossible has ``metrics.error``.
    """

    label: str
    setting: str
    metrics: ScenarioMetrics | None
    error: str = ""

    @property
    def problem(self) -> str:
        """Why this row has no numbers ('' when it has them)."""
        if self.metrics is None:
            return self.error
        return self.metrics.problem


_Fn = Callable[[dict[str, float], dict[str, float]], float]
#: (column, header, display format, value from (row values, baseline values)).
_WHATIF_COLUMNS: tuple[tuple[str, str, str, _Fn], ...] = (
    ("step_time_s", "step time (s)", "%.2f", lambda a, b: a["step_time_s"]),
    ("step_delta_s", "Δ step (s)", "%+.3f", lambda a, b: a["step_time_s"] - b["step_time_s"]),
    (
        "step_delta_pct",
        "Δ step (%)",
        "%+.2f%%",
        lambda a, b: _delta_pct(a["step_time_s"], b["step_time_s"]),
    ),
    ("mfu_pct", "MFU (%)", "%.1f%%", lambda a, b: a["mfu"] * 100),
    ("mfu_delta_pts", "Δ MFU (pts)", "%+.2f", lambda a, b: (a["mfu"] - b["mfu"]) * 100),
    (
        "tokens_per_s",
        "tokens/s",
        "localized",
        lambda a, b: round(a["tokens_per_s"]) if a["tokens_per_s"] == a["tokens_per_s"] else NAN,
    ),
    (
        "tokens_delta_pct",
        "Δ tokens/s (%)",
        "%+.2f%%",
        lambda a, b: _delta_pct(a["tokens_per_s"], b["tokens_per_s"]),
    ),
    (
        "allreduce_busbw_GBps",
        "all-reduce busbw (GB/s)",
        "%.1f",
        lambda a, b: a["allreduce_busbw_GBps"],
    ),
    (
        "allreduce_delta_pct",
        "Δ all-reduce (%)",
        "%+.1f%%",
        lambda a, b: _delta_pct(a["allreduce_busbw_GBps"], b["allreduce_busbw_GBps"]),
    ),
    (
        "alltoall_busbw_GBps",
        "all-to-all busbw (GB/s)",
        "%.1f",
        lambda a, b: a["alltoall_busbw_GBps"],
    ),
    (
        "alltoall_delta_pct",
        "Δ all-to-all (%)",
        "%+.1f%%",
        lambda a, b: _delta_pct(a["alltoall_busbw_GBps"], b["alltoall_busbw_GBps"]),
    ),
)
#: Numeric column -> (readable header, display format), for the page's column configuration.
WHATIF_COLUMNS: dict[str, tuple[str, str]] = {k: (h, f) for k, h, f, _ in _WHATIF_COLUMNS}


def whatif_frame(before: ScenarioMetrics, rows: Sequence[WhatIfRow]) -> pd.DataFrame:
    """Build the what-if table: the baseline, then each row with its deltas against it.

    Collective busbw is the NCCL-like choice at 1 GiB per GPU. Rows without numbers keep NaN
    and say why under ``note``.
    """
    base = before.values()
    out = []
    for label, setting, m, note in [
        ("baseline (sidebar)", "as in the sidebar", before, ""),
        *((r.label, r.setting, r.metrics, r.problem) for r in rows),
    ]:
        vals = m.values() if m is not None else {k.key: NAN for k in METRICS}
        row: dict[str, Any] = {"what_if": label, "setting": setting}
        for key, _, _, fn in _WHATIF_COLUMNS:
            is_delta = "delta" in key
            row[key] = NAN if (is_delta and m is before) else fn(vals, base)
        row["note"] = note or (before.alltoall_error if m is before else "")
        out.append(row)
    return pd.DataFrame(out)


def whatif_display_frame(table: pd.DataFrame) -> pd.DataFrame:
    """Return :func:`whatif_frame` as the page shows it.

    The baseline's deltas read "baseline", a row without numbers an em dash
    (:func:`ui.tables.display_frame`).
    """
    out = display_frame(table, {k: fmt for k, (_, fmt) in WHATIF_COLUMNS.items()})
    deltas = [k for k in WHATIF_COLUMNS if "delta" in k]
    if len(out):
        out[deltas] = out[deltas].astype(object)
        out.loc[out.index[0], deltas] = "baseline"  # row 0 is the baseline (whatif_frame)
    return out


def _step_or_none(m: ScenarioMetrics | None) -> StepResult | None:
    return m.step if m is not None and m.feasible else None


def whatif_step_figure(
    before: ScenarioMetrics, after: ScenarioMetrics | None, log_y: bool = True
) -> go.Figure:
    """Seconds per step term, before and after the what-ifs, as grouped bars.

    Terms that are zero on both sides are left out. A log axis keeps the communication terms
    (milliseconds) readable next to compute (seconds).
    """
    b, a = _step_or_none(before), _step_or_none(after)
    present = [t for t in TERMS if any(s is not None and step_terms(s)[t] > 0 for s in (b, a))]
    x = [STEP_TERM_LABELS[t] for t in present]
    fig = go.Figure()
    for name, step, color in (
        ("before (sidebar)", b, BEFORE_COLOR),
        ("after (all changes)", a, AFTER_COLOR),
    ):
        if step is None:
            continue
        secs = [step_terms(step)[t] for t in present]
        fig.add_trace(
            go.Bar(
                x=x,
                y=[s if s > 0 else None for s in secs],
                name=name,
                marker_color=color,
                text=[f"{s:.3g} s" for s in secs],
                textposition="outside",
                hovertemplate="%{x}: %{y:.4f} s per step<extra>" + name + "</extra>",
            )
        )
    total = ""
    if b is not None and a is not None:
        total = f": {b.step_time_s:,.2f} s → {a.step_time_s:,.2f} s"
    return _layout(
        fig,
        "Step time per term, before vs after" + total,
        barmode="group",
        xaxis={"title": "step term", "type": "category"},
        yaxis={
            "title": "seconds per step" + (" (log)" if log_y else ""),
            **({"type": "log", "dtick": 1} if log_y else {"type": "linear"}),
        },
        legend={"orientation": "h", "y": -0.3},
        height=460,
    )


def whatif_busbw_figure(before: ScenarioMetrics, after: ScenarioMetrics | None) -> go.Figure:
    """Bus bandwidth of all-reduce and all-to-all at 1 GiB, before and after, as grouped bars."""
    ops = (("allreduce", "all-reduce"), ("alltoall", "all-to-all"))
    fig = go.Figure()
    for name, m, color in (
        ("before (sidebar)", before, BEFORE_COLOR),
        ("after (all changes)", after, AFTER_COLOR),
    ):
        if m is None or not m.built:
            continue
        rows: list[CollectiveTime | None] = [getattr(m, op) for op, _ in ops]
        fig.add_trace(
            go.Bar(
                x=[label for _, label in ops],
                y=[r.busbw_GBps if r is not None else None for r in rows],
                name=name,
                marker_color=color,
                text=[f"{r.busbw_GBps:,.0f}" if r is not None else "n/a" for r in rows],
                textposition="outside",
                customdata=[
                    [r.time_us, f"{r.algo}/{r.proto}", r.bottleneck]
                    if r is not None
                    else [NAN, "cannot run", ""]
                    for r in rows
                ],
                hovertemplate=(
                    "%{x}, 1 GiB: busbw %{y:,.1f} GB/s, %{customdata[0]:,.0f} us<br>"
                    "%{customdata[1]}, bottleneck %{customdata[2]}"
                    "<extra>" + name + "</extra>"
                ),
            )
        )
    return _layout(
        fig,
        "Bus bandwidth at 1 GiB per GPU, before vs after",
        barmode="group",
        xaxis={"title": "collective", "type": "category"},
        yaxis={"title": "bus bandwidth (GB/s)", "rangemode": "tozero"},
        legend={"orientation": "h", "y": -0.3},
        height=420,
    )
