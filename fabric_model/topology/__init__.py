"""Topology builders, one module per family, behind :func:`build_topology_from_request`.

The builders are named in the family registry (:data:`fabric_model.families.FAMILIES`);
:data:`BUILDERS` is a view of it that imports a family's module when that family is built.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from fabric_model.errors import InfeasibleDesignError
from fabric_model.families import FamilyView
from fabric_model.topology.base import (
    FabricGraph,
    LinkClass,
    PortGroup,
    Topology,
    TopologyRequest,
)
from fabric_model.topology.planes import PLANE_FAMILIES, stack_planes

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

#: One builder per family (a view of the family registry).
BUILDERS: Mapping[str, Callable[[TopologyRequest], Topology]] = FamilyView("builder")


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
