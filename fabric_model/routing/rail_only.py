"""Up-down routing on rail-only fabrics: the fat-tree router run inside each rail.

A rail-only fabric (:mod:`fabric_model.topology.rail_only`) is one independent fat-tree per
rail with nothing joining the rails, so a connection must be *rail-matched*: both endpoints
on the same rail. Cross-rail traffic is moved onto the destination's rail over NVLink before
it reaches a NIC (PXN), which the collective layer does by choosing the endpoints; a
connection between two rails is a :class:`ValueError` here (there is no path).

Within a rail the routing is exactly :func:`fabric_model.routing.fat_tree.route_fat_tree`
(``adaptive`` bundles, ``ecmp`` hashing per queue pair, ``dmodk``), run on the rail's own
fat-tree (rebuilt from the request, as the topology builder sizes it) with the rail's ports
as endpoints, and its link ids mapped back to the rail-only graph:

- a rail's cable ``c`` of class ``k`` becomes global cable
  ``first_k(part) + rail_in_part x n_k + (c - sub_first_k)``: the builder tiles the rail's
  cables rail by rail and then sorts all cables by class (stably), so class ``k`` holds the
  ``n_k`` class-``k`` cables of every rail in rail order (full rails first, then the rails of
  the partial last domain, which have one port fewer);
- a rail's bundles (leaf up, pod up, pod down, leaf down) become one global bundle per rail,
  numbered after the graph's links part by part and rail by rail, with capacity = the sum of
  its member cables' capacities taken from ``capacity_Bps`` (so a degraded cable costs its
  bundle exactly its lost share). :func:`bundle_members` lists the members.

Switch hops are the rail's: 1 (same rail leaf), 3 (same pod) or 5 (across the rail's core),
as in the topology's hop histogram.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from fabric_model.caching import register
from fabric_model.families import FAMILIES
from fabric_model.flows import FlowSet
from fabric_model.routing.base import RoutedFlows, check_policy, kept_per_capacity
from fabric_model.routing.fat_tree import _ADAPTIVE_CLASSES, route_fat_tree
from fabric_model.topology import Topology
from fabric_model.topology.fat_tree import build_fat_tree
from fabric_model.topology.rail_only import _rail_request

__all__ = ["RAIL_ONLY_POLICIES", "bundle_members", "rail_and_port", "route_rail_only"]

#: The policies of the family registry's entry.
RAIL_ONLY_POLICIES = FAMILIES["rail-only"].policies


@dataclass(frozen=True)
class _Part:
    """Rails that share one per-rail fat-tree (the full rails, or the shorter ones)."""

    sub: Topology  # the fat-tree of one rail of this part
    rail0: int  # first global rail id
    n_rails: int
    cable_off: np.ndarray  # per sub cable: global cable id in the part's first rail
    cable_stride: np.ndarray  # per sub cable: global id step from one rail to the next
    bundle0: int  # index (after the graph links) of the part's first rail's first bundle
    n_bundles: int  # bundles per rail
    member_indptr: np.ndarray  # CSR of one rail's bundles over sub directed link ids
    member_links: np.ndarray


def rail_and_port(topo: Topology, endpoint: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rail and port (index within the rail's fat-tree) of NIC endpoints.

    Parameters
    ----------
    topo
        A rail-only topology.
    endpoint
        NIC endpoint ids.

    Returns
    -------
    (rail, port)
        ``rail = (gpu mod unit) x nics_per_gpu + nic`` and ``port = gpu // unit``, with
        ``unit`` the GPUs per NVLink domain (per server for a one-domain job).
    """
    nics = topo.request.nics_per_gpu
    unit = int(topo.params["unit_gpus"])
    gpu, nic = np.divmod(np.asarray(endpoint, dtype=np.int64), nics)
    port, local = np.divmod(gpu, unit)
    return local * nics + nic, port


