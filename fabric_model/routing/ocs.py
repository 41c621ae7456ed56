"""Routing on optical-circuit-switched fabrics: over the circuits only, relayed through blocks.

The graph (:mod:`fabric_model.topology.ocs`) has the endpoints, one forwarding node per block
and the OCSes; its cables are the block-to-OCS fibers and one internal link per endpoint. An
OCS is passive: a route never turns inside it. A connection between two blocks crosses
*circuits*: the circuits between blocks ``u`` and ``v`` form one trunk per direction, link
``n_links + t`` of the link space, whose capacity is the sum over its circuits of the
smaller of the two fibers it crosses (``capacity_Bps`` of fiber ``u U + s`` towards the OCS
and of fiber ``v U + s`` away from it), so a degraded fiber costs its circuit only. Blocks
without a circuit between them are joined through other blocks: the traffic is relayed by
the blocks in between (over NVLink and the NICs of an NVLink domain or a cube, by the spines
of a pod), as TopoOpt's host forwarding does (Wang et al., NSDI 2023). Every path starts with
the source endpoint's internal link into its block and ends with the destination's.

Policies
--------
``adaptive``
    Minimal, spread evenly over every shortest path of trunks: at each block the flow splits
    over the next blocks in proportion to the shortest paths through them (so each minimal
    path carries the same share), and within a trunk over its circuits by capacity (the
    trunk is a bundle). Oblivious between paths (fixed weights), like the torus's.
``ecmp``
    Each queue pair hashed (seeded ``rng``) onto one shortest path (each equally likely) and
    onto one circuit of each trunk on it; its links are the two fibers of every circuit.

Switch hops are the topology's (``fabric_model.topology.ocs``, *Hops*): circuits crossed
(NVLink blocks); plus the pod's leaves and spines; plus a cube's mesh to its nearest face.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabric_model._jit import jit
from fabric_model.caching import kept_per_capacity, kept_per_fabric
from fabric_model.families import FAMILIES
from fabric_model.flows import FlowSet
from fabric_model.routing.base import RoutedFlows, check_policy
from fabric_model.topology import Topology
from fabric_model.topology.ocs import Circuits, cube_face_distance, cube_mesh_distance

__all__ = ["OCS_POLICIES", "TRUNK_CLASS_NAME", "connection_hops", "route_ocs", "trunk_table"]

#: The policies of the family registry's entry.
OCS_POLICIES = FAMILIES["ocs"].policies
#: Class name of the circuit trunks in the link space.
TRUNK_CLASS_NAME = "ocs-circuit bundle"


@dataclass(frozen=True, eq=False)
class TrunkTable:
    """The directed trunks of a fabric's circuits, and the shortest paths over them.

    Attributes
    ----------
    n_blocks
        Built blocks.
    trunk_of
        ``(n, n)`` trunk id of ``u -> v`` (``-1``: no circuit).
    indptr, target, trunk
        CSR per block of its outgoing trunks: the block reached and the trunk id.
    member_ptr, member_out, member_in
        CSR per trunk of its circuits: the fiber link towards the OCS and the one away.
    hops
        ``(n, n)`` circuits crossed on a shortest path (``-1``: unreachable).
    paths
        ``(n, n)`` float64: shortest paths from ``v`` to ``t`` (``paths[v, t]``).
    """

    n_blocks: int
    trunk_of: np.ndarray
    indptr: np.ndarray
    target: np.ndarray
    trunk: np.ndarray
    member_ptr: np.ndarray
    member_out: np.ndarray
    member_in: np.ndarray
    hops: np.ndarray
    paths: np.ndarray

    @property
    def n_trunks(self) -> int:
        """Directed trunks."""
        return int(self.target.size)


def _circuits(topo: Topology) -> Circuits:
    data: Circuits = topo.params["circuits_data"]
    return data


def trunk_table(topo: Topology) -> TrunkTable:
    """Return the fabric's trunks and shortest paths (kept per fabric)."""

    def build() -> TrunkTable:
        c = _circuits(topo)
        n = int(topo.params["n_blocks_built"])
        U = int(topo.params["uplinks_per_block"])
        src = np.concatenate([c.a, c.b])
        dst = np.concatenate([c.b, c.a])
        slot = np.concatenate([c.slot, c.slot])
        out_link = 2 * (src * U + slot)  # towards the OCS on the source's fiber
        in_link = 2 * (dst * U + slot) + 1  # away from the OCS on the destination's
        pair = src * n + dst
        order = np.argsort(pair, kind="stable")
        pair_sorted = pair[order]
        uniq, start = np.unique(pair_sorted, return_index=True)
        trunk_of = np.full((n, n), -1, dtype=np.int64)
        trunk_of[uniq // n, uniq % n] = np.arange(uniq.size)
        member_ptr = np.append(start, pair_sorted.size).astype(np.int64)
        t_src, t_dst = uniq // n, uniq % n
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(t_src, minlength=n), out=indptr[1:])  # uniq is sorted by src
        hops = np.asarray(c.hops)
        paths = np.zeros((n, n), dtype=np.float64)
        if n:
            _path_counts(indptr, t_dst.astype(np.int64), hops.astype(np.int64), paths)
        return TrunkTable(
            n,
            trunk_of,
            indptr,
            t_dst.astype(np.int64),
            np.arange(uniq.size, dtype=np.int64),
            member_ptr,
            out_link[order].astype(np.int64),
            in_link[order].astype(np.int64),
            hops,
            paths,
        )

    return kept_per_fabric(topo.graph, "ocs.trunks", build)


