"""Routing: traffic patterns onto the links of a topology (see :mod:`.base`).

One router per topology family, behind :func:`route`; :data:`POLICIES` lists what each family
understands (both views of the family registry, :data:`fabric_model.families.FAMILIES`). A
policy a family does not support raises :class:`~fabric_model.errors.InfeasibleDesignError` on
``fabric.routing``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from fabric_model.errors import ScenarioError
from fabric_model.families import FAMILIES, FamilyView
from fabric_model.routing.base import RoutedFlows, Router, degraded_capacities
from fabric_model.topology import Topology

__all__ = ["POLICIES", "RoutedFlows", "Router", "degraded_capacities", "route"]

#: Policies each family understands (``auto`` resolves to the vendor's default first).
POLICIES: dict[str, tuple[str, ...]] = {n: f.policies for n, f in FAMILIES.items()}

#: One router per family, all with the :class:`~.base.Router` interface (imported on use).
_ROUTERS: Mapping[str, Router] = FamilyView("router")


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
