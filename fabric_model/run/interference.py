"""Jobs' traffic on the shared fabric: placement and neighbours, solved in the max-min solver.

Each running multi-node job's dominant scale-out pattern is NCCL's rail-matched ring over its
NVLink domains in rank order (its nodes in allocation order, each domain's GPUs in slot order):
every GPU's NIC sends to the NIC of the same slot and rail in the next domain, the pattern the
data-parallel (and FSDP) reductions repeat each phase (:meth:`fabric_model.collectives.
FabricContext.endpoint` maps a domain's slots to NIC endpoints the same way; endpoint =
``gpu x nics + nic``, ``gpu = node x gpus_per_node + local``). A job inside one NVLink domain
sends nothing on the scale-out fabric.

The rate of a job's pattern is its slowest connection's max-min fair rate
(:func:`fabric_model.flows.solve_maxmin`), routed with the fabric's policy on its (degraded)
capacities (:func:`fabric_model.routing.route`; static ECMP hashes with the simulation seed).
Three rates per job:

- ``contiguous``: the same job alone on the first ``k`` nodes of the cluster;
- ``alone``: alone on its actual nodes (the placement's cost: scattered over spines it meets
  the taper, more ECMP collisions);
- ``shared``: solved together with every other running job whose traffic leaves its leaf group.
  A job whose nodes sit under one leaf group shares no link with any other job (its flows cross
  only its own NIC links and one leaf's crossbar: a leaf group is the leaves that reach the same
  servers, and a rail-matched ring stays on one rail), so its shared rate is its alone rate and
  the joint solve holds only the jobs that cross leaf groups. That is exact, not an
  approximation, for every switched family; a switchless fabric (torus) has no leaves, so all
  its multi-domain jobs are solved together.

Inside a solve, the same argument at the level of connections: a ring hop between two nodes
of one leaf group crosses only its two NIC links (every endpoint sends one connection and
receives one), so on undegraded links it runs at the one-leaf rate and only the hops that leave
their leaf group are routed and solved, on the links they cross (a compact link space, so a
solve costs what its flows touch, not the fabric's size). Solves are cached: ``contiguous`` by
node count, ``alone`` by node tuple, ``shared`` by the set of (job, nodes) of the crossing
jobs, and re-solved only when that set changes (a start, an end, a failure). Static ECMP draws
its hashes for the routed connections only, so its collisions are a draw of the same law as
the full pattern's, not the same draw.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from fabric_model.collectives.context import FabricContext
from fabric_model.flows import FlowSet, solve_maxmin
from fabric_model.routing import route
from fabric_model.run.placement import ClusterLayout

__all__ = ["FabricRates", "ring_pattern"]


def ring_pattern(layout: ClusterLayout, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Source and destination NIC endpoints of the job's rail-matched ring over its domains.

    Node ``j`` of each domain (in rank order) sends from every GPU's NICs to node ``j`` of the
    next domain, the same GPU and NIC; a domain with fewer nodes than the next leaves the
    extra ones out of that hop.
    """
    nodes = np.asarray(nodes, dtype=np.int64)
    dom = nodes // layout.servers_per_domain
    uniq, first, inv = np.unique(dom, return_index=True, return_inverse=True)
    if uniq.size < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    rank_of = np.empty(uniq.size, dtype=np.int64)
    rank_of[np.argsort(first, kind="stable")] = np.arange(uniq.size)
    r = rank_of[inv]  # each node's domain in rank order
    order = np.lexsort((np.arange(nodes.size), r))
    counts = np.bincount(r, minlength=uniq.size)
    pos = np.empty(nodes.size, dtype=np.int64)
    pos[order] = np.arange(nodes.size) - np.repeat(np.cumsum(counts) - counts, counts)
    table = np.full((uniq.size, int(counts.max())), -1, dtype=np.int64)
    table[r, pos] = nodes
    nxt = np.roll(table, -1, axis=0)
    ok = (table >= 0) & (nxt >= 0)
    per = layout.gpus_per_node * layout.nics_per_gpu
    slot = np.arange(per, dtype=np.int64)
    src = (table[ok][:, None] * per + slot).ravel()
    dst = (nxt[ok][:, None] * per + slot).ravel()
    return src, dst


