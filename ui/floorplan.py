"""The floor plan and the three networks on the Cost page: figures (pure) and one section.

``floorplan_figure`` draws the hall in plan view (racks to scale, coloured by kind, hover with
the rack's row and power); ``network_split_frame`` is the compute / storage / management
split of capex and power; ``site_section`` puts both on a page with the power-density
warning (``st.warning`` when a rack is above the air limit and the design assumes air).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from fabric_model.plant.cost import BillOfMaterials
from fabric_model.plant.floorplan import (
    FloorPlan,
    facility_value,
    halls_text,
    rack_positions,
    verdict_text,
)
from ui.theme import BASE_LAYOUT, OKABE_ITO

__all__ = [
    "NETWORK_COLORS",
    "NETWORK_LABELS",
    "RACK_COLORS",
    "floorplan_figure",
    "network_split_frame",
    "other_networks_frame",
    "site_section",
]

#: One colour per network (the compute fabric's categories keep their own colours).
NETWORK_COLORS = {"storage": OKABE_ITO["purple"], "management": OKABE_ITO["yellow"]}
NETWORK_LABELS = {
    "compute": "compute fabric",
    "storage": "storage network",
    "management": "management network",
}
#: Rack fills: compute racks within / above the air limit, network racks.
RACK_COLORS = {
    "compute": OKABE_ITO["sky"],
    "compute_hot": OKABE_ITO["vermillion"],
    "network": OKABE_ITO["blue"],
}


def _outline(x: np.ndarray, y: np.ndarray, w: float, d: float) -> tuple[list[Any], list[Any]]:
    """Return closed rectangles around centres, joined with gaps (one trace draws them all)."""
    xs: list[Any] = []
    ys: list[Any] = []
    for cx, cy in zip(x.tolist(), y.tolist(), strict=True):
        x0, x1, y0, y1 = cx - w / 2, cx + w / 2, cy - d / 2, cy + d / 2
        xs += [x0, x1, x1, x0, x0, None]
        ys += [y0, y0, y1, y1, y0, None]
    return xs, ys


def floorplan_figure(plan: FloorPlan) -> go.Figure:
    """Draw the hall: every rack to scale (m), compute and network racks, aisles between rows.

    Compute racks above ``facility.air_limit_kw_per_rack`` on air are drawn in vermillion.
    """
    lay = plan.layout
    pos = rack_positions(lay)
    depth = facility_value("rack", "depth_m")
    hot = lay.cooling == "air" and plan.compute_rack_kw > plan.air_limit_kw
    fig = go.Figure()
    kinds = (
        ("compute_hot" if hot else "compute", 0, "compute", plan.compute_rack_kw),
        ("network", 1, "network", plan.network_rack_kw),
    )
    for color_key, kind, label, kw in kinds:
        sel = pos["kind"] == kind
        if not sel.any():
            continue
        x, y = pos["x_m"][sel], pos["y_m"][sel]
        xs, ys = _outline(x, y, lay.width_m * 0.92, depth)
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                fill="toself",
                line={"width": 0.5, "color": RACK_COLORS[color_key]},
                fillcolor=RACK_COLORS[color_key],
                name=f"{label} racks ({int(sel.sum()):,})",
                hoverinfo="skip",
            )
        )
        row = np.rint(y / lay.pitch_m).astype(int) + 1
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                mode="markers",
                marker={"size": 4, "opacity": 0},
                showlegend=False,
                customdata=np.stack([row, np.full(row.shape, kw)], axis=1),
                hovertemplate=f"{label} rack, row %{{customdata[0]}}<br>"
                "%{customdata[1]:,.1f} kW<br>x %{x:.1f} m, y %{y:.1f} m<extra></extra>",
            )
        )
    title = (
        f"Floor plan: {lay.n_racks:,} racks in {lay.n_rows:,} rows, "
        f"{lay.floor_area_m2:,.0f} m² — {verdict_text(plan)}"
    )
    fig.update_layout(
        **BASE_LAYOUT,
        title={"text": title, "x": 0.0, "xanchor": "left", "font": {"size": 13}},
        xaxis={"title": "along the rows (m)", "range": [0, lay.site_width_m]},
        yaxis={
            "title": "across the rows (m)",
            "range": [lay.site_depth_m, 0],
            "scaleanchor": "x",
            "scaleratio": 1,
        },
        height=min(900, max(320, 120 + 22 * lay.n_rows)),
        legend={"orientation": "h", "y": -0.12},
    )
    return fig


def network_split_frame(bom: BillOfMaterials) -> pd.DataFrame:
    """One row per network: capex, its share, IT power and switches."""
    capex, power = bom.capex_by_network_usd, bom.power_by_network_w
    total = sum(capex.values()) or 1.0
    switches = {"compute": bom.topology.n_switches, **{n.name: n.n_switches for n in bom.networks}}
    return pd.DataFrame(
        [
            {
                "network": NETWORK_LABELS.get(name, name),
                "capex_usd": round(capex[name]),
                "share_pct": round(100 * capex[name] / total, 1),
                "power_kw": round(power[name] / 1000, 1),
                "switches": switches[name],
            }
            for name in capex
        ]
    )


def other_networks_frame(bom: BillOfMaterials) -> pd.DataFrame:
    """Return the storage and management networks' lines in one table."""
    frames = [n.to_frame() for n in bom.networks]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def site_section(bom: BillOfMaterials) -> None:
    """Racks, power and cooling, then the storage and management networks (Cost page)."""
    import streamlit as st

    from ui.widgets import chart

    plan = bom.floorplan
    if plan is not None:
        lay = plan.layout
        st.subheader("Racks, power and cooling")
        cols = st.columns(4)
        cols[0].metric(
            "Racks",
            f"{lay.n_racks:,}",
            help=f"{lay.n_compute_racks:,} compute racks of {lay.servers_per_rack} servers "
            f"and {lay.n_network_racks:,} network racks, in {lay.n_rows:,} rows",
        )
        cols[1].metric(
            "kW per compute rack",
            f"{plan.compute_rack_kw:,.1f}",
            help="servers + their NICs and NIC-side transceivers + the rack's management "
            f"switch (IT load); network racks average {plan.network_rack_kw:,.1f} kW",
        )
        cols[2].metric(
            "Cooling",
            {"air": "air", "air-contained": "air, contained", "liquid": "liquid"}[plan.verdict],
            help=verdict_text(plan),
        )
        cols[3].metric(
            "Floor area",
            f"{lay.floor_area_m2:,.0f} m²",
            help=f"{halls_text(lay)}: racks, aisles and end aisles",
        )
        for w in plan.warnings:
            st.warning(w)
        st.caption(
            "; ".join(
                [verdict_text(plan)]
                + [n for n in plan.notes if "typical air-cooled" not in n]
                + [
                    "cable lengths from the floor plan: "
                    + (", ".join(f"{k} {v:g} m" for k, v in plan.lengths_m.items()) or "none")
                ]
            )
        )
        if st.toggle(
            "Show the floor plan",
            key="cost_floorplan",
            help="the hall in plan view, every rack to scale",
        ):
            chart(floorplan_figure(plan), key="floorplan_chart", name="cost floorplan")
    if bom.networks:
        st.subheader("Compute, storage and management networks")
        st.caption(
            "The headline figures and the charts' categories are the compute fabric's; the "
            "storage and management networks are Ethernet whatever the compute vendor "
            "(storage.*, management.* keys)."
        )
        st.dataframe(network_split_frame(bom), hide_index=True, width="stretch")
        st.dataframe(other_networks_frame(bom), hide_index=True, width="stretch")
