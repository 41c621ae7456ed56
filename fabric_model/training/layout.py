"""Where each parallel dimension's ranks sit, and its collectives on the real fabric.

Ranks are numbered in one of two orders (``parallel.order``), innermost first: tensor
parallel (``tp``), context parallel (``cp``), expert parallel (``ep``), then the pipeline
(``pp``) and the rest of data parallelism (``edp = dp / ep``) in either order::

    tp-cp-ep-dp-pp:  rank = tp_r + tp (cp_r + cp (ep_r + ep (edp_r + edp pp_r)))
    tp-cp-ep-pp-dp:  rank = tp_r + tp (cp_r + cp (ep_r + ep (pp_r + pp edp_r)))

The first, pipeline outermost, is Megatron-Core's default (``initialize_model_parallel(...,
order="tp-cp-ep-dp-pp")``, ``megatron/core/parallel_state.py``, core_v0.15.0) and
torchtitan's device mesh (``["pp", "dp_replicate", "dp_shard", "cp", "tp"]`` outermost
first, ``torchtitan/distributed/parallel_dims.py``): a stage's data-parallel ring runs over
neighbouring nodes and the pipeline's sends cross the fabric. The second, data parallelism
outermost, is Megatron-LM's ``--use-tp-pp-dp-mapping`` (``megatron/training/initialize.py``)
and Llama 3's ``[TP, CP, PP, DP]`` (arXiv 2407.21783, section 3.3.2: data parallelism
outermost because it tolerates latency): the pipeline's sends stay near and the
data-parallel rings span the fabric. Either way TP fills the NVLink domain first, and the
gradients of non-expert weights are reduced across ``cp``, ``ep`` and ``edp``.

The routed experts may run on a grid of their own (:meth:`Layout.expert_grid`): Megatron-
Core's MoE parallel folding (``parallel_state.py``, the expert ``RankGenerator``, built with
the same order; Liu et al., arXiv 2504.14960) regroups the ``tp x cp x dp`` GPUs of each
pipeline stage as expert tensor parallel (``etp``, innermost), expert parallel (``ep``) and
expert data parallel (``edp = tp cp dp / (etp ep)``).

A :class:`GroupContext` is a :class:`~fabric_model.collectives.FabricContext` for one such
communicator: its ranks are group 0's GPUs, its "domain" is the group's members that share
one NVLink domain, and every pattern it solves is replicated over the dimension's other
groups, which run the same collective at the same time and share the fabric's links. The
collective algorithms (ring, tree, NVLS, SHARP, all-to-all) run on it unchanged, so the
topology, routing, oversubscription, placement and degraded links of the scenario shape every
dimension's time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from fabric_model._fastpaths import shortcuts
from fabric_model.collectives.context import FabricContext, PatternResult
from fabric_model.scenario import Scenario

__all__ = ["COORDS", "DIMENSIONS", "MAX_REPLICATED_CONNECTIONS", "GroupContext", "Layout"]

#: The coordinates of a rank, innermost first, in each rank order (``parallel.order``).
COORDS: dict[str, tuple[str, ...]] = {
    "tp-cp-ep-dp-pp": ("tp", "cp", "ep", "edp", "pp"),
    "tp-cp-ep-pp-dp": ("tp", "cp", "ep", "pp", "edp"),
}
#: Communicators: the coordinates that vary inside one group.
DIMENSIONS: dict[str, tuple[str, ...]] = {
    "tp": ("tp",),
    "cp": ("cp",),
    "ep": ("ep",),
    "pp": ("pp",),
    "dp": ("cp", "ep", "edp"),  # gradients of non-expert weights (data parallel with cp)
    "edp": ("cp", "edp"),  # gradients of expert weights
}
#: A replicated pattern is solved over at most this many connections: beyond it, over the
#: groups nearest group 0 (the result says how many of the concurrent groups were solved).
MAX_REPLICATED_CONNECTIONS = 300_000


@dataclass(frozen=True)
class Layout:
    """Degrees of each coordinate (``tp x cp x ep x pp x edp`` GPUs) and their rank order.

    >>> lay = Layout(tp=2, cp=1, ep=1, pp=2, edp=4)  # 16 GPUs, pipeline outermost
    >>> lay.members("dp").tolist(), lay.members("pp").tolist()
    ([0, 2, 4, 6], [0, 8])
    >>> lay = Layout(tp=2, cp=1, ep=1, pp=2, edp=4, order="tp-cp-ep-pp-dp")
    >>> lay.members("dp").tolist(), lay.members("pp").tolist()
    ([0, 4, 8, 12], [0, 2])
    """

    tp: int
    cp: int
    ep: int
    pp: int
    edp: int
    #: ``parallel.order`` resolved (:data:`COORDS`); Megatron-Core's default unless given
    order: str = "tp-cp-ep-dp-pp"

    def __post_init__(self) -> None:
        if self.order not in COORDS:
            raise ValueError(f"rank order {self.order!r} is not one of {', '.join(COORDS)}")

    @classmethod
    def expert_grid(
        cls, etp: int, ep: int, pp: int, stage_gpus: int, order: str = "tp-cp-ep-dp-pp"
    ) -> Layout:
        """Return the expert grid ``etp x ep x edp`` of pipeline stages of ``stage_gpus``.

        As Megatron-Core lays it out: its expert ``RankGenerator`` takes the attention's
        ``order`` with ``tp = etp``, ``cp = 1``, ``dp = edp`` (``edp = stage_gpus / (etp
        ep)``), so expert TP sits on consecutive ranks, EP on the next (``etp x ep``
        consecutive ranks), then the expert data-parallel groups and the pipeline in
        ``order``. Pipeline outermost, a stage's GPUs are consecutive and the expert grid
        covers the attention's; data parallelism outermost, it does only when ``etp x ep =
        tp x cp`` (``parallel_state.py`` asserts equal data-parallel sizes of the attention
        and the experts then: :func:`~fabric_model.training.plan.resolve_plan` refuses the
        rest).

        >>> g = Layout.expert_grid(etp=1, ep=8, pp=4, stage_gpus=16)  # Mixtral TP2 DP8, ETP1
        >>> g.members("ep").tolist(), g.size("edp")
        ([0, 1, 2, 3, 4, 5, 6, 7], 2)
        """
        return cls(tp=etp, cp=1, ep=ep, pp=pp, edp=max(1, stage_gpus // (etp * ep)), order=order)

    @property
    def coords(self) -> tuple[str, ...]:
        """The coordinates of a rank, innermost first (:data:`COORDS` of :attr:`order`)."""
        return COORDS[self.order]

    @property
    def n_gpus(self) -> int:
        """GPUs the layout covers."""
        return self.tp * self.cp * self.ep * self.pp * self.edp

    def _stride(self, coord: str) -> int:
        s = 1
        for c in self.coords:
            if c == coord:
                return s
            s *= getattr(self, c)
        raise KeyError(coord)

    def _span(self, coords: tuple[str, ...]) -> np.ndarray:
        """Ranks reached by varying ``coords`` from rank 0 (group order: inner fastest)."""
        ranks = np.zeros(1, dtype=np.int64)
        for c in coords:
            steps = np.arange(getattr(self, c), dtype=np.int64) * self._stride(c)
            ranks = (ranks[None, :] + steps[:, None]).ravel()
        return ranks

    def members(self, dim: str) -> np.ndarray:
        """Ranks of group 0 of communicator ``dim``, in group-rank order."""
        return self._span(DIMENSIONS[dim])

    def offsets(self, dim: str) -> np.ndarray:
        """First rank of every group of ``dim`` (group ``g`` = members + offsets[g])."""
        rest = tuple(c for c in self.coords if c not in DIMENSIONS[dim])
        return np.sort(self._span(rest))

    def size(self, dim: str) -> int:
        """Ranks in one group of ``dim``."""
        return math.prod(getattr(self, c) for c in DIMENSIONS[dim])


#: Below this many endpoints :meth:`GroupContext._physical` runs its NumPy expression (no
#: compiler loaded for a small fabric: the command line's default ``step``); above, the
#: kernel, equal to it (``tests/test_speed_paths.py`` sets this to compare the two).
PHYSICAL_KERNEL_MIN_ENTRIES = 65_536


def _readonly_int64(values: np.ndarray) -> np.ndarray:
    """``values`` as a C-contiguous int64 array the kernels take read-only (no copy if it is)."""
    out = np.ascontiguousarray(values, dtype=np.int64)
    if out.flags.writeable:
        out = out.view()
        out.flags.writeable = False
    return out


def _slowest_group(members: np.ndarray, offsets: np.ndarray, dom: int) -> tuple[int, int]:
    """Pick the group whose layout over NVLink domains is the slowest; count the stragglers.

    Every group of a dimension runs the same collective at the same time and a synchronous
    step waits for the slowest. A group that spans more domains than its size needs (it
    straddles a domain boundary) sends over the scale-out NICs what a group inside one
    domain keeps on NVLink; among those, the one with the fewest GPUs in one of its domains
    puts the most traffic on each of those GPUs' NICs. Returns that group's index (0 when no
    group straddles: group 0 is then as fast as any) and how many groups straddle.
    """
    # ``FastPaths.slowest_group``; off, every group is laid out
    if offsets.size > 1 and not np.any(offsets % dom) and shortcuts().slowest_group:
        # every group is group 0 moved by whole domains: all straddle alike, or none does
        _, straddles = _slowest_group(members, offsets[:1], dom)
        return 0, int(offsets.size) if straddles else 0
    k = members.size
    need = -(-k // dom)
    doms = (members[None, :] + offsets[:, None]) // dom
    doms.sort(axis=1)
    spans = 1 + (np.diff(doms, axis=1) != 0).sum(axis=1)
    straddle = spans > need
    n_straddle = int(straddle.sum())
    if not n_straddle:
        return 0, 0
    # fewest members in one domain, per straddling group (smaller = more per-NIC traffic)
    rows = np.flatnonzero(straddle)
    sub = doms[rows]  # each row sorted: its runs of equal domains, their shortest length
    breaks = np.ones((rows.size, k + 1), dtype=bool)
    breaks[:, 1:k] = np.diff(sub, axis=1) != 0
    r, pos = np.nonzero(breaks)
    lengths, same_row = np.diff(pos), r[1:] == r[:-1]
    minority = np.full(rows.size, k, dtype=np.int64)
    np.minimum.at(minority, r[:-1][same_row], lengths[same_row])
    score = spans[rows] * (k + 2) - minority
    return int(rows[np.argmax(score)]), n_straddle


@dataclass(frozen=True, eq=False)
class GroupContext(FabricContext):
    """The fabric as one communicator of a parallel dimension sees it (see module docstring).

    Endpoint ids handed to and returned by the algorithms are *logical*: ``gpu x nics +
    nic`` with ``gpu`` a rank of group 0 before placement; :meth:`solve` shifts them to every
    concurrent group and applies the scenario's placement (scattered domains) before routing.
    """

    members: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)
    group_offsets: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64), repr=False)
    cluster_domain_order: np.ndarray = field(
        default_factory=lambda: np.zeros(0, np.int64), repr=False
    )

    @classmethod
    def for_dimension(
        cls, base: FabricContext, layout: Layout, dim: str, scenario: Scenario | None = None
    ) -> GroupContext:
        """Return communicator ``dim``'s context on ``base``'s (whole-cluster) fabric.

        ``scenario`` (default ``base``'s) supplies what the fabric does not fix, such as the
        MoE routing skew, when ``base`` is shared between scenarios of one fabric.
        """
        members, offsets = layout.members(dim), layout.offsets(dim)
        worst, _ = _slowest_group(
            members, offsets, (scenario or base.scenario).cluster.nvlink_domain
        )
        n_total = layout.n_gpus
        return cls(
            scenario or base.scenario,
            base.topology,
            base.hardware,
            base.policy,
            base.capacity_Bps,
            base.constants,
            members=members + offsets[worst],
            group_offsets=np.sort((offsets - offsets[worst]) % n_total),
            cluster_domain_order=base.domain_order,
        )

    @cached_property
    def straddling_groups(self) -> int:
        """Groups of this dimension whose GPUs span more NVLink domains than they fill.

        A group of ``k`` GPUs needs ``ceil(k / D)`` domains of ``D`` GPUs; with degrees that do
        not tile the domain (TP16 or EP64 on 72-GPU NVL72 racks) some groups cross a rack
        boundary and send part of their traffic over the scale-out NICs.
        """
        return _slowest_group(
            self.members, self.group_offsets, self.scenario.cluster.nvlink_domain
        )[1]

    # shape ------------------------------------------------------------------------------
    @property
    def n_ranks(self) -> int:
        """Ranks in the communicator."""
        return int(self.members.size)

    @cached_property
    def _per_domain(self) -> int:
        """Members sharing one NVLink domain; 1 when uneven (all traffic on the network)."""
        dom = self.scenario.cluster.nvlink_domain
        counts = np.unique(self.members // dom, return_counts=True)[1]
        if counts.size and np.all(counts == counts[0]):
            # members of one domain must be consecutive in group order for the algorithms
            blocks = (self.members // dom).reshape(-1, int(counts[0]))
            if np.all(blocks == blocks[:, :1]):
                return int(counts[0])
        return 1

    @property
    def domain(self) -> int:
        """Members of the communicator in one NVLink domain."""
        return self._per_domain

    @property
    def n_domains(self) -> int:
        """NVLink domains the communicator spans."""
        return self.n_ranks // self.domain

    @property
    def concurrent_groups(self) -> int:
        """Groups of this dimension that run the same collective at the same time."""
        return int(self.group_offsets.size)

    # endpoints --------------------------------------------------------------------------
    def endpoint(self, logical_domain: np.ndarray, slot: np.ndarray) -> np.ndarray:
        """Logical NIC endpoint of NIC ``slot`` of a logical domain of the group."""
        idx = (np.asarray(logical_domain) % self.n_domains) * self.domain + np.asarray(
            slot
        ) // self.nics
        return self.members[idx] * self.nics + np.asarray(slot) % self.nics

    def rank_domain(self, rank: np.ndarray) -> np.ndarray:
        """Logical NVLink domain of each group rank."""
        return np.asarray(rank) // self.domain

    def rank_endpoint(self, rank: np.ndarray, nic: np.ndarray | int) -> np.ndarray:
        """Logical NIC endpoint of NIC ``nic`` of each group rank."""
        return self.members[np.asarray(rank)] * self.nics + np.asarray(nic)

    def endpoints(self) -> np.ndarray:
        """Every logical NIC endpoint of the communicator."""
        return (self.members[:, None] * self.nics + np.arange(self.nics)).ravel()

    @cached_property
    def _gpu_place(self) -> np.ndarray:
        """The physical GPU of each cluster GPU: its NVLink domain placed by the domain order."""
        gpu = np.arange(self.scenario.cluster.n_gpus, dtype=np.int64)
        dom = self.scenario.cluster.nvlink_domain
        return _readonly_int64(self.cluster_domain_order[gpu // dom] * dom + gpu % dom)

    def _physical(self, logical: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """Physical endpoints of ``logical`` shifted to each group of ``offsets`` (row-major)."""
        nics = self.nics
        n_total = self.scenario.cluster.n_gpus
        entries = offsets.size * np.size(logical)
        if entries >= PHYSICAL_KERNEL_MIN_ENTRIES:
            # one pass (training/_kernels.py), equal to the expression below
            from fabric_model.training._kernels import physical_endpoints

            src = _readonly_int64(logical)
            out = np.empty(offsets.size * src.size, dtype=np.int64)
            physical_endpoints(src, _readonly_int64(offsets), self._gpu_place, nics, out)
            return out
        gpu = ((np.asarray(logical, np.int64) // nics)[None, :] + offsets[:, None]) % n_total
        dom = self.scenario.cluster.nvlink_domain
        phys_gpu = self.cluster_domain_order[gpu // dom] * dom + gpu % dom
        return (phys_gpu * nics + np.asarray(logical, np.int64) % nics).ravel()

    def replicated_groups(self, n_connections: int) -> int:
        """Concurrent groups a pattern of ``n_connections`` per group is solved over."""
        cap = max(1, MAX_REPLICATED_CONNECTIONS // max(1, n_connections))
        return int(min(self.concurrent_groups, cap))

    # solving ----------------------------------------------------------------------------
    def solve(
        self, src: np.ndarray, dst: np.ndarray, demand: np.ndarray | None = None
    ) -> PatternResult:
        """Solve the pattern in every concurrent group at once (see the class docstring).

        Members of one physical NVLink domain that the group treats as separate (its
        members are spread unevenly over domains) talk over NVLink: those connections
        leave the network pattern (a NIC paired with itself stays: SHARP's round trip
        through the switch). On rail-only fabrics a connection first moves over
        NVLink to the GPU on the destination's rail (PXN), as rails are not connected
        (or, from a partial last domain without that rail, over NVLink at the far end).
        """
        src = np.asarray(src, np.int64)
        groups = self.replicated_groups(src.size)
        offsets = self.group_offsets[:groups]
        rep_demand = None if demand is None else np.tile(demand, groups)
        ps, pd_ = self._physical(src, offsets), self._physical(dst, offsets)
        dom = self.scenario.cluster.nvlink_domain * self.nics
        # a NIC to itself is a round trip through its switch (SHARP's shard up and result
        # down), not an NVLink transfer
        net = (ps // dom != pd_ // dom) | (ps == pd_)
        if not net.all():
            if not net.any():
                return PatternResult(np.array([np.inf]), np.inf, "nvlink", 0.0, 0)
            ps, pd_ = ps[net], pd_[net]
            rep_demand = None if rep_demand is None else rep_demand[net]
        if self.topology.family == "rail-only":
            moved = ps // dom * dom + pd_ % dom
            # the last domain may be partial: without a GPU on the destination's rail there,
            # send on the source's rail and forward over NVLink at the destination instead
            short = moved >= self.topology.n_endpoints
            pd_ = np.where(short, pd_ // dom * dom + ps % dom, pd_)
            ps = np.where(short, ps, moved)
        return super().solve(ps, pd_, rep_demand)

    def solve_all_to_all(
        self,
        components: list[np.ndarray],
        dst_weight: np.ndarray | None = None,
        *,
        full: bool = False,
    ) -> tuple[PatternResult, int]:
        """Flow-class all-to-all of group 0 alone (a group this large fills the fabric)."""
        zero = self.group_offsets[:1]
        phys = [self._physical(c, zero) for c in components]
        weight = None
        if dst_weight is not None:
            weight = np.zeros(self.topology.n_endpoints)
            ep = self.endpoints()
            weight[self._physical(ep, zero)] = dst_weight[ep]
        return super().solve_all_to_all(phys, weight, full=full)
