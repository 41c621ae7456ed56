"""Pipeline schedules as the frameworks run them, NVFP4, and the scale-out / NVLink split.

Sources: Megatron-core ``schedules.py`` (interleaving: micro-batches a multiple of PP) and
``num_microbatches_calculator.py`` (global batch a multiple of micro-batch x DP); DeepSeek-V3
report Table 2 (DualPipe); Qi et al., ICLR 2024 (ZB-H1, ZB-H2); NVIDIA arXiv 2509.25149
(NVFP4). See fabric_model/training/schedules.py.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_model.catalog import load_catalog
from fabric_model.presets import load_preset
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.scenario.shapes import shape_counts
from fabric_model.training import resolve_plan, training_step
from fabric_model.training.memory import GIB, NVFP4_BF16_SHARE, NVFP4_BYTES
from fabric_model.training.schedules import SCHEDULES, bubble_s, schedule_problems
from fabric_model.training.step import compute_times
from fabric_model.training.sweep import plan_search

#: Llama 3 405B on 16K H100 of the meta-24k-roce preset (the issue's N2 repro), with the
#: paper's 16M-token batch of its 16K-GPU job (Llama 3 paper, Table 4).
META_16K = {
    "cluster.n_gpus": 16384,
    "model.name": "llama3-405b",
    "training.global_batch_tokens": 16777216,
}
#: A small pipelined plan: 70B on 64 H100, TP8 PP8, DP1.
SMALL = {
    "cluster.n_gpus": 64,
    "parallel.tp": 8,
    "parallel.pp": 8,
    "model.name": "llama3-70b",
    "training.global_batch_tokens": 16 * 8192,
}


@pytest.fixture(scope="module")
def meta_16k_search() -> object:
    return plan_search(apply_overrides(load_preset("meta-24k-roce"), META_16K), top=6)


# ------------------------------------------------------------------------- the bubble


@settings(max_examples=200, deadline=None)
@given(
    p=st.integers(2, 64),
    v=st.integers(1, 16),
    m=st.integers(1, 256),
    f=st.floats(0.01, 10.0),
    ratio=st.floats(1.0, 3.0),
)
def test_interleaved_bubble_respects_the_critical_path(
    p: int, v: int, m: int, f: float, ratio: float
) -> None:
    """Busy time >= one micro-batch crossing all p ranks (p t_mb) and >= Narayanan's bound."""
    b = ratio * f
    t_mb = f + b
    busy = m * t_mb + bubble_s("interleaved", p, v, m, f, b, b / 2)
    assert busy >= p * t_mb * (1 - 1e-12)  # the critical path of the first micro-batch
    assert busy >= m * t_mb + (p - 1) / v * t_mb * (1 - 1e-12)
    if m < p:  # the pipeline never fills: [(p - 1) + (v - 1)(p - m)] / v
        assert math.isclose(
            busy - m * t_mb, ((p - 1) + (v - 1) * (p - m)) / v * t_mb, rel_tol=1e-12
        )
    if m == 1:
        assert math.isclose(busy, p * t_mb, rel_tol=1e-12)


@settings(max_examples=100, deadline=None)
@given(
    p=st.integers(2, 64).map(lambda x: 2 * x),
    m=st.integers(1, 128).map(lambda x: 2 * x),
    f=st.floats(0.01, 10.0),
)
def test_schedules_order_their_bubbles(p: int, m: int, f: float) -> None:
    """B = 2F, W = F (linear layers): ZB-H2 <= ZB-H1 <= 1F1B, DualPipe <= 1F1B, all >= 0."""
    b, w = 2 * f, f
    one = bubble_s("1f1b", p, 1, m, f, b, w)
    h1, h2 = bubble_s("zb", p, 1, m, f, b, w), bubble_s("zb-h2", p, 1, m, f, b, w)
    dual = bubble_s("dualpipe", p, 1, m, f, b, w)
    assert math.isclose(one, (p - 1) * 3 * f) and math.isclose(h1, (p - 1) * f)  # 1/3
    assert h2 == 0.0  # F = B_input = W: ZB-H2 has no bubble (Qi et al. 3.1)
    assert math.isclose(dual, (p / 2 - 1) * 2 * f)  # (PP/2 - 1)(F&B + B - 3W), F&B = F + B
    assert 0 <= h2 <= h1 <= one and 0 <= dual <= one


