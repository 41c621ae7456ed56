"""Fat-trees: scalable units (2 tiers) or pods (3 and 4 tiers) under their spines or cores."""

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
    _budget,
    _cables,
    _chunk,
    _endpoint_boxes,
    _line,
    _pairs,
    _plural,
    _rack_hover,
    _rail_of_endpoint,
    _run_label,
    _title,
)
from ui.theme import OKABE_ITO, TIER_COLORS

# --------------------------------------------------------------------------------------
# fat-tree
# --------------------------------------------------------------------------------------


def _fat_tree_4(topo: Topology) -> Sketch:
    """Draw a 4-tier fat-tree: super-pods as frames of four rows, super-spines on top."""
    req, p = topo.request, topo.params
    n_e = req.n_endpoints
    lo, hi, cls = _cables(topo)
    names = [lc.name for lc in topo.links]
    tier = topo.graph.node_tier.astype(np.int64)
    first = [int(np.flatnonzero(tier == level)[0]) for level in (1, 2, 3, 4)]
    top_nodes = np.flatnonzero(tier == 4)
    gpn = req.gpus_per_node
    n_servers = -(-req.n_gpus // gpn)
    is_nl = cls == names.index("nic-leaf")
    leaf_of_e = np.empty(n_e, dtype=np.int64)
    leaf_of_e[lo[is_nl]] = hi[is_nl] - first[0]
    per_sp = int(p["leaves_per_pod"]) * int(p["pods_per_super_pod"])
    n_sp = int(p["n_super_pods"])
    leaf_unit, n_units, run = _chunk(
        np.arange(int(p["n_leaves"]), dtype=np.int64) // per_sp, n_sp, MAX_UNITS
    )
    # every switch below the top belongs to the super-pod of the leaves cabled under it
    unit_of: dict[int, np.ndarray] = {1: leaf_unit}
    for level, cname in ((2, "leaf-spine"), (3, "spine-core")):
        sel = cls == names.index(cname)
        here = np.zeros(int(np.sum(tier == level)), dtype=np.int64)
        here[hi[sel] - first[level - 1]] = unit_of[level - 1][lo[sel] - first[level - 2]]
        unit_of[level] = here
    slot = 1.0 / n_units
    width = slot * 0.84
    cx = [(k + 0.5) * slot for k in range(n_units)]
    rows_y: dict[str, tuple[float, float]] = {
        "servers": (0.0, 0.4),
        "leaf": (1.1, 1.45),
        "spine": (2.15, 2.45),
        "core": (3.15, 3.45),
    }
    top0, top1 = 4.2, 4.55
    unit_names = [_run_label("super-pod", k, run, n_sp) for k in range(n_units)]
    boxes: list[Box] = []
    bundles: list[Bundle] = []
    plural = {"leaf": "leaves"}
    servers_in_unit = np.bincount(
        leaf_unit[leaf_of_e[:: max(1, req.nics_per_gpu * gpn)][:n_servers]], minlength=n_units
    )
    for k in range(n_units):
        x0, x1 = cx[k] - width / 2, cx[k] + width / 2
        per_tier = {
            tname: int(np.sum(unit_of[level] == k))
            for level, tname in ((1, "leaf"), (2, "spine"), (3, "core"))
        }
        detail = f"{unit_names[k]}: {int(servers_in_unit[k]):,} servers, " + ", ".join(
            _plural(n, tname, plural.get(tname)) for tname, n in per_tier.items()
        )
        boxes.append(
            Box(
                x0 - slot * 0.05,
                -0.12,
                x1 + slot * 0.05,
                rows_y["core"][1] + 0.18,
                "rgba(0,0,0,0)",
                line="rgba(127,127,127,0.6)",
                text=unit_names[k].replace(" (x", "<br>(x"),
                text_at="below",
                hover=detail,
            )
        )
        y0, y1 = rows_y["servers"]
        boxes += _endpoint_boxes(topo, x0, x1, y0, y1, int(servers_in_unit[k]), detail)
        for tname, n in per_tier.items():
            boxes.append(
                Box(
                    x0,
                    rows_y[tname][0],
                    x1,
                    rows_y[tname][1],
                    TIER_COLORS[tname],
                    line="rgba(0,0,0,0)",
                    hover=f"{unit_names[k]}: {_plural(n, tname, plural.get(tname))}",
                )
            )
    n_top_all = top_nodes.size
    top_unit_of, n_top, top_run = _chunk(
        np.arange(n_top_all, dtype=np.int64), n_top_all, _budget(n_units)
    )
    tslot = 1.0 / n_top
    twidth = tslot * (0.8 if n_top > 1 else 0.3)
    tcx = [(j + 0.5) * tslot for j in range(n_top)]
    top_names = [_run_label("super-spine", j, top_run, n_top_all) for j in range(n_top)]
    for j in range(n_top):
        n_t = int(np.sum(top_unit_of == j))
        boxes.append(
            Box(
                tcx[j] - twidth / 2,
                top0,
                tcx[j] + twidth / 2,
                top1,
                TIER_COLORS.get("super", OKABE_ITO["vermillion"]),
                line="rgba(0,0,0,0)",
                text="" if n_top == 1 else f"x{n_t}",
                text_at="above",
                hover=f"{top_names[j]}: {_plural(n_t, 'super-spine')}",
            )
        )
    vertical = {
        "nic-leaf": ("servers", "leaf"),
        "leaf-spine": ("leaf", "spine"),
        "spine-core": ("spine", "core"),
    }
    lower_level = {"leaf-spine": 1, "spine-core": 2, "core-super": 3}
    for ci, lc in enumerate(topo.links):
        sel = cls == ci
        a, b = lo[sel], hi[sel]
        color = CLASS_COLORS.get(lc.name, OKABE_ITO["grey"])
        if lc.name == "nic-leaf":
            ua = leaf_unit[leaf_of_e[a]]
        else:
            level = lower_level[lc.name]
            ua = unit_of[level][a - first[level - 1]]
        if lc.name == "core-super":
            pairs, n_cables = _pairs(ua, top_unit_of[b - int(top_nodes[0])], n_top)
            for (k, j), n in zip(pairs, n_cables, strict=True):
                xs, ys = _line(cx[k], rows_y["core"][1], tcx[j], top0)
                bundles.append(
                    Bundle(lc.name, int(n), f"{unit_names[k]} cores", top_names[j], xs, ys, color)
                )
            continue
        lo_row, hi_row = vertical[lc.name]
        pairs, n_cables = _pairs(ua, np.zeros(a.size, np.int64), 1)
        for (k, _), n in zip(pairs, n_cables, strict=True):
            xs, ys = _line(cx[k], rows_y[lo_row][1], cx[k], rows_y[hi_row][0])
            bundles.append(
                Bundle(
                    lc.name,
                    int(n),
                    f"{unit_names[k]} {lo_row}",
                    f"{unit_names[k]} {hi_row}",
                    xs,
                    ys,
                    color,
                )
            )
    sub = (
        f"{n_sp:,} super-pods of up to {int(p['pods_per_super_pod'])} pods of "
        f"{int(p['leaves_per_pod'])} leaves"
    )
    if run > 1:
        sub += f", drawn {run} per frame"
    rows = {(y0 + y1) / 2: name for name, (y0, y1) in rows_y.items()}
    rows[(top0 + top1) / 2] = "super-spine"
    return Sketch(
        title=_title(topo, ", 4 tiers"),
        subtitle=sub,
        boxes=boxes,
        bundles=bundles,
        legend=[],
        rows=rows,
        y_range=(-0.75, top1 + 0.45),
        summary_at={"core-super": (-0.03, (rows_y["core"][1] + top0) / 2, "right")},
    )


def _fat_tree(topo: Topology) -> Sketch:
    if topo.tiers == 4:
        return _fat_tree_4(topo)
    req, p = topo.request, topo.params
    g = topo.graph
    n_e = req.n_endpoints
    lo, hi, cls = _cables(topo)
    names = [lc.name for lc in topo.links]
    tier = g.node_tier.astype(np.int64)
    leaf_nodes = np.flatnonzero(tier == 1)
    spine_nodes = np.flatnonzero(tier == 2)
    core_nodes = np.flatnonzero(tier == 3)
    first_leaf = int(leaf_nodes[0])
    n_leaves = leaf_nodes.size
    gpn, nics = req.gpus_per_node, req.nics_per_gpu
    server_of_e = np.arange(n_e, dtype=np.int64) // nics // gpn
    n_servers = int(server_of_e[-1]) + 1
    is_nl = cls == names.index("nic-leaf")
    leaf_of_e = np.empty(n_e, dtype=np.int64)
    leaf_of_e[lo[is_nl]] = hi[is_nl] - first_leaf
    rail_opt = bool(p.get("rail_optimized", False)) and topo.tiers > 1 and req.rails > 1
    rails = req.rails if rail_opt else 1
    rail_of_e = _rail_of_endpoint(topo, np.arange(n_e, dtype=np.int64), gpn) if rail_opt else None
    down = int(p["down_per_leaf"])

    # units (columns): servers for 1 tier, scalable units / leaf runs for 2, pods for 3
    if topo.tiers == 1:
        base = server_of_e
        n_base, word, plural = n_servers, "server", "servers"
    elif topo.tiers == 2 and rail_opt:
        base = server_of_e // down
        n_base, word, plural = -(-n_servers // down), "SU", "SUs"
    elif topo.tiers == 2:
        base = leaf_of_e
        n_base, word, plural = n_leaves, "leaf", "leaves"
    else:
        base = leaf_of_e // int(p["leaves_per_pod"])
        n_base, word, plural = int(p["n_pods"]), "pod", "pods"
    unit_of_e, n_units, run = _chunk(base, n_base, MAX_UNITS)
    unit_of_leaf = np.zeros(n_leaves, dtype=np.int64)
    unit_of_leaf[leaf_of_e] = unit_of_e
    n_rail_groups = min(rails, 8)
    rail_group = (lambda r: r * n_rail_groups // rails) if rail_opt else None
    rail_of_leaf = np.zeros(n_leaves, dtype=np.int64)
    if rail_opt and rail_of_e is not None and rail_group is not None:
        rail_of_leaf[leaf_of_e] = rail_group(rail_of_e)

    # geometry
    slot = 1.0 / n_units
    width = slot * 0.84
    cx = (np.arange(n_units) + 0.5) * slot
    y_srv0, y_srv1 = 0.0, 0.55 if req.nvlink_domain > gpn else 0.4
    y_leaf0, y_leaf1 = 1.1, 1.45
    y_sp0, y_sp1 = 2.15, 2.45  # spines inside a pod (3 tiers)
    top0 = 2.9 if topo.tiers == 2 else 3.4
    top1 = top0 + 0.35

    boxes: list[Box] = []
    bundles: list[Bundle] = []
    servers_in_unit = np.bincount(unit_of_e[:: max(1, nics * gpn)][:n_servers], minlength=n_units)
    leaves_in_unit = np.bincount(unit_of_leaf, minlength=n_units)
    spine_unit_of_pod = None
    if topo.tiers == 3:
        # spines belong to the pod of the leaves cabled to them
        is_ls = cls == names.index("leaf-spine")
        spine_unit = np.zeros(spine_nodes.size, dtype=np.int64)
        spine_unit[hi[is_ls] - int(spine_nodes[0])] = unit_of_leaf[lo[is_ls] - first_leaf]
        spine_unit_of_pod = spine_unit
    unit_names = [_run_label(word, u, run, n_base, plural) for u in range(n_units)]
    for u in range(n_units):
        x0, x1 = cx[u] - width / 2, cx[u] + width / 2
        frame_top = (y_sp1 if topo.tiers == 3 else y_leaf1) + 0.18
        n_srv = int(servers_in_unit[u])
        detail = (
            f"{unit_names[u]}: {n_srv:,} servers ({min(n_srv * gpn, req.n_gpus):,} GPUs), "
            f"{_plural(int(leaves_in_unit[u]), 'leaf', 'leaves')}"
        )
        if spine_unit_of_pod is not None:
            detail += f", {int((spine_unit_of_pod == u).sum()):,} spines"
        if topo.tiers > 1:
            boxes.append(
                Box(
                    x0 - slot * 0.05,
                    y_srv0 - 0.12,
                    x1 + slot * 0.05,
                    frame_top,
                    "rgba(0,0,0,0)",
                    line="rgba(127,127,127,0.6)",
                    text=unit_names[u].replace(" (x", "<br>(x"),
                    text_at="below",
                    hover=detail,
                )
            )
        srv_hover = f"{unit_names[u]}: {n_srv:,} servers" + (
            f"; {_rack_hover(topo)}" if req.nvlink_domain > gpn else ""
        )
        boxes += _endpoint_boxes(topo, x0, x1, y_srv0, y_srv1, n_srv, srv_hover)
        if topo.tiers == 1:
            continue
        if rail_opt:
            rw = width / n_rail_groups
            per_group = rails // n_rail_groups
            for r in range(n_rail_groups):
                n_l = int(((unit_of_leaf == u) & (rail_of_leaf == r)).sum())
                rail_text = f"rail {r}" if per_group == 1 else f"rails {r * per_group}-"
                if per_group > 1:
                    rail_text += f"{(r + 1) * per_group - 1}"
                boxes.append(
                    Box(
                        x0 + r * rw + rw * 0.08,
                        y_leaf0,
                        x0 + (r + 1) * rw - rw * 0.08,
                        y_leaf1,
                        RAIL_COLORS[r % len(RAIL_COLORS)],
                        line="rgba(0,0,0,0)",
                        hover=f"{unit_names[u]}, {rail_text}: {_plural(n_l, 'leaf', 'leaves')}",
                    )
                )
        else:
            boxes.append(
                Box(
                    x0,
                    y_leaf0,
                    x1,
                    y_leaf1,
                    TIER_COLORS["leaf"],
                    line="rgba(0,0,0,0)",
                    hover=f"{unit_names[u]}: {_plural(int(leaves_in_unit[u]), 'leaf', 'leaves')}",
                )
            )
        if spine_unit_of_pod is not None:
            n_sp = int((spine_unit_of_pod == u).sum())
            boxes.append(
                Box(
                    x0,
                    y_sp0,
                    x1,
                    y_sp1,
                    TIER_COLORS["spine"],
                    line="rgba(0,0,0,0)",
                    hover=f"{unit_names[u]}: {n_sp:,} spines",
                )
            )

    # the top row: spines (2 tiers), cores (3 tiers), the single switch (1 tier)
    if topo.tiers == 1:
        top_nodes, top_word, top_tier = leaf_nodes, "leaf", "leaf"
    elif topo.tiers == 2:
        top_nodes, top_word, top_tier = spine_nodes, "spine", "spine"
    else:
        top_nodes, top_word, top_tier = core_nodes, "core", "core"
    n_top_all = top_nodes.size
    top_unit_of, n_top, top_run = _chunk(
        np.arange(n_top_all, dtype=np.int64), n_top_all, _budget(n_units)
    )
    tslot = 1.0 / n_top
    twidth = tslot * (0.8 if n_top > 1 else 0.3)
    tcx = (np.arange(n_top) + 0.5) * tslot
    top_names = [_run_label(top_word, t, top_run, n_top_all) for t in range(n_top)]
    for t in range(n_top):
        n_t = int(np.sum(top_unit_of == t))
        boxes.append(
            Box(
                tcx[t] - twidth / 2,
                top0,
                tcx[t] + twidth / 2,
                top1,
                TIER_COLORS[top_tier],
                line="rgba(0,0,0,0)",
                text=(
                    ""
                    if n_top == 1
                    else str(t)
                    if n_t == 1
                    else f"{n_t:,} {top_word}s"
                    if n_top <= 8
                    else f"x{n_t}"
                ),
                text_at="above",
                hover=f"{top_names[t]}: {_plural(n_t, top_word)}",
            )
        )

    def top_of(node: np.ndarray) -> np.ndarray:
        out: np.ndarray = top_unit_of[node - int(top_nodes[0])]
        return out

    # bundles, class by class
    for ci, lc in enumerate(topo.links):
        sel = cls == ci
        a, b = lo[sel], hi[sel]
        color = CLASS_COLORS.get(lc.name, OKABE_ITO["grey"])
        if lc.name == "nic-leaf" and topo.tiers == 1:
            pairs, counts = _pairs(unit_of_e[a], np.zeros(a.size, dtype=np.int64), 1)
            for (u, _), n in zip(pairs, counts, strict=True):
                xs, ys = _line(cx[u], y_srv1, tcx[0], top0)
                bundles.append(Bundle(lc.name, int(n), unit_names[u], "the switch", xs, ys, color))
        elif lc.name == "nic-leaf":
            leaf = b - first_leaf
            rg = rail_of_leaf[leaf]
            pairs, counts = _pairs(unit_of_e[a], rg, n_rail_groups)
            rw = width / n_rail_groups
            for (u, r), n in zip(pairs, counts, strict=True):
                x = cx[u] - width / 2 + (r + 0.5) * rw if rail_opt else cx[u]
                xs, ys = _line(x, y_srv1, x, y_leaf0)
                rail_color = RAIL_COLORS[r % len(RAIL_COLORS)] if rail_opt else color
                bundles.append(
                    Bundle(
                        lc.name,
                        int(n),
                        f"{unit_names[u]} servers",
                        f"{unit_names[u]} leaves" + (f", rail group {r}" if rail_opt else ""),
                        xs,
                        ys,
                        rail_color,
                        label=not rail_opt,
                    )
                )
        elif lc.name == "leaf-spine" and topo.tiers == 2:
            pairs, counts = _pairs(unit_of_leaf[a - first_leaf], top_of(b), n_top)
            for (u, t), n in zip(pairs, counts, strict=True):
                xs, ys = _line(cx[u], y_leaf1, tcx[t], top0)
                bundles.append(Bundle(lc.name, int(n), unit_names[u], top_names[t], xs, ys, color))
        elif lc.name == "leaf-spine":
            pairs, counts = _pairs(unit_of_leaf[a - first_leaf], np.zeros(a.size, np.int64), 1)
            for (u, _), n in zip(pairs, counts, strict=True):
                xs, ys = _line(cx[u], y_leaf1, cx[u], y_sp0)
                bundles.append(
                    Bundle(
                        lc.name,
                        int(n),
                        f"{unit_names[u]} leaves",
                        f"{unit_names[u]} spines",
                        xs,
                        ys,
                        color,
                    )
                )
        elif lc.name == "spine-core" and spine_unit_of_pod is not None:
            su = spine_unit_of_pod[a - int(spine_nodes[0])]
            pairs, counts = _pairs(su, top_of(b), n_top)
            for (u, t), n in zip(pairs, counts, strict=True):
                xs, ys = _line(cx[u], y_sp1, tcx[t], top0)
                bundles.append(
                    Bundle(lc.name, int(n), f"{unit_names[u]} spines", top_names[t], xs, ys, color)
                )

    shape = f", {topo.tiers} tier" + ("s" if topo.tiers > 1 else "")
    if rail_opt:
        shape += ", rail-optimized"
    if topo.oversubscription > 1:
        shape += f", {topo.oversubscription:g}:1 oversubscribed"
    unit_text = {
        "server": "servers",
        "SU": f"scalable units of {down} servers (one leaf per rail)",
        "leaf": f"leaves of {down} NIC ports",
        "pod": f"pods of {int(p.get('leaves_per_pod', 0))} leaves and "
        f"{int(p.get('spines_per_pod', 0))} spines",
    }[word]
    if req.nvlink_domain > gpn and word == "SU":
        unit_text = (
            f"scalable units of {down} trays ({down * gpn / req.nvlink_domain:g} NVLink racks, "
            "one leaf per rail)"
        )
    if n_base == 1:
        for many, one in (
            ("scalable units", "scalable unit"),
            ("pods", "pod"),
            ("leaves of", "leaf of"),
        ):
            unit_text = unit_text.replace(many, one, 1)
        unit_text = "server" if unit_text == "servers" else unit_text
    sub = f"{n_base:,} {unit_text}"
    if run > 1:
        sub += f", drawn {run} per frame"
    if req.nvlink_domain > gpn:
        sub += f"; green boxes are NVLink racks of {req.nvlink_domain // gpn} trays of {gpn} GPUs"
    legend = []
    if rail_opt:
        per_group = rails // n_rail_groups
        legend = [
            (
                f"rail {r}"
                if per_group == 1
                else f"rails {r * per_group}-{(r + 1) * per_group - 1}",
                RAIL_COLORS[r % len(RAIL_COLORS)],
            )
            for r in range(n_rail_groups)
        ]
    rows = {(y_srv0 + y_srv1) / 2: "racks" if req.nvlink_domain > gpn else "servers"}
    if topo.tiers > 1:
        rows[(y_leaf0 + y_leaf1) / 2] = "leaf"
    if topo.tiers == 3:
        rows[(y_sp0 + y_sp1) / 2] = "spine"
    rows[(top0 + top1) / 2] = {1: "switch", 2: "spine", 3: "core"}[topo.tiers]
    band = (y_sp1 if topo.tiers == 3 else y_leaf1) + top0
    upper = "spine-core" if topo.tiers == 3 else "leaf-spine"
    return Sketch(
        title=_title(topo, shape),
        subtitle=sub,
        boxes=boxes,
        bundles=bundles,
        legend=legend,
        rows=rows,
        y_range=(-0.75, top1 + 0.45),
        summary_at={upper: (-0.03, band / 2, "right")},
    )
