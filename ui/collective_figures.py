"""Collective figures: bus bandwidth curves, latency/bandwidth breakdowns, fabric effects.

Pure builders: ``CollectiveTime`` rows (and the facade's fabric-effects frame) in,
``plotly.graph_objects.Figure``, ``DataFrame`` or markdown text out.
"""

from __future__ import annotations

import itertools
import math
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from fabric_model.collectives import AlgoModel, CollectiveTime
from ui.figure_base import figure_layout, rgba, size_label, size_ticks
from ui.theme import (
    ALGO_COLORS,
    ALGO_LABELS,
    AUTO_HALO_COLOR,
    OKABE_ITO,
    OP_LABELS,
    VENDOR_COLORS,
    VENDOR_LABELS,
)

__all__ = [
    "auto_crossovers",
    "auto_pick_text",
    "auto_summary_text",
    "busbw_curve_figure",
    "collective_breakdown_figure",
    "collective_breakdown_frame",
    "collective_busbw_figure",
    "collective_curve_frame",
    "fabric_effects_figure",
    "fabric_effects_notes",
    "unavailable_text",
]


#: Marker symbol per NCCL protocol on the ``auto`` markers.
_PROTO_SYMBOLS = {"LL": "circle", "LL128": "diamond", "Simple": "square"}


def _algo_color(algo: str) -> str:
    return ALGO_COLORS.get(algo, OKABE_ITO["grey"])


def auto_crossovers(auto: Sequence[CollectiveTime]) -> list[tuple[int, str, str]]:
    """Find the sizes where ``auto`` switches algorithm: ``(first size of the new, old, new)``.

    A protocol change within one algorithm is not a crossover.
    """
    return [(b.size_bytes, a.algo, b.algo) for a, b in itertools.pairwise(auto) if a.algo != b.algo]


def _hover_data(rows: Sequence[CollectiveTime]) -> list[list[Any]]:
    return [
        [
            size_label(r.size_bytes),
            r.time_us,
            r.algbw_GBps,
            r.algo,
            r.proto,
            r.busbw_min_GBps,
            r.busbw_max_GBps,
        ]
        for r in rows
    ]


_HOVER = (
    "<b>%{customdata[0]}</b>: %{customdata[3]} / %{customdata[4]}<br>"
    "time %{customdata[1]:,.2f} us<br>algbw %{customdata[2]:,.4~r} GB/s<br>"
    "busbw %{y:,.4~r} GB/s"
)


def collective_busbw_figure(
    curves: Mapping[str, Sequence[CollectiveTime]],
    auto: Sequence[CollectiveTime] = (),
    *,
    ecmp: bool = False,
    title: str = "",
    log_y: bool = True,
) -> go.Figure:
    """Plot bus bandwidth vs message size, log-log: one line per algorithm plus ``auto``.

    Each algorithm's line is its best protocol per size. ``auto`` (NCCL-like choice among its
    candidates) is a wide grey halo with markers in the chosen algorithm's colour (symbol =
    protocol); dotted vertical lines mark the sizes where it switches algorithm. With
    ``ecmp`` a shaded band per algorithm spans the slowest to the fastest ECMP seed.
    ``log_y=False`` draws bus bandwidth on a linear axis (the large-message plateau).
    """
    fig = go.Figure()
    if auto:
        fig.add_trace(
            go.Scatter(
                x=[r.size_bytes for r in auto],
                y=[r.busbw_GBps for r in auto],
                mode="lines",
                line={"width": 12, "color": AUTO_HALO_COLOR},
                legendgroup="auto",
                name=ALGO_LABELS["auto"],
                hoverinfo="skip",
            )
        )
    for algo, rows in curves.items():
        color = _algo_color(algo)
        x = [r.size_bytes for r in rows]
        if ecmp:
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=[r.busbw_max_GBps for r in rows],
                    mode="lines",
                    line={"width": 0},
                    legendgroup=algo,
                    showlegend=False,
                    hoverinfo="skip",
                    name=f"{algo} ECMP max",
                )
            )
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=[r.busbw_min_GBps for r in rows],
                    mode="lines",
                    line={"width": 0},
                    fill="tonexty",
                    fillcolor=rgba(color, 0.22),
                    legendgroup=algo,
                    showlegend=False,
                    name=f"{algo} ECMP min-max",
                    customdata=[[r.busbw_min_GBps, r.busbw_max_GBps] for r in rows],
                    hovertemplate=(
                        f"{algo} over ECMP seeds: %{{customdata[0]:,.4~r}} - "
                        "%{customdata[1]:,.4~r} GB/s<extra></extra>"
                    ),
                )
            )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[r.busbw_GBps for r in rows],
                mode="lines",
                name=ALGO_LABELS.get(algo, algo),
                legendgroup=algo,
                line={"width": 2.5, "color": color},
                customdata=_hover_data(rows),
                hovertemplate=_HOVER + "<extra></extra>",
            )
        )
    if auto:
        fig.add_trace(
            go.Scatter(
                x=[r.size_bytes for r in auto],
                y=[r.busbw_GBps for r in auto],
                mode="markers",
                marker={
                    "size": 8,
                    "color": [_algo_color(r.algo) for r in auto],
                    "symbol": [_PROTO_SYMBOLS.get(r.proto, "circle") for r in auto],
                    "line": {"width": 1, "color": "white"},
                },
                name="auto's choice (marker = algorithm colour, protocol shape)",
                legendgroup="auto",
                showlegend=False,
                customdata=_hover_data(auto),
                hovertemplate="auto picks " + _HOVER + "<extra></extra>",
            )
        )
    for size, old, new in auto_crossovers(auto):
        fig.add_vline(x=size, line={"dash": "dot", "width": 1.5, "color": _algo_color(new)})
        fig.add_annotation(  # annotations on a log axis take log10 coordinates
            x=math.log10(size),
            y=1.0,
            yref="paper",
            yanchor="bottom",
            showarrow=False,
            text=f"{old} → {new}<br>from {size_label(size)}",
            font={"size": 12},
            xanchor="right",
            align="right",
        )
    ticks = list(range(3, 35, 3))
    figure_layout(
        fig,
        title,
        height=520,
        hovermode="closest",
        legend={"orientation": "h", "y": -0.18, "x": 0.0},
        xaxis={
            "type": "log",
            "title": "message size (bytes per GPU, binary steps)",
            "tickvals": [2**i for i in ticks],
            "ticktext": [size_label(2**i) for i in ticks],
        },
        yaxis={
            "type": "log" if log_y else "linear",
            "exponentformat": "power",
            "title": "bus bandwidth (GB/s = 10^9 B/s)",
        },
    )
    fig.update_layout(margin={"t": 100})  # room for the crossover labels above the plot
    return fig


