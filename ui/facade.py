"""Cached facades over the model: the only place the dashboard caches.

Results hold numpy arrays and lazily built graphs, so they are cached as shared immutable
resources (``st.cache_resource``) keyed by the frozen scenario, not pickled copies.
"""

from __future__ import annotations

import contextvars
import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

from fabric_model.collectives import (
    AUTO_CANDIDATES,
    AlgoModel,
    AlgorithmUnavailableError,
    CollectiveTime,
    FabricContext,
    algo_models,
    times_from_models,
)
from fabric_model.cost import BillOfMaterials, VendorComparison, bill_of_materials, compare_vendors
from fabric_model.design import build_topology
from fabric_model.errors import FabricModelError
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.topology import Topology
from fabric_model.training import Problem, StepResult, SweepPoint, sweep
from fabric_model.training import training_step as _training_step
from fabric_model.units import GIB
from fabric_model.validate.compare import LogComparison, compare_log
from fabric_model.validate.nccl_log import NcclTestsLog, parse_nccl_tests
from ui.compare_figures import ScenarioMetrics
from ui.training_figures import MoePoint

__all__ = [
    "COLLECTIVE_SIZES",
    "COMPUTE_BUDGET_S",
    "CURVE_SIZES",
    "DEFAULT_ALGORITHMS",
    "EFFECT_CASES",
    "EFFECT_SIZE_BYTES",
    "MOE_SKIPPED_REASON",
    "MOE_SWEEP_MAX_GPUS",
    "OP_ALGORITHMS",
    "SCALING_SIZES",
    "SUMMARY_SIZES",
    "CollectiveCurves",
    "CollectiveSummary",
    "acceptance_table",
    "bom",
    "check_fabric",
    "collective_curves",
    "collective_summary",
    "default_algorithms",
    "fabric_effects",
    "log_comparison",
    "moe_points",
    "nccl_log",
    "replica_scaling_efficiency",
    "scaling_line",
    "scaling_variant",
    "scenario_metrics",
    "topology",
    "training_step",
    "vendor_comparison",
]


@st.cache_resource(max_entries=64, show_spinner=False)
def topology(scenario: Scenario) -> Topology:
    """Build the scenario's topology (raises the model's errors)."""
    return build_topology(scenario)


@st.cache_resource(max_entries=64, show_spinner=False)
def bom(scenario: Scenario) -> BillOfMaterials:
    """Price the scenario's bill of materials."""
    return bill_of_materials(scenario)


@st.cache_resource(max_entries=64, show_spinner=False)
def vendor_comparison(scenario: Scenario) -> list[VendorComparison]:
    """Price the scenario's design on InfiniBand, Spectrum-X and RoCE."""
    return compare_vendors(scenario)


# --------------------------------------------------------------------------- collectives
#: Message sizes of the Collectives page: 8 B to 16 GiB in binary steps (32 sizes).
COLLECTIVE_SIZES: tuple[int, ...] = tuple(2**i for i in range(3, 35))

#: Algorithms the model runs each operation with, in display order (see
#: ``fabric_model.collectives.algorithms``); any other pairing raises "runs ... only".
OP_ALGORITHMS: dict[str, tuple[str, ...]] = {
    "allreduce": ("ring", "tree", "nvls", "sharp", "hierarchical"),
    "allgather": ("ring",),
    "reducescatter": ("ring",),
    "alltoall": ("direct", "hierarchical"),
}
#: What the page plots before the user picks (those that cannot run here are dropped).
DEFAULT_ALGORITHMS: dict[str, tuple[str, ...]] = {
    "allreduce": ("ring", "tree", "nvls", "sharp"),
    "allgather": ("ring",),
    "reducescatter": ("ring",),
    "alltoall": ("direct", "hierarchical"),
}

#: The "fabric effects" comparison: one large message, these (operation, algorithm) pairs.
EFFECT_SIZE_BYTES = 4 * GIB
EFFECT_CASES: tuple[tuple[str, str], ...] = (("allreduce", "ring"), ("alltoall", "hierarchical"))
EFFECT_VENDORS = ("infiniband", "spectrum-x", "roce")


