"""Cost figures: capex, power and TCO per vendor, and the vendor comparison table.

Pure builders over ``fabric_model.plant.cost.compare_vendors`` results; the table's numbers come
from ``fabric_model.report.summaries.vendor_rows`` (the command line's ``bom --compare`` reads the
same rows).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from fabric_model.plant.cost import CATEGORIES, BillOfMaterials, VendorComparison
from fabric_model.report.summaries import vendor_rows
from ui.figure_base import figure_layout
from ui.floorplan import NETWORK_COLORS, NETWORK_LABELS
from ui.theme import CATEGORY_COLORS, TOPOLOGY_COLORS, TOPOLOGY_LABELS, VENDOR_LABELS

__all__ = [
    "FAMILY_FIGURES",
    "family_compare_figure",
    "vendor_capex_figure",
    "vendor_power_figure",
    "vendor_summary_frame",
    "vendor_tco_figure",
]


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
    return figure_layout(
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
    return figure_layout(
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
    for c, r in zip(comparisons, vendor_rows(comparisons), strict=True):
        label = VENDOR_LABELS.get(r.vendor, r.vendor)
        if not r.ok:
            rows.append({"vendor": label, "note": c.error})
            continue
        rows.append(
            {
                "vendor": label,
                "switch": r.switch_name,
                "radix": r.radix,
                "pod_nics": r.pod_nics,
                "limit": r.limit,
                "nic": r.nic_name,
                "tiers": r.tiers,
                "switches": r.n_switches,
                "transceivers": r.n_transceivers,
                "capex_usd": round(r.capex_usd),
                "capex_per_gpu_usd": round(r.capex_per_gpu_usd),
                "power_kw": round(r.power_kw, 1),
                "power_per_gpu_w": round(r.power_per_gpu_w, 1),
                "network_share_pct": round(100 * r.network_share, 1),
                "tco_usd": round(r.tco_usd),
                "note": "",
            }
        )
    return pd.DataFrame(rows)


#: The compared figures: column -> (label, unit, higher is better).
FAMILY_FIGURES: dict[str, tuple[str, str, bool]] = {
    "capex_usd": ("network capex", "USD", False),
    "power_w": ("network power", "W", False),
    "allreduce_busbw_GBps": ("all-reduce busbw, 1 GiB", "GB/s", True),
    "alltoall_busbw_GBps": ("all-to-all busbw, 1 GiB", "GB/s", True),
    "dense_tokens_per_s_per_musd": ("dense tokens/s per $M of cluster", "", True),
    "moe_tokens_per_s_per_musd": ("MoE tokens/s per $M of cluster", "", True),
}


def family_compare_figure(frame: pd.DataFrame) -> go.Figure:
    """Bars per figure, one per family, each relative to the fat-tree's (1 = the fat-tree)."""
    fig = go.Figure()
    base = frame.set_index("family")
    ref = base.loc["fat-tree"] if "fat-tree" in base.index else base.iloc[0]
    labels = [FAMILY_FIGURES[c][0] for c in FAMILY_FIGURES]
    for fam, row in base.iterrows():
        ys, texts = [], []
        for col in FAMILY_FIGURES:
            value, against = float(row[col]), float(ref[col])
            ok = math.isfinite(value) and math.isfinite(against) and against > 0
            ys.append(value / against if ok else None)
            texts.append(f"{value:,.4g}" if math.isfinite(value) else "cannot")
        fig.add_trace(
            go.Bar(
                name=TOPOLOGY_LABELS.get(str(fam), str(fam)),
                x=labels,
                y=ys,
                marker_color=TOPOLOGY_COLORS.get(str(fam)),
                customdata=texts,
                hovertemplate="%{x}: %{y:.2f} x the fat-tree (%{customdata})<extra>%{fullData.name}"
                "</extra>",
            )
        )
    fig.add_hline(y=1.0, line_dash="dot", line_color="rgba(127,127,127,0.8)")
    figure_layout(
        fig,
        title="The same GPUs on each fabric, relative to the fat-tree",
        xaxis_title="",
        yaxis_title="relative to the fat-tree (x)",
    )
    fig.update_layout(barmode="group")
    return fig
