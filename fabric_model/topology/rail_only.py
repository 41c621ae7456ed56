"""Rail-only fabrics: one independent fat-tree per rail, no spine layer joining the rails.

Design rules
------------
- The high-bandwidth (NVLink) domain is the unit (Wang, Ghobadi et al., "Rail-only: A
  Low-Cost High-Performance Network for Training LLMs with Trillion Parameters", arXiv
  2307.12169, 2023; hardware-and-cost-facts section 6.3). When the job spans more than one
  NVLink domain there are ``rails = nvlink_domain x nics_per_gpu`` rails: NIC ``nic`` of the
  GPU with local index ``l`` inside its domain is on rail ``l * nics_per_gpu + nic``, and a
  rail holds one NIC port per domain (``endpoints per rail = n_domains``). A job inside one
  domain needs no scale-out traffic; its NICs are then wired by server, as
  :attr:`TopologyRequest.rails` says (``gpus_per_node x nics_per_gpu`` rails, one port per
  server).
- Each rail is its own fat-tree of radix-``k`` switches, sized exactly as
  :func:`fabric_model.topology.fat_tree.build_fat_tree` sizes a ToR-filled fabric of that many
  endpoints (``leaf_ports``, ``max_endpoints``): 1 tier if the rail fits one switch, else a
  leaf/spine, else 3 tiers, or the tier count forced by ``fabric.tiers``. All rails use the
  tier count of the largest rail. Counts are the per-rail counts times the rails; when the
  last domain is partial, rails of its missing local indices are one port shorter.
- Hops: GPU pairs in different domains take a rail-matched path (cross-rail traffic is first
  forwarded over NVLink), so a pair's switch hops are those between its two domains inside one
  rail's tree: 1 (same rail leaf), 3 (same pod) or 5 (across the rail's core).
- Bisection: per-rail bisection summed over the rails (a balanced cut of the domains cuts
  every rail).

Graph
-----
Nodes ``0 .. E-1`` are the NIC endpoints; then the switches rail by rail (rails with the full
port count first, as they are the lowest rail ids), each rail numbered like its fat-tree
(leaves, then spines, then cores). Cables are sorted by link class.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np

from fabric_model.errors import InfeasibleDesignError
from fabric_model.topology.base import (
    FabricGraph,
    LinkClass,
    PortGroup,
    Topology,
    TopologyRequest,
    graph_from_cables,
    hop_histogram,
    same_group_pairs,
)
from fabric_model.topology.fat_tree import build_fat_tree, leaf_ports, max_endpoints

__all__ = ["build_rail_only"]


def _rail_request(req: TopologyRequest, n_ports: int, tiers: int | str) -> TopologyRequest:
    """Return the request of one rail: ``n_ports`` single-NIC endpoints filled ToR-style."""
    return dataclasses.replace(
        req,
        n_gpus=n_ports,
        gpus_per_node=1,
        nvlink_domain=1,
        nics_per_gpu=1,
        rail_optimized=False,
        tiers=tiers,
    )


def _rail_too_big(
    req: TopologyRequest, err: InfeasibleDesignError, unit: int, n_units: int
) -> InfeasibleDesignError:
    """Restate a per-rail fat-tree sizing error in rail-only terms."""
    if err.key not in ("cluster.n_gpus", "fabric.tiers"):
        return err
    tiers = 3 if req.tiers == "auto" else int(req.tiers)
    cap = max_endpoints(req.radix, tiers, req.oversubscription, req.spine_oversubscription)
    down, up = leaf_ports(req.radix, req.oversubscription)
    plural = "tier" if tiers == 1 else "tiers"
    more = "" if req.tiers == "auto" else ", or more fabric.tiers (up to 3)"
    return InfeasibleDesignError(
        err.key,
        f"rail-only: each rail is a fat-tree with one NIC port per NVLink domain; {tiers} "
        f"{plural} of radix-{req.radix} switches ({down} down / {up} up per leaf) hold at most "
        f"{cap:,} ports per rail, and this job has {n_units:,} NVLink domains of {unit} GPUs. "
        f"Allowed: at most {cap:,} domains, i.e. cluster.n_gpus <= {cap * unit:,}{more}, "
        f"a higher-radix switch (fabric.switch / fabric.link_gbps), a larger "
        f"cluster.nvlink_domain, or fabric.topology = fat-tree / dragonfly-plus",
    )


def _merge_links(parts: list[tuple[Topology, int]]) -> tuple[LinkClass, ...]:
    """Add up the link classes of ``n_rails`` copies of each per-rail topology."""
    order: list[str] = []
    n_links: Counter[str] = Counter()
    ports: dict[str, Counter[tuple[str, int]]] = {}
    first: dict[str, LinkClass] = {}
    for topo, n_rails in parts:
        for lc in topo.links:
            if lc.name not in first:
                order.append(lc.name)
                first[lc.name] = lc
                ports[lc.name] = Counter()
            n_links[lc.name] += lc.n_links * n_rails
            for g in lc.port_groups:
                ports[lc.name][(g.tier, g.ports_per_switch)] += g.n_switches * n_rails
    merged = []
    for name in order:
        lc = first[name]
        groups = tuple(
            PortGroup(tier, p, n)
            for (tier, p), n in sorted(ports[name].items(), key=lambda kv: (kv[0][0], -kv[0][1]))
            if n > 0
        )
        merged.append(dataclasses.replace(lc, n_links=n_links[name], port_groups=groups))
    return tuple(merged)


def _pair_counts(
    req: TopologyRequest, rail: Topology, unit: int, n_units: int, multi_domain: bool
) -> dict[int, float]:
    """Count ordered GPU pairs in different NVLink domains by switch hops inside a rail.

    Every pair of domains meets on every rail they share at the same leaf/pod distance, so
    the count runs over domain pairs weighted by ``size_a x size_b`` (bincounts, O(domains)).
    """
    n = req.n_gpus
    domain = np.arange(n, dtype=np.int64) // req.nvlink_domain
    same_dom = same_group_pairs(domain, domain)
    total = float(n) * n - same_dom
    if total <= 0 or not multi_domain:
        return {}
    if rail.tiers == 1:
        return {1: total}
    down = int(rail.params["down_per_leaf"])
    unit_sizes = np.full(n_units, unit, dtype=np.int64)
    unit_sizes[-1] = n - unit * (n_units - 1)
    leaf_of_unit = np.arange(n_units, dtype=np.int64) // down
    per_leaf = np.bincount(leaf_of_unit, weights=unit_sizes).astype(np.int64)  # exact: < 2^53
    same_leaf = float(int(np.dot(per_leaf, per_leaf))) - same_dom
    if rail.tiers == 2:
        return {1: same_leaf, 3: total - same_leaf}
    per_pod = np.bincount(
        leaf_of_unit // int(rail.params["leaves_per_pod"]), weights=unit_sizes
    ).astype(np.int64)
    same_pod = float(int(np.dot(per_pod, per_pod))) - same_dom
    return {1: same_leaf, 3: same_pod - same_leaf, 5: total - same_pod}


def build_rail_only(req: TopologyRequest) -> Topology:
    """Size a rail-only fabric for ``req`` and return it with exact counts.

    Parameters
    ----------
    req
        The request; ``radix`` is the switch port count at ``link_gbps``, ``tiers`` applies
        to every rail.

    Returns
    -------
    Topology
        Family ``rail-only``; tiers ``leaf`` (the rail switches), ``spine``, ``core`` within
        rails; link classes ``nic-leaf``, ``leaf-spine``, ``spine-core``.

    Raises
    ------
    InfeasibleDesignError
        On ``cluster.n_gpus`` (auto tiers) or ``fabric.tiers`` (forced) when a rail's ports
        exceed what its fat-tree holds; the message gives the largest allowed GPU count.

    Notes
    -----
    With ``R`` rails, ``D`` domains and per-rail counts ``f(D)`` from the fat-tree rules
    (:func:`~fabric_model.topology.fat_tree.build_fat_tree`, hardware-and-cost-facts 6.1:
    ``L = ceil(D / down)`` leaves and about ``L up / k`` spines at 2 tiers), the fabric has
    ``R f(D)`` switches and ``R`` times the rail's cables; bisection ``B = R B_rail(D)``.
    Source of the architecture: Wang et al., arXiv 2307.12169 (rail-only saves 38-77 % of
    network cost versus a rail-optimized fat-tree).
    """
    n, nics = req.n_gpus, req.nics_per_gpu
    multi_domain = req.n_domains > 1
    unit = req.nvlink_domain if multi_domain else req.gpus_per_node
    n_units = -(-n // unit)
    last = n - unit * (n_units - 1)
    n_full = last * nics  # rails with a port in every unit, ids 0 .. n_full-1
    n_short = (unit - last) * nics if n_units > 1 else 0  # one port fewer (last unit partial)
    n_rails = n_full + n_short

    if req.tiers != "auto" and int(req.tiers) > 3:
        raise InfeasibleDesignError(
            "fabric.tiers",
            f"rail-only builds 1 to 3 tiers per rail, not {req.tiers}; allowed: auto, 1, 2, 3",
        )
    try:
        full = build_fat_tree(_rail_request(req, n_units, req.tiers))
        if full.tiers > 3:  # each rail's fat-tree is routed on 1 to 3 tiers
            raise InfeasibleDesignError("cluster.n_gpus", "more than 3 tiers per rail")
    except InfeasibleDesignError as err:
        raise _rail_too_big(req, err, unit, n_units) from None
    tiers = full.tiers
    short = build_fat_tree(_rail_request(req, n_units - 1, tiers)) if n_short else None
    parts = [(full, n_full)] + ([(short, n_short)] if short is not None else [])

    switches = {t: c * n_full for t, c in full.switches_by_tier.items()}
    if short is not None:
        for t, c in short.switches_by_tier.items():
            switches[t] = switches.get(t, 0) + c * n_short
    links = _merge_links(parts)
    hist, hmax, hmean = hop_histogram(_pair_counts(req, full, unit, n_units, multi_domain))
    bisection = sum(t.bisection_GBps * r for t, r in parts)

    per_rail = dict(full.switches_by_tier)
    k = req.radix
    down = int(full.params["down_per_leaf"])
    if tiers == 1:
        free = sum((k - t.n_endpoints) * r for t, r in parts)
        free_what = "switch ports"
    else:
        free = sum((int(t.params["n_leaves"]) * down - t.n_endpoints) * r for t, r in parts)
        free_what = "leaf down-ports"
    unit_name = "NVLink domain" if multi_domain else "server"
    notes = [
        f"rail-only (Wang et al. 2023): {n_rails:,} rails with no spine between them; "
        f"rail r holds NIC r of every {unit_name} ({n_units:,} port(s)); cross-rail traffic "
        f"is forwarded over NVLink first",
        "each rail: "
        + " + ".join(f"{c:,} {t}" for t, c in per_rail.items())
        + f" (a {tiers}-tier radix-{k} fat-tree"
        + (f", {down} down / {full.params['up_per_leaf']} up per leaf)" if tiers > 1 else ")"),
    ]
    if n_short:
        notes.append(
            f"the last {unit_name} holds {last} of {unit} GPUs: {n_short:,} rails have "
            f"{n_units - 1:,} ports"
        )
    if not multi_domain:
        notes.append(
            "the job fits in one NVLink domain: no GPU pair crosses the scale-out fabric; its "
            "NICs are wired by server rail"
        )
    if free > 0:
        notes.append(f"{free:,} {free_what} left free for growth (partial build)")

    params = {
        "radix": k,
        "switch_key": req.switch_key,
        "rail_unit": "nvlink-domain" if multi_domain else "server",
        "unit_gpus": unit,
        "n_rails": n_rails,
        "n_full_rails": n_full,
        "endpoints_per_rail": n_units,
        "tiers_per_rail": tiers,
        "switches_per_rail": int(sum(per_rail.values())),
        "switches_per_short_rail": int(sum(short.switches_by_tier.values())) if short else 0,
        "leaves_per_rail": per_rail.get("leaf", 0),
        "spines_per_rail": per_rail.get("spine", 0),
        "cores_per_rail": per_rail.get("core", 0),
        "down_per_leaf": down,
        "up_per_leaf": int(full.params["up_per_leaf"]),
        "rail_of_endpoint": "(gpu % unit_gpus) * nics_per_gpu + nic",
        "port_of_endpoint": "gpu // unit_gpus",
    }
    for key in ("leaves_per_pod", "spines_per_pod", "cores_per_plane"):
        if key in full.params:
            params[key] = int(full.params[key])

    def graph() -> FabricGraph:
        return _rail_graph(req, parts, links, unit, nics)

    return Topology(
        family="rail-only",
        request=req,
        tiers=tiers,
        switches_by_tier=switches,
        links=links,
        max_switch_hops=hmax,
        mean_switch_hops=hmean,
        hop_histogram=hist,
        bisection_GBps=bisection,
        oversubscription=full.oversubscription,
        params=params,
        notes=tuple(notes),
        _graph_builder=graph,
    )


def _rail_graph(
    req: TopologyRequest,
    parts: list[tuple[Topology, int]],
    links: tuple[LinkClass, ...],
    unit: int,
    nics: int,
) -> FabricGraph:
    """Tile the per-rail fat-tree graphs over the rails (vectorised over rails x cables)."""
    n_e = req.n_endpoints
    class_index = {lc.name: i for i, lc in enumerate(links)}
    a_all, b_all, cls_all, tiers = [], [], [], [np.zeros(n_e, dtype=np.int64)]
    rail0, node_off = 0, n_e
    for topo, n_rails in parts:
        sub = topo.graph
        s = topo.n_endpoints
        n_sw = sub.n_nodes - s
        ca, cb = sub.link_src[0::2].astype(np.int64), sub.link_dst[0::2].astype(np.int64)
        remap = np.array([class_index[lc.name] for lc in topo.links], dtype=np.int64)
        rails = rail0 + np.arange(n_rails, dtype=np.int64)
        local, nic = np.divmod(rails, nics)
        offs = node_off + np.arange(n_rails, dtype=np.int64) * n_sw

        def place(
            v: np.ndarray,
            local: np.ndarray = local,
            nic: np.ndarray = nic,
            offs: np.ndarray = offs,
            s: int = s,
        ) -> np.ndarray:
            ep = (v[None, :] * unit + local[:, None]) * nics + nic[:, None]
            sw = offs[:, None] + (v[None, :] - s)
            out: np.ndarray = np.where(v[None, :] < s, ep, sw).ravel()
            return out

        a_all.append(place(ca))
        b_all.append(place(cb))
        cls_all.append(np.tile(remap[sub.link_class[0::2].astype(np.int64)], n_rails))
        tiers.append(np.tile(sub.node_tier[s:].astype(np.int64), n_rails))
        rail0 += n_rails
        node_off += n_rails * n_sw
    a, b, cls = np.concatenate(a_all), np.concatenate(b_all), np.concatenate(cls_all)
    # stable: the same order as sorting the int64 classes (int16 sorts by radix, no compares)
    order = np.argsort(cls.astype(np.int16), kind="stable")
    return graph_from_cables(
        node_off,
        np.concatenate(tiers),
        a[order],
        b[order],
        cls[order],
        req.link_gbps,
        req.n_gpus,
        req.nics_per_gpu,
    )
