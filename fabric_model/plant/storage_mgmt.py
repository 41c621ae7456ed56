"""The other two networks of a GPU cluster: storage and out-of-band management.

Both are priced apart from the compute (scale-out) fabric, so a bill shows the compute /
storage / management split while every compute-fabric total stays what it was.

Storage (``storage.*``)
    Each server's ``storage.nics_per_node`` ports of ``storage.link_gbps`` (default 2 x 200
    GbE, each to a different switch: the converged North/South network of NVIDIA's HGX
    reference architecture [SF5] and the bonded storage ports of DGX BasePOD [SF3]) go into
    a non-blocking Spectrum-4 (SN5600) Ethernet leaf-spine, the storage switch of DGX SuperPOD
    GB200 [S44]. The fabric is the package's own fat-tree builder with one rail per storage
    port, so leaves, spines, cables and transceivers follow the same rules as the compute
    fabric (:func:`fabric_model.plant.cost.link_lines`). The NIC is the dual-port BlueField-3 DPU
    B3220, ``ceil(ports / 2)`` cards per server. The parallel filesystem's own servers and
    their ports are not counted.

Management (``management.*``)
    One BMC port per server [SF3] [SF4] and one management port per switch go into 48-port
    access switches (SN2201 at 1 GbE, SN2410 at 25 GbE), one or more in every rack; every
    access switch sends two 100G uplinks to a redundant pair of SN4600C aggregation switches
    (more pairs as the uplinks need). The server ports are on board (their price is the
    server's); patch cords are counted per port. The site's management core is not counted.

Sources are in ``assets/catalog.yaml`` (parts) and ``assets/facility.yaml`` (the rest).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from fabric_model.caching import lru_cached
from fabric_model.catalog import Catalog
from fabric_model.errors import InfeasibleDesignError
from fabric_model.plant.hardware import Hardware
from fabric_model.plant.lines import CATEGORIES, BomLine, link_lines
from fabric_model.scenario import FACILITY_DATA, CostSpec, Scenario
from fabric_model.topology import Topology, TopologyRequest, build_topology_from_request

__all__ = [
    "MANAGEMENT_AGGREGATION",
    "MANAGEMENT_SWITCH_BY_GBPS",
    "STORAGE_NIC",
    "STORAGE_SWITCH",
    "ManagementCounts",
    "NetworkBill",
    "StorageDesign",
    "management_bill",
    "management_counts",
    "storage_bill",
    "storage_design",
]

#: Catalog keys of the storage network's NIC and switch.
STORAGE_NIC = "bf3_b3220"
STORAGE_SWITCH = "sn5600"
#: Management access switch per ``management.link_gbps``, and the aggregation switch.
MANAGEMENT_SWITCH_BY_GBPS = {1: "sn2201", 25: "sn2410"}
MANAGEMENT_AGGREGATION = "sn4600c"

_MGMT = FACILITY_DATA["management"]


def _value(entry: dict[str, Any]) -> float:
    return float(entry["value"])


@dataclass(frozen=True)
class NetworkBill:
    """The bill of one network besides the compute fabric (``storage`` or ``management``)."""

    name: str
    lines: tuple[BomLine, ...]
    notes: tuple[str, ...] = ()

    @property
    def capex_by_category_usd(self) -> dict[str, float]:
        """Capex per category, USD."""
        return {c: sum(x.capex_usd for x in self.lines if x.category == c) for c in CATEGORIES}

    @property
    def power_by_category_w(self) -> dict[str, float]:
        """IT power per category, W."""
        return {c: sum(x.power_w for x in self.lines if x.category == c) for c in CATEGORIES}

    @property
    def capex_usd(self) -> float:
        """Capex, USD."""
        return sum(x.capex_usd for x in self.lines)

    @property
    def power_w(self) -> float:
        """IT power, W."""
        return sum(x.power_w for x in self.lines)

    @property
    def n_switches(self) -> int:
        """Switches."""
        return sum(x.quantity for x in self.lines if x.category == "switches")

    def to_frame(self) -> Any:
        """Return the lines as a pandas DataFrame, with a ``network`` column first."""
        import pandas as pd

        return pd.DataFrame([{"network": self.name, **x.to_dict()} for x in self.lines])

    def to_dict(self) -> dict[str, Any]:
        """Plain dict: totals by category, switches, notes and the lines."""
        return {
            "capex_usd": {**self.capex_by_category_usd, "total": self.capex_usd},
            "power_w": {**self.power_by_category_w, "total": self.power_w},
            "n_switches": self.n_switches,
            "notes": list(self.notes),
            "lines": [x.to_dict() for x in self.lines],
        }


# ------------------------------------------------------------------------------- storage


@dataclass(frozen=True)
class StorageDesign:
    """The storage network's parts and its built leaf-spine (lengths set by the floor plan)."""

    hardware: Hardware
    topology: Topology
    n_servers: int
    ports_per_server: int
    cards_per_server: int


