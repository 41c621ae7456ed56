"""From a scenario to concrete hardware and a built topology.

This is the thin scenario layer: it looks up the GPU, server, switch and NIC in the catalog,
checks that they fit together (a clear :class:`ScenarioError` naming the key otherwise), and
hands plain numbers to the topology builders.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import lru_cache

from fabric_model.catalog import Catalog, Gpu, Nic, Server, Switch, Vendor, load_catalog
from fabric_model.errors import (
    FabricModelError,
    InfeasibleDesignError,
    ScenarioError,
    UnknownCatalogKeyError,
)
from fabric_model.families import family_names
from fabric_model.plant.hybrid import check_hybrid, partition_scenario
from fabric_model.scenario import Scenario
from fabric_model.topology import (
    PLANE_FAMILIES,
    Topology,
    TopologyRequest,
    build_topology_from_request,
)
from fabric_model.topology.hybrid import HybridRequest

__all__ = [
    "SWITCHLESS",
    "Hardware",
    "build_topology",
    "hybrid_request",
    "job_scenario",
    "resolve_hardware",
    "topology_request",
]

#: Families without switches: their links run NIC to NIC (``Family.switchless``).
SWITCHLESS = frozenset(family_names(lambda f: f.switchless))


@dataclass(frozen=True)
class Hardware:
    """The concrete parts a scenario resolves to."""

    gpu: Gpu
    server: Server
    vendor: Vendor
    switch: Switch
    nic: Nic
    radix: int
    routing: str
    #: Independent network planes (``fabric.planes``); ``radix`` counts ports at the
    #: per-plane speed ``fabric.link_gbps / planes``.
    planes: int = 1

    @property
    def host_link_GBps(self) -> float:
        """Payload bandwidth per direction of one GPU's PCIe path to its NICs, 10^9 bytes/s."""
        return float(self.server.host_link_GBps)

    @property
    def nic_host_link_GBps(self) -> float:
        """Payload bandwidth per direction of one NIC's own PCIe interface, 10^9 bytes/s."""
        nic = self.nic.host_link_GBps
        return float(nic) if nic is not None else math.inf

    def nic_feed_GBps(self, nics_per_gpu: int) -> float:
        """Most payload one NIC can move each way when a GPU drives ``nics_per_gpu`` of them.

        The NIC's own host interface, and the GPU's host link shared evenly by its NICs
        (NCCL spreads a GPU's channels evenly over its NICs).
        """
        return min(self.nic_host_link_GBps, self.host_link_GBps / nics_per_gpu)


def _lookup(key: str, fn, value: str):  # type: ignore[no-untyped-def]
    try:
        return fn(value)
    except UnknownCatalogKeyError as exc:
        raise ScenarioError(key, value, "must be one of " + ", ".join(sorted(exc.known))) from None


def resolve_hardware(scenario: Scenario, catalog: Catalog | None = None) -> Hardware:
    """Look up the scenario's parts in the catalog and check they fit together.

    Raises
    ------
    ScenarioError
        Unknown GPU/switch/NIC key, or a part that does not speak the vendor's protocol.
    InfeasibleDesignError
        A link speed the chosen vendor/switch/NIC does not offer.
    """
    cat = catalog or load_catalog()
    c, f = scenario.cluster, scenario.fabric
    gpu = _lookup("cluster.gpu", cat.gpu, c.gpu)
    server = cat.server(gpu.server)
    vendor = cat.vendor(f.vendor)
    if f.planes > 1 and f.topology not in PLANE_FAMILIES:
        raise InfeasibleDesignError(
            "fabric.planes",
            f"{f.planes} planes are built for fabric.topology = {' or '.join(PLANE_FAMILIES)}; "
            f"{f.topology} allows fabric.planes = 1",
        )
    plane_gbps = f.link_gbps // f.planes
    if f.switch == "auto":
        switch = cat.switch_for(f.vendor, f.link_gbps)
        # planes: the vendor's switch for the per-plane port speed, else the NIC rate's
        if f.planes > 1 and plane_gbps in vendor.switch_by_gbps:
            switch = cat.switch(vendor.switch_by_gbps[plane_gbps])
    else:
        switch = _lookup("fabric.switch", cat.switch, f.switch)
        if switch.protocol != vendor.protocol:
            raise ScenarioError(
                "fabric.switch",
                f.switch,
                f"is a {switch.protocol} switch; fabric.vendor = {f.vendor} needs a "
                f"{vendor.protocol} switch",
            )
    if f.nic == "auto":
        nic = cat.nic_for(f.vendor, f.link_gbps)
    else:
        nic = _lookup("fabric.nic", cat.nic, f.nic)
        if vendor.protocol not in nic.protocols:
            raise ScenarioError(
                "fabric.nic",
                f.nic,
                f"does not speak {vendor.protocol} (fabric.vendor = {f.vendor})",
            )
        if f.link_gbps not in nic.speeds_gbps:
            raise InfeasibleDesignError(
                "fabric.link_gbps",
                f"{nic.name} runs at {', '.join(map(str, nic.speeds_gbps))} Gb/s, "
                f"not {f.link_gbps}",
            )
    if f.planes == 1:
        radix = switch.radix(f.link_gbps)
    else:
        radix = _plane_radix(scenario, cat, vendor, switch)
    routing = vendor.default_routing if f.routing == "auto" else f.routing
    if routing == "spray":  # per-packet spraying over all paths: the adaptive router's physics
        routing = "adaptive"
    hw = Hardware(
        gpu=gpu,
        server=server,
        vendor=vendor,
        switch=switch,
        nic=nic,
        radix=radix,
        routing=routing,
        planes=f.planes,
    )
    _check_host_link(scenario, hw, cat)
    return hw


