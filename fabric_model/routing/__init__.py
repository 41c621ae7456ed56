"""Routing: traffic patterns onto the links of a topology (see :mod:`.base`).

One router per topology family, behind :func:`route`; :data:`POLICIES` lists what each family
understands. A policy a family does not support raises
:class:`~fabric_model.errors.InfeasibleDesignError` on ``fabric.routing``.
"""

from __future__ import annotations

import numpy as np

from fabric_model.errors import ScenarioError
from fabric_model.routing.base import RoutedFlows, Router, degraded_capacities
from fabric_model.routing.dragonfly_plus import DRAGONFLY_PLUS_POLICIES, route_dragonfly_plus
from fabric_model.routing.fat_tree import route_fat_tree
from fabric_model.routing.hypercube import HYPERCUBE_POLICIES, route_hypercube
from fabric_model.routing.rail_only import RAIL_ONLY_POLICIES, route_rail_only
from fabric_model.routing.torus3d import TORUS_POLICIES, route_torus3d
from fabric_model.topology import Topology

__all__ = ["POLICIES", "RoutedFlows", "Router", "degraded_capacities", "route"]

#: Policies each family understands (``auto`` resolves to the vendor's default first).
POLICIES = {
    "fat-tree": ("adaptive", "ecmp", "dmodk"),
    "rail-only": RAIL_ONLY_POLICIES,
    "dragonfly-plus": DRAGONFLY_PLUS_POLICIES,
    "torus-3d": TORUS_POLICIES,
    "hypercube": HYPERCUBE_POLICIES,
}

#: One router per family, all with the :class:`~.base.Router` interface.
_ROUTERS: dict[str, Router] = {
    "fat-tree": route_fat_tree,
    "rail-only": route_rail_only,
    "dragonfly-plus": route_dragonfly_plus,
    "torus-3d": route_torus3d,
    "hypercube": route_hypercube,
}


def route(
    topo: Topology,
    src: np.ndarray,
    dst: np.ndarray,
    policy: str,
    capacity_Bps: np.ndarray | None = None,
    *,
    qps: int = 1,
    rng: np.random.Generator | None = None,
) -> RoutedFlows:
    """Route connections ``src[i] -> dst[i]`` (NIC endpoint ids) with ``policy``."""
    cap = topo.graph.link_capacity_Bps if capacity_Bps is None else capacity_Bps
    if topo.family in _ROUTERS:
        return _ROUTERS[topo.family](topo, src, dst, policy, cap, qps=qps, rng=rng)
    raise ScenarioError("fabric.topology", topo.family, "one of " + ", ".join(_ROUTERS))
