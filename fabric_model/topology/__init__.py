"""Topology builders, one module per family, behind :func:`build_topology_from_request`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from fabric_model.errors import InfeasibleDesignError
from fabric_model.topology.base import (
    FabricGraph,
    LinkClass,
    PortGroup,
    Topology,
    TopologyRequest,
)
from fabric_model.topology.dragonfly_plus import build_dragonfly_plus
from fabric_model.topology.fat_tree import build_fat_tree
from fabric_model.topology.hypercube import build_hypercube
from fabric_model.topology.planes import PLANE_FAMILIES, stack_planes
from fabric_model.topology.rail_only import build_rail_only
from fabric_model.topology.torus3d import build_torus3d

__all__ = [
    "BUILDERS",
    "PLANE_FAMILIES",
    "FabricGraph",
    "LinkClass",
    "PortGroup",
    "Topology",
    "TopologyRequest",
    "build_topology_from_request",
]

BUILDERS: dict[str, Callable[[TopologyRequest], Topology]] = {
    "fat-tree": build_fat_tree,
    "rail-only": build_rail_only,
    "dragonfly-plus": build_dragonfly_plus,
    "torus-3d": build_torus3d,
    "hypercube": build_hypercube,
}


def build_topology_from_request(family: str, req: TopologyRequest) -> Topology:
    """Build the topology of ``family`` for ``req`` (see each family's module).

    Raises
    ------
    InfeasibleDesignError
        For a family without a builder (naming ``fabric.topology`` and the available ones),
        or ``planes > 1`` on a family not built in planes (naming ``fabric.planes``).
    """
    builder = BUILDERS.get(family)
    if builder is None:
        raise InfeasibleDesignError(
            "fabric.topology", f"{family} cannot be built; available: {', '.join(BUILDERS)}"
        )
    if req.planes == 1:
        return builder(req)
    if family not in PLANE_FAMILIES:
        raise InfeasibleDesignError(
            "fabric.planes",
            f"{req.planes} planes are built for fabric.topology = "
            f"{' or '.join(PLANE_FAMILIES)}; {family} allows fabric.planes = 1",
        )
    return stack_planes(builder(dataclasses.replace(req, planes=1)), req.planes)
