"""DualPipe and the memory DeepSeek-V3's and Qwen3's published plans run in (issue 25).

Each mechanism against a hand calculation; the published plans that run on them are in
``tests/test_published_plans.py``. Sources: DeepSeek-V3 technical report (arXiv 2412.19437)
section 3.2.1, Table 2 and section 3.3.2; deepseek-ai/DualPipe (``dualpipe.py``,
``examples/example_dualpipe.py``); Megatron-Core ``experts.py`` (routing probabilities in the
expert activation), ``fused_bias_swiglu.py`` (``activation_func_fp8_input_store``),
``distrib_optimizer.py`` and Megatron-LM ``training.py`` (the FP32 gradient copy's lifetime).
"""

from __future__ import annotations

import math

import pytest

from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.scenario.shapes import shape_counts
from fabric_model.training import resolve_plan, training_step
from fabric_model.training.memory import (
    GIB,
    MemoryBreakdown,
    StageMemory,
    activation_bytes_per_layer,
    model_state_bytes,
)
from fabric_model.training.schedules import schedule_problems
from fabric_model.validate.training_golden import load_training_golden

#: Llama 3 70B on 48 H100, TP8 PP6 DP1, 16 micro-batches: 80 layers over 6 stages leave
#: ranks 0, 1, 4, 5 with 13 layers and ranks 2, 3 with 14.
SIX = {
    "cluster.n_gpus": 48,
    "parallel.tp": 8,
    "parallel.pp": 6,
    "model.name": "llama3-70b",
    "training.global_batch_tokens": 16 * 8192,
}
#: A small MoE model (Mixtral's shape, 4 layers) on one 8-GPU node, EP8, no pipeline.
MOE = {
    "cluster.n_gpus": 8,
    "model.name": "mixtral-8x7b",
    "model.layers": 4,
    "parallel.tp": 1,
    "parallel.pp": 1,
    "parallel.ep": 8,
    "training.recompute": "none",
    "training.global_batch_tokens": 8 * 4096,
}


def _memory(s: Scenario) -> MemoryBreakdown:
    res = training_step(s)
    assert res.memory is not None, res.reason
    return res.memory


def _rank(mem: MemoryBreakdown, rank: int) -> StageMemory:
    return {st.rank: st for st in mem.stages}[rank]


@pytest.fixture(scope="module")
def six() -> dict[str, MemoryBreakdown]:
    base = apply_overrides(Scenario(), SIX)
    return {
        sched: _memory(apply_overrides(base, {"training.schedule": sched}))
        for sched in ("1f1b", "dualpipe")
    }


# ---------------------------------------------------------------------------- DualPipe


def test_dualpipe_rank_holds_its_stage_and_the_mirror_stage(six: dict) -> None:
    """Rank 3 of 6 runs stages 3 and 2 (14 + 14 layers); rank 0 stages 0 and 5 (13 + 13)."""
    one, dual = six["1f1b"], six["dualpipe"]
    assert _rank(dual, 3).layers == 28 and _rank(dual, 0).layers == 26
    s = apply_overrides(Scenario(), SIX)
    dense_per_layer = shape_counts(s.model).non_expert_layer_params / s.model.layers
    hand_weights = 2 * dense_per_layer * 28 / 8  # BF16, TP8, both stages
    assert _rank(dual, 3).weights_gib * GIB == pytest.approx(hand_weights, rel=1e-9)
    assert _rank(dual, 3).weights_gib == pytest.approx(2 * _rank(one, 3).weights_gib)
    # p + 1 = 7 micro-batches through either stage: 7 x 28 / 2 = 98 layer-micro-batches,
    # against 1F1B's min(p - 3, m) = 3 x 14 = 42 on the same rank
    ratio = _rank(dual, 3).activations_gib / _rank(one, 3).activations_gib
    assert ratio == pytest.approx(98 / 42, rel=1e-9)


def test_dualpipe_copies_share_the_optimizer_shard(six: dict) -> None:
    """The two copies of a stage are data-parallel replicas: ZeRO-1 shards over 2 dp.

    DualPipe's example sums a copy's gradients with the mirror rank's; the optimizer state
    is one stage's, held half on each: the same bytes per rank as 1F1B's, gradients twice.
    """
    one, dual = six["1f1b"], six["dualpipe"]
    for rank in (0, 3):
        assert _rank(dual, rank).optimizer_gib == pytest.approx(_rank(one, rank).optimizer_gib)
        assert _rank(dual, rank).grads_gib == pytest.approx(2 * _rank(one, rank).grads_gib)


def test_dualpipe_first_rank_also_computes_a_loss(six: dict) -> None:
    """Rank 0 is the last stage of the reverse direction: it holds a micro-batch's logits."""
    one, dual = six["1f1b"], six["dualpipe"]
    assert _rank(one, 0).transient_gib == 0.0
    assert _rank(dual, 5).transient_gib > 0
    assert _rank(dual, 0).transient_gib == pytest.approx(_rank(dual, 5).transient_gib)


def test_dualpipe_runs_at_least_twice_pp_micro_batches() -> None:
    """deepseek-ai/DualPipe DualPipe.step asserts num_chunks >= num_ranks * 2."""
    key, message = schedule_problems("dualpipe", "megatron", 8, 1, 14)[0]
    assert key == "training.micro_batch" and "2 x parallel.pp = 16" in message
    assert not schedule_problems("dualpipe", "megatron", 8, 1, 16)


# --------------------------------------------------------------- what a layer keeps


