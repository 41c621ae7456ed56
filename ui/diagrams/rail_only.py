"""Rail-only fabrics: one tree per rail side by side, the NVLink domains below joining them."""

from __future__ import annotations

import numpy as np

from fabric_model.topology import Topology
from ui.diagrams.base import (
    CLASS_COLORS,
    MAX_UNITS,
    RAIL_COLORS,
    Box,
    Bundle,
    Sketch,
    _cables,
    _chunk,
    _endpoint_boxes,
    _line,
    _pairs,
    _plural,
    _rail_of_endpoint,
    _run_label,
    _title,
)
from ui.theme import OKABE_ITO

# --------------------------------------------------------------------------------------
# rail-only
# --------------------------------------------------------------------------------------


def _rail_only(topo: Topology) -> Sketch:
    req, p = topo.request, topo.params
    g = topo.graph
    n_e = req.n_endpoints
    lo, hi, cls = _cables(topo)
    tier = g.node_tier.astype(np.int64)
    unit_gpus = int(p["unit_gpus"])
    n_rails = int(p["n_rails"])
    n_ports = int(p["endpoints_per_rail"])
    e = np.arange(n_e, dtype=np.int64)
    rail_of_node = np.full(g.n_nodes, -1, dtype=np.int64)
    rail_of_node[:n_e] = _rail_of_endpoint(topo, e, unit_gpus)
    for _ in range(3):  # leaves from NICs, spines from leaves, cores from spines
        known = rail_of_node[lo] >= 0
        rail_of_node[hi[known]] = rail_of_node[lo[known]]
    dom_of_e = e // req.nics_per_gpu // unit_gpus
    n_rg = min(n_rails, 8)
    rg_of_node = np.where(rail_of_node >= 0, rail_of_node * n_rg // n_rails, 0)
    per_rg = -(-n_rails // n_rg)
    dom_unit, n_du, dom_run = _chunk(dom_of_e, n_ports, max(2, min(MAX_UNITS, 64 // n_rg)))
    unit_word = "domain" if p["rail_unit"] == "nvlink-domain" else "server"

    boxes: list[Box] = []
    bundles: list[Bundle] = []
    dslot = 1.0 / n_du
    dw = dslot * 0.8
    dcx = (np.arange(n_du) + 0.5) * dslot
    racks = req.nvlink_domain > req.gpus_per_node and unit_word == "domain"
    dom_names = [_run_label(unit_word, u, dom_run, n_ports) for u in range(n_du)]
    for u in range(n_du):
        n_dom = min(n_ports, (u + 1) * dom_run) - u * dom_run
        servers = n_dom * max(1, unit_gpus // req.gpus_per_node)
        hover = f"{dom_names[u]}: {_plural(n_dom, 'NVLink domain' if racks else unit_word)}"
        boxes += _endpoint_boxes(
            topo, dcx[u] - dw / 2, dcx[u] + dw / 2, 0.0, 0.55 if racks else 0.4, servers, hover
        )
        boxes.append(
            Box(
                dcx[u] - dw / 2,
                -0.12,
                dcx[u] + dw / 2,
                -0.12,
                "rgba(0,0,0,0)",
                line="rgba(0,0,0,0)",
                text=dom_names[u].replace(" (x", "<br>(x"),
                text_at="below",
            )
        )
    # NVLink: one band under the domains joins every rail of a domain
    rslot = 1.0 / n_rg
    rw = rslot * 0.6
    rcx = (np.arange(n_rg) + 0.5) * rslot
    levels = {1: (1.6, 1.95), 2: (2.5, 2.85), 3: (3.4, 3.75)}
    tier_names = {1: "leaf", 2: "spine", 3: "core"}
    tier_plural = {1: "leaves", 2: "spines", 3: "cores"}
    rail_names = [
        (f"rail {r}" if per_rg == 1 else f"rails {r * per_rg}-{min(n_rails, (r + 1) * per_rg) - 1}")
        for r in range(n_rg)
    ]
    for r in range(n_rg):
        for t in range(1, topo.tiers + 1):
            n_sw = int(((tier == t) & (rg_of_node == r)).sum())
            y0, y1 = levels[t]
            boxes.append(
                Box(
                    rcx[r] - rw / 2,
                    y0,
                    rcx[r] + rw / 2,
                    y1,
                    RAIL_COLORS[r % len(RAIL_COLORS)],
                    line="rgba(0,0,0,0)",
                    text=str(n_sw) if t == topo.tiers or n_rg <= 8 else "",
                    text_at="inside",
                    hover=f"{rail_names[r]}: {n_sw:,} {tier_names[t]} switches",
                )
            )
        boxes.append(
            Box(
                rcx[r] - rw / 2 - rslot * 0.12,
                1.45,
                rcx[r] + rw / 2 + rslot * 0.12,
                levels[topo.tiers][1] + 0.15,
                "rgba(0,0,0,0)",
                line="rgba(127,127,127,0.6)",
                text=rail_names[r].replace("rails ", "rails<br>"),
                text_at="above",
                hover=f"{rail_names[r]}: a {topo.tiers}-tier tree of its own",
            )
        )
    for ci, lc in enumerate(topo.links):
        sel = cls == ci
        a, b = lo[sel], hi[sel]
        if lc.name == "nic-leaf":
            pairs, counts = _pairs(dom_unit[a], rg_of_node[b], n_rg)
            for (u, r), n in zip(pairs, counts, strict=True):
                xs, ys = _line(dcx[u], 0.55 if racks else 0.4, rcx[r], levels[1][0])
                bundles.append(
                    Bundle(
                        lc.name,
                        int(n),
                        dom_names[u],
                        rail_names[r] + " leaves",
                        xs,
                        ys,
                        RAIL_COLORS[r % len(RAIL_COLORS)],
                        label=n_du * n_rg <= 24,
                        hover_at=0.75,
                    )
                )
        else:
            t_lo = {"leaf-spine": 1, "spine-core": 2}.get(lc.name, 1)
            pairs, counts = _pairs(rg_of_node[a], np.zeros(a.size, dtype=np.int64), 1)
            for (r, _), n in zip(pairs, counts, strict=True):
                xs, ys = _line(rcx[r], levels[t_lo][1], rcx[r], levels[t_lo + 1][0])
                bundles.append(
                    Bundle(
                        lc.name,
                        int(n),
                        f"{rail_names[r]} {tier_plural[t_lo]}",
                        f"{rail_names[r]} {tier_plural[t_lo + 1]}",
                        xs,
                        ys,
                        CLASS_COLORS.get(lc.name, OKABE_ITO["grey"]),
                    )
                )
    sub = (
        f"{n_rails:,} rails, each its own tree with one NIC port per {unit_word} "
        f"({n_ports:,} ports); the NVLink {unit_word} below joins the rails "
        "(cross-rail traffic moves over NVLink first)"
    )
    rows = {0.28: "NVLink racks" if racks else f"{unit_word}s"}
    for t in range(1, topo.tiers + 1):
        rows[sum(levels[t]) / 2] = tier_names[t]
    return Sketch(
        title=_title(topo, f", {topo.tiers} tier" + ("s" if topo.tiers > 1 else "") + " per rail"),
        subtitle=sub,
        boxes=boxes,
        bundles=bundles,
        rows=rows,
        y_range=(-0.8, levels[topo.tiers][1] + 0.75),
        summary_at={"nic-leaf": (-0.03, (0.55 + levels[1][0]) / 2, "right")},
    )
