"""Racks, rows, power density, cooling and the cable runs they imply.

The floor plan is a plan view of one data hall (x along a row, y across rows), built from the
server type and the switch counts; its numbers and their sources are in
``assets/facility.yaml``.

Layout
------
- **Compute racks**: ``facility.servers_per_rack`` servers each (auto: 4 DGX H100 at 40.8 kW
  [SF1], 18 trays of an NVL72 rack [S44]); ``ceil(servers / per rack)`` racks.
- **Rows**: ``facility.racks_per_row`` compute racks (auto: whole *leaf groups* per row, the
  servers that share a set of leaves, e.g. 32 DGX = 8 racks per rail-optimized group of
  radix-64 leaves, in a roughly square hall, at most 24 racks). Row pitch = rack depth +
  half a cold and half a hot aisle (1.2 + 0.6 + 0.45 = 2.25 m, the 7-tile pitch [SF8]).
- **Network racks**: each row block (the rows one leaf group spans) has network racks in the
  middle of its row(s) holding its leaves (and, for a dragonfly+, its spines), the storage
  leaves and their management switches (42 usable U per rack). Spines, cores, storage spines
  and management aggregation sit in network rows at the centre of the hall.
- **Runs**: ``|dx| + |dy|`` along the overhead trays plus a rise to the tray at each end and a
  service loop (1.5 m x 2 + 1 m). A link class's length is its longest run, so one medium
  reaches every cable of the class: NIC-leaf from the row's farthest rack to its network
  racks, leaf-spine and storage leaf-spine from the farthest row to the centre rows,
  spine-core across the centre rows, dragonfly+ global links across the hall, management
  access inside the rack (2 m). Switchless families (torus, hypercube) keep
  ``fabric.direct_link_m``: the floor plan does not place their wrap-around links.

Power and cooling
-----------------
A compute rack draws its servers (catalog ``power_w``, which for an NVL72 tray is its share
of the rack), their compute NICs and NIC-side transceivers, their storage transceivers and its
management switches; a network rack the switches and switch-side transceivers in it (the
mean over network racks). Against ``facility.air_limit_kw_per_rack`` (default 60 kW: air with
containment and rear-door heat exchangers [SF10] [S49]) and the ~15 kW of typical air-cooled
colocation [SF7]: the verdict says whether air works, needs containment, or direct-to-chip
liquid is required, and a rack above the limit on ``facility.cooling = air`` is a warning.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fabric_model.catalog import Catalog
from fabric_model.errors import ScenarioError
from fabric_model.families import FAMILIES
from fabric_model.plant.hardware import Hardware
from fabric_model.plant.lines import BomLine
from fabric_model.plant.storage_mgmt import (
    MANAGEMENT_AGGREGATION,
    MANAGEMENT_SWITCH_BY_GBPS,
    ManagementCounts,
    NetworkBill,
    StorageDesign,
    management_bill,
    management_counts,
    storage_bill,
    storage_design,
)
from fabric_model.scenario import FACILITY_DATA, CostSpec, FabricSpec, Scenario
from fabric_model.topology import Topology

__all__ = [
    "CLASS_KEYS",
    "FloorPlan",
    "Layout",
    "Site",
    "built_gpus",
    "class_lengths_m",
    "facility_value",
    "halls_text",
    "plan_site",
    "rack_positions",
    "servers_per_rack",
]

#: Which ``fabric.*_m`` key a link class's length comes from (and overrides the floor plan).
CLASS_KEYS: Mapping[str, str] = {
    "nic-leaf": "nic_leaf_m",
    "leaf-spine": "leaf_spine_m",
    "spine-core": "spine_core_m",
    "core-super": "spine_core_m",  # a 4-tier fat-tree's top class: centre rows to centre rows
    "global": "spine_core_m",
    "block-ocs": "direct_link_m",  # an OCS fabric's block-to-OCS runs: the centre rows
}
_DEFAULT_M = {f.name: f.default for f in dataclasses.fields(FabricSpec) if f.name.endswith("_m")}


def built_gpus(scenario: Scenario, topo: Topology) -> int:
    """GPUs the design builds: the job's, plus an OCS fabric's spare blocks."""
    if topo.family == "ocs":
        return int(topo.params["n_blocks_built"]) * int(topo.params["block_gpus"])
    return int(scenario.cluster.n_gpus)


def facility_value(*path: str) -> float:
    """Return a number of ``assets/facility.yaml`` (``facility_value("rack", "width_m")``)."""
    entry: Any = FACILITY_DATA
    for p in path:
        entry = entry[p]
    return float(entry["value"])


def _ceil_tenth(x: float) -> float:
    return math.ceil(x * 10.0 - 1e-9) / 10.0


def servers_per_rack(scenario: Scenario, server_key: str, server_name: str) -> int:
    """Servers per rack: ``facility.servers_per_rack`` or the server type's usual rack.

    Raises
    ------
    ScenarioError
        On ``facility.servers_per_rack`` for a rack-scale system (NVL72) given another count.
    """
    entry = FACILITY_DATA["servers"].get(server_key)
    usual = int(entry["servers_per_rack"]["value"]) if entry else 4
    given = scenario.facility.servers_per_rack
    if given == "auto":
        return usual
    if _rack_scale(server_key) and int(given) != usual:
        raise ScenarioError(
            "facility.servers_per_rack",
            given,
            f"{server_name}: one rack holds {usual} compute trays (the rack is the NVLink "
            f"domain); allowed: auto or {usual}",
        )
    return int(given)


def _rack_scale(server_key: str) -> bool:
    entry = FACILITY_DATA["servers"].get(server_key)
    return bool(entry and entry["servers_per_rack"].get("rack_scale"))


def _native_cooling(server_key: str) -> str:
    entry = FACILITY_DATA["servers"].get(server_key)
    return str(entry["cooling"]["value"]) if entry else "air"


def _leaf_group(topo: Topology) -> int:
    """Servers that share one leaf's NIC ports (one rail of them when rail-optimized)."""
    nic_leaf = next((lc for lc in topo.links if lc.name == "nic-leaf"), None)
    if nic_leaf is None or not nic_leaf.port_groups:
        return 0
    ports = max(g.ports_per_switch for g in nic_leaf.port_groups if g.tier == "leaf")
    req = topo.request
    rail_optimized = req.rail_optimized or topo.family == "rail-only"
    return ports if rail_optimized else math.ceil(ports / max(1, req.rails))