@dataclass(frozen=True)
class CollectiveCurves:
    """One operation's curves on one scenario, as the Collectives page draws them.

    Attributes
    ----------
    op : str
        The collective (``allreduce``, ...).
    routing : str
        The routing policy the fabric runs (``adaptive``, ``ecmp``, ...).
    n_ranks : int
        GPUs in the collective.
    sizes : tuple[int, ...]
        Message sizes, bytes.
    curves : dict[str, tuple[CollectiveTime, ...]]
        Per requested algorithm that can run: its best protocol at every size.
    auto : tuple[CollectiveTime, ...]
        NCCL-like ``auto`` choice at every size (empty when nothing can run).
    models : dict[str, AlgoModel]
        The size-independent model behind each curve (NVLink-side / network-side bandwidth).
    unavailable : dict[str, str]
        Algorithms considered (requested, defaults, ``auto`` candidates) that cannot run
        here, with the model's reason.
    """

    op: str
    routing: str
    n_ranks: int
    sizes: tuple[int, ...]
    curves: dict[str, tuple[CollectiveTime, ...]]
    auto: tuple[CollectiveTime, ...]
    models: dict[str, AlgoModel]
    unavailable: dict[str, str]

    @property
    def ecmp(self) -> bool:
        """Tell whether routing hashes flows statically (results spread over ECMP seeds)."""
        return self.routing == "ecmp"


@st.cache_resource(max_entries=16, show_spinner=False)
def _fabric_context(scenario: Scenario) -> FabricContext:
    """Build the scenario's fabric, ready to solve patterns on (raises the model's errors)."""
    return FabricContext.from_scenario(scenario)


@st.cache_resource(max_entries=256, show_spinner=False)
def _algo_model(scenario: Scenario, op: str, algo: str) -> AlgoModel | str:
    """Build one algorithm's model, or return the reason it cannot run on this design."""
    ctx = _fabric_context(scenario)
    try:
        return algo_models(ctx, op, algo)[0]
    except AlgorithmUnavailableError as exc:
        return str(exc)


def _auto_candidates(scenario: Scenario, op: str) -> tuple[str, ...]:
    """Return the algorithms ``auto`` chooses among (as ``collectives.algo_models`` does)."""
    return tuple(a for a in AUTO_CANDIDATES[op] if a != "sharp" or scenario.fabric.sharp)


def _auto_models(scenario: Scenario, op: str) -> list[AlgoModel]:
    """Return the models ``auto`` chooses among, from the per-algorithm cache.

    Equal to ``algo_models(ctx, op, "auto")``, but every candidate's solve is the one the
    Collectives page, the Overview, What-if, Compare and the fabric effects share.
    """
    built = (_algo_model(scenario, op, a) for a in _auto_candidates(scenario, op))
    return [m for m in built if isinstance(m, AlgoModel)]


def check_fabric(scenario: Scenario) -> None:
    """Build the scenario's fabric (cached for the solves after); raise why it cannot be."""
    _fabric_context(scenario)


def default_algorithms(scenario: Scenario, op: str) -> tuple[str, ...]:
    """Return the default algorithms of ``op`` that can run on this design."""
    _fabric_context(scenario)  # an infeasible design raises here, not as a "reason"
    return tuple(
        a for a in DEFAULT_ALGORITHMS[op] if not isinstance(_algo_model(scenario, op, a), str)
    )


