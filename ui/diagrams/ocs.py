"""OCS fabrics: blocks around a circle, fibers into the OCS tier at the centre, circuit chords.

The blocks (merged into at most :data:`~ui.diagrams.base.MAX_UNITS` units past that, "x N")
sit around a circle, as the dragonfly+'s groups do; the optical circuit switches are one box
at the centre, and each unit's uplink fibers one radial bundle into it (these are the
cables). The circuits the OCS makes between blocks are dashed chords, width and label their
count (light paths through the OCS, not cables: their bundles count ``circuits``). A block's
inner parts (a pod's leaf-spine cables, a cube's mesh) are bundles inside its unit, told in
its hover; so are circuits between blocks merged into one unit.
"""

from __future__ import annotations

import math

import numpy as np

from fabric_model.topology import Topology
from ui.diagrams.base import (
    MAX_LABELS,
    MAX_UNITS,
    Box,
    Bundle,
    Mark,
    Sketch,
    _chunk,
    _line,
    _pairs,
    _plural,
    _run_label,
    _title,
)
from ui.theme import OKABE_ITO, TIER_COLORS

#: Colour of the block-to-OCS fibers and of the circuits.
FIBER_COLOR = "rgba(127,127,127,0.8)"
CIRCUIT_COLOR = OKABE_ITO["green"]
#: Link class of the circuit chords (not a cable class of the topology).
CIRCUIT_CLASS = "circuit"