def _rows_spanned(group_racks: int, row: int) -> int:
    """Most rows one group of ``group_racks`` consecutive racks spans in rows of ``row``."""
    if group_racks <= 0:
        return 1
    gcd = math.gcd(group_racks, row)
    return (row - gcd + group_racks - 1) // row + 1


@dataclass(frozen=True)
class Layout:
    """The plan view: racks, rows, network racks and the longest run of each link class.

    Attributes
    ----------
    n_servers, servers_per_rack, n_compute_racks
        Servers, servers per compute rack, compute racks.
    racks_per_row, n_compute_rows
        Compute racks per row, compute rows.
    leaf_group_servers, leaf_group_racks, rows_per_block, n_blocks
        Servers sharing a set of leaves, the racks they fill, the rows one block of leaves
        serves, and the blocks (each with network racks in its middle row).
    network_racks_per_block, n_center_racks, n_center_rows
        Network racks per block (in the middle of the block's row) and at the hall's centre.
    row_slots
        Rack positions per row (compute + the block's network racks).
    pitch_m, width_m
        Row pitch and rack width, m.
    lengths_m
        Longest run per compute-fabric link class, m (rounded up to 0.1 m).
    storage_lengths_m
        The same for the storage network's classes.
    management
        Management switch counts (None when ``management.enabled`` is off).
    hall_width_m, hall_depth_m
        One hall's plan size, m.
    n_columns, rows_per_column
        Columns of row blocks side by side in a hall (a cross aisle between two), and the
        compute rows in each.
    n_halls, rows_per_hall, hall_gap_m, cross_aisle_m
        Halls in a near-square grid (past ``facility.hall_max_m2``), the compute rows each
        holds, the gap an inter-hall cable crosses, and the cross aisle between columns, m.
    cooling
        ``air`` or ``liquid`` (``facility.cooling``, auto = the server type's own).
    notes
        How the plan was drawn where it simplifies.
    """

    n_servers: int
    servers_per_rack: int
    n_compute_racks: int
    racks_per_row: int
    n_compute_rows: int
    leaf_group_servers: int
    leaf_group_racks: int
    rows_per_block: int
    n_blocks: int
    network_racks_per_block: int
    n_center_racks: int
    n_center_rows: int
    row_slots: int
    pitch_m: float
    width_m: float
    lengths_m: Mapping[str, float]
    storage_lengths_m: Mapping[str, float]
    management: ManagementCounts | None
    hall_width_m: float
    hall_depth_m: float
    cooling: str
    native_cooling: str
    notes: tuple[str, ...] = ()
    n_columns: int = 1
    rows_per_column: int = 0
    n_halls: int = 1
    rows_per_hall: int = 0
    hall_gap_m: float = 0.0
    cross_aisle_m: float = 0.0

    @property
    def n_network_racks(self) -> int:
        """Racks holding switches (row blocks and centre)."""
        return self.n_blocks * self.network_racks_per_block + self.n_center_racks

    @property
    def n_racks(self) -> int:
        """All racks."""
        return self.n_compute_racks + self.n_network_racks

    @property
    def n_rows(self) -> int:
        """All rows (compute and centre network rows)."""
        return self.n_compute_rows + self.n_center_rows

    @property
    def floor_area_m2(self) -> float:
        """Area of every hall: rows, aisles and end aisles, m^2."""
        return self.n_halls * self.hall_width_m * self.hall_depth_m

    @property
    def site_width_m(self) -> float:
        """The halls across the campus grid with the gaps between them, m."""
        across = _hall_grid(self.n_halls)[0]
        return across * self.hall_width_m + (across - 1) * self.hall_gap_m

    @property
    def site_depth_m(self) -> float:
        """The halls deep in the campus grid with the gaps between them, m."""
        deep = _hall_grid(self.n_halls)[1]
        return deep * self.hall_depth_m + (deep - 1) * self.hall_gap_m

    @property
    def center_row_index(self) -> int:
        """Index of the first centre network row among one column's rows."""
        return (self.rows_per_column or self.n_compute_rows) // 2


