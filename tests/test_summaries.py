"""The pure summaries layer (``fabric_model.report.summaries``): one computation per headline.

The pages (through ``ui.facade``), the HTML report and the command line call these functions;
here they are checked on their own: the step's shares, the per-dimension communication, the
``auto`` collective summary over cached (text reasons) and uncached (exceptions) model
sources, the scenario metrics' keys, and the vendor rows against their bills of materials.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_model.collectives import FabricContext, algo_models, times_from_models
from fabric_model.plant.cost import CATEGORIES, compare_vendors
from fabric_model.presets import load_preset
from fabric_model.report import summaries
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.training import DIMS, training_step
from fabric_model.units import GIB

DEFAULT = "dgx-h100-ib-ndr"
PRESETS = ("dgx-h100-ib-ndr", "dgx-h100-roce-ecmp", "torus-3d-4k", "gb200-nvl72-ndr")


@pytest.fixture(scope="module")
def base() -> Scenario:
    return load_preset(DEFAULT)


@pytest.fixture(scope="module")
def ctx(base: Scenario) -> FabricContext:
    return FabricContext.from_scenario(base)


# ------------------------------------------------------------------------------ the step
@pytest.mark.parametrize("name", PRESETS)
def test_step_headline_shares_are_the_steps_parts(name: str) -> None:
    step = training_step(load_preset(name))
    head = summaries.step_headline(step)
    assert head is not None and step.plan is not None
    t = head.step_time_s
    assert head.exposed_comm_share == step.exposed_comm_s / t
    assert head.bubble_share == step.bubble_fraction
    assert head.compute_share == step.compute_s / t
    assert 0 <= head.exposed_comm_share <= 1 and 0 <= head.bubble_share <= 1
    parts = head.compute_s + head.imbalance_s + head.bubble_s + head.exposed_comm_s
    parts += head.optimizer_s + head.offload_s
    assert math.isclose(parts, t, rel_tol=1e-9)
    assert (head.plan_label, head.micro_batches, head.pp) == (
        step.plan.label(),
        step.plan.micro_batches,
        step.plan.pp,
    )


@pytest.mark.parametrize("name", PRESETS)
def test_comm_breakdown_covers_the_exposed_communication(name: str) -> None:
    step = training_step(load_preset(name))
    rows = summaries.comm_breakdown(step)
    dims = [r.dim for r in rows]
    assert dims == [d for d in DIMS if step.comm_s.get(d, 0.0) > 0]  # DIMS order, sent only
    for r in rows:
        assert r.comm_s > 0 and 0 <= r.exposed_s <= r.comm_s * (1 + 1e-12)
        assert math.isclose(r.hidden_share, 1 - r.exposed_s / r.comm_s)
        assert math.isclose(r.step_share, r.exposed_s / step.step_time_s)
        assert r.detail == step.comm_detail.get(r.dim, "")
    # every exposed second belongs to a dimension that sends something
    assert math.isclose(
        sum(r.exposed_s for r in rows), step.exposed_comm_s, rel_tol=1e-9, abs_tol=1e-15
    )


def test_an_infeasible_step_has_no_headline_and_no_breakdown(base: Scenario) -> None:
    step = training_step(apply_overrides(base, {"parallel.tp": 64}))
    assert not step.feasible
    assert summaries.step_headline(step) is None and summaries.step_headline(None) is None
    assert summaries.comm_breakdown(step) == ()


# ------------------------------------------------------------------------ collectives
def test_the_summary_equals_the_models_auto_choice(base: Scenario, ctx: FabricContext) -> None:
    got = summaries.collective_summary(base, summaries.models_on(ctx))
    for op, rows in (("allreduce", got.allreduce), ("alltoall", got.alltoall)):
        want = times_from_models(algo_models(ctx, op, "auto"), summaries.SUMMARY_SIZES, "auto")
        assert [r.to_dict() for r in rows] == [w.to_dict() for w in want]
    curve = times_from_models(algo_models(ctx, "allreduce", "auto"), summaries.CURVE_SIZES, "auto")
    assert [r.to_dict() for r in got.allreduce_curve] == [c.to_dict() for c in curve]
    assert got.allreduce_error == "" and got.alltoall_error is None


def test_cached_text_reasons_and_uncached_exceptions_give_the_same_summary(
    base: Scenario, ctx: FabricContext
) -> None:
    uncached = summaries.models_on(ctx)

    def as_text(op: str, algo: str) -> object:
        built = uncached(op, algo)  # what ui.facade's cache holds: the model or its reason
        return built if not isinstance(built, Exception) else str(built)

    a = summaries.collective_summary(base, uncached)
    b = summaries.collective_summary(base, as_text)
    assert a == b


def test_the_report_and_the_overview_quote_the_same_1_gib_numbers(
    base: Scenario, ctx: FabricContext
) -> None:
    overview = summaries.collective_summary(base, summaries.models_on(ctx))
    report = summaries.collective_summary(
        base,
        summaries.models_on(ctx),
        sizes=(GIB,),
        curve_sizes=tuple(2**i for i in range(3, 35)),
    )
    ar_o, a2a_o = overview.at(GIB)
    ar_r, a2a_r = report.at(GIB)
    assert ar_o == ar_r and a2a_o == a2a_r and ar_o is not None and a2a_o is not None
    in_curve = next(r for r in report.allreduce_curve if r.size_bytes == GIB)
    assert in_curve == ar_r


def test_nothing_runs_gives_reasons_not_an_exception(base: Scenario) -> None:
    summary = summaries.collective_summary(base, lambda op, algo: f"{algo} is switched off")
    assert summary.allreduce == () and summary.allreduce_curve == ()
    assert summary.allreduce_error.startswith("no algorithm of auto can run allreduce")
    for algo in summaries.auto_candidates(base, "allreduce"):
        assert f"{algo} (cannot run here: {algo} is switched off)" in summary.allreduce_error
    assert summary.alltoall == () and summary.alltoall_error is not None
    assert "direct (cannot run here" in summary.alltoall_error
    assert summary.at(GIB) == (None, None)


def test_above_the_limit_the_alltoall_is_hierarchical_only(
    base: Scenario, ctx: FabricContext
) -> None:
    asked: list[tuple[str, str]] = []
    uncached = summaries.models_on(ctx)

    def spy(op: str, algo: str) -> object:
        asked.append((op, algo))
        return uncached(op, algo)

    n = base.cluster.n_gpus
    summary = summaries.collective_summary(base, spy, direct_alltoall_max_gpus=n - 1)
    assert ("alltoall", "direct") not in asked and ("alltoall", "hierarchical") in asked
    assert {r.algo for r in summary.alltoall} == {"hierarchical"}


def test_without_rail_wiring_the_alltoall_is_auto_at_every_size(base: Scenario) -> None:
    """The hierarchical-only shortcut rests on rail-optimized wiring; elsewhere ``auto`` runs."""
    flat = dataclasses.replace(base, fabric=dataclasses.replace(base.fabric, rail_optimized=False))
    asked: list[tuple[str, str]] = []
    uncached = summaries.models_on(FabricContext.from_scenario(flat))

    def spy(op: str, algo: str) -> object:
        asked.append((op, algo))
        return uncached(op, algo)

    n = flat.cluster.n_gpus
    summaries.collective_summary(flat, spy, direct_alltoall_max_gpus=n - 1)
    assert ("alltoall", "direct") in asked and ("alltoall", "hierarchical") in asked


def test_auto_candidates_follow_the_fabric_switches(base: Scenario) -> None:
    fabric = base.fabric
    on = dataclasses.replace(base, fabric=dataclasses.replace(fabric, sharp=True, nvls=True))
    off = dataclasses.replace(base, fabric=dataclasses.replace(fabric, sharp=False, nvls=False))
    assert {"sharp", "nvls"} <= set(summaries.auto_candidates(on, "allreduce"))
    assert not {"sharp", "nvls"} & set(summaries.auto_candidates(off, "allreduce"))


# ------------------------------------------------------------------- scenario metrics
def test_scenario_metric_keys_are_the_compare_tables_rows() -> None:
    from ui.compare_figures import METRICS, ScenarioMetrics

    assert ScenarioMetrics is summaries.ScenarioMetrics  # one class, re-exported
    assert tuple(m.key for m in METRICS) == summaries.SCENARIO_METRIC_KEYS


def test_scenario_metrics_take_the_headline_numbers(base: Scenario, ctx: FabricContext) -> None:
    from fabric_model.plant.cost import bill_of_materials

    bom = bill_of_materials(base)
    step = training_step(base)
    summary = summaries.collective_summary(base, summaries.models_on(ctx))
    m = summaries.scenario_metrics(base, topology=bom.topology, bom=bom, summary=summary, step=step)
    values = m.values()
    head = summaries.step_headline(step)
    assert head is not None and m.allreduce is not None
    assert tuple(values) == summaries.SCENARIO_METRIC_KEYS
    assert values["exposed_comm_share"] == head.exposed_comm_share
    assert values["allreduce_busbw_GBps"] == summary.allreduce[1].busbw_GBps
    assert values["capex_per_gpu_usd"] == bom.capex_per_gpu_usd
    broken = summaries.ScenarioMetrics(base, error="cannot be built")
    assert all(math.isnan(v) for k, v in broken.values().items() if k != "n_gpus")


# ------------------------------------------------------------------------------ vendors
@settings(
    max_examples=12,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    n_gpus=st.sampled_from([64, 256, 1024, 4096, 16384]),
    link_gbps=st.sampled_from([400, 800]),
    topology=st.sampled_from(["fat-tree", "rail-only", "dragonfly-plus"]),
)
def test_vendor_rows_are_consistent_with_their_bills(
    base: Scenario,
    n_gpus: int,
    link_gbps: int,
    topology: str,
) -> None:
    scenario = apply_overrides(
        base,
        {
            "cluster.n_gpus": n_gpus,
            "fabric.link_gbps": link_gbps,
            "fabric.topology": topology,
            "fabric.tiers": "auto",
        },
    )
    comparisons = compare_vendors(scenario)
    rows = summaries.vendor_rows(comparisons)
    assert [r.vendor for r in rows] == [c.vendor for c in comparisons]
    built = []
    for c, r in zip(comparisons, rows, strict=True):
        if c.bom is None:
            assert not r.ok and r.error and math.isnan(r.capex_usd)
            continue
        b = c.bom
        assert r.ok and r.capex_usd == b.capex_usd > 0 and r.tco_usd >= r.capex_usd
        assert math.isclose(sum(b.capex_by_category_usd[k] for k in CATEGORIES), r.capex_usd)
        assert math.isclose(r.capex_per_gpu_usd * n_gpus, r.capex_usd)
        assert math.isclose(r.power_kw * 1000, r.power_w) and r.power_per_gpu_w > 0
        assert 0 < r.network_share < 1
        assert (r.switch_key, r.n_switches, r.tiers) == (
            b.hardware.switch.key,
            b.topology.n_switches,
            b.topology.tiers,
        )
        built.append(r)
    # capex ratios between vendors: positive, the same in total and per GPU
    for a in built:
        for other in built:
            ratio = a.capex_usd / other.capex_usd
            assert ratio > 0
            assert math.isclose(ratio, a.capex_per_gpu_usd / other.capex_per_gpu_usd)


def test_the_vendor_table_rounds_the_rows(base: Scenario) -> None:
    from ui.cost_figures import vendor_summary_frame

    comparisons = compare_vendors(base)
    frame = vendor_summary_frame(comparisons)
    for rec, r in zip(frame.to_dict("records"), summaries.vendor_rows(comparisons), strict=True):
        assert rec["capex_usd"] == round(r.capex_usd)
        assert rec["power_kw"] == round(r.power_kw, 1)
        assert rec["network_share_pct"] == round(100 * r.network_share, 1)


# ----------------------------------------------------------------------------- variants
def test_vendor_variant_keeps_own_parts_and_resets_others(base: Scenario) -> None:
    own = summaries.vendor_variant(base, base.fabric.vendor)
    assert own.fabric == dataclasses.replace(base.fabric, routing="auto")
    other = summaries.vendor_variant(base, "roce")
    assert (other.fabric.vendor, other.fabric.switch, other.fabric.nic) == ("roce", "auto", "auto")


def test_replica_scaling_efficiency_with_or_without_the_step(base: Scenario) -> None:
    small = apply_overrides(base, {"cluster.n_gpus": 64})
    got = summaries.replica_scaling_efficiency(small)
    assert got == summaries.replica_scaling_efficiency(small, training_step(small))
    # the distributed optimizer's step shrinks as data parallelism grows (each rank updates
    # 1 / dp of the states), so a larger size may run a hair faster per GPU
    assert got is not None and 0 < got[0] <= 1 + 1e-3 and got[1] <= 64


def test_fabric_effect_rows_name_why_a_vendor_or_case_is_missing(base: Scenario) -> None:
    from fabric_model.errors import FabricModelError

    contexts: dict[str, FabricContext] = {}

    def routing_of(variant: Scenario) -> str:
        if variant.fabric.vendor == "roce":
            raise FabricModelError("no 400G part")  # as a catalog without the speed
        contexts[variant.fabric.vendor] = FabricContext.from_scenario(variant)
        return contexts[variant.fabric.vendor].policy

    def model_of(variant: Scenario) -> summaries.ModelOf:
        real = summaries.models_on(contexts[variant.fabric.vendor])
        return lambda op, algo: "off here" if op == "alltoall" else real(op, algo)

    cases = (("allreduce", "ring"), ("alltoall", "hierarchical"))
    rows = summaries.fabric_effect_rows(
        base, ("infiniband", "roce"), cases, GIB, routing_of=routing_of, model_of=model_of
    )
    assert [(r["vendor"], r["op"]) for r in rows] == [
        ("infiniband", "allreduce"),
        ("infiniband", "alltoall"),
        ("roce", "allreduce"),
        ("roce", "alltoall"),
    ]
    ring = rows[0]
    assert ring["reason"] == "" and ring["routing"] == "adaptive"
    want = times_from_models(
        algo_models(contexts["infiniband"], "allreduce", "ring"), [GIB], "ring"
    )
    assert ring["busbw_GBps"] == want[0].busbw_GBps > 0
    assert rows[1]["reason"] == "off here" and math.isnan(float(rows[1]["busbw_GBps"]))
    for r in rows[2:]:
        assert str(r["reason"]).startswith("this design cannot be built on roce: no 400G part")