@lru_cached("storage_mgmt._storage_topology", 64, key="the storage TopologyRequest")
def _storage_topology(req: TopologyRequest) -> Topology:
    return build_topology_from_request("fat-tree", req)


def storage_design(
    scenario: Scenario, hw: Hardware, cat: Catalog, n_servers: int
) -> StorageDesign | None:
    """Size the storage network of ``n_servers`` servers (None when ``storage.enabled`` is off).

    Raises
    ------
    InfeasibleDesignError
        On ``storage.link_gbps`` when the storage NIC or switch lacks that speed (the message
        lists the speeds allowed).
    """
    s = scenario.storage
    if not s.enabled:
        return None
    nic, switch = cat.nic(STORAGE_NIC), cat.switch(STORAGE_SWITCH)
    allowed = [g for g in nic.speeds_gbps if g in switch.port_speeds_gbps]
    if s.link_gbps not in allowed:
        raise InfeasibleDesignError(
            "storage.link_gbps",
            f"{s.link_gbps} Gb/s is not a speed of the storage network's {nic.name} and "
            f"{switch.name}; allowed: {', '.join(map(str, allowed))}",
        )
    radix = switch.radix(s.link_gbps)
    ports = n_servers * s.nics_per_node
    req = TopologyRequest(
        n_gpus=max(2, ports),
        gpus_per_node=s.nics_per_node,
        nvlink_domain=s.nics_per_node,
        nics_per_gpu=1,
        link_gbps=s.link_gbps,
        radix=radix,
        switch_key=switch.key,
        rail_optimized=True,  # a server's ports on different leaves, as [SF5] cables them
    )
    try:
        topo = _storage_topology(req)
    except InfeasibleDesignError as exc:
        raise InfeasibleDesignError(
            "storage.nics_per_node", f"the storage network cannot be built: {exc}"
        ) from None
    storage_hw = dataclasses.replace(
        hw, vendor=cat.vendor("roce"), switch=switch, nic=nic, radix=radix, planes=1
    )
    return StorageDesign(
        hardware=storage_hw,
        topology=topo,
        n_servers=n_servers,
        ports_per_server=s.nics_per_node,
        cards_per_server=math.ceil(s.nics_per_node / nic.n_ports),
    )


def _neutral(costs: CostSpec) -> CostSpec:
    """Keep the price overrides that apply to another network: the vendor-neutral ones."""
    return dataclasses.replace(costs, switch_usd=None, nic_usd=None)


def storage_bill(design: StorageDesign, cat: Catalog, costs: CostSpec) -> NetworkBill:
    """Price the storage network (its topology already carries the floor plan's lengths)."""
    topo, sw, nic = design.topology, design.hardware.switch, design.hardware.nic
    lines = [
        BomLine(
            "switches",
            sw.name,
            sw.key,
            f"storage {tier}",
            count,
            float(sw.price_usd),
            float(sw.power_w),
            cat.source_note("switches", sw.key, "price_usd"),
        )
        for tier, count in topo.switches_by_tier.items()
        if count
    ]
    lines.append(
        BomLine(
            "nics",
            nic.name,
            nic.key,
            "servers (storage)",
            design.n_servers * design.cards_per_server,
            float(nic.price_usd),
            float(nic.power_w),
            cat.source_note("nics", nic.key, "price_usd"),
        )
    )
    for line in link_lines(topo, design.hardware, cat, _neutral(costs)):
        lines.append(dataclasses.replace(line, where=f"storage {line.where}"))
    ports = design.n_servers * design.ports_per_server
    notes = (
        f"{design.n_servers:,} servers x {design.ports_per_server} ports of "
        f"{topo.request.link_gbps}G = {ports:,} ports into a non-blocking {sw.name} leaf-spine "
        f"({topo.tiers} tier{'s' if topo.tiers > 1 else ''}); the filesystem's servers and "
        "their ports are not counted",
    )
    return NetworkBill("storage", tuple(lines), notes)


# ---------------------------------------------------------------------------- management


@dataclass(frozen=True)
class ManagementCounts:
    """Switches and cables of the management network, as the floor plan places them."""

    link_gbps: int
    n_ports: int
    n_access_switches: int
    n_aggregation_switches: int
    uplink_m: float


