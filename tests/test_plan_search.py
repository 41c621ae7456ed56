"""The plan search: its space, its lower bound, branch-and-bound exactness, the capex cache."""

from __future__ import annotations

import importlib
import math
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from fabric_model.caching import Lru
from fabric_model.errors import FabricModelError
from fabric_model.presets import load_preset
from fabric_model.scenario import Scenario, apply_overrides, field_spec
from fabric_model.training import resolve_plan, search_plans, training_step
from fabric_model.training.sweep import (
    BOUND_TERMS,
    evaluate_point,
    expert_degrees,
    plan_search,
    plan_space,
)

#: The module (``fabric_model.training.sweep`` the attribute is the ``sweep`` function).
sweep_mod = importlib.import_module("fabric_model.training.sweep")

# A GPT-3-style shape small enough to model every plan of its space on 8 GPUs.
GPT = {
    "model.name": "custom",
    "model.kind": "dense",
    "model.layers": 24,
    "model.hidden": 2048,
    "model.ffn_hidden": 8192,
    "model.heads": 16,
    "model.kv_heads": 16,
    "model.vocab": 51200,
    "model.seq_len": 2048,
    "model.gated_mlp": False,
    "model.tied_embeddings": True,
}

#: Small models: dense MHA and GQA, MoE with top-2 routing, MoE with MLA and per-node dispatch.
MODELS = {
    "gpt-1.3b": GPT,
    "llama3-8b": {"model.name": "llama3-8b"},
    "mixtral-8-layers": {"model.name": "mixtral-8x7b", "model.layers": 8},
    "deepseek-6-layers": {
        "model.name": "deepseek-v3",
        "model.layers": 6,
        "model.dense_layers": 1,
        "training.ep_dispatch": "per_node",
        "model.max_nodes_per_token": 2,
    },
}
#: Fabrics and clusters: fat-tree, rail-only, dragonfly+, torus, RoCE with ECMP, scattered
#: placement, NVL72 racks (72-GPU domains that many degrees straddle) and SHARP.
FABRICS = {
    "fat-tree": {},
    "rail-only": {"fabric.topology": "rail-only"},
    "dragonfly+": {"fabric.topology": "dragonfly-plus"},
    "torus": {"fabric.topology": "torus-3d"},
    "roce": {"fabric.vendor": "roce"},
    "scattered": {"what_if.placement": "scattered"},
    "nvl72": {"cluster.gpu": "gb200", "cluster.nvlink_domain": 72, "cluster.gpus_per_node": 4},
    "sharp": {"fabric.sharp": True},
}
#: Training settings that move the bound's terms: FP8, overlaps, a small batch (few
#: micro-batches, so the bubble counts), cheap selective recomputation.
TRAINING = {
    "default": {},
    "fp8": {"training.precision": "fp8"},
    "overlap": {"training.tp_overlap": 0.5, "training.ep_overlap": 0.5, "training.dp_overlap": 0.5},
    "small-batch": {"training.global_batch_tokens": 2**19},
}


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    """A small scenario: a model of :data:`MODELS` on 16-144 GPUs of one of :data:`FABRICS`."""
    model = draw(st.sampled_from(sorted(MODELS)))
    fabric = draw(st.sampled_from(sorted(FABRICS)))
    training = draw(st.sampled_from(sorted(TRAINING)))
    n = draw(st.sampled_from([16, 32, 64, 144]))
    over = {
        **MODELS[model],
        **FABRICS[fabric],
        **TRAINING[training],
        "cluster.n_gpus": n,
        "training.global_batch_tokens": TRAINING[training].get(
            "training.global_batch_tokens", 2**21
        ),
    }
    try:
        return apply_overrides(Scenario(), over)
    except FabricModelError:
        reject()


def _feasible_sample(s: Scenario, seed: int, k: int) -> list[tuple[int, Scenario]]:
    """Up to ``k`` random plans of the space that pass the plan rules and fit in memory
    (with the uncertainty to spare, as the search's default admits)."""
    sp = sweep_mod._space(s)
    order = np.random.default_rng(seed).permutation(len(sp))[: 40 * k]
    out = []
    for i in order:
        cand = apply_overrides(s, sp.overrides(int(i)))
        result = training_step(cand)
        if result.feasible and result.memory is not None and result.memory.status == "fits":
            out.append((int(i), cand))
        if len(out) == k:
            break
    return out


