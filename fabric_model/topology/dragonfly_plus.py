"""Dragonfly+ fabrics: groups of 2-level leaf/spine switches joined by global spine-spine links.

Design rules
------------
Dragonfly+ (Shpiner, Haramaty, Eliad, Zdornov, Gafni, Zahavi, "Dragonfly+: Low Cost Topology
for Scaling Datacenters", HiPINEB 2017; hardware-and-cost-facts section 6.4), with radix-``k``
switches and leaf oversubscription ``r``:

- A leaf has ``(down, up) = leaf_ports(k, r)`` ports (NICs, spines); every leaf of a group
  connects once to each of the group's ``up`` spines.
- A spine has ``a = floor(k/2)`` down ports (so a group has at most ``a`` leaves) and
  ``h = k - a`` global ports. A group holds ``a x down`` NIC ports (``(k/2)^2`` when
  ``r = 1``: 1,024 at ``k = 64``) and ``G = up x h`` global ports.
- Groups ``g = ceil(leaves / a)``; the last group may have fewer leaves but keeps all ``up``
  spines and all ``G`` global ports. Every group must reach every other directly:
  ``g <= G + 1`` (1,025 groups, about 1.05 M NIC ports at ``k = 64``), otherwise the design is
  infeasible (:class:`InfeasibleDesignError` on ``cluster.n_gpus``).
- Global links: each group spreads its global ports evenly over the other ``g - 1`` groups,
  ``m = floor(G / (g - 1))`` parallel links per group pair, ``m g (g - 1) / 2`` in all; the
  ``G - m (g - 1)`` ports left per group stay unused (listed in the notes). Group ``x``'s
  ``c``-th link to group ``y`` uses its global slot ``t = ((y - x - 1) mod g) m + c`` on spine
  ``t mod up``, so a pair's ``m`` links land on distinct spines and spines load evenly.
- Leaf fill: with ``rail_optimized`` the leaves are filled rail-wise exactly as the
  fat-tree does (a scalable unit, SU, is ``down`` servers with one leaf per rail; leaves are
  numbered SU-major and fill the groups in order; when the rails do not divide ``a`` an SU
  straddles two groups, said in the notes), otherwise ToR-style (consecutive NIC ports).
- With one group the fabric degenerates to a 2-tier leaf/spine: no global links, so only the
  spines the leaf uplinks need, ``S`` = the smallest divisor of ``up`` that is
  ``>= ceil(L up / a)`` (each leaf then has ``up / S`` parallel links to every spine, as in
  the fat-tree), each keeping its other ports free as future global ports.

Hops (switches crossed, minimal routing; GPU pairs in different NVLink domains on
rail-matched paths as in the fat-tree): same leaf 1, same group 3 (leaf-spine-leaf), other
group 4 (leaf-spine-global-spine-leaf). Valiant routing through an intermediate group can take
up to 7 (``params["valiant_max_hops"]``).

Bisection (one direction), for ``E`` NIC ports, ``L`` leaves and link rate ``b``:
``B = b min(E / 2, L up / 2, m floor(g/2) ceil(g/2))``; the last term is the global links
crossing a half/half split of the groups (every group pair has ``m`` links), the second the
leaf uplinks of half the leaves (each group's internal leaf/spine bisection); with one group
``B = b min(E, L up) / 2`` as for a 2-tier fat-tree.

Graph
-----
Nodes: NIC endpoints ``0 .. E-1``, leaves ``E .. E+L-1`` (leaf ``l`` is in group
``l // a``), spines ``E+L ..`` (spine ``j`` of group ``x`` is ``E + L + x S + j`` with
``S = params["spines_per_group"]``; leaf uplink ``j`` goes to spine ``j mod S``). Cables:
NIC-leaf, then leaf-spine (leaf-major), then global (group pairs ``x < y`` in row order,
``m`` copies each).
"""

from __future__ import annotations

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
    pairs_not_same_domain_rows,
    same_group_pairs,
)
from fabric_model.topology.fat_tree import leaf_ports
from fabric_model.units import gbps_to_GBps

__all__ = ["build_dragonfly_plus", "dragonfly_plus_shape", "max_dragonfly_plus_endpoints"]

VALIANT_MAX_HOPS = 7


