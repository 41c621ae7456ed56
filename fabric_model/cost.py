"""Bill of materials, capex, power and TCO of a scale-out fabric.

Counting rules (hardware-and-cost-facts sections 3.1, 6.1 and 8.3):

- Switches: the topology's count per tier, priced and powered (without optics) from the catalog.
- NICs: one single-port scale-out NIC per endpoint (``n_gpus x nics_per_gpu``).
- A link is copper when a copper cable in the catalog carries its speed over its length
  (passive DAC up to ~3 m at 100G lanes; none at 200G lanes beyond ~2 m), otherwise optical.
- Optical link: a fiber per link; NIC ends take one single-port module each; switch ends take
  twin-port modules: ``ceil(ports / ports_per_module)`` per switch, so one 800G 2x400G module
  serves two 400G links (the twin-port rule). Both module types are picked by reach.
- Planes (``fabric.planes``): a NIC port broken out into one link per plane takes one
  NIC-side breakout module (an 800G DR8 fanned out to 8 x 100G) for its ``planes`` links,
  each link its own fiber leg to its plane's leaf; the switch side follows the twin-port rule
  at the per-plane speed (8 x 100G per 800G cage).
- Power: switches without optics + modules + NICs + active cables, at the wall times the PUE
  for energy; TCO = capex + energy over the horizon.
- Lengths: with ``facility.cable_lengths = floorplan`` (the default) each link class's length
  is its longest run on the floor plan (:mod:`fabric_model.floorplan`), so the media follow
  the racks; a ``fabric.*_m`` key set away from its default still wins for its class.
- The storage and management networks (:mod:`fabric_model.storage_mgmt`) are priced apart
  (``BillOfMaterials.networks``): every total, per-GPU figure, share and TCO here is the
  compute fabric's.

Price overrides (``costs.*``): the vendor-neutral parts (optics, cables, fiber, servers) apply
to every vendor in a comparison; ``costs.switch_usd`` and ``costs.nic_usd`` apply to the
scenario's own vendor only (another vendor's switch is another product).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fabric_model.catalog import Cable, Catalog, Optic, load_catalog
from fabric_model.design import Hardware, resolve_hardware, topology_request
from fabric_model.errors import FabricModelError
from fabric_model.scenario import CostSpec, Scenario
from fabric_model.topology import LinkClass, Topology, build_topology_from_request
from fabric_model.units import HOURS_PER_YEAR

if TYPE_CHECKING:
    from fabric_model.floorplan import FloorPlan
    from fabric_model.storage_mgmt import NetworkBill

__all__ = [
    "CATEGORIES",
    "BillOfMaterials",
    "BomLine",
    "LinkMedia",
    "VendorComparison",
    "bill_of_materials",
    "compare_vendors",
    "fabric_shape",
    "link_lines",
    "link_media",
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


@dataclass(frozen=True)
class BillOfMaterials:
    """The fabric's bill, its totals, and the cluster context for shares and TCO."""

    scenario_name: str
    vendor: str
    topology: Topology = field(repr=False)
    hardware: Hardware = field(repr=False)
    lines: tuple[BomLine, ...]
    n_servers: int
    server_unit_price_usd: float
    server_unit_power_w: float
    costs: CostSpec
    #: The storage and management networks (``storage.*``, ``management.*``), apart from the
    #: compute fabric: every total above stays compute-only.
    networks: tuple[NetworkBill, ...] = ()
    #: Racks, rows, power density and cooling (``facility.*``); None for a bill built
    #: without a floor plan.
    floorplan: FloorPlan | None = field(default=None, repr=False)

    # quantities -----------------------------------------------------------------------
    def _qty(self, category: str) -> int:
        return sum(line.quantity for line in self.lines if line.category == category)

    @property
    def n_transceivers(self) -> int:
        """Pluggable optical modules (both ends); co-packaged switch ports are not modules."""
        return sum(x.quantity for x in self.lines if x.category == "optics" and not _is_cpo(x.key))

    @property
    def n_cpo_ports(self) -> int:
        """Co-packaged optical ports on the switches (``fabric.optics = cpo``), count."""
        return sum(x.quantity for x in self.lines if _is_cpo(x.key))

    @property
    def n_lasers(self) -> float:
        """External laser source modules of the co-packaged switch ports, count."""
        sw = self.hardware.switch
        return self.n_cpo_ports * float(sw.cpo_lasers_per_port or 0.0)

    @property
    def n_cables(self) -> int:
        """Copper cables plus fibers (one per optical link)."""
        return self._qty("cables")

    @property
    def n_nics(self) -> int:
        """Scale-out NICs."""
        return self._qty("nics")

    # money and power ------------------------------------------------------------------
    @property
    def capex_by_category_usd(self) -> dict[str, float]:
        """Network capex per category, USD."""
        return {c: sum(x.capex_usd for x in self.lines if x.category == c) for c in CATEGORIES}

    @property
    def power_by_category_w(self) -> dict[str, float]:
        """Network power per category at the IT load, W."""
        return {c: sum(x.power_w for x in self.lines if x.category == c) for c in CATEGORIES}

    @property
    def capex_usd(self) -> float:
        """Network capex, USD."""
        return sum(self.capex_by_category_usd.values())

    @property
    def power_w(self) -> float:
        """Network IT power, W."""
        return sum(self.power_by_category_w.values())

    @property
    def n_gpus(self) -> int:
        """GPUs in the cluster."""
        return self.topology.n_gpus

    @property
    def capex_per_gpu_usd(self) -> float:
        """Network capex per GPU, USD."""
        return self.capex_usd / self.n_gpus

    @property
    def power_per_gpu_w(self) -> float:
        """Network power per GPU, W."""
        return self.power_w / self.n_gpus

    @property
    def servers_capex_usd(self) -> float:
        """GPU servers (without scale-out NICs), USD."""
        return self.n_servers * self.server_unit_price_usd

    @property
    def cluster_capex_usd(self) -> float:
        """Servers plus network, USD."""
        return self.servers_capex_usd + self.capex_usd

    @property
    def network_share(self) -> float:
        """Network capex / cluster capex (servers + network)."""
        return self.capex_usd / self.cluster_capex_usd if self.cluster_capex_usd else 0.0

    @property
    def cluster_power_w(self) -> float:
        """Servers plus network IT power, W."""
        return self.n_servers * self.server_unit_power_w + self.power_w

    def energy_usd(self, power_w: float | None = None) -> float:
        """Electricity over the TCO horizon for ``power_w`` (default: the network), USD.

        ``power x PUE x 8,760 h x years x price``.
        """
        p = self.power_w if power_w is None else power_w
        c = self.costs
        return p / 1000.0 * c.pue * HOURS_PER_YEAR * c.years * c.electricity_usd_per_kwh

    @property
    def tco_usd(self) -> float:
        """Network capex plus network energy over the horizon, USD."""
        return self.capex_usd + self.energy_usd()

    @property
    def tco_per_gpu_usd(self) -> float:
        """Network TCO per GPU, USD."""
        return self.tco_usd / self.n_gpus

    @property
    def capex_by_network_usd(self) -> dict[str, float]:
        """Capex of the compute fabric and of each other network, USD."""
        return {"compute": self.capex_usd, **{n.name: n.capex_usd for n in self.networks}}

    @property
    def power_by_network_w(self) -> dict[str, float]:
        """IT power of the compute fabric and of each other network, W."""
        return {"compute": self.power_w, **{n.name: n.power_w for n in self.networks}}

    def to_frame(self) -> Any:
        """Return the bill as a pandas DataFrame (one row per line)."""
        import pandas as pd

        return pd.DataFrame([line.to_dict() for line in self.lines])

    def to_dict(self) -> dict[str, Any]:
        """Return the ``bom`` JSON of the CLI contract (plus per-GPU, share and TCO fields)."""
        topo = self.topology
        capex = self.capex_by_category_usd
        power = self.power_by_category_w
        return {
            "scenario": self.scenario_name,
            "vendor": self.vendor,
            "topology": topo.family,
            "n_gpus": topo.n_gpus,
            "tiers": topo.tiers,
            "planes": topo.planes,
            "switch": self.hardware.switch.key,
            "nic": self.hardware.nic.key,
            "radix": self.hardware.radix,
            "switches_by_tier": dict(topo.switches_by_tier),
            "n_switches": topo.n_switches,
            "links_by_class": topo.links_by_class,
            "n_links": topo.n_links,
            "n_transceivers": self.n_transceivers,
            "optics": self.hardware.optics,
            "n_cpo_ports": self.n_cpo_ports,
            "n_lasers": self.n_lasers,
            **fabric_shape(self.topology, self.hardware),
            "n_cables": self.n_cables,
            "n_nics": self.n_nics,
            "capex_usd": {**capex, "total": self.capex_usd},
            "power_w": {**power, "total": self.power_w},
            "capex_per_gpu_usd": self.capex_per_gpu_usd,
            "power_per_gpu_w": self.power_per_gpu_w,
            "network_share_of_cluster_capex": self.network_share,
            "tco_usd": self.tco_usd,
            "tco_years": self.costs.years,
            "max_switch_hops": topo.max_switch_hops,
            "mean_switch_hops": topo.mean_switch_hops,
            "bisection_GBps": topo.bisection_GBps,
            "notes": list(topo.notes),
            "warnings": list(topo.warnings),
            "lines": [line.to_dict() for line in self.lines],
            "scope": "capex_usd, power_w, per-GPU, share and TCO figures are the compute "
            "(scale-out) fabric's; networks holds the storage and management networks",
            "capex_by_network_usd": {
                **self.capex_by_network_usd,
                "total": sum(self.capex_by_network_usd.values()),
            },
            "power_by_network_w": {
                **self.power_by_network_w,
                "total": sum(self.power_by_network_w.values()),
            },
            "networks": {n.name: n.to_dict() for n in self.networks},
            "floorplan": self.floorplan.to_dict() if self.floorplan is not None else None,
        }