def test_step_bubble_is_the_schedules_by_hand() -> None:
    """The step's bubble equals each schedule's formula on its own F, B and W."""
    base = apply_overrides(Scenario(), SMALL)
    times = {}
    for sched in SCHEDULES:
        s = apply_overrides(
            base,
            {"training.schedule": sched, "parallel.vpp": 4 if sched == "interleaved" else 1},
        )
        plan, problems = resolve_plan(s)
        assert plan is not None and not problems, sched
        gpu = load_catalog().gpu(s.cluster.gpu)
        ct = compute_times(s, plan, shape_counts(s.model), gpu)
        f, b, w = ct.forward_s, ct.backward_s, ct.weight_grad_s
        p, m = plan.pp, plan.micro_batches
        assert m == 16 and 0 < w < f < b
        hand = {
            "1f1b": (p - 1) * (f + b),
            "interleaved": (p - 1) / 4 * (f + b),  # m >= p
            "dualpipe": (p / 2 - 1) * (f + 2 * b - 3 * w),
            "zb": (p - 1) * (f + b - 2 * w),
            "zb-h2": max(0.0, (p - 1) * (f + b - 3 * w)),
        }[sched]
        assert math.isclose(ct.bubble_s, hand, rel_tol=1e-12), sched
        times[sched] = training_step(s).bubble_s
    assert times["zb"] < times["1f1b"] and times["dualpipe"] < times["1f1b"]


def test_dualpipe_and_zb_h2_memory_by_hand() -> None:
    """DualPipe: 2 x parameters, p + 1 micro-batches in flight; ZB-H2: 2 p on rank 0."""
    base = apply_overrides(Scenario(), SMALL)

    def mem(sched: str) -> object:
        s = apply_overrides(base, {"training.schedule": sched})
        plan, _ = resolve_plan(s)
        step = training_step(s)
        assert step.memory is not None and plan is not None
        return step.memory

    one, dual, h2 = mem("1f1b"), mem("dualpipe"), mem("zb-h2")
    assert math.isclose(dual.weights_gib, 2 * one.weights_gib, rel_tol=1e-9)
    assert math.isclose(dual.grads_gib, 2 * one.grads_gib, rel_tol=1e-9)
    first = {st.rank: st for st in h2.stages}[0]
    assert first.micro_batches_in_flight == 16  # min(2 p, m) with p = 8, m = 16
    assert {st.rank: st for st in one.stages}[0].micro_batches_in_flight == 8
    assert {st.rank: st for st in dual.stages}[0].micro_batches_in_flight == 9  # p + 1


# ------------------------------------------------------------------------- the rules


def test_megatron_refuses_interleaving_with_micro_batches_not_a_multiple_of_pp() -> None:
    """The N2 plan: TP4 CP8 PP2 x 63, one micro-batch: Megatron refuses; its bubble is p - 1."""
    s = apply_overrides(
        load_preset("meta-24k-roce"),
        {
            **META_16K,
            "parallel.tp": 4,
            "parallel.cp": 8,
            "parallel.pp": 2,
            "parallel.vpp": 63,
            "training.micro_batch": 8,
            "training.global_batch_tokens": 16777216,
            "parallel.zero_stage": 3,
            # the review's hand figure (4.31 s) was worked at the then default efficiency
            "training.compute_efficiency": 0.68,
        },
    )
    step = training_step(s)
    assert not step.feasible and step.problems[0].key == "parallel.vpp"
    assert "multiple of parallel.pp = 2" in step.reason and "schedules.py" in step.reason
    # PyTorch's ScheduleInterleaved1F1B (torchtitan) runs m < p: one round
    assert not schedule_problems("interleaved", "torchtitan", 2, 63, 1)
    # the plan's bubble had it run: (p - 1) t_mb at m = 1, the review's hand figure 4.31 s
    plan, problems = resolve_plan(s)
    assert plan is not None and plan.micro_batches == 1 and problems
    gpu = load_catalog().gpu(s.cluster.gpu)
    ct = compute_times(s, plan, shape_counts(s.model), gpu)
    assert math.isclose(ct.bubble_s, (2 - 1) * ct.micro_batch_s, rel_tol=1e-12)
    assert ct.bubble_s == pytest.approx(4.31, abs=0.01)  # each of the 2 ranks idles half