@st.cache_resource(max_entries=64, show_spinner=False)
def collective_curves(scenario: Scenario, op: str, algos: tuple[str, ...]) -> CollectiveCurves:
    """Compute the bus bandwidth curves of ``algos`` and ``auto`` over :data:`COLLECTIVE_SIZES`.

    ``auto`` reuses the per-algorithm models (one flow solve per algorithm), so it equals
    ``fabric_model.collectives.collective(scenario, op, "auto", sizes)``.

    Raises
    ------
    FabricModelError
        The design itself cannot be built.
    """
    ctx = _fabric_context(scenario)
    order = OP_ALGORITHMS[op]
    wanted = sorted(set(algos) & set(order), key=order.index)
    candidates = _auto_candidates(scenario, op)
    considered = dict.fromkeys([*wanted, *DEFAULT_ALGORITHMS[op], *candidates])
    built = {a: _algo_model(scenario, op, a) for a in considered}
    models = {a: m for a, m in built.items() if isinstance(m, AlgoModel)}
    unavailable = {a: m for a, m in built.items() if isinstance(m, str)}
    curves = {
        a: tuple(times_from_models([models[a]], COLLECTIVE_SIZES, a)) for a in wanted if a in models
    }
    auto_models = [models[a] for a in candidates if a in models]
    auto = tuple(times_from_models(auto_models, COLLECTIVE_SIZES, "auto")) if auto_models else ()
    return CollectiveCurves(
        op=op,
        routing=ctx.policy,
        n_ranks=ctx.n_ranks,
        sizes=COLLECTIVE_SIZES,
        curves=curves,
        auto=auto,
        models={a: models[a] for a in curves},
        unavailable=unavailable,
    )


def _vendor_variant(scenario: Scenario, vendor: str) -> Scenario:
    """Put the design on ``vendor``'s parts with its default routing (as the Cost page)."""
    if vendor == scenario.fabric.vendor:
        fabric = dataclasses.replace(scenario.fabric, routing="auto")
    else:
        fabric = dataclasses.replace(
            scenario.fabric, vendor=vendor, switch="auto", nic="auto", routing="auto"
        )
    return dataclasses.replace(scenario, fabric=fabric)


@st.cache_resource(max_entries=32, show_spinner=False)
def fabric_effects(scenario: Scenario) -> pd.DataFrame:
    """Time a large all-reduce (ring) and all-to-all (hierarchical) on each vendor's fabric.

    One row per (vendor, case): the :data:`EFFECT_SIZE_BYTES` row of the collective with the
    vendor's default routing and the scenario's placement (``what_if.placement``), or the
    reason it cannot be computed (``reason`` non-empty, numbers NaN).
    """
    rows = []
    for vendor in EFFECT_VENDORS:
        variant = _vendor_variant(scenario, vendor)
        try:
            routing = _fabric_context(variant).policy
            problem = ""
        except FabricModelError as exc:
            routing, problem = "", f"this design cannot be built on {vendor}: {exc}"
        for op, algo in EFFECT_CASES:
            try:
                model = problem or _algo_model(variant, op, algo)
            except FabricModelError as exc:  # e.g. a routing policy the family lacks
                model = f"cannot be computed on {vendor}: {exc}"
            row: dict[str, object] = {
                "vendor": vendor,
                "routing": routing,
                "op": op,
                "algo": algo,
                "size_bytes": EFFECT_SIZE_BYTES,
                "n_gpus": scenario.cluster.n_gpus,
                "placement": scenario.what_if.placement,
                "busbw_GBps": float("nan"),
                "busbw_min_GBps": float("nan"),
                "busbw_max_GBps": float("nan"),
                "busbw_large_GBps": float("nan"),
                "time_us": float("nan"),
                "proto": "",
                "bottleneck": "",
                "reason": "",
            }
            if isinstance(model, str):
                row["reason"] = model
            else:
                t = times_from_models([model], [EFFECT_SIZE_BYTES], algo)[0]
                row.update(
                    busbw_GBps=t.busbw_GBps,
                    busbw_min_GBps=t.busbw_min_GBps,
                    busbw_max_GBps=t.busbw_max_GBps,
                    busbw_large_GBps=model.busbw_Bps / 1e9,
                    time_us=t.time_us,
                    proto=t.proto,
                    bottleneck=t.bottleneck,
                )
            rows.append(row)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- validate
