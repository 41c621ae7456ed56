"""Cached facades over the model: the only place the dashboard caches.

Results hold numpy arrays and lazily built graphs, so they are cached as shared immutable
resources (``st.cache_resource``) keyed by the frozen scenario, not pickled copies.
"""

from __future__ import annotations

import contextvars
import math
import time
from dataclasses import dataclass
from typing import Any

import pandas as pd

from fabric_model.catalog import load_catalog
from fabric_model.collectives import (
    AlgoModel,
    AlgorithmUnavailableError,
    CollectiveTime,
    FabricContext,
    algo_models,
    auto_candidates,
    registry,
    times_from_models,
    with_tails,
)
from fabric_model.errors import FabricModelError
from fabric_model.plant.cost import (
    BillOfMaterials,
    VendorComparison,
    bill_of_materials,
    compare_vendors,
)
from fabric_model.plant.design import build_topology
from fabric_model.plant.ocs import ocs_summary
from fabric_model.report import health as _health
from fabric_model.report import summaries
from fabric_model.report.family_compare import compare_families
from fabric_model.report.summaries import (
    CURVE_SIZES,
    SUMMARY_SIZES,
    CollectiveSummary,
    ScenarioMetrics,
    scaling_variant,
)
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.topology import Topology
from fabric_model.training import Problem, StepResult, SweepPoint, sweep
from fabric_model.training import training_step as _training_step
from fabric_model.units import GIB
from fabric_model.validate.compare import LogComparison, compare_log
from fabric_model.validate.nccl_log import NcclTestsLog, parse_nccl_tests
from ui.cache_keys import scenario_cache
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
    "family_comparison",
    "health",
    "hybrid_comparison",
    "log_comparison",
    "moe_points",
    "nccl_log",
    "ocs_frame",
    "replica_scaling_efficiency",
    "scaling_line",
    "scaling_variant",
    "scenario_metrics",
    "topology",
    "training_step",
    "vendor_comparison",
]


@scenario_cache(64)
def topology(scenario: Scenario) -> Topology:
    """Build the scenario's topology (raises the model's errors)."""
    return build_topology(scenario)


@scenario_cache(64)
def bom(scenario: Scenario) -> BillOfMaterials:
    """Price the scenario's bill of materials."""
    return bill_of_materials(scenario)


@scenario_cache(64)
def vendor_comparison(scenario: Scenario) -> list[VendorComparison]:
    """Price the scenario's design on InfiniBand, Spectrum-X and RoCE."""
    return compare_vendors(scenario)


@scenario_cache(16)
def hybrid_comparison(scenario: Scenario) -> pd.DataFrame:
    """Price a hybrid against one fat-tree of the same size and vendor (one row each)."""
    from fabric_model.plant.cost import compare_with_fat_tree

    return pd.DataFrame(compare_with_fat_tree(scenario))


@scenario_cache(16)
def family_comparison(scenario: Scenario) -> pd.DataFrame:
    """Return one row per compared family on the scenario's GPUs (numbers; NaN = cannot)."""
    return pd.DataFrame([r.to_dict() for r in compare_families(scenario)])


@scenario_cache(16)
def ocs_frame(scenario: Scenario) -> pd.DataFrame:
    """Return an OCS design's blocks, circuits, optics, shares and availability as rows."""
    o = ocs_summary(scenario, bom(scenario))
    spare = o["n_blocks_built"] - o["n_blocks"]
    rows = [
        (
            "blocks",
            f"{o['n_blocks']:,} {o['block']} blocks of {o['block_gpus']:,} GPUs"
            + (f" + {spare} spare" if spare else "")
            + f", {o['uplinks_per_block']:,} uplinks each",
        ),
        (
            "optical circuit switches",
            f"{o['n_ocs']:,} x {o['ocs_switch']}: {o['ocs_ports_used']:,} of "
            f"{o['n_ocs'] * o['ocs_ports']:,} ports ({o['fibers_per_uplink']} per uplink)",
        ),
        ("uplink transceiver", str(o["uplink_transceiver"])),
        (
            "circuits",
            f"{o['n_circuits']:,} {o['circuits']}; reconfigure {o['reconfigure']}, "
            f"{o['reconfig_ms']:g} ms",
        ),
        (
            "OCS + uplink optics",
            f"${o['ocs_and_optics_capex_usd'] / 1e6:,.2f} M "
            f"({o['ocs_and_optics_share_of_cluster_capex']:.2%} of cluster capex), "
            f"{o['ocs_and_optics_power_w'] / 1e3:,.1f} kW "
            f"({o['ocs_and_optics_share_of_cluster_power']:.2%} of cluster power)",
        ),
        (
            "availability",
            f"a block {o['block_availability']:.3%}; the job can run "
            f"{o['job_availability_with_ocs']:.2%} of the time with the OCS, "
            f"{o['job_availability_fixed_wiring']:.2%} with fixed wiring",
        ),
    ]
    return pd.DataFrame(rows, columns=["what", "value"])


