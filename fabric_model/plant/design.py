"""From a scenario to concrete hardware and a built topology.

This is the thin scenario layer: it looks up the GPU, server, switch and NIC in the catalog,
checks that they fit together (a clear :class:`ScenarioError` naming the key otherwise), and
hands plain numbers to the topology builders. ``fabric.switch = auto`` builds and prices the
design on each candidate switch (:func:`priced`, through :mod:`fabric_model.plant.bill`,
which prices resolved parts), so the whole bill's front door,
:func:`fabric_model.plant.cost.bill_of_materials`, sits above this module.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fabric_model.caching import Lru, Reads, lru_cached
from fabric_model.catalog import Catalog, Gpu, Nic, Server, Switch, Vendor, load_catalog
from fabric_model.errors import (
    FabricModelError,
    InfeasibleDesignError,
    ScenarioError,
    UnknownCatalogKeyError,
)
from fabric_model.families import family_names
from fabric_model.plant.bill import BillOfMaterials, price_fabric
from fabric_model.plant.hardware import Hardware
from fabric_model.plant.host_path import check_host_path
from fabric_model.plant.hybrid import check_hybrid, partition_scenario
from fabric_model.plant.lines import ocs_channel
from fabric_model.scenario import Scenario
from fabric_model.scenario.ocs import ocs_plan_key
from fabric_model.scenario.workload import rank_order
from fabric_model.topology import (
    PLANE_FAMILIES,
    Topology,
    TopologyRequest,
    build_topology_from_request,
)
from fabric_model.topology.hybrid import HybridRequest
from fabric_model.topology.ocs import OcsRequest
from fabric_model.transports import Transport, flap_stall_s, transports

__all__ = [
    "SWITCHLESS",
    "Hardware",
    "build_topology",
    "hybrid_request",
    "job_scenario",
    "ocs_channel",
    "ocs_request",
    "priced",
    "resolve_hardware",
    "topology_request",
]

#: Families without switches: their links run NIC to NIC (``Family.switchless``).
SWITCHLESS = frozenset(family_names(lambda f: f.switchless))


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
    _check_nvlink_domain(scenario, gpu, server)
    vendor = cat.vendor(f.vendor)
    if f.planes > 1 and f.topology not in PLANE_FAMILIES:
        raise InfeasibleDesignError(
            "fabric.planes",
            f"{f.planes} planes are built for fabric.topology = {' or '.join(PLANE_FAMILIES)}; "
            f"{f.topology} allows fabric.planes = 1",
        )
    plane_gbps = f.link_gbps // f.planes
    choice = ""
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
    # an OCS fabric of NVLink domains or cubes has no electrical switch to choose
    electrical = f.topology != "ocs" or scenario.ocs.block == "pod"
    if f.switch == "auto" and f.topology not in SWITCHLESS and electrical:
        switch, choice = _choose_switch(scenario, cat, vendor, switch, nic, gpu)
    optics = _optics(scenario, cat, vendor, switch)
    if f.planes == 1:
        radix = switch.radix(f.link_gbps)
    else:
        radix = _plane_radix(scenario, cat, vendor, switch)
    transport = _resolve_transport(scenario, vendor)
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
        switch_choice=choice,
        optics=optics,
        transport=transport,
        pfc=transport.has_pfc and scenario.what_if.pfc == "on",
    )
    _check_host_link(scenario, hw, cat)
    check_host_path(scenario, server)
    _check_flapping(scenario)
    return hw


def _resolve_transport(scenario: Scenario, vendor: Vendor) -> Transport:
    """Resolve the scenario's transport; refuse one the vendor cannot run, or a PFC it lacks.

    ``fabric.transport`` must match the vendor's protocol and its lossless or lossy wire
    (Spectrum-X's telemetry control also needs Spectrum-X parts); ``what_if.pfc = off``
    needs a PFC transport.
    """
    f = scenario.fabric
    known = transports()
    key = vendor.transport if f.transport == "auto" else f.transport
    tr = known[key]

    def fits(t: Transport) -> bool:
        spectrum = t.congestion_control != "telemetry" or vendor.requires_spectrum_x_nic
        return t.protocol == vendor.protocol and t.lossless == vendor.lossless and spectrum

    if not fits(tr):
        ok = [k for k, t in known.items() if fits(t)]
        what = (
            "needs Spectrum-X switches and SuperNICs"
            if tr.congestion_control == "telemetry" and tr.protocol == vendor.protocol
            else f"runs on {'lossless' if tr.lossless else 'lossy'} {tr.protocol}"
        )
        raise InfeasibleDesignError(
            "fabric.transport",
            f"{key} {what}; fabric.vendor = {f.vendor} is "
            f"{'lossless' if vendor.lossless else 'lossy'} {vendor.protocol} "
            f"(allowed: auto, {', '.join(ok)})",
        )
    if scenario.what_if.pfc == "off" and not tr.has_pfc:
        why = (
            "InfiniBand has no PFC: credit-based flow control keeps it lossless by design"
            if tr.flow_control == "credit"
            else f"{tr.name} runs without PFC already"
        )
        raise InfeasibleDesignError(
            "what_if.pfc",
            f"off: {why}; the key applies to the PFC transports (roce-dcqcn, roce-pfc, "
            f"spectrum-x); allowed here: on",
        )
    return tr


def _check_flapping(scenario: Scenario) -> None:
    """Refuse a flapping period the job cannot survive or progress through."""
    period = scenario.what_if.flapping_link
    if period <= 0:
        return
    stall, down, budget = flap_stall_s()
    if down > budget:
        raise InfeasibleDesignError(
            "what_if.flapping_link",
            f"a retrain keeps the link down {down:g} s, past NCCL's retry budget of "
            f"{budget:.1f} s: the job fails at the first flap",
        )
    if period <= stall:
        raise InfeasibleDesignError(
            "what_if.flapping_link",
            f"{period:g} s: each retrain stalls the job {stall:.1f} s (the link's {down:g} s "
            f"down, then NCCL's QPs wait for their ACK timeout, 4.096 us x 2^NCCL_IB_TIMEOUT), "
            f"so a period of {stall:.1f} s or less leaves no progress; allowed: 0 (no "
            f"flapping) or more than {stall:.1f}",
        )


def _check_nvlink_domain(scenario: Scenario, gpu: Gpu, server: Server) -> None:
    """Refuse an NVLink domain larger than any system built on this GPU has.

    ``Gpu.max_nvlink_domain`` (sourced per GPU in the catalog; the default server's domain
    when not given): an H100 domain reaches 256 GPUs only in the NVLink Switch System of
    DGX GH200, a Blackwell one 72 in an NVL72 rack, an HGX board 8.

    Raises
    ------
    ScenarioError
        On ``cluster.nvlink_domain``, naming the GPU's maximum.
    """
    c = scenario.cluster
    most = gpu.max_nvlink_domain or server.nvlink_domain
    if c.nvlink_domain > most:
        raise ScenarioError(
            "cluster.nvlink_domain",
            c.nvlink_domain,
            f"must be at most {most} for cluster.gpu = {gpu.key} ({gpu.name}): no system "
            f"built on it has a larger NVLink domain (`python -m fabric_model compat` lists "
            f"each GPU's)",
        )


def _optics(scenario: Scenario, cat: Catalog, vendor: Vendor, switch: Switch) -> str:
    """Return the switch-port optics ``fabric.optics`` resolves to (pluggable or cpo).

    ``auto`` is ``cpo`` for a switch sold only with co-packaged optics
    (``Switch.co_packaged_optics``), else ``pluggable``.

    Raises
    ------
    InfeasibleDesignError
        On ``fabric.optics``: ``cpo`` for a switch without a CPO variant in the catalog, or
        ``pluggable`` for one sold only with CPO.
    """
    f = scenario.fabric
    if f.topology == "ocs" and f.optics == "cpo":
        raise InfeasibleDesignError(
            "fabric.optics",
            "cpo: an OCS fabric's block uplinks take pluggable duplex or circulator optics "
            "(the light crosses the OCS); allowed: auto, pluggable",
        )
    if f.topology in SWITCHLESS:
        if f.optics == "cpo":
            raise InfeasibleDesignError(
                "fabric.optics",
                f"cpo: fabric.topology = {f.topology} has no switches; allowed: auto, pluggable",
            )
        return "pluggable"
    if f.optics == "auto":
        return "cpo" if switch.co_packaged_optics and switch.has_cpo else "pluggable"
    if f.optics == "cpo" and not switch.has_cpo:
        with_cpo = [k for k in vendor.switch_keys if cat.switch(k).has_cpo]
        raise InfeasibleDesignError(
            "fabric.optics",
            f"cpo: {switch.name} has no co-packaged-optics variant in this catalog; allowed: "
            f"pluggable, or fabric.switch = {' / '.join(with_cpo) or 'none'} for cpo",
        )
    if f.optics == "pluggable" and switch.co_packaged_optics:
        raise InfeasibleDesignError(
            "fabric.optics",
            f"pluggable: {switch.name} is sold only with co-packaged optics; allowed: cpo, auto",
        )
    return str(f.optics)


def _switch_candidates(
    scenario: Scenario, cat: Catalog, vendor: Vendor, default: Switch, nic: Nic, gpu: Gpu
) -> tuple[list[Switch], list[str]]:
    """Return the vendor's switches that can carry this design's links, and why not others.

    A switch qualifies when it offers the per-plane port speed (``link_gbps / planes``, by
    breaking out its cages), a transceiver breaks its cage out into that speed (and, with
    planes, one breaks the NIC port out into one link per plane), its cages' SerDes lanes
    are no faster than the NIC's (``Switch.lane_gbps <= Nic.lane_gbps``: a 200G-lane
    Quantum-X800 cannot take a 100G-lane ConnectX-7), it is shipping unless the GPU is
    announced too, and it has a CPO variant when ``fabric.optics = cpo``. The vendor's
    default for the speed always qualifies (it is the reference design).
    """
    f = scenario.fabric
    plane_gbps = f.link_gbps // f.planes
    out, why = [], []
    for key in dict.fromkeys((default.key, *vendor.switch_keys)):
        sw = cat.switch(key)
        reason = ""
        if f.optics == "cpo" and not sw.has_cpo:
            reason = "no CPO variant (fabric.optics = cpo)"
        elif f.optics == "pluggable" and sw.co_packaged_optics:
            reason = "sold only with CPO (fabric.optics = pluggable)"
        elif sw.key == default.key:
            pass  # the vendor's reference switch for the speed
        elif plane_gbps not in sw.port_speeds_gbps:
            reason = f"no {plane_gbps}G ports"
        elif nic.lane_gbps is None or sw.lane_gbps > nic.lane_gbps:
            lanes = "unknown" if nic.lane_gbps is None else f"{nic.lane_gbps}G"
            reason = f"{sw.lane_gbps}G lanes, {nic.key} has {lanes} lanes"
        elif sw.announced and not gpu.announced:
            reason = f"announced, not shipping (cluster.gpu = {gpu.key} is shipping)"
        elif f.planes > 1:
            reason = _plane_ok(cat, vendor, sw, f.link_gbps, f.planes)
        elif not (f.optics == "cpo" or sw.co_packaged_optics):
            try:
                cat.optic_for(
                    "switch", plane_gbps, 0.0, cage_gbps=sw.cage_gbps, protocol=vendor.protocol
                )
            except InfeasibleDesignError:
                reason = f"no transceiver runs {plane_gbps}G in its {sw.cage_gbps}G cages"
        if reason:
            why.append(f"{key}: {reason}")
        else:
            out.append(sw)
    return (out or [default]), why


def _choose_switch(
    scenario: Scenario, cat: Catalog, vendor: Vendor, default: Switch, nic: Nic, gpu: Gpu
) -> tuple[Switch, str]:
    """``fabric.switch = auto``: the qualifying switch with the fewest tiers, then lowest capex.

    Each candidate (:func:`_switch_candidates`) is built and priced as the scenario with
    ``fabric.switch`` set to it (the full compute-fabric bill: switches, optics, cables,
    NICs; a ``costs.switch_usd`` override prices every candidate alike); ties keep the
    vendor's default. A candidate that cannot build the design is
    skipped; when none can, the default is kept and raises its own error downstream.

    Returns
    -------
    (Switch, str)
        The choice and a note naming it, its tiers and capex and the runners-up (empty when
        the default was the only candidate).
    """
    candidates, why = _switch_candidates(scenario, cat, vendor, default, nic, gpu)
    if len(candidates) == 1:
        only = candidates[0]
        if only.key == default.key:
            return default, ""
        return only, (
            f"fabric.switch = auto chose {only.key}, the only switch of {vendor.key} that "
            f"qualifies ({'; '.join(why)})"
        )
    if cat is not load_catalog():  # the cache holds the shipped catalog's choices only
        return _cheapest(scenario, cat, vendor, default, candidates)

    def choose() -> tuple[str, str]:
        best, note = _cheapest(scenario, cat, vendor, default, candidates)
        return best.key, note

    chosen, note = _CHOICE_CACHE.get(CHOICE_READS.key(scenario), choose)
    return cat.switch(chosen), note


def _cheapest(
    scenario: Scenario, cat: Catalog, vendor: Vendor, default: Switch, candidates: list[Switch]
) -> tuple[Switch, str]:
    """Build and price each candidate: the one with the fewest tiers, then lowest capex.

    Returns the choice and its note (the default and '' when no candidate builds).
    """
    scored = []
    for rank, sw in enumerate(candidates):
        variant = dataclasses.replace(
            scenario, fabric=dataclasses.replace(scenario.fabric, switch=sw.key)
        )
        try:
            bom = priced(variant, cat)
        except FabricModelError:
            continue
        scored.append((bom.topology.tiers, bom.capex_usd, rank, sw, bom))
    if not scored:
        return default, ""
    scored.sort(key=lambda t: t[:3])
    best = scored[0][3]

    def text(t: tuple[int, float, int, Switch, Any]) -> str:
        tiers, capex, _, sw, bom = t
        return (
            f"{sw.key} radix {bom.hardware.radix} at {bom.topology.request.link_gbps}G: "
            f"{tiers} tiers, {bom.topology.n_switches:,} switches, ${capex / 1e6:,.1f} M"
        )

    rest = "; ".join(text(t) for t in scored[1:]) or "no other candidate that builds it"
    note = (
        f"fabric.switch = auto chose {text(scored[0])} (fewest tiers, then lowest capex) "
        f"over {rest}"
    )
    if best.announced:
        note += f"; {best.name} is announced, not shipping"
    return best, note


#: What the automatic switch choice reads: the sections a compute-fabric bill reads (not the
#: model, plan or what-ifs), each whole, and an OCS fabric's plan degrees when its circuits
#: follow the job (:func:`~fabric_model.scenario.ocs.ocs_plan_key`).
CHOICE_READS = Reads(
    "switch choice",
    ("cluster", "fabric", "costs", "facility", "storage", "management", "hybrid", "ocs"),
    derived=ocs_plan_key,
)
#: The automatic switch choice and its note per :data:`CHOICE_READS`, for the shipped catalog
#: (building and pricing every candidate is the expensive part of resolving the hardware; a
#: plan search or a what-if varies other sections and hits it).
_CHOICE_CACHE = Lru(
    4096,
    "plant.design._CHOICE_CACHE",
    key=f"CHOICE_READS {CHOICE_READS.names} (the shipped catalog only)",
)


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
    if f.topology == "ocs":  # blocks, optical circuit switches and circuits
        return ocs_request(scenario, hardware, req)
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


def priced(
    scenario: Scenario,
    catalog: Catalog | None = None,
    *,
    own_vendor: bool = True,
    topology: Topology | None = None,
) -> BillOfMaterials:
    """Resolve the scenario's hardware, build its topology and price it.

    What :func:`fabric_model.plant.cost.bill_of_materials` returns (a hybrid's partitions
    on their own parts). ``topology``: the scenario's already built topology, to save
    building it again.
    """
    cat = catalog or load_catalog()
    hw = resolve_hardware(scenario, cat)
    topo = topology or build_topology_from_request(
        scenario.fabric.topology, topology_request(scenario, hw)
    )
    partitions: tuple[Hardware, ...] = ()
    if topo.family == "hybrid":
        partitions = tuple(resolve_hardware(partition_scenario(scenario, p), cat) for p in "ab")
    return price_fabric(scenario, hw, topo, cat, own_vendor=own_vendor, partitions=partitions)


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


def ocs_request(scenario: Scenario, hardware: Hardware, base: TopologyRequest) -> OcsRequest:
    """Return the :class:`OcsRequest` of an OCS scenario (``base``: the cluster's request).

    The uplinks' transceiver is chosen for a circuit of two ``fabric.direct_link_m`` runs
    (the bill re-checks it at the floor plan's length); its fibers are the OCS ports an
    uplink takes.

    Raises
    ------
    InfeasibleDesignError
        On ``ocs.switch`` or ``fabric.link_gbps`` (:func:`ocs_channel`).
    """
    if scenario.fabric.planes > 1:
        raise InfeasibleDesignError(
            "fabric.planes", "an OCS fabric is built in one plane; allowed: 1"
        )
    o, pl = scenario.ocs, scenario.parallel
    sw = load_catalog().ocs_switch(o.switch)
    channel = ocs_channel(scenario, hardware, float(scenario.fabric.direct_link_m))
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(TopologyRequest)}
    return OcsRequest(
        **fields,
        block=o.block,
        block_gpus=0 if o.block_gpus == "auto" else int(o.block_gpus),
        ocs_ports=sw.n_ports,
        ocs_key=sw.key,
        fibers_per_uplink=channel.optic.fibers_per_link(scenario.fabric.link_gbps),
        optic_key=channel.optic.key,
        circuits=o.circuits,
        reconfigure=o.reconfigure,
        spare_blocks=o.spare_blocks,
        failed_blocks=o.failed_blocks,
        job_tp=pl.tp,
        job_cp=pl.cp,
        job_ep=pl.ep,
        job_pp=pl.pp,
        job_order=rank_order(pl, scenario.training),
        ocs_rack_units=sw.rack_units,
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


@lru_cached("hybrid._check_builds", 64, key="the whole scenario")
def _check_builds(scenario: Scenario) -> None:
    """Build the hybrid's counts once (raising its refusals, which name ``hybrid.*`` keys)."""
    build_topology(scenario)