def _plane_ok(cat: Catalog, vendor: Vendor, switch: Switch, link_gbps: int, planes: int) -> str:
    """Why ``planes`` planes cannot be built at ``link_gbps`` ('' when they can)."""
    if link_gbps % planes:
        return f"{link_gbps} Gb/s does not divide into {planes} whole-Gb/s links"
    plane_gbps = link_gbps // planes
    if plane_gbps not in switch.port_speeds_gbps:
        speeds = ", ".join(map(str, switch.port_speeds_gbps))
        return f"{switch.name} runs {speeds} Gb/s ports, not {plane_gbps}"
    try:
        cat.optic_for(
            "switch", plane_gbps, 0.0, cage_gbps=switch.cage_gbps, protocol=vendor.protocol
        )
    except InfeasibleDesignError:
        return (
            f"no switch-side transceiver in this catalog breaks a {switch.cage_gbps} Gb/s cage "
            f"of {switch.key} out into {plane_gbps} Gb/s ports"
        )
    try:
        cat.optic_for(
            "nic", plane_gbps, 0.0, cage_gbps=link_gbps, protocol=vendor.protocol, form="twin"
        )
    except InfeasibleDesignError:
        return (
            f"no NIC-side breakout transceiver in this catalog splits a {link_gbps} Gb/s NIC "
            f"port into {planes} x {plane_gbps} Gb/s"
        )
    return ""


