"""Scaling sweeps and the parallel-plan search: maps over independent scenario points.

Every point is a pure function of one :class:`~fabric_model.scenario.Scenario`
(:func:`evaluate_point`), so a sweep or a search is ``map(evaluate, scenarios)``: pass
``map_fn`` (e.g. a ``concurrent.futures`` executor's ``map``) to spread points over
processes or a cluster without changing anything else, and ``progress`` to hear about each
finished point.

Scaling modes (Narayanan et al. 2021 call them weak and strong scaling):

- ``weak``: the tokens per data-parallel replica stay those of the scenario, so the global
  batch grows with the data-parallel degree;
- ``strong``: the global batch stays ``training.global_batch_tokens``; replicas get fewer
  micro-batches as the cluster grows, until a replica has none left (infeasible).

Scaling efficiency at ``n`` GPUs = (tokens/s per GPU at ``n``) / (tokens/s per GPU at the
sweep's smallest feasible size).

The plan search (:func:`plan_search`) is a branch and bound over :func:`plan_space`: every
plan gets a lower bound on its step time without touching the fabric, and plans are modelled
in full in bound order until the next bound cannot beat the best found.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np

from fabric_model.caching import Lru, Reads
from fabric_model.catalog import load_catalog
from fabric_model.collectives.context import nccl_constants, nvlink_efficiency
from fabric_model.errors import FabricModelError, ScenarioError
from fabric_model.plant.cost import bill_of_materials
from fabric_model.scenario import Scenario, apply_overrides, field_spec
from fabric_model.scenario.shapes import shape_counts
from fabric_model.scenario.workload import rank_order
from fabric_model.training.comm import BF16, BUCKET_MIN_PARAMS, BUCKET_PARAMS_PER_DP
from fabric_model.training.compute import HBM_EFFICIENCY, compute_times, optimizer_step_s
from fabric_model.training.fabric import FABRIC_READS, DimensionFabric, group_shape
from fabric_model.training.gemm import linear_utilisation, precision_speedups
from fabric_model.training.layout import Layout
from fabric_model.training.memory import (
    activation_traffic_bytes_per_layer,
    memory_per_gpu,
    model_state_bytes,
)
from fabric_model.training.moe import dispatch_copies, dispatch_padding, moe_layer_time
from fabric_model.training.plan import Plan, order_problems, resolve_plan
from fabric_model.training.result import StepResult
from fabric_model.training.schedules import bubble_s, resolve_schedule, schedule_problems
from fabric_model.training.step import training_step

__all__ = [
    "BOUND_TERMS",
    "CP_MIN_TOKENS",
    "MICRO_BATCHES",
    "SCALING_MODES",
    "SKIPPED_REASON",
    "PlanCandidate",
    "PlanSearch",
    "SweepPoint",
    "evaluate_point",
    "expert_degrees",
    "plan_search",
    "plan_space",
    "search_plans",
    "sweep",
    "sweep_scenarios",
]

SCALING_MODES = ("weak", "strong")
#: The reason of a sweep point the deadline left unmodelled.
SKIPPED_REASON = "not modelled: the time budget ran out before this size"
MapFn = Callable[[Callable[[Scenario], Any], Iterable[Scenario]], Iterator[Any]]
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class SweepPoint:
    """One cluster size of a sweep."""

    n_gpus: int
    step: StepResult
    network_capex_usd: float
    scaling_efficiency: float = math.nan
    error: str = ""
    #: Not modelled: the sweep's ``deadline`` passed before this size's turn
    #: (:data:`SKIPPED_REASON` is its ``error``).
    skipped: bool = False

    @property
    def feasible(self) -> bool:
        """Whether the design builds and the plan runs."""
        return not self.error and self.step.feasible

    @property
    def reason(self) -> str:
        """Why the point is infeasible ('' when feasible)."""
        return self.error or self.step.reason

    def to_dict(self) -> dict[str, Any]:
        """Return the ``sweep`` JSON contract plus feasibility and the step breakdown."""
        st = self.step
        return {
            "n_gpus": self.n_gpus,
            "step_time_s": st.step_time_s,
            "mfu": st.mfu,
            "scaling_efficiency": self.scaling_efficiency,
            "network_capex_usd": self.network_capex_usd,
            "feasible": self.feasible,
            "reason": self.reason,
            "tokens_per_s": st.tokens_per_s,
            "global_batch_tokens": st.tokens_per_step,
            "compute_s": st.compute_s,
            "bubble_s": st.bubble_s,
            "exposed_comm_s": st.exposed_comm_s,
            "exposed_s": dict(st.exposed_s),
            "plan": st.plan.label() if st.plan else "",
        }


#: What a sweep point's network price reads of its scenario (:func:`bill_of_materials` on the
#: point's built fabric): the fabric's sections (:data:`FABRIC_READS`), the prices and
#: counting rules (``costs``), the floor plan that sets cable lengths and so media
#: (``facility``), the storage and management networks it adds, each section whole. Not the
#: model or the plan: re-sweeping another model costs no bill of materials.
PRICE_READS = Reads(
    "network price",
    (*FABRIC_READS.names, "costs", "facility", "storage", "management"),
    derived=FABRIC_READS.derived,
)
#: Network capex per :data:`PRICE_READS` (least recently used out past ``_CAPEX_SIZE``).
_CAPEX_SIZE = 512
_CAPEX = Lru(_CAPEX_SIZE, "training.sweep._CAPEX", key=f"PRICE_READS {PRICE_READS.names}")


def price_key(scenario: Scenario) -> tuple[Any, ...]:
    """Return the cache key of ``scenario``'s network price (:data:`PRICE_READS`)."""
    return PRICE_READS.key(scenario)


def _network_capex_usd(scenario: Scenario, step: StepResult) -> float:
    def price() -> float:
        # the step's built fabric is the whole network's, save for a hybrid whose job runs
        # on one partition (``hybrid.job``): that network is priced whole, from its request
        whole = scenario.fabric.topology != "hybrid" or scenario.hybrid.job == "both"
        topo = (
            DimensionFabric(scenario, step.plan.layout).base.topology
            if step.feasible and step.plan and whole
            else None
        )
        return bill_of_materials(scenario, topology=topo).capex_usd

    return _CAPEX.get(price_key(scenario), price)


