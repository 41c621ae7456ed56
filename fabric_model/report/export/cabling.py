"""The cabling plan: one CSV row per physical cable, ends, link class, length, media, optics.

One row per physical cable, so the rows equal the BOM's ``n_cables``. A copper cable that
carries ``k > 1`` links (a 1:2 splitter DAC from one switch cage to two NICs, a 2x400G twin
cable) is one row whose ``a_end`` and ``b_end`` list its ``k`` ends joined by ``+``
(``links`` = ``k``), grouping the class's links by switch port, as the BOM counts
``ceil(links / k)`` cables per class. Device and port names: :mod:`.plan`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from fabric_model.report.export.formats import Export, file_name
from fabric_model.report.export.plan import DeploymentPlan

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CableGroup",
    "cable_groups",
    "cabling_columns",
    "cabling_export",
    "cabling_frame",
    "cabling_notes",
]


@dataclass(frozen=True, eq=False)
class CableGroup:
    """The links of one class, ordered and grouped into physical cables."""

    cls: int
    order: np.ndarray  # link indices in cable order
    per_cable: int  # links per cable (the last cable of the class may hold fewer)

    @property
    def n_cables(self) -> int:
        """Physical cables of the class."""
        return -(-int(self.order.size) // self.per_cable)


def cable_groups(plan: DeploymentPlan) -> list[CableGroup]:
    """Group each class's links into the physical cables the BOM counts."""
    out = []
    for c, media in enumerate(plan.media):
        idx = np.flatnonzero(plan.link_class == c)
        k = media.links_per_cable
        if k > 1 and idx.size:
            # the switch end of a NIC link, else end a: adjacent ports share a cage
            sw_b = plan.a_nic[idx] & ~plan.b_nic[idx]
            s_dev = np.where(sw_b, plan.b_dev[idx], plan.a_dev[idx])
            s_port = np.where(sw_b, plan.b_port[idx], plan.a_port[idx])
            o_dev = np.where(sw_b, plan.a_dev[idx], plan.b_dev[idx])
            idx = idx[np.lexsort((s_port, o_dev, s_dev))]
        out.append(CableGroup(c, idx, k))
    return out


def _end_labels(plan: DeploymentPlan, side: str) -> np.ndarray:
    """``device:port`` of one end of every link (object array)."""
    dev = plan.a_dev if side == "a" else plan.b_dev
    port = plan.a_port if side == "a" else plan.b_port
    nic = plan.a_nic if side == "a" else plan.b_nic
    n_port = int(port.max()) + 1 if port.size else 1
    if plan.planes > 1:
        nic_names = np.array(
            [f":nic{r}/{p}" for p in range(plan.planes) for r in range(n_port)], dtype=object
        )
        nic_label = nic_names[plan.link_plane * n_port + port]
    else:
        nic_label = np.array([f":nic{r}" for r in range(n_port)], dtype=object)[port]
    sw_label = np.array([f":p{r + 1}" for r in range(n_port)], dtype=object)[port]
    labels: np.ndarray = plan.device_names[dev] + np.where(nic, nic_label, sw_label)
    return labels


def _join_groups(values: np.ndarray, k: int) -> np.ndarray:
    """Join each run of ``k`` consecutive labels with ``+`` (the last run may be shorter)."""
    if k == 1:
        return values
    out = values[0::k].copy()
    for j in range(1, k):
        part = values[j::k]
        out[: part.size] = out[: part.size] + "+" + part
    return out


def _straddling(dev: np.ndarray, k: int) -> np.ndarray:
    """Whether each cable (run of ``k`` links) has that end on more than one device."""
    first = dev[0::k]
    mixed = np.zeros(first.size, dtype=bool)
    for j in range(1, k):
        part = dev[j::k]
        mixed[: part.size] |= part != first[: part.size]
    return mixed


