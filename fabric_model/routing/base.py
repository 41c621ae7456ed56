"""What a router returns: flows mapped onto a link space, ready for the max-min solver.

A router turns a traffic pattern (source and destination NIC endpoints) into a
:class:`RoutedFlows`: the solver's CSR flow set plus the capacity of every link in the
*link space*. The link space starts with the topology's directed cable links
(``FabricGraph``: cable ``c`` is links ``2c`` up/out and ``2c+1`` back) and may append
*bundles*: one link standing for a set of cables that a congestion-aware adaptive router
loads evenly (all uplinks of a leaf, all spine-to-core cables of a pod). A bundle's capacity
is the sum of its cables' capacities, so a degraded cable inside a bundle costs only its
share, which is what adaptive routing does (InfiniBand AR, Spectrum-X spraying) and what
static ECMP hashing does not.

Policies
--------
``adaptive``
    Per-packet spraying over all equal-cost paths, capacity-aware (bundles).
``ecmp``
    Static per-flow hashing: each queue pair of a connection takes one equal-cost path,
    chosen by a seeded pseudo-random hash at every hop.
``dmodk``
    Deterministic destination-mod-k: the up-port at each tier is a function of the
    destination only.
Family-specific policies (``minimal``, ``valiant``, ``ugal``, ``dor``) are documented in
their family's router.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from fabric_model.errors import InfeasibleDesignError
from fabric_model.flows import FlowSet
from fabric_model.topology import Topology

__all__ = [
    "DEGRADED_CLASS",
    "RoutedFlows",
    "Router",
    "check_policy",
    "degraded_capacities",
    "hash_choices",
]

#: ``what_if.degraded_link`` -> the link class whose first cable is degraded.
DEGRADED_CLASS = {"nic": "nic-leaf", "leaf-spine": "leaf-spine", "spine-core": "spine-core"}


@dataclass(frozen=True, eq=False)
class RoutedFlows:
    """Flows on a link space.

    Attributes
    ----------
    flows : FlowSet
        One entry per routed flow (a queue pair, or a class of identical flows).
    link_capacity_Bps : np.ndarray
        Capacity of every link of the link space, bytes/s.
    link_class : np.ndarray
        int16 label per link: an index into ``class_names``.
    class_names : tuple[str, ...]
        Human names of link classes (``nic-leaf``, ``leaf-spine``, ``leaf-up bundle``, ...).
    flow_of_connection : np.ndarray
        For each routed flow, the index of the pattern connection it belongs to (several
        queue pairs of one connection share an index).
    flow_fraction : np.ndarray
        Share of its connection's bytes each routed flow carries (1/qps under ECMP).
    switch_hops : np.ndarray
        Switches (or forwarding nodes) crossed by each pattern connection.
    policy : str
        The routing policy used.
    """

    flows: FlowSet
    link_capacity_Bps: np.ndarray
    link_class: np.ndarray
    class_names: tuple[str, ...]
    flow_of_connection: np.ndarray
    flow_fraction: np.ndarray
    switch_hops: np.ndarray
    policy: str
    notes: tuple[str, ...] = field(default=())

    @property
    def n_connections(self) -> int:
        """Pattern connections (before splitting into queue pairs)."""
        return int(self.switch_hops.shape[0])


def degraded_capacities(
    topo: Topology, which: str, factor: float, endpoint: int | None = None
) -> np.ndarray:
    """Directed-cable capacities with one cable (both directions) at ``factor`` of its rate.

    ``which`` is ``what_if.degraded_link``: the first cable of the NIC, leaf-spine or
    spine-core class (for switchless designs ``nic`` is the first cable of the first class).
    With ``endpoint`` (a NIC endpoint id) the degraded NIC cable is that endpoint's own.

    Raises
    ------
    InfeasibleDesignError
        If the design has no link of that class (e.g. ``spine-core`` on a 2-tier fabric,
        or any class on a switchless design of one node).
    """
    g = topo.graph
    cap = g.link_capacity_Bps.copy()
    if factor >= 1.0:
        return cap
    names = [lc.name for lc in topo.links]
    if not names:  # a switchless design of one node: its GPUs talk over NVLink only
        raise InfeasibleDesignError(
            "what_if.degraded_link",
            f"this {topo.family} design of {topo.request.n_gpus:,} GPUs (one NVLink domain) "
            f"has no cable to degrade; set what_if.degraded_link_factor = 1",
        )
    wanted = DEGRADED_CLASS[which]
    if wanted in names:
        cls = names.index(wanted)
    elif which == "nic" and topo.tiers == 0:
        cls = 0
    else:
        raise InfeasibleDesignError(
            "what_if.degraded_link",
            f"this {topo.family} design has no {which} links; it has {', '.join(names)}",
        )
    in_class = g.link_class == cls
    if endpoint is not None and which == "nic" and topo.tiers:
        in_class &= g.link_src == endpoint
    first = int(np.flatnonzero(in_class)[0])
    first -= first % 2
    cap[first : first + 2] *= factor
    return cap


def hash_choices(rng: np.random.Generator, n: int, n_choices: np.ndarray | int) -> np.ndarray:
    """Pseudo-random ECMP hash results: one uniform choice in ``[0, n_choices)`` per item."""
    k = np.broadcast_to(np.asarray(n_choices, dtype=np.int64), (n,))
    return (rng.random(n) * k).astype(np.int64)


def check_policy(family: str, policy: str, supported: tuple[str, ...]) -> None:
    """Refuse a routing policy the family's router does not implement (names the key).

    Raises
    ------
    InfeasibleDesignError
        On ``fabric.routing``, listing what the family supports.
    """
    if policy not in supported:
        raise InfeasibleDesignError(
            "fabric.routing", f"{family} supports: {', '.join(supported)} (got {policy!r})"
        )


class Router(Protocol):
    """The interface every family's router implements (``route_<family>``).

    Parameters
    ----------
    topo
        A topology of the router's family.
    src, dst
        NIC endpoint ids, one connection ``src[i] -> dst[i]`` per position.
    policy
        A routing policy the family supports (each router's docstring lists them).
    capacity_Bps
        Capacity of every directed link of ``topo.graph``, bytes/s (a what-if may have
        degraded one); bundle and trunk capacities are sums of these.
    qps
        Queue pairs per connection under ``ecmp``, each hashed independently.
    rng
        Seeded generator for ``ecmp`` hashing (and random choices such as Valiant's).

    Returns
    -------
    RoutedFlows
        The flows on the router's link space: the graph's links, then any bundles or
        trunks the policy routes over.

    Raises
    ------
    InfeasibleDesignError
        On ``fabric.routing`` for a policy the family does not support
        (:func:`check_policy`).
    """

    def __call__(
        self,
        topo: Topology,
        src: np.ndarray,
        dst: np.ndarray,
        policy: str,
        capacity_Bps: np.ndarray,
        *,
        qps: int = 1,
        rng: np.random.Generator | None = None,
    ) -> RoutedFlows:
        """Route ``src[i] -> dst[i]`` with ``policy`` (see the class docstring)."""
        ...