# --------------------------------------------------------------------------- collectives
#: Message sizes of the Collectives page: 8 B to 16 GiB in binary steps (32 sizes).
COLLECTIVE_SIZES: tuple[int, ...] = tuple(2**i for i in range(3, 35))

#: Algorithms the model runs each operation with, in display order; any other pairing raises
#: "runs ... only" (a view of ``fabric_model.collectives.registry``).
OP_ALGORITHMS: dict[str, tuple[str, ...]] = registry.OP_ALGORITHMS
#: What the page plots before the user picks (those that cannot run here are dropped).
DEFAULT_ALGORITHMS: dict[str, tuple[str, ...]] = registry.DEFAULT_ALGORITHMS

#: The "fabric effects" comparison: one large message, these (operation, algorithm) pairs.
EFFECT_SIZE_BYTES = 4 * GIB
EFFECT_CASES: tuple[tuple[str, str], ...] = (("allreduce", "ring"), ("alltoall", "hierarchical"))
EFFECT_VENDORS = tuple(k for k, v in load_catalog().vendors.items() if v.compared)


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


@scenario_cache(16)
def _fabric_context(scenario: Scenario) -> FabricContext:
    """Build the scenario's fabric, ready to solve patterns on (raises the model's errors)."""
    return FabricContext.from_scenario(scenario)


@scenario_cache(256)
def _algo_model(scenario: Scenario, op: str, algo: str) -> AlgoModel | str:
    """Build one algorithm's model, or return the reason it cannot run on this design."""
    ctx = _fabric_context(scenario)
    try:
        return algo_models(ctx, op, algo)[0]
    except AlgorithmUnavailableError as exc:
        return str(exc)


def _auto_candidates(scenario: Scenario, op: str) -> tuple[str, ...]:
    """Return the algorithms ``auto`` chooses among (as ``collectives.algo_models`` does)."""
    return auto_candidates(scenario.fabric, op, scenario.nccl)


def _cached_models(scenario: Scenario) -> summaries.ModelOf:
    """Return the per-algorithm model cache of ``scenario`` as a ``summaries.ModelOf``.

    Every candidate's solve is the one the Collectives page, the Overview, What-if, Compare
    and the fabric effects share.
    """
    return lambda op, algo: _algo_model(scenario, op, algo)


def check_fabric(scenario: Scenario) -> None:
    """Build the scenario's fabric (cached for the solves after); raise why it cannot be."""
    _fabric_context(scenario)


def default_algorithms(scenario: Scenario, op: str) -> tuple[str, ...]:
    """Return the default algorithms of ``op`` that can run on this design."""
    _fabric_context(scenario)  # an infeasible design raises here, not as a "reason"
    return tuple(
        a for a in DEFAULT_ALGORITHMS[op] if not isinstance(_algo_model(scenario, op, a), str)
    )


@scenario_cache(64)
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
    tails = scenario.tails

    def timed(ms: list[AlgoModel], algo: str) -> tuple[CollectiveTime, ...]:
        rows = times_from_models(ms, COLLECTIVE_SIZES, algo)
        return tuple(with_tails(r, tails) for r in rows) if tails.enabled else tuple(rows)

    curves = {a: timed([models[a]], a) for a in wanted if a in models}
    auto_models = [models[a] for a in candidates if a in models]
    auto = timed(auto_models, "auto") if auto_models else ()
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


