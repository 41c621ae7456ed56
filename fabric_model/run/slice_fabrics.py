"""Each OCS job's own fabric: its slice's circuits, routed and max-min solved.

A job on a slice of an OCS design (:mod:`fabric_model.run.slices`) sends only on circuits
between its own blocks: the OCS forms them over the slice (``ocs.reconfigure = job`` or
``phase``: the design's ``ocs.circuits`` pattern over the slice's blocks in slice order, a
torus twisted where its count allows) or, with ``never``, the installed circuits with both
ends in the slice. So the slice is a fabric of its own: an OCS topology of the slice's blocks
(:func:`fabric_model.topology.ocs.build_ocs` with those circuits) on which the job's traffic
(:mod:`fabric_model.run.traffic`) is routed (:mod:`fabric_model.routing.ocs`) and max-min
solved (:class:`fabric_model.run.interference.FabricRates`). Slices with the same circuits
share one fabric: reconfigured slices of ``n`` blocks differ only in which blocks they are
(and, for ``job`` circuits, in the plan the circuits follow); installed ones by their blocks.

**Reference.** The step a job's slowdowns are relative to is the same job on a non-blocking
fabric of the same NICs (a fat-tree at 1:1 with adaptive routing: every connection runs at
its NIC's share, the property ``tests/test_cluster_traffic.py`` holds), so a slice with too
few circuits between its blocks shows as a placement slowdown.

**No neighbours.** Two slices share no block, so no fiber and no circuit: :meth:`joint`
solves running jobs on the cluster's link space (each slice's fibers mapped to the cluster's
fibers of its blocks, its circuit bundles to the cluster's block pairs), the interference
solve of :mod:`fabric_model.run.interference` on the OCS, and its rates are each job's alone.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from fabric_model.collectives.context import FabricContext
from fabric_model.routing.ocs import trunk_table
from fabric_model.run.interference import FabricRates, Rates, RoutedJob, solve_routed
from fabric_model.run.placement import ClusterLayout
from fabric_model.run.slices import SliceGrid
from fabric_model.run.traffic import TrafficShape
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.topology.ocs import OCS_DATA, Circuits, block_hops, twisted_dims

__all__ = ["SWITCHES_PER_STEP", "SliceFabrics", "reference_scenario"]

#: OCS reconfigurations per step with ``ocs.reconfigure = phase`` (``assets/ocs.yaml``).
SWITCHES_PER_STEP = int(OCS_DATA["reconfiguration"]["switches_per_step"]["value"])
#: Slice fabrics kept per cluster (each a small OCS topology and its routes).
_KEEP = 256


def reference_scenario(scenario: Scenario) -> Scenario:
    """Return the non-blocking fabric a job's step is timed on: a 1:1 adaptive fat-tree.

    The same GPUs, NICs and link rate as ``scenario`` (module docstring, *Reference*).
    """
    return apply_overrides(
        scenario,
        {
            "fabric.topology": "fat-tree",
            "fabric.oversubscription": 1,
            "fabric.routing": "adaptive",
            "fabric.tiers": "auto",
        },
    )


def _flat_layout(like: ClusterLayout, n_nodes: int) -> ClusterLayout:
    """Return a layout of ``n_nodes`` servers with ``like``'s servers, NICs, domains."""
    spd = like.servers_per_domain
    leaf_of = np.arange(n_nodes, dtype=np.int64) // spd
    return ClusterLayout(
        n_nodes,
        like.gpus_per_node,
        like.nics_per_gpu,
        spd,
        leaf_of,
        np.zeros(int(leaf_of.max()) + 1 if n_nodes else 0, dtype=np.int64),
        leaf_of.copy(),
        spd,
        0,
        0,
        0,
    )


