"""Topology figures: the layered diagram, the hop histogram and the counts table.

Pure builders: ``Topology`` in, ``plotly.graph_objects.Figure`` or ``DataFrame`` out.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from fabric_model.topology import Topology
from ui.figure_base import figure_layout
from ui.theme import TIER_COLORS, TOPOLOGY_LABELS, VENDOR_COLORS

__all__ = [
    "MAX_GROUPS_PER_ROW",
    "hop_histogram_figure",
    "topology_counts_frame",
    "topology_figure",
]


#: Above this many boxes in a row, the diagram aggregates contiguous switches/servers.
MAX_GROUPS_PER_ROW = 32
_ROW_NAMES = {0: "servers", 1: "leaf", 2: "spine", 3: "core"}


def _chunks(n: int, max_groups: int) -> tuple[np.ndarray, int]:
    """Map ``0..n-1`` to contiguous groups of equal size; return (group of item, n_groups)."""
    size = 1 if n <= max_groups else math.ceil(n / max_groups)
    group = np.arange(n, dtype=np.int64) // size
    return group, int(group[-1]) + 1 if n else 0


def _group_nodes(topo: Topology, max_groups: int) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Assign every graph node to a drawn box; return (box of node, box descriptions)."""
    g = topo.graph
    req = topo.request
    box_of_node = np.empty(g.n_nodes, dtype=np.int64)
    boxes: list[dict[str, Any]] = []
    # servers: endpoints grouped by server first, then servers chunked
    n_e = req.n_endpoints
    server_of_e = np.arange(n_e, dtype=np.int64) // req.nics_per_gpu // req.gpus_per_node
    n_servers = int(server_of_e[-1]) + 1
    chunk, n_chunks = _chunks(n_servers, max_groups)
    per = math.ceil(n_servers / n_chunks)
    for c in range(n_chunks):
        lo, hi = c * per, min(n_servers, (c + 1) * per)
        label = f"server {lo}" if hi - lo == 1 else f"servers {lo}-{hi - 1}"
        boxes.append({"row": 0, "label": label, "count": hi - lo, "unit": "servers"})
    box_of_node[:n_e] = chunk[server_of_e]
    offset = n_chunks
    for tier in sorted(set(np.unique(g.node_tier).tolist()) - {0}):
        ids = np.flatnonzero(g.node_tier == tier)
        chunk, n_chunks = _chunks(ids.size, max_groups)
        per = math.ceil(ids.size / n_chunks)
        name = "node" if topo.tiers == 0 else _ROW_NAMES.get(tier, f"tier {tier}")
        for c in range(n_chunks):
            lo, hi = c * per, min(ids.size, (c + 1) * per)
            label = f"{name} {lo}" if hi - lo == 1 else f"{name}s {lo}-{hi - 1}"
            unit = "NVLink domains" if topo.tiers == 0 else "switches"
            boxes.append(
                {"row": int(tier), "label": label, "count": hi - lo, "unit": unit, "tier": name}
            )
        box_of_node[ids] = offset + chunk
        offset += n_chunks
    return box_of_node, boxes