@st.cache_resource(max_entries=16, show_spinner=False)
def nccl_log(text: str, op: str | None) -> NcclTestsLog:
    """Parse an nccl-tests log (raises ``NcclLogError`` with the parser's message)."""
    return parse_nccl_tests(text, op=op)


@st.cache_resource(max_entries=32, show_spinner=False)
def log_comparison(
    text: str, op: str | None, scenario: Scenario, tolerance: float
) -> LogComparison:
    """Compare the parsed log with the model of ``scenario`` (raises the model's errors)."""
    return compare_log(nccl_log(text, op), scenario, tolerance=tolerance)


@st.cache_resource(max_entries=32, show_spinner=False)
def acceptance_table(scenario: Scenario, tolerance: float) -> Any:
    """Return the design's nccl-tests acceptance thresholds (raises for an impossible design)."""
    from fabric_model.validate.acceptance import acceptance_expectations

    return acceptance_expectations(scenario, tolerance=tolerance)


# ----------------------------------------------------------------------- Overview

#: Message sizes the Overview quotes: a latency-bound and a bandwidth-bound call.
SUMMARY_SIZES = (2**20, 2**30)
#: The Overview's curve: 8 B to 16 GiB, powers of four.
CURVE_SIZES = tuple(2**i for i in range(3, 35, 2))


@dataclass(frozen=True)
class CollectiveSummary:
    """All-reduce and all-to-all at the summary sizes, or why they could not be computed."""

    allreduce: tuple[CollectiveTime, ...]
    alltoall: tuple[CollectiveTime, ...]
    alltoall_error: str | None
    allreduce_curve: tuple[CollectiveTime, ...]


#: Above this many GPUs the Overview's all-to-all is the rail-aligned (PXN) variant only:
#: the direct one needs a flow-class solve of ~1 s there and is never faster on the
#: rail-optimized designs (the Collectives page still offers both).
SUMMARY_DIRECT_ALLTOALL_MAX_GPUS = 16_384


@st.cache_resource(max_entries=64, show_spinner=False)
def collective_summary(scenario: Scenario) -> CollectiveSummary:
    """NCCL-like ``auto`` all-reduce and all-to-all at 1 MiB and 1 GiB (one fabric build)."""
    _fabric_context(scenario)  # an infeasible design raises here, not as a "reason"
    ar_models = _auto_models(scenario, "allreduce")
    if not ar_models:
        raise AlgorithmUnavailableError("no algorithm can run allreduce on this design")
    allreduce = tuple(times_from_models(ar_models, SUMMARY_SIZES, "auto"))
    a2a: tuple[CollectiveTime, ...] = ()
    try:
        if scenario.cluster.n_gpus <= SUMMARY_DIRECT_ALLTOALL_MAX_GPUS:
            a2a_algo, a2a_models = "auto", _auto_models(scenario, "alltoall")
            error = None if a2a_models else "no all-to-all algorithm can run on this design"
        else:
            a2a_algo, built = "hierarchical", _algo_model(scenario, "alltoall", "hierarchical")
            a2a_models, error = ([], built) if isinstance(built, str) else ([built], None)
    except FabricModelError as exc:
        a2a_models, error = [], str(exc)
    if a2a_models:
        a2a = tuple(times_from_models(a2a_models, SUMMARY_SIZES, a2a_algo))
    curve = tuple(times_from_models(ar_models, CURVE_SIZES, "auto"))
    return CollectiveSummary(allreduce, a2a, error, curve)


# --------------------------------------------------------------------------- training

#: Cluster sizes the Scaling page offers: powers of two, 8 to 131,072.
#: The Scaling page's GPU counts, 8 to 1,048,576 (issue 17: designs beyond 131,072 build on
#: multi-plane fat-trees and dragonfly+; the page's default range stops at 131,072).
SCALING_SIZES = tuple(2**i for i in range(3, 21))
#: The MoE page's dense-vs-MoE sweep sizes: up to 131,072 (its expert all-to-all per size).
MOE_SWEEP_MAX_GPUS = 131_072


