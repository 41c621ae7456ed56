"""Pure figure builders: model results in, ``plotly.graph_objects.Figure`` out.

No streamlit here, so every figure is testable on its own and reusable in the HTML report.
"""

from __future__ import annotations

import itertools
import math
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from fabric_model.collectives import AlgoModel, CollectiveTime
from fabric_model.cost import CATEGORIES, BillOfMaterials, VendorComparison
from fabric_model.topology import Topology
from ui.floorplan import NETWORK_COLORS, NETWORK_LABELS
from ui.theme import (
    ALGO_COLORS,
    ALGO_LABELS,
    AUTO_HALO_COLOR,
    BASE_LAYOUT,
    CATEGORY_COLORS,
    OKABE_ITO,
    OP_LABELS,
    TIER_COLORS,
    TOPOLOGY_LABELS,
    VENDOR_COLORS,
    VENDOR_LABELS,
)

__all__ = [
    "MAX_GROUPS_PER_ROW",
    "auto_crossovers",
    "auto_pick_text",
    "auto_summary_text",
    "collective_breakdown_figure",
    "collective_breakdown_frame",
    "collective_busbw_figure",
    "collective_curve_frame",
    "fabric_effects_figure",
    "fabric_effects_notes",
    "hop_histogram_figure",
    "size_label",
    "topology_counts_frame",
    "topology_figure",
    "unavailable_text",
    "validation_busbw_figure",
    "validation_frame",
    "validation_ratio_figure",
    "vendor_capex_figure",
    "vendor_power_figure",
    "vendor_summary_frame",
    "vendor_tco_figure",
]

#: Above this many boxes in a row, the diagram aggregates contiguous switches/servers.
MAX_GROUPS_PER_ROW = 32
_ROW_NAMES = {0: "servers", 1: "leaf", 2: "spine", 3: "core"}


def _layout(fig: go.Figure, title: str, **kw: Any) -> go.Figure:
    fig.update_layout(**BASE_LAYOUT, title={"text": title, "x": 0.0, "xanchor": "left"}, **kw)
    return fig


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
    _layout(
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
    return _layout(
        fig,
        f"GPU pairs by {unit}",
        xaxis_title=unit,
        yaxis_title="share of GPU pairs across NVLink domains (%)",
        height=380,
    )


def _ok(comparisons: Sequence[VendorComparison]) -> list[tuple[str, BillOfMaterials]]:
    return [(c.vendor, c.bom) for c in comparisons if c.bom is not None]


def _stacked(
    comparisons: Sequence[VendorComparison],
    values: str,
    scale: float,
    title: str,
    unit: str,
    per_gpu: bool,
) -> go.Figure:
    fig = go.Figure()
    ok = _ok(comparisons)
    names = [VENDOR_LABELS.get(v, v) for v, _ in ok]
    for cat in CATEGORIES:
        ys = []
        for _, bom in ok:
            total = getattr(bom, values)[cat]
            ys.append(total / (bom.n_gpus if per_gpu else 1) / scale)
        fig.add_trace(
            go.Bar(
                name=cat,
                x=names,
                y=ys,
                marker_color=CATEGORY_COLORS[cat],
                hovertemplate=f"%{{x}} {cat}: %{{y:,.2f}} {unit}<extra></extra>",
            )
        )
    # the storage and management networks on top of the compute fabric's categories
    by_network = (
        "capex_by_network_usd" if values == "capex_by_category_usd" else "power_by_network_w"
    )
    others: dict[str, list[float]] = {}
    for net in NETWORK_COLORS:
        ys = [
            getattr(bom, by_network).get(net, 0.0) / (bom.n_gpus if per_gpu else 1) / scale
            for _, bom in ok
        ]
        if any(ys):
            others[net] = ys
            fig.add_trace(
                go.Bar(
                    name=NETWORK_LABELS[net],
                    x=names,
                    y=ys,
                    marker_color=NETWORK_COLORS[net],
                    marker_pattern_shape="/",
                    hovertemplate=f"%{{x}} {NETWORK_LABELS[net]}: %{{y:,.2f}} {unit}"
                    "<extra></extra>",
                )
            )
    totals = [
        sum(getattr(b, values).values()) / (b.n_gpus if per_gpu else 1) / scale
        + sum(ys[i] for ys in others.values())
        for i, (_, b) in enumerate(ok)
    ]
    fig.add_trace(
        go.Scatter(
            x=names,
            y=totals,
            mode="text",
            text=[f"{t:,.2f}" for t in totals],
            textposition="top center",
            showlegend=False,
            hoverinfo="skip",
        )
    )
    return _layout(
        fig,
        title,
        barmode="stack",
        yaxis_title=unit,
        height=420,
        legend={"orientation": "h", "y": -0.15},
    )


def vendor_capex_figure(
    comparisons: Sequence[VendorComparison], per_gpu: bool = False
) -> go.Figure:
    """Stacked network capex by category, one bar per vendor."""
    if per_gpu:
        return _stacked(
            comparisons,
            "capex_by_category_usd",
            1.0,
            "Network capex per GPU by category",
            "USD per GPU",
            True,
        )
    return _stacked(
        comparisons, "capex_by_category_usd", 1e6, "Network capex by category", "million USD", False
    )


def vendor_power_figure(
    comparisons: Sequence[VendorComparison], per_gpu: bool = False
) -> go.Figure:
    """Stacked network power by category, one bar per vendor."""
    if per_gpu:
        return _stacked(
            comparisons,
            "power_by_category_w",
            1.0,
            "Network power per GPU by category",
            "W per GPU",
            True,
        )
    return _stacked(
        comparisons, "power_by_category_w", 1e3, "Network power by category (IT load)", "kW", False
    )


def vendor_tco_figure(comparisons: Sequence[VendorComparison]) -> go.Figure:
    """Network TCO per vendor: capex plus electricity over the horizon."""
    ok = _ok(comparisons)
    names = [VENDOR_LABELS.get(v, v) for v, _ in ok]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            name="capex",
            x=names,
            y=[b.capex_usd / 1e6 for _, b in ok],
            marker_color=CATEGORY_COLORS["switches"],
            hovertemplate="%{x} capex: %{y:,.2f} M USD<extra></extra>",
        )
    )
    fig.add_trace(
        go.Bar(
            name="electricity (x PUE)",
            x=names,
            y=[b.energy_usd() / 1e6 for _, b in ok],
            marker_color=CATEGORY_COLORS["nics"],
            hovertemplate="%{x} energy: %{y:,.2f} M USD<extra></extra>",
        )
    )
    years = ok[0][1].costs.years if ok else 0
    return _layout(
        fig,
        f"Network TCO over {years:g} years",
        barmode="stack",
        yaxis_title="million USD",
        height=420,
        legend={"orientation": "h", "y": -0.15},
    )


