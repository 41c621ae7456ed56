"""Topology diagrams a person can read at any scale: one drawing style per topology family.

Every family is drawn from its :class:`~fabric_model.topology.Topology`'s cable graph: each
graph node is assigned to a drawn *unit* (a scalable unit or pod of a fat-tree, a rail of a
rail-only fabric, a dragonfly+ group, a block of torus or hypercube nodes), and the cables
between two units of one link class become one *bundle*: one line, its width and its label
the cable count, its hover the count, media and length. Large designs merge contiguous units
(at most :data:`MAX_UNITS` per row, "x N" on a merged one), so the number of drawn lines and
traces stays bounded whatever the size, and the cables of the bundles always add up to the
topology's cables (of one plane, with ``fabric.planes > 1``: the planes are identical).

Styles (:data:`STYLES`; each family names its style in the family registry,
``fabric_model.families``, and :data:`DIAGRAMS` is the view keyed by family):

- ``fat-tree``: scalable units (2 tiers) or pods (3 tiers) as frames holding their servers,
  leaves (coloured by rail on rail-optimized designs) and, in a pod, its spines; spines
  (2 tiers) or cores (3 tiers) as a row above. NVL72-style domains are racks of trays.
- ``rail-only``: the rails as separate trees side by side, the NVLink domains (racks or
  servers) below joining them.
- ``dragonfly-plus``: groups around a circle, each a compact leaf/spine unit, the global
  links between two groups as one chord.
- ``torus-3d``: the lattice as z slices (x across, y down), wraparound cables as stubs at the
  slice edges, the z cables between consecutive slices as one bundle per slice pair.
- ``hypercube``: sub-cubes aggregated to at most 16 units drawn as a projected 4-cube, one
  colour per dimension.

The media and lengths come from the bill of materials (:func:`cable_info`, which calls the
BOM's own :func:`fabric_model.plant.cost.link_media` on the BOM's link classes).
"""

from __future__ import annotations

import itertools
import math
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from fabric_model.catalog import load_catalog
from fabric_model.families import FAMILIES
from fabric_model.plant.cost import BillOfMaterials, LinkMedia, link_media
from fabric_model.topology import LinkClass, Topology
from ui.theme import BASE_LAYOUT, OKABE_ITO, TIER_COLORS, TOPOLOGY_LABELS

__all__ = [
    "DIAGRAMS",
    "MAX_UNITS",
    "STYLES",
    "Bundle",
    "CableInfo",
    "Sketch",
    "cable_info",
    "diagram_bundles",
    "sketch",
    "topology_diagram",
]

#: Most units drawn in one row (pods, scalable units, groups, rails); more are merged.
MAX_UNITS = 16
#: Most lines drawn between two rows of units (lower units x upper units).
MAX_CROSS_BUNDLES = 64
#: Labelled bundles of one link class above which one summary label stands for them.
MAX_LABELS = 24

#: One colour per rail (or rail group), Okabe-Ito order; rails beyond 8 reuse them.
RAIL_COLORS = (
    OKABE_ITO["orange"],
    OKABE_ITO["sky"],
    OKABE_ITO["green"],
    OKABE_ITO["yellow"],
    OKABE_ITO["blue"],
    OKABE_ITO["vermillion"],
    OKABE_ITO["purple"],
    "#7f7f7f",
)
CLASS_COLORS = {
    "nic-leaf": "rgba(127,127,127,0.8)",
    "leaf-spine": OKABE_ITO["blue"],
    "spine-core": OKABE_ITO["purple"],
    "global": OKABE_ITO["vermillion"],
    "torus-x": OKABE_ITO["blue"],
    "torus-y": OKABE_ITO["orange"],
    "torus-z": OKABE_ITO["green"],
}
DIM_COLORS = (
    OKABE_ITO["blue"],
    OKABE_ITO["orange"],
    OKABE_ITO["green"],
    OKABE_ITO["vermillion"],
)
_WIDTHS = (1.0, 1.8, 3.0, 4.6)


# --------------------------------------------------------------------------------------
# what a drawing is made of
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bundle:
    """The cables of one link class between two drawn units (of one plane).

    ``xs``/``ys`` is the drawn path (``None`` separates pieces, e.g. a torus wraparound's
    two stubs); an empty path is a bundle inside one unit, told in that unit's hover.
    """

    link_class: str
    n_cables: int
    a: str
    b: str
    xs: tuple[float | None, ...] = ()
    ys: tuple[float | None, ...] = ()
    color: str = "rgba(127,127,127,0.8)"
    label: bool = True
    hover_at: float = 0.5
    dash: str = "solid"


