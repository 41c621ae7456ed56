"""The bill of a built fabric: its lines, totals, shares, power and TCO, from resolved parts.

:func:`price_fabric` prices a fabric whose hardware is resolved and whose topology is
built: the floor plan sets the cable lengths (:mod:`.floorplan`), each part is a line
(:mod:`.lines`), the storage and management networks are priced beside it
(:mod:`.storage_mgmt`). Resolving a scenario's hardware, including ``fabric.switch = auto``,
which prices every candidate switch with this, is :mod:`.design`'s; the front door,
:func:`fabric_model.plant.cost.bill_of_materials`, does both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fabric_model.catalog import Catalog
from fabric_model.plant.floorplan import FloorPlan, built_gpus, plan_site
from fabric_model.plant.hardware import Hardware
from fabric_model.plant.lines import (
    CATEGORIES,
    BomLine,
    fabric_lines,
    hybrid_bom_lines,
    is_cpo,
    ocs_bom_lines,
    unit_price,
)
from fabric_model.plant.storage_mgmt import NetworkBill
from fabric_model.scenario import CostSpec, Scenario
from fabric_model.topology import Topology
from fabric_model.units import HOURS_PER_YEAR

__all__ = ["BillOfMaterials", "fabric_shape", "price_fabric"]


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
        return sum(x.quantity for x in self.lines if x.category == "optics" and not is_cpo(x.key))

    @property
    def n_cpo_ports(self) -> int:
        """Co-packaged optical ports on the switches (``fabric.optics = cpo``), count."""
        return sum(x.quantity for x in self.lines if is_cpo(x.key))

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
    if topo.family == "ocs":  # blocks on optical circuit switches (a pod's own leaf-spine)
        pod = p["block"] == "pod"
        return {
            "switch": hw.switch.key if pod else "",
            "switch_radix": k if pod else 0,
            "pod_nics": int(p["block_gpus"]) * topo.request.nics_per_gpu if pod else 0,
            "limit": (
                f"ocs: {p['n_blocks_built']} blocks x {p['fibers_per_uplink']} port(s) per "
                f"uplink on {p['ocs_ports']}-port OCS ({p['ocs_key']}): "
                f"{p['ocs_uplinks_per_block']} uplink(s) of every block per OCS"
            ),
            "switch_choice": hw.switch_choice if pod else "",
        }
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


def price_fabric(
    scenario: Scenario,
    hw: Hardware,
    topo: Topology,
    cat: Catalog,
    *,
    own_vendor: bool = True,
    partitions: Sequence[Hardware] = (),
) -> BillOfMaterials:
    """Price the built fabric ``topo`` of ``scenario`` on the resolved parts ``hw``.

    ``partitions``: a hybrid's partitions' parts (A, then B); ``own_vendor`` as
    :func:`fabric_model.plant.cost.bill_of_materials`.
    """
    # the floor plan sets the cable lengths, so it comes before the lines
    site = plan_site(scenario, hw, topo, cat)
    topo = site.topology
    if topo.family == "hybrid":  # each partition on its vendor's parts (fabric_model.plant.hybrid)
        lines = hybrid_bom_lines(scenario, topo, hw, cat, own_vendor, partitions)
    elif topo.family == "ocs":  # blocks, OCSes and their uplinks (fabric_model.plant.lines)
        lines = ocs_bom_lines(scenario, topo, hw, cat, own_vendor)
    else:
        lines = fabric_lines(topo, hw, cat, scenario.costs, own_vendor)
    networks, floorplan = site.finish(lines, cat, scenario.costs)
    server = hw.server
    n_servers = -(-built_gpus(scenario, topo) // server.gpus_per_server)
    return BillOfMaterials(
        scenario_name=scenario.name,
        vendor=scenario.fabric.vendor,
        topology=topo,
        hardware=hw,
        lines=tuple(lines),
        n_servers=n_servers,
        server_unit_price_usd=unit_price(scenario.costs.server_usd, server.price_usd),
        server_unit_power_w=server.power_w,
        costs=scenario.costs,
        networks=networks,
        floorplan=floorplan,
    )
