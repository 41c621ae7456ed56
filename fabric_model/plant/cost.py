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
  is its longest run on the floor plan (:mod:`fabric_model.plant.floorplan`), so the media follow
  the racks; a ``fabric.*_m`` key set away from its default still wins for its class.
- The storage and management networks (:mod:`fabric_model.plant.storage_mgmt`) are priced apart
  (``BillOfMaterials.networks``): every total, per-GPU figure, share and TCO here is the
  compute fabric's.

Price overrides (``costs.*``): the vendor-neutral parts (optics, cables, fiber, servers) apply
to every vendor in a comparison; ``costs.switch_usd`` and ``costs.nic_usd`` apply to the
scenario's own vendor only (another vendor's switch is another product).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from fabric_model.catalog import Catalog, load_catalog
from fabric_model.errors import FabricModelError
from fabric_model.plant.bill import BillOfMaterials, fabric_shape
from fabric_model.plant.design import priced
from fabric_model.plant.floorplan import built_gpus
from fabric_model.plant.hybrid import single_fat_tree_scenario
from fabric_model.plant.lines import CATEGORIES, BomLine, LinkMedia, link_lines, link_media
from fabric_model.scenario import Scenario
from fabric_model.topology import Topology

__all__ = [
    "CATEGORIES",
    "BillOfMaterials",
    "BomLine",
    "LinkMedia",
    "VendorComparison",
    "bill_of_materials",
    "built_gpus",
    "compare_vendors",
    "compare_with_fat_tree",
    "fabric_shape",
    "link_lines",
    "link_media",
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
    return priced(scenario, catalog, own_vendor=own_vendor, topology=topology)


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
                    scenario.fabric,
                    vendor=vendor,
                    switch="auto",
                    nic="auto",
                    routing="auto",
                    transport="auto",
                ),
                what_if=dataclasses.replace(scenario.what_if, pfc="on"),
            )
        )
        try:
            out.append(
                VendorComparison(vendor, bill_of_materials(variant, cat, own_vendor=own), None)
            )
        except FabricModelError as exc:
            out.append(VendorComparison(vendor, None, str(exc)))
    return out


def compare_with_fat_tree(
    scenario: Scenario, catalog: Catalog | None = None
) -> list[dict[str, object]]:
    """Price the hybrid and one fat-tree of the same size, vendor and speed.

    Both take their cable lengths from the ``fabric.*_m`` keys (``facility.cable_lengths =
    keys``): the floor plan places no hybrid cable yet, so this keeps the optics comparable.
    Returns one row per design (``design``, switches, cables, transceivers, capex, capex per
    GPU, power, bisection, most switch hops; ``error`` when the fat-tree cannot be built).
    """
    keys = dataclasses.replace(
        scenario, facility=dataclasses.replace(scenario.facility, cable_lengths="keys")
    )
    rows: list[dict[str, object]] = []
    for label, variant in (
        ("hybrid", keys),
        ("single fat-tree", single_fat_tree_scenario(keys)),
    ):
        try:
            bom = bill_of_materials(variant, catalog)
        except FabricModelError as exc:
            rows.append({"design": label, "error": str(exc)})
            continue
        topo = bom.topology
        rows.append(
            {
                "design": label,
                "n_switches": topo.n_switches,
                "n_cables": bom.n_cables,
                "n_transceivers": bom.n_transceivers,
                "capex_usd": bom.capex_usd,
                "capex_per_gpu_usd": bom.capex_per_gpu_usd,
                "power_w": bom.power_w,
                "bisection_GBps": topo.bisection_GBps,
                "max_switch_hops": topo.max_switch_hops,
                "error": "",
            }
        )
    return rows