def _fat_tree_bundles(sub: Topology) -> tuple[np.ndarray, np.ndarray]:
    """Members of the fat-tree router's adaptive bundles on one rail, as sub directed links.

    Order as :func:`fabric_model.routing.fat_tree.route_fat_tree` lays them out after the
    links: leaf up (per leaf), pod up (per pod), pod down (per pod), leaf down (per leaf). The
    leaf bundles hold a leaf's leaf-spine cables, the pod bundles the spine-core cables of a
    pod's spines (up direction ``2c``, down ``2c + 1``).
    """
    g = sub.graph
    n_e = sub.n_endpoints
    n_leaves = int(sub.params["n_leaves"])
    ids = np.arange(0, g.n_links, 2, dtype=np.int64)
    cls = g.link_class[0::2]
    ls = ids[cls == 1]
    leaf = g.link_src[ls].astype(np.int64) - n_e
    groups = [(leaf, ls, n_leaves, 0)]
    n_pods = 0
    if sub.tiers == 3:
        n_pods = int(sub.params["n_pods"])
        sc = ids[cls == 2]
        pod = (g.link_src[sc].astype(np.int64) - n_e - n_leaves) // int(sub.params["up_per_leaf"])
        groups += [(pod, sc, n_pods, 0), (pod, sc, n_pods, 1)]
    groups.append((leaf, ls, n_leaves, 1))
    owner, links, first = [], [], 0
    for key, cable_links, n_keys, direction in groups:
        owner.append(first + key)
        links.append(cable_links + direction)
        first += n_keys
    owner_all, links_all = np.concatenate(owner), np.concatenate(links)
    order = np.argsort(owner_all, kind="stable")
    indptr = np.zeros(first + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner_all, minlength=first), out=indptr[1:])
    return indptr, links_all[order]


#: The parts of each built rail-only topology (keyed by its graph, dropped with it): every
#: pattern routed on one fabric reuses its rails' fat-trees, so their routing layouts and
#: bundle spaces (``fat_tree._layout``) are built once per fabric, not once per pattern.
_PARTS: weakref.WeakKeyDictionary[Any, list[_Part]] = weakref.WeakKeyDictionary()
_PARTS_LOCK = threading.Lock()
#: Per fabric: the adaptive link space's bundle arrays (:func:`_adaptive_space`).
_ADAPTIVE_SPACES: weakref.WeakKeyDictionary[Any, tuple[np.ndarray, np.ndarray, np.ndarray]] = (
    weakref.WeakKeyDictionary()
)


def _clear_parts() -> None:
    with _PARTS_LOCK:
        _PARTS.clear()
        _ADAPTIVE_SPACES.clear()


register(
    "routing.rail_only._PARTS",
    key="the fabric's graph object (weak: dropped with the fabric)",
    size="one entry per live rail-only fabric (parts; adaptive link space)",
    lock="_PARTS_LOCK",
    clear=_clear_parts,
)


def _parts(topo: Topology) -> list[_Part]:
    """Return the per-rail fat-trees and sub-to-global id maps of every part (kept per fabric)."""
    g = topo.graph
    with _PARTS_LOCK:
        cached = _PARTS.get(g)
    if cached is None:
        cached = _build_parts(topo)
        for part in cached:
            for value in (
                part.cable_off,
                part.cable_stride,
                part.member_indptr,
                part.member_links,
            ):
                value.flags.writeable = False  # shared by every pattern routed on the fabric
        with _PARTS_LOCK:
            _PARTS[g] = cached
    return list(cached)


def _build_parts(topo: Topology) -> list[_Part]:
    """Rebuild the per-rail fat-trees and the sub-to-global id maps of every part."""
    p = topo.params
    req = topo.request
    names = [lc.name for lc in topo.links]
    n_rails, n_full = int(p["n_rails"]), int(p["n_full_rails"])
    ports, tiers = int(p["endpoints_per_rail"]), int(p["tiers_per_rail"])
    specs = [(build_fat_tree(_rail_request(req, ports, tiers)), 0, n_full)]
    if n_rails > n_full:
        short = build_fat_tree(_rail_request(req, ports - 1, tiers))
        specs.append((short, n_full, n_rails - n_full))
    n_cls = len(names)
    # cables of each class per rail, per part (sub classes renamed to the merged classes)
    per_rail = np.zeros((len(specs), n_cls), dtype=np.int64)
    sub_cls = []
    for i, (sub, _, _) in enumerate(specs):
        remap = np.array([names.index(lc.name) for lc in sub.links], dtype=np.int64)
        cls = remap[sub.graph.link_class[0::2].astype(np.int64)]
        sub_cls.append(cls)
        per_rail[i] = np.bincount(cls, minlength=n_cls)
    tiled = per_rail * np.array([n for _, _, n in specs], dtype=np.int64)[:, None]
    class_first = np.concatenate([[0], np.cumsum(tiled.sum(axis=0))[:-1]])
    parts, bundle0 = [], 0
    for i, (sub, rail0, n) in enumerate(specs):
        first_k = class_first + tiled[:i].sum(axis=0)
        cls = sub_cls[i]
        sub_first = np.concatenate([[0], np.cumsum(per_rail[i])[:-1]])
        c = np.arange(cls.size, dtype=np.int64)
        indptr, links = _fat_tree_bundles(sub)
        nb = indptr.size - 1
        parts.append(
            _Part(
                sub,
                rail0,
                n,
                first_k[cls] + c - sub_first[cls],
                per_rail[i][cls],
                bundle0,
                nb,
                indptr,
                links,
            )
        )
        bundle0 += n * nb
    return parts


