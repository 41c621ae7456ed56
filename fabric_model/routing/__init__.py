"""Routing: traffic patterns onto the links of a topology (see :mod:`.base`)."""

from __future__ import annotations

import numpy as np

from fabric_model.routing.base import RoutedFlows, degraded_capacities
from fabric_model.routing.fat_tree import route_fat_tree
from fabric_model.topology import Topology

__all__ = ["RoutedFlows", "route", "degraded_capacities", "POLICIES"]

#: Policies each family understands (``auto`` resolves to the vendor's default first).
POLICIES = {
    "fat-tree": ("adaptive", "ecmp", "dmodk"),
}


def route(topo: Topology, src: np.ndarray, dst: np.ndarray, policy: str,
          capacity_Bps: np.ndarray | None = None, *, qps: int = 1,
          rng: np.random.Generator | None = None) -> RoutedFlows:
    """Route connections ``src[i] -> dst[i]`` (NIC endpoint ids) with ``policy``."""
    cap = topo.graph.link_capacity_Bps if capacity_Bps is None else capacity_Bps
    if topo.family == "fat-tree":
        return route_fat_tree(topo, src, dst, policy, cap, qps=qps, rng=rng)
    raise NotImplementedError(topo.family)
