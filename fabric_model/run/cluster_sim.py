"""A shared cluster over time: a job mix, a scheduler that places it, the fabric, failures.

An event-driven simulation (submit, start, finish, failure, repair) of one cluster design:

- **Queue**: FIFO by priority then submit time, with EASY backfill (Lifka 1995; Mu'alem and
  Feitelson, IEEE TPDS 12(6), 2001): the head of the queue gets a reservation at the earliest
  time enough GPUs free up (the running jobs' predicted ends), and a later job starts now if it
  fits and either ends before that time or leaves the head's GPUs free. Run times are known
  exactly (the model's, not a user's estimate). At most :data:`BACKFILL_DEPTH` queued jobs are
  tried per pass (Slurm tries ``default_queue_depth`` = 100 at each event,
  https://slurm.schedmd.com/sched_config.html).
- **Placement**: a multi-node job takes whole free nodes by the policy
  (:mod:`fabric_model.run.placement`: ``first-fit``, ``tree``, ``block``, ``tas``); a job of at
  most one node takes GPUs of one node (first-fit: the lowest-numbered node with room, the
  others the fullest such node, Slurm's best fit).
- **Step time on the placement**: each job's step comes from the training model
  (:func:`fabric_model.training.step.training_step`) on its GPU count, model and plan, alone
  and contiguous (a fabric built for the job). Each of its parallel dimensions that leaves an
  NVLink domain on its nodes (:mod:`fabric_model.run.traffic`: data-parallel rings, pipeline
  sends, the expert all-to-all, context or tensor parallelism across domains) slows by the
  ratio of its rate on the cluster fabric contiguous to its rate on its actual nodes
  (placement) and with its neighbours (interference), from the max-min solver
  (:mod:`fabric_model.run.interference`). The compute that hid a dimension's communication
  hides as much of the slower one, so the step grows by
  ``sum_d max(0, comm_d x f_d - hidden_d) - exposed_d`` with ``hidden_d = comm_d - exposed_d``
  (:func:`step_with_factors`). A dimension inside one NVLink domain when contiguous but split
  over domains on its nodes moves its bytes from NVLink to the network (its reference rate is
  NVLink's). ``placement_slowdown`` = step on its nodes alone / step contiguous; ``slowdown``
  = step with neighbours / step contiguous; ``interference_slowdown`` = their ratio.
- **Checkpoints and failures**: failures arrive as a Poisson process at the ``reliability.*``
  rates over the bill of materials' parts (:mod:`fabric_model.run.reliability`): a GPU, its
  software, a server, a NIC or a NIC's cable and optics takes its node; a leaf switch takes its
  leaf group's nodes (every node of a rail-optimized group loses a rail); a spine or core
  switch, or an upper-tier cable or optic, takes its capacity (one plane's copy on a
  multi-plane design) until its repair: the jobs whose traffic crosses it are re-solved on
  what is left and slow down, none is interrupted (the fabric reroutes in well under the
  ~30 s NCCL's InfiniBand transport retries before failing a job: ``NCCL_IB_TIMEOUT`` 20, i.e.
  4.096 us x 2^20 = 4.3 s, times ``NCCL_IB_RETRY_CNT`` 7,
  https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html). A part whose loss
  leaves a switch no way up, or any upper part of a fabric other than a fat-tree or rail-only
  one (the detours of its routers are not modelled), interrupts instead the jobs that leave
  their switches and have nodes in its spine groups. Down nodes and
  parts return after ``reliability.repair_h``. An interrupted job loses the work since its last
  checkpoint (every Young/Daly interval ``sqrt(2 delta M)`` of training, ``M`` its own MTBF
  from its parts, or ``reliability.checkpoint_interval_s``), requeues in its place, and spends
  ``reliability.restart_s`` before training again; writing checkpoints costs ``delta`` per
  interval. The failure draws depend only on the seed, so every policy meets the same ones.
- **Preemption** (``preempt``, off by default as Slurm's ``PreemptType=preempt/none``): a job
  at the head of the queue that cannot start preempts running jobs of lower priority in
  Kueue's order (:meth:`_Sim._victims`); they are requeued as after a failure (Slurm's
  ``PreemptMode=REQUEUE``), losing the work since their last checkpoint.
- **Outputs**: utilisation (busy GPU-hours / capacity), goodput (useful / busy GPU-hours, the
  useful hours being the job's work at its contiguous speed, lost work, restarts, checkpoint
  writes and slowdowns excluded), queue wait of the jobs that started, per-job slowdowns,
  fragmentation (free GPUs while the head of the queue waits, as a share of capacity over
  time), interrupted and preempted jobs, and cost per useful GPU-hour (the cluster's TCO over
  the horizon, :func:`fabric_model.run.reliability.run_cost_usd`, / useful GPU-hours).
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fabric_model.collectives.context import FabricContext
from fabric_model.errors import FabricModelError
from fabric_model.plant.cost import BillOfMaterials, bill_of_materials
from fabric_model.run.interference import FabricRates, Part, Rates
from fabric_model.run.job_steps import (
    checkpoint_bytes_of,
    job_step,
    step_with_factor,
    step_with_factors,
)
from fabric_model.run.jobs import Job, TraceError, generate_jobs
from fabric_model.run.placement import (
    ClusterLayout,
    block_sizes,
    check_policy,
    default_policy,
    place,
    policies_for,
)
from fabric_model.run.reliability import (
    COMPONENT_CLASSES,
    DAYS_PER_YEAR,
    run_cost_usd,
    young_daly_interval_s,
)
from fabric_model.run.slice_fabrics import SliceFabrics
from fabric_model.run.slices import SLICE_RULES, slice_blocks_needed
from fabric_model.run.traffic import TrafficShape
from fabric_model.scenario import Scenario
from fabric_model.training.step import StepResult

__all__ = [
    "BACKFILL_DEPTH",
    "SUMMARY_KEYS",
    "Cluster",
    "ScheduleResult",
    "generated_jobs",
    "job_step",
    "run_schedule",
    "schedule",
    "step_with_factor",
    "step_with_factors",
]

BACKFILL_DEPTH = 100
HOURS_PER_YEAR = DAYS_PER_YEAR * 24.0
SUMMARY_KEYS = (
    "policy",
    "n_jobs",
    "days",
    "utilization",
    "goodput",
    "mean_wait_h",
    "p95_wait_h",
    "slowdown_p50",
    "slowdown_p95",
    "placement_slowdown_p50",
    "interference_slowdown_p50",
    "fragmentation",
    "shape_fragmentation",
    "interrupted_jobs",
    "preempted_jobs",
    "spare_swaps",
    "useful_gpu_hours",
    "cost_per_useful_gpu_hour_usd",
    "block_sizes",
)
_SUBMIT, _FINISH, _FAIL, _REPAIR, _REPAIR_PART, _SPARE_BACK = 0, 1, 2, 3, 4, 5


# ------------------------------------------------------------------------------ cluster


@dataclass(frozen=True, eq=False)
class Cluster:
    """One design's fabric, layout, bill and failure rates, built once for every run."""

    scenario: Scenario
    layout: ClusterLayout
    ctx: FabricContext
    bom: BillOfMaterials
    node_rate_per_h: float
    leaf_rate_per_h: float
    #: The fabric's upper switches (graph nodes: spines, cores) and upper cables (between
    #: switches), and the failure rate of all of each kind, per hour.
    upper_switches: np.ndarray
    upper_cables: np.ndarray
    spine_rate_per_h: float
    uplink_rate_per_h: float
    #: an OCS design's slice fabrics and their non-blocking reference (None elsewhere)
    slices: SliceFabrics | None = None

    @property
    def step_scenario(self) -> Scenario:
        """The scenario each job's step is timed on: its own contiguous fabric.

        The design itself for a switched fabric; for an OCS design the non-blocking reference
        (:func:`fabric_model.run.slice_fabrics.reference_scenario`), so that a slice's
        circuits show as its placement slowdown.
        """
        return self.slices.reference.ctx.scenario if self.slices is not None else self.scenario

    @property
    def upper_rate_per_h(self) -> float:
        """Failures per hour of the tiers above the leaves (switches, cables, optics)."""
        return self.spine_rate_per_h + self.uplink_rate_per_h

    @classmethod
    def build(cls, scenario: Scenario) -> Cluster:
        """Build the topology, its Slurm grouping, its bill and the failure rates per part."""
        if scenario.fabric.topology == "hybrid":
            raise FabricModelError(
                "fabric.topology = hybrid: schedule places jobs on one fabric; run each "
                "partition's preset on its own (the shared tier is not modelled here)"
            )
        layout = ClusterLayout.from_scenario(scenario)
        ctx = FabricContext.from_scenario(scenario)
        bom = bill_of_materials(scenario)
        rel = scenario.reliability
        rate = {c: float(getattr(rel, k)) for c, k in COMPONENT_CLASSES.items()}
        n_links = max(1, ctx.topology.n_links)
        optic_per_link = bom.n_transceivers / n_links
        cable_per_link = bom.n_cables / n_links
        link_rate = optic_per_link * rate["optic"] + cable_per_link * rate["cable"]
        nics_per_node = layout.gpus_per_node * layout.nics_per_gpu
        node = (
            layout.gpus_per_node * (rate["gpu"] + rate["software"])
            + rate["server"]
            + nics_per_node * (rate["nic"] + link_rate)
        )
        n_nic_links = layout.n_nodes * nics_per_node
        # an OCS design's OCS tier (the switches and the fibers into them) is not drawn:
        # reliability.switch_failures_per_year is an electrical switch's, and no rate of a
        # passive MEMS cross-connect is sourced here; its blocks' parts are (the nodes' NICs
        # and uplink optics, a pod's leaves)
        switched = layout.tiers and layout.ocs is None
        upper_links = max(0, ctx.topology.n_links - n_nic_links) if switched else 0
        g = ctx.topology.graph
        tier = g.node_tier
        upper_switches = np.flatnonzero(tier >= 2) if switched else np.zeros(0, np.int64)
        a, b = tier[g.link_src[0::2]], tier[g.link_dst[0::2]]
        upper_cables = np.flatnonzero((a >= 1) & (b >= 1)) if switched else np.zeros(0, np.int64)
        return cls(
            scenario,
            layout,
            ctx,
            bom,
            node / HOURS_PER_YEAR,
            rate["switch"] / HOURS_PER_YEAR,
            upper_switches,
            upper_cables,
            (layout.n_upper_switches * rate["switch"] / HOURS_PER_YEAR)
            if upper_switches.size
            else 0.0,
            upper_links * link_rate / HOURS_PER_YEAR if upper_cables.size else 0.0,
            SliceFabrics.build(scenario, layout) if layout.ocs is not None else None,
        )


