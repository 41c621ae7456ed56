"""The plotly figure of a sketch: boxes, bundles, labels and hover text."""

from __future__ import annotations

import itertools
import math
import textwrap
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from fabric_model.topology import Topology
from ui.diagrams.base import _WIDTHS, MAX_LABELS, Box, Bundle, CableInfo, _short
from ui.diagrams.styles import sketch
from ui.theme import BASE_LAYOUT, OKABE_ITO

# --------------------------------------------------------------------------------------
# the figure
# --------------------------------------------------------------------------------------


def _point_along(
    xs: Sequence[float | None], ys: Sequence[float | None], f: float
) -> tuple[float, float]:
    """Point a fraction ``f`` along the drawn pieces of a path (by length)."""
    pts = [(x, y) for x, y in zip(xs, ys, strict=True)]
    segs = []
    for (x0, y0), (x1, y1) in itertools.pairwise(pts):
        if x0 is None or x1 is None or y0 is None or y1 is None:
            continue
        segs.append((x0, y0, x1, y1, math.hypot(x1 - x0, y1 - y0)))
    total = sum(s[4] for s in segs)
    if not segs or total == 0:
        x, y = next((x, y) for x, y in pts if x is not None and y is not None)
        return float(x), float(y)
    target = f * total
    for x0, y0, x1, y1, length in segs:
        if target <= length:
            t = target / length if length else 0.0
            return x0 + t * (x1 - x0), y0 + t * (y1 - y0)
        target -= length
    x0, y0, x1, y1, _ = segs[-1]
    return x1, y1


def _labels(
    labelled: Mapping[str, list[tuple[float, float, Bundle]]],
) -> tuple[list[float], list[float], list[str], dict[str, tuple[float, float, str]]]:
    """Count labels: one per bundle, or one summary per crowded link class.

    A class with more than :data:`MAX_LABELS` labelled bundles gets one label at their
    centre, ``"64 bundles x 16"`` when every bundle has the same count, else the range.
    """
    lx: list[float] = []
    ly: list[float] = []
    lt: list[str] = []
    summary: dict[str, tuple[float, float, str]] = {}
    for link_class, items in labelled.items():
        if len(items) <= MAX_LABELS:
            for x, y, b in items:
                lx.append(x)
                ly.append(y)
                lt.append(_short(b.n_cables))
            continue
        ns = [b.n_cables for _, _, b in items]
        each = f"{ns[0]:,}" if min(ns) == max(ns) else f"{min(ns):,}-{max(ns):,}"
        summary[link_class] = (
            float(np.mean([x for x, _, _ in items])),
            float(np.mean([y for _, y, _ in items])),
            f"{link_class}: {len(ns):,} bundles x {each} cables",
        )
    return lx, ly, lt, summary


def _hover(b: Bundle, planes: int, info: Mapping[str, CableInfo] | None, length: float) -> str:
    ends = b.a if b.a == b.b else f"{b.a} - {b.b}"
    text = f"<b>{ends}</b><br>{b.n_cables:,} {b.unit} ({b.link_class})"
    if planes > 1:
        text += f" in this plane; {b.n_cables * planes:,} over the {planes} planes"
    ci = info.get(b.link_class) if info else None
    if ci is not None:
        text += f"<br>media: {ci.media}<br>length: {ci.length_m:g} m"
    else:
        text += f"<br>length: {length:g} m (media: see the bill of materials)"
    return text