# ------------------------------------------------------------------------------- space


def test_space_uses_degrees_that_divide_not_only_powers_of_two() -> None:
    """DeepSeek-V3 on 4,608 NVL72 GPUs: PP 3, 6, 9; EP divides 256; TP divides the heads.

    The batch (18,432 sequences = 2^11 x 9) lets a data-parallel degree carry the factor 9
    of 4,608 GPUs; a power-of-two batch leaves it to the pipeline (PP 9, 18, 36 only).
    """
    base = apply_overrides(load_preset("gb300-nvl72-xdr"), {"model.name": "deepseek-v3"})
    s = apply_overrides(base, {"training.global_batch_tokens": 18432 * base.model.seq_len})
    sp = sweep_mod._space(s)
    pps = set(sp.cols["pp"].tolist())
    assert {3, 6, 9, 12, 18} <= pps and max(pps) <= s.model.layers
    two = sweep_mod._space(apply_overrides(base, {"training.global_batch_tokens": 4096 * 4096}))
    assert set(two.cols["pp"].tolist()) == {9, 18, 36}  # the factor 9 goes to the pipeline
    assert set(sp.cols["ep"].tolist()) == set(expert_degrees(s, every_divisor=True))
    assert all(s.model.n_experts % e == 0 for e in expert_degrees(s, every_divisor=True))
    v2 = apply_overrides(s, {"model.n_experts": 160})  # DeepSeek-V2's count
    assert expert_degrees(v2, every_divisor=True) == [1, 2, 4, 5, 8, 10, 16, 20, 32, 40, 80, 160]
    assert expert_degrees(v2) == [1, 2, 4, 8, 16, 32] and expert_degrees(v2, 48) == [1, 2, 4, 8, 16]
    tps = set(sp.cols["tp"].tolist())
    assert all(s.model.heads % t == 0 and t <= s.cluster.nvlink_domain for t in tps)
    # the key table's choices, read at run time (new modes and stages flow in)
    assert set(sp.cols["zero"].tolist()) == set(field_spec("parallel.zero_stage").choices)
    modes = {m for m, _ in sp.recompute_modes}
    assert modes == set(field_spec("training.recompute").choices)
    # straddling degrees are in the space, flagged: TP16 and EP64 do not tile 72 (the EP
    # block is EP x CP x TP, or ETP x EP on the expert grid of an expert TP below TP)
    c = sp.cols
    block = np.where(c["etp"] == c["tp"], c["ep"] * c["tp"] * c["cp"], c["etp"] * c["ep"])
    straddle = (c["tp"] == 16) | (block == 64)
    assert straddle.any() and not sp.tiles[straddle].any()
    assert sp.tiles[(sp.cols["tp"] == 8) & (sp.cols["ep"] == 1) & (sp.cols["cp"] == 1)].all()


