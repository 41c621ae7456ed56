"""Jobs' traffic on the shared fabric: placement, neighbours and failed parts, max-min solved.

Each running job's network traffic is every parallel dimension that leaves an NVLink domain
on its placement, weighted by the dimension's share of the job's communication time
(:mod:`fabric_model.run.traffic`). Its connections are routed with the fabric's policy on the
fabric's current capacities (:func:`fabric_model.routing.route`; static ECMP hashes with a
draw of the job's own, fixed while it runs, as a queue pair keeps its hash) and solved in the
weighted max-min solver (:func:`fabric_model.flows.solve_maxmin`). A dimension's rate is its
slowest connection's rate per NIC share (rate / split: a NIC's drain rate, which an
all-to-all over more domains spreads over more connections). Three rates per job and
dimension:

- ``contiguous``: the same job alone on the first ``k`` nodes of the healthy cluster (the
  reference the training model's step was timed at);
- ``alone``: alone on its actual nodes, on the fabric as it is now (the placement's cost:
  scattered over spines it meets the taper and more ECMP collisions; a failed spine's lost
  capacity);
- ``shared``: solved together with every other running job it shares a link with.

**Only the links jobs share are solved.** A connection's rate is capped at its NICs' share
and a job's dimensions add up to one connection's worth per NIC (the weights), so a NIC link
never binds (:mod:`fabric_model.run.traffic`): a connection between two NICs of one first-hop
switch runs at its cap without a solve, and the solve holds the other connections on their
switch-to-switch links only (NIC links left out: the same rates, exactly). Jobs that share no
such link are independent max-min problems: the running jobs split into components (jobs
joined by a shared link, found by label propagation over the job-link incidence), each
solved on its own and cached by its set of (job, nodes) and the failure state, so an event
re-solves only the component whose jobs changed.

**Failures.** :meth:`FabricRates.fail` takes a spine, core or upper cable down: in one plane of
a multi-plane design (its links keep ``(planes - 1) / planes`` of their bundle, as
:func:`fabric_model.topology.planes.failed_switch_capacities` models a plane's switch), or
the only copy (its links carry nothing). Adaptive routing spreads over what is left (the
bundles sum their live cables); static hashing moves the connections hashed onto a dead link
to a live path (resilient ECMP: the others keep theirs; destination-based ``dmodk`` re-hashes
the moved ones ECMP-like, an approximation of the subnet manager's recomputed tables). A part
whose loss would leave a switch with no way up, or any part of a fabric other than a
fat-tree or rail-only one (whose routers' detours are not modelled), is reported as cutting
paths (the caller interrupts the jobs instead). :meth:`repair` brings it back.
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from fabric_model.collectives.context import FabricContext
from fabric_model.flows import FlowSet, solve_maxmin
from fabric_model.routing import route
from fabric_model.run.placement import ClusterLayout
from fabric_model.run.traffic import JobPattern, TrafficShape, job_pattern

__all__ = ["FabricRates", "Part", "Rates", "RoutedJob", "solve_routed"]

#: A dimension's rate per NIC share (bytes/s, line-rate units); a dimension absent from the
#: mapping sends nothing on the network on that placement.
Rates = dict[str, float]
#: A failed upper part: ("switch", graph node) or ("cable", cable id).
Part = tuple[str, int]
#: Re-hash attempts for a connection whose path crosses a dead link.
REHASH_ATTEMPTS = 32


def _digest(*parts: object) -> int:
    h = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(h[:8], "little")


@dataclass(frozen=True, eq=False)
class RoutedJob:
    """A job's switch-crossing connections routed on one capacity state (NIC entries out)."""

    dims: tuple[str, ...]
    links: np.ndarray  # the link-space ids it crosses (sorted, unique)
    indptr: np.ndarray  # per flow
    indices: np.ndarray  # link-space ids per entry
    weights: np.ndarray  # entry weight x its dimension's share
    demand: np.ndarray  # per flow, bytes/s
    fraction: np.ndarray  # per flow: its share of its connection's bytes
    flow_conn: np.ndarray  # per flow: its routed connection
    conn_dim: np.ndarray  # per routed connection: its dimension
    conn_split: np.ndarray  # per routed connection: its NIC share
    local_Bps: np.ndarray  # per dimension: the slowest one-switch connection (inf if none)
    max_weight: float
    #: link-space ids feeding the ports that hold PFC pause (sorted, unique; see solve_routed)
    pause_links: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    pause_share: float = 0.0  # share of the time they are paused

    @property
    def n_conns(self) -> int:
        """Routed connections."""
        return int(self.conn_dim.size)


