"""The styles by family, and the hybrid: its two partitions in their own styles, side by side."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pandas as pd

from fabric_model.families import FAMILIES
from fabric_model.topology import Topology
from ui.diagrams.base import Box, Bundle, Sketch, _line, _title
from ui.diagrams.dragonfly_plus import _dragonfly_plus
from ui.diagrams.fat_tree import _fat_tree
from ui.diagrams.hypercube import _hypercube
from ui.diagrams.ocs import _ocs
from ui.diagrams.rail_only import _rail_only
from ui.diagrams.torus import _torus
from ui.theme import OKABE_ITO, TIER_COLORS


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
    "ocs": _ocs,
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