def dragonfly_plus_shape(radix: int, oversubscription: float = 1.0) -> dict[str, int]:
    """Return the per-group structure of a dragonfly+ of radix ``radix``.

    Parameters
    ----------
    radix
        Switch ports at the link speed, ``k``.
    oversubscription
        Leaf down:up ratio ``r >= 1``.

    Returns
    -------
    dict
        ``down_per_leaf``, ``up_per_leaf`` (= spines per group), ``leaves_per_group``
        (``a = floor(k/2)``), ``global_ports_per_spine`` (``h = k - a``),
        ``hosts_per_group`` (``a x down``), ``global_ports_per_group`` (``G = up x h``) and
        ``max_groups`` (``G + 1``).

    Notes
    -----
    At ``r = 1``: ``(k/2)^2`` hosts and global ports per group, ``k^2/4 + 1`` groups
    (Shpiner et al. 2017; hardware-and-cost-facts 6.4).
    """
    down, up = leaf_ports(radix, oversubscription)
    a = radix // 2
    h = radix - a
    return {
        "down_per_leaf": down,
        "up_per_leaf": up,
        "leaves_per_group": a,
        "spines_per_group": up,
        "global_ports_per_spine": h,
        "hosts_per_group": a * down,
        "global_ports_per_group": up * h,
        "max_groups": up * h + 1,
    }


def _too_big(req: TopologyRequest, shape: dict[str, int]) -> str:
    cap = shape["hosts_per_group"] * shape["max_groups"]
    return (
        f"a dragonfly+ of radix-{req.radix} switches ({shape['down_per_leaf']} down / "
        f"{shape['up_per_leaf']} up per leaf, {shape['hosts_per_group']:,} NIC ports and "
        f"{shape['global_ports_per_group']:,} global ports per group) joins at most "
        f"{shape['max_groups']:,} groups, i.e. at most {cap:,} NIC ports; this design needs "
        f"{req.n_endpoints:,} ({req.n_gpus:,} GPUs x {req.nics_per_gpu} NICs). Allowed: "
        f"cluster.n_gpus x cluster.nics_per_gpu <= {cap:,} (cluster.n_gpus <= "
        f"{cap // req.nics_per_gpu:,} at {req.nics_per_gpu} NIC(s) per GPU), or a "
        f"higher-radix switch (fabric.switch / fabric.link_gbps)"
    )