def _trunk_capacity(topo: Topology, table: TrunkTable, cap: np.ndarray) -> np.ndarray:
    """Capacity of every trunk: per circuit the smaller of its two fibers, summed."""

    def build() -> np.ndarray:
        per_circuit = np.minimum(cap[table.member_out], cap[table.member_in])
        owner = np.repeat(np.arange(table.n_trunks), np.diff(table.member_ptr))
        out = np.bincount(owner, weights=per_circuit, minlength=table.n_trunks)
        return np.where(out > 0, out, 1.0)

    return kept_per_capacity(topo.graph, "ocs.trunk_capacity", cap, build)


def _block_of(topo: Topology, endpoints: np.ndarray) -> np.ndarray:
    req = topo.request
    job = _circuits(topo).job_blocks
    return job[(endpoints // req.nics_per_gpu) // int(topo.params["block_gpus"])]


def connection_hops(topo: Topology, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Switch hops of each connection ``src[i] -> dst[i]`` (the topology's definition)."""
    table = trunk_table(topo)
    sb, db = _block_of(topo, src), _block_of(topo, dst)
    d = table.hops[sb, db].astype(np.int64)
    kind = topo.params["block"]
    if kind == "pod":
        inside = 3 if int(topo.params["pod_tiers"]) == 2 else 1
        same_domain = (src // topo.request.nics_per_gpu) // topo.request.nvlink_domain == (
            dst // topo.request.nics_per_gpu
        ) // topo.request.nvlink_domain
        return np.where(sb == db, np.where(same_domain, 0, inside), d + inside)
    if kind == "cube":
        req = topo.request
        dom = req.nvlink_domain
        per = int(topo.params["domains_per_block"])
        ds = ((src // req.nics_per_gpu) // dom) % per
        dd = ((dst // req.nics_per_gpu) // dom) % per
        inter = d + cube_face_distance(ds) + cube_face_distance(dd)
        return np.where(sb == db, cube_mesh_distance(ds, dd), inter)
    return d


def route_ocs(
    topo: Topology,
    src: np.ndarray,
    dst: np.ndarray,
    policy: str,
    capacity_Bps: np.ndarray,
    *,
    qps: int = 1,
    rng: np.random.Generator | None = None,
) -> RoutedFlows:
    """Route connections on an OCS fabric (the :class:`~.base.Router` interface).

    Policies: ``adaptive`` or ``ecmp`` (module docstring). Link space: the graph's links
    (fibers and internal links), then (``adaptive``) one trunk per directed block pair.
    """
    check_policy("ocs", policy, OCS_POLICIES)
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    cap = np.asarray(capacity_Bps, dtype=np.float64)
    rng = rng or np.random.default_rng(0)
    g = topo.graph
    table = trunk_table(topo)
    n_fibers = int(topo.params["n_blocks_built"]) * int(topo.params["uplinks_per_block"])
    up = 2 * (n_fibers + src)  # each endpoint's internal link, towards its block
    down = 2 * (n_fibers + dst) + 1
    sb, db = _block_of(topo, src), _block_of(topo, dst)
    hops = connection_hops(topo, src, dst)
    names, labels = _labels(topo)
    if policy == "adaptive":
        pair = sb * table.n_blocks + db
        uniq, inverse = np.unique(pair, return_inverse=True)
        us, ud = uniq // table.n_blocks, uniq % table.n_blocks
        p_ptr = np.zeros(uniq.size + 1, dtype=np.int64)
        work = np.zeros(table.n_blocks, dtype=np.float64)
        queue = np.empty(table.n_blocks, dtype=np.int64)
        _dag_count(us, ud, table.indptr, table.target, table.hops, p_ptr, work, queue)
        p_trunk = np.empty(int(p_ptr[-1]), dtype=np.int64)
        p_w = np.empty(p_trunk.size, dtype=np.float64)
        _dag_fill(
            us,
            ud,
            table.indptr,
            table.target,
            table.trunk,
            table.hops,
            table.paths,
            p_ptr,
            p_trunk,
            p_w,
            work,
            queue,
        )
        seg = inverse.ravel()
        seg_len = np.diff(p_ptr)[seg]
        length = seg_len + 2
        indptr = np.zeros(src.size + 1, dtype=np.int64)
        np.cumsum(length, out=indptr[1:])
        indices = np.empty(int(indptr[-1]), dtype=np.int64)
        weights = np.ones(indices.size)
        indices[indptr[:-1]] = up
        indices[indptr[1:] - 1] = down
        total = int(seg_len.sum())
        if total:
            conn = np.repeat(np.arange(src.size), seg_len)
            within = np.arange(total) - np.repeat(np.cumsum(seg_len) - seg_len, seg_len)
            source = p_ptr[seg][conn] + within
            pos = indptr[conn] + 1 + within
            indices[pos] = g.n_links + p_trunk[source]
            weights[pos] = p_w[source]
        flows = FlowSet(indptr, indices, weights, g.n_links + table.n_trunks)
        trunk_cap = _trunk_capacity(topo, table, cap)
        return RoutedFlows(
            flows=flows,
            link_capacity_Bps=np.concatenate([cap, trunk_cap]),
            link_class=np.concatenate([labels, np.full(table.n_trunks, len(names), np.int16)]),
            class_names=(*names, TRUNK_CLASS_NAME),
            flow_of_connection=np.arange(src.size, dtype=np.int64),
            flow_fraction=np.ones(src.size),
            switch_hops=hops,
            policy=policy,
        )
    # ecmp: each queue pair walks one shortest path, one circuit per trunk
    conn = np.repeat(np.arange(src.size, dtype=np.int64), qps)
    n = conn.size
    depth = int(table.hops[sb, db].max(initial=0))
    uniforms = rng.random((n, 2 * max(depth, 1)))
    width = 2 + 2 * depth
    paths = np.full((n, width), -1, dtype=np.int64)
    paths[:, 0] = up[conn]
    paths[:, -1] = down[conn]
    _ecmp_walk(
        sb[conn],
        db[conn],
        table.indptr,
        table.target,
        table.trunk,
        table.hops,
        table.paths,
        table.member_ptr,
        table.member_out,
        table.member_in,
        uniforms,
        paths,
    )
    valid = paths >= 0
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(valid.sum(axis=1), out=indptr[1:])
    flows = FlowSet(indptr, paths[valid], np.ones(int(indptr[-1])), g.n_links)
    return RoutedFlows(
        flows=flows,
        link_capacity_Bps=cap,
        link_class=labels,
        class_names=names,
        flow_of_connection=conn,
        flow_fraction=np.full(n, 1.0 / qps),
        switch_hops=hops,
        policy=policy,
    )


def _labels(topo: Topology) -> tuple[tuple[str, ...], np.ndarray]:
    """Class names and the graph links' labels: the internal links are ``nic-leaf`` in a pod."""
    names = tuple(lc.name for lc in topo.links)
    cls = np.asarray(topo.graph.link_class, dtype=np.int16)
    if "nic-leaf" in names:
        internal = names.index("nic-leaf")
    else:
        names = (*names, "internal")
        internal = len(names) - 1
    return names, np.where(cls < 0, internal, cls).astype(np.int16)


# --------------------------------------------------------------------------------------
# kernels (readable twins in tests/test_ocs.py: brute-force path enumeration)
# --------------------------------------------------------------------------------------


@jit
def _path_counts(
    indptr: np.ndarray, target: np.ndarray, hops: np.ndarray, paths: np.ndarray
) -> None:  # pragma: no cover
    """``paths[v, t]``: shortest paths from ``v`` to ``t`` over distinct neighbour blocks."""
    n = indptr.size - 1
    start = np.zeros(n + 2, dtype=np.int64)
    order = np.empty(n, dtype=np.int64)
    for t in range(n):
        if hops[t, t] < 0:
            continue
        # the blocks by their hops to t (a counting sort; unreachable ones left out)
        start[:] = 0
        for v in range(n):
            if hops[v, t] >= 0:
                start[hops[v, t] + 1] += 1
        for d in range(n):
            start[d + 1] += start[d]
        for v in range(n):
            if hops[v, t] >= 0:
                order[start[hops[v, t]]] = v
                start[hops[v, t]] += 1
        paths[t, t] = 1.0
        for j in range(start[n]):
            v = order[j]
            dv = hops[v, t]
            if dv <= 0:
                continue
            s = 0.0
            for k in range(indptr[v], indptr[v + 1]):
                w = target[k]
                if hops[w, t] == dv - 1:
                    s += paths[w, t]
            paths[v, t] = s


@jit
def _dag_count(
    us: np.ndarray,
    ud: np.ndarray,
    indptr: np.ndarray,
    target: np.ndarray,
    hops: np.ndarray,
    p_ptr: np.ndarray,
    seen: np.ndarray,
    queue: np.ndarray,
) -> None:  # pragma: no cover
    """Write the CSR row pointer of each block pair's shortest-path trunks (their count)."""
    p_ptr[0] = 0
    for i in range(us.size):
        s, t = us[i], ud[i]
        count = 0
        if s != t:
            head, tail = 0, 1
            queue[0] = s
            seen[s] = 1.0
            while head < tail:
                u = queue[head]
                head += 1
                du = hops[u, t]
                for k in range(indptr[u], indptr[u + 1]):
                    w = target[k]
                    if hops[w, t] == du - 1:
                        count += 1
                        if seen[w] == 0.0 and w != t:
                            seen[w] = 1.0
                            queue[tail] = w
                            tail += 1
            for j in range(tail):
                seen[queue[j]] = 0.0
        p_ptr[i + 1] = p_ptr[i] + count


@jit
def _dag_fill(
    us: np.ndarray,
    ud: np.ndarray,
    indptr: np.ndarray,
    target: np.ndarray,
    trunk: np.ndarray,
    hops: np.ndarray,
    paths: np.ndarray,
    p_ptr: np.ndarray,
    p_trunk: np.ndarray,
    p_w: np.ndarray,
    flow: np.ndarray,
    queue: np.ndarray,
) -> None:  # pragma: no cover
    """Fill each pair's trunks and weights: the flow splits by shortest paths at each block."""
    for i in range(us.size):
        s, t = us[i], ud[i]
        if s == t:
            continue
        p = p_ptr[i]
        head, tail = 0, 1
        queue[0] = s
        flow[s] = 1.0
        while head < tail:  # levels in order: every trunk goes one level nearer t
            u = queue[head]
            head += 1
            du = hops[u, t]
            fu = flow[u]
            for k in range(indptr[u], indptr[u + 1]):
                w = target[k]
                if hops[w, t] == du - 1:
                    share = fu * paths[w, t] / paths[u, t]
                    p_trunk[p] = trunk[k]
                    p_w[p] = share
                    p += 1
                    if flow[w] == 0.0 and w != t:
                        queue[tail] = w
                        tail += 1
                    flow[w] += share
        for j in range(tail):
            flow[queue[j]] = 0.0
        flow[t] = 0.0


@jit
def _ecmp_walk(
    sb: np.ndarray,
    db: np.ndarray,
    indptr: np.ndarray,
    target: np.ndarray,
    trunk: np.ndarray,
    hops: np.ndarray,
    paths: np.ndarray,
    member_ptr: np.ndarray,
    member_out: np.ndarray,
    member_in: np.ndarray,
    uniforms: np.ndarray,
    out: np.ndarray,
) -> None:  # pragma: no cover
    """Walk each queue pair down one shortest path (uniform over paths), one circuit a trunk."""
    for q in range(sb.size):
        u, t = sb[q], db[q]
        col = 1
        step = 0
        while u != t:
            du = hops[u, t]
            pick = uniforms[q, 2 * step] * paths[u, t]
            acc = 0.0
            chosen = -1
            last = -1
            for k in range(indptr[u], indptr[u + 1]):
                w = target[k]
                if hops[w, t] == du - 1:
                    last = k
                    acc += paths[w, t]
                    if pick < acc:
                        chosen = k
                        break
            if chosen < 0:
                chosen = last
            tr = trunk[chosen]
            size = member_ptr[tr + 1] - member_ptr[tr]
            m = member_ptr[tr] + min(size - 1, int(uniforms[q, 2 * step + 1] * size))
            out[q, col] = member_out[m]
            out[q, col + 1] = member_in[m]
            col += 2
            step += 1
            u = target[chosen]