def topology_diagram(topo: Topology, cables: Mapping[str, CableInfo] | None = None) -> go.Figure:
    """Draw ``topo`` in its family's style, at any scale.

    Parameters
    ----------
    topo
        The design (with ``fabric.planes > 1``, one plane is drawn; the title says so).
    cables
        Media and length per link class from the bill of materials (:func:`cable_info`);
        without it the hover gives the topology's lengths only.

    Returns
    -------
    go.Figure
        Boxes for switch groups, servers and racks; one line per bundle of cables (width by
        cable count, the count as its label); hover on a bundle for its cables, media and
        length. The number of traces does not grow with the design.
    """
    s = sketch(topo)
    lengths = {lc.name: float(lc.length_m) for lc in topo.links}
    fig = go.Figure()

    # boxes: one filled trace per fill colour, then the frames' outlines
    by_fill: dict[tuple[str, str], list[Box]] = {}
    for box in s.boxes:
        by_fill.setdefault((box.fill, box.line), []).append(box)
    for (fill, line), boxes in by_fill.items():
        xs: list[float | None] = []
        ys: list[float | None] = []
        for box in boxes:
            if box.x0 == box.x1 and box.y0 == box.y1:
                continue
            xs += [box.x0, box.x1, box.x1, box.x0, box.x0, None]
            ys += [box.y0, box.y0, box.y1, box.y1, box.y0, None]
        if xs:
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="lines",
                    fill="toself",
                    fillcolor=fill,
                    line={"color": line, "width": 1},
                    hoverinfo="skip",
                    showlegend=False,
                )
            )
    stripes_x: list[float | None] = []
    stripes_y: list[float | None] = []
    for box in s.boxes:
        for i in range(1, box.stripes):
            y = box.y0 + (box.y1 - box.y0) * i / box.stripes
            inset = (box.x1 - box.x0) * 0.12
            stripes_x += [box.x0 + inset, box.x1 - inset, None]
            stripes_y += [y, y, None]
    if stripes_x:
        fig.add_trace(
            go.Scatter(
                x=stripes_x,
                y=stripes_y,
                mode="lines",
                line={"color": OKABE_ITO["green"], "width": 1},
                hoverinfo="skip",
                showlegend=False,
            )
        )

    # bundles: one trace per (colour, width level, dash); hover and count labels apart
    counts = [b.n_cables for b in s.bundles if b.xs]
    top = max(counts) if counts else 1
    by_style: dict[tuple[str, int, str], list[Bundle]] = {}
    crowded: dict[str, int] = {}
    for b in s.bundles:
        if b.xs:
            crowded[b.link_class] = crowded.get(b.link_class, 0) + 1
    for b in s.bundles:
        if b.xs:
            level = min(len(_WIDTHS) - 1, int(len(_WIDTHS) * b.n_cables / top - 1e-9))
            if crowded[b.link_class] > MAX_LABELS:  # a mesh of many bundles: thin lines
                level = min(level, 1)
            by_style.setdefault((b.color, level, b.dash), []).append(b)
    for (color, level, dash), group in by_style.items():
        xs, ys = [], []
        for b in group:
            xs += [*b.xs, None]
            ys += [*b.ys, None]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                line={"color": color, "width": _WIDTHS[level], "dash": dash},
                opacity=0.7 if len(group) > MAX_LABELS else 0.85,
                hoverinfo="skip",
                showlegend=False,
            )
        )
    hx, hy, htext = [], [], []
    labelled: dict[str, list[tuple[float, float, Bundle]]] = {}
    for b in s.bundles:
        if not b.xs:
            continue
        x, y = _point_along(b.xs, b.ys, b.hover_at)
        hx.append(x)
        hy.append(y)
        htext.append(_hover(b, topo.planes, cables, lengths.get(b.link_class, 0.0)))
        if b.label:
            labelled.setdefault(b.link_class, []).append((x, y, b))
    fig.add_trace(
        go.Scatter(
            x=hx,
            y=hy,
            mode="markers",
            marker={"size": 10, "opacity": 0},
            hovertext=htext,
            hoverinfo="text",
            showlegend=False,
            name="cables",
        )
    )
    lx, ly, ltext, summary = _labels(labelled)
    for link_class, (x, y, text) in summary.items():
        at = s.summary_at.get(link_class)
        ax, ay, anchor = at if at is not None else (x, y, "center")
        in_margin = anchor == "right"  # left of the plot, by the row names
        fig.add_annotation(
            xref="paper" if in_margin else "x",
            x=0.0 if in_margin else ax,
            y=ay,
            xanchor=anchor,
            text=text.replace(": ", ":<br>").replace(" x ", "<br>x ") if in_margin else text,
            showarrow=False,
            font={"size": 12},
            bgcolor="rgba(128,128,128,0.35)" if at is None else "rgba(0,0,0,0)",
            borderpad=3,
        )
    if lx:
        fig.add_trace(
            go.Scatter(
                x=lx,
                y=ly,
                mode="text",
                text=ltext,
                textfont={"size": 11},
                hoverinfo="skip",
                showlegend=False,
            )
        )

    # box hovers and labels
    bx = [(box.x0 + box.x1) / 2 for box in s.boxes if box.hover]
    by = [(box.y0 + box.y1) / 2 for box in s.boxes if box.hover]
    fig.add_trace(
        go.Scatter(
            x=bx,
            y=by,
            mode="markers",
            marker={"size": 14, "opacity": 0},
            hovertext=[box.hover for box in s.boxes if box.hover],
            hoverinfo="text",
            showlegend=False,
        )
    )
    tx, ty, tt, tp = [], [], [], []
    for box in s.boxes:
        if not box.text:
            continue
        tx.append((box.x0 + box.x1) / 2)
        if box.text_at == "below":
            ty.append(min(box.y0, box.y1))
            tp.append("bottom center")
        elif box.text_at == "above":
            ty.append(max(box.y0, box.y1))
            tp.append("top center")
        else:
            ty.append((box.y0 + box.y1) / 2)
            tp.append("middle center")
        tt.append(box.text)
    if tt:
        fig.add_trace(
            go.Scatter(
                x=tx,
                y=ty,
                mode="text",
                text=tt,
                textposition=tp,
                textfont={"size": 11},
                hoverinfo="skip",
                showlegend=False,
            )
        )
    # marks (torus and hypercube nodes)
    if s.marks:
        fig.add_trace(
            go.Scatter(
                x=[m.x for m in s.marks],
                y=[m.y for m in s.marks],
                mode="markers+text" if any(m.text for m in s.marks) else "markers",
                text=[m.text for m in s.marks],
                textposition="top center",
                textfont={"size": 11},
                marker={
                    "size": [m.size for m in s.marks],
                    "color": [m.color for m in s.marks],
                    "line": {"width": 1, "color": "white"},
                },
                hovertext=[m.hover for m in s.marks],
                hoverinfo="text",
                showlegend=False,
            )
        )
    for name, color in s.legend:
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                marker={"size": 11, "color": color, "symbol": "square"},
                name=name,
                showlegend=True,
            )
        )

    sub_lines = textwrap.wrap(
        f"{s.subtitle}. A line is a bundle of cables, its width and label the count; "
        "hover for media and length.",
        160,
    )
    title = s.title + "".join(f"<br><sup>{line}</sup>" for line in sub_lines)
    yaxis: dict[str, object] = {
        "visible": bool(s.rows),
        "showgrid": False,
        "zeroline": False,
        "fixedrange": False,
    }
    if s.rows:
        yaxis |= {"tickvals": list(s.rows), "ticktext": list(s.rows.values()), "title": ""}
    if s.y_range is not None:
        yaxis["range"] = list(s.y_range)
    if s.equal_aspect:
        yaxis |= {"scaleanchor": "x", "scaleratio": 1}
    fig.update_layout(
        **{**BASE_LAYOUT, "margin": {"l": 90, "r": 20, "t": 50 + 20 * len(sub_lines), "b": 40}},
        title={"text": title, "x": 0.0, "xanchor": "left"},
        height=s.height,
        showlegend=bool(s.legend),
        legend={"orientation": "h", "y": -0.02, "yanchor": "top"},
        xaxis={"visible": False, "range": list(s.x_range), "showgrid": False},
        yaxis=yaxis,
        hovermode="closest",
    )
    return fig
