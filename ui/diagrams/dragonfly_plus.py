"""Dragonfly+: groups around a circle, the global links between two groups as one chord."""

from __future__ import annotations

import math

import numpy as np

from fabric_model.topology import Topology
from ui.diagrams.base import (
    CLASS_COLORS,
    MAX_LABELS,
    MAX_UNITS,
    Box,
    Bundle,
    Sketch,
    _cables,
    _chunk,
    _line,
    _pairs,
    _plural,
    _run_label,
    _title,
)
from ui.theme import OKABE_ITO, TIER_COLORS

# --------------------------------------------------------------------------------------
# dragonfly+
# --------------------------------------------------------------------------------------


def _bezier(
    p0: tuple[float, float], p1: tuple[float, float], ctrl: tuple[float, float], n: int = 14
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    t = np.linspace(0.0, 1.0, n)
    x = (1 - t) ** 2 * p0[0] + 2 * (1 - t) * t * ctrl[0] + t**2 * p1[0]
    y = (1 - t) ** 2 * p0[1] + 2 * (1 - t) * t * ctrl[1] + t**2 * p1[1]
    return tuple(float(v) for v in x), tuple(float(v) for v in y)


def _dragonfly_plus(topo: Topology) -> Sketch:
    req, p = topo.request, topo.params
    g = topo.graph
    n_e = req.n_endpoints
    lo, hi, cls = _cables(topo)
    tier = g.node_tier.astype(np.int64)
    n_leaves, a_per = int(p["n_leaves"]), int(p["leaves_per_group"])
    spg, n_groups = int(p["spines_per_group"]), int(p["n_groups"])
    group_of_node = np.zeros(g.n_nodes, dtype=np.int64)
    leaf_idx = np.flatnonzero(tier == 1)
    spine_idx = np.flatnonzero(tier == 2)
    group_of_node[leaf_idx] = (leaf_idx - n_e) // a_per
    group_of_node[spine_idx] = (spine_idx - n_e - n_leaves) // spg
    nl = cls == 0
    group_of_node[lo[nl]] = group_of_node[hi[nl]]
    unit_of_node, n_units, run = _chunk(group_of_node, n_groups, MAX_UNITS)
    names = [_run_label("group", u, run, n_groups) for u in range(n_units)]

    angle = np.pi / 2 - 2 * np.pi * np.arange(n_units) / max(1, n_units)
    radius = 1.0
    half = min(0.2, 0.9 * math.sin(math.pi / max(2, n_units))) if n_units > 1 else 0.3
    cx, cy = radius * np.cos(angle), radius * np.sin(angle)
    inner = (radius - half * 1.15) / radius  # chords start at the unit's inner edge
    boxes: list[Box] = []
    bundles: list[Bundle] = []
    leaves_in = np.bincount(unit_of_node[leaf_idx], minlength=n_units)
    spines_in = np.bincount(unit_of_node[spine_idx], minlength=n_units)
    nics_in = np.bincount(unit_of_node[:n_e], minlength=n_units)
    internal: dict[int, list[str]] = {u: [] for u in range(n_units)}
    for ci, lc in enumerate(topo.links):
        sel = cls == ci
        ua, ub = unit_of_node[lo[sel]], unit_of_node[hi[sel]]
        swap = ua > ub
        ua, ub = np.where(swap, ub, ua), np.where(swap, ua, ub)
        pairs, counts = _pairs(ua, ub, n_units)
        color = CLASS_COLORS.get(lc.name, OKABE_ITO["grey"])
        n_chords = int(np.sum(pairs[:, 0] != pairs[:, 1]))
        for (u, v), n in zip(pairs, counts, strict=True):
            if u == v:
                internal[int(u)].append(f"{int(n):,} {lc.name} cables")
                # drawn inside the unit: servers -> leaves -> spines, bottom to top
                y0, y1 = {
                    "nic-leaf": (-0.55, -0.1),
                    "leaf-spine": (0.1, 0.55),
                }.get(lc.name, (0.6, 0.95))
                xs, ys = _line(cx[u], cy[u] + y0 * half, cx[u], cy[u] + y1 * half)
                bundles.append(
                    Bundle(
                        lc.name,
                        int(n),
                        names[u],
                        names[u],
                        xs,
                        ys,
                        color,
                        label=False,
                    )
                )
                continue
            # each chord leaves its unit's inner edge a little towards the other end
            du = np.array([cx[v] - cx[u], cy[v] - cy[u]])
            dv = -du
            du, dv = du / np.hypot(*du), dv / np.hypot(*dv)
            fan = 0.45 * half
            p0 = (float(cx[u] * inner + fan * du[0]), float(cy[u] * inner + fan * du[1]))
            p1 = (float(cx[v] * inner + fan * dv[0]), float(cy[v] * inner + fan * dv[1]))
            mid = ((p0[0] + p1[0]) * 0.25, (p0[1] + p1[1]) * 0.25)
            xs, ys = _bezier(p0, p1, mid)
            bundles.append(
                Bundle(
                    lc.name,
                    int(n),
                    names[u],
                    names[v],
                    xs,
                    ys,
                    color,
                    hover_at=0.5 if n_chords <= MAX_LABELS else 0.35,
                )
            )
    for u in range(n_units):
        hover = (
            f"{names[u]}: {int(nics_in[u]):,} NIC ports, {int(leaves_in[u]):,} leaves, "
            f"{int(spines_in[u]):,} spines"
            + (f"<br>inside: {', '.join(internal[u])}" if internal[u] else "")
        )
        x0, x1 = cx[u] - half * 0.8, cx[u] + half * 0.8
        boxes += [
            Box(x0, cy[u] - half, x1, cy[u] + half, "rgba(0,0,0,0)", hover=hover),
            Box(
                x0 + half * 0.1,
                cy[u] + 0.55 * half,
                x1 - half * 0.1,
                cy[u] + 0.85 * half,
                TIER_COLORS["spine"],
                line="rgba(0,0,0,0)",
                hover=hover,
            ),
            Box(
                x0 + half * 0.1,
                cy[u] - 0.1 * half,
                x1 - half * 0.1,
                cy[u] + 0.1 * half,
                TIER_COLORS["leaf"],
                line="rgba(0,0,0,0)",
                hover=hover,
            ),
            Box(
                x0 + half * 0.1,
                cy[u] - 0.85 * half,
                x1 - half * 0.1,
                cy[u] - 0.55 * half,
                "rgba(153,153,153,0.5)",
                line="rgba(0,0,0,0)",
                hover=hover,
            ),
        ]
        lx, ly = cx[u] * (1 + 1.55 * half), cy[u] * (1 + 1.55 * half)
        boxes.append(
            Box(
                lx,
                ly,
                lx,
                ly,
                "rgba(0,0,0,0)",
                line="rgba(0,0,0,0)",
                text=names[u].replace(" (x", "<br>(x").replace("group ", ""),
                text_at="inside",
            )
        )
    m = int(p.get("global_links_per_group_pair", 0))
    sub = (
        f"{_plural(n_groups, 'group')} of up to {a_per} leaves, {int(p['up_per_leaf'])} spines and "
        f"{int(p['hosts_per_group']):,} NIC ports (each box: spines, leaves, servers)"
    )
    if n_groups > 1:
        sub += f"; {m:,} global cables per group pair, one chord per pair"
        if run > 1:
            sub += f" of units ({run} groups per unit)"
    lim = radius * (1 + 2.1 * half) + 0.05
    return Sketch(
        title=_title(topo, ""),
        subtitle=sub,
        boxes=boxes,
        bundles=bundles,
        legend=[
            ("spines", TIER_COLORS["spine"]),
            ("leaves", TIER_COLORS["leaf"]),
            ("global links", CLASS_COLORS["global"]),
        ],
        equal_aspect=True,
        height=680,
        x_range=(-lim, lim),
        y_range=(-lim, lim),
        summary_at={"global": (-lim, -lim + 0.1, "left")},
    )