def _auto_racks_per_row(n_racks: int, group_racks: int, pitch: float, width: float) -> int:
    """Whole leaf groups per row in a roughly square hall, at most ``row.max_racks``."""
    row_max = int(facility_value("row", "max_racks"))
    target = max(1, min(row_max, round(math.sqrt(n_racks * pitch / width))))
    if 0 < group_racks <= row_max:
        groups = max(1, min(round(target / group_racks), row_max // group_racks))
        target = groups * group_racks
    return max(1, min(target, n_racks))


@dataclass(frozen=True)
class _Shape:
    columns: int  # columns of row blocks in one hall
    rows: int  # compute rows per column
    center_rows: int  # centre network rows per hall (across all its columns)
    halls: int
    hall_rows: int  # compute rows per hall (whole row blocks; the last hall may hold fewer)


def _site_shape(
    n_rows: int,
    block: int,
    slots: int,
    n_center: int,
    width: float,
    pitch: float,
    hall_max_m2: float,
) -> _Shape:
    """Columns of whole row blocks per hall (a roughly square hall), and halls past its size.

    A column stacks row blocks (the rows one leaf group serves) as one hall always did; columns
    stand side by side with a cross aisle between them, as many as make the hall about as wide
    as it is deep. Centre rows run across the whole hall in the middle of every column. When
    that hall is larger than ``hall_max_m2``, the row blocks are shared out over more halls of
    the same shape, each with its share of the centre racks.
    """
    n_blocks = max(1, -(-n_rows // block))
    cross = facility_value("aisle", "cross_m")
    end = facility_value("aisle", "end_m")
    cold = facility_value("aisle", "cold_m")
    col_w = slots * width

    def shape(halls: int) -> tuple[_Shape, float]:
        blocks = -(-n_blocks // halls)
        rows = min(n_rows, blocks * block)
        cols = max(1, min(blocks, round(math.sqrt(rows * pitch / (col_w + cross)))))
        per_col = -(-blocks // cols)
        cols = -(-blocks // per_col)
        rpc = min(rows, per_col * block)
        per_hall = -(-n_center // halls) if n_center else 0
        crows = -(-per_hall // (cols * slots)) if per_hall else 0
        if cols > 1 and per_hall:
            # a compact centre block: deeper than one row where that shortens the longest
            # leaf-to-centre run (half its width against one more pitch of depth)
            compact = round(math.sqrt(per_hall * width / (2 * pitch)))
            crows = max(crows, min(-(-per_hall // slots), compact))
        area = (cols * col_w + (cols - 1) * cross + 2 * end) * ((rpc + crows) * pitch + cold)
        return _Shape(cols, rpc, crows, halls, rows), area

    halls = 1
    best, area = shape(halls)
    while area > hall_max_m2 and halls < n_blocks:
        halls = max(halls + 1, math.ceil(halls * area / hall_max_m2))
        halls = min(halls, n_blocks)
        best, area = shape(halls)
    return best


def _center_x(k: int, used: int, cols: int, slots: int, width: float, cross: float) -> float:
    """Return the x of the ``k``-th rack of a centre row of ``used`` racks, centred in a hall.

    The hall's columns are ``slots`` racks wide with a ``cross`` aisle between two; x is from
    the first column's first slot, m.
    """
    idx = (cols * slots - used) // 2 + k
    c, slot = divmod(idx, slots)
    return c * (slots * width + cross) + (slot + 0.5) * width


def _hall_grid(n_halls: int) -> tuple[int, int]:
    """Return the halls across and deep of a near-square campus of ``n_halls`` halls."""
    across = math.ceil(math.sqrt(n_halls))
    return across, -(-n_halls // across)


#: Link classes from the bottom of a switched fabric up; the last one present is its top.
_CLASS_ORDER = ("nic-leaf", "leaf-spine", "spine-core", "core-super", "global")


def _top_class(topo: Topology) -> str:
    """Return the fabric's top link class: the one that crosses between halls."""
    names = {lc.name for lc in topo.links}
    return next((c for c in reversed(_CLASS_ORDER) if c in names), "")


def _far(start: int, length: int, slots: int) -> int:
    """Most slots between a rack of a block ``[start, start + length)`` and any rack of a row."""
    if length <= 0:
        return slots - 1
    return max(start + length - 1, slots - 1 - start)


def _layout(
    scenario: Scenario,
    hw: Hardware,
    topo: Topology,
    storage: StorageDesign | None,
    cat: Catalog,
) -> Layout:
    f = scenario.facility
    width = facility_value("rack", "width_m")
    pitch = (
        facility_value("rack", "depth_m")
        + (facility_value("aisle", "cold_m") + facility_value("aisle", "hot_m")) / 2
    )
    usable_u = int(facility_value("rack", "usable_units"))
    rise2 = 2 * facility_value("cabling", "rise_m") + facility_value("cabling", "slack_m")
    in_rack = facility_value("cabling", "in_rack_m")
    notes: list[str] = []

    n_servers = max(1, -(-built_gpus(scenario, topo) // scenario.cluster.gpus_per_node))
    spr = servers_per_rack(scenario, hw.server.key, hw.server.name)
    n_cracks = -(-n_servers // spr)
    group = _leaf_group(topo)
    group_racks = -(-group // spr) if group else 0
    if f.racks_per_row == "auto":
        row = _auto_racks_per_row(n_cracks, group_racks, pitch, width)
    else:
        row = max(1, min(int(f.racks_per_row), n_cracks))
    n_crows = -(-n_cracks // row)

    # leaf blocks: the rows one leaf group spans, or that share a leaf when leaves are few
    # switch tiers that sit with their leaves in the rows (the rest go to the centre rows)
    fam = FAMILIES.get(topo.family)
    row_tiers = fam.floor_row_tiers if fam is not None else ("leaf",)
    by_tier = dict(topo.switches_by_tier)
    n_row_switches = sum(by_tier.get(t, 0) for t in row_tiers)
    n_leaves = by_tier.get("leaf", 0)
    holders = n_leaves or (storage.topology.switches_by_tier.get("leaf", 0) if storage else 0)
    span = _rows_spanned(group_racks, row) if group_racks else 1
    block = min(n_crows, max(span, -(-n_crows // holders) if holders else n_crows))
    n_blocks = -(-n_crows // block)
    ru = hw.switch.rack_units
    s_leaves = storage.topology.switches_by_tier.get("leaf", 0) if storage else 0
    s_ru = storage.hardware.switch.rack_units if storage else 0
    mgmt_on = scenario.management.enabled
    per_access = int(facility_value("management", "access_ports"))
    block_switches = -(-n_row_switches // n_blocks) + -(-s_leaves // n_blocks)
    block_u = (
        -(-n_row_switches // n_blocks) * ru
        + -(-s_leaves // n_blocks) * s_ru
        + (-(-block_switches // per_access) if mgmt_on else 0)
    )
    n_net = -(-block_u // usable_u) if block_u else 0
    slots = row + n_net
    left = -(-row // 2)

    # the centre rows: upper tiers (an OCS fabric's OCSes), storage spines, management
    center_switches = sum(n for t, n in by_tier.items() if t not in row_tiers)
    ocs_ru = int(topo.params.get("ocs_rack_units", ru))
    center_u = sum(
        n * (ocs_ru if t == "ocs" else ru) for t, n in by_tier.items() if t not in row_tiers
    )
    if storage:
        s_up = sum(n for t, n in storage.topology.switches_by_tier.items() if t != "leaf")
        center_switches += s_up
        center_u += s_up * s_ru
    mgmt: ManagementCounts | None = None
    mgmt_ports_server = int(facility_value("management", "ports_per_server"))
    if mgmt_on:
        racks = [
            (spr * mgmt_ports_server, n_cracks),
            (block_switches, n_blocks),
            (center_switches, 1),
        ]
        # uplinks run from any rack to the centre rows: bounded below like a leaf-spine run
        n_ports = (
            n_servers * mgmt_ports_server
            + topo.n_switches
            + (storage.topology.n_switches if storage else 0)
        )
        mgmt = management_counts(scenario.management.link_gbps, racks, n_ports, 0.0)
        agg = cat.switch(MANAGEMENT_AGGREGATION)
        center_u += mgmt.n_aggregation_switches * agg.rack_units
        center_u += -(-center_switches // per_access) if center_switches else 0
    n_center = -(-center_u // usable_u) if center_u else 0

    # the site: row blocks in columns side by side (a roughly square hall), halls in a grid
    shape = _site_shape(n_crows, block, slots, n_center, width, pitch, float(f.hall_max_m2))
    cols, rpc, n_crow_center, n_halls = shape.columns, shape.rows, shape.center_rows, shape.halls
    cross = facility_value("aisle", "cross_m")
    inner = cols * slots * width + (cols - 1) * cross  # one hall's racks, end to end
    # the farthest compute row from the centre rows (in the middle of every column)
    m = rpc // 2
    dy_center_rows = max(m + n_crow_center - 1, rpc + n_crow_center - 1 - m)
    # a leaf's network racks (column 0 or the last) to the far end of the centre rows
    n_center_hall = -(-n_center // n_halls) if n_center else 0
    if cols == 1:  # centre rows as wide as the row, filled from the left
        far_x = _far(left, n_net, slots) * width
    else:  # a centre block in the middle of the hall (_center_x places its racks)
        used = -(-n_center_hall // n_crow_center) if n_crow_center else 0
        lo, hi = (
            _center_x(0, used, cols, slots, width, cross),
            _center_x(used - 1, used, cols, slots, width, cross),
        )
        step = slots * width + cross
        far_x = max(
            abs(hi - (left + 0.5) * width),
            abs((cols - 1) * step + (left + n_net - 0.5) * width - lo),
        )
    to_center = (
        far_x + dy_center_rows * pitch + rise2
        if n_crow_center
        else inner - width + (rpc - 1) * pitch + rise2
    )
    nic_leaf = _far(left, n_net, slots) * width + (block // 2) * pitch + rise2
    if n_center_hall <= 1:
        across_center = in_rack
    elif cols > 1:
        across_center = hi - lo + (n_crow_center - 1) * pitch + rise2
    elif n_crow_center == 1:
        across_center = (n_center_hall - 1) * width + rise2
    else:
        across_center = (slots - 1) * width + (n_crow_center - 1) * pitch + rise2
    end = facility_value("aisle", "end_m")
    hall_w = inner + 2 * end
    gap = facility_value("hall", "gap_m")
    hall_d = (rpc + n_crow_center) * pitch + facility_value("aisle", "cold_m")
    # between halls (a near-square grid of them): the farthest hall's centre rows to the
    # middle hall's, where the top tier stands (every tier below stays inside its hall)
    grid_x, grid_y = _hall_grid(n_halls)
    inter_hall = (grid_x // 2) * (hall_w + gap) + (grid_y // 2) * (hall_d + gap)
    top = _top_class(topo)
    lengths: dict[str, float] = {}
    for lc in topo.links:
        if lc.name == "nic-leaf":
            lengths[lc.name] = nic_leaf
        elif lc.name == "leaf-spine" and topo.family == "dragonfly-plus":
            lengths[lc.name] = in_rack if n_net <= 1 else (n_net - 1) * width + rise2
        elif lc.name == "leaf-spine":
            lengths[lc.name] = to_center
        elif lc.name in ("spine-core", "core-super"):
            lengths[lc.name] = across_center
        elif lc.name == "block-ocs":  # a block's uplinks run to the OCS racks at the centre
            lengths[lc.name] = to_center
        elif lc.name == "global":  # block to block, the whole hall across and deep
            lengths[lc.name] = (
                (inner - width if cols > 1 else max(0, n_net - 1) * width)
                + (rpc + n_crow_center - 1) * pitch
                + rise2
            )
        if lc.name == top and n_halls > 1:
            lengths[lc.name] += inter_hall
    if n_halls > 1:
        notes.append(
            f"{n_halls} data halls in a {grid_x} x {grid_y} grid (facility.hall_max_m2 = "
            f"{f.hall_max_m2:,.0f} m2 each): the {top} links cross between halls to the middle "
            f"hall, {inter_hall:,.1f} m more than inside one"
        )
    if topo.tiers == 0 and topo.family != "ocs":
        notes.append(
            "a switchless family: its direct links keep fabric.direct_link_m (the floor plan "
            "does not place wrap-around links)"
        )
    storage_lengths: dict[str, float] = {}
    if storage:
        s_group = _leaf_group(storage.topology)
        s_span = _rows_spanned(-(-s_group // spr), row) if s_group else 1
        s_block = min(n_crows, max(block, s_span, -(-n_crows // max(1, s_leaves))))
        for lc in storage.topology.links:
            if lc.name == "nic-leaf":
                storage_lengths[lc.name] = (
                    _far(left, n_net, slots) * width + (s_block // 2) * pitch + rise2
                )
            else:
                crosses = n_halls > 1 and lc.name == _top_class(storage.topology)
                storage_lengths[lc.name] = to_center + (inter_hall if crosses else 0.0)
    if mgmt is not None:
        mgmt = dataclasses.replace(mgmt, uplink_m=_ceil_tenth(to_center))
    if group_racks > row:
        notes.append(
            f"a leaf group ({group:,} servers, {group_racks} racks) spans {span} rows of "
            f"{row} racks; its leaves sit in the middle row"
        )
    cooling = _native_cooling(hw.server.key) if f.cooling == "auto" else f.cooling
    return Layout(
        n_servers=n_servers,
        servers_per_rack=spr,
        n_compute_racks=n_cracks,
        racks_per_row=row,
        n_compute_rows=n_crows,
        leaf_group_servers=group,
        leaf_group_racks=group_racks,
        rows_per_block=block,
        n_blocks=n_blocks if n_net else 0,
        network_racks_per_block=n_net,
        n_center_racks=n_center,
        n_center_rows=n_crow_center,
        row_slots=slots,
        pitch_m=pitch,
        width_m=width,
        lengths_m={k: _ceil_tenth(v) for k, v in lengths.items()},
        storage_lengths_m={k: _ceil_tenth(v) for k, v in storage_lengths.items()},
        management=mgmt,
        hall_width_m=hall_w,
        hall_depth_m=hall_d,
        cooling=cooling,
        native_cooling=_native_cooling(hw.server.key),
        notes=tuple(notes),
        n_columns=cols,
        rows_per_column=rpc,
        n_halls=n_halls,
        rows_per_hall=shape.hall_rows,
        hall_gap_m=gap,
        cross_aisle_m=cross,
    )


def class_lengths_m(scenario: Scenario, layout: Layout) -> dict[str, float]:
    """Return the length each compute link class is built with, m.

    The floor plan's run (``facility.cable_lengths = floorplan``) unless the class's
    ``fabric.*_m`` key was set away from its default; ``keys`` takes every key as given.
    """
    fab = scenario.fabric
    out = {}
    for name, run in layout.lengths_m.items():
        key = CLASS_KEYS[name]
        given = float(getattr(fab, key))
        keep = scenario.facility.cable_lengths == "keys" or given != _DEFAULT_M[key]
        out[name] = given if keep else run
    return out


def _with_lengths(topo: Topology, lengths: Mapping[str, float]) -> Topology:
    if not lengths:
        return topo
    links = tuple(
        dataclasses.replace(lc, length_m=lengths[lc.name]) if lc.name in lengths else lc
        for lc in topo.links
    )
    req = topo.request
    req = dataclasses.replace(
        req,
        nic_leaf_m=lengths.get("nic-leaf", req.nic_leaf_m),
        leaf_spine_m=lengths.get("leaf-spine", req.leaf_spine_m),
        spine_core_m=lengths.get("spine-core", lengths.get("global", req.spine_core_m)),
    )
    return dataclasses.replace(topo, links=links, request=req)


def rack_positions(layout: Layout) -> dict[str, np.ndarray]:
    """Return every rack's centre ``x_m``, ``y_m`` and ``kind`` (0 compute, 1 network).

    Rows fill hall by hall, column by column (each column a stack of whole row blocks); a
    block keeps its network racks in the middle of its middle row; each hall's centre rows
    (in the middle of every column) are filled row-major from the left, across the columns.
    """
    w, p, end = layout.width_m, layout.pitch_m, facility_value("aisle", "end_m")
    row, slots, n_net = layout.racks_per_row, layout.row_slots, layout.network_racks_per_block
    left = -(-row // 2)
    rpc = layout.rows_per_column or layout.n_compute_rows
    cols, halls = layout.n_columns, layout.n_halls
    m, n_center_rows = rpc // 2, layout.n_center_rows
    col_step = slots * w + layout.cross_aisle_m
    across = _hall_grid(halls)[0]

    def hall_x0(h: int) -> float:
        return (h % across) * (layout.hall_width_m + layout.hall_gap_m)

    def hall_y0(h: int) -> float:
        return (h // across) * (layout.hall_depth_m + layout.hall_gap_m)

    xs: list[float] = []
    ys: list[float] = []
    kinds: list[int] = []
    remaining = layout.n_compute_racks
    b, n_rows = layout.rows_per_block, layout.n_compute_rows
    per_hall_rows = layout.rows_per_hall or n_rows
    for g0 in range(0, n_rows, rpc):  # one column of rows at a time
        h, in_hall = divmod(g0, per_hall_rows)
        c = in_hall // rpc
        x0 = end + hall_x0(h) + c * col_step
        rows_here = min(rpc, n_rows - g0, per_hall_rows - in_hall)
        middle_rows = {s + (min(s + b, rows_here) - s) // 2 for s in range(0, rows_here, b)}
        for r in range(rows_here):
            y = hall_y0(h) + (r if r < m else r + n_center_rows) * p
            in_row = min(row, remaining)
            remaining -= in_row
            for i in range(in_row):
                slot = i if i < left else i + n_net
                xs.append(x0 + (slot + 0.5) * w)
                ys.append(y)
                kinds.append(0)
            if r in middle_rows and layout.n_blocks:
                for j in range(n_net):
                    xs.append(x0 + (left + j + 0.5) * w)
                    ys.append(y)
                    kinds.append(1)
    per_hall = -(-layout.n_center_racks // halls) if layout.n_center_racks else 0
    used = -(-per_hall // n_center_rows) if n_center_rows else 0
    for k in range(layout.n_center_racks):
        h, pos = divmod(k, per_hall)
        if cols == 1:  # as wide as the row, from the left
            crow, slot = divmod(pos, slots)
            x = (slot + 0.5) * w
        else:  # the centre block in the middle of the hall
            crow, at = divmod(pos, used)
            x = _center_x(at, used, cols, slots, w, layout.cross_aisle_m)
        xs.append(end + hall_x0(h) + x)
        ys.append(hall_y0(h) + (m + crow) * p)
        kinds.append(1)
    return {
        "x_m": np.asarray(xs, dtype=np.float64),
        "y_m": np.asarray(ys, dtype=np.float64),
        "kind": np.asarray(kinds, dtype=np.int8),
    }


@dataclass(frozen=True)
class FloorPlan:
    """The layout with its power density and cooling verdict.

    Attributes
    ----------
    layout
        Racks, rows and runs.
    lengths_m
        The length each compute link class was built with, m (the floor plan's run, or the
        key that overrides it).
    compute_rack_kw, network_rack_kw
        The fullest compute rack's IT power, and the mean over network racks, kW.
    total_it_kw
        Servers plus all three networks, kW (IT load, before PUE).
    verdict
        ``air``, ``air-contained`` (above typical colocation air, within the air limit) or
        ``liquid`` (direct-to-chip liquid required).
    warnings, notes
        What the page warns about (a rack above the air limit on air), and context.
    """

    layout: Layout
    lengths_m: Mapping[str, float]
    compute_rack_kw: float
    network_rack_kw: float
    total_it_kw: float
    air_typical_kw: float
    air_limit_kw: float
    verdict: str
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def kw_per_rack(self) -> float:
        """The densest rack type's IT power, kW."""
        return max(self.compute_rack_kw, self.network_rack_kw)

    @property
    def liquid_required(self) -> bool:
        """Whether the densest rack is beyond what air cooling takes."""
        return self.verdict == "liquid"

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for ``bom --json``."""
        lay = self.layout
        return {
            "n_servers": lay.n_servers,
            "servers_per_rack": lay.servers_per_rack,
            "compute_racks": lay.n_compute_racks,
            "network_racks": lay.n_network_racks,
            "racks": lay.n_racks,
            "rows": lay.n_rows,
            "racks_per_row": lay.racks_per_row,
            "leaf_group_servers": lay.leaf_group_servers,
            "compute_rack_kw": self.compute_rack_kw,
            "network_rack_kw": self.network_rack_kw,
            "kw_per_rack": self.kw_per_rack,
            "total_it_kw": self.total_it_kw,
            "cooling": lay.cooling,
            "verdict": self.verdict,
            "liquid_required": self.liquid_required,
            "air_typical_kw_per_rack": self.air_typical_kw,
            "air_limit_kw_per_rack": self.air_limit_kw,
            "floor_area_m2": lay.floor_area_m2,
            "hall_width_m": lay.hall_width_m,
            "hall_depth_m": lay.hall_depth_m,
            "n_halls": lay.n_halls,
            "row_columns_per_hall": lay.n_columns,
            "site_width_m": lay.site_width_m,
            "site_depth_m": lay.site_depth_m,
            "lengths_m": dict(self.lengths_m),
            "floorplan_lengths_m": dict(lay.lengths_m),
            "storage_lengths_m": dict(lay.storage_lengths_m),
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            "sources": dict(self.sources),
        }


_VERDICT_TEXT = {
    "air": "air cooling (within the ~{typ:g} kW of typical air-cooled colocation)",
    "air-contained": "air with hot/cold-aisle containment or rear-door heat exchangers "
    "(above the ~{typ:g} kW of typical air-cooled colocation, within {lim:g} kW)",
    "liquid": "direct-to-chip liquid cooling required (above the {lim:g} kW air can take)",
}


def halls_text(layout: Layout) -> str:
    """Say the halls' plan size: ``"69.6 x 82.2 m"``, or their count, size and campus grid."""
    one = f"{layout.hall_width_m:,.1f} x {layout.hall_depth_m:,.1f} m"
    if layout.n_halls == 1:
        return one
    across, deep = _hall_grid(layout.n_halls)
    return (
        f"{layout.n_halls} halls of {one} in a {across} x {deep} grid, "
        f"{layout.site_width_m:,.1f} x {layout.site_depth_m:,.1f} m"
    )


def verdict_text(plan: FloorPlan) -> str:
    """One line: the densest rack's kW and what cools it."""
    text = _VERDICT_TEXT[plan.verdict].format(typ=plan.air_typical_kw, lim=plan.air_limit_kw)
    return f"{plan.kw_per_rack:,.1f} kW per rack: {text}"


def _power_plan(
    scenario: Scenario,
    hw: Hardware,
    layout: Layout,
    lengths: Mapping[str, float],
    lines: tuple[BomLine, ...] | list[BomLine],
    networks: tuple[NetworkBill, ...],
    cat: Catalog,
) -> FloorPlan:
    n = layout.n_servers

    def nic_side(ls: Any) -> float:
        return sum(x.power_w for x in ls if x.category == "nics" or x.where.endswith("(NIC side)"))

    per_server_w = hw.server.power_w + nic_side(lines) / n
    net_w = sum(x.power_w for x in lines) - nic_side(lines)
    for net in networks:
        if net.name == "storage":
            # the storage cards are in the server's own power figure (DGX); their optics not
            per_server_w += sum(x.power_w for x in net.lines if x.where.endswith("(NIC side)")) / n
            net_w += net.power_w - nic_side(net.lines)
        else:
            net_w += net.power_w
    mgmt = layout.management
    access_w = 0.0
    if mgmt is not None:
        access = cat.switch(MANAGEMENT_SWITCH_BY_GBPS[mgmt.link_gbps])
        per_access = int(facility_value("management", "access_ports"))
        access_w = -(-layout.servers_per_rack // per_access) * access.power_w
        net_w -= access_w * layout.n_compute_racks  # those sit in the compute racks
    fullest = min(layout.servers_per_rack, n)  # the fullest compute rack's servers
    compute_kw = (fullest * per_server_w + access_w) / 1000.0
    network_kw = net_w / 1000.0 / layout.n_network_racks if layout.n_network_racks else 0.0
    total_kw = (n * per_server_w + access_w * layout.n_compute_racks + net_w) / 1000.0
    typical = facility_value("cooling", "air_typical_kw_per_rack")
    limit = float(scenario.facility.air_limit_kw_per_rack)
    densest = max(compute_kw, network_kw)
    verdict = "air" if densest <= typical else ("air-contained" if densest <= limit else "liquid")
    warnings: list[str] = []
    notes = list(layout.notes)
    if layout.cooling == "air" and densest > limit:
        warnings.append(
            f"{densest:,.1f} kW per rack is above the {limit:g} kW an air-cooled rack takes "
            "(facility.air_limit_kw_per_rack): air cooling cannot carry it; direct-to-chip "
            "liquid is required"
            + (
                ""
                if _rack_scale(hw.server.key)
                else f", or fewer servers per rack (facility.servers_per_rack = "
                f"{layout.servers_per_rack} now)"
            )
        )
    elif layout.cooling == "air" and densest > typical:
        notes.append(
            f"{densest:,.1f} kW per rack is above the ~{typical:g} kW of typical air-cooled "
            "colocation: the hall needs hot/cold-aisle containment or rear-door heat exchangers"
        )
    if layout.cooling != layout.native_cooling:
        notes.append(
            f"{hw.server.name} is {layout.native_cooling}-cooled by design; "
            f"facility.cooling = {layout.cooling}"
        )
    sources = {
        "servers_per_rack": str(
            FACILITY_DATA["servers"]
            .get(hw.server.key, {})
            .get("servers_per_rack", {"source": "estimate: 4 per rack, no entry for this server"})[
                "source"
            ]
        ),
        "server_power_w": cat.source_note("servers", hw.server.key, "power_w"),
        "switch_power_w": cat.source_note("switches", hw.switch.key, "power_w"),
        "nic_power_w": cat.source_note("nics", hw.nic.key, "power_w"),
        "air_typical_kw_per_rack": str(
            FACILITY_DATA["cooling"]["air_typical_kw_per_rack"]["source"]
        ),
        "air_limit_kw_per_rack": str(FACILITY_DATA["cooling"]["air_limit_kw_per_rack"]["source"]),
        "row_pitch_m": "rack depth + (cold + hot aisle) / 2: "
        + str(FACILITY_DATA["aisle"]["cold_m"]["source"]),
    }
    return FloorPlan(
        layout=layout,
        lengths_m=dict(lengths),
        compute_rack_kw=compute_kw,
        network_rack_kw=network_kw,
        total_it_kw=total_kw,
        air_typical_kw=typical,
        air_limit_kw=limit,
        verdict=verdict,
        warnings=tuple(warnings),
        notes=tuple(notes),
        sources=sources,
    )


@dataclass(frozen=True)
class Site:
    """The compute fabric with the floor plan's lengths, and the other two networks' designs."""

    scenario: Scenario
    hardware: Hardware
    topology: Topology
    layout: Layout
    lengths_m: Mapping[str, float]
    storage: StorageDesign | None

    def finish(
        self, lines: tuple[BomLine, ...] | list[BomLine], cat: Catalog, costs: CostSpec
    ) -> tuple[tuple[NetworkBill, ...], FloorPlan]:
        """Price the storage and management networks and put power on the floor plan."""
        networks: list[NetworkBill] = []
        if self.storage is not None:
            networks.append(storage_bill(self.storage, cat, costs))
        if self.layout.management is not None:
            networks.append(management_bill(self.layout.management, cat, costs))
        plan = _power_plan(
            self.scenario, self.hardware, self.layout, self.lengths_m, lines, tuple(networks), cat
        )
        return tuple(networks), plan


def plan_site(scenario: Scenario, hw: Hardware, topo: Topology, cat: Catalog) -> Site:
    """Lay out the racks, size the storage and management networks, set the cable lengths.

    Raises
    ------
    FabricModelError
        On a ``facility.*``, ``storage.*`` or ``management.*`` key the design cannot have.
    """
    n_servers = max(1, -(-built_gpus(scenario, topo) // scenario.cluster.gpus_per_node))
    storage = storage_design(scenario, hw, cat, n_servers)
    layout = _layout(scenario, hw, topo, storage, cat)
    lengths = class_lengths_m(scenario, layout)
    if storage is not None and scenario.facility.cable_lengths == "floorplan":
        storage = dataclasses.replace(
            storage, topology=_with_lengths(storage.topology, layout.storage_lengths_m)
        )
    return Site(scenario, hw, _with_lengths(topo, lengths), layout, lengths, storage)