def _rows_at(
    curves: Mapping[str, Sequence[CollectiveTime]], size_bytes: int
) -> list[CollectiveTime]:
    return [r for rows in curves.values() for r in rows if r.size_bytes == size_bytes]


def collective_breakdown_figure(
    curves: Mapping[str, Sequence[CollectiveTime]], size_bytes: int
) -> go.Figure:
    """Stack each algorithm's latency term (hatched) and bandwidth term at one size."""
    rows = _rows_at(curves, size_bytes)
    labels = [f"{r.algo} ({r.proto})" for r in rows]
    colors = [_algo_color(r.algo) for r in rows]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            y=labels,
            x=[r.latency_us for r in rows],
            orientation="h",
            name="latency term",
            marker={
                "color": colors,
                "pattern": {"shape": "/", "fgcolor": "white", "solidity": 0.3},
            },
            hovertemplate="%{y}: latency %{x:,.2f} us<extra></extra>",
        )
    )
    fig.add_trace(
        go.Bar(
            y=labels,
            x=[r.bandwidth_us for r in rows],
            orientation="h",
            name="bandwidth term",
            marker={"color": colors},
            hovertemplate="%{y}: bandwidth %{x:,.2f} us<extra></extra>",
        )
    )
    totals = [r.time_us for r in rows]
    fig.add_trace(
        go.Scatter(
            y=labels,
            x=totals,
            mode="text",
            textposition="middle right",
            showlegend=False,
            text=[f"  {r.time_us:,.1f} us · {r.busbw_GBps:,.3g} GB/s" for r in rows],
            hoverinfo="skip",
        )
    )
    top = max(totals, default=1.0)
    return figure_layout(
        fig,
        f"Time of one call at {size_label(size_bytes)}: latency + bandwidth",
        barmode="stack",
        height=140 + 55 * max(len(rows), 1),
        xaxis={"title": "time (us)", "range": [0, top * 1.45]},
        yaxis={"autorange": "reversed", "title": ""},
        legend={"orientation": "h", "y": -0.25 if len(rows) > 2 else -0.6},
    )


