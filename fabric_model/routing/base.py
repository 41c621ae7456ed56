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
from functools import cached_property
from typing import Protocol

import numpy as np

from fabric_model.caching import kept_per_capacity, kept_per_fabric  # re-exported
from fabric_model.errors import InfeasibleDesignError
from fabric_model.flows import FlowSet
from fabric_model.topology import Topology

__all__ = [
    "DEGRADED_CLASS",
    "ColumnRouted",
    "RoutedFlows",
    "Router",
    "check_policy",
    "degraded_capacities",
    "hash_choices",
    "kept_per_capacity",
    "kept_per_fabric",
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


class ColumnRouted(RoutedFlows):
    """Flows that cross at most one link per path slot, the slots' link ids disjoint.

    ``columns[k][f]`` is the ``k``-th link of flow ``f`` (``-1``: none), weight 1; no link id
    appears in two slots (NIC up links, bundles up, ..., NIC down links), so a link's load is
    the weights of one slot's flows summed in flow order: :meth:`link_loads` adds them as the
    solver's kernel adds a flow set's weights, bit for bit, without building the flow set.
    ``flows`` (the CSR, slots in order per flow, as a path matrix's rows give them) is built
    on first use. One flow per connection (fraction 1). With ``flow_weight`` every link of
    flow ``f`` carries that weight instead of 1 (a class of identical flows solved as one:
    ``FlowSet(max_weight=inf)``).
    """

    uniform_fraction: float
    _columns: list[np.ndarray]
    _n_links: int
    _flow_weight: np.ndarray | None

    def __init__(
        self,
        columns: list[np.ndarray],
        n_links: int,
        *,
        link_capacity_Bps: np.ndarray,
        link_class: np.ndarray,
        class_names: tuple[str, ...],
        switch_hops: np.ndarray,
        policy: str,
        flow_weight: np.ndarray | None = None,
    ) -> None:
        for key, value in (
            ("_flow_weight", flow_weight),
            ("link_capacity_Bps", link_capacity_Bps),
            ("link_class", link_class),
            ("class_names", class_names),
            ("switch_hops", switch_hops),
            ("policy", policy),
            ("notes", ()),
            ("uniform_fraction", 1.0),
            ("_columns", columns),
            ("_n_links", int(n_links)),
        ):
            object.__setattr__(self, key, value)

    def __repr__(self) -> str:
        return f"ColumnRouted({self.n_flows:,} flows, {len(self._columns)} slots)"

    @property
    def n_flows(self) -> int:
        """Flows routed."""
        return int(self._columns[0].size) if self._columns else 0

    @property
    def n_space(self) -> int:
        """Links the slots' ids number (the length of :meth:`link_loads`)."""
        return self._n_links

    @property
    def columns(self) -> list[np.ndarray]:
        """The link of each flow in each path slot (``-1``: none), slots in path order."""
        return list(self._columns)

    def link_loads(self, flow_weight: np.ndarray | None = None) -> np.ndarray:
        """Return the summed weight of the flows on every link (times ``flow_weight``).

        The solver multiplies a flow's link weights by ``flow_weight`` first; so does this.
        """
        base = self._flow_weight
        weight = (
            base if flow_weight is None else (flow_weight if base is None else base * flow_weight)
        )
        loads = np.zeros(self._n_links)
        for col in self._columns:
            on = col >= 0
            w = None if weight is None else weight[on]
            loads += np.bincount(col[on], weights=w, minlength=self._n_links)
        return loads

    def used_link_loads(
        self, flow_weight: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Return the links some flow crosses (ascending) and their :meth:`link_loads`.

        The same sums in the same order (one slot's flows per link, in flow order), over
        the crossed links only: a class solve routes a few thousand flows over a fabric of
        a million links.
        """
        base = self._flow_weight
        weight = (
            base if flow_weight is None else (flow_weight if base is None else base * flow_weight)
        )
        ons = [col >= 0 for col in self._columns]
        links, inverse = np.unique(
            np.concatenate([col[on] for col, on in zip(self._columns, ons, strict=True)]),
            return_inverse=True,
        )
        w = None if weight is None else np.concatenate([weight[on] for on in ons])
        loads = np.bincount(inverse.ravel(), weights=w, minlength=links.size)
        return links.astype(np.int64), loads.astype(np.float64)

    def first_flow_on(self, marked: np.ndarray) -> tuple[int, np.ndarray]:
        """Return the first flow that crosses a ``marked`` link, and its links."""
        hit = np.zeros(self.n_flows, dtype=bool)
        for col in self._columns:
            on = col >= 0
            hit[on] |= marked[col[on]]
        f = int(np.argmax(hit)) if hit.any() else -1
        links = np.array([int(c[f]) for c in self._columns if c[f] >= 0], np.int64)
        return f, links

    @cached_property
    def flows(self) -> FlowSet:  # type: ignore[override]
        """The solver's flow set (built on first use)."""
        paths = np.stack(self._columns, axis=1)
        valid = paths >= 0
        indptr = np.zeros(paths.shape[0] + 1, dtype=np.int64)
        np.cumsum(valid.sum(axis=1), out=indptr[1:])
        indices = paths[valid]
        if self._flow_weight is None:
            return FlowSet.built(indptr, indices, np.ones(indices.size), self._n_links)
        weights = np.repeat(self._flow_weight, np.diff(indptr))
        return FlowSet.built(indptr, indices, weights, self._n_links, max_weight=np.inf)

    @cached_property
    def flow_of_connection(self) -> np.ndarray:  # type: ignore[override]
        """One flow per connection."""
        return np.arange(self.n_flows, dtype=np.int64)

    @cached_property
    def flow_fraction(self) -> np.ndarray:  # type: ignore[override]
        """1 for every flow."""
        return np.ones(self.n_flows)


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
    if topo.family == "ocs":
        return _ocs_degraded(topo, cap, which, factor, endpoint)
    wanted = DEGRADED_CLASS[which]
    if topo.family == "hybrid":  # the class of the partition holding the endpoint (A if none)
        n_a = topo.partitions[0].topology.n_endpoints  # type: ignore[attr-defined]
        wanted = f"{'B' if endpoint is not None and endpoint >= n_a else 'A'} {wanted}"
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


def _ocs_degraded(
    topo: Topology, cap: np.ndarray, which: str, factor: float, endpoint: int | None
) -> np.ndarray:
    """Degrade an OCS fabric's link: a pod NIC's cable, else its block's first OCS fiber.

    A pod's NIC cable is the endpoint's link into the pod (the graph's internal link); an
    NVLink domain's or a cube's NIC port is an uplink, so the first fiber of the endpoint's
    block to the OCS (one circuit) runs at ``factor``.
    """
    if which != "nic":
        raise InfeasibleDesignError(
            "what_if.degraded_link",
            f"{which}: an OCS fabric has NIC cables and block-to-OCS fibers; allowed: nic",
        )
    p = topo.params
    e = 0 if endpoint is None else int(endpoint)
    if p["block"] == "pod":
        first = 2 * (int(p["n_blocks_built"]) * int(p["uplinks_per_block"]) + e)
    else:
        block_gpus = int(p["block_gpus"])
        block = int(p["circuits_data"].job_blocks[(e // topo.request.nics_per_gpu) // block_gpus])
        first = 2 * block * int(p["uplinks_per_block"])
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