@st.cache_resource(max_entries=128, show_spinner=False)
def training_step(scenario: Scenario) -> StepResult:
    """One training step of the scenario (never raises for an infeasible plan)."""
    return _training_step(scenario)


def _variant(scenario: Scenario, **over: Any) -> Scenario:
    return apply_overrides(scenario, {k.replace("__", "."): v for k, v in over.items()})


#: Wall time one page's computation (the Scaling page's lines, the MoE page's points) may
#: take before it stops and shows what it has, s: a big preset must never hold a session
#: for minutes.
COMPUTE_BUDGET_S = 30.0


class _CutShortError(Exception):
    """Carries a partial result out of a cached facade: raised, so it is never cached."""

    def __init__(self, value: Any) -> None:
        super().__init__("cut short by the time budget")
        self.value = value


def _outside_cache(callback: Any) -> Any:
    """Run ``callback`` in the caller's context, not the cached function's.

    Streamlit records the elements a cached function draws and replays them on a cache hit;
    a progress bar the page made outside the function cannot be replayed (the hit raises
    ``CacheReplayClosureError``). Its context variables, copied here, hold no recording.
    """
    if callback is None:
        return None
    context = contextvars.copy_context()
    return lambda *args: context.run(callback, *args)


def scaling_variant(scenario: Scenario, topology: str, vendor: str) -> Scenario:
    """Return the scenario on another topology/vendor, as the Scaling page sweeps it.

    The vendor's default routing applies (adaptive for InfiniBand and Spectrum-X, ECMP for
    RoCE) unless the scenario's vendor is the one asked for. Raises the model's error.
    """
    over: dict[str, Any] = {"fabric.topology": topology, "fabric.vendor": vendor}
    if vendor != scenario.fabric.vendor:
        over["fabric.routing"] = "auto"
    if topology != "fat-tree":
        over["fabric.tiers"] = "auto"
    return apply_overrides(scenario, over)


@st.cache_resource(max_entries=64, show_spinner=False)
def _scaling_line(
    scenario: Scenario,
    topology: str,
    vendor: str,
    gpus: tuple[int, ...],
    scaling: str,
    _deadline: float | None,
    _progress: Any,
) -> tuple[SweepPoint, ...]:
    try:
        variant = scaling_variant(scenario, topology, vendor)
    except FabricModelError as exc:
        return tuple(
            SweepPoint(n, StepResult(n, False, ()), math.nan, error=str(exc)) for n in gpus
        )
    points = tuple(
        sweep(variant, list(gpus), scaling=scaling, deadline=_deadline, progress=_progress)
    )
    if any(p.skipped for p in points):
        raise _CutShortError(points)
    return points


def scaling_line(
    scenario: Scenario,
    topology: str,
    vendor: str,
    gpus: tuple[int, ...],
    scaling: str,
    *,
    deadline: float | None = None,
    progress: Any = None,
) -> tuple[SweepPoint, ...]:
    """Sweep the scenario's model and plan over ``gpus`` on another topology/vendor.

    See :func:`scaling_variant`. ``deadline`` (``time.monotonic()``) and ``progress``
    (``progress(done, total)`` per size) go to :func:`fabric_model.training.sweep`; a line
    the deadline cut short has ``skipped`` points and is not cached (the model's own caches
    keep the sizes it did model, so the next call goes further).
    """
    try:
        return _scaling_line(
            scenario, topology, vendor, gpus, scaling, deadline, _outside_cache(progress)
        )
    except _CutShortError as cut:
        return tuple(cut.value)


#: The reason of an MoE point the time budget left unmodelled.
MOE_SKIPPED_REASON = "not modelled: the time budget ran out before this point"


