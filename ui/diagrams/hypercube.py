"""Hypercubes: sub-cubes aggregated into a projected 4-cube, one colour per dimension."""

from __future__ import annotations

import numpy as np

from fabric_model.topology import Topology
from ui.diagrams.base import (
    DIM_COLORS,
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