@dataclass(eq=False)
class FabricRates:
    """Ring rates of jobs on one cluster fabric (see the module docstring), cached."""

    ctx: FabricContext
    layout: ClusterLayout
    seed: int = 0
    cache_size: int = 4096
    _contig: dict[int, float] = field(default_factory=dict)
    _alone: OrderedDict[tuple[int, ...], float] = field(default_factory=OrderedDict)
    _shared: OrderedDict[frozenset[tuple[str, tuple[int, ...]]], dict[str, float]] = field(
        default_factory=OrderedDict
    )
    _patterns: OrderedDict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = field(
        default_factory=OrderedDict
    )
    solves: int = 0
    _intra: float | None = None
    _crosses: dict[tuple[int, ...], bool] = field(default_factory=dict)

    def _solve_full(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Max-min rate of every connection of one routed pattern, bytes/s."""
        ctx = self.ctx
        rf = route(
            ctx.topology,
            src,
            dst,
            ctx.policy,
            ctx.capacity_Bps,
            qps=ctx.scenario.fabric.qps_per_connection,
            rng=np.random.default_rng(self.seed),
        )
        # the solve on the links the pattern crosses only (the same rates: a link no flow
        # crosses constrains nothing), so its cost follows the pattern, not the fabric
        flows = rf.flows
        used, compact = np.unique(flows.flow_link_indices, return_inverse=True)
        small = FlowSet(
            flows.flow_link_indptr,
            compact.astype(np.int32),
            flows.flow_link_weights,
            int(used.size),
            flows.flow_demand_Bps,
            max_weight=flows.max_weight,
        )
        sol = solve_maxmin(small, np.asarray(rf.link_capacity_Bps)[used])
        conn = np.full(src.size, np.inf)
        np.minimum.at(conn, rf.flow_of_connection, sol.rate_Bps / rf.flow_fraction)
        self.solves += 1
        return conn

    @property
    def _intra_leaf_Bps(self) -> float:
        """Rate of a connection between two NICs of one leaf group on one rail (solved once)."""
        if self._intra is None:
            lay = self.layout
            per = lay.gpus_per_node * lay.nics_per_gpu
            mates = np.flatnonzero(lay.leaf_of == lay.leaf_of[0])
            if mates.size < 2:
                self._intra = np.inf
            else:
                a, b = int(mates[0]), int(mates[1])
                conn = self._solve_full(np.array([a * per]), np.array([b * per]))
                self._intra = float(conn[0])
        return self._intra

    def _solve(self, patterns: list[tuple[np.ndarray, np.ndarray]]) -> list[float]:
        """Slowest-connection rate of each pattern, all solved together, bytes/s.

        On undegraded links of a switched fabric, a connection between two NICs of one leaf
        group (the same rail: one leaf switch) crosses only its source's up link and its
        destination's down link, which no other connection of a ring pattern uses (every
        endpoint sends one connection and receives one), so its rate is the one-leaf rate
        (:attr:`_intra_leaf_Bps`) and only the connections that leave their leaf group are
        routed and solved together: the same rates as the full solve (the tests compare them).
        """
        sizes = [p[0].size for p in patterns]
        src = np.concatenate([p[0] for p in patterns])
        dst = np.concatenate([p[1] for p in patterns])
        lay = self.layout
        if self._uniform and lay.tiers:
            per = lay.gpus_per_node * lay.nics_per_gpu
            cross = lay.leaf_of[src // per] != lay.leaf_of[dst // per]
            conn = np.full(src.size, self._intra_leaf_Bps)
            if cross.any():
                conn[cross] = self._solve_full(src[cross], dst[cross])
        else:
            conn = self._solve_full(src, dst)
        out, start = [], 0
        for n in sizes:
            out.append(float(conn[start : start + n].min()))
            start += n
        return out

    def crosses_leaves(self, nodes: tuple[int, ...]) -> bool:
        """Whether the job's traffic leaves its leaf group (it may then meet other jobs)."""
        if self.layout.tiers == 0:
            return True
        hit = self._crosses.get(nodes)
        if hit is None:
            leaves = self.layout.leaf_of[np.asarray(nodes)]
            hit = bool(leaves.size and leaves.min() != leaves.max())
            if len(self._crosses) > 4 * self.cache_size:
                self._crosses.clear()
            self._crosses[nodes] = hit
        return hit

    def has_traffic(self, nodes: tuple[int, ...]) -> bool:
        """Whether the job spans more than one NVLink domain (it uses the scale-out fabric)."""
        spd = self.layout.servers_per_domain
        return len(nodes) > 1 and (spd == 1 or min(nodes) // spd != max(nodes) // spd)

    def _pattern(self, nodes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        hit = self._patterns.get(nodes)
        if hit is None:
            hit = self._patterns[nodes] = ring_pattern(self.layout, np.asarray(nodes))
            if len(self._patterns) > self.cache_size:
                self._patterns.popitem(last=False)
        return hit

    def contiguous(self, k: int) -> float:
        """Ring rate of a ``k``-node job alone on nodes ``0 .. k-1``."""
        if k not in self._contig:
            src, dst = ring_pattern(self.layout, np.arange(k))
            self._contig[k] = self._solve([(src, dst)])[0] if src.size else np.inf
        return self._contig[k]

    @property
    def _uniform(self) -> bool:
        """Whether every link keeps its built capacity (no degraded-link what-if)."""
        return self.ctx.capacity_Bps is self.ctx.topology.graph.link_capacity_Bps

    def alone(self, nodes: tuple[int, ...]) -> float:
        """Ring rate of the job alone on its nodes.

        A job of single-server NVLink domains under one leaf group on undegraded links runs
        as fast as the same job on the first nodes of a leaf group: its ring crosses only its
        own NIC links and one leaf per rail, alike in every group, so it is the contiguous
        rate (no solve).
        """
        if (
            self._uniform
            and self.layout.tiers
            and self.layout.servers_per_domain == 1  # else the domains' count differs
            and not self.crosses_leaves(nodes)
            and len(nodes) <= int(np.bincount(self.layout.leaf_of).min())
        ):
            return self.contiguous(len(nodes))
        hit = self._alone.get(nodes)
        if hit is None:
            src, dst = self._pattern(nodes)
            hit = self._solve([(src, dst)])[0] if src.size else np.inf
            self._alone[nodes] = hit
            if len(self._alone) > self.cache_size:
                self._alone.popitem(last=False)
        else:
            self._alone.move_to_end(nodes)
        return hit

    def shared(self, running: dict[str, tuple[int, ...]]) -> dict[str, float]:
        """Ring rate of every crossing job with all the others running (id -> bytes/s)."""
        key = frozenset(running.items())
        hit = self._shared.get(key)
        if hit is not None:
            self._shared.move_to_end(key)
            return hit
        ids = sorted(running)
        if len(ids) == 1:
            hit = {ids[0]: self.alone(running[ids[0]])}
        else:
            pats = [self._pattern(running[j]) for j in ids]
            hit = dict(zip(ids, self._solve(pats), strict=True))
        self._shared[key] = hit
        if len(self._shared) > self.cache_size:
            self._shared.popitem(last=False)
        return hit