def _plane_radix(scenario: Scenario, cat: Catalog, vendor: Vendor, switch: Switch) -> int:
    """Switch ports at the per-plane speed, after checking the planes can be built.

    A plane's links run ``link_gbps / planes``: the switch must offer that port speed (its
    ASIC's breakout of the cages, ``Switch.port_speeds_gbps``) and a NIC-side breakout
    module must split the NIC port into that many links.

    Raises
    ------
    InfeasibleDesignError
        On ``fabric.planes``, naming the plane counts this switch and NIC rate allow.
    """
    f = scenario.fabric
    why = _plane_ok(cat, vendor, switch, f.link_gbps, f.planes)
    if why:
        ok = [
            p for p in (1, 2, 4, 8) if p == 1 or not _plane_ok(cat, vendor, switch, f.link_gbps, p)
        ]
        raise InfeasibleDesignError(
            "fabric.planes",
            f"{f.planes} planes of {f.link_gbps // f.planes} Gb/s: {why}; allowed at "
            f"fabric.link_gbps = {f.link_gbps} on {switch.key}: "
            f"{', '.join(map(str, ok))}",
        )
    return switch.radix(f.link_gbps // f.planes)


def _check_host_link(scenario: Scenario, hw: Hardware, cat: Catalog) -> None:
    """Refuse a NIC speed that the GPU's host link (PCIe) cannot feed.

    One NIC port at ``link_gbps`` moves ``link_gbps / 8`` GB/s each way; every byte of it
    crosses the PCIe path between the GPU and the NIC. A NIC faster than that path (an 800G
    ConnectX-8 behind an H100's PCIe Gen5 x16, 57 GB/s) is hardware that is not built, so the
    design is refused, naming the speeds this GPU can feed. Several NICs per GPU that
    together exceed the host link are accepted: they exist, and the model caps the GPU's
    network injection at the host link (:meth:`FabricContext.from_scenario`).

    Raises
    ------
    InfeasibleDesignError
        On ``fabric.link_gbps``.
    """
    f, c = scenario.fabric, scenario.cluster
    feed_GBps = min(hw.host_link_GBps, hw.nic_host_link_GBps)
    if f.link_gbps / 8.0 <= feed_GBps:
        return
    # the speeds this vendor offers that this GPU can feed (another vendor's speeds would
    # be refused next on fabric.vendor)
    ok = sorted(g for g in hw.vendor.nic_by_gbps if g / 8.0 <= feed_GBps)
    raise InfeasibleDesignError(
        "fabric.link_gbps",
        f"{f.link_gbps} Gb/s ({f.link_gbps / 8:g} GB/s per NIC) is more than cluster.gpu = "
        f"{c.gpu} can feed: its host link to the NIC ({hw.server.name}, {hw.nic.name}) "
        f"carries {feed_GBps:g} GB/s each way; allowed: {', '.join(map(str, ok)) or 'none'} Gb/s",
    )


def topology_request(scenario: Scenario, hardware: Hardware) -> TopologyRequest:
    """Translate the scenario and its hardware into a builder request (plain numbers)."""
    c, f = scenario.cluster, scenario.fabric
    req = TopologyRequest(
        n_gpus=c.n_gpus,
        gpus_per_node=c.gpus_per_node,
        nvlink_domain=c.nvlink_domain,
        nics_per_gpu=c.nics_per_gpu,
        link_gbps=f.link_gbps // f.planes,
        radix=hardware.radix,
        switch_key=hardware.switch.key,
        tiers=f.tiers,
        oversubscription=f.oversubscription,
        spine_oversubscription=f.spine_oversubscription,
        rail_optimized=f.rail_optimized,
        nic_leaf_m=f.nic_leaf_m,
        leaf_spine_m=f.leaf_spine_m,
        spine_core_m=f.spine_core_m,
        direct_link_m=f.direct_link_m,
        planes=f.planes,
    )
    if f.topology == "hybrid":  # two partitions and a shared tier (fabric_model.plant.hybrid)
        return hybrid_request(scenario, hardware, req)
    return req


def build_topology(scenario: Scenario, catalog: Catalog | None = None) -> Topology:
    """Resolve the hardware and build the scenario's topology.

    Raises
    ------
    ScenarioError, InfeasibleDesignError
        With the key to change and what is allowed.
    """
    hw = resolve_hardware(scenario, catalog)
    return build_topology_from_request(scenario.fabric.topology, topology_request(scenario, hw))


def hybrid_request(scenario: Scenario, hardware: Hardware, base: TopologyRequest) -> HybridRequest:
    """Return the :class:`HybridRequest` of a hybrid scenario (``base``: the whole cluster's).

    Raises
    ------
    InfeasibleDesignError
        On a ``hybrid.*`` key: vendors of two link layers, partitions that do not fit, or a
        partition's hardware its vendor refuses (that refusal follows).
    """
    check_hybrid(scenario)
    reqs, labels = [], []
    for part in ("a", "b"):
        ps = partition_scenario(scenario, part)
        try:
            hw = resolve_hardware(ps)
        except FabricModelError as exc:
            raise InfeasibleDesignError(
                f"hybrid.{part}_vendor", f"partition {part.upper()} cannot be built: {exc}"
            ) from None
        reqs.append(topology_request(ps, hw))
        labels.append(f"{ps.fabric.topology}, {ps.fabric.vendor} ({hw.switch.key})")
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(TopologyRequest)}
    return HybridRequest(
        **fields,
        a_family=scenario.hybrid.a_topology,
        a=reqs[0],
        b_family=scenario.hybrid.b_topology,
        b=reqs[1],
        a_label=labels[0],
        b_label=labels[1],
        core_radix=hardware.radix,
        core_switch_key=hardware.switch.key,
        shared_oversubscription=float(scenario.hybrid.shared_oversubscription),
    )


def job_scenario(scenario: Scenario) -> Scenario:
    """Return the scenario the job of ``hybrid.job`` runs on.

    ``a`` or ``b``: the partition alone (its links are the only ones the job's traffic
    crosses, with the same capacities); ``both``, or a scenario that is not a hybrid: the
    scenario itself.
    """
    if scenario.fabric.topology != "hybrid":
        return scenario
    if scenario.hybrid.job == "both":
        return scenario
    _check_builds(scenario)  # both partitions and the shared tier, with the hybrid's keys
    return partition_scenario(scenario, scenario.hybrid.job)


@lru_cache(maxsize=64)
def _check_builds(scenario: Scenario) -> None:
    """Build the hybrid's counts once (raising its refusals, which name ``hybrid.*`` keys)."""
    build_topology(scenario)
