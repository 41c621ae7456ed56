"""Line items of a bill: each part of a fabric (switch, NIC, module, cable) priced and powered.

The counting rules of :mod:`fabric_model.plant.cost` (copper or optics per link class by
length, the twin-port rule on switch ends, breakout modules for planes) are applied here, one
link class or switch tier at a time, so the compute fabric, the storage and management
networks (:mod:`fabric_model.plant.storage_mgmt`) and the floor plan's tallies
(:mod:`fabric_model.plant.floorplan`) price their parts the same way; the whole bill is
assembled in :mod:`fabric_model.plant.bill`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fabric_model.catalog import Cable, Catalog, Optic, load_catalog
from fabric_model.errors import InfeasibleDesignError
from fabric_model.plant.hardware import Hardware
from fabric_model.plant.hybrid import partition_scenario, partition_view
from fabric_model.scenario import CostSpec, Scenario
from fabric_model.topology import LinkClass, Topology
from fabric_model.topology.hybrid import HybridTopology
from fabric_model.topology.ocs import OCS_DATA

__all__ = [
    "CATEGORIES",
    "CPO_SUFFIX",
    "BomLine",
    "LinkMedia",
    "OcsChannel",
    "fabric_lines",
    "hybrid_bom_lines",
    "is_cpo",
    "link_lines",
    "link_media",
    "ocs_bom_lines",
    "ocs_channel",
    "unit_price",
]

#: Capex/power categories, in display order.
CATEGORIES = ("switches", "nics", "optics", "cables")


@dataclass(frozen=True)
class BomLine:
    """One line of the bill: a part, where it sits, how many, what it costs and draws."""

    category: str
    item: str
    key: str
    where: str
    quantity: int
    unit_price_usd: float
    unit_power_w: float
    price_source: str

    @property
    def capex_usd(self) -> float:
        """Quantity x unit price, USD."""
        return self.quantity * self.unit_price_usd

    @property
    def power_w(self) -> float:
        """Quantity x unit power, W."""
        return self.quantity * self.unit_power_w

    def to_dict(self) -> dict[str, Any]:
        """Plain dict with the derived columns."""
        return {
            **dataclasses.asdict(self),
            "capex_usd": self.capex_usd,
            "power_w": self.power_w,
        }


#: BOM-line key suffix of a switch's co-packaged optical ports (``fabric.optics = cpo``).
CPO_SUFFIX = ":cpo"


def is_cpo(key: str) -> bool:
    """Return whether a bill line's key is a switch's co-packaged optical ports."""
    return key.endswith(CPO_SUFFIX)


def _uses_cpo(hw: Hardware) -> bool:
    """Return whether this hardware's switch ports are co-packaged.

    The storage and management networks reuse the compute ``Hardware`` with their own,
    pluggable, switches.
    """
    return hw.optics == "cpo" and hw.switch.has_cpo


def unit_price(override: float | None, catalog_value: float) -> float:
    """Return a part's unit price: the ``costs.*`` override if set, else the catalog's."""
    return float(catalog_value) if override is None else float(override)


@dataclass(frozen=True)
class LinkMedia:
    """How the cables of one link class are built: copper, or fiber with a module per end.

    Attributes
    ----------
    copper
        The copper cable (``dac``, ``acc``, ``lacc``) when one carries the link's speed over
        its length, else None (the link is optical).
    fiber
        The fiber entry, counted once per optical link.
    nic_optic, switch_optic
        Transceiver at a NIC end and at a switch end of an optical link (None for copper
        links and for ends the class does not have).
    """

    copper: Cable | None
    fiber: Cable
    nic_optic: Optic | None
    switch_optic: Optic | None

    @property
    def cable(self) -> Cable:
        """The physical cable of one link: the copper cable, else the fiber."""
        return self.copper if self.copper is not None else self.fiber

    @property
    def links_per_cable(self) -> int:
        """Logical links one physical cable carries (2 for a 1:2 splitter DAC), count."""
        return max(1, int(self.copper.links_per_cable)) if self.copper is not None else 1


def link_media(lc: LinkClass, hw: Hardware, cat: Catalog) -> LinkMedia:
    """Choose the media of one link class by speed, length and what sits at its ends.

    A copper cable when the catalog has one for the speed over the length (a NIC-to-switch
    class only with a splitter that fans one cage out to ``cage / link`` NICs, and at the
    switch cage's lane rate); otherwise fiber, with the cheapest module by reach at each end
    (switch modules sized to the cage: the twin-port rule).

    Raises
    ------
    InfeasibleDesignError
        If no transceiver runs the link's speed over its length.
    """
    sw = hw.switch
    on_switch = bool(lc.port_groups)
    cpo = on_switch and _uses_cpo(hw)  # fiber straight into the switch's optical engines
    # a switch cage has 8 SerDes lanes: 800G cages run 100G lanes, 1.6T cages 200G lanes
    lane_gbps = sw.cage_gbps // 8
    # NIC to switch: one twin-port cage feeds cage/link NICs through a splitter cable
    split = max(1, sw.cage_gbps // lc.link_gbps) if on_switch and lc.n_nic_ends else None
    copper = (
        None
        if cpo
        else cat.cable_for(
            lc.link_gbps, lc.length_m, split=split, lane_gbps=lane_gbps if on_switch else None
        )
    )
    if copper is not None:
        return LinkMedia(copper, cat.fiber, None, None)
    protocol = hw.vendor.protocol
    nic_optic = None
    if lc.n_nic_ends and lc.nic_breakout > 1:  # a NIC port's links, one per plane, on one module
        nic_optic = cat.optic_for(
            "nic",
            lc.link_gbps,
            lc.length_m,
            cage_gbps=lc.link_gbps * lc.nic_breakout,
            protocol=protocol,
            form="twin",
            key="fabric.planes",
        )
    elif lc.n_nic_ends:
        nic_optic = cat.optic_for(
            "nic", lc.link_gbps, lc.length_m, protocol=protocol, form="single"
        )
    switch_optic = (
        cat.optic_for(
            "switch", lc.link_gbps, lc.length_m, cage_gbps=sw.cage_gbps, protocol=protocol
        )
        if on_switch and not cpo
        else None
    )
    return LinkMedia(None, cat.fiber, nic_optic, switch_optic)


def fabric_lines(
    topo: Topology, hw: Hardware, cat: Catalog, costs: CostSpec, own_vendor: bool
) -> list[BomLine]:
    """Return the bill lines of one fabric: its switches per tier, NICs, and every link class.

    ``own_vendor``: whether ``costs.switch_usd`` / ``costs.nic_usd`` apply (False for
    another vendor's variant of the design).
    """
    lines: list[BomLine] = []
    sw, nic = hw.switch, hw.nic
    switch_price = unit_price(costs.switch_usd if own_vendor else None, sw.price_usd)
    nic_price = unit_price(costs.nic_usd if own_vendor else None, nic.price_usd)
    for tier, count in topo.switches_by_tier.items():
        if count:
            lines.append(
                BomLine(
                    "switches",
                    sw.name,
                    sw.key,
                    tier,
                    count,
                    switch_price,
                    sw.power_w,
                    cat.source_note("switches", sw.key, "price_usd"),
                )
            )
    lines.append(
        BomLine(
            "nics",
            nic.name,
            nic.key,
            "servers",
            topo.n_endpoints,
            nic_price,
            nic.power_w,
            cat.source_note("nics", nic.key, "price_usd"),
        )
    )
    lines.extend(link_lines(topo, hw, cat, costs))
    return lines


def link_lines(topo: Topology, hw: Hardware, cat: Catalog, costs: CostSpec) -> list[BomLine]:
    """Return the cable and transceiver lines of every link class of ``topo``.

    Copper cables per ``ceil(links / links_per_cable)``; an optical link takes one fiber,
    one NIC-side module per NIC port (a breakout module per ``nic_breakout`` links) and, at
    each switch tier, ``ceil(ports / ports_per_module)`` twin-port modules per switch.
    """
    lines: list[BomLine] = []
    for lc in topo.links:
        media = link_media(lc, hw, cat)
        copper = media.copper
        if copper is not None:
            lines.append(
                BomLine(
                    "cables",
                    copper.name,
                    copper.key,
                    lc.name,
                    math.ceil(lc.n_links / media.links_per_cable),
                    unit_price(costs.copper_cable_usd, copper.price_usd),
                    copper.power_w,
                    cat.source_note("cables", copper.key, "price_usd"),
                )
            )
            continue
        fiber = media.fiber
        lines.append(
            BomLine(
                "cables",
                fiber.name,
                fiber.key,
                lc.name,
                lc.n_links,
                unit_price(costs.fiber_usd, fiber.price_usd),
                fiber.power_w,
                cat.source_note("cables", fiber.key, "price_usd"),
            )
        )
        if media.nic_optic is not None:
            optic = media.nic_optic
            lines.append(
                BomLine(
                    "optics",
                    optic.name,
                    optic.key,
                    f"{lc.name} (NIC side)",
                    math.ceil(lc.n_nic_ends / lc.nic_breakout),
                    unit_price(costs.optic_nic_usd, optic.price_usd),
                    optic.power_w,
                    cat.source_note("optics", optic.key, "price_usd"),
                )
            )
        if lc.port_groups and _uses_cpo(hw):
            lines.extend(_cpo_lines(lc, hw, cat))
        if media.switch_optic is not None:
            optic = media.switch_optic
            per = optic.ports_per_module(lc.link_gbps)
            by_tier: dict[str, int] = {}
            for g in lc.port_groups:
                by_tier[g.tier] = by_tier.get(g.tier, 0) + g.n_switches * math.ceil(
                    g.ports_per_switch / per
                )
            for tier, n_modules in by_tier.items():
                lines.append(
                    BomLine(
                        "optics",
                        optic.name,
                        optic.key,
                        f"{lc.name} ({tier} side)",
                        n_modules,
                        unit_price(costs.optic_switch_usd, optic.price_usd),
                        optic.power_w,
                        cat.source_note("optics", optic.key, "price_usd"),
                    )
                )
    return lines


def _cpo_lines(lc: LinkClass, hw: Hardware, cat: Catalog) -> list[BomLine]:
    """Return the co-packaged optical ports of one link class's switch ends, per tier.

    A switch port at ``cpo_port_gbps`` carries ``cpo_port_gbps / link_gbps`` slower links
    (the breakout a pluggable module would do), so a switch with ``n`` ports of the class
    takes ``ceil(n x link_gbps / cpo_port_gbps)`` optical ports, each at ``cpo_port_w``
    and ``cpo_port_usd`` (engine plus its share of the external lasers).
    """
    sw = hw.switch
    assert sw.cpo_port_w is not None and sw.cpo_port_usd is not None  # _uses_cpo checked
    by_tier: dict[str, int] = {}
    for g in lc.port_groups:
        ports = math.ceil(g.ports_per_switch * lc.link_gbps / sw.cpo_port_gbps)
        by_tier[g.tier] = by_tier.get(g.tier, 0) + g.n_switches * ports
    return [
        BomLine(
            "optics",
            f"{sw.cpo_variant}: co-packaged optics per {sw.cpo_port_gbps}G port (engine + lasers)",
            sw.key + CPO_SUFFIX,
            f"{lc.name} ({tier} side)",
            n,
            float(sw.cpo_port_usd),
            float(sw.cpo_port_w),
            cat.source_note("switches", sw.key, "cpo_port_usd"),
        )
        for tier, n in by_tier.items()
    ]


def hybrid_bom_lines(
    scenario: Scenario,
    topo: Topology,
    hardware: Hardware,
    catalog: Catalog,
    own_vendor: bool,
    partitions: Sequence[Hardware],
) -> list[BomLine]:
    """Bill lines of a hybrid: each partition priced with its vendor's parts, then the shared tier.

    Partition links (``A leaf-spine``, ...) take that partition's switch, NIC and optics; the
    shared uplinks (``A core-shared``, ``B spine-shared``) and the shared cores take
    ``fabric.vendor``'s switch and its optics.
    """
    if not isinstance(topo, HybridTopology):
        raise InfeasibleDesignError("fabric.topology", "not a hybrid topology")
    lines: list[BomLine] = []
    for part, p, hw in zip(("a", "b"), topo.partitions, partitions, strict=True):
        ps = partition_scenario(scenario, part)
        own = own_vendor and ps.fabric.vendor == scenario.fabric.vendor
        view = partition_view(topo, p.name, p.topology, p.topology.request)
        lines.extend(fabric_lines(view, hw, catalog, scenario.costs, own))
    shared_req = dataclasses.replace(topo.request, n_gpus=0)
    shared = partition_view(topo, "shared", topo.partitions[0].topology, shared_req)
    lines.extend(
        line
        for line in fabric_lines(shared, hardware, catalog, scenario.costs, own_vendor)
        if line.quantity
    )
    return lines


def ocs_bom_lines(
    scenario: Scenario,
    topo: Topology,
    hardware: Hardware,
    catalog: Catalog,
    own_vendor: bool,
) -> list[BomLine]:
    """Bill lines of an OCS fabric: every built block's parts, the OCSes and the uplinks.

    A pod's leaves and spines take the vendor's switch; the OCSes their catalog entry
    (``ocs.switch``); every built block (spares included) its NICs and internal links
    (:func:`link_lines`: a pod's NIC-leaf and leaf-spine cables, a cube's copper mesh). Each
    uplink is one fiber run to an OCS port with one transceiver at the block end (NIC side
    for NVLink domains and cubes; switch side, by the twin-port rule, on a pod's spines or
    leaf) and none at the OCS, which is passive. The transceiver's budget is checked again at
    the floor plan's run length (:func:`ocs_channel`).

    Raises
    ------
    InfeasibleDesignError
        On ``ocs.switch`` when the budget does not close at the laid-out length.
    """
    costs = scenario.costs
    p = topo.params
    ocs = catalog.ocs_switch(str(p["ocs_key"]))
    sw, nic = hardware.switch, hardware.nic
    switch_price = unit_price(costs.switch_usd if own_vendor else None, sw.price_usd)
    lines: list[BomLine] = []
    for tier, count in topo.switches_by_tier.items():
        if not count:
            continue
        if tier == "ocs":
            lines.append(
                BomLine(
                    "switches",
                    ocs.name,
                    ocs.key,
                    "ocs",
                    count,
                    ocs.price_usd,
                    ocs.power_w,
                    catalog.source_note("ocs", ocs.key, "price_usd"),
                )
            )
            continue
        lines.append(
            BomLine(
                "switches",
                sw.name,
                sw.key,
                f"pod {tier}",
                count,
                switch_price,
                sw.power_w,
                catalog.source_note("switches", sw.key, "price_usd"),
            )
        )
    built_gpus = int(p["n_blocks_built"]) * int(p["block_gpus"])
    lines.append(
        BomLine(
            "nics",
            nic.name,
            nic.key,
            "servers",
            built_gpus * topo.request.nics_per_gpu,
            unit_price(costs.nic_usd if own_vendor else None, nic.price_usd),
            nic.power_w,
            catalog.source_note("nics", nic.key, "price_usd"),
        )
    )
    inner = [lc for lc in topo.links if lc.name != "block-ocs"]
    up = next(lc for lc in topo.links if lc.name == "block-ocs")
    lines.extend(
        link_lines(dataclasses.replace(topo, links=tuple(inner)), hardware, catalog, costs)
    )
    channel = ocs_channel(
        scenario, hardware, float(up.length_m), catalog, optic_key=str(p["optic_key"])
    )
    optic = channel.optic
    fiber = catalog.fiber
    lines.append(
        BomLine(
            "cables",
            fiber.name,
            fiber.key,
            up.name,
            up.n_links,
            unit_price(costs.fiber_usd, fiber.price_usd),
            fiber.power_w,
            catalog.source_note("cables", fiber.key, "price_usd"),
        )
    )
    if channel.side == "nic":
        n_modules, where = up.n_nic_ends, f"{up.name} (NIC side)"
        price = unit_price(costs.optic_nic_usd, optic.price_usd)
    else:
        per = optic.ports_per_module(up.link_gbps)
        n_modules = sum(
            g.n_switches * math.ceil(g.ports_per_switch / per)
            for g in up.port_groups
            if g.tier != "ocs"
        )
        where = f"{up.name} ({up.ends[0]} side)"
        price = unit_price(costs.optic_switch_usd, optic.price_usd)
    lines.append(
        BomLine(
            "optics",
            optic.name,
            optic.key,
            where,
            n_modules,
            price,
            optic.power_w,
            catalog.source_note("optics", optic.key, "price_usd"),
        )
    )
    return lines


@dataclass(frozen=True)
class OcsChannel:
    """The optical channel of one circuit: what it loses and the transceiver that closes it.

    Attributes
    ----------
    length_m
        Fiber from one block through the OCS to the other (two runs), m.
    loss_db
        The OCS's insertion loss, the fiber's attenuation and the patch connections, dB.
    text
        How ``loss_db`` is made up, in words.
    optic
        The transceiver at each block end (:meth:`Catalog.ocs_optic_for`).
    side
        ``"nic"`` (NVLink-domain and cube blocks) or ``"switch"`` (a pod's uplinks).
    """

    length_m: float
    loss_db: float
    text: str
    optic: Any
    side: str


def ocs_channel(
    scenario: Scenario,
    hardware: Hardware,
    run_m: float,
    catalog: Catalog | None = None,
    *,
    optic_key: str = "",
) -> OcsChannel:
    """Return the channel of a circuit whose two block-to-OCS runs are ``run_m`` each.

    ``loss = OCS insertion loss + 2 run x fiber dB/km + patch connections x connector dB``
    (``assets/ocs.yaml``); the transceiver is the cheapest whose channel budget covers it,
    counting the OCS ports its fibers take, or ``optic_key`` checked against it.

    Raises
    ------
    InfeasibleDesignError
        On ``ocs.switch`` when no transceiver's budget closes through the OCS (or
        ``optic_key``'s does not), on ``fabric.link_gbps`` when none runs the speed through
        an OCS, on ``fabric.direct_link_m`` when the run is beyond its reach.
    """
    cat = catalog or load_catalog()
    sw = cat.ocs_switch(scenario.ocs.switch)
    budget = OCS_DATA["link_budget"]
    per_km = float(budget["fiber_db_per_km"]["value"])
    n_conn = int(budget["patch_connections"]["value"])
    conn_db = float(budget["connector_db"]["value"])
    length = 2.0 * run_m
    loss = sw.insertion_loss_db + per_km * length / 1000.0 + n_conn * conn_db
    text = (
        f" ({sw.key} {sw.insertion_loss_db:g} dB + {length:g} m of fiber at {per_km:g} dB/km "
        f"+ {n_conn} patch connections at {conn_db:g} dB)"
    )
    pod = scenario.ocs.block == "pod"
    side = "switch" if pod else "nic"
    if optic_key:
        fixed = cat.optic(optic_key)
        if fixed.reach_m < length:
            raise InfeasibleDesignError(
                "fabric.direct_link_m",
                f"{fixed.key} reaches {fixed.reach_m:g} m; a circuit here runs {length:g} m",
            )
        if float(fixed.channel_loss_db or 0.0) < loss - 1e-9:
            raise InfeasibleDesignError(
                "ocs.switch",
                f"the link budget does not close: the channel through the OCS loses "
                f"{loss:.2f} dB{text}, and {fixed.key} allows {fixed.channel_loss_db:g} dB",
            )
        return OcsChannel(length, loss, text, fixed, side)
    optic = cat.ocs_optic_for(
        side,
        scenario.fabric.link_gbps,
        length,
        loss,
        cage_gbps=hardware.switch.cage_gbps if pod else None,
        protocol=hardware.vendor.protocol,
        port_usd=sw.port_price_usd,
        loss_text=text,
    )
    return OcsChannel(length, loss, text, optic, side)