@dataclass
class _Run:
    job: Job
    idx: int
    work_h: float  # contiguous hours of training still to do
    perf: StepResult | None
    ckpt_write_s: float = 0.0
    shape: TrafficShape | None = None
    crossing: bool = False  # its traffic leaves its first-hop switches on its nodes
    state: str = "queued"
    nodes: tuple[int, ...] = ()
    blocks: tuple[int, ...] = ()  # an OCS slice's blocks, in slice order (multi-block jobs)
    gpu_slots: list[tuple[int, int]] = field(default_factory=list)  # (node, n gpus)
    start_h: float = math.nan
    first_start_h: float = math.nan
    end_h: float = math.nan
    last_h: float = 0.0
    train_from_h: float = 0.0
    rate: float = 1.0  # contiguous work-hours per wall-hour
    interval_h: float = math.inf  # training hours between checkpoints
    since_ckpt_h: float = 0.0
    version: int = 0
    place_sd: float = 1.0
    sd: float = 1.0
    overhead: float = 1.0
    interruptions: int = 0
    preemptions: int = 0
    restart_h: float = 0.0
    sd_time: float = 0.0  # integral of slowdown over running wall time
    psd_time: float = 0.0
    run_time: float = 0.0
    useful_h: float = 0.0


@dataclass
class ScheduleResult:
    """One run's summary (the ``schedule`` JSON contract) and its jobs."""

    summary: dict[str, Any]
    jobs: list[dict[str, Any]]
    busy_gpu_hours: float
    capacity_gpu_hours: float
    status: dict[str, str]
    solves: int
    max_gpu_owners: int
    segments: list[list[Any]] = field(default_factory=list)
    #: rows (time_h, busy GPUs, queued jobs, free GPUs while the head waits, upper parts
    #: down, free GPUs while the head waits with as many free as it asks for), one after
    #: each event
    timeline: np.ndarray = field(default_factory=lambda: np.zeros((0, 6)))

    def to_dict(self) -> dict[str, Any]:
        """Return the contract's JSON object."""
        return {**self.summary, "jobs": self.jobs}


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else math.nan