def solve_routed(routed: list[RoutedJob], space_Bps: np.ndarray) -> tuple[list[Rates], int]:
    """Each job's per-dimension rates with all of ``routed`` sharing one link space.

    ``space_Bps``: the capacity of every link-space id the jobs' entries name. Returns the
    rates and the max-min solves it took (0 when no job leaves its first-hop switches).
    """
    out: list[Rates] = []
    busy = [r for r in routed if r.n_conns]
    conn_rate: list[np.ndarray] = []
    solves = 0
    if busy:
        offs = np.cumsum([0] + [r.indices.size for r in busy])
        indptr = np.concatenate(
            [busy[0].indptr[:1]] + [r.indptr[1:] + o for r, o in zip(busy, offs, strict=False)]
        )
        indices = np.concatenate([r.indices for r in busy])
        used, compact = np.unique(indices, return_inverse=True)
        weights = np.concatenate([r.weights for r in busy])
        demand = np.concatenate([r.demand for r in busy])
        max_weight = max(r.max_weight for r in busy)
        if len(busy) > 1 and any(r.pause_share > 0 for r in busy):
            keep = _victim_keep(busy, used, compact, offs)
            weights = weights / keep
            max_weight /= float(keep.min())
            per_flow = np.diff(indptr)
            flow_of_entry = np.repeat(np.arange(per_flow.size), per_flow)
            demand = demand * np.exp(
                np.bincount(flow_of_entry, weights=np.log(keep), minlength=per_flow.size)
            )
        flows = FlowSet.built(
            indptr,
            compact.astype(np.int32),
            weights,
            int(used.size),
            max_weight=max_weight,
            flow_demand_Bps=demand,
        )
        sol = solve_maxmin(flows, space_Bps[used])
        solves = 1
        start = 0
        for r in busy:
            n = r.flow_conn.size
            rate = np.full(r.n_conns, np.inf)
            np.minimum.at(rate, r.flow_conn, sol.rate_Bps[start : start + n] / r.fraction[:])
            conn_rate.append(rate)
            start += n
    it = iter(conn_rate)
    for r in routed:
        per_dim = r.local_Bps.copy()
        if r.n_conns:
            np.minimum.at(per_dim, r.conn_dim, next(it) / r.conn_split)
        out.append(dict(zip(r.dims, per_dim.tolist(), strict=True)))
    return out, solves