@dataclass(frozen=True)
class Box:
    """A drawn rectangle: a switch group, a server group, a rack, a pod frame."""

    x0: float
    y0: float
    x1: float
    y1: float
    fill: str
    line: str = "rgba(127,127,127,0.9)"
    text: str = ""
    text_at: str = "inside"  # inside, below, above
    hover: str = ""
    stripes: int = 0  # trays of a rack: horizontal lines inside


@dataclass(frozen=True)
class Mark:
    """A drawn point with a hover (a torus or hypercube node block)."""

    x: float
    y: float
    hover: str
    color: str
    size: float = 9.0
    text: str = ""


@dataclass
class Sketch:
    """One family's drawing before it becomes a figure (pure data, testable)."""

    title: str
    subtitle: str
    boxes: list[Box] = field(default_factory=list)
    bundles: list[Bundle] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    legend: list[tuple[str, str]] = field(default_factory=list)
    rows: dict[float, str] = field(default_factory=dict)  # y -> row name (y axis ticks)
    equal_aspect: bool = False
    height: int = 600
    x_range: tuple[float, float] = (-0.02, 1.02)
    y_range: tuple[float, float] | None = None
    #: where a crowded link class's one summary label goes: ``(x, y, xanchor)``
    summary_at: dict[str, tuple[float, float, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class CableInfo:
    """What the bill of materials builds one link class of: media text and length."""

    media: str
    length_m: float


def _media_text(media: LinkMedia, lc: LinkClass) -> str:
    """Describe the media of one link class as hover lines (``<br>`` between them)."""
    if media.copper is not None:
        text = f"{media.copper.kind.upper()} copper ({media.copper.name})"
        if media.links_per_cable > 1:
            text += f"; a 1:{media.links_per_cable} splitter serves {media.links_per_cable} links"
        return text
    lines = [f"fiber ({media.fiber.name})"]
    if media.nic_optic is not None:
        where = "each NIC end" if lc.ends == ("nic", "nic") else "NIC end"
        lines.append(f"{where}: {media.nic_optic.name}")
    if media.switch_optic is not None:
        lines.append(f"switch end: {media.switch_optic.name}")
    return "<br>".join(lines)


def cable_info(bom: BillOfMaterials) -> dict[str, CableInfo]:
    """Media and length of each link class, chosen by the BOM's own rule.

    Parameters
    ----------
    bom
        The design's bill of materials; its topology carries the lengths it priced (the
        floor plan's where there is one) and :func:`fabric_model.plant.cost.link_media` picks the
        media from them, as the BOM lines do.

    Returns
    -------
    dict
        Link class name -> :class:`CableInfo`.
    """
    cat = load_catalog()
    return {
        lc.name: CableInfo(_media_text(link_media(lc, bom.hardware, cat), lc), float(lc.length_m))
        for lc in bom.topology.links
    }


# --------------------------------------------------------------------------------------
# shared helpers
# --------------------------------------------------------------------------------------


def _cables(topo: Topology) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cables of the graph (one plane) as ``(lower end, upper end, class)``; internal links out."""
    g = topo.graph
    a = g.link_src[0::2].astype(np.int64)
    b = g.link_dst[0::2].astype(np.int64)
    cls = g.link_class[0::2].astype(np.int64)
    keep = cls >= 0
    a, b, cls = a[keep], b[keep], cls[keep]
    tier = g.node_tier
    swap = tier[a] > tier[b]
    lo, hi = np.where(swap, b, a), np.where(swap, a, b)
    return lo, hi, cls


def _chunk(index: np.ndarray, n: int, max_units: int) -> tuple[np.ndarray, int, int]:
    """Merge ``0..n-1`` into contiguous runs; return (unit of each index, units, run size)."""
    size = max(1, math.ceil(n / max(1, max_units)))
    return index // size, -(-n // size), size


def _run_label(name: str, unit: int, size: int, n: int, plural: str | None = None) -> str:
    """``"pod 3"`` or ``"pods 6-7 (x2)"`` for unit ``unit`` of runs of ``size`` out of ``n``."""
    lo, hi = unit * size, min(n, (unit + 1) * size) - 1
    if lo == hi:
        return f"{name} {lo}"
    return f"{plural or name + 's'} {lo}-{hi} (x{hi - lo + 1})"


def _pairs(a_unit: np.ndarray, b_unit: np.ndarray, n_b: int) -> tuple[np.ndarray, np.ndarray]:
    """Count cables per unique ``(a, b)`` unit pair: ``(pairs of shape (k, 2), counts)``."""
    if a_unit.size == 0:
        return np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.int64)
    code, counts = np.unique(a_unit * n_b + b_unit, return_counts=True)
    return np.stack(np.divmod(code, n_b), axis=1), counts


def _short(n: int) -> str:
    return f"{n:,}"


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else (plural or word + 's')}"


def _rail_of_endpoint(topo: Topology, e: np.ndarray, unit_gpus: int) -> np.ndarray:
    nics = topo.request.nics_per_gpu
    gpu, nic = np.divmod(e, nics)
    out: np.ndarray = (gpu % unit_gpus) * nics + nic
    return out


def _line(
    x0: float, y0: float, x1: float, y1: float
) -> tuple[tuple[float | None, ...], tuple[float | None, ...]]:
    return (x0, x1), (y0, y1)


def _rack_hover(topo: Topology) -> str:
    req = topo.request
    per = req.nvlink_domain // req.gpus_per_node
    return (
        f"NVLink domain of {req.nvlink_domain} GPUs: a rack of {per} trays "
        f"of {req.gpus_per_node} GPUs"
    )


def _endpoint_boxes(
    topo: Topology, x0: float, x1: float, y0: float, y1: float, n_servers: int, hover: str
) -> list[Box]:
    """Servers of one unit: a bar, or NVLink racks (boxes of trays) when domains span servers."""
    req = topo.request
    gray = "rgba(153,153,153,0.35)"
    if req.nvlink_domain <= req.gpus_per_node:
        return [Box(x0, y0, x1, y1, gray, text=_plural(n_servers, "server"), hover=hover)]
    per_rack = max(1, req.nvlink_domain // req.gpus_per_node)
    n_racks = -(-n_servers // per_rack)
    drawn = min(n_racks, 6)
    gap = (x1 - x0) * 0.08 / max(1, drawn)
    w = ((x1 - x0) - gap * (drawn - 1)) / drawn
    boxes = [
        Box(
            x0 + i * (w + gap),
            y0,
            x0 + i * (w + gap) + w,
            y1,
            gray,
            line=OKABE_ITO["green"],
            hover=hover,
            stripes=min(per_rack, 18),
        )
        for i in range(drawn)
    ]
    if n_racks > drawn:
        boxes.append(Box(x0, y0, x1, y1, "rgba(0,0,0,0)", line="rgba(0,0,0,0)", text=f"x{n_racks}"))
    return boxes


def _title(topo: Topology, shape: str) -> str:
    label = TOPOLOGY_LABELS.get(topo.family, topo.family)
    switches = _plural(topo.n_switches, "switch", "switches") + (
        "" if topo.n_switches else " (switchless)"
    )
    text = f"{label}{shape}: {topo.n_gpus:,} GPUs, {switches}, {topo.n_links:,} cables"
    if topo.planes > 1:
        text += f"; plane 1 of {topo.planes} (all {topo.planes} identical)"
    return text


def _budget(n_lower: int) -> int:
    """Most upper units drawn against ``n_lower`` lower units."""
    return max(2, min(MAX_UNITS, MAX_CROSS_BUNDLES // max(1, n_lower)))


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


# --------------------------------------------------------------------------------------
# 3D torus
# --------------------------------------------------------------------------------------

#: Most nodes (or node blocks) drawn along one torus dimension.
MAX_TORUS_SIDE = 8


def _torus(topo: Topology) -> Sketch:
    req, p = topo.request, topo.params
    n_e = req.n_endpoints
    dims = tuple(int(d) for d in p["dims"])
    n_nodes = int(p["n_nodes"])
    lo, hi, cls = _cables(topo)
    blk = tuple(max(1, math.ceil(d / MAX_TORUS_SIDE)) for d in dims)
    drawn = tuple(-(-d // b) for d, b in zip(dims, blk, strict=True))
    node = np.arange(n_nodes, dtype=np.int64)
    coord = (node % dims[0], (node // dims[0]) % dims[1], node // (dims[0] * dims[1]))
    bc = [c // b for c, b in zip(coord, blk, strict=True)]
    block = bc[0] + drawn[0] * (bc[1] + drawn[1] * bc[2])
    n_blocks = drawn[0] * drawn[1] * drawn[2]
    per_row = min(4, drawn[2])
    n_rows = -(-drawn[2] // per_row)
    gap = 1.6
    panel_w, panel_h = drawn[0] - 1 + gap, drawn[1] - 1 + gap + 0.6

    def pos(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        bx, rest = b % drawn[0], b // drawn[0]
        by, bz = rest % drawn[1], rest // drawn[1]
        col, row = bz % per_row, bz // per_row
        return col * panel_w + bx, -(row * panel_h + by)

    bxy = pos(np.arange(n_blocks, dtype=np.int64))
    boxes: list[Box] = []
    bundles: list[Bundle] = []
    marks: list[Mark] = []
    nodes_in = np.bincount(block, minlength=n_blocks)
    internal = np.zeros(n_blocks, dtype=np.int64)
    dim_names = ("x", "y", "z")
    aggregated = any(b > 1 for b in blk)
    labels_ok = n_blocks <= 8

    def span(i: int, c: int) -> str:
        lo_, hi_ = c * blk[i], min(dims[i], (c + 1) * blk[i]) - 1
        return str(lo_) if lo_ == hi_ else f"{lo_}-{hi_}"

    def _coords(b_id: int) -> str:
        c = (b_id % drawn[0], (b_id // drawn[0]) % drawn[1], b_id // (drawn[0] * drawn[1]))
        return "(" + ", ".join(span(i, c[i]) for i in range(3)) + ")"

    z_names = [f"z={span(2, z)}" for z in range(drawn[2])]
    strip_x0, strip_x1 = -0.55, per_row * panel_w - gap + 0.55
    strip_y = -(n_rows * panel_h) + 0.3
    for ci, lc in enumerate(topo.links):
        sel = cls == ci
        ba, bb = block[lo[sel] - n_e], block[hi[sel] - n_e]
        d = "xyz".index(lc.name[-1])
        color = CLASS_COLORS.get(lc.name, OKABE_ITO["grey"])
        same = ba == bb
        internal += np.bincount(ba[same], minlength=n_blocks)
        for blk_id, n in zip(*np.unique(ba[same], return_counts=True), strict=True):
            bundles.append(
                Bundle(lc.name, int(n), f"block {blk_id}", f"block {blk_id}", label=False)
            )
        ba, bb = ba[~same], bb[~same]
        if d == 2:
            # one bundle per pair of consecutive slices
            za, zb = ba // (drawn[0] * drawn[1]), bb // (drawn[0] * drawn[1])
            zlo, zhi = np.minimum(za, zb), np.maximum(za, zb)
            pairs, counts = _pairs(zlo, zhi, drawn[2])
            for (s, t), n in zip(pairs, counts, strict=True):
                xs, ys = _z_strip(int(s), int(t), drawn[2], strip_x0, strip_x1, strip_y)
                bundles.append(
                    Bundle(
                        lc.name,
                        int(n),
                        f"slice {z_names[s]}",
                        f"slice {z_names[t]}",
                        xs,
                        ys,
                        color,
                        label=drawn[2] <= MAX_LABELS,
                        dash="dot" if t - s > 1 else "solid",
                    )
                )
            continue
        pairs, counts = _pairs(np.minimum(ba, bb), np.maximum(ba, bb), n_blocks)
        for (s, t), n in zip(pairs, counts, strict=True):
            (x0, y0), (x1, y1) = (bxy[0][s], bxy[1][s]), (bxy[0][t], bxy[1][t])
            step = abs(x1 - x0) + abs(y1 - y0)
            if step <= 1.01:
                xs, ys = _line(float(x0), float(y0), float(x1), float(y1))
            else:  # wraparound: a dotted stub out of each end, away from the slice
                dx, dy = (0.5, 0.0) if d == 0 else (0.0, -0.5)
                xs = (float(x1), float(x1 + dx), None, float(x0), float(x0 - dx))
                ys = (float(y1), float(y1 + dy), None, float(y0), float(y0 - dy))
            bundles.append(
                Bundle(
                    lc.name,
                    int(n),
                    f"node {_coords(s)}",
                    f"node {_coords(t)}",
                    xs,
                    ys,
                    color,
                    label=labels_ok,
                    hover_at=0.5 if step <= 1.01 else 0.2,
                    dash="solid" if step <= 1.01 else "dot",
                )
            )
    for b_id in range(n_blocks):
        cx_, cy_ = float(bxy[0][b_id]), float(bxy[1][b_id])
        what = (
            f"{int(nodes_in[b_id]):,} domains ({' x '.join(str(b) for b in blk)} block)"
            if aggregated
            else "one NVLink domain"
        )
        hover = f"node {_coords(b_id)}: {what}"
        if internal[b_id]:
            hover += f"; {int(internal[b_id]):,} cables inside"
        marks.append(Mark(cx_, cy_, hover, OKABE_ITO["grey"], size=11 if n_blocks <= 64 else 8))
    for z in range(drawn[2]):
        col, row = z % per_row, z // per_row
        x0, y0 = col * panel_w - 0.55, -(row * panel_h) + 0.55
        x1, y1 = x0 + drawn[0] - 1 + 1.1, y0 - (drawn[1] - 1) - 1.1
        ztext = z_names[z].replace("=", " = ")
        boxes.append(
            Box(
                x0,
                y1,
                x1,
                y0,
                "rgba(0,0,0,0)",
                line="rgba(127,127,127,0.5)",
                text=ztext,
                text_at="above",
                hover=f"slice {ztext}",
            )
        )
    step = (strip_x1 - strip_x0) / drawn[2]
    for z in range(drawn[2]):
        marks.append(
            Mark(
                strip_x0 + (z + 0.5) * step,
                strip_y,
                f"slice {z_names[z]}: z cables to the next slice on the strip",
                CLASS_COLORS["torus-z"],
                size=12,
                text=z_names[z],
            )
        )
    shape = " x ".join(str(d) for d in dims)
    per_dim = p.get("cables_per_direction_by_dim", (0, 0, 0))
    sub = (
        f"{n_nodes:,} NVLink domains in {_plural(drawn[2], 'z slice')} of {drawn[0]} x {drawn[1]} "
        "(x across, y down), cables per neighbour "
        + ", ".join(f"{dim_names[i]} {per_dim[i]}" for i in range(3) if dims[i] > 1)
        + "; dotted stubs wrap around; the strip joins the slices (dotted arc: z wraps)"
    )
    if aggregated:
        sub += f"; each dot is a {' x '.join(str(b) for b in blk)} block of domains"
    xmax = per_row * panel_w
    return Sketch(
        title=_title(topo, f" {shape}"),
        subtitle=sub,
        boxes=boxes,
        bundles=bundles,
        marks=marks,
        legend=[(f"{dim_names[i]} cables", DIM_COLORS[i]) for i in range(3) if dims[i] > 1],
        equal_aspect=True,
        height=max(420, min(760, 250 + 230 * n_rows)),
        x_range=(-1.6, xmax - gap + 1.0),
        y_range=(strip_y - 1.5, 1.6),
    )


def _z_strip(
    s: int, t: int, nz: int, x0: float, x1: float, y: float
) -> tuple[tuple[float | None, ...], tuple[float | None, ...]]:
    """Path of the z cables between slices ``s < t`` on the strip of slices under the panels.

    Consecutive slices are joined by a straight segment; the wraparound (last to first) by
    an arc under the strip.
    """
    step = (x1 - x0) / nz

    def at(z: int) -> float:
        return x0 + (z + 0.5) * step

    if t - s == 1:
        return (at(s), at(t)), (y, y)
    u = np.linspace(0.0, 1.0, 17)
    xs = at(s) + (at(t) - at(s)) * u
    ys = y - 0.9 * np.sin(np.pi * u)
    return tuple(float(v) for v in xs), tuple(float(v) for v in ys)


# --------------------------------------------------------------------------------------
# hypercube
# --------------------------------------------------------------------------------------

#: Projection of the first four hypercube dimensions (a tesseract drawing).
_CUBE_VECTORS = ((1.0, 0.0), (0.0, 1.0), (0.45, 0.32), (2.1, 0.75))


def _hypercube(topo: Topology) -> Sketch:
    req, p = topo.request, topo.params
    n_e = req.n_endpoints
    d = int(p["dimensions"])
    lo, hi, _ = _cables(topo)
    k = min(d, 4)
    shift = d - k
    u_a, u_b = (lo - n_e) >> shift, (hi - n_e) >> shift
    n_units = 1 << k
    vec = np.array(_CUBE_VECTORS[:k]) if k else np.zeros((0, 2))
    bits = (np.arange(n_units)[:, None] >> np.arange(k)[None, :]) & 1
    xy = bits @ vec if k else np.zeros((1, 2))
    swap = u_a > u_b
    u_a, u_b = np.where(swap, u_b, u_a), np.where(swap, u_a, u_b)
    pairs, counts = _pairs(u_a, u_b, n_units)
    bundles: list[Bundle] = []
    internal = np.zeros(n_units, dtype=np.int64)
    sub_nodes = 1 << shift

    def name(u: int) -> str:
        if shift == 0:
            return f"domain {u}"
        return f"sub-cube {u:0{k}b}"

    for (u, v), n in zip(pairs, counts, strict=True):
        if u == v:
            internal[u] += int(n)
            bundles.append(Bundle("hypercube", int(n), name(u), name(u), label=False))
            continue
        dim = int(np.log2(u ^ v))
        xs, ys = _line(float(xy[u, 0]), float(xy[u, 1]), float(xy[v, 0]), float(xy[v, 1]))
        bundles.append(Bundle("hypercube", int(n), name(u), name(v), xs, ys, DIM_COLORS[dim % 4]))
    marks = [
        Mark(
            float(xy[u, 0]),
            float(xy[u, 1]),
            f"{name(u)}: {_plural(sub_nodes, 'NVLink domain')}"
            + (f" (a {shift}-cube), {int(internal[u]):,} cables inside" if shift else ""),
            OKABE_ITO["grey"],
            size=16,
            text=(f"x{sub_nodes}" if shift else str(u)),
        )
        for u in range(n_units)
    ]
    sub = f"2^{d} = {1 << d:,} NVLink domains, {int(p['cables_per_dimension'])} cable(s) per "
    sub += "dimension"
    if shift:
        sub += (
            f"; drawn as {n_units} sub-cubes of {sub_nodes:,} domains (dimensions "
            f"{shift}-{d - 1} between them, 0-{shift - 1} inside)"
        )
    legend = [(f"dimension {shift + i}", DIM_COLORS[i % 4]) for i in range(k)]
    pad = 0.6
    xmax = float(xy[:, 0].max()) if k else 0.0
    ymax = float(xy[:, 1].max()) if k else 0.0
    return Sketch(
        title=_title(topo, f", {d} dimensions"),
        subtitle=sub,
        bundles=bundles,
        marks=marks,
        legend=legend,
        equal_aspect=True,
        height=560,
        x_range=(-pad, xmax + pad),
        y_range=(-pad, ymax + pad),
        summary_at={"hypercube": (-pad, -pad + 0.1, "left")},
    )


def _sketch_bounds(s: Sketch) -> tuple[float, float, float, float]:
    """``(x0, x1, y0, y1)`` around everything a sketch draws."""
    xs = [v for b in s.boxes for v in (b.x0, b.x1)] + [m.x for m in s.marks]
    ys = [v for b in s.boxes for v in (b.y0, b.y1)] + [m.y for m in s.marks]
    for bundle in s.bundles:
        xs += [v for v in bundle.xs if v is not None]
        ys += [v for v in bundle.ys if v is not None]
    xs += list(s.x_range)
    if s.y_range is not None:
        ys += list(s.y_range)
    return min(xs), max(xs), min(ys or [0.0]), max(ys or [1.0])


def _placed(s: Sketch, prefix: str, rect: tuple[float, float, float, float], out: Sketch) -> None:
    """Add sketch ``s`` to ``out`` scaled into ``rect`` with link classes and ends prefixed."""
    bx0, bx1, by0, by1 = _sketch_bounds(s)
    rx0, rx1, ry0, ry1 = rect
    sx, sy = (rx1 - rx0) / max(bx1 - bx0, 1e-9), (ry1 - ry0) / max(by1 - by0, 1e-9)

    def fx(v: float) -> float:
        return rx0 + (v - bx0) * sx

    def fy(v: float) -> float:
        return ry0 + (v - by0) * sy

    for b in s.boxes:
        out.boxes.append(
            replace(
                b,
                x0=fx(b.x0),
                x1=fx(b.x1),
                y0=fy(b.y0),
                y1=fy(b.y1),
                text=f"{b.text}" if b.text else "",
                hover=f"partition {prefix}: {b.hover}" if b.hover else "",
            )
        )
    for m in s.marks:
        out.marks.append(replace(m, x=fx(m.x), y=fy(m.y)))
    for bundle in s.bundles:
        out.bundles.append(
            replace(
                bundle,
                link_class=f"{prefix} {bundle.link_class}",
                a=f"{prefix} {bundle.a}",
                b=f"{prefix} {bundle.b}",
                xs=tuple(None if v is None else fx(v) for v in bundle.xs),
                ys=tuple(None if v is None else fy(v) for v in bundle.ys),
            )
        )
    for name, (x, y, anchor) in s.summary_at.items():
        out.summary_at[f"{prefix} {name}"] = (fx(x), fy(y), anchor)
    for item in s.legend:
        if item not in out.legend:
            out.legend.append(item)


def _hybrid(topo: Topology) -> Sketch:
    """Two partitions side by side, each in its family's style, under the shared core tier."""
    parts = getattr(topo, "partitions", ())
    p = topo.params
    out = Sketch(
        _title(topo, ""),
        f"partition A: {p['a_gpus']:,} GPUs, {p['a_label']} | partition B: "
        f"{p['b_gpus']:,} GPUs, {p['b_label']} | shared core: "
        f"{p['n_shared_cores']:,} switches, injection : shared uplink "
        f"{p['shared_oversubscription']:g} : 1",
        x_range=(-0.02, 1.02),
        y_range=(-0.08, 1.22),
        height=720,
    )
    core_y0, core_y1 = 1.08, 1.16
    core = Box(
        0.36,
        core_y0,
        0.64,
        core_y1,
        TIER_COLORS["core"],
        text=f"shared core x{p['n_shared_cores']:,}",
        hover=f"{p['n_shared_cores']:,} shared core switches",
    )
    out.boxes.append(core)
    rects = ((0.0, 0.47, 0.0, 0.92), (0.53, 1.0, 0.0, 0.92))
    for part, rect in zip(parts, rects, strict=True):
        sub = sketch(part.topology)
        frame = Box(
            rect[0] - 0.01,
            rect[2] - 0.04,
            rect[1] + 0.01,
            rect[3] + 0.04,
            "rgba(0,0,0,0)",
            text=f"partition {part.name}: {sub.title}",
            text_at="above",
        )
        out.boxes.append(frame)
        _placed(sub, part.name, rect, out)
        name = f"{part.name} {part.top_tier}-shared"
        n = topo.links_by_class.get(name, 0)
        x_mid = (rect[0] + rect[1]) / 2
        xs, ys = _line(x_mid, rect[3] + 0.04, (core.x0 + core.x1) / 2, core_y0)
        out.bundles.append(
            Bundle(
                name,
                n,
                f"{part.name} {part.top_tier}",
                "shared core",
                xs,
                ys,
                color=OKABE_ITO["vermillion"],
            )
        )
    return out


#: The drawing styles, by the name a family gives as ``Family.diagram``.
STYLES: dict[str, Callable[[Topology], Sketch]] = {
    "fat-tree": _fat_tree,
    "rail-only": _rail_only,
    "dragonfly-plus": _dragonfly_plus,
    "torus-3d": _torus,
    "hypercube": _hypercube,
    "hybrid": _hybrid,
}
#: One drawing style per topology family (the same keys as the topology builders).
DIAGRAMS: dict[str, Callable[[Topology], Sketch]] = {
    n: STYLES[f.diagram] for n, f in FAMILIES.items() if f.diagram in STYLES
}


def sketch(topo: Topology) -> Sketch:
    """Lay out ``topo`` in its family's style (units, boxes, bundles), without plotly."""
    draw = DIAGRAMS.get(topo.family)
    if draw is None:
        raise KeyError(f"no diagram for topology family {topo.family!r}; have {list(DIAGRAMS)}")
    return draw(topo)


def diagram_bundles(topo: Topology) -> pd.DataFrame:
    """Return the bundles: ``link_class, a, b, n_cables, drawn`` (cables of one plane)."""
    s = sketch(topo)
    return pd.DataFrame(
        {
            "link_class": [b.link_class for b in s.bundles],
            "a": [b.a for b in s.bundles],
            "b": [b.b for b in s.bundles],
            "n_cables": [b.n_cables for b in s.bundles],
            "drawn": [bool(b.xs) for b in s.bundles],
        }
    )


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
    text = f"<b>{ends}</b><br>{b.n_cables:,} cables ({b.link_class})"
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