def _seed_int(seed: int, *salt: str) -> int:
    h = hashlib.sha256((f"{seed}:" + ":".join(salt)).encode()).digest()
    return int.from_bytes(h[:8], "little")


def _failures(cluster: Cluster, horizon_h: float, seed: int) -> list[tuple[float, str, int]]:
    """Failure draws over the horizon: (time, class, which), from the seed alone.

    Classes: ``node`` (which node), ``leaf`` (which leaf group), ``spine`` (which of the
    upper switches, :attr:`Cluster.upper_switches`), ``uplink`` (which upper cable).
    """
    lay = cluster.layout
    rng = np.random.default_rng(_seed_int(seed, "failures"))
    rates = {
        "node": cluster.node_rate_per_h * lay.n_nodes,
        "leaf": cluster.leaf_rate_per_h * lay.n_leaf_switches,
        "spine": cluster.spine_rate_per_h,
        "uplink": cluster.uplink_rate_per_h,
    }
    total = sum(rates.values())
    if total <= 0 or horizon_h <= 0:
        return []
    n = int(rng.poisson(total * horizon_h))
    times = np.sort(rng.uniform(0.0, horizon_h, size=n))
    names = list(rates)
    p = np.array([rates[k] for k in names]) / total
    cls = rng.choice(len(names), size=n, p=p)
    count = {
        "node": lay.n_nodes,
        "leaf": max(1, lay.n_leaves),
        "spine": max(1, cluster.upper_switches.size),
        "uplink": max(1, cluster.upper_cables.size),
    }
    out = []
    for t, c in zip(times.tolist(), cls.tolist(), strict=True):
        name = names[c]
        out.append((t, name, int(rng.integers(0, count[name]))))
    return out