def test_megatron_keeps_no_expert_output_for_the_combine() -> None:
    """Megatron-Core multiplies the routing weights into the expert activation: per token
    a routed copy keeps its input h, FC1 output 2f and FC2 input f (BF16), and the router
    its FP32 scores and 1-byte map per expert; torchtitan weights the expert output h after
    the experts and keeps it."""
    s = apply_overrides(Scenario(), MOE)
    plan, problems = resolve_plan(s)
    assert plan is not None and not problems
    m = s.model
    h, f, k, tokens = m.hidden, m.ffn_hidden, m.top_k, m.seq_len
    q, kv = m.heads * m.hidden // m.heads, 2 * m.kv_heads * m.hidden // m.heads
    attention = 2 * (h + h + q + kv + q)  # norm input and output, Q K V, attention output
    moe = 2 * (h + h + k * (h + 2 * f + f))  # norm input, router input, the routed copies
    moe += (4 + 1) * m.n_experts  # the router's FP32 scores and routing map
    megatron = activation_bytes_per_layer(s, plan, True)
    assert megatron == pytest.approx(tokens * (attention + moe), rel=1e-12)
    titan = activation_bytes_per_layer(
        apply_overrides(s, {"training.framework": "torchtitan"}), plan, True
    )
    assert titan - megatron == pytest.approx(tokens * k * 2 * h, rel=1e-12)


def test_fp8_swiglu_input_store_halves_the_fc1_output() -> None:
    """activation_func_fp8_input_store: the SwiGLU input (2 f per copy) in 1 byte."""
    s = apply_overrides(Scenario(), MOE)
    plan, _ = resolve_plan(s)
    assert plan is not None
    fp8 = apply_overrides(s, {"training.activation_fp8_input_store": True})
    m = s.model
    saved = activation_bytes_per_layer(s, plan, True) - activation_bytes_per_layer(fp8, plan, True)
    assert saved == pytest.approx(m.seq_len * m.top_k * 2 * m.ffn_hidden * 1.0, rel=1e-12)
    dense = activation_bytes_per_layer(s, plan, False) - activation_bytes_per_layer(
        fp8, plan, False
    )
    assert dense == pytest.approx(m.seq_len * 2 * m.ffn_hidden, rel=1e-12)


def test_fp8_swiglu_input_store_needs_a_gated_mlp() -> None:
    """Megatron-Core: "Storing activation input in FP8 is supported only for SwiGLU"."""
    s = apply_overrides(
        Scenario(),
        {**SIX, "model.name": "gpt3-175b", "training.activation_fp8_input_store": True},
    )
    res = training_step(s)
    assert not res.feasible
    assert res.problems[0].key == "training.activation_fp8_input_store"


# ----------------------------------------------------------- the optimizer step's peak


@pytest.mark.parametrize("seq_len", [4096, 128])
def test_fp32_gradient_copy_is_held_at_the_optimizer_step_only(seq_len: int) -> None:
    """BF16 gradient buffers: the optimizer's FP32 copy of its shard lives from the step to
    the next zero_grad, when no activations are held; the peak is the larger moment."""
    s = apply_overrides(
        Scenario(),
        {
            **MOE,
            "model.seq_len": seq_len,
            "training.global_batch_tokens": 8 * seq_len,
            "training.grad_reduce_in_fp32": False,
        },
    )
    mem = _memory(s)
    _, g_b, _, g_shard_b = model_state_bytes(s)
    assert (g_b, g_shard_b) == (2, 4)
    # experts over EP8 with expert DP 1: the whole FP32 copy of the rank's expert gradients
    shard = g_shard_b * (mem.params_dense / 8 + mem.params_expert) / GIB
    assert mem.grads_gib * GIB == pytest.approx(g_b * (mem.params_dense + mem.params_expert))
    backward_peak = mem.activations_gib + (mem.transient_gib if seq_len == 4096 else 0.0)
    if seq_len == 4096:  # the activations outweigh the copy: the backward pass's peak
        assert mem.activations_gib > shard
    else:  # 128-token sequences: the optimizer step's peak
        assert mem.activations_gib + mem.transient_gib == pytest.approx(shard, rel=1e-9)
    assert mem.activations_gib + mem.transient_gib == pytest.approx(
        max(backward_peak, shard), rel=1e-9
    )


# --------------------------------------------------------------- DeepSeek-V3's own run


def test_deepseek_v3_runs_its_own_plan_with_dualpipe() -> None:
    """2,048 H800, PP16 DualPipe, EP64, ZeRO-1 (report 3.2-3.3): heaviest rank 8 runs
    stages 8 and 7 (4 + 4 layers), p + 1 = 17 micro-batches; the plan is feasible, and
    DualPipe's bubble is below 1F1B's (the golden row: 1,543 tokens/s/GPU)."""
    case = {c.name: c for c in load_training_golden()}["deepseek-v3 2,048 H800 (technical report)"]
    assert case.scenario.training.schedule == "dualpipe"
    dual = training_step(case.scenario)
    assert dual.feasible, dual.reason
    assert dual.memory is not None and dual.memory.heaviest_rank == 8
    top = _rank(dual.memory, 8)
    assert top.layers == 8 and top.micro_batches_in_flight == 17
    one = training_step(apply_overrides(case.scenario, {"training.schedule": "1f1b"}))
    assert one.feasible and dual.bubble_s < one.bubble_s / 2
    assert math.isclose(dual.memory.optimizer_gib, _rank(one.memory, 8).optimizer_gib, rel_tol=1e-9)