def collective_breakdown_frame(
    curves: Mapping[str, Sequence[CollectiveTime]],
    models: Mapping[str, AlgoModel],
    size_bytes: int,
    auto: Sequence[CollectiveTime] = (),
) -> pd.DataFrame:
    """Tabulate each algorithm at one size: terms, bandwidths, bottleneck and the two sides.

    ``regime`` (latency when the latency term exceeds the bandwidth term), ``ceiling`` (the
    resource whose bound is the algorithm's bandwidth ceiling) and ``pct_of_ceiling`` (the
    row's busbw as a % of it) say why each row is where it is. With ``tails.enabled`` the
    rows' p50 and p99 over iterations follow (``time_us_p50``, ``time_us_p99``).

    ``nvlink_busbw_GBps`` / ``network_busbw_GBps`` are the model's large-message bus
    bandwidths on each side (``AlgoModel.intra_Bps`` / ``inter_Bps``); network is empty when
    the job fits in one NVLink domain.
    """
    auto_algo = next((r.algo for r in auto if r.size_bytes == size_bytes), None)
    out = []
    by_label = {m.algo: m for m in models.values()}  # nvls runs as nvls-tree across domains
    for r in _rows_at(curves, size_bytes):
        m = by_label.get(r.algo, models.get(r.algo))
        inter = m.inter_Bps / 1e9 if m is not None and math.isfinite(m.inter_Bps) else None
        out.append(
            {
                "algo": r.algo,
                "proto": r.proto,
                "auto_pick": r.algo == auto_algo,
                "time_us": r.time_us,
                "latency_us": r.latency_us,
                "bandwidth_us": r.bandwidth_us,
                "busbw_GBps": r.busbw_GBps,
                "busbw_range_GBps": f"{r.busbw_min_GBps:,.3g} - {r.busbw_max_GBps:,.3g}",
                "bottleneck": r.bottleneck,
                "regime": r.regime,
                "ceiling": r.ceiling,
                "pct_of_ceiling": r.pct_of_ceiling,
                "nvlink_busbw_GBps": m.intra_Bps / 1e9 if m is not None else None,
                "network_busbw_GBps": inter,
                # tails.enabled: p50 / p99 over iterations (dropped below when none differs)
                "time_us_p50": r.time_us_p50,
                "time_us_p99": r.time_us_p99,
            }
        )
    frame = pd.DataFrame(out)
    spread = any(
        row["time_us_p50"] != row["time_us"] or row["time_us_p99"] != row["time_us"] for row in out
    )
    return frame if spread else frame.drop(columns=["time_us_p50", "time_us_p99"], errors="ignore")


def collective_curve_frame(
    curves: Mapping[str, Sequence[CollectiveTime]], auto: Sequence[CollectiveTime] = ()
) -> pd.DataFrame:
    """Tabulate every curve's rows (each algorithm, then ``auto``) for the CSV download."""
    series = [*curves.items(), *([("auto", auto)] if auto else [])]
    rows = [
        {"curve": name, "size": size_label(r.size_bytes), **r.to_dict()}
        for name, rows_ in series
        for r in rows_
    ]
    return pd.DataFrame(rows)


def unavailable_text(unavailable: Mapping[str, str], op: str) -> str:
    """Name, in one markdown message, each algorithm that cannot run here and why."""
    items = "\n".join(f"- **{algo}**: {reason}" for algo, reason in unavailable.items())
    return f"Not available for {OP_LABELS.get(op, op)} on this design:\n{items}"


_EFFECT_CASE_LABELS = {
    ("allreduce", "ring"): "all-reduce, ring",
    ("alltoall", "hierarchical"): "all-to-all, hierarchical (PXN)",
}


def _vendor_name(vendor: str, routing: str) -> str:
    label = VENDOR_LABELS.get(vendor, vendor)
    return label if not routing or routing.lower() in label.lower() else f"{label} ({routing})"


