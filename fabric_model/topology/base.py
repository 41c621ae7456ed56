"""Shared types of the topology builders: the request, the immutable result, the arrays.

A builder turns a :class:`TopologyRequest` (plain numbers: GPU count, radix, speeds, lengths)
into a :class:`Topology` with exact counts (switches and links per tier, switch ports per
link class for the optics rule, hop distribution, bisection) and, on demand, the compact
array form the flow solver works on (:class:`FabricGraph`: one directed link per cable and
direction).

Conventions
-----------
- An *endpoint* is one NIC port: ``n_endpoints = n_gpus x nics_per_gpu``; endpoint id
  ``e = gpu * nics_per_gpu + nic``. Endpoints are graph nodes ``0 .. n_endpoints-1``.
- *Rails*: ``rails = gpus_per_node x nics_per_gpu``; NIC ``nic`` of local GPU ``l`` is on
  rail ``l * nics_per_gpu + nic``.
- Hop statistics are over ordered pairs of GPUs in *different* NVLink domains (pairs inside a
  domain talk over NVLink and cross no scale-out switch). Traffic between GPUs on different
  rails is assumed to be moved onto the destination's rail over NVLink first (PXN), as NCCL
  does, so the scale-out path is rail-matched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any

import numpy as np

from fabric_model._fastpaths import shortcuts
from fabric_model.topology import _reference
from fabric_model.units import gbps_to_Bps, gbps_to_GBps

__all__ = [
    "FabricGraph",
    "LinkClass",
    "PortGroup",
    "Topology",
    "TopologyRequest",
    "graph_from_cables",
    "hop_histogram",
]


@dataclass(frozen=True)
class TopologyRequest:
    """Everything a topology builder needs, as plain numbers (no catalog lookups).

    Parameters
    ----------
    n_gpus, gpus_per_node, nvlink_domain, nics_per_gpu
        Cluster shape (see :class:`fabric_model.scenario.ClusterSpec`).
    link_gbps
        Line rate of every scale-out link, Gb/s.
    radix
        Switch ports at ``link_gbps`` (0 for switchless families).
    switch_key
        Catalog key of the switch (for labels only).
    tiers
        ``"auto"`` or 1, 2, 3 (fat-tree, rail-only).
    oversubscription, spine_oversubscription
        Down:up bandwidth ratio at the leaf and at the spine (3-tier) layers.
    rail_optimized
        Rail-optimized leaf wiring.
    nic_leaf_m, leaf_spine_m, spine_core_m, direct_link_m
        Cable lengths per link class, metres.
    planes
        Independent network planes (``fabric.planes``); ``link_gbps`` and ``radix`` are then
        per plane, and each NIC port runs ``planes x link_gbps``.
    """

    n_gpus: int
    gpus_per_node: int = 8
    nvlink_domain: int = 8
    nics_per_gpu: int = 1
    link_gbps: int = 400
    radix: int = 64
    switch_key: str = ""
    tiers: int | str = "auto"
    oversubscription: float = 1.0
    spine_oversubscription: float = 1.0
    rail_optimized: bool = True
    nic_leaf_m: float = 20.0
    leaf_spine_m: float = 50.0
    spine_core_m: float = 150.0
    direct_link_m: float = 10.0
    planes: int = 1

    @property
    def nic_port_gbps(self) -> int:
        """Line rate of one NIC port over all planes, Gb/s."""
        return self.link_gbps * self.planes

    @property
    def n_endpoints(self) -> int:
        """NIC ports in the job."""
        return self.n_gpus * self.nics_per_gpu

    @property
    def rails(self) -> int:
        """NIC rails per server."""
        return self.gpus_per_node * self.nics_per_gpu

    @property
    def n_nodes(self) -> int:
        """Servers (the last one may be partly filled only if it is the only one)."""
        return -(-self.n_gpus // self.gpus_per_node)

    @property
    def n_domains(self) -> int:
        """NVLink domains touched by the job."""
        return -(-self.n_gpus // self.nvlink_domain)


@dataclass(frozen=True)
class PortGroup:
    """``n_switches`` switches of tier ``tier`` each use ``ports_per_switch`` ports of a class."""

    tier: str
    ports_per_switch: int
    n_switches: int

    @property
    def n_ports(self) -> int:
        """Ports in the group."""
        return self.ports_per_switch * self.n_switches


@dataclass(frozen=True)
class LinkClass:
    """One class of cables: same ends, speed and length.

    ``ends`` names what sits at each end: ``"nic"`` or a switch tier name (``"leaf"``,
    ``"spine"``, ``"core"``). ``port_groups`` say how the switch ends' ports are spread over
    switches, which the twin-port optics rule needs (modules per switch = ceil(ports / 2)).
    ``nic_breakout`` is the number of these links one NIC port feeds (``fabric.planes``: an
    800G port broken out into 8 x 100G links, one per plane), so the NIC side takes one
    breakout module per ``nic_breakout`` links.
    """

    name: str
    n_links: int
    link_gbps: int
    length_m: float
    ends: tuple[str, str]
    port_groups: tuple[PortGroup, ...] = ()
    nic_breakout: int = 1

    @property
    def n_nic_ends(self) -> int:
        """Cable ends that plug into a NIC."""
        return self.n_links * sum(1 for e in self.ends if e == "nic")


@dataclass(frozen=True, eq=False)
class FabricGraph:
    """Compact array form of a fabric, for routing and the flow solver.

    Nodes ``0 .. n_endpoints-1`` are NIC ports (see the module conventions), then switches
    (or, for switchless families, forwarding nodes). Every cable is two directed links:
    cable ``c`` is links ``2c`` (a -> b) and ``2c + 1`` (b -> a).

    Attributes
    ----------
    node_tier : int8 array
        0 for NIC endpoints, 1 leaf, 2 spine, 3 core; 1 for switchless forwarding nodes.
    link_src, link_dst : int32 arrays
        Directed links.
    link_capacity_Bps : float64 array
        Capacity of each directed link, bytes/s.
    link_class : int16 array
        Index into :attr:`Topology.links`.
    endpoint_node : int32 array, shape (n_gpus, nics_per_gpu)
        Node id of each GPU's NICs (the identity here, kept explicit for readability).
    """

    n_nodes: int
    node_tier: np.ndarray
    link_src: np.ndarray
    link_dst: np.ndarray
    link_capacity_Bps: np.ndarray
    link_class: np.ndarray
    endpoint_node: np.ndarray

    @property
    def n_links(self) -> int:
        """Directed links."""
        return int(self.link_src.shape[0])

    @cached_property
    def out_indptr_indices(self) -> tuple[np.ndarray, np.ndarray]:
        """CSR of outgoing links per node: ``(indptr, link_ids)``."""
        if shortcuts().out_order_kernel:  # a counting sort, equal to the stable argsort
            from fabric_model.topology._kernels import stable_order_by_key  # lazy: numba

            order = stable_order_by_key(self.link_src, self.n_nodes)
        else:
            order = _reference.stable_order_by_key(self.link_src, self.n_nodes)
        counts = np.bincount(self.link_src, minlength=self.n_nodes)
        indptr = np.zeros(self.n_nodes + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        return indptr, order

    def to_networkx(self) -> Any:
        """Return a ``networkx.MultiDiGraph`` (small fabrics only: tests and diagrams)."""
        import networkx as nx

        g = nx.MultiDiGraph()
        g.add_nodes_from((i, {"tier": int(t)}) for i, t in enumerate(self.node_tier))
        for lid, (a, b) in enumerate(
            zip(self.link_src.tolist(), self.link_dst.tolist(), strict=True)
        ):
            g.add_edge(a, b, key=lid, capacity_Bps=float(self.link_capacity_Bps[lid]))
        return g


def _both_ways(per_cable: np.ndarray, dtype: type[np.generic]) -> np.ndarray:
    """Each cable's value twice, for its two directed links (``np.repeat(x, 2)``, 2x faster)."""
    out = np.empty(2 * per_cable.shape[0], dtype=dtype)
    out[0::2] = per_cable
    out[1::2] = per_cable
    return out


