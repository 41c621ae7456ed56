"""Multi-plane fabrics: ``fabric.planes`` identical, independent fabrics behind every NIC.

Each NIC port of ``planes x link_gbps`` breaks out into ``planes`` links of ``link_gbps``,
one per plane; every plane is a complete fabric of the chosen family built for one link per
endpoint (OCP MRC 1.0: an 800G NIC as 8 x 100G links to 8 planes, so a 51.2T switch runs
512 ports of 100G and a 2-tier fat-tree per plane holds ``512^2 / 2 = 131,072`` NICs).

Counts: every switch tier and cable class is ``planes x`` the plane's; hops are the plane's
(a packet never leaves its plane); bisection is ``planes x`` the plane's.

Array form: the planes are identical, and traffic sprays evenly over them (per-packet
multipath), so each cable of one plane stands for the bundle of its ``planes`` copies: the
graph is one plane's with every capacity multiplied by ``planes``. Max-min fair rates scale
linearly with capacities, so a pattern solved on this graph gives the aggregate over all
planes exactly (``tests/test_planes.py`` holds it equal to an explicit solve over separate
copies). A whole plane down or degraded scales every bundle alike; a switch down in one
plane removes one copy from the bundles at that switch (:mod:`fabric_model.collectives`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fabric_model.errors import InfeasibleDesignError
from fabric_model.families import family_names
from fabric_model.topology.base import FabricGraph, LinkClass, PortGroup, Topology

__all__ = ["PLANE_FAMILIES", "failed_switch_capacities", "plane_share", "stack_planes"]

#: Families built as independent planes; the others take ``fabric.planes = 1`` only
#: (``Family.plane_capable`` in the family registry).
PLANE_FAMILIES = family_names(lambda f: f.plane_capable)


def _stack_link(lc: LinkClass, planes: int) -> LinkClass:
    return dataclasses.replace(
        lc,
        n_links=lc.n_links * planes,
        port_groups=tuple(
            PortGroup(g.tier, g.ports_per_switch, g.n_switches * planes) for g in lc.port_groups
        ),
        nic_breakout=lc.nic_breakout * planes if lc.n_nic_ends else lc.nic_breakout,
    )


def stack_planes(plane: Topology, planes: int) -> Topology:
    """Return the ``planes``-plane fabric made of ``planes`` copies of ``plane``.

    Parameters
    ----------
    plane
        One plane, built for a request with ``planes = 1`` (per-plane ``link_gbps``).
    planes
        Planes, >= 1.

    Returns
    -------
    Topology
        Switches and cables ``planes x`` the plane's (``nic_breakout = planes`` on the NIC
        links), the plane's hops, ``planes x`` its bisection; ``params`` adds ``planes``,
        ``plane_link_gbps`` and ``switches_per_plane``; the graph is the plane's with every
        capacity ``x planes`` (see the module notes).
    """
    if planes == 1:
        return plane
    req = dataclasses.replace(plane.request, planes=planes)
    per_plane = plane.n_switches
    tiers_text = ", ".join(f"{n:,} {t}" for t, n in plane.switches_by_tier.items())
    notes = (
        f"{planes} planes: each {req.nic_port_gbps}G NIC port breaks out into {planes} x "
        f"{req.link_gbps}G links, one per plane; each plane is a {plane.tiers}-tier "
        f"{plane.family} of {per_plane:,} switches ({tiers_text}); counts are for all planes",
        *plane.notes,
    )

    def graph() -> FabricGraph:
        g = plane.graph
        return dataclasses.replace(g, link_capacity_Bps=g.link_capacity_Bps * float(planes))

    return Topology(
        family=plane.family,
        request=req,
        tiers=plane.tiers,
        switches_by_tier={t: n * planes for t, n in plane.switches_by_tier.items()},
        links=tuple(_stack_link(lc, planes) for lc in plane.links),
        max_switch_hops=plane.max_switch_hops,
        mean_switch_hops=plane.mean_switch_hops,
        hop_histogram=dict(plane.hop_histogram),
        bisection_GBps=plane.bisection_GBps * planes,
        oversubscription=plane.oversubscription,
        params={
            **plane.params,
            "planes": planes,
            "plane_link_gbps": req.link_gbps,
            "switches_per_plane": per_plane,
        },
        notes=notes,
        warnings=plane.warnings,
        _graph_builder=graph,
    )


def plane_share(planes: int, failed: int, degraded_factor: float, spreading: bool) -> float:
    """Fraction of the healthy aggregate every plane-bundled link keeps under plane what-ifs.

    Parameters
    ----------
    planes
        Planes built.
    failed
        Planes down (``what_if.failed_planes``).
    degraded_factor
        Rate fraction of one more plane (``what_if.degraded_plane_factor``; 1 = healthy).
    spreading
        Whether traffic spreads over the planes by what each offers (adaptive per-packet
        spraying: MRC and UET steer packets off slow paths) rather than in equal shares
        (static hashing: every plane carries ``1 / planes`` of each connection).

    Returns
    -------
    float
        Spreading: ``(planes - failed - 1 + d) / planes`` (``d = 1`` when none is degraded):
        the planes' capacities add up. Equal shares: ``(planes - failed) / planes x d``: the
        slowest plane paces every connection. Either way a failed plane's traffic moves to
        the remaining planes (the job slows down instead of stopping).
    """
    alive = planes - failed
    if spreading:
        return (alive - 1.0 + degraded_factor) / planes
    return alive / planes * degraded_factor


def failed_switch_capacities(
    topo: Topology, cap: np.ndarray, tier: str, endpoint: int
) -> np.ndarray:
    """Bundle capacities with one switch down in one plane.

    Every cable of the array form stands for its ``planes`` copies (see the module notes);
    one plane's copy of switch ``s`` being down removes one copy from every bundle at ``s``:
    those links keep ``(planes - 1) / planes`` of their capacity. ``tier`` ``leaf`` is the
    leaf of ``endpoint`` (its NIC's plane link to that leaf is gone: the GPU injects over
    the other planes), ``spine`` the first spine. With traffic spraying over planes and paths
    this is exact for the NIC links; beyond them it lets the other planes' copies of a
    link stand in for the lost one, an upper bound when the lost switch's plane is the
    bottleneck.

    Raises
    ------
    InfeasibleDesignError
        On ``what_if.failed_switch`` for a design without that tier.
    """
    g = topo.graph
    if tier == "leaf":
        up = int(np.flatnonzero(g.link_src == endpoint)[0])
        node = int(g.link_dst[up])
    else:
        spines = np.flatnonzero(g.node_tier == 2)
        if not spines.size:
            raise InfeasibleDesignError(
                "what_if.failed_switch",
                f"this {topo.tiers}-tier design has no spine; allowed: none, leaf",
            )
        node = int(spines[0])
    touch = (g.link_src == node) | (g.link_dst == node)
    out = cap.copy()
    out[touch] *= (topo.planes - 1.0) / topo.planes
    return out