def vendor_summary_frame(comparisons: Sequence[VendorComparison]) -> pd.DataFrame:
    """One row per vendor: parts, counts, capex, power, per-GPU figures, share, TCO."""
    rows: list[dict[str, Any]] = []
    for c in comparisons:
        if c.bom is None:
            rows.append({"vendor": VENDOR_LABELS.get(c.vendor, c.vendor), "note": c.error})
            continue
        b = c.bom
        rows.append(
            {
                "vendor": VENDOR_LABELS.get(c.vendor, c.vendor),
                "switch": b.hardware.switch.name,
                "radix": b.hardware.radix,
                "nic": b.hardware.nic.name,
                "tiers": b.topology.tiers,
                "switches": b.topology.n_switches,
                "transceivers": b.n_transceivers,
                "capex_usd": round(b.capex_usd),
                "capex_per_gpu_usd": round(b.capex_per_gpu_usd),
                "power_kw": round(b.power_w / 1000, 1),
                "power_per_gpu_w": round(b.power_per_gpu_w, 1),
                "network_share_pct": round(100 * b.network_share, 1),
                "tco_usd": round(b.tco_usd),
                "note": "",
            }
        )
    return pd.DataFrame(rows)


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


# --------------------------------------------------------------------------- collectives

_BINARY_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))
#: Marker symbol per NCCL protocol on the ``auto`` markers.
_PROTO_SYMBOLS = {"LL": "circle", "LL128": "diamond", "Simple": "square"}


def size_label(n_bytes: int) -> str:
    """Format a message size with a binary suffix: ``8 B``, ``1 KiB``, ``16 GiB``."""
    for unit, mult in _BINARY_UNITS:
        if n_bytes >= mult:
            value = n_bytes / mult
            return f"{value:g} {unit}" if value == int(value) else f"{value:.3g} {unit}"
    return f"{n_bytes:g} B"


def _rgba(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


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
                    fillcolor=_rgba(color, 0.22),
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
    _layout(
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
    return _layout(
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
                "nvlink_busbw_GBps": m.intra_Bps / 1e9 if m is not None else None,
                "network_busbw_GBps": inter,
            }
        )
    return pd.DataFrame(out)


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
    return _layout(
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
    return _layout(
        fig,
        title,
        height=380,
        xaxis={"type": "log", "title": "message size (bytes)", **_size_ticks(x)},
        yaxis={"type": "log", "title": "bus bandwidth (GB/s)"},
    )


# --------------------------------------------------------------------------- validate
def _size_ticks(sizes: Sequence[int], max_ticks: int = 12) -> dict[str, Any]:
    """Tick values at powers of two spanning ``sizes``, labelled with binary suffixes."""
    positive = [s for s in sizes if s > 0] or [1]
    lo = math.floor(math.log2(min(positive)))
    hi = math.ceil(math.log2(max(positive)))
    step = max(1, math.ceil((hi - lo + 1) / max_ticks))
    vals = [2**i for i in range(lo, hi + 1, step)]
    return {"tickvals": vals, "ticktext": [size_label(v) for v in vals]}


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
            fillcolor=_rgba(color, 0.18),
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
    return _layout(
        fig,
        title,
        height=460,
        hovermode="closest",
        legend={"orientation": "h", "y": -0.2, "x": 0.0},
        xaxis={"type": "log", "title": "message size (bytes per GPU)", **_size_ticks(x)},
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
        fillcolor=_rgba(ALGO_COLORS["ring"], 0.15),
        line_width=0,
        layer="below",
    )
    fig.add_hline(y=1.0, line={"dash": "dot", "width": 1, "color": OKABE_ITO["grey"]})
    return _layout(
        fig,
        title,
        height=300,
        showlegend=False,
        hovermode="closest",
        xaxis={"type": "log", "title": "message size (bytes per GPU)", **_size_ticks(x)},
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
