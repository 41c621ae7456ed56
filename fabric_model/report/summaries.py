"""The numbers the dashboard's pages, the HTML report and the command line show, computed once.

Pure functions over model results: no streamlit, no plotly, no caching. ``ui.facade`` caches
them (its solves are shared between pages), ``ui.report`` and ``fabric_model.cli`` call them
directly, so a headline number (step time, MFU, exposed communication share, the 1 GiB
all-reduce and all-to-all, a vendor's capex per GPU, a dimension's hidden communication) is
derived in one place and every view shows the same value.

- :func:`step_headline`: the training step's headline figures and shares of the step;
- :func:`comm_breakdown`: communication per parallel dimension (sent, exposed, hidden);
- :func:`collective_summary`: NCCL-like ``auto`` all-reduce and all-to-all at the headline
  sizes plus the all-reduce curve, over any source of per-algorithm models (cached or not);
- :func:`scenario_metrics` / :class:`ScenarioMetrics`: one scenario's headline results, the
  What-if and Compare pages' columns;
- :func:`vendor_rows`: the same design on each vendor, one row per vendor;
- :func:`versus_best`, :func:`fabric_gap_sentence`: each design against the best one at each
  size, and the one sentence saying where the fabric matters (Scaling and MoE pages);
- :func:`scaling_variant`, :func:`vendor_variant`, :func:`replica_scaling_efficiency`: the
  scenario variants the Scaling, Overview and Collectives pages sweep.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fabric_model.errors import FabricModelError
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.units import GIB

if TYPE_CHECKING:  # the collectives and training models load numba: imported where used,
    # so ``python -m fabric_model bom`` (vendor rows only) starts as fast as before
    from fabric_model.collectives import AlgoModel, CollectiveTime, FabricContext
    from fabric_model.plant.cost import BillOfMaterials, VendorComparison
    from fabric_model.scenario.tails import TailsSpec
    from fabric_model.topology import Topology
    from fabric_model.training import StepResult, SweepPoint

__all__ = [
    "CURVE_SIZES",
    "HEADLINE_BYTES",
    "NEGLIGIBLE_GAP_PCT",
    "SCENARIO_METRIC_KEYS",
    "SUMMARY_DIRECT_ALLTOALL_MAX_GPUS",
    "SUMMARY_SIZES",
    "VERSUS_BEST_METRICS",
    "CollectiveSummary",
    "DimComm",
    "GapRow",
    "ModelOf",
    "ScenarioMetrics",
    "StepHeadline",
    "VendorRow",
    "auto_candidates",
    "auto_models",
    "collective_summary",
    "comm_breakdown",
    "fabric_effect_rows",
    "fabric_gap_sentence",
    "models_on",
    "replica_scaling_efficiency",
    "scaling_variant",
    "scenario_metrics",
    "step_headline",
    "tail_scaling_efficiency",
    "vendor_rows",
    "vendor_variant",
    "versus_best",
]

NAN = math.nan

#: The headline message size of the collective numbers, bytes per GPU.
HEADLINE_BYTES = GIB
#: Message sizes the Overview quotes: a latency-bound and a bandwidth-bound call, bytes.
SUMMARY_SIZES: tuple[int, ...] = (2**20, 2**30)
#: The Overview's all-reduce curve: 8 B to 16 GiB, powers of four, bytes.
CURVE_SIZES: tuple[int, ...] = tuple(2**i for i in range(3, 35, 2))
#: Above this many GPUs the summary's all-to-all is the rail-aligned (PXN) variant only:
#: the direct one needs a flow-class solve of ~1 s there and is never faster on the
#: rail-optimized designs, so the shortcut applies to those only (the Collectives page still
#: offers both; a design without rail-optimized wiring runs ``auto`` at every size).
SUMMARY_DIRECT_ALLTOALL_MAX_GPUS = 16_384


# --------------------------------------------------------------------------- training step
@dataclass(frozen=True)
class StepHeadline:
    """A feasible training step's headline figures (times in s, shares as fractions).

    ``exposed_comm_share`` = exposed communication / step time; ``compute_share`` = compute /
    step time; ``bubble_share`` = the pipeline bubble's fraction of the step
    (``StepResult.bubble_fraction``).
    """

    plan_label: str
    step_time_s: float
    compute_s: float
    imbalance_s: float
    bubble_s: float
    exposed_comm_s: float
    exposed_comm_share: float
    compute_share: float
    bubble_share: float
    mfu: float
    tokens_per_s: float
    tokens_per_step: float
    micro_batches: int
    pp: int
    optimizer_s: float = 0.0  # the optimizer step (training.dp_overlap = auto)
    offload_s: float = 0.0  # activation offload not hidden by compute
    scale_out_share: float = math.nan
    scale_up_share: float = math.nan
    #: p50 and p99 over iterations (``tails.*``); ``step_time_s`` when tails are disabled
    step_time_p50_s: float = math.nan
    step_time_p99_s: float = math.nan

    @property
    def tail_sentence(self) -> str:
        """``p50 X s, p99 Y s (+Z % over the deterministic step)`` ('' without a spread)."""
        spread = self.step_time_p99_s > self.step_time_s
        if not (spread or self.step_time_p50_s != self.step_time_s):
            return ""
        return (
            f"p50 {self.step_time_p50_s:,.3g} s, p99 {self.step_time_p99_s:,.3g} s "
            f"(+{self.step_time_p99_s / self.step_time_s - 1:.1%} over the "
            f"{self.step_time_s:,.3g} s of every rank at its mean)"
        )

    @property
    def fabric_split(self) -> str:
        """``scale-out fabric X %, NVLink Y %`` of the step (issue 25, N6)."""
        return f"scale-out fabric {self.scale_out_share:.1%}, NVLink {self.scale_up_share:.1%}"


def step_headline(step: StepResult | None) -> StepHeadline | None:
    """Return the headline figures of a feasible step, None when the plan cannot run.

    >>> step_headline(None) is None
    True
    """
    if step is None or not step.feasible or step.plan is None:
        return None
    t = step.step_time_s
    return StepHeadline(
        plan_label=step.plan.label(),
        step_time_s=t,
        compute_s=step.compute_s,
        imbalance_s=step.imbalance_s,
        bubble_s=step.bubble_s,
        exposed_comm_s=step.exposed_comm_s,
        exposed_comm_share=step.exposed_comm_s / t,
        compute_share=step.compute_s / t,
        bubble_share=step.bubble_fraction,
        mfu=step.mfu,
        tokens_per_s=step.tokens_per_s,
        tokens_per_step=step.tokens_per_step,
        micro_batches=step.plan.micro_batches,
        pp=step.plan.pp,
        scale_out_share=step.scale_out_share_of_step,
        scale_up_share=step.scale_up_share_of_step,
        optimizer_s=step.optimizer_s,
        offload_s=step.offload_s,
        step_time_p50_s=step.step_time_p50_s,
        step_time_p99_s=step.step_time_p99_s,
    )


@dataclass(frozen=True)
class DimComm:
    """One parallel dimension's communication per step.

    ``hidden_share`` = 1 - exposed / sent (the part overlapped with compute);
    ``step_share`` = exposed / step time.
    """

    dim: str
    comm_s: float
    exposed_s: float
    hidden_share: float
    step_share: float
    detail: str


def comm_breakdown(step: StepResult) -> tuple[DimComm, ...]:
    """Return the dimensions that communicate (``comm_s > 0``), in ``DIMS`` order.

    Empty for an infeasible step.
    """
    from fabric_model.training import DIMS

    if not step.feasible:
        return ()
    out = []
    for d in DIMS:
        comm = step.comm_s.get(d, 0.0)
        if comm <= 0:
            continue
        exposed = step.exposed_s.get(d, 0.0)
        out.append(
            DimComm(
                dim=d,
                comm_s=comm,
                exposed_s=exposed,
                hidden_share=1 - exposed / comm,
                step_share=exposed / step.step_time_s,
                detail=step.comm_detail.get(d, ""),
            )
        )
    return tuple(out)


# ----------------------------------------------------------------------------- collectives
#: Where per-algorithm models come from: ``model_of(op, algo)`` returns the model, or the
#: reason (text or the model's exception) it cannot run on this design. ``ui.facade``
#: passes its cached one, the report and the CLI :func:`models_on` a built fabric.
ModelOf = Callable[[str, str], "AlgoModel | str | Exception"]


def models_on(ctx: FabricContext) -> ModelOf:
    """Return a :data:`ModelOf` that builds each model on ``ctx`` (uncached)."""
    from fabric_model.collectives import AlgorithmUnavailableError, algo_models

    def model_of(op: str, algo: str) -> AlgoModel | str | Exception:
        try:
            return algo_models(ctx, op, algo)[0]
        except AlgorithmUnavailableError as exc:
            return exc

    return model_of


def auto_candidates(scenario: Scenario, op: str) -> tuple[str, ...]:
    """Return the algorithms NCCL-like ``auto`` chooses among for ``op`` on this scenario.

    As ``fabric_model.collectives.algo_models(ctx, op, "auto")``: SHARP only with
    ``fabric.sharp``, NVLS only with ``fabric.nvls``, and the ``nccl.*`` release, registered
    buffers and NCCL_ALGO.
    """
    from fabric_model.collectives.registry import auto_candidates as registry_candidates

    return registry_candidates(scenario.fabric, op, scenario.nccl)


def auto_models(
    scenario: Scenario, op: str, model_of: ModelOf
) -> tuple[list[AlgoModel], list[tuple[str, Exception]]]:
    """Return the models ``auto`` chooses among and, for each candidate that cannot run, why."""
    from fabric_model.collectives import AlgoModel, AlgorithmUnavailableError

    models: list[AlgoModel] = []
    reasons: list[tuple[str, Exception]] = []
    for algo in auto_candidates(scenario, op):
        built = model_of(op, algo)
        if isinstance(built, AlgoModel):
            models.append(built)
        else:
            why = built if isinstance(built, Exception) else AlgorithmUnavailableError(built)
            reasons.append((algo, why))
    return models, reasons


@dataclass(frozen=True)
class CollectiveSummary:
    """All-reduce and all-to-all at the summary sizes, or why they could not be computed.

    Attributes
    ----------
    allreduce : tuple of CollectiveTime
        NCCL-like ``auto`` all-reduce at each summary size (empty: ``allreduce_error``).
    alltoall : tuple of CollectiveTime
        All-to-all at each summary size (empty: ``alltoall_error``).
    alltoall_error : str or None
        Why the all-to-all could not be computed (None when it could).
    allreduce_curve : tuple of CollectiveTime
        ``auto`` all-reduce at each curve size.
    allreduce_error : str
        Why no all-reduce algorithm runs ('' when one does).
    """

    allreduce: tuple[CollectiveTime, ...]
    alltoall: tuple[CollectiveTime, ...]
    alltoall_error: str | None
    allreduce_curve: tuple[CollectiveTime, ...]
    allreduce_error: str = ""

    def at(self, size_bytes: int = HEADLINE_BYTES) -> tuple[CollectiveTime | None, ...]:
        """Return (all-reduce, all-to-all) at ``size_bytes`` (None where not computed)."""
        return tuple(
            next((r for r in rows if r.size_bytes == size_bytes), None)
            for rows in (self.allreduce, self.alltoall)
        )


def collective_summary(
    scenario: Scenario,
    model_of: ModelOf,
    *,
    sizes: Sequence[int] = SUMMARY_SIZES,
    curve_sizes: Sequence[int] = CURVE_SIZES,
    direct_alltoall_max_gpus: int | None = SUMMARY_DIRECT_ALLTOALL_MAX_GPUS,
) -> CollectiveSummary:
    """NCCL-like ``auto`` all-reduce and all-to-all at ``sizes`` and the all-reduce curve.

    Parameters
    ----------
    scenario
        The what-if (its fabric already built by ``model_of``'s source).
    model_of
        Source of per-algorithm models (see :data:`ModelOf`).
    sizes, curve_sizes
        Message sizes of the headline numbers and of the all-reduce curve, bytes per GPU.
    direct_alltoall_max_gpus
        Above this many GPUs a rail-optimized design's all-to-all is the hierarchical (PXN)
        one only (see :data:`SUMMARY_DIRECT_ALLTOALL_MAX_GPUS`); None: ``auto`` at every size.

    Returns
    -------
    CollectiveSummary
        Never raises for an algorithm that cannot run: the reasons are in
        ``allreduce_error`` / ``alltoall_error`` (one line naming each candidate's reason).
    """
    from fabric_model.collectives import (
        AlgoModel,
        times_from_models,
        unavailable_message,
        with_tails,
    )

    def timed(models: list[AlgoModel], at: Sequence[int], algo: str) -> tuple[Any, ...]:
        rows = times_from_models(models, list(at), algo)
        if scenario.tails.enabled:  # p50 / p99 over iterations (tails.*)
            rows = [with_tails(r, scenario.tails) for r in rows]
        return tuple(rows)

    ar_models, ar_reasons = auto_models(scenario, "allreduce", model_of)
    if ar_models:
        allreduce = timed(ar_models, sizes, "auto")
        curve = timed(ar_models, curve_sizes, "auto")
        ar_error = ""
    else:
        allreduce, curve = (), ()
        ar_error = unavailable_message("allreduce", ar_reasons)
    a2a: tuple[CollectiveTime, ...] = ()
    error: str | None
    try:
        limit = direct_alltoall_max_gpus
        shortcut = limit is not None and scenario.fabric.rail_optimized
        if not shortcut or scenario.cluster.n_gpus <= (limit or 0):
            a2a_algo = "auto"
            a2a_models, a2a_reasons = auto_models(scenario, "alltoall", model_of)
            error = None if a2a_models else unavailable_message("alltoall", a2a_reasons)
        else:
            a2a_algo, built = "hierarchical", model_of("alltoall", "hierarchical")
            a2a_models, error = (
                ([built], None) if isinstance(built, AlgoModel) else ([], str(built))
            )
    except FabricModelError as exc:
        a2a_models, error = [], str(exc)
    if a2a_models:
        a2a = timed(a2a_models, sizes, a2a_algo)
    return CollectiveSummary(allreduce, a2a, error, curve, ar_error)


# ------------------------------------------------------------------------ scenario metrics
#: The headline values :meth:`ScenarioMetrics.values` returns, each in the unit its name ends
#: with (``share`` = fraction of the step); the What-if and Compare tables show them.
SCENARIO_METRIC_KEYS: tuple[str, ...] = (
    "n_gpus",
    "step_time_s",
    "mfu",
    "tokens_per_s",
    "exposed_comm_share",
    "bubble_share",
    "allreduce_busbw_GBps",
    "allreduce_time_us",
    "alltoall_busbw_GBps",
    "alltoall_time_us",
    "capex_usd",
    "capex_per_gpu_usd",
    "power_per_gpu_w",
    "n_switches",
    "max_switch_hops",
)


@dataclass(frozen=True)
class ScenarioMetrics:
    """One scenario's headline results (What-if and Compare), or why it cannot be built.

    Attributes
    ----------
    scenario : Scenario
        The scenario measured.
    error : str
        Why the design cannot be built (the model's message); empty when it can. Every other
        field is empty then.
    step : StepResult or None
        The training step (``step.feasible`` False: the plan cannot run, ``step.reason``).
    allreduce, alltoall : CollectiveTime or None
        NCCL-like ``auto`` all-reduce and all-to-all at 1 GiB per GPU.
    alltoall_error : str
        Why all-to-all could not be computed (empty when it could).
    allreduce_curve : tuple of CollectiveTime
        ``auto`` all-reduce over message sizes (8 B to 16 GiB).
    capex_usd, capex_per_gpu_usd, power_per_gpu_w : float
        Network capex (USD), per GPU (USD) and network power per GPU (W).
    n_switches, max_switch_hops : float
        Switches in the fabric and the longest switch path (hops); NaN when not built.
    """

    scenario: Scenario
    error: str = ""
    step: StepResult | None = None
    allreduce: CollectiveTime | None = None
    alltoall: CollectiveTime | None = None
    alltoall_error: str = ""
    allreduce_curve: tuple[CollectiveTime, ...] = ()
    capex_usd: float = NAN
    capex_per_gpu_usd: float = NAN
    power_per_gpu_w: float = NAN
    n_switches: float = NAN
    max_switch_hops: float = NAN

    @property
    def built(self) -> bool:
        """Whether the design could be built."""
        return not self.error

    @property
    def feasible(self) -> bool:
        """Whether the design builds and its parallel plan runs."""
        return self.built and self.step is not None and self.step.feasible

    @property
    def problem(self) -> str:
        """Why there is no step (design or plan), '' when there is one."""
        if self.error:
            return f"this design cannot be built: {self.error}"
        if self.step is not None and not self.step.feasible:
            return f"this parallel plan cannot run: {self.step.reason}"
        return ""

    def values(self) -> dict[str, float]:
        """Every :data:`SCENARIO_METRIC_KEYS` value (NaN where it cannot be computed)."""
        out = dict.fromkeys(SCENARIO_METRIC_KEYS, NAN)
        out["n_gpus"] = float(self.scenario.cluster.n_gpus)
        head = step_headline(self.step) if self.built else None
        if head is not None:
            out.update(
                step_time_s=head.step_time_s,
                mfu=head.mfu,
                tokens_per_s=head.tokens_per_s,
                exposed_comm_share=head.exposed_comm_share,
                bubble_share=head.bubble_share,
            )
        if self.allreduce is not None:
            out["allreduce_busbw_GBps"] = self.allreduce.busbw_GBps
            out["allreduce_time_us"] = self.allreduce.time_us
        if self.alltoall is not None:
            out["alltoall_busbw_GBps"] = self.alltoall.busbw_GBps
            out["alltoall_time_us"] = self.alltoall.time_us
        out.update(
            capex_usd=self.capex_usd,
            capex_per_gpu_usd=self.capex_per_gpu_usd,
            power_per_gpu_w=self.power_per_gpu_w,
            n_switches=self.n_switches,
            max_switch_hops=self.max_switch_hops,
        )
        return out


def scenario_metrics(
    scenario: Scenario,
    *,
    topology: Topology,
    bom: BillOfMaterials,
    summary: CollectiveSummary,
    step: StepResult,
) -> ScenarioMetrics:
    """Assemble one scenario's headline results from its model results (1 GiB collectives)."""
    allreduce, alltoall = summary.at(HEADLINE_BYTES)
    return ScenarioMetrics(
        scenario,
        step=step,
        allreduce=allreduce,
        alltoall=alltoall,
        alltoall_error=summary.alltoall_error or "",
        allreduce_curve=summary.allreduce_curve,
        capex_usd=bom.capex_usd,
        capex_per_gpu_usd=bom.capex_per_gpu_usd,
        power_per_gpu_w=bom.power_per_gpu_w,
        n_switches=float(topology.n_switches),
        max_switch_hops=float(topology.max_switch_hops),
    )


# ------------------------------------------------------------------------------ vendors
@dataclass(frozen=True)
class VendorRow:
    """The design on one vendor's parts: parts, counts, capex (USD), power (W), TCO (USD).

    A vendor that cannot build the design has ``error`` set, empty names, zero counts and
    NaN amounts. ``network_share`` is the compute fabric's fraction of cluster capex.
    """

    vendor: str
    error: str = ""
    switch_key: str = ""
    switch_name: str = ""
    radix: int = 0
    nic_name: str = ""
    tiers: int = 0
    n_switches: int = 0
    n_transceivers: int = 0
    capex_usd: float = NAN
    capex_per_gpu_usd: float = NAN
    power_w: float = NAN
    power_per_gpu_w: float = NAN
    network_share: float = NAN
    tco_usd: float = NAN
    #: NIC ports one pod serves and what sets the tier count (``cost.fabric_shape``).
    pod_nics: int = 0
    limit: str = ""

    @property
    def ok(self) -> bool:
        """Whether the vendor can build the design."""
        return not self.error

    @property
    def power_kw(self) -> float:
        """Network power, kW (IT load)."""
        return self.power_w / 1000


def vendor_rows(comparisons: Sequence[VendorComparison]) -> list[VendorRow]:
    """One :class:`VendorRow` per vendor compared, in the comparison's order."""
    rows = []
    for c in comparisons:
        b = c.bom
        if b is None:
            rows.append(VendorRow(c.vendor, error=c.error or "cannot build this design"))
            continue
        from fabric_model.plant.cost import fabric_shape

        shape = fabric_shape(b.topology, b.hardware)
        rows.append(
            VendorRow(
                vendor=c.vendor,
                switch_key=b.hardware.switch.key,
                switch_name=b.hardware.switch.name,
                radix=b.hardware.radix,
                nic_name=b.hardware.nic.name,
                tiers=b.topology.tiers,
                n_switches=b.topology.n_switches,
                n_transceivers=b.n_transceivers,
                capex_usd=b.capex_usd,
                capex_per_gpu_usd=b.capex_per_gpu_usd,
                power_w=b.power_w,
                power_per_gpu_w=b.power_per_gpu_w,
                network_share=b.network_share,
                tco_usd=b.tco_usd,
                pod_nics=int(shape["pod_nics"]),
                limit=str(shape["limit"]),
            )
        )
    return rows


def fabric_effect_rows(
    scenario: Scenario,
    vendors: Sequence[str],
    cases: Sequence[tuple[str, str]],
    size_bytes: int,
    routing_of: Callable[[Scenario], str],
    model_of: Callable[[Scenario], ModelOf],
) -> list[dict[str, object]]:
    """Time each (operation, algorithm) case at ``size_bytes`` on each vendor's fabric.

    Parameters
    ----------
    scenario
        The what-if; each vendor gets :func:`vendor_variant` of it (its parts and default
        routing, the scenario's placement).
    vendors, cases, size_bytes
        Vendors compared, (op, algo) pairs, message size in bytes per GPU.
    routing_of
        The routing policy a variant's fabric runs (raises the model's error when it cannot
        be built).
    model_of
        The :data:`ModelOf` of a variant (``ui.facade`` passes its cache).

    Returns
    -------
    list of dict
        One row per (vendor, case): ``busbw_GBps`` (min/max over ECMP seeds),
        ``busbw_large_GBps`` (the large-message plateau), ``time_us``, ``proto``,
        ``bottleneck``, or ``reason`` non-empty with NaN numbers.
    """
    from fabric_model.collectives import AlgoModel, times_from_models

    rows: list[dict[str, object]] = []
    for vendor in vendors:
        variant = vendor_variant(scenario, vendor)
        try:
            routing = routing_of(variant)
            problem = ""
        except FabricModelError as exc:
            routing, problem = "", f"this design cannot be built on {vendor}: {exc}"
        for op, algo in cases:
            model: AlgoModel | str | Exception
            try:
                model = problem or model_of(variant)(op, algo)
            except FabricModelError as exc:  # e.g. a routing policy the family lacks
                model = f"cannot be computed on {vendor}: {exc}"
            row: dict[str, object] = {
                "vendor": vendor,
                "routing": routing,
                "op": op,
                "algo": algo,
                "size_bytes": size_bytes,
                "n_gpus": scenario.cluster.n_gpus,
                "placement": scenario.what_if.placement,
                "busbw_GBps": NAN,
                "busbw_min_GBps": NAN,
                "busbw_max_GBps": NAN,
                "busbw_large_GBps": NAN,
                "time_us": NAN,
                "proto": "",
                "bottleneck": "",
                "reason": "",
            }
            if not isinstance(model, AlgoModel):
                row["reason"] = str(model)
            else:
                t = times_from_models([model], [size_bytes], algo)[0]
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
    return rows


# ------------------------------------------------------------------------------ variants
def vendor_variant(scenario: Scenario, vendor: str) -> Scenario:
    """Put the design on ``vendor``'s parts with its default routing (as the Cost page).

    The scenario's own vendor keeps its switch, NIC and transport; another vendor gets its
    defaults (and PFC as it ships: ``what_if.pfc`` is a RoCE misconfiguration).
    """
    if vendor == scenario.fabric.vendor:
        fabric = dataclasses.replace(scenario.fabric, routing="auto")
        return dataclasses.replace(scenario, fabric=fabric)
    fabric = dataclasses.replace(
        scenario.fabric, vendor=vendor, switch="auto", nic="auto", routing="auto", transport="auto"
    )
    what_if = dataclasses.replace(scenario.what_if, pfc="on")
    return dataclasses.replace(scenario, fabric=fabric, what_if=what_if)


def scaling_variant(scenario: Scenario, topology: str, vendor: str) -> Scenario:
    """Return the scenario on another topology/vendor, as the Scaling page sweeps it.

    The vendor's default routing applies (adaptive for InfiniBand and Spectrum-X, ECMP for
    RoCE) unless the scenario's vendor is the one asked for. Raises the model's error.
    """
    over: dict[str, Any] = {"fabric.topology": topology, "fabric.vendor": vendor}
    if vendor != scenario.fabric.vendor:  # the vendor's own routing and transport
        over.update({"fabric.routing": "auto", "fabric.transport": "auto", "what_if.pfc": "on"})
    if topology != "fat-tree":
        over["fabric.tiers"] = "auto"
    return apply_overrides(scenario, over)


def replica_scaling_efficiency(
    scenario: Scenario, step: StepResult | None = None
) -> tuple[float, int] | None:
    """Weak-scaling efficiency vs the smallest size the plan runs at, and that size.

    Sizes tried: one data-parallel replica (``tp x pp x cp`` GPUs, times ``ep``) doubled
    until it fits (memory shrinks with ZeRO sharding as data parallelism grows). ``step`` is
    the scenario's own step when the caller has it (computed here otherwise). None when the
    plan runs at no smaller size or not at all.
    """
    from fabric_model.training import sweep, training_step

    par = scenario.parallel
    n0 = par.tp * par.pp * par.cp * max(1, par.ep)
    n = scenario.cluster.n_gpus
    while n0 < n:  # small sizes are cheap: try them one at a time, smallest first
        pts = sweep(scenario, [n0, n], scaling="weak")
        if pts[0].feasible:
            return (pts[1].scaling_efficiency, n0) if pts[1].feasible else None
        n0 *= 2
    if n0 != n:
        return None
    own = step if step is not None else training_step(scenario)
    return (1.0, n) if own.feasible else None


# ------------------------------------------------------------------- versus the best fabric

#: Metrics of the "versus the best fabric" view: (better direction, unit of the gap, what
#: the gap means). Step time and network capex: percent above the best design at that size
#: (step time 2 % above the fastest = 2 % more time per step, so 2 % more days and GPU-hours
#: for the same tokens). MFU: percentage points below the best MFU at that size.
VERSUS_BEST_METRICS: dict[str, tuple[str, str, str]] = {
    "step_time_s": ("lower", "%", "slower than the fastest design"),
    "mfu": ("higher", "pts", "MFU points below the best design"),
    "network_capex_usd": ("lower", "%", "more network capex than the cheapest design"),
}
#: Gaps below this many percent are "within" the best in the sentence: the resolution of the
#: wording only (the chart and the table show every gap as computed). One percent is below
#: the spread of repeated runs of one job on one cluster, so the sentence does not call a
#: fabric better for less.
NEGLIGIBLE_GAP_PCT = 1.0


@dataclass(frozen=True)
class GapRow:
    """One design at one size against the best design at that size.

    ``gap`` is in the metric's unit (:data:`VERSUS_BEST_METRICS`): 0 for the best design,
    NaN where the design does not run (``value`` NaN).
    """

    metric: str
    x: int
    design: str
    value: float
    best_design: str
    best_value: float
    gap: float


def versus_best(values: dict[str, dict[int, float]], metric: str) -> list[GapRow]:
    """Compare each design with the best design at each size.

    Parameters
    ----------
    values
        Design label -> {size (GPUs, or an EP degree): value of ``metric``}; NaN or a
        missing size where the design does not run there.
    metric
        A key of :data:`VERSUS_BEST_METRICS`.

    Returns
    -------
    list of GapRow
        One row per (design, size), designs in the given order, sizes ascending. Sizes where
        no design runs have NaN gaps and an empty ``best_design``.
    """
    if metric not in VERSUS_BEST_METRICS:
        raise ValueError(f"metric must be one of {', '.join(VERSUS_BEST_METRICS)}, not {metric!r}")
    lower = VERSUS_BEST_METRICS[metric][0] == "lower"
    sizes = sorted({x for per in values.values() for x in per})
    rows: list[GapRow] = []
    for x in sizes:
        ran = {
            d: v
            for d, per in values.items()
            if math.isfinite(v := per.get(x, NAN)) and (v > 0 or (v == 0 and not lower))
        }
        best_design = (min if lower else max)(ran, key=ran.__getitem__) if ran else ""
        best = ran.get(best_design, NAN)
        for d, per in values.items():
            v = per.get(x, NAN)
            if d not in ran:
                gap = NAN
            elif metric == "mfu":
                gap = 100.0 * (best - v)
            else:
                gap = 100.0 * (v / best - 1.0)
            rows.append(GapRow(metric, x, d, v, best_design, best, gap))
    return rows


def _pct(gap: float) -> str:
    """Return a gap as the sentence prints it: to 0.1 % (below that, "0.1 %": still true)."""
    return f"{max(gap, 0.1):.1f} %" if gap < 10 else f"{gap:.0f} %"


def tail_scaling_efficiency(
    points: Sequence[SweepPoint], tails: TailsSpec | None = None
) -> list[float]:
    """Scaling efficiency with every size's step at its p50 over iterations (NaN: infeasible).

    ``tokens per GPU per second at the p50 / the same at the first feasible size``, the p50
    from the slowest rank's order statistics (:func:`fabric_model.training.tails.
    step_quantiles_s`, closed form: the ranks' compute spread and software jitter, a slow
    rank if ``tails`` has one; ECMP hash draws are left out, so no size is solved again).
    ``tails`` defaults to the ``tails.*`` defaults, enabled. The slowest of ``N`` ranks is
    later the larger ``N``, so the curve bends where the mean one stays flat.
    """
    from fabric_model.scenario.tails import TailsSpec as _Tails
    from fabric_model.training.tails import step_quantiles_s

    spec = tails or _Tails(enabled=True)
    rates: list[float] = []
    for p in points:
        st = p.step
        if not p.feasible:
            rates.append(NAN)
            continue
        p50, _ = step_quantiles_s(st.step_time_s, st.compute_s + st.imbalance_s, p.n_gpus, (), spec)
        rates.append(st.tokens_per_step / p50 / p.n_gpus)
    base = next((r for r in rates if not math.isnan(r)), NAN)
    return [r / base for r in rates]


def fabric_gap_sentence(
    rows: Sequence[GapRow],
    where: Callable[[int], str] = lambda n: f"{n:,} GPUs",
    *,
    subject: str = "",
) -> str:
    """Say in one sentence where the fabric matters and where it does not.

    Parameters
    ----------
    rows
        :func:`versus_best` of ``step_time_s`` (the sentence speaks of "slower").
    where
        How a size reads ("16,384 GPUs", "EP 64").
    subject
        Prefix naming what runs ("With Llama 3 70B"), or empty.

    Returns
    -------
    str
        Computed from the gaps: the size with the largest gap (which design is how much
        slower than which), and the sizes where every design is within
        :data:`NEGLIGIBLE_GAP_PCT` of the fastest; or that there is nothing to compare.
    """
    by_x: dict[int, list[GapRow]] = {}
    for r in rows:
        if math.isfinite(r.gap):
            by_x.setdefault(r.x, []).append(r)
    compared = {x: rs for x, rs in sorted(by_x.items()) if len(rs) >= 2}
    lead = f"{subject}, " if subject else ""
    if not compared:
        return _capital(f"{lead}at most one design runs at each size: nothing to compare.")
    worst = {x: max(rs, key=lambda r: r.gap) for x, rs in compared.items()}
    close = [x for x, r in worst.items() if r.gap < NEGLIGIBLE_GAP_PCT]
    top_x = max(worst, key=lambda x: worst[x].gap)
    top = worst[top_x]
    if len(close) == len(worst):
        span = (
            f"at {where(close[0])}"
            if len(close) == 1
            else f"from {where(close[0])} to {where(close[-1])}"
        )
        text = (
            f"the fabric barely matters here: {span} every design's step is within "
            f"{_pct(top.gap)} of the fastest"
        )
    else:
        text = (
            f"the fabric matters most at {where(top_x)}, where {top.design} is "
            f"{_pct(top.gap)} slower than {top.best_design}"
        )
        if close:
            span = (
                f"at {where(close[0])}"
                if len(close) == 1
                else f"from {where(close[0])} to {where(close[-1])}"
            )
            text += f"; {span} every design is within {NEGLIGIBLE_GAP_PCT:g} % of the fastest"
        else:
            low_x = min(worst, key=lambda x: worst[x].gap)
            text += f"; the designs are closest at {where(low_x)} ({_pct(worst[low_x].gap)} apart)"
    return _capital(lead + text + ".")


def _capital(sentence: str) -> str:
    return sentence[0].upper() + sentence[1:]