def evaluate_point(scenario: Scenario) -> SweepPoint:
    """Step and network capex of one scenario (a design that cannot be built says why)."""
    n = scenario.cluster.n_gpus
    try:
        step = training_step(scenario)
        capex = _network_capex_usd(scenario, step)
    except FabricModelError as exc:
        return SweepPoint(n, StepResult(n, False, ()), math.nan, error=str(exc))
    return SweepPoint(n, step, capex)


def sweep_scenarios(
    scenario: Scenario, gpus: Sequence[int], scaling: str = "weak"
) -> list[Scenario | str]:
    """Return the scenario of each size (or why that size cannot be expressed)."""
    if scaling not in SCALING_MODES:
        raise ScenarioError("scaling", scaling, "must be one of " + ", ".join(SCALING_MODES))
    base_plan, _ = resolve_plan(scenario)
    m, tr = scenario.model, scenario.training
    per_replica = tr.global_batch_tokens / base_plan.dp if base_plan else m.seq_len * tr.micro_batch
    inner = scenario.parallel.tp * scenario.parallel.pp * scenario.parallel.cp
    out: list[Scenario | str] = []
    for n in gpus:
        over: dict[str, Any] = {"cluster.n_gpus": n, "parallel.dp": "auto"}
        if scaling == "weak" and n % inner == 0:
            over["training.global_batch_tokens"] = max(1, round(per_replica * (n // inner)))
        try:
            out.append(apply_overrides(scenario, over))
        except FabricModelError as exc:
            out.append(str(exc))
    return out


def _until(items: Sequence[Scenario], deadline: float | None) -> Iterator[Scenario]:
    """Yield ``items`` while ``time.monotonic()`` is before ``deadline`` (all when None)."""
    for item in items:
        if deadline is not None and time.monotonic() >= deadline:
            return
        yield item


def sweep(
    scenario: Scenario,
    gpus: Sequence[int],
    *,
    scaling: str = "weak",
    map_fn: MapFn = map,
    progress: Progress | None = None,
    deadline: float | None = None,
) -> list[SweepPoint]:
    """Evaluate ``scenario`` at each GPU count (see the module docstring).

    With ``deadline`` (a ``time.monotonic()`` value) no size starts after it: the sizes left
    come back ``skipped`` (:data:`SKIPPED_REASON`), so a caller with a time budget shows what
    was modelled. The builtin ``map`` checks before each size; a pool's ``map`` takes every
    size at once, so the deadline only stops what has not been handed out.
    """
    points = sweep_scenarios(scenario, gpus, scaling)
    todo = [p for p in points if isinstance(p, Scenario)]
    results: list[SweepPoint] = []
    for i, res in enumerate(map_fn(evaluate_point, _until(todo, deadline))):
        results.append(res)
        if progress:
            progress(i + 1, len(todo))
    results += [
        SweepPoint(
            p.cluster.n_gpus,
            StepResult(p.cluster.n_gpus, False, ()),
            math.nan,
            error=SKIPPED_REASON,
            skipped=True,
        )
        for p in todo[len(results) :]
    ]
    done = iter(results)
    out = []
    for n, p in zip(gpus, points, strict=True):
        if isinstance(p, str):
            out.append(SweepPoint(n, StepResult(n, False, ()), math.nan, error=p))
        else:
            out.append(next(done))
    base = next((p for p in out if p.feasible), None)
    if base is None:
        return out
    per_gpu0 = base.step.tokens_per_s / base.n_gpus
    return [
        replace(p, scaling_efficiency=p.step.tokens_per_s / p.n_gpus / per_gpu0)
        if p.feasible
        else p
        for p in out
    ]


# ---------------------------------------------------------------------------- search

#: Sequences per micro-batch the search tries. Time per token barely depends on it; it trades
#: the pipeline bubble and activation memory against message sizes and latency terms.
MICRO_BATCHES = (1, 2, 4, 8)
#: Fewest tokens of one sequence a context-parallel rank keeps: shorter blocks leave ring
#: attention too little math to hide its key/value exchange behind.
CP_MIN_TOKENS = 1024
#: Plans popped from the bound order per ``map_fn`` call when ``map_fn`` is not ``map`` (a
#: pool's workers share a batch; the builtin ``map`` gets one plan at a time, the tightest
#: pruning).
POOL_BATCH = 32
#: Terms of the lower bound: the step without communication, then each dimension's
#: exposed communication (keys of :attr:`StepResult.exposed_s`).
BOUND_TERMS = ("compute", "tp", "ep", "pp", "dp")


@dataclass(frozen=True)
class PlanCandidate:
    """A plan the search evaluated: its overrides, its step, and the bound it was ranked by.

    Attributes
    ----------
    overrides : dict
        Dotted scenario keys that turn the searched scenario into this plan.
    step : StepResult
        The plan's training step, modelled in full on the fabric.
    bound_s : float
        The lower bound on its step time the search ranked it by, s (see
        :func:`plan_search`).
    tiles_nvlink : bool
        Whether its TP, CP x TP and EP x CP x TP groups tile the NVLink domain (a group
        that straddles domains is modelled, and costs time, but ranks after a tiling plan
        of the same step time).
    """

    overrides: dict[str, Any]
    step: StepResult
    bound_s: float = math.nan
    tiles_nvlink: bool = True

    @property
    def label(self) -> str:
        """Plan label with recomputation and micro-batch."""
        st = self.step
        if st.plan is None:
            return str(self.overrides)
        rc = st.plan.recompute
        if rc == "selective" and self.overrides.get("training.recompute_modules") == "cheap":
            rc = "selective+cheap"
        return f"{st.plan.label()} mb{st.plan.micro_batch} {rc} ZeRO-{st.plan.zero_stage}"


@dataclass(frozen=True)
class PlanSearch:
    """What :func:`plan_search` found and how much of the plan space it had to model.

    Attributes
    ----------
    plans : tuple of PlanCandidate
        The fastest feasible plans, best first.
    n_space : int
        Plans in :func:`plan_space`, each given a lower bound (vectorised, no fabric).
    n_screened : int
        Plans taken in bound order and checked against the plan rules and memory.
    n_rejected : int
        Screened plans that break a rule of :func:`~fabric_model.training.plan.resolve_plan`
        or do not fit in memory (:func:`~fabric_model.training.memory.memory_per_gpu`).
    n_evaluated : int
        Plans modelled in full on the fabric (:func:`training_step`).
    n_layouts : int
        Distinct rank layouts among them (each solves its fabric patterns once).
    exact : bool
        True when the search stopped on the bound: every plan it did not model is no faster
        than the ``top``-th plan returned. False when ``max_evaluations`` cut it short.
    bound_slack : dict
        Per bound term (:data:`BOUND_TERMS`), the smallest ratio of a modelled plan's
        actual time to its bound term (1 when the bound held everywhere; below 1 that term
        was scaled down for the rest of the search).
    time_s : float
        Wall time of the search, s.
    timed_out : bool
        True when the ``deadline`` stopped the search (then ``exact`` is False too).
    """

    plans: tuple[PlanCandidate, ...]
    n_space: int
    n_screened: int
    n_rejected: int
    n_evaluated: int
    n_layouts: int
    exact: bool
    bound_slack: dict[str, float]
    time_s: float
    timed_out: bool = False


def _divisors(n: int) -> list[int]:
    """Return every positive divisor of ``n``, ascending."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


def _key_max(key: str) -> int:
    """Return the largest value the key table allows for an integer key."""
    hi = field_spec(key).max
    return int(hi) if hi is not None else 2**62


def expert_degrees(
    scenario: Scenario, dp: int | None = None, *, every_divisor: bool = False
) -> list[int]:
    """Return the expert-parallel degrees a plan may use.

    Powers of two dividing the expert count (and ``dp``, the data-parallel degree, when
    given); with ``every_divisor`` every divisor (5, 10, 20 of 160 experts too), as the plan
    search uses; never above the ``parallel.ep`` bound. ``[1]`` for a dense model.
    """
    m = scenario.model
    if m.kind != "moe":
        return [1]
    hi = _key_max("parallel.ep")
    return [
        e
        for e in _divisors(m.n_experts)
        if e <= hi and (dp is None or dp % e == 0) and (every_divisor or e & (e - 1) == 0)
    ]


def _interleavings(layers: int, pp: int, vpp_max: int) -> list[int]:
    """Return the virtual stages per rank that give no rank more layers than ``vpp = 1``.

    ``v`` chunks of ``ceil(layers / (pp v))`` layers must not exceed ``ceil(layers / pp)``
    (for 80 layers on 2 stages: the divisors of 40); ``[1]`` without pipelining.
    """
    if pp <= 1:
        return [1]
    per_rank = -(-layers // pp)
    return [
        v
        for v in range(1, min(vpp_max, layers // pp) + 1)
        if -(-layers // (pp * v)) * v <= per_rank
    ]


def _expert_tps(s: Scenario, tp: int) -> list[int]:
    """Return the expert tensor-parallel degrees the search tries beside ``tp``.

    ``tp`` itself (Megatron-Core's default) and 1 (the experts whole on each GPU, the
    setting of NVIDIA's MoE recipes beside TP 2-8 and torchtitan's default), each where
    the framework allows it: the degree must divide the experts' FFN (Transformer
    Engine's split); torchtitan supports no other values. Only ``[tp]`` for a dense model.
    """
    if s.model.kind != "moe":
        return [tp]
    return [e for e in dict.fromkeys((tp, 1)) if s.model.ffn_hidden % e == 0]


def _expert_ok(s: Scenario, tp: int, cp: int, dp: int, ep: int, etp: int) -> bool:
    """Whether the expert grid ``etp x ep`` is one the framework builds on this stage.

    At ``etp = tp`` the search keeps EP within data parallelism (EP divides DP), as it did
    before it searched expert TP; below it, Megatron-Core's rule (``etp x ep`` divides
    ``tp x cp x dp``) or torchtitan's (EP a multiple of ``cp x tp``), with expert
    parallelism (at EP 1 a smaller ``etp`` only copies every expert over the TP ranks).
    """
    if etp == tp:
        return dp % ep == 0 and (s.training.framework != "torchtitan" or ep % cp == 0)
    if ep == 1 or (tp * cp * dp) % (etp * ep):
        return False
    return s.training.framework != "torchtitan" or ep % (cp * tp) == 0


def _layouts(s: Scenario) -> list[tuple[int, int, int, int, int]]:
    """Return ``(tp, cp, ep, pp, etp)`` of every rank layout the plan rules admit."""
    m, n = s.model, s.cluster.n_gpus
    seqs = s.training.global_batch_tokens / m.seq_len
    tps = [
        t for t in _divisors(m.heads) if t <= min(s.cluster.nvlink_domain, _key_max("parallel.tp"))
    ]
    cps = [
        c
        for c in _divisors(m.seq_len)
        if m.seq_len // c >= min(CP_MIN_TOKENS, m.seq_len) and c <= _key_max("parallel.cp")
    ]
    pp_max = min(m.layers, _key_max("parallel.pp"))
    eps = expert_degrees(s, every_divisor=True)
    order = rank_order(s.parallel, s.training)
    out: list[tuple[int, int, int, int, int]] = []
    for tp in tps:
        etps = _expert_tps(s, tp)
        for cp in cps:
            if n % (tp * cp):
                continue
            for pp in _divisors(n // (tp * cp)):
                dp = n // (tp * cp * pp)
                if pp > pp_max or dp > seqs:  # every replica needs a micro-batch
                    continue
                out.extend(
                    (tp, cp, ep, pp, et)
                    for et in etps
                    for ep in eps
                    if _expert_ok(s, tp, cp, dp, ep, et)
                    # the rank order lays the expert grid on the stages' GPUs
                    and not order_problems(
                        Plan(tp, pp, dp, ep, cp, 1, 0, 1, 1, 1, "none", etp=et, order=order)
                    )
                )
    return out


def _tiles(
    tp: np.ndarray, cp: np.ndarray, ep: np.ndarray, domain: int, expert: np.ndarray | None = None
) -> np.ndarray:
    """Return whether the TP, CP x TP and EP x CP x TP blocks each divide or fill domains.

    ``expert``: the expert grid's EP block where it is not the attention's (``etp x ep``).
    """
    ok = np.ones(tp.shape, dtype=bool)
    for block in (tp, tp * cp, tp * cp * ep if expert is None else expert):
        ok &= (domain % block == 0) | (block % domain == 0)
    return ok


@dataclass(frozen=True)
class _Space:
    """The plan space as arrays (one entry per plan) with each term of its lower bound."""

    cols: dict[str, np.ndarray]  # tp, cp, ep, pp, etp, vpp, mb, rc (mode index), zero
    terms: dict[str, np.ndarray]  # seconds per BOUND_TERMS entry
    tiles: np.ndarray
    recompute_modes: tuple[tuple[str, str], ...]  # (training.recompute, .recompute_modules)

    def __len__(self) -> int:
        return int(self.tiles.size)

    def overrides(self, i: int) -> dict[str, Any]:
        """Return the dotted keys of entry ``i``."""
        c = {k: int(v[i]) for k, v in self.cols.items()}
        return {
            "parallel.tp": c["tp"],
            "parallel.pp": c["pp"],
            "parallel.cp": c["cp"],
            "parallel.ep": c["ep"],
            "parallel.etp": c["etp"],
            "parallel.vpp": c["vpp"],
            "parallel.dp": "auto",
            "parallel.zero_stage": c["zero"],
            "training.recompute": self.recompute_modes[c["rc"]][0],
            "training.recompute_modules": self.recompute_modes[c["rc"]][1],
            "training.micro_batch": c["mb"],
        }

    def bound_s(self, slack: dict[str, float] | None = None) -> np.ndarray:
        """Return the bound of every entry, each term scaled by ``slack`` (default 1)."""
        slack = slack or {}
        return sum((self.terms[t] * slack.get(t, 1.0) for t in BOUND_TERMS), np.zeros(len(self)))


def _recompute_modes(s: Scenario) -> tuple[tuple[str, str], ...]:
    """Return every ``(training.recompute, training.recompute_modules)`` the key table allows.

    What selective recomputation reruns only matters when it is selective; the other modes
    keep the scenario's setting.
    """
    base = s.training.recompute_modules
    return tuple(
        (mode, modules)
        for mode in field_spec("training.recompute").choices
        for modules in (
            field_spec("training.recompute_modules").choices if mode == "selective" else (base,)
        )
        if modules != "mla_up_proj" or s.model.kv_lora_rank  # the same as core_attn without MLA
    )


def _grid(
    s: Scenario, modes: tuple[tuple[str, str], ...], zeros: tuple[int, ...]
) -> dict[str, np.ndarray]:
    """Return the columns of every plan: layouts x interleavings x batch x modes x stages."""
    m = s.model
    lay = np.array(_layouts(s), dtype=np.int64).reshape(-1, 5)
    vpp_max = _key_max("parallel.vpp")
    mbs = [b for b in MICRO_BATCHES if b <= _key_max("training.micro_batch")]
    parts = [np.zeros((0, 9), np.int64)]
    for pp in np.unique(lay[:, 3]):
        rows = np.flatnonzero(lay[:, 3] == pp)
        grid = np.array(
            np.meshgrid(
                _interleavings(m.layers, int(pp), vpp_max),
                mbs,
                np.arange(len(modes)),
                zeros,
                indexing="ij",
            )
        ).reshape(4, -1)
        parts.append(
            np.concatenate(
                [np.repeat(lay[rows], grid.shape[1], axis=0), np.tile(grid.T, (rows.size, 1))],
                axis=1,
            )
        )
    cols = dict(
        zip(
            ("tp", "cp", "ep", "pp", "etp", "vpp", "mb", "rc", "zero"),
            np.concatenate(parts).T,
            strict=True,
        )
    )
    dp = s.cluster.n_gpus // (cols["tp"] * cols["cp"] * cols["pp"])
    # the frameworks' rules (training.schedules): the global batch a multiple of dp x
    # micro_batch, the schedule's own (Megatron interleaving: micro-batches a multiple of pp)
    tr = s.training
    per = dp * cols["mb"]
    if tr.global_batch_tokens % m.seq_len:
        return {k: v[:0] for k, v in cols.items()}
    seqs = tr.global_batch_tokens // m.seq_len
    keep = (per <= seqs) & (seqs % np.maximum(per, 1) == 0)
    cols = {k: v[keep] for k, v in cols.items()}
    n_mb = seqs // (dp[keep] * cols["mb"])
    ok = _per_combo(
        [cols["pp"], cols["vpp"], n_mb],
        lambda p, v, nm: float(
            not schedule_problems(resolve_schedule(tr.schedule, v), tr.framework, p, v, nm)
        ),
    ).astype(bool)
    return {k: v[ok] for k, v in cols.items()}


def _moved_s(
    size_bytes: np.ndarray,
    n: np.ndarray,
    k: np.ndarray,
    total_Bps: float,
    nic_Bps: float,
    alltoall: bool = False,
) -> np.ndarray:
    """Return a floor on one collective's time that no algorithm on any fabric beats, s.

    ``n`` ranks, at most ``k`` of them in one NVLink domain, ``size_bytes`` in nccl-tests
    terms. Every rank moves at least ``(n - 1) / n`` of the size, at most at its NVLink
    plus NIC rate. What a domain's members need from outside it crosses the domain's own
    NICs: for an all-gather, reduce-scatter or all-reduce (which may be reduced or shared
    inside the domain first: ring, tree, NVLS, SHARP, hierarchical) the ``(n - k) / n``
    held outside, once per domain, ``(n - k) / (n k)`` of the size per GPU; for an
    all-to-all every rank's own ``(n - k) / n`` (distinct data per pair, PXN or not).
    Latency terms only add.
    """
    n = np.maximum(n, 1)
    k = np.clip(k, 1, n)
    outside = (n - k) / n if alltoall else (n - k) / (n * k)
    return np.maximum(size_bytes * (n - 1) / n / total_Bps, size_bytes * outside / nic_Bps)


def _domain_share(layout: Layout, dim: str, domain: int) -> int:
    """Return how many of one group's members share an NVLink domain, as the step sees it.

    A group whose members fill its domains evenly, consecutively in group order, shares
    that count per domain; one that does not is timed with every member on its own NICs
    (1), as :class:`~fabric_model.training.layout.GroupContext` treats the slowest group.
    The smallest over every group of ``dim``, so never above the step's.
    """
    if layout.size(dim) <= 1:
        return 1
    members, offsets = layout.members(dim), layout.offsets(dim)
    size = members.size
    if dim != "tp" and domain % layout.tp == 0:
        # members sit on multiples of tp: groups one tensor-parallel rank apart share domains
        offsets = offsets[offsets % layout.tp == 0]
    offsets = np.unique(offsets % domain)  # groups a whole number of domains apart match
    doms = (members[None, :] + offsets[:, None]) // domain  # rows ascend (group order)
    first = np.count_nonzero(doms == doms[:, :1], axis=1)  # the first run's length
    at = np.arange(1, size)[None, :]
    even = (size % first == 0) & np.all(
        (np.diff(doms, axis=1) != 0) == (at % first[:, None] == 0), axis=1
    )
    return int(np.where(even, first, 1).min())


def _per_combo(keys: list[np.ndarray], fn: Callable[..., float]) -> np.ndarray:
    """Return ``fn(*key)`` for every entry, calling it once per distinct key.

    The key columns are small non-negative integers, packed into one integer per entry.
    """
    packed = np.zeros(keys[0].shape, dtype=np.int64)
    for col in keys:
        packed = packed * (int(col.max(initial=0)) + 1) + col
    _, first, inverse = np.unique(packed, return_index=True, return_inverse=True)
    values = np.array([fn(*(int(col[j]) for col in keys)) for j in first], dtype=float)
    return values[inverse.ravel()]


def _space(s: Scenario) -> _Space:
    """Enumerate the plan space and bound every plan (see :func:`plan_search`)."""
    m, tr, cl = s.model, s.training, s.cluster
    n, dom = cl.n_gpus, cl.nvlink_domain
    modes = _recompute_modes(s)
    zeros = tuple(int(z) for z in field_spec("parallel.zero_stage").choices)
    c = _grid(s, modes, zeros)
    tp, cp, ep, pp, vpp, mb = (c[k] for k in ("tp", "cp", "ep", "pp", "vpp", "mb"))
    etp = c["etp"]
    seq, h = m.seq_len, m.hidden
    dp = n // (tp * cp * pp)
    order = rank_order(s.parallel, tr)

    def plan_of(t: int, k: int, e: int, p: int, et: int) -> Plan:
        """Return a plan of these degrees (its rank layouts, as the step forms them)."""
        return Plan(t, p, n // (t * k * p), e, k, 1, 0, 1, 1, 1, "none", etp=et, order=order)

    seen_shares: dict[tuple[Any, ...], int] = {}

    def share(layout: Layout, dim: str) -> int:
        """:func:`_domain_share`, once per group shape (it fixes members and offsets)."""
        key = (group_shape(layout, dim), layout.tp if dim != "tp" else 0)
        if key not in seen_shares:
            seen_shares[key] = _domain_share(layout, dim, dom)
        return seen_shares[key]

    folded = _per_combo([tp, cp, ep, pp, etp], lambda *d: float(plan_of(*d).folded)) > 0
    full = np.array([mode == "full" for mode, _ in modes])[c["rc"]]

    # ---- the step's compute_times(), vectorised: compute, imbalance, bubble -------------
    counts = shape_counts(m)
    gpu = load_catalog().gpu(cl.gpu)
    peak = gpu.bf16_dense_tflops * 1e12 * tr.compute_efficiency
    speedup = precision_speedups(tr.precision, gpu)[1]
    layers = counts.moe_layers + counts.dense_layers
    attn = counts.attention_flops_per_token(seq)
    experts = 6.0 * counts.moe_layers * counts.top_k * counts.ffn_per_expert
    layer_flops = (6.0 * counts.non_expert_layer_params + experts + attn) / layers
    layer_attn = attn / layers
    lps = -(-m.layers // (pp * vpp)) * vpp  # layers of the heaviest rank
    stage = lps * layer_flops + 6.0 * counts.output_layer
    extra = np.array(
        [
            {"selective": layer_attn / 3.0, "full": layer_flops / 3.0}.get(mode, 0.0)
            for mode, _ in modes
        ]
    )  # reruns that are not GEMMs are left out: a floor
    rerun = extra[c["rc"]] * lps
    util = _per_combo(
        [tp, cp, ep, mb, etp], lambda t, k, e, b, et: linear_utilisation(s, t, k, e, b, gpu, et)
    )
    stretch = 1.0 / (speedup * util) - 1.0
    stage_eq = stage + stretch * lps * (layer_flops - layer_attn)
    rerun_eq = np.where(
        full, rerun * (1.0 + stretch * (layer_flops - layer_attn) / layer_flops), rerun
    )
    moe_share = counts.moe_layers / m.layers

    variants = {mod: replace(s, training=replace(tr, recompute_modules=mod)) for _, mod in modes}

    def traffic(t: int, k: int, b: int, r: int, et: int) -> float:
        """Return the memory-bound kernels' bytes of a layer (they do not depend on EP)."""
        mode, modules = modes[r]
        stub = Plan(
            tp=t,
            pp=1,
            dp=1,
            ep=1,
            cp=k,
            vpp=1,
            zero_stage=0,
            micro_batch=b,
            micro_batches=1,
            layers_per_stage=1,
            recompute=mode,
            etp=et,
        )
        v = variants[modules]
        return moe_share * activation_traffic_bytes_per_layer(v, stub, True) + (
            1 - moe_share
        ) * activation_traffic_bytes_per_layer(v, stub, False)

    t_mem = (
        lps
        * _per_combo([tp, cp, mb, c["rc"], etp], traffic)
        / (gpu.hbm_GBps * 1e9 * HBM_EFFICIENCY)
    )
    per_flop = mb * seq / (tp * cp) / peak
    t_mb = (stage_eq + rerun_eq) * per_flop + t_mem
    t_fwd = stage_eq / 3.0 * per_flop + t_mem / 2
    n_mb = np.maximum(1, np.ceil(tr.global_batch_tokens / seq / (dp * mb) - 1e-9))
    imbalance = np.zeros(tp.shape)
    if counts.moe_layers:  # the MoE router, permutation and hottest experts (training.moe)
        moe_seen: dict[tuple[int, int, int, int, int], tuple[float, float, float]] = {}

        def moe_terms(t: int, k: int, e: int, b: int, et: int, part: int) -> float:
            terms = moe_seen.get((t, k, e, b, et))
            if terms is None:
                lt = moe_layer_time(s, Plan(t, 1, e, e, k, 1, 0, b, 1, 1, "none", etp=et), gpu)
                terms = (lt.overhead_s, lt.forward_s, lt.expert_gemm_s * (lt.hottest - 1.0))
                moe_seen[(t, k, e, b, et)] = terms
            return terms[part]

        moe_lps = lps * counts.moe_layers / m.layers
        moe_t = [_per_combo([tp, cp, ep, mb, etp], partial(moe_terms, part=i)) for i in range(3)]
        t_mb = t_mb + moe_lps * moe_t[0]
        t_fwd = t_fwd + moe_lps * moe_t[1]
        imbalance = n_mb * moe_lps * moe_t[2]
    compute = n_mb * t_mb
    # the schedule's bubble as the step times it (training.schedules)
    t_w = (stage_eq - lps * layer_attn) / 3.0 * per_flop
    hot = 1.0 + imbalance / (n_mb * t_mb)
    f_s, b_s, w_s = hot * t_fwd, hot * (t_mb - t_fwd), hot * t_w
    if tr.schedule == "auto":
        bubble = np.where(
            vpp > 1,
            bubble_s("interleaved", pp, vpp, n_mb, f_s, b_s, w_s),
            bubble_s("1f1b", pp, vpp, n_mb, f_s, b_s, w_s),
        )
    else:
        bubble = bubble_s(tr.schedule, pp, vpp, n_mb, f_s, b_s, w_s)

    # ---- the step's exposed collectives at the fastest rates a GPU can send: NVLink and
    # NICs at the best efficiency any collective algorithm reaches (nccl_constants.yaml)
    nccl = nccl_constants()
    nvl_Bps = (
        gpu.nvlink_GBps
        * 1e9
        * max(nvlink_efficiency(nccl, gpu.arch), *nccl["nvls_efficiency"].values())
    )
    nic_Bps = cl.nics_per_gpu * s.fabric.link_gbps * 1e9 / 8 * nccl["net_efficiency"]
    tot_Bps = nvl_Bps + nic_Bps
    act = mb * (seq / cp) * h * BF16
    per_layer = np.where(full, 6, 4)  # collectives per layer and micro-batch (+ recompute)
    tp_in = _per_combo([tp], lambda t: _domain_share(Layout(t, 1, 1, 1, n // t), "tp", dom))
    # TP blocks per layer: attention and MLP; an MoE layer's shared experts (its routed
    # experts gather their tokens over the expert-TP group instead)
    moe_lps = lps * counts.moe_layers / m.layers
    blocks = 2 - (0 if m.shared_experts else 1) * counts.moe_layers / m.layers
    tp_s = np.where(
        tp > 1,
        (1 - tr.tp_overlap)
        * per_layer
        / 2
        * blocks
        * lps
        * n_mb
        * 2
        * _moved_s(act, tp, tp_in, tot_Bps, nic_Bps),
        0.0,
    )
    if counts.moe_layers:
        etp_in = _per_combo(
            [tp, cp, ep, pp, etp],
            lambda *d: share(plan_of(*d).expert_layout, "tp"),
        )
        routed = act * m.top_k * dispatch_padding(s) * etp / tp
        tp_s = tp_s + np.where(
            etp > 1,
            (1 - tr.tp_overlap)
            * per_layer
            / 2
            * moe_lps
            * n_mb
            * 2
            * _moved_s(routed, etp, etp_in, tot_Bps, nic_Bps),
            0.0,
        )
    elem = (1.0 + 3 * BF16) / 4 if tr.precision == "fp8" else BF16
    copies = _per_combo([ep], lambda e: dispatch_copies(s, e))
    a2a = mb * seq / cp / tp * copies * h * elem

    def ep_share(t: int, k: int, e: int, p: int, et: int) -> float:
        plan = plan_of(t, k, e, p, et)
        if plan.folded:  # the expert grid's EP groups
            return share(plan.expert_layout, "ep")
        return share(Layout(t, k, e, 1, n // (t * k * e)), "ep")

    ep_in = _per_combo([tp, cp, ep, pp, etp], ep_share)
    ep_s = np.where(
        ep > 1,
        (1 - tr.ep_overlap)
        * per_layer
        * lps
        * counts.moe_layers
        / m.layers
        * n_mb
        * _moved_s(a2a, ep, ep_in, tot_Bps, nic_Bps, True),
        0.0,
    )
    # a send each way per micro-batch and virtual stage, plus fill and drain; neighbouring
    # stages sit in different domains once their distance in ranks reaches the domain:
    # tp x cp x dp ranks apart with the pipeline outermost, tp x cp x ep (folded: tp x cp)
    # with data parallelism outermost (parallel.order)
    p2p_lat_s = (
        nccl["base_latency_us"]["ring"]["Simple"]
        + min(nccl["hw_latency_us"][link]["ring"]["Simple"] for link in ("nvlink", "net"))
    ) * 1e-6
    stage_apart = tp * cp * dp if order.endswith("pp") else np.where(folded, tp * cp, tp * cp * ep)
    p2p_Bps = np.where(stage_apart >= dom, nic_Bps, tot_Bps)
    pp_s = np.where(pp > 1, 2 * (vpp * n_mb + pp - 1) * (p2p_lat_s + act / tp / p2p_Bps), 0.0)
    # data parallel, over Megatron-core buckets: the fewest parameters any pipeline rank
    # holds (the memory model reports the heaviest rank, whose layers may be balanced down
    # to floor(layers / pp)); the last bucket is never hidden, and it holds every
    # parameter when even the most any rank holds fits in one bucket
    fewest = np.maximum(1, m.layers // pp)
    most_dense = (counts.non_expert_layer_params / m.layers * lps + 2 * counts.output_layer) / tp
    dp_s = np.zeros(tp.shape)
    opt_s = np.zeros(tp.shape)  # the optimizer step (dp_overlap = auto), memory-bound
    w_b, g_b, o_b, g_shard_b = model_state_bytes(s)
    opt_bytes = max(g_b, g_shard_b) + 2 * o_b + w_b
    t_bwd = t_mb - t_fwd
    # the dp_overlap = auto mechanism exposes at least what full overlap does (a lower bound)
    ov = 1.0 if tr.dp_overlap == "auto" else float(tr.dp_overlap)
    z = c["zero"]
    ag_scale = 0.5 if tr.fp8_param_gather else 1.0  # the all-gather in FP8
    for dim, per_layer_params, most, n_g in (
        ("dp", counts.non_expert_layer_params / tp, most_dense, dp * cp),
        (
            "edp",
            counts.expert_params / (ep * etp),
            counts.expert_params / m.layers * lps / (ep * etp),
            tp * cp * dp // (etp * ep),
        ),
    ):
        params = per_layer_params / m.layers * fewest
        if tr.dp_overlap == "auto":
            shard = np.where(z == 0, 1, n_g)
            opt_s += params / shard * opt_bytes / (gpu.hbm_GBps * 1e9 * HBM_EFFICIENCY)
        k = _per_combo(
            [tp, cp, ep, pp, etp],
            lambda t, q, e, p, et, dim=dim: share(
                plan_of(t, q, e, p, et).expert_layout
                if dim == "edp"
                else plan_of(t, q, e, p, et).layout,
                dim,
            ),
        )
        moved = _moved_s(params * BF16, n_g, k, tot_Bps, nic_Bps)
        bucket = np.maximum(BUCKET_MIN_PARAMS, BUCKET_PARAMS_PER_DP * n_g)
        # one buffer per model chunk: its own last bucket; the chunks' last backwards (and
        # first forwards) spread over pp micro-batch times when interleaved (dp_overlap auto)
        last = np.where(most <= bucket * vpp, moved / vpp, 0.0)
        if tr.dp_overlap == "auto":
            win_b, win_f = (
                np.where(vpp > 1, pp * t_bwd, t_bwd),
                np.where(vpp > 1, pp * t_fwd, t_fwd),
            )
        else:
            win_b, win_f = t_bwd, t_fwd
        dp_s += np.where(
            n_g > 1,
            np.select(
                [z == 0, (z == 1) | (z == 2), z == 3],
                [
                    np.maximum(last, moved - ov * win_b),
                    np.maximum(last, moved - ov * win_b)
                    + ag_scale * np.maximum(last, moved - ov * win_f),
                    np.maximum(ag_scale * last, n_mb * (1 + 2 * ag_scale) * moved - ov * compute),
                ],
                0.0,
            ),
            0.0,
        )
    terms = {
        "compute": compute + imbalance + bubble + opt_s,
        "tp": tp_s,
        "ep": ep_s,
        "pp": pp_s,
        "dp": dp_s,
    }
    expert_block = np.where(folded, etp * ep, tp * cp * ep)
    return _Space(
        cols=c, terms=terms, tiles=_tiles(tp, cp, ep, dom, expert_block), recompute_modes=modes
    )


def plan_space(scenario: Scenario) -> list[dict[str, Any]]:
    """Return every candidate plan of the search, as scenario overrides.

    Degrees that divide what they split, not only powers of two: TP divides the heads and
    fits the NVLink domain; CP divides the sequence into blocks of at least
    :data:`CP_MIN_TOKENS`; EP divides the experts and the data-parallel degree; PP divides
    the GPUs left, up to one layer per stage, interleaved by every ``vpp`` that leaves no
    rank more layers than without interleaving; each micro-batch of :data:`MICRO_BATCHES`
    that leaves every replica one; every recomputation mode (for selective, each choice of
    what it reruns) and ZeRO stage the key table allows. Plans whose groups straddle
    NVLink domains are in the space (the step models what straddling costs).
    """
    sp = _space(scenario)
    return [sp.overrides(i) for i in range(len(sp))]


def _with_plan(base: Scenario, over: dict[str, Any]) -> Scenario:
    """Return ``apply_overrides(base, over)`` for plan keys the space already bounds."""
    par = replace(
        base.parallel,
        tp=over["parallel.tp"],
        pp=over["parallel.pp"],
        cp=over["parallel.cp"],
        ep=over["parallel.ep"],
        etp=over["parallel.etp"],
        vpp=over["parallel.vpp"],
        dp="auto",
        zero_stage=over["parallel.zero_stage"],
    )
    tr = replace(
        base.training,
        recompute=over["training.recompute"],
        recompute_modules=over["training.recompute_modules"],
        micro_batch=over["training.micro_batch"],
    )
    return replace(base, parallel=par, training=tr)


def _actual_terms(st: StepResult) -> dict[str, float]:
    """Return a modelled step's time per bound term (see :data:`BOUND_TERMS`), s."""
    free = st.compute_s + getattr(st, "imbalance_s", 0.0) + st.bubble_s
    free += getattr(st, "offload_s", 0.0) + getattr(st, "optimizer_s", 0.0)
    out = {t: float(st.exposed_s.get(t, 0.0)) for t in BOUND_TERMS[1:]}
    out["compute"] = float(free) if math.isfinite(free) else st.step_time_s
    return out


def plan_search(
    scenario: Scenario,
    *,
    top: int = 5,
    map_fn: MapFn = map,
    progress: Progress | None = None,
    max_evaluations: int | None = None,
    tight: bool = False,
    deadline: float | None = None,
) -> PlanSearch:
    """Find the fastest feasible plans of :func:`plan_space` by branch and bound.

    Parameters
    ----------
    scenario : Scenario
        Model, cluster, fabric and training settings; its ``parallel`` section and the
        searched ``training`` keys are replaced by each plan.
    top : int
        How many plans to return, fastest first.
    map_fn : callable
        ``map``-like function the full evaluations go through (a pool's ``map`` takes
        :data:`POOL_BATCH` plans per call).
    progress : callable, optional
        Called as ``progress(done, total)`` after each batch; ``total`` is the plans
        modelled so far plus those whose bound is still below the stopping time.
    max_evaluations : int, optional
        Stop after modelling this many plans in full (the result is then not exact).
    tight : bool
        Also admit plans whose memory is tight (the estimate's uncertainty spans the
        capacity: the step runs them, with a warning). Off by default: a recommended plan
        should fit with the uncertainty to spare.
    deadline : float, optional
        A ``time.monotonic()`` value: no batch of plans starts after it (the result is then
        the best found so far, not exact, ``timed_out``).

    Returns
    -------
    PlanSearch
        The plans and the search's counts. Never holds an infeasible plan (empty when
        nothing fits).

    Notes
    -----
    Every plan gets a lower bound on its step time, the sum of :data:`BOUND_TERMS`:

    - ``compute``: the step's own compute (model FLOPs of the heaviest stage plus
      recomputation at the GPU's peak, plus its memory-bound kernels), hot-expert
      imbalance and pipeline bubble, every collective free;
    - ``tp``, ``ep``, ``pp``, ``dp``: the step's exposed collectives of each dimension
      (its counts, sizes, buckets and overlaps) timed at a floor no collective algorithm
      beats on any topology: NVLink and NICs at the best efficiency of
      ``nccl_constants.yaml``; every rank moves ``(n - 1) / n`` of the size; what a
      domain's members need from outside it crosses their own NICs (a group spread
      unevenly over domains counts one member per domain, as the step times it); a
      pipeline send pays at least one latency; the last gradient bucket is never hidden.

    Plans are taken in bound order (ties: the NVLink-tiling plan first), screened by the
    plan rules and the step's own memory model, and modelled in full; the search stops
    when the next bound reaches the ``top``-th best step time. Should a modelled plan come
    out below a term of its bound (the step model changed), that term is scaled down by
    the ratio for the rest of the search and the remaining plans re-ranked, so the stop
    stays safe (``PlanSearch.bound_slack`` reports it).
    """
    t0 = time.perf_counter()
    if top < 1:
        return PlanSearch((), 0, 0, 0, 0, 0, True, dict.fromkeys(BOUND_TERMS, 1.0), 0.0)
    sp = _space(scenario)
    slack = dict.fromkeys(BOUND_TERMS, 1.0)
    bounds = sp.bound_s()
    order = np.lexsort((~sp.tiles, bounds))
    batch = 1 if map_fn is map else POOL_BATCH
    counts = shape_counts(scenario.model)
    gpu = load_catalog().gpu(scenario.cluster.gpu)
    best: list[tuple[float, int, PlanCandidate]] = []  # heap: the worst kept plan first
    n_screened = n_rejected = n_evaluated = 0
    layouts: set[Any] = set()
    exact = True
    pos = 0
    tick = itertools.count()
    if (scenario.training.precision == "fp8" and not gpu.fp8_dense_tflops) or (
        scenario.training.precision == "fp4" and not gpu.fp4_tflops
    ):
        order = order[:0]  # the step refuses every plan (no FP8 / FP4 tensor cores)

    def stop_s() -> float:
        return -best[0][0] if len(best) >= top else math.inf

    def loosen(term: str, actual: float, i: int) -> bool:
        lb = float(sp.terms[term][i])
        if actual >= lb * slack[term] * (1 - 1e-9):
            return False
        slack[term] = actual / lb
        return True

    timed_out = False
    while pos < len(order):
        if deadline is not None and time.monotonic() >= deadline:
            timed_out, exact = True, False
            break
        todo: list[tuple[int, dict[str, Any], Scenario]] = []
        loosened = False
        while pos < len(order) and len(todo) < batch and bounds[order[pos]] < stop_s():
            i = int(order[pos])
            pos += 1
            over = sp.overrides(i)
            n_screened += 1
            try:
                cand = _with_plan(scenario, over)
            except FabricModelError:
                n_rejected += 1
                continue
            plan, problems = resolve_plan(cand)
            if plan is None or problems:
                n_rejected += 1
                continue
            mem = memory_per_gpu(cand, plan, counts, gpu.hbm_gib)
            if not (mem.fits if tight else mem.status == "fits"):
                n_rejected += 1
                continue
            # the step's own compute side checks the vectorised copy of it
            busy = compute_times(cand, plan, counts, gpu).busy_s
            if cand.training.dp_overlap == "auto":  # the bound's compute side holds it too
                busy += optimizer_step_s(cand, plan, mem, gpu)
            loosened |= loosen("compute", busy, i)
            if busy + bounds[i] - sp.terms["compute"][i] * slack["compute"] >= stop_s():
                continue
            todo.append((i, over, cand))
        if not todo and not loosened:
            break
        if max_evaluations is not None and n_evaluated + len(todo) > max_evaluations:
            todo = todo[: max(0, max_evaluations - n_evaluated)]
            exact = False
        for (i, over, _), st in zip(
            todo, map_fn(training_step, [c for _, _, c in todo]), strict=True
        ):
            n_evaluated += 1
            if st.plan is not None:
                layouts.add(st.plan.layout)
            if not st.feasible:
                continue
            for term, actual in _actual_terms(st).items():
                loosened |= loosen(term, actual, i)
            item = (
                -st.step_time_s,
                -next(tick),
                PlanCandidate(over, st, float(bounds[i]), bool(sp.tiles[i])),
            )
            if len(best) < top:
                heapq.heappush(best, item)
            elif item > best[0]:
                heapq.heapreplace(best, item)
        if loosened:  # re-rank what is left under the scaled-down terms
            bounds = sp.bound_s(slack)
            rest = order[pos:]
            order = np.concatenate([order[:pos], rest[np.lexsort((~sp.tiles[rest], bounds[rest]))]])
        if progress and todo:
            left = int(np.count_nonzero(bounds[order[pos:]] < stop_s()))
            progress(n_evaluated, n_evaluated + max(1, left))  # done only at the end
        if not exact:
            break
    if progress:
        progress(n_evaluated, n_evaluated)
    plans = sorted(
        (c for _, _, c in best), key=lambda c: (c.step.step_time_s, not c.tiles_nvlink, c.bound_s)
    )
    return PlanSearch(
        plans=tuple(plans),
        n_space=len(sp),
        n_screened=n_screened,
        n_rejected=n_rejected,
        n_evaluated=n_evaluated,
        n_layouts=len(layouts),
        exact=exact,
        bound_slack=slack,
        time_s=time.perf_counter() - t0,
        timed_out=timed_out,
    )


def search_plans(
    scenario: Scenario,
    *,
    top: int = 5,
    shortlist: int | None = None,
    map_fn: MapFn = map,
    progress: Progress | None = None,
    tight: bool = False,
) -> list[PlanCandidate]:
    """Return the fastest feasible plans for the scenario's model and cluster, best first.

    The plans of :func:`plan_search` (branch and bound over :func:`plan_space`, exact
    unless ``shortlist`` caps the plans modelled in full; ``tight`` as there). Never
    returns an infeasible plan (an empty list when nothing fits).
    """
    found = plan_search(
        scenario, top=top, map_fn=map_fn, progress=progress, max_evaluations=shortlist, tight=tight
    )
    return list(found.plans)
