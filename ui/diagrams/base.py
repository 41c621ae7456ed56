"""The drawing vocabulary every style shares: units, boxes, bundles, marks, media hover text."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from fabric_model.catalog import load_catalog
from fabric_model.plant.cost import BillOfMaterials, LinkMedia, link_media
from fabric_model.topology import LinkClass, Topology
from ui.theme import OKABE_ITO, TOPOLOGY_LABELS

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
    ``unit`` names what ``n_cables`` counts: ``cables``, or ``circuits`` for an OCS
    fabric's circuits (light paths through the OCS, not cables of their own).
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
    unit: str = "cables"


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
    topo = bom.topology
    out = {
        lc.name: CableInfo(_media_text(link_media(lc, bom.hardware, cat), lc), float(lc.length_m))
        for lc in topo.links
        if not (topo.family == "ocs" and lc.name == "block-ocs")
    }
    if topo.family == "ocs":  # the uplinks' OCS transceiver, and the circuits through the OCS
        p = topo.params
        up = next(lc for lc in topo.links if lc.name == "block-ocs")
        optic = cat.optic(str(p["optic_key"]))
        ocs = cat.ocs_switch(str(p["ocs_key"]))
        out["block-ocs"] = CableInfo(
            f"fiber ({cat.fiber.name}), {p['fibers_per_uplink']} per uplink<br>block end: "
            f"{optic.name}<br>OCS end: a passive port of {ocs.name}",
            float(up.length_m),
        )
        out["circuit"] = CableInfo(
            f"light path: two fiber runs through the OCS ({ocs.insertion_loss_db:g} dB "
            f"insertion loss), {optic.name} at both ends",
            2.0 * float(up.length_m),
        )
    return out


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
