"""Pure figure builders for the training model: scaling curves, step breakdowns, MoE.

Results in, ``plotly.graph_objects.Figure`` out; no streamlit, so the report reuses them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from fabric_model.report.summaries import step_headline
from fabric_model.training import DIMS, StepResult, SweepPoint
from ui.theme import (
    BASE_LAYOUT,
    STEP_TERM_COLORS,
    STEP_TERM_LABELS,
    STEP_TERM_PATTERNS,
    TOPOLOGY_COLORS,
    TOPOLOGY_LABELS,
    VENDOR_DASHES,
    VENDOR_LABELS,
)

__all__ = [
    "MoePoint",
    "ScalingLine",
    "dense_vs_moe_figure",
    "moe_ep_figure",
    "moe_frame",
    "moe_skew_figure",
    "scaling_figure",
    "scaling_frame",
    "step_breakdown_figure",
    "step_share_figure",
    "step_terms",
]

#: Step terms in stacking order.
TERMS = ("compute", "imbalance", "bubble", "optimizer", "offload", "stall", *DIMS)


@dataclass(frozen=True)
class ScalingLine:
    """One (topology, vendor) design swept over cluster sizes."""

    topology: str
    vendor: str
    points: tuple[SweepPoint, ...]
    current: bool = False

    @property
    def label(self) -> str:
        """Legend text."""
        return (
            f"{TOPOLOGY_LABELS.get(self.topology, self.topology)}, "
            f"{VENDOR_LABELS.get(self.vendor, self.vendor)}"
            + (" (this design)" if self.current else "")
        )


def _layout(fig: go.Figure, title: str, **kw: Any) -> go.Figure:
    fig.update_layout(**{**BASE_LAYOUT, **kw}, title={"text": title, "x": 0.0, "xanchor": "left"})
    return fig


def _gpu_axis(values: Sequence[int]) -> dict[str, Any]:
    ticks = sorted(set(values))
    return {
        "type": "log",
        "title": "GPUs",
        "tickvals": ticks,
        "ticktext": [f"{n // 1024}K" if n >= 1024 and n % 1024 == 0 else f"{n:,}" for n in ticks],
    }


def term_marker(term: str) -> dict[str, Any]:
    """Return the bar marker of a step term: its colour, and its hatch if it has one."""
    return {"color": STEP_TERM_COLORS[term], "pattern": {"shape": STEP_TERM_PATTERNS.get(term, "")}}


def step_terms(step: StepResult) -> dict[str, float]:
    """Seconds per term of a feasible step (compute, imbalance, bubble, exposed per dim)."""
    out = {"compute": step.compute_s, "imbalance": step.imbalance_s, "bubble": step.bubble_s}
    out.update({"optimizer": step.optimizer_s, "offload": step.offload_s})
    out["stall"] = step.stall_s
    out.update({d: step.exposed_s.get(d, 0.0) for d in DIMS})
    return out


def _hover(p: SweepPoint) -> list[Any]:
    st = p.step
    head = step_headline(st)
    comm_share = head.exposed_comm_share if head is not None else math.nan
    return [
        st.plan.label() if st.plan else "",
        st.step_time_s,
        st.mfu,
        comm_share,
        st.bubble_fraction,
        p.network_capex_usd / 1e6,
    ]


def scaling_figure(lines: Sequence[ScalingLine], metric: str, scaling: str) -> go.Figure:
    """Scaling efficiency or MFU vs cluster size, one line per design.

    Colour = topology, dash = vendor; the current design is drawn thicker. Infeasible sizes
    are gaps (their reasons are in the table).
    """
    title = {
        "scaling_efficiency": f"Scaling efficiency ({scaling} scaling)",
        "mfu": "Model FLOPs utilisation (MFU)",
    }[metric]
    fig = go.Figure()
    sizes: list[int] = []
    for line in lines:
        xs: list[int] = []
        ys: list[float | None] = []
        hover: list[Any] = []
        for p in line.points:
            sizes.append(p.n_gpus)
            xs.append(p.n_gpus)
            if p.feasible:
                ys.append(p.scaling_efficiency if metric == "scaling_efficiency" else p.step.mfu)
                hover.append(_hover(p))
            else:
                ys.append(None)
                hover.append(["infeasible", math.nan, math.nan, math.nan, math.nan, math.nan])
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                name=line.label,
                mode="lines+markers",
                customdata=hover,
                line={
                    "color": TOPOLOGY_COLORS.get(line.topology, "#777"),
                    "dash": VENDOR_DASHES.get(line.vendor, "solid"),
                    "width": 4 if line.current else 2,
                },
                hovertemplate=(
                    "%{x:,} GPUs: %{y:.1%}<br>plan %{customdata[0]}<br>step "
                    "%{customdata[1]:.2f} s, MFU %{customdata[2]:.1%}<br>exposed comm "
                    "%{customdata[3]:.1%}, bubble %{customdata[4]:.1%}<br>network capex "
                    "$%{customdata[5]:,.1f}M<extra>%{fullData.name}</extra>"
                ),
            )
        )
    return _layout(
        fig,
        title,
        xaxis=_gpu_axis(sizes),
        yaxis={
            "title": "scaling efficiency" if metric == "scaling_efficiency" else "MFU",
            "tickformat": ".0%",
            "rangemode": "tozero",
        },
        legend={"orientation": "h", "y": -0.3},
        height=500,
        margin={"l": 60, "r": 20, "t": 60, "b": 40},
    )


def tail_scaling_figure(
    line: ScalingLine, tail_efficiency: Sequence[float], scaling: str
) -> go.Figure:
    """One design's scaling efficiency: every rank at its mean, and the step at its p50.

    ``tail_efficiency`` is :func:`fabric_model.report.summaries.tail_scaling_efficiency` of
    ``line.points`` (the slowest rank's order statistics): the gap between the two lines is
    the wait for the slowest of ``N`` ranks, which grows with ``N``.
    """
    xs = [p.n_gpus for p in line.points]
    mean = [p.scaling_efficiency if p.feasible else None for p in line.points]
    tail = [None if math.isnan(v) else v for v in tail_efficiency]
    color = TOPOLOGY_COLORS.get(line.topology, "#777")
    fig = go.Figure()
    for name, ys, dash in (
        ("every rank at its mean", mean, "solid"),
        ("step p50: the slowest rank", tail, "dot"),
    ):
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                name=name,
                mode="lines+markers",
                line={"color": color, "dash": dash, "width": 3},
                hovertemplate="%{x:,} GPUs: %{y:.1%}<extra>" + name + "</extra>",
            )
        )
    return _layout(
        fig,
        f"Scaling efficiency with stragglers ({scaling} scaling): {line.label}",
        xaxis=_gpu_axis(xs),
        yaxis={"title": "scaling efficiency", "tickformat": ".0%"},
        legend={"orientation": "h", "y": -0.3},
        height=420,
        margin={"l": 60, "r": 20, "t": 60, "b": 40},
    )


def step_breakdown_figure(points: Sequence[SweepPoint], title: str) -> go.Figure:
    """Share of the step per term at each size (stacked to 100%): where the time goes."""
    ok = [p for p in points if p.feasible]
    x = [f"{p.n_gpus:,}" for p in ok]
    fig = go.Figure()
    for term in TERMS:
        secs = [step_terms(p.step)[term] for p in ok]
        if not any(s > 0 for s in secs):
            continue
        share = [s / p.step.step_time_s for s, p in zip(secs, ok, strict=True)]
        fig.add_trace(
            go.Bar(
                x=x,
                y=share,
                name=STEP_TERM_LABELS[term],
                marker=term_marker(term),
                customdata=secs,
                hovertemplate="%{x} GPUs: %{y:.1%} of the step (%{customdata:.3f} s)"
                f"<extra>{STEP_TERM_LABELS[term]}</extra>",
            )
        )
    return _layout(
        fig,
        title,
        barmode="stack",
        xaxis={"title": "GPUs", "type": "category"},
        yaxis={"title": "share of step time", "tickformat": ".0%"},
        legend={"orientation": "h", "y": -0.25},
        height=440,
    )


def step_share_figure(step: StepResult, title: str) -> go.Figure:
    """One step as a single horizontal bar of its terms (share of the step, seconds on hover)."""
    fig = go.Figure()
    terms = step_terms(step)
    for term in TERMS:
        secs = terms[term]
        if secs <= 0:
            continue
        fig.add_trace(
            go.Bar(
                y=[""],
                x=[secs / step.step_time_s],
                orientation="h",
                name=STEP_TERM_LABELS[term],
                marker=term_marker(term),
                customdata=[secs],
                hovertemplate="%{x:.1%} of the step (%{customdata:.3f} s)"
                f"<extra>{STEP_TERM_LABELS[term]}</extra>",
            )
        )
    return _layout(
        fig,
        title,
        barmode="stack",
        height=230,
        xaxis={"title": "share of step time", "tickformat": ".0%", "range": [0, 1]},
        legend={"orientation": "h", "y": -0.6},
        margin={"l": 20, "r": 20, "t": 50, "b": 40},
    )


def scaling_frame(lines: Sequence[ScalingLine]) -> pd.DataFrame:
    """Every point of every line as a table (CSV export)."""
    rows = []
    for line in lines:
        for p in line.points:
            d = p.to_dict()
            rows.append(
                {
                    "topology": line.topology,
                    "vendor": line.vendor,
                    "n_gpus": p.n_gpus,
                    "feasible": p.feasible,
                    "plan": d["plan"],
                    "step_time_s": d["step_time_s"],
                    "mfu": d["mfu"],
                    "scaling_efficiency": d["scaling_efficiency"],
                    "tokens_per_s": d["tokens_per_s"],
                    "global_batch_tokens": d["global_batch_tokens"],
                    "compute_s": d["compute_s"],
                    "bubble_s": d["bubble_s"],
                    "exposed_comm_s": d["exposed_comm_s"],
                    **{f"exposed_{k}_s": v for k, v in d["exposed_s"].items()},
                    "network_capex_usd": d["network_capex_usd"],
                    "reason": d["reason"],
                }
            )
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------ MoE


@dataclass(frozen=True)
class MoePoint:
    """The MoE step at one expert-parallel degree / skew on one topology."""

    topology: str
    ep: int
    skew: float
    step: StepResult


def moe_frame(points: Sequence[MoePoint]) -> pd.DataFrame:
    """Return the MoE sweep as a table: all-to-all time and share of the step."""
    rows = []
    for p in points:
        st = p.step
        rows.append(
            {
                "topology": p.topology,
                "ep": p.ep,
                "routing_skew": p.skew,
                "feasible": st.feasible,
                "plan": st.plan.label() if st.plan else "",
                "step_time_s": st.step_time_s,
                "mfu": st.mfu,
                "alltoall_s": st.comm_s.get("ep", 0.0) if st.feasible else math.nan,
                "alltoall_share": (
                    st.exposed_s.get("ep", 0.0) / st.step_time_s if st.feasible else math.nan
                ),
                "imbalance_s": st.imbalance_s,
                "reason": st.reason,
                "how": st.comm_detail.get("ep", ""),
            }
        )
    return pd.DataFrame(rows)


def moe_ep_figure(points: Sequence[MoePoint]) -> go.Figure:
    """Exposed all-to-all share of the step vs EP degree, one line per topology."""
    frame = moe_frame(points)
    fig = go.Figure()
    for topo, grp in frame.groupby("topology", sort=False):
        grp = grp.sort_values("ep")
        fig.add_trace(
            go.Scatter(
                x=grp["ep"],
                y=grp["alltoall_share"],
                mode="lines+markers",
                name=TOPOLOGY_LABELS.get(str(topo), str(topo)),
                line={"color": TOPOLOGY_COLORS.get(str(topo), "#777")},
                customdata=grp[["alltoall_s", "step_time_s", "plan"]].to_numpy(),
                hovertemplate="EP %{x}: all-to-all %{y:.1%} of the step<br>"
                "%{customdata[0]:.2f} s of %{customdata[1]:.2f} s<br>"
                "%{customdata[2]}<extra>%{fullData.name}</extra>",
            )
        )
    eps = sorted(frame["ep"].unique())
    return _layout(
        fig,
        "Expert all-to-all (dispatch + combine) share of step time vs EP",
        xaxis={
            "title": "expert-parallel degree (GPUs per expert group)",
            "type": "log",
            "tickvals": eps,
            "ticktext": [str(e) for e in eps],
        },
        yaxis={"title": "exposed all-to-all / step", "tickformat": ".0%", "rangemode": "tozero"},
        legend={"orientation": "h", "y": -0.25},
        height=420,
    )


def moe_skew_figure(points: Sequence[MoePoint]) -> go.Figure:
    """Step-time terms vs routing skew (hot experts) for the current design."""
    ok = [p for p in points if p.step.feasible]
    x = [f"{p.skew:g}x" for p in ok]
    fig = go.Figure()
    for term in TERMS:
        secs = [step_terms(p.step)[term] for p in ok]
        if not any(s > 0 for s in secs):
            continue
        fig.add_trace(
            go.Bar(
                x=x,
                y=secs,
                name=STEP_TERM_LABELS[term],
                marker=term_marker(term),
                hovertemplate=f"skew %{{x}}: %{{y:.3f}} s<extra>{STEP_TERM_LABELS[term]}</extra>",
            )
        )
    return _layout(
        fig,
        "Step time vs routing skew (hot experts receive skew x the mean)",
        barmode="stack",
        xaxis={"title": "routing skew", "type": "category"},
        yaxis={"title": "seconds per step"},
        legend={"orientation": "h", "y": -0.25},
        height=420,
    )


def dense_vs_moe_figure(lines: Mapping[str, Sequence[SweepPoint]]) -> go.Figure:
    """MFU vs GPUs for a dense and an MoE model on the same fabric."""
    fig = go.Figure()
    colors = {0: "#0072B2", 1: "#D55E00"}
    sizes: list[int] = []
    for i, (label, pts) in enumerate(lines.items()):
        sizes += [p.n_gpus for p in pts]
        fig.add_trace(
            go.Scatter(
                x=[p.n_gpus for p in pts],
                y=[p.step.mfu if p.feasible else None for p in pts],
                mode="lines+markers",
                name=label,
                line={"color": colors.get(i, "#777")},
                customdata=[
                    [p.step.plan.label() if p.step.plan else "", p.reason[:80]] for p in pts
                ],
                hovertemplate="%{x:,} GPUs: MFU %{y:.1%}<br>%{customdata[0]}"
                "<extra>%{fullData.name}</extra>",
            )
        )
    return _layout(
        fig,
        "Dense vs MoE: MFU as the cluster grows (weak scaling)",
        xaxis=_gpu_axis(sizes),
        yaxis={"title": "MFU", "tickformat": ".0%", "rangemode": "tozero"},
        legend={"orientation": "h", "y": -0.2},
        height=420,
    )