#: BOM-line key suffix of a switch's co-packaged optical ports (``fabric.optics = cpo``).
CPO_SUFFIX = ":cpo"


def _is_cpo(key: str) -> bool:
    return key.endswith(CPO_SUFFIX)


def _uses_cpo(hw: Hardware) -> bool:
    """Return whether this hardware's switch ports are co-packaged.

    The storage and management networks reuse the compute ``Hardware`` with their own,
    pluggable, switches.
    """
    return hw.optics == "cpo" and hw.switch.has_cpo


def fabric_shape(topo: Topology, hw: Hardware) -> dict[str, Any]:
    """Return what shapes the design: switch, radix, pod size and the limiting resource.

    Returns
    -------
    dict
        ``switch`` (catalog key), ``switch_radix`` (ports at the per-plane link speed),
        ``pod_nics`` (NIC ports one pod of leaves and spines serves, in each plane: the
        whole plane below three tiers; the topology's params are per plane), ``limit``
        (the resource that sets the tier count, in words) and ``switch_choice`` (why
        ``fabric.switch = auto`` chose it, or empty).
    """
    k, gbps, p = hw.radix, topo.request.link_gbps, topo.params
    per_plane = topo.n_endpoints  # every NIC port has one link into each plane
    if not topo.tiers:
        return {
            "switch": "",
            "switch_radix": 0,
            "pod_nics": 0,
            "limit": "switchless: direct NIC-to-NIC links",
            "switch_choice": "",
        }
    down = int(p.get("down_per_leaf", 0) or 0)
    if topo.tiers >= 3 and "leaves_per_pod" in p and down:
        pod = int(p["leaves_per_pod"]) * down
    else:
        pod = per_plane
    n_leaves, n_pods = int(p.get("n_leaves", 0) or 0), int(p.get("n_pods", 0) or 0)
    if topo.family != "fat-tree":
        limit = f"{topo.family}: radix {k} at {gbps}G"
    elif topo.tiers == 1:
        limit = f"all {per_plane:,} NIC ports on one radix-{k} switch at {gbps}G"
    elif topo.tiers == 2:
        limit = f"radix {k} at {gbps}G: {per_plane:,} NIC ports per plane > {k} on one switch"
    elif topo.tiers == 3:
        limit = f"radix {k} at {gbps}G: {n_leaves:,} leaves per plane > {k}, the most 2 tiers join"
    else:
        limit = f"radix {k} at {gbps}G: {n_pods:,} pods per plane > {k}, the most 3 tiers join"
    if topo.tiers >= 3 and float(topo.request.spine_oversubscription) > 1:
        limit += (
            f"; {float(topo.request.spine_oversubscription):g}:1 spine taper: pods of "
            f"{pod:,} NIC ports"
        )
    return {
        "switch": hw.switch.key,
        "switch_radix": k,
        "pod_nics": pod,
        "limit": limit,
        "switch_choice": hw.switch_choice,
    }