def topology_figure(topo: Topology, max_groups: int = MAX_GROUPS_PER_ROW) -> go.Figure:
    """Layered diagram: servers at the bottom, each switch tier above, cables as lines.

    Small designs show every server and switch; larger ones draw contiguous runs of
    servers/switches (pods, groups) as one box and label each line with its cable count.
    Links inside one row (dragonfly+ global links, torus and hypercube cables) are arcs.
    """
    g = topo.graph
    box_of_node, boxes = _group_nodes(topo, max_groups)
    rows: dict[int, list[int]] = {}
    for i, b in enumerate(boxes):
        rows.setdefault(b["row"], []).append(i)
    xy = np.zeros((len(boxes), 2))
    for row, members in rows.items():
        for j, i in enumerate(members):
            xy[i] = ((j + 0.5) / len(members), row)

    a = box_of_node[g.link_src[0::2]]
    b = box_of_node[g.link_dst[0::2]]
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    keep = lo != hi
    code = lo[keep] * len(boxes) + hi[keep]
    pairs, counts = np.unique(code, return_counts=True)
    ea, eb = np.divmod(pairs, len(boxes))

    fig = go.Figure()
    max_count = counts.max() if counts.size else 1
    n_buckets = 4
    bucket = np.minimum(
        n_buckets - 1, (np.log1p(counts) / np.log1p(max_count) * n_buckets).astype(int)
    )
    mid_x, mid_y, mid_text = [], [], []
    for k in range(n_buckets):
        xs: list[float | None] = []
        ys: list[float | None] = []
        for p, q, n in zip(ea[bucket == k], eb[bucket == k], counts[bucket == k], strict=True):
            (x0, y0), (x1, y1) = xy[p], xy[q]
            if y0 == y1:  # same row: an arc above it
                t = np.linspace(0, 1, 16)
                height = 0.25 + 0.35 * abs(x1 - x0)
                xs += [*list(x0 + (x1 - x0) * t), None]
                ys += [*list(y0 + height * 4 * t * (1 - t)), None]
                mx, my = (x0 + x1) / 2, y0 + height
            else:
                xs += [x0, x1, None]
                ys += [y0, y1, None]
                mx, my = (x0 + x1) / 2, (y0 + y1) / 2
            mid_x.append(mx)
            mid_y.append(my)
            mid_text.append(f"{boxes[p]['label']} - {boxes[q]['label']}: {n:,} cables")
        if xs:
            fig.add_trace(
                go.Scattergl(
                    x=xs,
                    y=ys,
                    mode="lines",
                    hoverinfo="skip",
                    showlegend=False,
                    line={"width": 0.6 + 1.2 * k, "color": "rgba(120,120,120,0.55)"},
                )
            )
    fig.add_trace(
        go.Scatter(
            x=mid_x,
            y=mid_y,
            mode="markers",
            marker={"size": 6, "opacity": 0},
            hovertext=mid_text,
            hoverinfo="text",
            showlegend=False,
            name="cables",
        )
    )
    for row, members in sorted(rows.items()):
        tier = boxes[members[0]].get("tier", "servers")
        color = TIER_COLORS.get(tier, TIER_COLORS["node"])
        sizes = [7 + 4 * math.log10(1 + boxes[i]["count"]) for i in members]
        fig.add_trace(
            go.Scatter(
                x=xy[members, 0],
                y=xy[members, 1],
                mode="markers",
                marker={
                    "size": sizes,
                    "color": color,
                    "symbol": "square" if row else "circle",
                    "line": {"width": 1, "color": "white"},
                },
                name=f"{tier} ({sum(boxes[i]['count'] for i in members):,} "
                f"{boxes[members[0]]['unit']})",
                hovertext=[
                    f"{boxes[i]['label']}: {boxes[i]['count']:,} {boxes[i]['unit']}"
                    for i in members
                ],
                hoverinfo="text",
            )
        )
    tick_rows = sorted(rows)
    tick_text = [
        "servers"
        if r == 0
        else ("NVLink domains" if topo.tiers == 0 else _ROW_NAMES.get(r, str(r)))
        for r in tick_rows
    ]
    aggregated = any(b["count"] > 1 for b in boxes[len(rows.get(0, [])) :]) or any(
        boxes[i]["count"] > 1 for i in rows.get(0, [])
    )
    title = (
        f"{TOPOLOGY_LABELS.get(topo.family, topo.family)}: {topo.n_gpus:,} GPUs, "
        f"{topo.n_switches:,} switches, {topo.n_links:,} cables"
        + (" (boxes aggregate runs of servers/switches)" if aggregated else "")
    )
    figure_layout(
        fig,
        title,
        height=520,
        legend={"orientation": "h", "y": -0.08},
        xaxis={"visible": False, "range": [-0.02, 1.02]},
        yaxis={
            "tickvals": tick_rows,
            "ticktext": tick_text,
            "title": "",
            "range": [-0.4, max(tick_rows) + 0.9],
            "showgrid": False,
            "zeroline": False,
        },
    )
    return fig


def hop_histogram_figure(topo: Topology) -> go.Figure:
    """Bar chart: share of GPU pairs (in different NVLink domains) by switch hops."""
    hist = dict(topo.hop_histogram)
    hops = sorted(hist)
    unit = "forwarding hops" if topo.tiers == 0 else "switch hops"
    fig = go.Figure(
        go.Bar(
            x=[str(h) for h in hops],
            y=[100 * hist[h] for h in hops],
            marker_color=VENDOR_COLORS["infiniband"],
            hovertemplate=f"%{{x}} {unit}: %{{y:.2f}}% of GPU pairs<extra></extra>",
        )
    )
    return figure_layout(
        fig,
        f"GPU pairs by {unit}",
        xaxis_title=unit,
        yaxis_title="share of GPU pairs across NVLink domains (%)",
        height=380,
    )


def topology_counts_frame(topo: Topology) -> pd.DataFrame:
    """Return the counts per switch tier and per cable class, with speed and length."""
    rows: list[dict[str, Any]] = [
        {"what": f"{tier} switches", "count": n, "detail": f"radix {topo.params.get('radix', '')}"}
        for tier, n in topo.switches_by_tier.items()
    ]
    for lc in topo.links:
        rows.append(
            {
                "what": f"{lc.name} cables",
                "count": lc.n_links,
                "detail": f"{lc.link_gbps}G, {lc.length_m:g} m",
            }
        )
    rows.append(
        {
            "what": "NIC ports",
            "count": topo.n_endpoints,
            "detail": f"{topo.request.nics_per_gpu} per GPU",
        }
    )
    rows.append(
        {
            "what": "bisection",
            "count": round(topo.bisection_GBps),
            "detail": f"GB/s ({topo.bisection_GBps / topo.full_bisection_GBps:.0%} of "
            f"non-blocking)",
        }
    )
    return pd.DataFrame(rows)