@st.cache_resource(max_entries=64, show_spinner=False)
def _moe_points(
    scenario: Scenario,
    topology: str,
    eps: tuple[int, ...],
    skews: tuple[float, ...],
    _deadline: float | None,
) -> tuple[MoePoint, ...]:
    out = []
    base_over: dict[str, Any] = {"fabric.topology": topology}
    if topology != "fat-tree":
        base_over["fabric.tiers"] = "auto"
    cut = False
    for ep in eps:
        for skew in skews:
            if _deadline is not None and time.monotonic() >= _deadline:
                cut = True
                step = StepResult(
                    scenario.cluster.n_gpus, False, (Problem("parallel.ep", MOE_SKIPPED_REASON),)
                )
                out.append(MoePoint(topology, ep, skew, step))
                continue
            try:
                s = apply_overrides(
                    scenario, {**base_over, "parallel.ep": ep, "model.routing_skew": skew}
                )
                step = _training_step(s)
            except FabricModelError as exc:
                step = StepResult(
                    scenario.cluster.n_gpus, False, (Problem("fabric.topology", str(exc)),)
                )
            out.append(MoePoint(topology, ep, skew, step))
    if cut:
        raise _CutShortError(tuple(out))
    return tuple(out)


def moe_points(
    scenario: Scenario,
    topology: str,
    eps: tuple[int, ...],
    skews: tuple[float, ...],
    *,
    deadline: float | None = None,
) -> tuple[MoePoint, ...]:
    """MoE steps over EP degrees (at the scenario's skew) and skews (at its EP degree).

    No point starts after ``deadline`` (``time.monotonic()``): those left are infeasible
    with :data:`MOE_SKIPPED_REASON`, and the cut-short set is not cached.
    """
    try:
        return _moe_points(scenario, topology, eps, skews, deadline)
    except _CutShortError as cut:
        return tuple(cut.value)


@st.cache_resource(max_entries=64, show_spinner=False)
def replica_scaling_efficiency(scenario: Scenario) -> tuple[float, int] | None:
    """Weak-scaling efficiency vs the smallest size the plan runs at, and that size.

    Sizes tried: one data-parallel replica (``tp x pp x cp`` GPUs, times ``ep``) doubled
    until it fits (memory shrinks with ZeRO sharding as data parallelism grows).
    """
    par = scenario.parallel
    n0 = par.tp * par.pp * par.cp * max(1, par.ep)
    n = scenario.cluster.n_gpus
    while n0 < n:  # small sizes are cheap: try them one at a time, smallest first
        pts = sweep(scenario, [n0, n], scaling="weak")
        if pts[0].feasible:
            return (pts[1].scaling_efficiency, n0) if pts[1].feasible else None
        n0 *= 2
    return (1.0, n) if n0 == n and training_step(scenario).feasible else None


# ------------------------------------------------------------------ what-if and compare


@st.cache_resource(max_entries=64, show_spinner=False)
def scenario_metrics(scenario: Scenario) -> ScenarioMetrics:
    """One scenario's headline results for the What-if and Compare pages (never raises).

    The step, the 1 GiB all-reduce and all-to-all (NCCL-like choice, as the Overview quotes
    them), the all-reduce curve, capex, power, switches and hops; a design that cannot be
    built comes back with the model's message as ``error``.
    """
    try:
        topo = topology(scenario)
        bill = bom(scenario)
        summary = collective_summary(scenario)
        step = training_step(scenario)
    except FabricModelError as exc:
        return ScenarioMetrics(scenario, error=str(exc))
    big = SUMMARY_SIZES.index(GIB)
    return ScenarioMetrics(
        scenario,
        step=step,
        allreduce=summary.allreduce[big],
        alltoall=summary.alltoall[big] if summary.alltoall else None,
        alltoall_error=summary.alltoall_error or "",
        allreduce_curve=summary.allreduce_curve,
        capex_usd=bill.capex_usd,
        capex_per_gpu_usd=bill.capex_per_gpu_usd,
        power_per_gpu_w=bill.power_per_gpu_w,
        n_switches=float(topo.n_switches),
        max_switch_hops=float(topo.max_switch_hops),
    )