def graph_from_cables(
    n_nodes: int,
    node_tier: np.ndarray,
    cable_a: np.ndarray,
    cable_b: np.ndarray,
    cable_class: np.ndarray,
    cable_gbps: np.ndarray | float,
    n_gpus: int,
    nics_per_gpu: int,
) -> FabricGraph:
    """Build a :class:`FabricGraph` from undirected cables (each becomes two directed links)."""
    n_cables = cable_a.shape[0]
    src = np.empty(2 * n_cables, dtype=np.int32)
    dst = np.empty(2 * n_cables, dtype=np.int32)
    src[0::2], src[1::2] = cable_a, cable_b
    dst[0::2], dst[1::2] = cable_b, cable_a
    cap = np.broadcast_to(np.asarray(gbps_to_Bps(1.0) * np.asarray(cable_gbps)), (n_cables,))
    return FabricGraph(
        n_nodes=n_nodes,
        node_tier=node_tier.astype(np.int8),
        link_src=src,
        link_dst=dst,
        link_capacity_Bps=_both_ways(cap, np.float64),
        link_class=_both_ways(cable_class, np.int16),
        endpoint_node=np.arange(n_gpus * nics_per_gpu, dtype=np.int32).reshape(
            n_gpus, nics_per_gpu
        ),
    )


