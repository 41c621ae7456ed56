"""Hybrid clusters from a scenario: the partitions' scenarios and views.

``fabric.topology = hybrid`` splits the cluster into partition A (GPUs ``0 .. a - 1``, family
``hybrid.a_topology``, vendor ``hybrid.a_vendor``) and partition B (the rest), joined by a
shared core tier of ``fabric.vendor``'s switch (:mod:`fabric_model.topology.hybrid` builds
it). Each partition is the scenario with its own size, family and vendor
(:func:`partition_scenario`); the job (``hybrid.job``) runs on A's GPUs, B's, or both
(:func:`job_scenario`): a job inside one partition crosses only that partition's links
(``tests/test_hybrid.py`` holds it), so it is modelled on the partition alone.

The hybrid's request and job live with every family's (:mod:`fabric_model.plant.design`),
its bill lines with every design's (:mod:`fabric_model.plant.lines`), and the comparison with
one fat-tree in :mod:`fabric_model.plant.cost`; this module is the partitioning they share.
"""

from __future__ import annotations

import dataclasses

from fabric_model.catalog import Catalog, load_catalog
from fabric_model.errors import InfeasibleDesignError
from fabric_model.scenario import Scenario
from fabric_model.topology import Topology, TopologyRequest
from fabric_model.topology.hybrid import HybridTopology

__all__ = [
    "check_hybrid",
    "partition_gpus",
    "partition_scenario",
    "partition_vendor",
    "partition_view",
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


def single_fat_tree_scenario(scenario: Scenario) -> Scenario:
    """Return the same cluster (size, vendor, speed) as one fat-tree (the Cost comparison)."""
    return dataclasses.replace(
        scenario,
        name=f"{scenario.name} / single fat-tree",
        fabric=dataclasses.replace(scenario.fabric, topology="fat-tree", tiers="auto"),
    )


def partition_view(
    topo: HybridTopology, prefix: str, base: Topology, request: TopologyRequest
) -> Topology:
    """Return the part of a (floor-planned) hybrid whose tiers and links start with ``prefix``.

    ``prefix`` is a partition's name, or ``"shared"`` for the shared tier and its uplinks.
    """
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