def test_space_plans_obey_the_plan_rules() -> None:
    """Every plan of the space resolves without a broken rule; the fast copy is apply_overrides."""
    s = apply_overrides(Scenario(), {"model.name": "mixtral-8x7b", "cluster.n_gpus": 96})
    space = plan_space(s)
    assert len({tuple(sorted(o.items())) for o in space}) == len(space)
    for over in space[:: max(1, len(space) // 300)]:
        cand = apply_overrides(s, over)
        assert sweep_mod._with_plan(s, over) == cand
        plan, problems = resolve_plan(cand)
        assert plan is not None and not problems, (over, problems)
        assert over["parallel.pp"] * over["parallel.vpp"] <= s.model.layers


def test_interleavings_add_no_layers_to_the_heaviest_rank() -> None:
    assert sweep_mod._interleavings(80, 2, 64) == [1, 2, 4, 5, 8, 10, 20, 40]
    assert sweep_mod._interleavings(61, 8, 64) == [1, 2, 4]
    assert sweep_mod._interleavings(61, 1, 64) == [1]


# ------------------------------------------------------------------------------- bound


@settings(
    max_examples=14,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(s=scenarios(), seed=st.integers(0, 2**31))
def test_bound_is_below_the_step_term_by_term(s: Scenario, seed: int) -> None:
    """Each term of the bound is at most the step's own: compute side and each exposed dim."""
    sp = sweep_mod._space(s)
    for i, cand in _feasible_sample(s, seed, 5):
        result = training_step(cand)
        actual = sweep_mod._actual_terms(result)
        for term in BOUND_TERMS:
            assert sp.terms[term][i] <= actual[term] * (1 + 1e-9) + 1e-12, (
                term,
                sp.overrides(i),
                float(sp.terms[term][i]),
                actual[term],
            )
        assert sp.bound_s()[i] <= result.step_time_s * (1 + 1e-9)


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(s=scenarios(), seed=st.integers(0, 2**31))
def test_search_best_is_never_slower_than_a_sampled_plan(s: Scenario, seed: int) -> None:
    """Branch and bound: no plan of the space, sampled at random, beats the search's best."""
    found = plan_search(s, top=1)
    assert found.exact and all(v == 1.0 for v in found.bound_slack.values())
    sample = _feasible_sample(s, seed, 6)
    if not sample:
        return
    assert found.plans, "the search found nothing although a sampled plan runs"
    best = found.plans[0].step
    assert best.feasible
    for _, cand in sample:
        assert best.step_time_s <= training_step(cand).step_time_s * (1 + 1e-9)


def test_search_equals_exhaustive_evaluation_of_a_small_space() -> None:
    """GPT 1.3B on 8 GPUs: the top 5 are the 5 fastest of all ~3,000 plans, modelled one by one."""
    s = apply_overrides(
        Scenario(), {**GPT, "cluster.n_gpus": 8, "training.global_batch_tokens": 2**18}
    )
    times = sorted(
        r.step_time_s
        for r in (training_step(apply_overrides(s, o)) for o in plan_space(s))
        if r.feasible
    )
    found = plan_search(s, top=5)
    assert [c.step.step_time_s for c in found.plans] == pytest.approx(times[:5], rel=1e-12)
    assert found.n_evaluated < len(times) / 10  # the bound did the work


@pytest.mark.parametrize("preset", ["gb300-nvl72-xdr", "gb200-nvl72-ndr"])
def test_deepseek_v3_on_nvl72_beats_the_hand_written_ep64_pp8_plan(preset: str) -> None:
    """The issue's case: the search's best is no slower than EP64 PP8 (ZeRO-1, selective).

    With a batch of 4,608 x 4 sequences of 4,096, which DP576 x 32 micro-batches divides.
    """
    s = apply_overrides(
        load_preset(preset),
        {
            "model.name": "deepseek-v3",
            "model.seq_len": 4096,
            "training.global_batch_tokens": 18432 * 4096,
            "training.precision": "bf16",
            "training.fp8_param_gather": False,  # the presets' FP8 recipe keeps FP8 weights
        },
    )
    hand = training_step(
        apply_overrides(
            s,
            {
                "parallel.tp": 1,
                "parallel.pp": 8,
                "parallel.vpp": 1,
                "parallel.cp": 1,
                "parallel.ep": 64,
                "parallel.dp": "auto",
                "parallel.zero_stage": 1,
                "training.recompute": "selective",
                "training.micro_batch": 1,
            },
        )
    )
    assert hand.feasible
    found = plan_search(s, top=3)
    assert found.exact and found.plans
    assert found.plans[0].step.step_time_s <= hand.step_time_s
    times = [c.step.step_time_s for c in found.plans]
    assert times == sorted(times)


def test_a_term_that_overshoots_the_step_is_scaled_down(monkeypatch: pytest.MonkeyPatch) -> None:
    """Should the step get faster than a bound term (a model change), the search adapts."""
    s = apply_overrides(Scenario(), {"model.name": "mixtral-8x7b", "cluster.n_gpus": 64})
    honest = plan_search(s, top=3)
    real_space = sweep_mod._space

    def inflated(scenario: Scenario) -> object:
        sp = real_space(scenario)
        sp.terms["dp"] = sp.terms["dp"] * 50 + 0.5  # far above any plan's exposed dp
        return sp

    monkeypatch.setattr(sweep_mod, "_space", inflated)
    found = plan_search(s, top=3)
    assert found.bound_slack["dp"] < 0.1
    assert [c.step.step_time_s for c in found.plans] == pytest.approx(
        [c.step.step_time_s for c in honest.plans], rel=1e-12
    )


def test_sharp_allreduce_is_bounded_by_the_nics() -> None:
    """256 MiB all-reduced by SHARP over 18 domains, one GPU each: at least S / NIC rate.

    SHARP's round trip (a NIC to itself through its switch) was dropped as an NVLink
    transfer inside a communicator, which then all-reduced at 0.5-16 TB/s."""
    from fabric_model.training.fabric import DimensionFabric
    from fabric_model.training.layout import Layout

    s = apply_overrides(Scenario(), {"fabric.sharp": True, "cluster.n_gpus": 144})
    size = 2**28
    t = DimensionFabric(s, Layout(8, 1, 1, 1, 18)).collective("dp", "allreduce", size).time_s
    nic_Bps = s.fabric.link_gbps * 1e9 / 8 * s.cluster.nics_per_gpu
    assert t >= size * 17 / 18 / nic_Bps


# ---------------------------------------------------------------------------- the API


def test_search_plans_keeps_its_contract() -> None:
    """Best first, feasible only, ``shortlist`` caps the full evaluations, empty when none fit."""
    s = apply_overrides(Scenario(), {"model.name": "llama3-8b", "cluster.n_gpus": 64})
    full = search_plans(s, top=3)
    assert len(full) == 3 and all(c.step.feasible for c in full)
    assert [c.step.step_time_s for c in full] == sorted(c.step.step_time_s for c in full)
    assert all(math.isfinite(c.bound_s) and c.bound_s <= c.step.step_time_s for c in full)
    assert all(c.step.memory and c.step.memory.status == "fits" for c in full)  # default
    loose = plan_search(s, top=3, tight=True)  # tight plans too: never slower
    assert loose.plans[0].step.step_time_s <= full[0].step.step_time_s
    capped = plan_search(s, top=3, max_evaluations=2)
    assert not capped.exact and capped.n_evaluated == 2
    assert len(search_plans(s, top=3, shortlist=2)) <= 2
    assert search_plans(s, top=0) == []
    tiny = apply_overrides(Scenario(), {"model.name": "llama3-405b", "cluster.n_gpus": 8})
    assert search_plans(tiny) == []
    no_fp8 = apply_overrides(
        Scenario(),
        {
            "model.name": "llama3-8b",
            "cluster.n_gpus": 16,
            "cluster.gpu": "a100",
            "training.precision": "fp8",
        },
    )
    assert search_plans(no_fp8) == []


def test_search_reports_progress_and_runs_through_any_map() -> None:
    s = apply_overrides(Scenario(), {"model.name": "mixtral-8x7b", "cluster.n_gpus": 64})
    calls: list[tuple[int, int]] = []
    serial = plan_search(s, top=2, progress=lambda d, t: calls.append((d, t)))
    assert calls and all(d <= t for d, t in calls) and calls[-1][0] == calls[-1][1]
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    with ThreadPoolExecutor(2) as pool:
        pooled = plan_search(s, top=2, map_fn=pool.map)
    assert [c.step.step_time_s for c in pooled.plans] == [c.step.step_time_s for c in serial.plans]


# ------------------------------------------------------------------------ capex cache


def test_capex_cache_is_safe_across_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads pricing many designs at once, with evictions, agree with one thread."""
    monkeypatch.setattr(sweep_mod, "_CAPEX", Lru(3))  # unregistered: the test's own
    designs = [
        apply_overrides(
            Scenario(), {"model.name": "llama3-8b", "cluster.n_gpus": n, "parallel.pp": 1}
        )
        for n in (16, 32, 64, 128, 256, 512)
    ]
    serial = [evaluate_point(s).network_capex_usd for s in designs]
    sweep_mod._CAPEX.clear()
    start = threading.Barrier(8)

    def price(k: int) -> float:
        start.wait()
        return evaluate_point(designs[k % len(designs)]).network_capex_usd

    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(price, range(48)))
    assert got == [serial[k % len(designs)] for k in range(48)]
    assert len(sweep_mod._CAPEX) <= 3