def test_schedule_and_vpp_contradictions_are_refused() -> None:
    base = apply_overrides(Scenario(), SMALL)
    cases = {
        ("1f1b", 4): "training.schedule",
        ("zb", 2): "training.schedule",
        ("interleaved", 1): "parallel.vpp",
    }
    for (sched, vpp), key in cases.items():
        step = training_step(
            apply_overrides(base, {"training.schedule": sched, "parallel.vpp": vpp})
        )
        assert not step.feasible and step.problems[0].key == key, (sched, vpp)
    odd = apply_overrides(
        base, {"training.schedule": "dualpipe", "parallel.pp": 3, "cluster.n_gpus": 48}
    )
    step = training_step(odd)  # TP8 PP3 DP2: DualPipe needs an even pipeline
    assert not step.feasible and step.problems[0].key == "parallel.pp"
    assert "DualPipe" in step.reason
    assert schedule_problems("dualpipe", "megatron", 4, 1, 15)[0][0] == "training.micro_batch"
    assert not schedule_problems("dualpipe", "megatron", 4, 1, 16)


def test_a_batch_dp_does_not_divide_runs_rounded_down_and_says_so() -> None:
    """GB300-like N8 case: 2,048 sequences on DP192 run 1,920 (10 micro-batches), said so."""
    s = apply_overrides(
        load_preset("meta-24k-roce"),
        {"parallel.vpp": 1, "training.global_batch_tokens": 2048 * 8192},
    )
    step = training_step(s)
    assert step.feasible and step.plan is not None
    assert step.plan.dp == 192 and step.plan.micro_batches == 10
    assert step.tokens_per_step == 1920 * 8192 < s.training.global_batch_tokens
    assert math.isclose(step.tokens_per_s * step.step_time_s, step.tokens_per_step)
    assert any("global_batch_tokens" in w and "1,920 sequences" in w for w in step.warnings)


def test_every_plan_the_search_returns_runs_under_its_framework(meta_16k_search: object) -> None:
    """The N2 repro: no one-micro-batch interleaved plan; every plan passes every rule."""
    found = meta_16k_search
    assert found.plans
    for cand in found.plans:
        plan = cand.step.plan
        assert plan is not None and cand.step.feasible
        assert plan.sequences_per_step * 8192 == 16777216  # the batch asked, exactly
        if plan.vpp > 1:
            assert plan.micro_batches % plan.pp == 0
        assert not schedule_problems(
            plan.schedule, "megatron", plan.pp, plan.vpp, plan.micro_batches
        )
        assert cand.step.mfu < 0.549  # the 54.9 % of the bubble-free interleaving is gone


# ------------------------------------------------------------------------- NVFP4


def test_fp4_is_refused_where_there_are_no_fp4_tensor_cores() -> None:
    for gpu in ("h100", "h200", "a100"):
        step = training_step(
            apply_overrides(Scenario(), {"cluster.gpu": gpu, "training.precision": "fp4"})
        )
        assert not step.feasible and step.problems[0].key == "training.precision", gpu
        assert "FP4" in step.reason
    s = apply_overrides(Scenario(), {"training.precision": "fp4", "cluster.n_gpus": 64})
    assert not plan_search(s, top=2).plans