def _ocs(topo: Topology) -> Sketch:
    p = topo.params
    built = int(p["n_blocks_built"])
    kind = str(p["block"])
    job = np.asarray(p["circuits_data"].job_blocks)
    failed = set(np.asarray(p["circuits_data"].failed).tolist())
    unit_of_block, n_units, run = _chunk(np.arange(built), built, MAX_UNITS)
    names = [_run_label("block", u, run, built) for u in range(n_units)]
    blocks_in = np.bincount(unit_of_block, minlength=n_units)

    angle = np.pi / 2 - 2 * np.pi * np.arange(n_units) / max(1, n_units)
    radius = 1.0
    cx, cy = radius * np.cos(angle), radius * np.sin(angle)
    half = min(0.16, 0.85 * math.sin(math.pi / max(2, n_units))) if n_units > 1 else 0.25
    bundles: list[Bundle] = []
    inside: dict[int, list[str]] = {u: [] for u in range(n_units)}

    # a block's own cables (pod leaf-spine, cube mesh): inside its unit
    for lc in topo.links:
        if lc.name == "block-ocs" or not lc.n_links:
            continue
        per_block = lc.n_links // built
        for u in range(n_units):
            n = per_block * int(blocks_in[u])
            bundles.append(Bundle(lc.name, n, names[u], names[u], label=False))
            inside[u].append(f"{n:,} {lc.name} cables")

    # the fibers: every unit's uplinks into the OCS tier at the centre
    uplinks = int(p["uplinks_per_block"])
    ocs_name = f"{_plural(int(p['n_ocs']), 'OCS', 'OCS')} ({p['ocs_key']})"
    box_r = 0.2
    for u in range(n_units):
        n = uplinks * int(blocks_in[u])
        r0 = 1.0 - half * 1.1
        xs, ys = _line(r0 * cx[u], r0 * cy[u], box_r * cx[u], box_r * cy[u])
        bundles.append(
            Bundle("block-ocs", n, names[u], ocs_name, xs, ys, FIBER_COLOR, hover_at=0.35)
        )

    # the circuits: chords between units, dashed
    c = p["circuits_data"]
    ua, ub = unit_of_block[np.asarray(c.a)], unit_of_block[np.asarray(c.b)]
    swap = ua > ub
    ua, ub = np.where(swap, ub, ua), np.where(swap, ua, ub)
    pairs, counts = _pairs(ua, ub, n_units)
    n_chords = int(np.sum(pairs[:, 0] != pairs[:, 1]))
    for (u, v), n in zip(pairs.tolist(), counts.tolist(), strict=True):
        if u == v:
            bundles.append(
                Bundle(CIRCUIT_CLASS, n, names[u], names[u], label=False, unit="circuits")
            )
            inside[u].append(f"{n:,} circuits between its blocks")
            continue
        r0 = 1.0 - half * 1.15
        xs, ys = _line(r0 * cx[u], r0 * cy[u], r0 * cx[v], r0 * cy[v])
        bundles.append(
            Bundle(
                CIRCUIT_CLASS,
                n,
                names[u],
                names[v],
                xs,
                ys,
                CIRCUIT_COLOR,
                label=n_chords <= MAX_LABELS,
                hover_at=0.6,
                dash="dash",
                unit="circuits",
            )
        )

    gpus = int(p["block_gpus"])
    what = {
        "nvlink": f"an NVLink domain of {gpus:,} GPUs",
        "cube": f"a 4 x 4 x 4 cube of NVLink domains, {gpus:,} GPUs",
        "pod": (
            f"a pod of {gpus:,} GPUs ("
            + (
                f"{p['pod_leaves']} leaves, {p['pod_spines']} spines"
                if int(p["pod_tiers"]) == 2
                else "one leaf"
            )
            + ")"
        ),
    }[kind]
    boxes: list[Box] = []
    marks: list[Mark] = []
    job_set = set(job.tolist())
    for u in range(n_units):
        members = np.flatnonzero(unit_of_block == u)
        n_failed = sum(1 for m in members.tolist() if m in failed)
        n_spare = sum(1 for m in members.tolist() if m not in job_set and m not in failed)
        state = ""
        if n_failed:
            state += f"; {n_failed} failed"
        if n_spare:
            state += f"; {n_spare} spare"
        hover = (
            f"{names[u]}: {_plural(int(blocks_in[u]), 'block')}, each {what}, "
            f"{uplinks:,} uplinks to the OCS{state}"
            + ("<br>" + "<br>".join(inside[u]) if inside[u] else "")
        )
        fill = (
            "rgba(213,94,0,0.35)"
            if n_failed == len(members)
            else ("rgba(153,153,153,0.15)" if n_spare == len(members) else TIER_COLORS["leaf"])
        )
        boxes.append(
            Box(
                float(cx[u] - half),
                float(cy[u] - half * 0.7),
                float(cx[u] + half),
                float(cy[u] + half * 0.7),
                fill,
                text=(f"x{int(blocks_in[u])}" if run > 1 else str(u)),
                hover=hover,
            )
        )
    boxes.append(
        Box(
            -box_r,
            -box_r * 0.6,
            box_r,
            box_r * 0.6,
            TIER_COLORS.get("spine", OKABE_ITO["blue"]),
            text=f"{int(p['n_ocs']):,} OCS",
            hover=(
                f"{ocs_name}: {int(p['ocs_ports'])} ports each, {int(p['ocs_uplinks_per_block'])} "
                f"uplink(s) of every block on each; {int(p['n_circuits']):,} circuits "
                f"({p['circuits']}, reconfigure: {p['reconfigure']})"
            ),
        )
    )
    sub = (
        f"{int(p['n_blocks']):,} blocks ({what})"
        + (f" + {int(p['spare_blocks'])} spare" if int(p["spare_blocks"]) else "")
        + f", {uplinks:,} uplinks each, on {ocs_name}; {int(p['n_circuits']):,} {p['circuits']} "
        "circuits (dashed: light paths through the OCS)"
    )
    if run > 1:
        sub += f"; drawn as {n_units} units of {run} blocks"
    pad = 0.35
    return Sketch(
        title=_title(topo, f", {p['circuits']} circuits"),
        subtitle=sub,
        boxes=boxes,
        bundles=bundles,
        marks=marks,
        legend=[("fibers to the OCS", FIBER_COLOR), ("circuits", CIRCUIT_COLOR)],
        equal_aspect=True,
        height=600,
        x_range=(-1 - pad, 1 + pad),
        y_range=(-1 - pad, 1 + pad),
        summary_at={CIRCUIT_CLASS: (-1 - pad + 0.05, -1 - pad + 0.08, "left")},
    )
