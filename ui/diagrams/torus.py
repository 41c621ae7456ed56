"""3D tori: z slices of the lattice, wraparound cables as stubs, z cables between slices."""

from __future__ import annotations

import math

import numpy as np

from fabric_model.topology import Topology
from ui.diagrams.base import (
    CLASS_COLORS,
    DIM_COLORS,
    MAX_LABELS,
    Box,
    Bundle,
    Mark,
    Sketch,
    _cables,
    _line,
    _pairs,
    _plural,
    _title,
)
from ui.theme import OKABE_ITO

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
