"""Topology builders, one module per family, behind :func:`build_topology_from_request`."""

from __future__ import annotations

from collections.abc import Callable

from fabric_model.topology.base import (
    FabricGraph,
    LinkClass,
    PortGroup,
    Topology,
    TopologyRequest,
)
from fabric_model.topology.fat_tree import build_fat_tree

__all__ = [
    "FabricGraph",
    "LinkClass",
    "PortGroup",
    "Topology",
    "TopologyRequest",
    "BUILDERS",
    "build_topology_from_request",
]

BUILDERS: dict[str, Callable[[TopologyRequest], Topology]] = {
    "fat-tree": build_fat_tree,
}


def build_topology_from_request(family: str, req: TopologyRequest) -> Topology:
    """Build the topology of ``family`` for ``req`` (see each family's module)."""
    return BUILDERS[family](req)