def cabling_columns(plan: DeploymentPlan) -> dict[str, np.ndarray]:
    """Return the cabling plan as columns, one entry per physical cable (in file order).

    Columns: ``cable_id`` (1-based), ``plane`` (only with several planes), ``link_class``,
    ``a_end``, ``b_end`` (``device:port``; ``+`` between the ends of a multi-link cable),
    ``length_m``, ``link_gbps``, ``media`` (``DAC``, ``ACC``, ``LACC`` or ``fiber``),
    ``cable`` (catalog key), ``a_transceiver``, ``b_transceiver`` (catalog keys; empty on
    copper) and ``links`` (logical links in the cable). Text columns are object arrays.
    """
    topo = plan.bom.topology
    a_lab, b_lab = _end_labels(plan, "a"), _end_labels(plan, "b")
    parts: list[dict[str, np.ndarray]] = []

    def const(n: int, value: object) -> np.ndarray:
        return np.full(n, value, dtype=object)

    for grp in cable_groups(plan):
        lc, media = topo.links[grp.cls], plan.media[grp.cls]
        k, idx = grp.per_cable, grp.order
        n = grp.n_cables
        links = np.full(n, k, dtype=np.int64)
        if idx.size % k:
            links[-1] = idx.size % k
        if media.copper is not None:
            kind, a_tr, b_tr = media.copper.kind.upper(), const(n, ""), const(n, "")
        else:
            kind = "fiber"
            keys = np.array(
                [
                    media.switch_optic.key if media.switch_optic is not None else "",
                    media.nic_optic.key if media.nic_optic is not None else "",
                ],
                dtype=object,
            )
            a_tr = keys[plan.a_nic[idx][0::k].astype(np.int64)]
            b_tr = keys[plan.b_nic[idx][0::k].astype(np.int64)]
            if plan.device_passive is not None:  # an OCS port takes no transceiver
                a_tr = np.where(plan.device_passive[plan.a_dev[idx][0::k]], "", a_tr)
                b_tr = np.where(plan.device_passive[plan.b_dev[idx][0::k]], "", b_tr)
        parts.append(
            {
                "plane": plan.link_plane[idx][0::k],
                "link_class": const(n, lc.name),
                "a_end": _join_groups(a_lab[idx], k),
                "b_end": _join_groups(b_lab[idx], k),
                "length_m": np.full(n, float(lc.length_m)),
                "link_gbps": np.full(n, int(lc.link_gbps), dtype=np.int64),
                "media": const(n, kind),
                "cable": const(n, media.cable.key),
                "a_transceiver": a_tr,
                "b_transceiver": b_tr,
                "links": links,
            }
        )
    columns = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
    if plan.planes > 1:
        order = np.argsort(columns["plane"], kind="stable")
        columns = {key: col[order] for key, col in columns.items()}
    else:
        del columns["plane"]
    n_rows = int(columns["a_end"].size)
    return {"cable_id": np.arange(1, n_rows + 1, dtype=np.int64), **columns}


def cabling_frame(plan: DeploymentPlan) -> pd.DataFrame:
    """Return the cabling plan as a DataFrame, one row per physical cable.

    The columns of :func:`cabling_columns`.
    """
    import pandas as pd

    return pd.DataFrame(cabling_columns(plan))


def _csv_text(columns: dict[str, np.ndarray]) -> str:
    """Write columns as CSV (no field holds a comma, quote or line end: none is quoted)."""
    fields: list[list[str]] = []
    for col in columns.values():
        if col.dtype == object:
            fields.append(col.tolist())
            continue
        values, inverse = np.unique(col, return_inverse=True)
        if values.size <= 4096:  # few distinct numbers (lengths, speeds): format each once
            texts = np.array([str(v) for v in values.tolist()], dtype=object)
            fields.append(texts[inverse].tolist())
        else:
            fields.append([str(v) for v in col.tolist()])
    body = "\n".join(map(",".join, zip(*fields, strict=True)))
    return ",".join(columns) + "\n" + body + "\n"


def cabling_notes(plan: DeploymentPlan) -> tuple[str, ...]:
    """Say which multi-link cables have an end on two devices (separate cables on site)."""
    notes = []
    for grp in cable_groups(plan):
        if grp.per_cable == 1:
            continue
        name = plan.bom.topology.links[grp.cls].name
        k, order = grp.per_cable, grp.order
        # a splitter's legs may reach two servers; a cable's switch end is one cage
        cross = _straddling(plan.b_dev[order], k)
        if not (plan.a_nic[order].all() and not plan.b_nic[order].any()):
            cross |= _straddling(plan.a_dev[order], k)
        n_cross = int(cross.sum())
        if n_cross:
            notes.append(
                f"{name}: {n_cross:,} of {grp.n_cables:,} {k}-link cables have an end on two "
                f"devices (the BOM counts ceil(links / {k}) cables per class); those need "
                "separate cables on site"
            )
    return tuple(notes)


def cabling_export(plan: DeploymentPlan) -> Export:
    """Write the cabling plan CSV (:func:`cabling_columns`)."""
    columns = cabling_columns(plan)
    return Export(
        "cabling-csv",
        _csv_text(columns),
        int(columns["cable_id"].size),
        file_name(plan, "cabling-csv"),
        cabling_notes(plan),
    )