def _endpoint_leaf(req: TopologyRequest, down: int) -> tuple[np.ndarray, int]:
    """Leaf of every endpoint (compacted to ``0 .. L-1``) and the leaf count ``L``.

    Same keys as the fat-tree: rail-optimized ``(server // down) x rails + rail``, else
    ``endpoint // down``.
    """
    e = np.arange(req.n_endpoints, dtype=np.int64)
    if not req.rail_optimized:
        leaf = e // down
        return leaf, int(leaf[-1]) + 1
    gpu, nic = np.divmod(e, req.nics_per_gpu)
    node, local = np.divmod(gpu, req.gpus_per_node)
    key = (node // down) * req.rails + local * req.nics_per_gpu + nic
    _, leaf = np.unique(key, return_inverse=True)
    leaf = leaf.astype(np.int64).ravel()
    return leaf, int(leaf.max()) + 1


def _pair_counts(
    req: TopologyRequest, leaf_of_e: np.ndarray, group_of_leaf: np.ndarray
) -> dict[int, float]:
    """Count ordered GPU pairs in different NVLink domains by switch hops (1, 3 or 4).

    Rail-optimized (whole servers): the pair ``(i, j)`` leaves from the NIC of the GPU in
    ``i``'s server with ``j``'s local index (PXN), so per local index the count runs over
    server pairs, weighted by the GPUs per server. Otherwise each GPU uses its own first NIC.
    """
    n = req.n_gpus
    domain = np.arange(n, dtype=np.int64) // req.nvlink_domain
    total = float(n) * n - same_group_pairs(domain, domain)
    if total <= 0:
        return {}
    nics, gpn = req.nics_per_gpu, req.gpus_per_node
    if req.rail_optimized and n >= gpn and n % gpn == 0:
        node = np.arange(n // gpn, dtype=np.int64)
        dom = node * gpn // req.nvlink_domain
        # one row per local index: that rail's leaf of every server
        leaf = leaf_of_e[(node[None, :] * gpn + np.arange(gpn, dtype=np.int64)[:, None]) * nics]
        weight = float(gpn)
    else:
        leaf = leaf_of_e[np.arange(n, dtype=np.int64) * nics][None, :]
        dom, weight = domain, 1.0
    same_leaf = weight * pairs_not_same_domain_rows(leaf, dom)
    same_group = weight * pairs_not_same_domain_rows(group_of_leaf[leaf], dom)
    return {1: same_leaf, 3: same_group - same_leaf, 4: total - same_group}


def _port_groups(tier: str, ports_per_switch: np.ndarray) -> tuple[PortGroup, ...]:
    """Group switches by their port count of one link class (zero-port switches dropped)."""
    ports, counts = np.unique(np.asarray(ports_per_switch).ravel(), return_counts=True)
    return tuple(
        PortGroup(tier, int(p), int(c))
        for p, c in zip(ports[::-1], counts[::-1], strict=True)
        if p > 0
    )


def build_dragonfly_plus(req: TopologyRequest) -> Topology:
    """Size a dragonfly+ fabric for ``req`` and return it with exact counts.

    Parameters
    ----------
    req
        The request; ``radix`` is the switch port count at ``link_gbps``;
        ``oversubscription`` splits the leaf ports; ``spine_core_m`` is the global link length.

    Returns
    -------
    Topology
        Family ``dragonfly-plus``, tiers ``leaf`` and ``spine``, link classes ``nic-leaf``,
        ``leaf-spine`` and ``global`` (spine to spine).

    Raises
    ------
    InfeasibleDesignError
        On ``cluster.n_gpus`` when more than ``G + 1`` groups are needed (the message gives
        the largest NIC-port and GPU counts), on ``fabric.switch`` for radix < 4.

    Notes
    -----
    Counts: ``L`` leaves, ``g up`` spines, ``E`` NIC-leaf cables, ``L up`` leaf-spine cables,
    ``m g (g-1) / 2`` global cables with ``m = floor(G / (g-1))``. Bisection as in the module
    docstring. Sources: Shpiner et al., HiPINEB 2017; Kim et al., ISCA 2008 (dragonfly
    ``g <= a h + 1``); hardware-and-cost-facts 6.4.
    """
    k = int(req.radix)
    if k < 4:
        raise InfeasibleDesignError(
            "fabric.switch", f"a dragonfly+ needs switches of radix >= 4, got {k}"
        )
    shape = dragonfly_plus_shape(k, req.oversubscription)
    down, up = shape["down_per_leaf"], shape["up_per_leaf"]
    a, gports = shape["leaves_per_group"], shape["global_ports_per_group"]
    n_e = req.n_endpoints
    if -(-n_e // shape["hosts_per_group"]) > shape["max_groups"]:
        raise InfeasibleDesignError("cluster.n_gpus", _too_big(req, shape))
    leaf_of_e, n_leaves = _endpoint_leaf(req, down)
    g = -(-n_leaves // a)
    if g > shape["max_groups"]:  # rail-wise fill of partial SUs can add leaves
        raise InfeasibleDesignError("cluster.n_gpus", _too_big(req, shape))
    group_of_leaf = np.arange(n_leaves, dtype=np.int64) // a
    leaves_in_group = np.bincount(group_of_leaf, minlength=g)
    m = gports // (g - 1) if g > 1 else 0
    used_global = m * (g - 1)  # per group
    n_global = m * g * (g - 1) // 2
    n_leaf_spine = n_leaves * up
    # Spines per group: ``up`` (each leaf reaches every spine once, and the spines hold the
    # global ports). A lone group has no global links, so it only needs the spines its leaf
    # uplinks fill: the smallest divisor of ``up`` that is >= ceil(L up / a), so that every
    # leaf has the same number of parallel links to every spine (as the 2-tier fat-tree).
    need = -(-n_leaf_spine // a)
    spg = up if g > 1 else next(s for s in range(need, up + 1) if up % s == 0)
    n_spines = g * spg
    rate = gbps_to_GBps(req.link_gbps)

    if g > 1:
        spine_groups = _port_groups("spine", np.repeat(leaves_in_group, up))
    else:
        spine_groups = (PortGroup("spine", n_leaf_spine // spg, spg),)
    q, rem = divmod(used_global, up)
    global_groups = tuple(
        PortGroup("spine", p, c * g) for p, c in ((q + 1, rem), (q, up - rem)) if p > 0 and c > 0
    )
    links = (
        LinkClass(
            "nic-leaf",
            n_e,
            req.link_gbps,
            req.nic_leaf_m,
            ("nic", "leaf"),
            _port_groups("leaf", np.bincount(leaf_of_e, minlength=n_leaves)),
        ),
        LinkClass(
            "leaf-spine",
            n_leaf_spine,
            req.link_gbps,
            req.leaf_spine_m,
            ("leaf", "spine"),
            (PortGroup("leaf", up, n_leaves), *spine_groups),
        ),
        LinkClass(
            "global", n_global, req.link_gbps, req.spine_core_m, ("spine", "spine"), global_groups
        ),
    )
    hist, hmax, hmean = hop_histogram(_pair_counts(req, leaf_of_e, group_of_leaf))
    if g > 1:
        cut = min(n_e / 2, n_leaf_spine / 2, m * (g // 2) * (-(-g // 2)))
    else:
        cut = min(n_e, n_leaf_spine) / 2

    notes = [
        f"dragonfly+ (Shpiner et al. 2017): {g:,} group(s) of up to {a} leaves and {up} "
        f"spines; {shape['hosts_per_group']:,} NIC ports and {gports:,} global ports per "
        f"group; at most {shape['max_groups']:,} groups",
    ]
    if g > 1 and leaves_in_group[-1] < a:
        notes.append(f"the last group is partial: {int(leaves_in_group[-1])} of {a} leaves")
    if req.rail_optimized:
        su = f"{down} servers ({down * req.gpus_per_node:,} GPUs)"
        fit = (
            f"{a // req.rails} SU(s) per group"
            if a % req.rails == 0 and a >= req.rails
            else f"SUs of {req.rails} leaves straddle groups of {a} leaves"
        )
        notes.append(f"rail-optimized leaf fill: an SU is {su} with one leaf per rail; {fit}")
    else:
        notes.append(f"ToR-style leaf fill: {down} consecutive NIC ports per leaf")
    if g > 1:
        unused = gports - used_global
        notes.append(
            f"global links: {m:,} per group pair ({n_global:,} in all), "
            f"{used_global:,} of {gports:,} global ports used per group"
            + (f"; {unused:,} left unused per group ({unused * g:,} in all)" if unused else "")
        )
    else:
        notes.append(
            f"a single group degenerates to a 2-tier leaf/spine: {spg} spine(s), each leaf "
            f"with {up // spg} parallel link(s) to every spine, {n_leaf_spine // spg} of "
            f"{k} ports used per spine; the spines' other ports stay free as global ports "
            f"for more groups (a full group has {up} spines)"
        )
    free = n_leaves * down - n_e
    if free > 0:
        notes.append(f"{free:,} leaf down-ports left free for growth (partial build)")

    params = {
        "radix": k,
        "switch_key": req.switch_key,
        **shape,
        "n_groups": g,
        "n_leaves": n_leaves,
        "n_spines": n_spines,
        "spines_per_group": spg,
        "leaves_last_group": int(leaves_in_group[-1]),
        "global_links_per_group_pair": m,
        "unused_global_ports_per_group": gports - used_global if g > 1 else gports,
        "minimal_max_hops": hmax,
        "valiant_max_hops": VALIANT_MAX_HOPS if g > 2 else hmax,
        "rail_optimized": req.rail_optimized,
    }

    def graph() -> FabricGraph:
        base_sp = n_e + n_leaves
        leaf_rep = np.repeat(np.arange(n_leaves, dtype=np.int64), up)
        j = np.tile(np.arange(up, dtype=np.int64), n_leaves)
        if g > 1:
            ls_b = base_sp + group_of_leaf[leaf_rep] * up + j
        else:
            ls_b = base_sp + j % spg
        ls_a = n_e + leaf_rep
        x, y = np.triu_indices(g, 1)
        xs, ys = np.repeat(x.astype(np.int64), m), np.repeat(y.astype(np.int64), m)
        c = np.tile(np.arange(m, dtype=np.int64), x.size)
        tx, ty = ((ys - xs - 1) % g) * m + c, ((xs - ys - 1) % g) * m + c
        gl_a, gl_b = base_sp + xs * up + tx % up, base_sp + ys * up + ty % up
        a_ = np.concatenate([np.arange(n_e, dtype=np.int64), ls_a, gl_a])
        b_ = np.concatenate([n_e + leaf_of_e, ls_b, gl_b])
        cls = np.concatenate([np.zeros(n_e), np.ones(ls_a.size), np.full(gl_a.size, 2)])
        tier = np.concatenate([np.zeros(n_e), np.ones(n_leaves), np.full(n_spines, 2)])
        return graph_from_cables(
            base_sp + n_spines, tier, a_, b_, cls, req.link_gbps, req.n_gpus, req.nics_per_gpu
        )

    return Topology(
        family="dragonfly-plus",
        request=req,
        tiers=2,
        switches_by_tier={"leaf": n_leaves, "spine": n_spines},
        links=links,
        max_switch_hops=hmax,
        mean_switch_hops=hmean,
        hop_histogram=hist,
        bisection_GBps=float(cut) * rate,
        oversubscription=down / up,
        params=params,
        notes=tuple(notes),
        _graph_builder=graph,
    )


def max_dragonfly_plus_endpoints(radix: int, oversubscription: float = 1.0) -> int:
    """Largest NIC-port count a dragonfly+ of this radix holds: ``a down (up h + 1)``."""
    s = dragonfly_plus_shape(radix, oversubscription)
    return s["hosts_per_group"] * s["max_groups"]