def fabric_effects_figure(effects: pd.DataFrame) -> go.Figure:
    """Draw large-message bus bandwidth per case as grouped bars, one per vendor in its colour.

    ``effects`` has one row per (vendor, case) as ``ui.facade.fabric_effects`` returns; rows
    with a ``reason`` are drawn as an empty bar labelled "n/a" whose hover gives the reason.
    Error bars span the ECMP seeds' range where routing hashes.
    """
    fig = go.Figure()
    for vendor, group in effects.groupby("vendor", sort=False):
        routing = next((r for r in group["routing"] if r), "")
        x = [
            _EFFECT_CASE_LABELS.get((o, a), f"{o}, {a}")
            for o, a in zip(group["op"], group["algo"], strict=True)
        ]
        ok = group["reason"] == ""
        y = group["busbw_GBps"].where(ok, 0.0).tolist()
        hi = (group["busbw_max_GBps"] - group["busbw_GBps"]).where(ok, 0.0).tolist()
        lo = (group["busbw_GBps"] - group["busbw_min_GBps"]).where(ok, 0.0).tolist()
        hover = [
            (
                f"{b:,.1f} GB/s ({p}, {t:,.0f} us; bottleneck {bn}; range {mn:,.1f} - {mx:,.1f})"
                if good
                else "n/a: " + "<br>".join(textwrap.wrap(reason, 70))
            )
            for good, b, p, t, bn, mn, mx, reason in zip(
                ok,
                group["busbw_GBps"],
                group["proto"],
                group["time_us"],
                group["bottleneck"],
                group["busbw_min_GBps"],
                group["busbw_max_GBps"],
                group["reason"],
                strict=True,
            )
        ]
        fig.add_trace(
            go.Bar(
                x=x,
                y=y,
                name=_vendor_name(str(vendor), routing),
                marker_color=VENDOR_COLORS.get(str(vendor), OKABE_ITO["grey"]),
                error_y={
                    "type": "data",
                    "array": hi,
                    "arrayminus": lo,
                    "visible": any(hi) or any(lo),
                },
                text=[
                    f"{b:,.0f}" if good else "n/a"
                    for good, b in zip(ok, group["busbw_GBps"], strict=True)
                ],
                # inside the bar, clear of the error bar; "n/a" sits on the axis
                textposition=["inside" if good else "outside" for good in ok],
                insidetextanchor="end",
                insidetextfont={"color": "white"},
                outsidetextfont={"color": "#6b6b6b"},
                customdata=hover,  # 5.3:1 on white
                hovertemplate="%{fullData.name}, %{x}:<br>%{customdata}<extra></extra>",
            )
        )
    first = effects.iloc[0] if len(effects) else None
    title = "Fabric effects"
    if first is not None:
        title += (
            f": {size_label(int(first['size_bytes']))} per GPU, "
            f"{int(first['n_gpus']):,} GPUs, {first['placement']} placement"
        )
    return figure_layout(
        fig,
        title,
        barmode="group",
        height=440,
        yaxis_title="bus bandwidth (GB/s)",
        legend={"orientation": "h", "y": -0.15},
        uniformtext_minsize=10,
    )


def auto_summary_text(auto: Sequence[CollectiveTime]) -> str:
    """Describe ``auto``'s choices in words: each (algorithm, protocol) and where it starts."""
    if not auto:
        return ""
    starts = [auto[0]] + [
        b for a, b in itertools.pairwise(auto) if (a.algo, a.proto) != (b.algo, b.proto)
    ]
    steps = ", ".join(f"{r.algo}/{r.proto} from {size_label(r.size_bytes)}" for r in starts)
    switches = auto_crossovers(auto)
    algo_part = (
        "; it changes algorithm at "
        + ", ".join(f"{size_label(size)} ({old} → {new})" for size, old, new in switches)
        if switches
        else f"; it keeps {auto[0].algo} at every size"
    )
    return f"auto picks {steps}{algo_part}."


def auto_pick_text(auto: Sequence[CollectiveTime], size_bytes: int) -> str:
    """Say what ``auto`` picks at one size, with its time and bus bandwidth."""
    row = next((r for r in auto if r.size_bytes == size_bytes), None)
    if row is None:
        return ""
    return (
        f"At {size_label(size_bytes)}, auto picks **{row.algo} / {row.proto}**: "
        f"{row.time_us:,.1f} us, bus bandwidth {row.busbw_GBps:,.1f} GB/s "
        f"(bottleneck: {row.bottleneck})."
    )


def fabric_effects_notes(effects: pd.DataFrame) -> str:
    """List, in one markdown message, the vendor/case pairs the model cannot compute and why."""
    bad = effects[effects["reason"] != ""]
    if bad.empty:
        return ""
    items = "\n".join(
        f"- **{VENDOR_LABELS.get(v, v)}**, {_EFFECT_CASE_LABELS.get((o, a), f'{o} {a}')}: {why}"
        for v, o, a, why in zip(bad["vendor"], bad["op"], bad["algo"], bad["reason"], strict=True)
    )
    return "Not computed:\n" + items


def busbw_curve_figure(rows: Sequence[Any], title: str) -> go.Figure:
    """Bus bandwidth vs message size (log-log), hover naming the chosen algorithm/protocol."""
    from fabric_model.units import format_size_bytes

    x = [r.size_bytes for r in rows]
    fig = go.Figure(
        go.Scatter(
            x=x,
            y=[r.busbw_GBps for r in rows],
            mode="lines+markers",
            line={"color": VENDOR_COLORS["infiniband"], "width": 3},
            customdata=[
                [format_size_bytes(r.size_bytes), r.time_us, r.algbw_GBps, f"{r.algo}/{r.proto}"]
                for r in rows
            ],
            hovertemplate=(
                "%{customdata[0]}: busbw %{y:,.1f} GB/s, algbw %{customdata[2]:,.1f} "
                "GB/s, %{customdata[1]:,.1f} us (%{customdata[3]})<extra></extra>"
            ),
            name="bus bandwidth",
        )
    )
    return figure_layout(
        fig,
        title,
        height=380,
        xaxis={"type": "log", "title": "message size (bytes)", **size_ticks(x)},
        yaxis={"type": "log", "title": "bus bandwidth (GB/s)"},
    )