def management_counts(
    link_gbps: int, n_ports_by_rack: list[tuple[int, int]], n_ports: int, uplink_m: float
) -> ManagementCounts:
    """Count access and aggregation switches.

    Parameters
    ----------
    link_gbps
        ``management.link_gbps``.
    n_ports_by_rack
        ``(most management ports in one rack, how many such racks)`` pairs.
    n_ports
        Management ports in all (one per server BMC and one per switch).
    uplink_m
        Longest access-to-aggregation run, m.

    Returns
    -------
    ManagementCounts
        ``ceil(ports / 48)`` access switches per rack; ``2 ceil(2 A / (2 x 64))``
        aggregation switches for ``A`` access switches (none when there is one).
    """
    per = int(_value(_MGMT["access_ports"]))
    access = sum(math.ceil(p / per) * n for p, n in n_ports_by_rack if p)
    uplinks = access * int(_value(_MGMT["uplinks_per_access_switch"]))
    agg_radix = 64  # SN4600C at 100G (assets/catalog.yaml); checked in the tests
    aggregation = 2 * math.ceil(uplinks / (2 * agg_radix)) if access > 1 else 0
    return ManagementCounts(link_gbps, n_ports, access, aggregation, uplink_m)


def management_bill(counts: ManagementCounts, cat: Catalog, costs: CostSpec) -> NetworkBill:
    """Price the management network from its counts.

    Raises
    ------
    InfeasibleDesignError
        On ``management.link_gbps`` when no uplink transceiver reaches the aggregation.
    """
    access = cat.switch(MANAGEMENT_SWITCH_BY_GBPS[counts.link_gbps])
    agg = cat.switch(MANAGEMENT_AGGREGATION)
    cord = _MGMT["patch_cord_usd"][str(counts.link_gbps)]
    lines = [
        BomLine(
            "switches",
            access.name,
            access.key,
            "management access (in every rack)",
            counts.n_access_switches,
            float(access.price_usd),
            float(access.power_w),
            cat.source_note("switches", access.key, "price_usd"),
        ),
        BomLine(
            "nics",
            f"on-board {counts.link_gbps}G management port (BMC), in the server price",
            "bmc",
            "servers and switches (management)",
            counts.n_ports,
            0.0,
            0.0,
            "[SF3] [SF4] the BMC port is on the server's board",
        ),
        BomLine(
            "cables",
            f"{counts.link_gbps}G management patch cord",
            f"patch_{counts.link_gbps}g",
            "management access (in rack)",
            counts.n_ports,
            float(cord["value"]),
            0.0,
            str(cord["source"]),
        ),
    ]
    if counts.n_aggregation_switches:
        uplink_gbps = int(_value(_MGMT["uplink_gbps"]))
        n_uplinks = counts.n_access_switches * int(_value(_MGMT["uplinks_per_access_switch"]))
        optic = cat.optic_for(
            "switch",
            uplink_gbps,
            counts.uplink_m,
            cage_gbps=agg.cage_gbps,
            protocol="ethernet",
            key="management.link_gbps",
        )
        fiber = cat.fiber
        optic_price = float(
            optic.price_usd if costs.optic_switch_usd is None else costs.optic_switch_usd
        )
        fiber_price = float(fiber.price_usd if costs.fiber_usd is None else costs.fiber_usd)
        lines += [
            BomLine(
                "switches",
                agg.name,
                agg.key,
                "management aggregation",
                counts.n_aggregation_switches,
                float(agg.price_usd),
                float(agg.power_w),
                cat.source_note("switches", agg.key, "price_usd"),
            ),
            BomLine(
                "optics",
                optic.name,
                optic.key,
                "management uplink (both ends)",
                2 * n_uplinks,
                optic_price,
                float(optic.power_w),
                cat.source_note("optics", optic.key, "price_usd"),
            ),
            BomLine(
                "cables",
                fiber.name,
                fiber.key,
                "management uplink",
                n_uplinks,
                fiber_price,
                float(fiber.power_w),
                cat.source_note("cables", fiber.key, "price_usd"),
            ),
        ]
    notes = (
        f"{counts.n_ports:,} management ports (one BMC per server, one per switch) into "
        f"{counts.n_access_switches:,} {access.name} access switches"
        + (
            f", {counts.n_aggregation_switches} {agg.name} aggregation switches"
            if counts.n_aggregation_switches
            else ""
        )
        + "; the site's management core is not counted",
    )
    return NetworkBill("management", tuple(x for x in lines if x.quantity), notes)