class _Sim:
    """The event loop of :func:`run_schedule` (one policy, one seed)."""

    def __init__(
        self,
        cluster: Cluster,
        jobs: list[Job],
        policy: str,
        days: float,
        seed: int,
        preempt: bool = False,
    ) -> None:
        self.c = cluster
        self.preempt = preempt
        self.lay = cluster.layout
        self.policy = policy
        self.horizon = days * 24.0
        self.days = days
        self.seed = seed
        self.rates = FabricRates(cluster.ctx, cluster.layout, seed=_seed_int(seed, "ecmp") % 2**32)
        self._slice_solves = cluster.slices.solves if cluster.slices is not None else 0
        gpn = self.lay.gpus_per_node
        self.gpn = gpn
        self.free_gpus = np.full(self.lay.n_nodes, gpn, dtype=np.int64)
        self.up = np.ones(self.lay.n_nodes, dtype=bool)
        self.owners = np.zeros(self.lay.n_nodes, dtype=np.int64)  # jobs per node
        self.runs = [self._prepare(i, j) for i, j in enumerate(jobs)]
        self.queue: list[tuple[tuple[int, float, int], int]] = []
        self.running: set[int] = set()
        self.events: list[tuple[float, int, int, int, int]] = []
        self.seq = 0
        self.busy = 0.0
        self.frag = 0.0
        self.shape_frag = 0.0
        self.last_t = 0.0
        self.head_blocked = False
        self.head_gpus = 0  # GPUs the waiting head of the queue asks for
        grid = self.lay.ocs
        self.spares_free = grid.spare_blocks if grid is not None and grid.reconfigurable else 0
        self.spare_swaps = 0
        self.crossing_key: tuple[object, ...] = ()
        self.state_seen: frozenset[Part] = frozenset()
        self.max_owner_gpus = 0
        #: every allocation: [job index, start_h, end_h (nan while running), (node, gpus)...]
        self.segments: list[list[Any]] = []
        #: upper parts taken down, by the index their repair event carries
        self.parts: list[Part] = []
        #: after each event: time, busy GPUs, queued jobs, free GPUs while the head waits,
        #: upper parts down, free GPUs while the head waits with as many free as it asks for
        self.timeline: list[tuple[float, int, int, int, int, int]] = []
        self._open: dict[int, int] = {}

    # -------------------------------------------------------------------- preparation
    def _prepare(self, i: int, job: Job) -> _Run:
        s = self.c.scenario
        if job.gpus > self.lay.n_gpus:
            raise TraceError(
                f"jobs line {job.line} (id {job.id})",
                "gpus",
                f"{job.gpus:,} is more than the cluster's {self.lay.n_gpus:,} GPUs",
            )
        perf: StepResult | None = None
        nodes = -(-job.gpus // self.gpn)
        if job.gpus >= 2 and (nodes > 1 or job.tokens is not None):
            try:
                perf = job_step(self.c.step_scenario, job.model, job.gpus, job.plan)
            except ValueError as exc:
                raise TraceError(
                    f"jobs line {job.line} (id {job.id})",
                    "plan",
                    f"{job.model} on {job.gpus} GPUs: {exc}",
                ) from None
        if job.tokens is not None:
            if perf is None:
                raise TraceError(
                    f"jobs line {job.line} (id {job.id})",
                    "tokens",
                    "a 1-GPU job has no training-step model here; give duration_h",
                )
            work_h = job.tokens / perf.tokens_per_s / 3600.0
        else:
            work_h = float(job.duration_h or 0.0)
        grid = self.lay.ocs
        if grid is not None and nodes > grid.nodes_per_block:
            need = slice_blocks_needed(grid, grid.blocks_for(nodes), self.policy)
            if need is None:
                raise TraceError(
                    f"jobs line {job.line} (id {job.id})",
                    "gpus",
                    f"{job.gpus:,} GPUs need {grid.blocks_for(nodes)} blocks of "
                    f"{grid.block_gpus:,}; no {self.policy} slice of them fits the block grid "
                    f"{' x '.join(map(str, grid.dims))} of {grid.n_blocks} blocks "
                    f"(ocs.circuits = {grid.circuits})",
                )
        ckpt = checkpoint_bytes_of(s, job.model)
        write_s = ckpt / (job.gpus * s.reliability.checkpoint_write_GBps_per_gpu * 1e9)
        m = s.model  # the hot-expert skew places the ports an expert all-to-all pauses
        shape = (
            TrafficShape.from_step(perf, m.routing_skew, m.hot_fraction)
            if perf is not None
            else None
        )
        return _Run(job, i, work_h, perf, write_s, shape)

    # -------------------------------------------------------------------- events
    def _push(self, t: float, kind: int, a: int = 0, b: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, kind, self.seq, a, b))

    def _advance(self, t: float) -> None:
        """Account busy GPU-hours and fragmentation up to ``t``."""
        dt = t - self.last_t
        if dt > 0:
            busy_gpus = sum(self.runs[i].job.gpus for i in self.running)
            self.busy += busy_gpus * dt
            if self.head_blocked:
                free = float(self.free_gpus[self.up].sum())
                self.frag += free * dt
                if free >= self.head_gpus:  # enough GPUs, none in a shape it can take
                    self.shape_frag += free * dt
            self.last_t = t

    def _progress(self, r: _Run, t: float) -> None:
        """Bring a running job's work, slowdown integrals and checkpoint clock to ``t``."""
        t0 = max(r.last_h, r.train_from_h)
        if t > t0:
            done = min(r.work_h, (t - t0) * r.rate)
            r.work_h -= done
            r.useful_h += done
            r.since_ckpt_h += done
        if t > r.last_h:
            dt = t - r.last_h
            r.sd_time += r.sd * dt
            r.psd_time += r.place_sd * dt
            r.run_time += dt
        r.last_h = t

    def _set_rate(self, r: _Run, t: float, sd: float) -> None:
        self._progress(r, t)
        r.sd = sd
        r.rate = 1.0 / (sd * r.overhead)  # 0 when its traffic has no path (it stalls)
        r.version += 1
        if r.rate > 0:
            t0 = max(t, r.train_from_h)
            self._push(t0 + r.work_h / r.rate, _FINISH, r.idx, r.version)

    # -------------------------------------------------------------------- placement
    def _try_place(
        self, r: _Run, free_gpus: np.ndarray | None = None
    ) -> tuple[tuple[int, ...], list[tuple[int, int]]] | None:
        """Where the policy puts ``r`` now (or with ``free_gpus`` free per node); None: nowhere."""
        g, gpn = r.job.gpus, self.gpn
        have = self.free_gpus if free_gpus is None else free_gpus
        if g <= gpn:
            ok = np.flatnonzero(self.up & (have >= g))
            if not ok.size:
                return None
            if self.policy == "first-fit":
                n = int(ok[0])
            else:
                n = int(ok[np.lexsort((ok, have[ok]))][0])
            return (n,), [(n, g)]
        k = -(-g // gpn)
        free = self.up & (have == gpn)
        nodes = place(self.policy, self.lay, free, k)
        if nodes is None:
            return None
        grid = self.lay.ocs
        if grid is not None and k > grid.nodes_per_block:
            # a slice: the job holds every GPU of its blocks, its ranks on the first k servers
            return tuple(int(n) for n in nodes[:k]), [(int(n), gpn) for n in nodes]
        slots = [(int(n), gpn) for n in nodes[:-1]] + [(int(nodes[-1]), g - gpn * (k - 1))]
        return tuple(int(n) for n in nodes), slots

    def _start(
        self, r: _Run, t: float, where: tuple[tuple[int, ...], list[tuple[int, int]]]
    ) -> None:
        nodes, slots = where
        for n, g in slots:
            self.free_gpus[n] -= g
            self.owners[n] += 1
        if (self.free_gpus < 0).any():
            raise RuntimeError("a GPU given to two jobs")
        r.state, r.nodes, r.gpu_slots = "running", nodes, slots
        grid = self.lay.ocs
        reconfig_h = 0.0
        if grid is not None and len(nodes) > grid.nodes_per_block:
            per = grid.nodes_per_block
            r.blocks = tuple(dict.fromkeys(n // per for n, _ in slots))
            if grid.reconfigurable:  # the OCS sets the slice's circuits before it trains
                reconfig_h = grid.reconfig_s / 3600.0
        else:
            r.blocks = ()
        self._open[r.idx] = len(self.segments)
        self.segments.append([r.idx, t, math.nan, tuple(slots)])
        r.start_h = t
        if math.isnan(r.first_start_h):
            r.first_start_h = t
        r.last_h = t
        r.train_from_h = t + r.restart_h + reconfig_h
        r.restart_h = 0.0
        r.since_ckpt_h = 0.0
        # checkpoint interval from the job's own parts' failure rate
        lay = self.lay
        leaves = len(set(lay.leaf_of[list(nodes)].tolist()))
        per_leaf_sw = lay.n_leaf_switches / max(1, lay.n_leaves)
        lam_h = len(nodes) * self.c.node_rate_per_h + leaves * per_leaf_sw * self.c.leaf_rate_per_h
        rel = self.c.scenario.reliability
        if rel.checkpoint_interval_s == "auto":
            tau_s = young_daly_interval_s(r.ckpt_write_s, 3600.0 / lam_h if lam_h > 0 else math.inf)
        else:
            tau_s = float(rel.checkpoint_interval_s)
        r.interval_h = tau_s / 3600.0
        r.overhead = (tau_s + r.ckpt_write_s) / tau_s if math.isfinite(tau_s) else 1.0
        # an OCS slice's traffic stays on its own circuits: it meets no other job
        r.crossing = grid is None and r.shape is not None and self.rates.crosses(r.shape, r.nodes)
        r.place_sd = self._placement_slowdown(r)
        self.running.add(r.idx)
        self._set_rate(r, t, r.place_sd)

    @property
    def _nvlink_line_Bps(self) -> float:
        """A GPU's NVLink rate per NIC in the solver's line-rate units.

        The reference of a dimension that stays on NVLink when contiguous (a job inside one
        NVLink domain) but crosses domains on its placement: its bytes move from NVLink
        (``nvlink_GBps x`` NCCL's per-link efficiency) to the network, whose rates the solver
        gives in line-rate units (``x net_efficiency`` is the payload rate).
        """
        ctx = self.c.ctx
        c = ctx.constants
        return (
            ctx.nvlink_Bps
            * ctx.nvlink_efficiency
            / float(c["net_efficiency"])
            / self.lay.nics_per_gpu
        )

    def _sd_from(
        self,
        r: _Run,
        rates: Rates,
        contig: Rates | None = None,
        extra_s: float = 0.0,
        unhidden: frozenset[str] = frozenset(),
    ) -> float:
        """Return the job's step slowdown when its dimensions run at ``rates`` (1: no network).

        ``contig``: the reference rates (default: the job contiguous on this fabric);
        ``extra_s`` seconds per step added; ``unhidden`` dimensions hide nothing
        (:func:`step_with_factors`).
        """
        if r.perf is None or r.shape is None or not rates:
            return 1.0
        if contig is None:
            contig = self.rates.contiguous(r.shape, len(r.nodes))
        factors = {}
        for d, rate in rates.items():
            if rate <= 0:
                return math.inf
            factors[d] = max(1.0, contig.get(d, self._nvlink_line_Bps) / rate)
        step = step_with_factors(r.perf, factors, unhidden) + extra_s
        return max(1.0, step / r.perf.step_time_s)

    def _placement_slowdown(self, r: _Run) -> float:
        if self.c.slices is not None:
            return self._slice_slowdown(r)
        if r.perf is None or r.shape is None or not self.rates.has_traffic(r.shape, r.nodes):
            return 1.0
        return self._sd_from(r, self.rates.alone(r.job.id, r.shape, r.nodes))

    def _slice_slowdown(self, r: _Run) -> float:
        """Return an OCS job's step on its slice's own circuits over the non-blocking one's.

        A job inside one block sends on its block's own fabric (NVLink, a cube's aggregated
        mesh, a pod's non-blocking leaf-spine): 1. With ``ocs.reconfigure = phase`` the
        reduction runs on ring circuits and, when the forward crosses blocks too, pays
        :data:`~fabric_model.run.slice_fabrics.SWITCHES_PER_STEP` reconfigurations per step
        and hides nothing (:meth:`~fabric_model.run.slice_fabrics.SliceFabrics.phase`).
        """
        sf = self.c.slices
        if sf is None or r.perf is None or r.shape is None or not r.blocks:
            return 1.0
        k = len(r.nodes)
        contig = sf.contiguous(r.shape, k)
        if sf.grid.reconfigure == "phase":
            rates, extra_s, hidden = sf.phase(r.shape, k, r.blocks)
        else:
            rates, extra_s, hidden = sf.rates(r.shape, k, r.blocks), 0.0, True
        unhidden = frozenset() if hidden else frozenset({"dp"})
        return self._sd_from(r, rates, contig, extra_s, unhidden)

    def _free(self, r: _Run) -> None:
        self.segments[self._open.pop(r.idx)][2] = self.last_t
        for n, g in r.gpu_slots:
            self.free_gpus[n] += g
            self.owners[n] -= 1
        self.running.discard(r.idx)
        r.gpu_slots = []

    def _crossing(self) -> dict[str, tuple[TrafficShape, tuple[int, ...]]]:
        """Return the running jobs whose traffic leaves their first-hop switches."""
        out = {}
        for i in self.running:
            r = self.runs[i]
            if r.crossing and r.shape is not None:
                out[r.job.id] = (r.shape, r.nodes)
        return out

    def _refresh_interference(self, t: float) -> None:
        """Re-solve the jobs that cross switches when their set or the failed parts changed."""
        crossing = self._crossing()
        state = self.rates.state
        key = (frozenset((j, n) for j, (_, n) in crossing.items()), state)
        if key == self.crossing_key:
            return
        self.crossing_key = key
        by_id = {self.runs[i].job.id: self.runs[i] for i in self.running}
        if state != self.state_seen:  # a part failed or came back: each job's rate alone
            self.state_seen = state
            for jid in crossing:
                r = by_id[jid]
                r.place_sd = self._placement_slowdown(r)
        if not crossing:
            return
        shared = self.rates.shared(crossing)
        for jid, rates in shared.items():
            r = by_id[jid]
            sd = max(r.place_sd, self._sd_from(r, rates))
            if abs(sd - r.sd) > 1e-12:
                self._set_rate(r, t, sd)

    # -------------------------------------------------------------------- scheduling
    def _queue_key(self, r: _Run) -> tuple[int, float, int]:
        return (-r.job.priority, r.job.submit_h, r.idx)

    def _enqueue(self, r: _Run) -> None:
        r.state = "queued"
        bisect.insort(self.queue, (self._queue_key(r), r.idx))

    def _predicted_wall_h(self, r: _Run) -> float:
        return r.restart_h + r.work_h * r.overhead

    def _need_gpus(self, r: _Run) -> int:
        """GPUs ``r`` holds once started: its own, or its slice's blocks' on an OCS design."""
        grid = self.lay.ocs
        k = -(-r.job.gpus // self.gpn)
        if grid is None or k <= grid.nodes_per_block:
            return r.job.gpus
        need = slice_blocks_needed(grid, grid.blocks_for(k), self.policy)
        return (need or grid.n_blocks) * grid.block_gpus

    def _have_gpus(self, r: _Run) -> int:
        """GPUs free now in the units ``r`` takes (a node's, whole nodes, or whole blocks)."""
        gpn = self.gpn
        if r.job.gpus <= gpn:
            return int(self.free_gpus[self.up].max(initial=0))
        whole = self.up & (self.free_gpus == gpn)
        grid = self.lay.ocs
        if grid is not None and r.job.gpus > grid.block_gpus:
            per = grid.nodes_per_block
            blocks = whole[: grid.n_blocks * per].reshape(grid.n_blocks, per).all(axis=1)
            return int(blocks.sum()) * grid.block_gpus
        return int(whole.sum()) * gpn

    def _reservation(self, head: _Run, t: float) -> tuple[float, int]:
        g = self._need_gpus(head)
        have = self._have_gpus(head)
        if have >= g:
            return t, have - g
        ends = sorted(
            (
                max(self.runs[i].last_h, self.runs[i].train_from_h)
                + (self.runs[i].work_h / self.runs[i].rate if self.runs[i].rate > 0 else math.inf),
                sum(n for _, n in self.runs[i].gpu_slots),
            )
            for i in self.running
        )
        for end, gpus in ends:
            have += gpus
            if have >= g:
                return end, have - g
        return math.inf, 0

    def _victims(self, r: _Run) -> list[_Run] | None:
        """Return the running jobs to preempt so that ``r`` fits (None: it would not fit).

        Kueue's classical preemption (``withinClusterQueue: LowerPriority``,
        https://kueue.sigs.k8s.io/docs/concepts/preemption/; ``minimalPreemptions`` in
        pkg/scheduler/preemption/preemption.go): the candidates are the running jobs of lower
        priority, lowest priority first and, among equals, the most recently started first
        (the least work lost); they are taken in that order until the job fits, then each
        taken candidate the job fits without is given back, last taken first.
        """
        cands = sorted(
            (self.runs[i] for i in self.running if self.runs[i].job.priority < r.job.priority),
            key=lambda c: (c.job.priority, -c.start_h, c.idx),
        )
        if not cands:
            return None
        free = self.free_gpus.copy()
        taken = []
        for c in cands:
            taken.append(c)
            for n, g in c.gpu_slots:
                free[n] += g
            if self._try_place(r, free) is not None:
                break
        else:
            return None
        for c in reversed(taken[:-1]):
            trial = free.copy()
            for n, g in c.gpu_slots:
                trial[n] -= g
            if self._try_place(r, trial) is not None:
                taken.remove(c)
                free = trial
        return taken

    def _schedule(self, t: float) -> None:
        while self.queue:
            r = self.runs[self.queue[0][1]]
            where = self._try_place(r)
            if where is None and self.preempt:
                victims = self._victims(r)
                if victims:
                    for v in victims:
                        self._interrupt(v, t, preempted=True)
                    where = self._try_place(r)
            if where is None:
                break
            self.queue.pop(0)
            self._start(r, t, where)
        self.head_blocked = bool(self.queue)
        if not self.queue:
            return
        self.head_gpus = self.runs[self.queue[0][1]].job.gpus
        shadow, extra = self._reservation(self.runs[self.queue[0][1]], t)
        i = 1
        tried = 0
        while i < len(self.queue) and tried < BACKFILL_DEPTH:
            if not (self.up & (self.free_gpus > 0)).any():
                break
            r = self.runs[self.queue[i][1]]
            tried += 1
            ends_in_time = t + self._predicted_wall_h(r) <= shadow
            need = self._need_gpus(r)
            if not ends_in_time and need > extra:
                i += 1
                continue
            where = self._try_place(r)
            if where is None:
                i += 1
                continue
            self.queue.pop(i)
            self._start(r, t, where)
            if not ends_in_time:
                extra -= need

    # -------------------------------------------------------------------- failures
    def _interrupt(self, r: _Run, t: float, preempted: bool = False) -> None:
        """Stop ``r``: it loses the work since its last checkpoint and requeues.

        A failure or a preemption alike (Slurm's ``PreemptMode=REQUEUE``,
        https://slurm.schedmd.com/preempt.html: the job is killed and requeued; its restart
        pays ``reliability.restart_s``).
        """
        self._progress(r, t)
        lost = r.since_ckpt_h % r.interval_h if math.isfinite(r.interval_h) else r.since_ckpt_h
        lost = min(lost, r.useful_h)
        r.work_h += lost
        r.useful_h -= lost
        if preempted:
            r.preemptions += 1
        else:
            r.interruptions += 1
        r.restart_h = self.c.scenario.reliability.restart_s / 3600.0
        r.version += 1
        self._free(r)
        self._enqueue(r)

    def _spare_swap(self, t: float, down: np.ndarray) -> bool:
        """On an OCS design, put a free spare block in place of each block ``down`` touches.

        The OCS re-forms the circuits of the failed block's jobs over the spare
        (``ocs.reconfig_ms``), so the block's place stays up and its jobs restart from their
        last checkpoint at once on the same slice instead of requeueing (the failed GPUs'
        state is gone either way: Jouppi et al., ISCA 2023, and Zu et al., "Resiliency at
        scale: managing Google's TPUv4 machine learning supercomputer", NSDI 2024: jobs on
        TPU v4 restart from checkpoints, the OCS gives them healthy cubes without waiting for
        a repair). The failed block returns as a spare after ``reliability.repair_h``.
        Returns False (nothing done) on a switched fabric, with ``ocs.reconfigure = never``
        (the installed circuits do not reach a spare) or when too few spares are free.
        """
        grid = self.lay.ocs
        if grid is None or not grid.reconfigurable:
            return False
        blocks = np.unique(down // grid.nodes_per_block)
        if blocks.size > self.spares_free:
            return False
        self.spares_free -= int(blocks.size)
        self.spare_swaps += int(blocks.size)
        repair = t + self.c.scenario.reliability.repair_h
        for _ in range(blocks.size):
            self._push(repair, _SPARE_BACK)
        hit = set(grid.nodes_of(blocks).tolist())
        for i in list(self.running):
            r = self.runs[i]
            if hit.intersection(n for n, _ in r.gpu_slots):
                self._restart_in_place(r, t)
        return True

    def _restart_in_place(self, r: _Run, t: float) -> None:
        """``r`` loses the work since its last checkpoint and restarts on its own slice."""
        self._progress(r, t)
        lost = r.since_ckpt_h % r.interval_h if math.isfinite(r.interval_h) else r.since_ckpt_h
        lost = min(lost, r.useful_h)
        r.work_h += lost
        r.useful_h -= lost
        r.interruptions += 1
        r.since_ckpt_h = 0.0
        grid = self.lay.ocs
        reconfig_s = grid.reconfig_s if grid is not None else 0.0
        restart_s = self.c.scenario.reliability.restart_s + reconfig_s
        r.train_from_h = max(r.train_from_h, t + restart_s / 3600.0)
        self._set_rate(r, t, r.sd)

    def _fail(self, t: float, cls: str, which: int) -> None:
        lay = self.lay
        if cls in ("spine", "uplink"):
            part: Part = (
                ("switch", int(self.c.upper_switches[which]))
                if cls == "spine"
                else ("cable", int(self.c.upper_cables[which]))
            )
            if part in self.rates.state:
                return  # already down: its repair is on the way
            if self.rates.cuts_paths(part):
                # no way around it modelled: the jobs whose traffic leaves their switches and
                # that have nodes in its spine groups fail
                pods = set(lay.pod_of[self.rates.nodes_under(part)].tolist())
                for i in list(self.running):
                    r = self.runs[i]
                    if r.crossing and pods.intersection(lay.pod_of[list(r.nodes)].tolist()):
                        self._interrupt(r, t)
                return
            self.rates.fail(part)  # the capacity is gone until the repair; jobs re-solve
            self.parts.append(part)
            self._push(t + self.c.scenario.reliability.repair_h, _REPAIR_PART, len(self.parts) - 1)
            return
        if cls == "node":
            down = np.array([which])
        else:
            down = np.flatnonzero(lay.leaf_of == which)
        down = down[self.up[down]]
        if not down.size:
            return
        if self._spare_swap(t, down):
            return
        hit = set(down.tolist())
        for i in list(self.running):
            r = self.runs[i]
            if hit.intersection(n for n, _ in r.gpu_slots):
                self._interrupt(r, t)
        self.up[down] = False
        repair = t + self.c.scenario.reliability.repair_h
        for n in down.tolist():
            self._push(repair, _REPAIR, n)

    # -------------------------------------------------------------------- loop
    def run(self, failures: list[tuple[float, str, int]]) -> ScheduleResult:
        for r in self.runs:
            if r.job.submit_h <= self.horizon:
                self._push(r.job.submit_h, _SUBMIT, r.idx)
        for k, (t, _cls, which) in enumerate(failures):
            self._push(t, _FAIL, k, which)
        while self.events:
            t, kind, _, a, b = heapq.heappop(self.events)
            if t > self.horizon:
                break
            self._advance(t)
            if kind == _SUBMIT:
                self._enqueue(self.runs[a])
            elif kind == _FINISH:
                r = self.runs[a]
                if r.state != "running" or b != r.version:
                    continue
                self._progress(r, t)
                r.state, r.end_h = "finished", t
                self._free(r)
            elif kind == _FAIL:
                self._fail(t, failures[a][1], b)
            elif kind == _REPAIR_PART:
                self.rates.repair(self.parts[a])
            elif kind == _SPARE_BACK:
                self.spares_free += 1
            else:
                self.up[a] = True
            # same-time events first, then one scheduling pass
            if self.events and self.events[0][0] == t:
                continue
            self._schedule(t)
            self._refresh_interference(t)
            free = int(self.free_gpus[self.up].sum()) if self.head_blocked else 0
            self.timeline.append(
                (
                    t,
                    sum(self.runs[i].job.gpus for i in self.running),
                    len(self.queue),
                    free,
                    len(self.rates.state),
                    free if free >= self.head_gpus else 0,
                )
            )
            self.max_owner_gpus = max(self.max_owner_gpus, int(self.gpn - self.free_gpus.min()))
        self._advance(self.horizon)
        for i in list(self.running):
            self._progress(self.runs[i], self.horizon)
        return self._result()

    def _result(self) -> ScheduleResult:
        lay, h = self.lay, self.horizon
        capacity = lay.n_gpus * h
        useful = sum(r.useful_h * r.job.gpus for r in self.runs)
        waits = [
            r.first_start_h - r.job.submit_h for r in self.runs if not math.isnan(r.first_start_h)
        ]
        ran = [r for r in self.runs if r.run_time > 0]
        sds = [r.sd_time / r.run_time for r in ran]
        psds = [r.psd_time / r.run_time for r in ran]
        isds = [a / b for a, b in zip(sds, psds, strict=True)]
        cost = run_cost_usd(self.c.bom, self.days)
        status = {}
        for r in self.runs:
            if r.state == "finished":
                status[r.job.id] = "finished"
            elif r.state == "running":
                status[r.job.id] = "running"
            elif r.job.submit_h > h:
                status[r.job.id] = "not-submitted"
            else:
                status[r.job.id] = "queued"
        jobs = [
            {
                "id": r.job.id,
                "gpus": r.job.gpus,
                "submit_h": r.job.submit_h,
                "start_h": None if math.isnan(r.first_start_h) else r.first_start_h,
                "end_h": None if math.isnan(r.end_h) else r.end_h,
                "nodes": list(r.nodes),
                "slowdown": r.sd_time / r.run_time if r.run_time else None,
                "placement_slowdown": r.psd_time / r.run_time if r.run_time else None,
                "interference_slowdown": (r.sd_time / r.psd_time) if r.run_time else None,
                "interruptions": r.interruptions,
                "preemptions": r.preemptions,
                "status": status[r.job.id],
                **({"blocks": list(r.blocks)} if lay.ocs is not None else {}),
            }
            for r in self.runs
        ]
        summary = {
            "policy": self.policy,
            "n_jobs": len(self.runs),
            "days": self.days,
            "utilization": self.busy / capacity if capacity else 0.0,
            "goodput": useful / self.busy if self.busy else 0.0,
            "mean_wait_h": float(np.mean(waits)) if waits else None,
            "p95_wait_h": _pct(waits, 95) if waits else None,
            "slowdown_p50": _pct(sds, 50) if sds else None,
            "slowdown_p95": _pct(sds, 95) if sds else None,
            "placement_slowdown_p50": _pct(psds, 50) if psds else None,
            "interference_slowdown_p50": _pct(isds, 50) if isds else None,
            "fragmentation": self.frag / capacity if capacity else 0.0,
            "shape_fragmentation": self.shape_frag / capacity if capacity else 0.0,
            "interrupted_jobs": sum(1 for r in self.runs if r.interruptions),
            "preempted_jobs": sum(1 for r in self.runs if r.preemptions),
            "spare_swaps": self.spare_swaps,
            "useful_gpu_hours": useful,
            "cost_per_useful_gpu_hour_usd": cost / useful if useful > 0 else None,
            "block_sizes": block_sizes(
                lay, [-(-r.job.gpus // self.gpn) for r in self.runs if r.job.gpus > self.gpn]
            ),
        }
        if lay.ocs is not None:
            summary["slices"] = _slice_facts(lay, self.policy)
        return ScheduleResult(
            summary,
            jobs,
            self.busy,
            capacity,
            status,
            self.rates.solves
            + (self.c.slices.solves - self._slice_solves if self.c.slices is not None else 0),
            self.max_owner_gpus,
            self.segments,
            np.array(self.timeline, dtype=np.float64).reshape(-1, 6),
        )


def _slice_facts(lay: ClusterLayout, policy: str) -> dict[str, Any]:
    """Describe an OCS design's slices (the ``slices`` object of the JSON)."""
    g = lay.ocs
    if g is None:
        return {}
    return {
        "rule": SLICE_RULES[policy],
        "block": g.kind,
        "block_gpus": g.block_gpus,
        "blocks": g.n_blocks,
        "grid_blocks": list(g.dims),
        "circuits": g.circuits,
        "reconfigure": g.reconfigure,
        "reconfig_ms": g.reconfig_s * 1000.0,
        "spare_blocks": g.spare_blocks,
    }


def run_schedule(
    cluster: Cluster,
    jobs: list[Job],
    policy: str | None = None,
    days: float = 30.0,
    seed: int = 0,
    preempt: bool = False,
) -> ScheduleResult:
    """Simulate ``jobs`` on ``cluster`` under ``policy`` for ``days`` (see module docstring).

    ``policy``: None is the fabric's default (:func:`~fabric_model.run.placement.
    default_policy`: ``tree``, or ``ocs-slice`` on an OCS design). ``preempt``: a job that
    cannot start preempts running jobs of lower priority (:meth:`_Sim._victims`); off, as
    Slurm's ``PreemptType=preempt/none`` default.

    Raises
    ------
    TraceError
        For a job the cluster cannot run (larger than the cluster, a model that fits no plan,
        no slice shape that holds it).
    FabricModelError
        For an unknown policy, one that does not place on this fabric, or a bad horizon.
    """
    policy = policy or default_policy(cluster.layout)
    check_policy(policy, cluster.layout)
    if not days > 0:
        raise FabricModelError(f"--days {days}: must be > 0")
    sim = _Sim(cluster, jobs, policy, days, seed, preempt)
    return sim.run(_failures(cluster, days * 24.0, seed))


def generated_jobs(n: int, n_gpus: int, seed: int) -> list[Job]:
    """Return the ``n`` jobs ``--generate n`` draws for ``n_gpus`` GPUs with ``seed``."""
    return generate_jobs(n, n_gpus, np.random.default_rng(_seed_int(seed, "jobs")))


def schedule(
    scenario: Scenario,
    jobs: list[Job] | None = None,
    *,
    generate: int | None = None,
    policy: str | None = None,
    compare: bool = False,
    days: float = 30.0,
    seed: int = 0,
    cluster: Cluster | None = None,
    preempt: bool = False,
) -> dict[str, Any]:
    """Run the ``schedule`` verb's model and return its JSON object (ARCHITECTURE.md 3.4).

    ``generate`` draws that many jobs (:func:`generated_jobs`) from the seed; with
    ``compare`` every policy of the fabric (:func:`~fabric_model.run.placement.policies_for`)
    runs the same jobs and failure draws, and ``policies`` maps each to its summary (the top
    level is ``policy``'s run; None: the fabric's default); ``preempt`` lets a job preempt
    lower priorities (:func:`run_schedule`).
    """
    cl = cluster or Cluster.build(scenario)
    policy = policy or default_policy(cl.layout)
    if jobs is None:
        if generate is None:
            raise FabricModelError("schedule: give --jobs FILE or --generate N")
        jobs = generated_jobs(generate, cl.layout.n_gpus, seed)
    main = run_schedule(cl, jobs, policy, days, seed, preempt)
    out = main.to_dict()
    out["seed"] = seed
    out["preempt"] = preempt
    if compare:
        pol: dict[str, Any] = {}
        for p in policies_for(cl.layout):
            res = main if p == policy else run_schedule(cl, jobs, p, days, seed, preempt)
            pol[p] = res.summary
        out["policies"] = pol
    else:
        out["policies"] = {policy: main.summary}
    return out