@dataclass(eq=False)
class SliceFabrics:
    """The slices' fabrics of one OCS cluster and the non-blocking reference (cached)."""

    scenario: Scenario
    layout: ClusterLayout
    grid: SliceGrid
    reference: FabricRates
    _fabrics: OrderedDict[tuple[object, ...], FabricRates] = field(default_factory=OrderedDict)
    _evicted_solves: int = 0

    @classmethod
    def build(cls, scenario: Scenario, layout: ClusterLayout) -> SliceFabrics:
        """Build the reference fabric for ``scenario``'s OCS cluster (its slices on demand)."""
        if layout.ocs is None:
            raise ValueError("SliceFabrics: an OCS design's layout")
        ref = reference_scenario(scenario)
        ctx = FabricContext.from_scenario(ref)
        ref_rates = FabricRates(ctx, _flat_layout(layout, layout.n_nodes))
        return cls(scenario, layout, layout.ocs, ref_rates)

    @property
    def solves(self) -> int:
        """Max-min solves the slices' fabrics and the reference have run (since built)."""
        kept = sum(fr.solves for fr in self._fabrics.values())
        return self.reference.solves + self._evicted_solves + kept

    # ------------------------------------------------------------------ slices
    def pattern_of(self, n_blocks: int, circuits: str | None = None) -> str:
        """Return the circuits the OCS forms over ``n_blocks`` (twisted where it can be)."""
        c = circuits or self.grid.circuits
        if c == "twisted-torus" and twisted_dims(n_blocks) is None:
            return "torus"
        return c

    def _key(
        self, blocks: tuple[int, ...], shape: TrafficShape, circuits: str | None
    ) -> tuple[object, ...]:
        n = len(blocks)
        if not self.grid.reconfigurable and circuits is None:
            return ("installed", blocks)
        pattern = self.pattern_of(n, circuits)
        lay = shape.layout
        plan = (lay.tp, lay.cp, lay.ep, lay.pp) if pattern == "job" else ()
        return (pattern, n, plan)

    def fabric(
        self, blocks: tuple[int, ...], shape: TrafficShape, circuits: str | None = None
    ) -> FabricRates:
        """Return the slice's own fabric (module docstring); ``circuits`` forces a pattern.

        ``blocks`` in slice order; the job's ranks sit on the slice's first servers.
        """
        key = self._key(blocks, shape, circuits)
        hit = self._fabrics.get(key)
        if hit is not None:
            self._fabrics.move_to_end(key)
            return hit
        g = self.grid
        n = len(blocks)
        pattern = "uniform" if key[0] == "installed" else str(key[0])
        lay = shape.layout
        plan = (lay.tp, lay.cp, lay.ep, lay.pp) if pattern == "job" else (1, 1, 1, 1)
        s = apply_overrides(
            self.scenario,
            {
                "cluster.n_gpus": n * g.block_gpus,
                "ocs.block_gpus": g.block_gpus,
                "ocs.spare_blocks": 0,
                "ocs.failed_blocks": 0,
                "ocs.circuits": pattern,
                "ocs.reconfigure": "job",
                "parallel.dp": "auto",
                "parallel.tp": plan[0],
                "parallel.cp": plan[1],
                "parallel.ep": plan[2],
                "parallel.pp": plan[3],
            },
        )
        ctx = FabricContext.from_scenario(s)
        if key[0] == "installed":
            ctx = self._installed(ctx, blocks)
        hit = FabricRates(ctx, _flat_layout(self.layout, n * g.nodes_per_block))
        self._fabrics[key] = hit
        if len(self._fabrics) > _KEEP:
            self._evicted_solves += self._fabrics.popitem(last=False)[1].solves
        return hit

    def _installed(self, ctx: FabricContext, blocks: tuple[int, ...]) -> FabricContext:
        """``ctx`` with its circuits replaced by the installed ones among ``blocks``."""
        st = self.grid.static
        if st is None:
            raise ValueError("installed circuits exist only with ocs.reconfigure = never")
        pos = np.full(self.grid.n_built, -1, dtype=np.int64)
        pos[np.asarray(blocks, dtype=np.int64)] = np.arange(len(blocks))
        keep = (pos[st.a] >= 0) & (pos[st.b] >= 0)
        a, b, slot = pos[st.a[keep]], pos[st.b[keep]], st.slot[keep]
        n = len(blocks)
        alive = np.ones(n, dtype=bool)
        hops = block_hops(n, a, b, alive) if n > 1 else np.zeros((1, 1), np.int32)
        circuits = Circuits(a, b, slot, hops, np.arange(n, dtype=np.int64), np.zeros(0, np.int64))
        topo = ctx.topology
        params = {**topo.params, "circuits": "installed", "n_circuits": int(a.size)}
        params["circuits_data"] = circuits
        topo = dataclasses.replace(topo, params=params)
        return dataclasses.replace(ctx, topology=topo)

    def circuits(self, blocks: tuple[int, ...], shape: TrafficShape) -> Circuits:
        """Return the slice's circuits (slice-local block ids: ``i`` is ``blocks[i]``)."""
        data: Circuits = self.fabric(blocks, shape).ctx.topology.params["circuits_data"]
        return data

    def _nodes(self, k: int) -> tuple[int, ...]:
        return tuple(range(k))

    def rates(
        self, shape: TrafficShape, k: int, blocks: tuple[int, ...], circuits: str | None = None
    ) -> Rates:
        """Per-dimension rates of a job of ``k`` servers alone on its slice's circuits."""
        return self.fabric(blocks, shape, circuits).alone("slice", shape, self._nodes(k))

    def contiguous(self, shape: TrafficShape, k: int) -> Rates:
        """Per-dimension rates of the job on the non-blocking reference's first ``k`` servers."""
        return self.reference.contiguous(shape, k)

    def phase(
        self, shape: TrafficShape, k: int, blocks: tuple[int, ...]
    ) -> tuple[Rates, float, bool]:
        """Return rates, reconfiguration s per step and hidden reduction under ``phase``.

        The forward and backward on ``ocs.circuits``, the data-parallel reduction on ring
        circuits; when both cross blocks each step switches twice (``assets/ocs.yaml``) and
        the reduction cannot overlap the backward, as :func:`fabric_model.training.step`
        times it; when only one does, its circuits stay up.
        """
        own = self.rates(shape, k, blocks)
        if "dp" not in own:
            return own, 0.0, True
        ring = self.rates(shape, k, blocks, "ring")
        if len(own) == 1:  # only the reduction leaves the blocks: the ring stays up
            return ring, 0.0, True
        return {**own, "dp": ring["dp"]}, SWITCHES_PER_STEP * self.grid.reconfig_s, False

    # ------------------------------------------------------------------ the interference solve
    def on_cluster(self, shape: TrafficShape, k: int, blocks: tuple[int, ...]) -> RoutedJob:
        """Return the job's routed connections, its links named in the cluster's link space.

        Fiber ``2 (i U + s) + d`` of slice block ``i`` is the cluster's fiber ``2 (blocks[i]
        U + s) + d``; the bundle of the slice's circuits ``i -> j`` is the cluster's block pair
        ``(blocks[i], blocks[j])``, numbered after the cluster's fibers.
        """
        fr = self.fabric(blocks, shape)
        routed = fr.routed("slice", shape, self._nodes(k))
        g = self.grid
        U = g.uplinks
        where = np.asarray(blocks, dtype=np.int64)
        n_graph = fr.ctx.topology.graph.n_links
        n_fibers = 2 * g.n_built * U
        table = trunk_table(fr.ctx.topology)
        t_src = np.repeat(np.arange(table.n_blocks), np.diff(table.indptr))
        idx = routed.indices
        out = np.empty_like(idx)
        fiber = idx < n_graph
        cable, d = idx[fiber] // 2, idx[fiber] % 2
        out[fiber] = 2 * (where[cable // U] * U + cable % U) + d
        t = idx[~fiber] - n_graph
        out[~fiber] = n_fibers + where[t_src[t]] * g.n_built + where[table.target[t]]
        return dataclasses.replace(routed, indices=out, links=np.unique(out))

    def capacity_on_cluster(
        self, shape: TrafficShape, k: int, blocks: tuple[int, ...]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Return the cluster link ids of :meth:`on_cluster` and their capacities, bytes/s."""
        fr = self.fabric(blocks, shape)
        routed = fr.routed("slice", shape, self._nodes(k))
        mapped = self.on_cluster(shape, k, blocks)
        space = fr.space_Bps()
        ids, first = np.unique(mapped.indices, return_index=True)
        return ids, space[routed.indices[first]]

    def joint(
        self, jobs: Mapping[str, tuple[TrafficShape, int, tuple[int, ...]]]
    ) -> dict[str, Rates]:
        """Solve every job's rates together on the cluster's link space (module docstring)."""
        ids = sorted(jobs)
        routed = [self.on_cluster(*jobs[j]) for j in ids]
        busy = [jobs[j] for j, r in zip(ids, routed, strict=True) if r.n_conns]
        if not busy:
            return dict(zip(ids, solve_routed(routed, np.zeros(0))[0], strict=True))
        caps = [self.capacity_on_cluster(*job) for job in busy]
        size = int(max(int(i.max()) for i, _ in caps)) + 1
        space = np.zeros(size)
        for i, c in caps:
            space[i] = c
        return dict(zip(ids, solve_routed(routed, space)[0], strict=True))