def _victim_keep(
    busy: list[RoutedJob], used: np.ndarray, compact: np.ndarray, offs: np.ndarray
) -> np.ndarray:
    """Per entry of the jobs' joint flow set, the share of the time other jobs leave its link.

    A link paused a share ``p`` of the time moves nothing for any flow on it then (IEEE
    802.1Qbb: PAUSE stops the whole priority, victims included). A job's own pauses are
    already in its step (the incast model's time), so job ``j`` sees only the others': with
    culprits ``i`` pausing a link independently, it keeps ``k_j = prod_{i != j} (1 - p_i)``
    of the time. :func:`solve_routed` then weighs each of ``j``'s entries on the link
    ``1 / k_j`` (the victim sees ``k_j`` of its capacity) and caps each of ``j``'s flows at
    its demand times the product of ``k_j`` over the links it crosses (it moves only while
    none is paused; a NIC cannot send faster afterwards to catch up).
    """
    log_keep = np.zeros(used.size)  # sum over culprits of log(1 - p_i), per used link
    own: list[np.ndarray | None] = []
    for r in busy:
        if r.pause_share > 0 and r.pause_links.size:
            at = np.searchsorted(used, r.pause_links)
            lost = np.zeros(used.size)
            lost[at] = math.log1p(-r.pause_share)
            log_keep += lost
            own.append(lost)
        else:
            own.append(None)
    out = np.empty(compact.size)
    for k in range(len(busy)):
        ids = compact[offs[k] : offs[k + 1]]
        its = own[k]
        out[offs[k] : offs[k + 1]] = np.exp(
            log_keep[ids] if its is None else log_keep[ids] - its[ids]
        )
    return out


@dataclass(eq=False)
class _State:
    """The fabric's capacities with a set of parts down."""

    parts: frozenset[Part]
    capacity_Bps: np.ndarray
    space_Bps: np.ndarray | None = None  # the routers' link space (adaptive bundles appended)