def _freeze(mapping: Mapping[Any, Any]) -> Mapping[Any, Any]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class Topology:
    """An immutable, fully counted fabric design.

    Attributes
    ----------
    family : str
        ``fat-tree``, ``rail-only``, ``dragonfly-plus``, ``torus-3d`` or ``hypercube``.
    request : TopologyRequest
        What was asked for.
    tiers : int
        Switch tiers (0 for switchless designs).
    switches_by_tier : Mapping[str, int]
        Switch count per tier name, in order from the endpoints up.
    links : tuple[LinkClass, ...]
        Cable classes with counts, speeds, lengths and switch-port spread.
    max_switch_hops, mean_switch_hops : int, float
        Switches (or forwarding nodes) crossed between two GPUs in different NVLink domains.
    hop_histogram : Mapping[int, float]
        Fraction of such GPU pairs at each hop count.
    bisection_GBps : float
        Bandwidth across the worst balanced cut of the endpoints, one direction, GB/s.
    oversubscription : float
        The effective (built) down:up ratio at the leaf.
    params : Mapping[str, Any]
        Family-specific structure (ports per leaf, pods, groups, torus dimensions, ...).
    notes : tuple[str, ...]
        How partial designs were sized, unused ports, and similar facts worth showing.
    warnings : tuple[str, ...]
        Facts about the design that the user most likely did not want (a forced tier count
        that buys switches carrying no traffic, ...); the design is still built as asked.
    """

    family: str
    request: TopologyRequest
    tiers: int
    switches_by_tier: Mapping[str, int]
    links: tuple[LinkClass, ...]
    max_switch_hops: int
    mean_switch_hops: float
    hop_histogram: Mapping[int, float]
    bisection_GBps: float
    oversubscription: float
    params: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    _graph_builder: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "switches_by_tier", _freeze(self.switches_by_tier))
        object.__setattr__(self, "hop_histogram", _freeze(self.hop_histogram))
        object.__setattr__(self, "params", _freeze(self.params))

    # counts ---------------------------------------------------------------------------
    @property
    def n_gpus(self) -> int:
        """GPUs."""
        return self.request.n_gpus

    @property
    def n_endpoints(self) -> int:
        """NIC ports."""
        return self.request.n_endpoints

    @property
    def n_switches(self) -> int:
        """All switches."""
        return int(sum(self.switches_by_tier.values()))

    @property
    def n_links(self) -> int:
        """All cables (each a full-duplex link)."""
        return int(sum(lc.n_links for lc in self.links))

    @property
    def links_by_class(self) -> dict[str, int]:
        """Cable count per link class name."""
        return {lc.name: lc.n_links for lc in self.links}

    @property
    def n_nics(self) -> int:
        """Scale-out NICs (one per endpoint; a dual-port NIC is counted per port here)."""
        return self.n_endpoints

    @property
    def bisection_per_gpu_GBps(self) -> float:
        """Bisection bandwidth per GPU on the smaller side, GB/s."""
        return self.bisection_GBps / max(1, self.n_gpus // 2)

    @property
    def full_bisection_GBps(self) -> float:
        """What a non-blocking fabric would give: half the endpoints at line rate, GB/s."""
        return self.n_endpoints / 2 * gbps_to_GBps(self.request.nic_port_gbps)

    @property
    def planes(self) -> int:
        """Independent network planes (each a fabric of :attr:`family`)."""
        return int(self.request.planes)

    @cached_property
    def graph(self) -> FabricGraph:
        """Compact arrays for routing and the flow solver (built on first use)."""
        if self._graph_builder is None:
            raise NotImplementedError(f"{self.family}: no array form")
        graph: FabricGraph = self._graph_builder()
        return graph

    def counts(self) -> dict[str, Any]:
        """Return the headline counts as a plain dict (JSON-ready)."""
        return {
            "family": self.family,
            "n_gpus": self.n_gpus,
            "n_endpoints": self.n_endpoints,
            "tiers": self.tiers,
            "planes": self.planes,
            "switches_by_tier": dict(self.switches_by_tier),
            "n_switches": self.n_switches,
            "links_by_class": self.links_by_class,
            "n_links": self.n_links,
            "max_switch_hops": self.max_switch_hops,
            "mean_switch_hops": round(self.mean_switch_hops, 6),
            "bisection_GBps": self.bisection_GBps,
            "oversubscription": self.oversubscription,
        }


def hop_histogram(pair_counts: Mapping[int, float]) -> tuple[dict[int, float], int, float]:
    """Normalise ``{hops: n_pairs}`` to fractions; return ``(histogram, max_hops, mean_hops)``.

    Hop classes with no pairs are dropped. With no pairs at all (a job inside one NVLink
    domain) the histogram is empty and both statistics are 0.
    """
    total = float(sum(pair_counts.values()))
    if total <= 0:
        return {}, 0, 0.0
    hist = {int(h): float(n) / total for h, n in sorted(pair_counts.items()) if n > 0}
    mean = sum(h * f for h, f in hist.items())
    return hist, max(hist), mean


def same_group_pairs(keys_i: np.ndarray, keys_j: np.ndarray) -> float:
    """Count ordered pairs (i, j) with equal keys, i from ``keys_i`` and j from ``keys_j``.

    Keys are non-negative integers. Used to count GPU pairs sharing a leaf, pod or domain.
    """
    if keys_i.size == 0 or keys_j.size == 0:
        return 0.0
    n = int(max(keys_i.max(), keys_j.max())) + 1
    # Integer counts and an integer dot: exact, and no BLAS call (OpenBLAS wakes a
    # spinning worker thread for a float dot of 10,000+ entries; the model does no algebra).
    ci = np.bincount(keys_i, minlength=n)
    cj = np.bincount(keys_j, minlength=n)
    return float(int(np.dot(ci, cj)))


def pairs_not_same_domain(keys: np.ndarray, dom: np.ndarray) -> float:
    """Count ordered pairs (i, j) sharing ``keys`` but not ``dom`` (both non-negative ints).

    ``sum_k n_k^2 - sum_(k, d) n_kd^2`` with ``n_k`` the members of key ``k`` and ``n_kd``
    those of key ``k`` in domain ``d``. When the combined key is already sorted (leaves and
    domains both numbered in GPU order, the usual case) its equal values are runs and their
    lengths are the counts, so no sort is needed; the sums are of integers, exact either way
    (``FastPaths.pair_count_runs``; off, or unsorted: the ``np.unique`` count).
    """
    if keys.size == 0:
        return 0.0
    combined = keys * (int(dom.max()) + 1) + dom
    if bool(np.all(combined[1:] >= combined[:-1])) and shortcuts().pair_count_runs:
        edges = np.flatnonzero(combined[1:] != combined[:-1]) + 1
        runs = np.diff(np.concatenate(([0], edges, [combined.size])))
        return same_group_pairs(keys, keys) - float(int(np.dot(runs, runs)))
    both = np.unique(combined, return_inverse=True)[1].ravel()
    return same_group_pairs(keys, keys) - same_group_pairs(both, both)


def pairs_not_same_domain_rows(keys: np.ndarray, dom: np.ndarray) -> float:
    """Sum of :func:`pairs_not_same_domain` over the rows of ``keys`` (each against ``dom``).

    One pass per rail of a rail-optimized fabric. With the fast path the rows are counted in
    one call, each row's keys shifted past the previous rows' so no pair spans two rows; the
    counts are integers, so the sum is the same as row by row.
    """
    if keys.shape[0] == 0 or keys.shape[1] == 0:
        return 0.0
    if keys.shape[0] == 1 or not shortcuts().pair_count_runs:
        return sum((pairs_not_same_domain(row, dom) for row in keys), 0.0)
    shift = np.arange(keys.shape[0], dtype=np.int64)[:, None] * (int(keys.max()) + 1)
    return pairs_not_same_domain((keys + shift).ravel(), np.tile(dom, keys.shape[0]))