def test_fp4_step_and_memory_by_hand() -> None:
    """GB300, 70B, TP8 PP1: linear GEMMs 84 % at 6x BF16's peak; NVFP4 weight copies."""
    base = apply_overrides(
        Scenario(),
        {
            "cluster.gpu": "gb300",
            "cluster.n_gpus": 72,
            "cluster.nvlink_domain": 72,
            "cluster.gpus_per_node": 4,
            "parallel.tp": 8,
            "parallel.pp": 1,
            "parallel.zero_stage": 0,
            "model.name": "llama3-70b",
            "training.global_batch_tokens": 9 * 8192 * 4,
        },
    )
    bf16 = training_step(base)
    fp4 = training_step(apply_overrides(base, {"training.precision": "fp4"}))
    fp8 = training_step(apply_overrides(base, {"training.precision": "fp8"}))
    assert bf16.feasible and fp4.feasible and fp8.feasible
    assert fp4.compute_s < fp8.compute_s < bf16.compute_s
    assert math.isclose(fp4.mfu_precision_peak, fp4.mfu * 2500 / 15000, rel_tol=1e-12)
    assert math.isclose(fp8.mfu_precision_peak, fp8.mfu * 2500 / 5000, rel_tol=1e-12)
    mem16, mem4 = bf16.memory, fp4.memory
    assert mem16 is not None and mem4 is not None
    counts = shape_counts(base.model)
    gemm_params = mem16.params_dense - 2 * counts.output_layer / 8  # the ends' embeddings
    extra = 2 * 0.5625 * (1 - 0.16) * gemm_params / GIB
    assert (NVFP4_BYTES, NVFP4_BF16_SHARE) == (0.5625, 0.16)
    assert math.isclose(mem4.weights_gib - mem16.weights_gib, extra, rel_tol=1e-9)
    # the linear-GEMM time: 1 / ((1 - 0.16) / 6 + 0.16) = 3.33x faster; attention unchanged
    assert fp4.to_dict()["precision"] == "fp4"


# ------------------------------------------------------------------ scale-out vs NVLink


@pytest.mark.parametrize(
    "over",
    [
        {},
        {"cluster.n_gpus": 8, "parallel.pp": 1, "model.name": "llama3-8b"},
        {"parallel.tp": 4, "parallel.cp": 2},
        {"model.name": "mixtral-8x7b", "parallel.ep": 8, "parallel.tp": 1, "parallel.pp": 1},
    ],
)
def test_scale_out_and_nvlink_shares_add_to_the_exposed_share(over: dict) -> None:
    step = training_step(apply_overrides(Scenario(), over))
    assert step.feasible
    d = step.to_dict()
    assert math.isclose(
        d["scale_out_share_of_step"] + d["scale_up_share_of_step"],
        d["network_share_of_step"],
        rel_tol=1e-12,
        abs_tol=1e-15,
    )
    assert 0 <= d["scale_out_share_of_step"] and 0 <= d["scale_up_share_of_step"]
    assert math.isclose(
        d["step_time_ideal_scale_out_s"], step.step_time_s - step.exposed_scale_out_s
    )
    assert d["step_time_ideal_network_s"] <= d["step_time_ideal_scale_out_s"] <= step.step_time_s
    if step.n_gpus == 8:  # one NVLink domain: nothing crosses the network
        assert d["scale_out_share_of_step"] == 0 and d["scale_out_dims"] == []


def test_the_default_step_puts_tp_on_nvlink_and_dp_pp_on_the_network() -> None:
    """N6: 3.40 of the 3.50 s exposed is TP on NVLink; the scale-out fabric is under 1 %."""
    step = training_step(Scenario())
    assert set(step.scale_out_dims) == {"dp", "pp"}
    assert step.scale_out_share_of_step < 0.01 < 0.15 < step.scale_up_share_of_step