@dataclass(eq=False)
class FabricRates:
    """Per-dimension rates of jobs on one cluster fabric (see the module docstring), cached."""

    ctx: FabricContext
    layout: ClusterLayout
    seed: int = 0
    cache_size: int = 4096
    solves: int = 0
    _patterns: OrderedDict[tuple[TrafficShape, tuple[int, ...]], tuple[JobPattern, np.ndarray]] = (
        field(default_factory=OrderedDict)
    )
    _routed: OrderedDict[tuple[object, ...], RoutedJob] = field(default_factory=OrderedDict)
    _contig: dict[tuple[TrafficShape, int], Rates] = field(default_factory=dict)
    _alone: OrderedDict[tuple[object, ...], Rates] = field(default_factory=OrderedDict)
    _components: OrderedDict[tuple[object, ...], dict[str, Rates]] = field(
        default_factory=OrderedDict
    )
    _states: dict[frozenset[Part], _State] = field(default_factory=dict)
    _canon: OrderedDict[tuple[TrafficShape, int], JobPattern] = field(default_factory=OrderedDict)
    _for: OrderedDict[tuple[object, ...], tuple[RoutedJob, frozenset[Part]]] = field(
        default_factory=OrderedDict
    )
    _down: frozenset[Part] = frozenset()

    def __post_init__(self) -> None:
        g = self.ctx.topology.graph
        n_e = self.ctx.topology.n_endpoints
        # each endpoint's first link (its up link), as the fabric context takes it
        from_nic = np.flatnonzero(g.link_src < n_e)
        up = np.empty(n_e, dtype=np.int64)
        up[g.link_src[from_nic[::-1]]] = from_nic[::-1]
        self._up, self._down_link = up, up ^ 1
        self._attach = g.link_dst[up].astype(np.int64)
        # links that touch a NIC never bind (see the module docstring): left out of solves
        self._nic_link = (g.link_src < n_e) | (g.link_dst < n_e)
        healthy = frozenset[Part]()
        self._states[healthy] = _State(healthy, self.ctx.capacity_Bps)
        self._rail_only = self.ctx.topology.family == "rail-only"
        # routers whose paths do not read capacities (see _routed_for)
        self._paths_fixed = self.ctx.topology.family in ("fat-tree", "rail-only")
        self._changed: dict[Part, np.ndarray] = {}
        self._up_before: np.ndarray | None = None

    # ---------------------------------------------------------------- caches
    @staticmethod
    def _put(cache: OrderedDict, key: object, value: object, size: int) -> None:  # type: ignore[type-arg]
        cache[key] = value
        if len(cache) > size:
            cache.popitem(last=False)

    @property
    def state(self) -> frozenset[Part]:
        """The parts down now."""
        return self._down

    def pattern(self, shape: TrafficShape, nodes: tuple[int, ...]) -> JobPattern:
        """Return the job's network connections on ``nodes`` (cached)."""
        return self._pattern(shape, nodes)[0]

    def _pattern(
        self, shape: TrafficShape, nodes: tuple[int, ...]
    ) -> tuple[JobPattern, np.ndarray]:
        key = (shape, nodes)
        hit = self._patterns.get(key)
        if hit is None:
            lay = self.layout
            if lay.servers_per_domain == 1:
                # every node its own NVLink domain: the pattern is the one on nodes 0 .. k-1
                # with node i renamed nodes[i] (the same groups, the same domains crossed)
                pat = self._canonical(shape, len(nodes))
                per = lay.gpus_per_node * lay.nics_per_gpu
                where = np.asarray(nodes, dtype=np.int64)
                pat = JobPattern(
                    pat.dims,
                    pat.share,
                    where[pat.src // per] * per + pat.src % per,
                    where[pat.dst // per] * per + pat.dst % per,
                    pat.dim,
                    pat.split,
                    pat.hot,
                    pat.pause_share,
                )
            else:
                pat = job_pattern(
                    shape,
                    np.asarray(nodes),
                    lay.gpus_per_node,
                    lay.nics_per_gpu,
                    lay.servers_per_domain,
                    self._rail_only,
                )
            cross = self._attach[pat.src] != self._attach[pat.dst]
            hit = (pat, cross)
            self._put(self._patterns, key, hit, self.cache_size)
        return hit

    def _canonical(self, shape: TrafficShape, k: int) -> JobPattern:
        """Return the job's pattern on nodes ``0 .. k-1`` (cached per shape and node count)."""
        ck = (shape, k)
        hit = self._canon.get(ck)
        if hit is None:
            lay = self.layout
            hit = job_pattern(
                shape,
                np.arange(k),
                lay.gpus_per_node,
                lay.nics_per_gpu,
                lay.servers_per_domain,
                self._rail_only,
            )
            self._put(self._canon, ck, hit, self.cache_size)
        return hit

    def has_traffic(self, shape: TrafficShape, nodes: tuple[int, ...]) -> bool:
        """Whether the job sends anything on the scale-out network on ``nodes``."""
        return self.pattern(shape, nodes).n_connections > 0

    def crosses(self, shape: TrafficShape, nodes: tuple[int, ...]) -> bool:
        """Whether some connection of the job leaves its first-hop switch (it may meet others)."""
        return bool(self._pattern(shape, nodes)[1].any())

    # ---------------------------------------------------------------- routing
    def _state_of(self, parts: frozenset[Part]) -> _State:
        st = self._states.get(parts)
        if st is None:
            st = _State(parts, self._capacity_with(parts))
            if len(self._states) > 16:  # the healthy state and the last few
                for k in [k for k in self._states if k][:-8]:
                    del self._states[k]
            self._states[parts] = st
        return st

    def nodes_under(self, part: Part) -> np.ndarray:
        """Return the servers below ``part``: under the leaves it (or a switch it joins) reaches."""
        g = self.ctx.topology.graph
        links = self._part_links(part)
        ends = np.unique(np.concatenate([g.link_src[links], g.link_dst[links]]))
        leaves = ends[g.node_tier[ends] == 1]
        if not leaves.size:  # a cable between upper switches: their leaves
            upper = ends[g.node_tier[ends] >= 2]
            near = np.isin(g.link_src, upper)
            hop = g.link_dst[near]
            leaves = np.unique(hop[g.node_tier[hop] == 1])
        per = self.layout.gpus_per_node * self.layout.nics_per_gpu
        return np.unique(np.flatnonzero(np.isin(self._attach, leaves)) // per)

    def _part_links(self, part: Part) -> np.ndarray:
        g = self.ctx.topology.graph
        kind, which = part
        if kind == "switch":
            return np.flatnonzero((g.link_src == which) | (g.link_dst == which))
        return np.array([2 * which, 2 * which + 1])

    def _capacity_with(self, parts: frozenset[Part]) -> np.ndarray:
        cap = self.ctx.capacity_Bps.copy()
        planes = self.ctx.topology.planes
        for part in parts:
            cap[self._part_links(part)] *= (planes - 1.0) / planes
        return cap

    def _space(self, parts: frozenset[Part]) -> np.ndarray:
        """Return the routers' link-space capacities with ``parts`` down (bundles appended).

        Read off one probe connection routed between two first-hop switches.
        """
        st = self._state_of(parts)
        if st.space_Bps is None:
            other = np.flatnonzero(self._attach != self._attach[0])
            if not other.size:
                st.space_Bps = st.capacity_Bps
            else:
                rf = route(
                    self.ctx.topology,
                    np.array([0]),
                    other[:1],
                    self.ctx.policy,
                    st.capacity_Bps,
                    rng=np.random.default_rng(0),
                )
                st.space_Bps = np.asarray(rf.link_capacity_Bps)
        return st.space_Bps

    def _part_space_links(self, part: Part) -> np.ndarray:
        """Link-space ids whose capacity ``part`` down changes (its links, their bundles)."""
        hit = self._changed.get(part)
        if hit is None:
            hit = np.flatnonzero(self._space(frozenset()) != self._space(frozenset({part})))
            self._changed[part] = hit
        return hit

    def _relevant(self, links: np.ndarray, parts: frozenset[Part]) -> frozenset[Part]:
        """Return the parts of ``parts`` whose loss changes a capacity among ``links`` (sorted)."""
        out = []
        for p in parts if links.size else ():
            ids = self._part_space_links(p)
            pos = np.minimum(np.searchsorted(links, ids), links.size - 1)
            if (links[pos] == ids).any():
                out.append(p)
        return frozenset(out)

    def cuts_paths(self, part: Part) -> bool:
        """Whether losing ``part`` leaves paths the model does not route around.

        On a fat-tree or rail-only fabric: when some switch is left with no capacity to the
        tier above (never with several planes: the others carry it). On other families
        always: their routers' detours around a dead switch (a dragonfly+'s non-minimal
        paths when a group pair loses its global link) are not modelled.
        """
        g = self.ctx.topology.graph
        if not self._paths_fixed:
            return True
        if self.ctx.topology.planes > 1:
            return False
        tier = g.node_tier
        up = tier[g.link_dst] > tier[g.link_src]
        up &= tier[g.link_src] >= 1
        if self._up_before is None:
            self._up_before = np.bincount(
                g.link_src[up], weights=self.ctx.capacity_Bps[up], minlength=g.n_nodes
            )
        before = self._up_before
        cap = self._capacity_with(self._down | {part})
        after = np.bincount(g.link_src[up], weights=cap[up], minlength=g.n_nodes)
        alive = np.ones(g.n_nodes, dtype=bool)
        if part[0] == "switch":
            alive[part[1]] = False
        return bool(((before > 0) & (after <= 0) & alive).any())

    def fail(self, part: Part) -> None:
        """Take ``part`` down (see the module docstring)."""
        self._down = self._down | {part}

    def repair(self, part: Part) -> None:
        """Bring ``part`` back."""
        self._down = self._down - {part}

    def _route(self, pat: JobPattern, cross: np.ndarray, seed: int, st: _State) -> RoutedJob:
        """Route the job's switch-crossing connections on ``st`` (see the module docstring)."""
        ctx = self.ctx
        cap = st.capacity_Bps
        conn_cap = np.minimum(cap[self._up[pat.src]], cap[self._down_link[pat.dst]])
        n_d = len(pat.dims)
        local = np.full(n_d, np.inf)
        loc = ~cross
        np.minimum.at(local, pat.dim[loc], conn_cap[loc])  # a NIC's drain rate: cap / split
        src, dst = pat.src[cross], pat.dst[cross]
        conn_dim = pat.dim[cross]
        split = pat.split[cross]
        if not src.size:  # every connection between two NICs of one switch: no solve
            none_i, none_f = np.zeros(0, np.int64), np.zeros(0)
            return RoutedJob(
                pat.dims, none_i, np.zeros(1, np.int64), none_i, none_f, none_f, none_f,
                none_i, conn_dim, split, local, 1.0,
            )  # fmt: skip
        rf = route(
            ctx.topology,
            src,
            dst,
            ctx.policy,
            cap,
            qps=ctx.scenario.fabric.qps_per_connection,
            rng=np.random.default_rng(seed),
        )
        space = np.asarray(rf.link_capacity_Bps)
        flows = rf.flows
        indptr = np.asarray(flows.flow_link_indptr)
        indices = np.asarray(flows.flow_link_indices, dtype=np.int64)
        weights = np.asarray(flows.flow_link_weights)
        flow_conn = np.asarray(rf.flow_of_connection, dtype=np.int64)
        fraction = np.asarray(rf.flow_fraction, dtype=np.float64)
        max_weight = float(flows.max_weight)
        if st.parts:
            indptr, indices, weights, flow_conn, fraction = self._rehash_dead(
                src, dst, space, seed, cap, indptr, indices, weights, flow_conn, fraction
            )
        per_flow = np.diff(indptr)
        keep = np.ones(indices.size, dtype=bool)
        n_graph = self._nic_link.size
        graph_entry = indices < n_graph
        keep[graph_entry] = ~self._nic_link[indices[graph_entry]]
        flow_of_entry = np.repeat(np.arange(per_flow.size), per_flow)
        kept_per_flow = np.bincount(flow_of_entry[keep], minlength=per_flow.size)
        new_indptr = np.zeros(per_flow.size + 1, dtype=np.int64)
        np.cumsum(kept_per_flow, out=new_indptr[1:])
        ind = indices[keep]
        share = pat.share[conn_dim[flow_conn]]
        w = weights[keep] * share[flow_of_entry[keep]]
        demand = (conn_cap[cross] * split)[flow_conn] * fraction
        pause_links = np.zeros(0, np.int64)
        if pat.pause_share > 0 and pat.hot.size:
            # PFC pauses the links feeding a hot receiver's leaf port: each hot connection's
            # last switch-to-switch hop (a router lists a flow's links source to destination)
            last = np.flatnonzero(pat.hot[cross][flow_conn] & (kept_per_flow > 0))
            pause_links = np.unique(ind[new_indptr[last + 1] - 1])
        return RoutedJob(
            pat.dims,
            np.unique(ind),
            new_indptr,
            ind,
            w,
            demand,
            fraction,
            flow_conn,
            conn_dim,
            split,
            local,
            max_weight,
            pause_links,
            pat.pause_share if pause_links.size else 0.0,
        )

    def _rehash_dead(
        self,
        src: np.ndarray,
        dst: np.ndarray,
        space: np.ndarray,
        seed: int,
        cap: np.ndarray,
        indptr: np.ndarray,
        indices: np.ndarray,
        weights: np.ndarray,
        flow_conn: np.ndarray,
        fraction: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Move the connections whose path crosses a dead link to fresh hashes (the rest stay)."""
        ctx = self.ctx
        for attempt in range(REHASH_ATTEMPTS):
            per_flow = np.diff(indptr)
            dead_entry = space[indices] <= 0
            if not dead_entry.any():
                break
            flow_of_entry = np.repeat(np.arange(per_flow.size), per_flow)
            bad_conn = np.unique(flow_conn[flow_of_entry[dead_entry]])
            rf = route(
                ctx.topology,
                src[bad_conn],
                dst[bad_conn],
                "ecmp",
                cap,
                qps=ctx.scenario.fabric.qps_per_connection,
                rng=np.random.default_rng(_digest(seed, "rehash", attempt)),
            )
            f2 = rf.flows
            keep_flow = ~np.isin(flow_conn, bad_conn)
            keep_entry = np.repeat(keep_flow, per_flow)
            n2 = np.diff(np.asarray(f2.flow_link_indptr))
            counts = np.concatenate([per_flow[keep_flow], n2])
            indptr = np.zeros(counts.size + 1, dtype=np.int64)
            np.cumsum(counts, out=indptr[1:])
            indices = np.concatenate(
                [indices[keep_entry], np.asarray(f2.flow_link_indices, dtype=np.int64)]
            )
            weights = np.concatenate([weights[keep_entry], np.asarray(f2.flow_link_weights)])
            flow_conn = np.concatenate(
                [flow_conn[keep_flow], bad_conn[np.asarray(rf.flow_of_connection)]]
            )
            fraction = np.concatenate([fraction[keep_flow], np.asarray(rf.flow_fraction)])
        return indptr, indices, weights, flow_conn, fraction

    def _routed_on(
        self, key: object, shape: TrafficShape, nodes: tuple[int, ...], parts: frozenset[Part]
    ) -> RoutedJob:
        ck = (key, shape, nodes, parts)
        hit = self._routed.get(ck)
        if hit is None:
            pat, cross = self._pattern(shape, nodes)
            hit = self._route(pat, cross, _digest(self.seed, key), self._state_of(parts))
            self._put(self._routed, ck, hit, self.cache_size)
        return hit

    def _routed_for(
        self, key: object, shape: TrafficShape, nodes: tuple[int, ...], parts: frozenset[Part]
    ) -> tuple[RoutedJob, frozenset[Part]]:
        """Return the job's routes with ``parts`` down, and the parts among them its links meet.

        Routed once on the healthy fabric; a failure that changes none of its links' capacities
        leaves them as they are. On a fat-tree or rail-only fabric a path does not depend on
        capacities (hashes, destinations, adaptive bundles), so the healthy routes stand
        unless one crosses a dead link; elsewhere, or then, the job is routed again with every
        part down (and its results are keyed by all of them).
        """
        ck = (key, shape, nodes, parts)
        hit = self._for.get(ck)
        if hit is not None:
            return hit
        base = self._routed_on(key, shape, nodes, frozenset())
        if not parts or not base.n_conns:
            hit = base, frozenset()
        else:
            rel = self._relevant(base.links, parts)
            if not rel or (self._paths_fixed and (self._space(rel)[base.indices] > 0).all()):
                hit = base, rel
            else:  # routed again with every part down (a moved flow must avoid them all)
                hit = self._routed_on(key, shape, nodes, parts), parts
        self._put(self._for, ck, hit, self.cache_size)
        return hit

    # ---------------------------------------------------------------- solving
    def _solve(self, routed: list[RoutedJob], parts: frozenset[Part]) -> list[Rates]:
        """Each job's per-dimension rates, all solved together with ``parts`` down."""
        busy = any(r.n_conns for r in routed)
        out, solved = solve_routed(routed, self._space(parts) if busy else np.zeros(0))
        self.solves += solved
        return out

    def routed(self, job: str, shape: TrafficShape, nodes: tuple[int, ...]) -> RoutedJob:
        """Return the job's switch-crossing connections routed on the healthy fabric (cached)."""
        return self._routed_on(job, shape, nodes, frozenset())

    def space_Bps(self) -> np.ndarray:
        """Return the routers' link-space capacities, healthy fabric (bundles appended)."""
        return self._space(frozenset())

    def contiguous(self, shape: TrafficShape, k: int) -> Rates:
        """Per-dimension rates of the job alone on nodes ``0 .. k-1`` of the healthy fabric."""
        ck = (shape, k)
        hit = self._contig.get(ck)
        if hit is None:
            nodes = tuple(range(k))
            healthy = frozenset[Part]()
            routed = self._routed_on(("contiguous", k), shape, nodes, healthy)
            hit = self._solve([routed], healthy)[0]
            self._contig[ck] = hit
        return hit

    def alone(self, job: str, shape: TrafficShape, nodes: tuple[int, ...]) -> Rates:
        """Per-dimension rates of job ``job`` alone on its nodes, on the fabric as it is now."""
        routed, rel = self._routed_for(job, shape, nodes, self._down)
        ck = (job, shape, nodes, rel)
        hit = self._alone.get(ck)
        if hit is None:
            hit = self._solve([routed], self._down)[0]
            self._put(self._alone, ck, hit, self.cache_size)
        return hit

    def components(
        self, jobs: Mapping[str, tuple[TrafficShape, tuple[int, ...]]]
    ) -> list[list[str]]:
        """Group the crossing jobs by the links they share (each group solved on its own)."""
        return self._components_of(
            sorted(j for j, (s, n) in jobs.items() if self.crosses(s, n)), jobs
        )

    def _components_of(
        self, ids: list[str], jobs: Mapping[str, tuple[TrafficShape, tuple[int, ...]]]
    ) -> list[list[str]]:
        if not ids:
            return []
        routed = [self._routed_for(j, *jobs[j], self._down)[0] for j in ids]
        sizes = np.array([r.links.size for r in routed])
        job_of = np.repeat(np.arange(len(ids)), sizes)
        _, link_of = np.unique(np.concatenate([r.links for r in routed]), return_inverse=True)
        label = np.arange(len(ids))
        n_links = int(link_of.max()) + 1 if link_of.size else 0
        while True:
            per_link = np.full(n_links, len(ids))
            np.minimum.at(per_link, link_of, label[job_of])
            new = label.copy()
            np.minimum.at(new, job_of, per_link[link_of])
            new = new[new]  # jump to the label's own label: fewer rounds on long chains
            if np.array_equal(new, label):
                break
            label = new
        groups: dict[int, list[str]] = {}
        for j, lab in zip(ids, label.tolist(), strict=True):
            groups.setdefault(lab, []).append(j)
        return list(groups.values())

    def shared(self, jobs: Mapping[str, tuple[TrafficShape, tuple[int, ...]]]) -> dict[str, Rates]:
        """Per-dimension rates of every job with all of ``jobs`` running (id -> rates).

        Jobs that do not leave their first-hop switches run at their caps (no solve); the
        others are solved per component of shared links, each cached.
        """
        out: dict[str, Rates] = {}
        crossing = []
        for j, (s, n) in jobs.items():
            if self.crosses(s, n):
                crossing.append(j)
            else:
                out[j] = self.alone(j, s, n)
        for group in self._components_of(sorted(crossing), jobs):
            if len(group) == 1:
                out[group[0]] = self.alone(group[0], *jobs[group[0]])
                continue
            both = [self._routed_for(j, *jobs[j], self._down) for j in group]
            rel = frozenset().union(*(r for _, r in both))
            ck = (frozenset((j, jobs[j][1]) for j in group), rel)
            hit = self._components.get(ck)
            if hit is None:
                routed = [r for r, _ in both]
                hit = dict(zip(group, self._solve(routed, self._down), strict=True))
                self._put(self._components, ck, hit, self.cache_size)
            else:
                self._components.move_to_end(ck)
            out.update(hit)
        return out

    def full_solve(
        self, jobs: Mapping[str, tuple[TrafficShape, tuple[int, ...]]]
    ) -> dict[str, Rates]:
        """Solve every job of ``jobs`` at once, no component split (the tests' reference)."""
        ids = sorted(jobs)
        routed = [self._routed_for(j, *jobs[j], self._down)[0] for j in ids]
        return dict(zip(ids, self._solve(routed, self._down), strict=True))