def _price(override: float | None, catalog_value: float) -> float:
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


def _bom_lines(
    topo: Topology, hw: Hardware, cat: Catalog, costs: CostSpec, own_vendor: bool
) -> list[BomLine]:
    lines: list[BomLine] = []
    sw, nic = hw.switch, hw.nic
    switch_price = _price(costs.switch_usd if own_vendor else None, sw.price_usd)
    nic_price = _price(costs.nic_usd if own_vendor else None, nic.price_usd)
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
                    _price(costs.copper_cable_usd, copper.price_usd),
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
                _price(costs.fiber_usd, fiber.price_usd),
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
                    _price(costs.optic_nic_usd, optic.price_usd),
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
                        _price(costs.optic_switch_usd, optic.price_usd),
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


def bill_of_materials(
    scenario: Scenario,
    catalog: Catalog | None = None,
    *,
    own_vendor: bool = True,
    topology: Topology | None = None,
) -> BillOfMaterials:
    """Build the scenario's fabric and price it.

    Parameters
    ----------
    scenario
        The design.
    catalog
        Parts, prices and power (default: the shipped catalog).
    own_vendor
        Whether ``costs.switch_usd``/``costs.nic_usd`` apply (False when this is another
        vendor's variant of the design in a comparison).
    topology
        The scenario's already built topology, to save building it again.

    Raises
    ------
    FabricModelError
        For a design that cannot be built or priced (the message names the key).
    """
    cat = catalog or load_catalog()
    hw = resolve_hardware(scenario, cat)
    topo = topology or build_topology_from_request(
        scenario.fabric.topology, topology_request(scenario, hw)
    )
    # the floor plan sets the cable lengths, so it comes before the lines
    from fabric_model.floorplan import plan_site

    site = plan_site(scenario, hw, topo, cat)
    topo = site.topology
    if topo.family == "hybrid":  # each partition on its vendor's parts (fabric_model.hybrid)
        from fabric_model.hybrid import hybrid_bom_lines

        lines = hybrid_bom_lines(scenario, topo, hw, cat, own_vendor)
    else:
        lines = _bom_lines(topo, hw, cat, scenario.costs, own_vendor)
    networks, floorplan = site.finish(lines, cat, scenario.costs)
    server = hw.server
    n_servers = -(-scenario.cluster.n_gpus // server.gpus_per_server)
    return BillOfMaterials(
        scenario_name=scenario.name,
        vendor=scenario.fabric.vendor,
        topology=topo,
        hardware=hw,
        lines=tuple(lines),
        n_servers=n_servers,
        server_unit_price_usd=_price(scenario.costs.server_usd, server.price_usd),
        server_unit_power_w=server.power_w,
        costs=scenario.costs,
        networks=networks,
        floorplan=floorplan,
    )


@dataclass(frozen=True)
class VendorComparison:
    """The same design priced for several vendors; a vendor that cannot build it has an error."""

    vendor: str
    bom: BillOfMaterials | None
    error: str | None


def compare_vendors(
    scenario: Scenario,
    vendors: Iterable[str] | None = None,
    catalog: Catalog | None = None,
) -> list[VendorComparison]:
    """Price the scenario's design (size, topology, speed, tapering) on each vendor's parts.

    The switch and NIC become each vendor's default for the link speed, routing its default
    policy; a vendor whose catalog does not offer the speed gets an error entry instead.
    ``vendors = None`` compares the catalog's vendors marked ``compared`` (InfiniBand,
    Spectrum-X and RoCE in the shipped one).
    """
    cat = catalog or load_catalog()
    if vendors is None:
        vendors = [k for k, v in cat.vendors.items() if v.compared]
    out = []
    for vendor in vendors:
        own = vendor == scenario.fabric.vendor
        variant = (
            scenario
            if own
            else dataclasses.replace(
                scenario,
                fabric=dataclasses.replace(
                    scenario.fabric, vendor=vendor, switch="auto", nic="auto", routing="auto"
                ),
            )
        )
        try:
            out.append(
                VendorComparison(vendor, bill_of_materials(variant, cat, own_vendor=own), None)
            )
        except FabricModelError as exc:
            out.append(VendorComparison(vendor, None, str(exc)))
    return out
