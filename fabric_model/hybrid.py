"""Hybrid clusters from a scenario: the partitions' scenarios, request, job and bill.

``fabric.topology = hybrid`` splits the cluster into partition A (GPUs ``0 .. a - 1``, family
``hybrid.a_topology``, vendor ``hybrid.a_vendor``) and partition B (the rest), joined by a
shared core tier of ``fabric.vendor``'s switch (:mod:`fabric_model.topology.hybrid` builds
it). Each partition is the scenario with its own size, family and vendor
(:func:`partition_scenario`); the job (``hybrid.job``) runs on A's GPUs, B's, or both
(:func:`job_scenario`): a job inside one partition crosses only that partition's links
(``tests/test_hybrid.py`` holds it), so it is modelled on the partition alone.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from fabric_model.errors import FabricModelError, InfeasibleDesignError
from fabric_model.scenario import Scenario
from fabric_model.topology import Topology, TopologyRequest
from fabric_model.topology.caching import lru_cached
from fabric_model.topology.hybrid import HybridRequest, HybridTopology

if TYPE_CHECKING:
    from fabric_model.catalog import Catalog
    from fabric_model.cost import BomLine
    from fabric_model.design import Hardware

__all__ = [
    "check_hybrid",
    "compare_with_fat_tree",
    "hybrid_bom_lines",
    "hybrid_request",
    "job_scenario",
    "partition_gpus",
    "partition_scenario",
    "partition_vendor",
    "single_fat_tree_scenario",
]


def partition_gpus(scenario: Scenario) -> tuple[int, int]:
    """GPUs of partitions A and B (``hybrid.a_gpus``, ``hybrid.b_gpus``, ``auto`` resolved).

    Raises
    ------
    InfeasibleDesignError
        On ``hybrid.a_gpus`` / ``hybrid.b_gpus`` when a partition would be empty or would
        split an NVLink domain between the partitions.
    """
    n, h = scenario.cluster.n_gpus, scenario.hybrid
    dom = scenario.cluster.nvlink_domain
    if h.a_gpus == "auto" and h.b_gpus == "auto":
        a = n // 2 // dom * dom
    elif h.a_gpus == "auto":
        a = n - int(h.b_gpus)
    else:
        a = int(h.a_gpus)
    b = n - a
    for key, count in (("hybrid.a_gpus", a), ("hybrid.b_gpus", b)):
        if count < 1 or count % dom:
            raise InfeasibleDesignError(
                key,
                f"{count:,} GPUs: each partition needs whole NVLink domains of "
                f"cluster.nvlink_domain = {dom} (at least one; cluster.n_gpus = {n:,})",
            )
    return a, b


def partition_vendor(scenario: Scenario, part: str) -> str:
    """Vendor of partition ``part`` (``"a"`` or ``"b"``): its key, or ``fabric.vendor``."""
    v = getattr(scenario.hybrid, f"{part}_vendor")
    return scenario.fabric.vendor if v == "auto" else str(v)


def partition_scenario(scenario: Scenario, part: str) -> Scenario:
    """Return the scenario of partition ``part`` (``"a"`` or ``"b"``) built alone.

    Its size, family and vendor are the partition's; a vendor other than ``fabric.vendor``
    takes its own default switch, NIC and routing.
    """
    a, b = partition_gpus(scenario)
    vendor = partition_vendor(scenario, part)
    f = scenario.fabric
    fabric = dataclasses.replace(f, topology=getattr(scenario.hybrid, f"{part}_topology"))
    if vendor != f.vendor:
        fabric = dataclasses.replace(
            fabric, vendor=vendor, switch="auto", nic="auto", routing="auto"
        )
    return dataclasses.replace(
        scenario,
        name=f"{scenario.name} / partition {part.upper()}",
        cluster=dataclasses.replace(scenario.cluster, n_gpus=a if part == "a" else b),
        fabric=fabric,
    )


def check_hybrid(scenario: Scenario, catalog: Catalog | None = None) -> None:
    """Refuse a hybrid whose vendors do not share one link layer, or planes.

    Raises
    ------
    InfeasibleDesignError
        On ``hybrid.a_vendor`` / ``hybrid.b_vendor`` (InfiniBand and Ethernet cannot share
        one core tier) or ``fabric.planes``.
    """
    from fabric_model.catalog import load_catalog

    cat = catalog or load_catalog()
    partition_gpus(scenario)
    shared = scenario.fabric.vendor
    layer = cat.vendor(shared).protocol
    for part in ("a", "b"):
        vendor = partition_vendor(scenario, part)
        theirs = cat.vendor(vendor).protocol
        if theirs != layer:
            same = [
                v
                for v in ("infiniband", "spectrum-x", "roce", "lossy-ethernet")
                if cat.vendor(v).protocol == layer
            ]
            raise InfeasibleDesignError(
                f"hybrid.{part}_vendor",
                f"{vendor} is {theirs}, the shared core tier (fabric.vendor = {shared}) is "
                f"{layer}: one core tier cannot join both link layers; allowed: auto, "
                f"{', '.join(same)}",
            )
    if scenario.fabric.planes != 1:
        raise InfeasibleDesignError(
            "fabric.planes", "a hybrid is built with fabric.planes = 1 (allowed: 1)"
        )


def hybrid_request(scenario: Scenario, hardware: Hardware, base: TopologyRequest) -> HybridRequest:
    """Return the :class:`HybridRequest` of a hybrid scenario (``base``: the whole cluster's).

    Raises
    ------
    InfeasibleDesignError
        On a ``hybrid.*`` key: vendors of two link layers, partitions that do not fit, or a
        partition's hardware its vendor refuses (that refusal follows).
    """
    from fabric_model.design import resolve_hardware, topology_request

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


@lru_cached("hybrid._check_builds", 64, key="the whole scenario")
def _check_builds(scenario: Scenario) -> None:
    """Build the hybrid's counts once (raising its refusals, which name ``hybrid.*`` keys)."""
    from fabric_model.design import build_topology

    build_topology(scenario)


def single_fat_tree_scenario(scenario: Scenario) -> Scenario:
    """Return the same cluster (size, vendor, speed) as one fat-tree (the Cost comparison)."""
    return dataclasses.replace(
        scenario,
        name=f"{scenario.name} / single fat-tree",
        fabric=dataclasses.replace(scenario.fabric, topology="fat-tree", tiers="auto"),
    )


def _view(topo: HybridTopology, prefix: str, base: Topology, request: TopologyRequest) -> Topology:
    """Return the part of a (floor-planned) hybrid whose tiers and links start with ``prefix``."""
    shared = prefix == "shared"
    links = tuple(
        lc
        for lc in topo.links
        if lc.name.endswith("-shared") == shared and (shared or lc.name.startswith(prefix + " "))
    )
    return dataclasses.replace(
        base,
        request=request,
        switches_by_tier={t: n for t, n in topo.switches_by_tier.items() if t.startswith(prefix)},
        links=links,
        params={},
        notes=(),
        warnings=(),
    )


def hybrid_bom_lines(
    scenario: Scenario,
    topo: Topology,
    hardware: Hardware,
    catalog: Catalog,
    own_vendor: bool,
) -> list[BomLine]:
    """Bill lines of a hybrid: each partition priced with its vendor's parts, then the shared tier.

    Partition links (``A leaf-spine``, ...) take that partition's switch, NIC and optics; the
    shared uplinks (``A core-shared``, ``B spine-shared``) and the shared cores take
    ``fabric.vendor``'s switch and its optics.
    """
    from fabric_model.cost import _bom_lines
    from fabric_model.design import resolve_hardware

    if not isinstance(topo, HybridTopology):
        raise InfeasibleDesignError("fabric.topology", "not a hybrid topology")
    lines: list[BomLine] = []
    for part, p in zip(("a", "b"), topo.partitions, strict=True):
        ps = partition_scenario(scenario, part)
        hw = resolve_hardware(ps, catalog)
        own = own_vendor and ps.fabric.vendor == scenario.fabric.vendor
        view = _view(topo, p.name, p.topology, p.topology.request)
        lines.extend(_bom_lines(view, hw, catalog, scenario.costs, own))
    shared_req = dataclasses.replace(topo.request, n_gpus=0)
    shared = _view(topo, "shared", topo.partitions[0].topology, shared_req)
    lines.extend(
        line
        for line in _bom_lines(shared, hardware, catalog, scenario.costs, own_vendor)
        if line.quantity
    )
    return lines


def compare_with_fat_tree(
    scenario: Scenario, catalog: Catalog | None = None
) -> list[dict[str, object]]:
    """Price the hybrid and one fat-tree of the same size, vendor and speed.

    Both take their cable lengths from the ``fabric.*_m`` keys (``facility.cable_lengths =
    keys``): the floor plan places no hybrid cable yet, so this keeps the optics comparable.
    Returns one row per design (``design``, switches, cables, transceivers, capex, capex per
    GPU, power, bisection, most switch hops; ``error`` when the fat-tree cannot be built).
    """
    from fabric_model.cost import bill_of_materials

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