@scenario_cache(32)
def fabric_effects(scenario: Scenario) -> pd.DataFrame:
    """Time a large all-reduce (ring) and all-to-all (hierarchical) on each vendor's fabric.

    One row per (vendor, case): the :data:`EFFECT_SIZE_BYTES` row of the collective with the
    vendor's default routing and the scenario's placement (``what_if.placement``), or the
    reason it cannot be computed (``reason`` non-empty, numbers NaN): the rows of
    :func:`fabric_model.report.summaries.fabric_effect_rows` over the per-algorithm cache.
    """
    rows = summaries.fabric_effect_rows(
        scenario,
        EFFECT_VENDORS,
        EFFECT_CASES,
        EFFECT_SIZE_BYTES,
        routing_of=lambda variant: _fabric_context(variant).policy,
        model_of=_cached_models,
    )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- validate
@scenario_cache(16)
def nccl_log(text: str, op: str | None) -> NcclTestsLog:
    """Parse an nccl-tests log (raises ``NcclLogError`` with the parser's message)."""
    return parse_nccl_tests(text, op=op)


@scenario_cache(32)
def log_comparison(
    text: str, op: str | None, scenario: Scenario, tolerance: float
) -> LogComparison:
    """Compare the parsed log with the model of ``scenario`` (raises the model's errors)."""
    return compare_log(nccl_log(text, op), scenario, tolerance=tolerance)


@scenario_cache(32)
def acceptance_table(scenario: Scenario, tolerance: float) -> Any:
    """Return the design's nccl-tests acceptance thresholds (raises for an impossible design)."""
    from fabric_model.validate.acceptance import acceptance_expectations

    return acceptance_expectations(scenario, tolerance=tolerance, catches=True)


# ----------------------------------------------------------------------- Overview

# SUMMARY_SIZES, CURVE_SIZES and CollectiveSummary (and the all-to-all's GPU limit) live in
# fabric_model.report.summaries (imported above: the report and the CLI compute the same numbers).


@scenario_cache(64)
def collective_summary(scenario: Scenario) -> CollectiveSummary:
    """NCCL-like ``auto`` all-reduce and all-to-all at 1 MiB and 1 GiB (one fabric build).

    Cached :func:`fabric_model.report.summaries.collective_summary` over the per-algorithm cache;
    raises ``AlgorithmUnavailableError`` when no all-reduce algorithm runs.
    """
    _fabric_context(scenario)  # an infeasible design raises here, not as a "reason"
    summary = summaries.collective_summary(scenario, _cached_models(scenario))
    if summary.allreduce_error:
        raise AlgorithmUnavailableError(summary.allreduce_error)
    return summary


# --------------------------------------------------------------------------- training

#: Cluster sizes the Scaling page offers: powers of two, 8 to 131,072.
#: The Scaling page's GPU counts, 8 to 1,048,576 (issue 17: designs beyond 131,072 build on
#: multi-plane fat-trees and dragonfly+; the page's default range stops at 131,072).
SCALING_SIZES = tuple(2**i for i in range(3, 21))
#: The MoE page's dense-vs-MoE sweep sizes: up to 131,072 (its expert all-to-all per size).
MOE_SWEEP_MAX_GPUS = 131_072


@scenario_cache(128)
def training_step(scenario: Scenario) -> StepResult:
    """One training step of the scenario (never raises for an infeasible plan)."""
    return _training_step(scenario)


@scenario_cache(32)
def health(scenario: Scenario) -> _health.Health | None:
    """Return the step's p50/p99 and each failure mode's cost (``report.health``).

    Each step goes through :func:`training_step`'s cache, so a mode the What-if table also
    models is solved once.
    """
    return _health.health(scenario, training_step)


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


@scenario_cache(64)
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


@scenario_cache(64)
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


@scenario_cache(64)
def replica_scaling_efficiency(scenario: Scenario) -> tuple[float, int] | None:
    """Return :func:`fabric_model.report.summaries.replica_scaling_efficiency`, cached."""
    return summaries.replica_scaling_efficiency(scenario, training_step(scenario))


# ------------------------------------------------------------------ what-if and compare


@scenario_cache(64)
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
    return summaries.scenario_metrics(scenario, topology=topo, bom=bill, summary=summary, step=step)