def _to_global(part: _Part, sub_links: np.ndarray, rail_in_part: np.ndarray) -> np.ndarray:
    """Map sub directed link ids of rails ``rail_in_part`` to global directed link ids."""
    cable, direction = np.divmod(sub_links, 2)
    return 2 * (part.cable_off[cable] + rail_in_part * part.cable_stride[cable]) + direction


def bundle_members(topo: Topology) -> tuple[np.ndarray, np.ndarray]:
    """Member cables of every adaptive bundle, as directed link ids of ``topo.graph``.

    Returns
    -------
    (indptr, links)
        CSR over bundles: bundle ``b`` (link ``topo.graph.n_links + b`` of the adaptive link
        space) holds directed links ``links[indptr[b]:indptr[b + 1]]``; its capacity is the
        sum of theirs.
    """
    return _members(_parts(topo))


def _members(parts: list[_Part]) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the bundles of every rail of ``parts`` over global directed link ids."""
    indptrs, links = [np.zeros(1, dtype=np.int64)], []
    total = 0
    for part in parts:
        rails = np.arange(part.n_rails, dtype=np.int64)
        sizes = np.diff(part.member_indptr)
        glob = _to_global(part, part.member_links[None, :], rails[:, None])
        links.append(glob.ravel())
        indptrs.append(total + np.cumsum(np.tile(sizes, part.n_rails)))
        total += int(sizes.sum()) * part.n_rails
    return np.concatenate(indptrs), np.concatenate(links) if links else np.zeros(0, np.int64)


def route_rail_only(
    topo: Topology,
    src: np.ndarray,
    dst: np.ndarray,
    policy: str,
    capacity_Bps: np.ndarray,
    *,
    qps: int = 1,
    rng: np.random.Generator | None = None,
) -> RoutedFlows:
    """Route rail-matched connections on a rail-only fabric (:class:`~.base.Router`).

    Policies: ``adaptive``, ``ecmp`` or ``dmodk``, as the fat-tree router inside each rail.
    Both ends of a connection must be on one rail. Link space: the graph's directed links,
    then (``adaptive``) the bundles of every rail, see :func:`bundle_members`.

    Raises
    ------
    ValueError
        If a connection joins endpoints on different rails.
    """
    check_policy("rail-only", policy, RAIL_ONLY_POLICIES)
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    rail_s, port_s = rail_and_port(topo, src)
    rail_d, port_d = rail_and_port(topo, dst)
    cross = np.flatnonzero(rail_s != rail_d)
    if cross.size:
        i = int(cross[0])
        raise ValueError(
            f"rail-only routing: {cross.size:,} connection(s) join different rails, e.g. "
            f"connection {i}: endpoint {int(src[i])} (rail {int(rail_s[i])}) -> endpoint "
            f"{int(dst[i])} (rail {int(rail_d[i])}); rails are disconnected networks, so "
            f"cross-rail traffic must be moved onto the destination's rail over NVLink first "
            f"(choose rail-matched endpoints)"
        )
    g = topo.graph
    cap = np.asarray(capacity_Bps, dtype=np.float64)
    parts = _parts(topo)
    n_bundles = sum(p.n_bundles * p.n_rails for p in parts)
    names = tuple(lc.name for lc in topo.links)
    chunks: list[tuple[np.ndarray, RoutedFlows, _Part, np.ndarray]] = []
    for part in parts:
        sel = np.flatnonzero((rail_s >= part.rail0) & (rail_s < part.rail0 + part.n_rails))
        if sel.size == 0:
            continue
        res = route_fat_tree(
            part.sub,
            port_s[sel],
            port_d[sel],
            policy,
            part.sub.graph.link_capacity_Bps,
            qps=qps,
            rng=rng,
        )
        chunks.append((sel, res, part, rail_s[sel] - part.rail0))
    policy_used = chunks[0][1].policy if chunks else policy
    adaptive = policy_used == "adaptive"
    indptrs, indices, weights, conn, frac = [np.zeros(1, np.int64)], [], [], [], []
    hops = np.zeros(src.size, dtype=np.int64)
    for sel, res, part, rail_in_part in chunks:
        fs = res.flows
        sub_links = part.sub.graph.n_links
        row_rail = rail_in_part[res.flow_of_connection]
        entry_rail = np.repeat(row_rail, np.diff(fs.flow_link_indptr))
        ids = fs.flow_link_indices.astype(np.int64)
        is_link = ids < sub_links
        out = np.empty_like(ids)
        out[is_link] = _to_global(part, ids[is_link], entry_rail[is_link])
        out[~is_link] = (
            g.n_links
            + part.bundle0
            + entry_rail[~is_link] * part.n_bundles
            + ids[~is_link]
            - sub_links
        )
        indices.append(out)
        weights.append(fs.flow_link_weights)
        indptrs.append(indptrs[-1][-1] + fs.flow_link_indptr[1:])
        conn.append(sel[res.flow_of_connection])
        frac.append(res.flow_fraction)
        hops[sel] = res.switch_hops
    labels = np.asarray(g.link_class, dtype=np.int16)
    n_space = g.n_links
    capacity = cap
    class_names = names
    if adaptive:
        class_names = names + _ADAPTIVE_CLASSES
        owner, b_links, labels = _adaptive_space(topo, parts, labels, len(names))
        capacity = _adaptive_capacity(g, cap, owner, b_links, n_bundles)
        n_space += n_bundles
    empty = np.zeros(0, dtype=np.int64)
    indptr = np.concatenate(indptrs)
    idx = np.concatenate(indices) if indices else empty
    wts = np.concatenate(weights) if weights else np.zeros(0)
    flow_conn = np.concatenate(conn) if conn else empty
    flow_frac = np.concatenate(frac) if frac else np.zeros(0)
    if len(chunks) > 1:  # back to connection order (parts were routed one after the other)
        order = np.argsort(flow_conn, kind="stable")
        indptr, idx, wts = _reorder_rows(indptr, idx, wts, order)
        flow_conn, flow_frac = flow_conn[order], flow_frac[order]
    return RoutedFlows(
        flows=FlowSet.built(indptr, idx, wts, n_space),  # checked in the tests
        link_capacity_Bps=capacity,
        link_class=labels,
        class_names=class_names,
        flow_of_connection=flow_conn,
        flow_fraction=flow_frac,
        switch_hops=hops,
        policy=policy_used,
    )


def _adaptive_capacity(
    g: Any, cap: np.ndarray, owner: np.ndarray, b_links: np.ndarray, n_bundles: int
) -> np.ndarray:
    """Capacities of the links, then of the bundles (their members' sum; 1 for an empty one).

    Kept per fabric for the few capacity arrays last routed on (by identity: a fabric's
    context passes the same array to every pattern it routes).
    """

    def build() -> np.ndarray:
        b_cap = np.bincount(owner, weights=cap[b_links], minlength=n_bundles)
        capacity = np.concatenate([cap, np.where(b_cap > 0, b_cap, 1.0)])
        capacity.flags.writeable = False  # shared by every pattern routed on the fabric
        return capacity

    return kept_per_capacity(g, "rail-only adaptive capacity", cap, build)


def _adaptive_space(
    topo: Topology, parts: list[_Part], labels: np.ndarray, n_link_classes: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bundle of each member link, the member links, and the labels of links then bundles.

    They depend on the fabric alone (not the pattern or the capacities): kept with its parts.
    """
    g = topo.graph
    with _PARTS_LOCK:
        cached = _ADAPTIVE_SPACES.get(g)
    if cached is not None:
        return cached
    n_bundles = sum(p.n_bundles * p.n_rails for p in parts)
    b_indptr, b_links = _members(parts)
    owner = np.repeat(np.arange(n_bundles, dtype=np.int64), np.diff(b_indptr))
    b_labels = [np.tile(_bundle_labels(p, n_link_classes), p.n_rails) for p in parts]
    all_labels = np.concatenate([labels, *b_labels]).astype(np.int16)
    out = (owner, b_links, all_labels)
    for value in out:
        value.flags.writeable = False  # shared by every pattern routed on the fabric
    with _PARTS_LOCK:
        _ADAPTIVE_SPACES[g] = out
    return out


def _reorder_rows(
    indptr: np.ndarray, indices: np.ndarray, weights: np.ndarray, order: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Permute the rows of a CSR: new row ``i`` is old row ``order[i]``."""
    lengths = np.diff(indptr)[order]
    new_indptr = np.zeros(order.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_indptr[1:])
    take = np.repeat(indptr[:-1][order] - new_indptr[:-1], lengths) + np.arange(new_indptr[-1])
    return new_indptr, indices[take], weights[take]


def _bundle_labels(part: _Part, n_link_classes: int) -> np.ndarray:
    """Class label of each of one rail's bundles (leaf up, pod up, pod down, leaf down)."""
    n_leaves = int(part.sub.params["n_leaves"])
    n_pods = (part.n_bundles - 2 * n_leaves) // 2
    kinds = np.repeat(np.arange(4), [n_leaves, n_pods, n_pods, n_leaves])
    return n_link_classes + kinds
