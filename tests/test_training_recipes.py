"""Memory and data-parallel mechanisms of production recipes (issue 25, items 1 and 5).

Each mechanism against a hand calculation; the published plans that need them are in
``tests/test_published_plans.py`` (their recipe settings in ``tests/golden/training_memory.yaml``).
"""

from __future__ import annotations

import math

import pytest
import yaml

from fabric_model.catalog import load_catalog
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.scenario.shapes import shape_counts
from fabric_model.training import training_step
from fabric_model.training.memory import (
    GIB,
    activation_bytes_per_layer,
    linear_input_bytes,
    model_state_bytes,
    parse_pipeline_layout,
    pipeline_layout_problem,
    stage_layers,
)
from fabric_model.training.step import _Buckets, offload_time_s, resolve_plan
from fabric_model.validate.memory_golden import MEMORY_GOLDEN_PATH
from fabric_model.validate.training_golden import golden_scenario

PLANS = {p["name"]: p for p in yaml.safe_load(MEMORY_GOLDEN_PATH.read_text())["plans"]}


def plan_scenario(name: str, **over: object) -> Scenario:
    return apply_overrides(golden_scenario(PLANS[name]["scenario"]), dict(over))


# ------------------------------------------------------------------------- model states


def test_model_state_bytes_follow_megatron_table() -> None:
    """Megatron's dist_optimizer.md: bf16 params + fp32 grads = 6 + 12/d; bf16 grads 4 + 16/d."""
    s = Scenario()
    assert model_state_bytes(s) == (2, 4, 12, 0)
    w, g, o, shard = model_state_bytes(apply_overrides(s, {"training.grad_reduce_in_fp32": False}))
    assert (w + g, o + shard) == (4, 16)  # the fp16 row of the table: 4 + 16/d
    # precision-aware optimizer over BF16 weights: 16-bit master remainder + 2 BF16 moments
    pa = apply_overrides(s, {"training.optimizer_moments": "bf16"})
    assert model_state_bytes(pa)[2] == 6
    # over FP8 weights Megatron keeps the whole FP32 master: 4 + 2 + 2
    fp8 = {"training.precision": "fp8", "training.fp8_param_gather": True}
    assert model_state_bytes(apply_overrides(pa, fp8))[2] == 8


def test_fp8_weights_keep_a_transpose_on_hopper_only() -> None:
    """TE keeps the transposed FP8 weight where FP8 GEMMs need TN layouts (sm90)."""
    over = {"training.precision": "fp8", "training.fp8_param_gather": True}
    hopper = apply_overrides(Scenario(), over)
    blackwell = apply_overrides(Scenario(), {**over, "cluster.gpu": "b200"})
    assert model_state_bytes(hopper)[0] == 2 and model_state_bytes(blackwell)[0] == 1


def test_fp8_param_gather_stores_fp8_weights_and_gathers_one_byte() -> None:
    base = apply_overrides(
        Scenario(),
        {"cluster.gpu": "b200", "training.precision": "fp8", "parallel.pp": 1},
    )
    on = apply_overrides(base, {"training.fp8_param_gather": True})
    a, b = training_step(base), training_step(on)
    assert a.memory is not None and b.memory is not None
    # per GPU: the GEMM weights are the rank's weights less the embedding and output layer
    gemm = a.memory.params_dense - 2 * shape_counts(base.model).output_layer / 8
    # BF16 weight (2) + FP8 cache (1) -> the FP8 weight alone (1): 2 bytes less per GEMM weight
    saved = (a.memory.weights_gib - b.memory.weights_gib) * GIB
    assert saved == pytest.approx(2 * gemm, rel=0.05)
    assert b.comm_s["dp"] < a.comm_s["dp"]  # the all-gather moves 1 byte per weight, not 2
    with_bf16 = apply_overrides(on, {"training.precision": "bf16"})
    assert any(p.key == "training.fp8_param_gather" for p in resolve_plan(with_bf16)[1])


def test_fp8_activations_save_the_linear_inputs_in_one_byte() -> None:
    """TE saves the FP8 input of QKV, FC1, FC2 (and the projection's beside FlashAttention's)."""
    s = apply_overrides(
        Scenario(),
        {"model.name": "llama3-8b", "training.recompute": "none", "cluster.gpu": "b200"},
    )
    fp8 = apply_overrides(s, {"training.precision": "fp8"})
    titan = apply_overrides(fp8, {"training.framework": "torchtitan"})
    hopper = apply_overrides(fp8, {"cluster.gpu": "h100"})
    assert (linear_input_bytes(s, 8), linear_input_bytes(fp8, 8)) == (2, 1)
    assert linear_input_bytes(titan, 8) == 2
    # Hopper: a transpose, and with sequence parallelism the row-wise data too
    assert (linear_input_bytes(hopper, 1), linear_input_bytes(hopper, 8)) == (1, 2)
    plan = resolve_plan(s)[0]
    assert plan is not None
    m = s.model
    tokens = m.seq_len * plan.micro_batch / plan.tp
    # one byte less for both norm outputs and the FC2 input, one more for the proj's copy
    per_token = 2 * m.hidden + m.ffn_hidden - m.heads * (m.hidden // m.heads)
    diff = activation_bytes_per_layer(s, plan, False) - activation_bytes_per_layer(fp8, plan, False)
    assert diff == pytest.approx(tokens * per_token)


# ---------------------------------------------------------------------- pipeline layout


LLAMA405_GB200 = "Megatron-Bridge 25.11 Llama 3.1 405B, 256 GB200, FP8 current scaling"


def test_pipeline_layout_parses_megatron_syntax() -> None:
    stages = parse_pipeline_layout("Et|(tt|)*62tL")
    assert len(stages) == 64 and sum(st.count("t") for st in stages) == 126
    assert parse_pipeline_layout("Et*2|(t*2|)*2,tL") == ["Ett", "tt", "tt", "tL"]


def test_pipeline_layout_per_rank_layers_and_warm_up() -> None:
    """PP16 x VP4, Et|(tt|)*62tL: rank 0 holds 1 + 2 + 2 + 2 layers, rank 15 2 + 2 + 2 + 1."""
    s = plan_scenario(LLAMA405_GB200)
    plan = resolve_plan(s)[0]
    assert plan is not None
    assert [stage_layers(s, plan, r) for r in (0, 1, 15)] == [7, 8, 7]
    assert plan.layers_per_stage == 8
    # rank 0 warm-up: 2 (16 - 1) + 3 x 16 + 1 = 79 chunk forwards in flight, chunk (j // 16) % 4:
    # 16 x 1 + 16 x 2 + 16 x 2 + 16 x 2 + 15 x 1 = 127 layer-micro-batches (even: 79 x 2 = 158)
    mem = training_step(s).memory
    assert mem is not None
    first = next(st for st in mem.stages if st.rank == 0)
    per_layer = activation_bytes_per_layer(s, plan, False)
    assert first.activations_gib * GIB == pytest.approx(127 * per_layer, rel=1e-9)


@pytest.mark.parametrize(
    ("layout", "words"),
    [
        ("Et|(tt|)*61tL", "stages"),
        ("tt|(tt|)*62tL", "embedding"),
        ("Et|(tt|)*62tt", "loss"),
        ("Et|(tt|)*62ttL", "transformer layers"),
        ("Et|(tx|)*62tL", "unknown"),
    ],
)
def test_pipeline_layout_is_refused_with_megatrons_rules(layout: str, words: str) -> None:
    s = plan_scenario(LLAMA405_GB200, **{"parallel.pipeline_layout": layout})
    assert words in pipeline_layout_problem(s, 16, 4)
    res = training_step(s)
    assert not res.feasible and res.problems[0].key == "parallel.pipeline_layout"


# ---------------------------------------------------------------------------- offload


FSDP70 = "Megatron-Bridge 25.11 Llama 3 70B, 64 GB200, Megatron-FSDP, FP8 current scaling"


def test_offload_moves_activations_to_host_memory() -> None:
    s = plan_scenario(FSDP70)
    plan = resolve_plan(s)[0]
    assert plan is not None
    res = training_step(s)
    assert res.feasible and res.memory is not None
    per_layer = activation_bytes_per_layer(s, plan, False)
    # 40 of 80 layers in host memory, one in transit back: 41 layers' activations in HBM
    assert res.memory.offloaded_gib * GIB == pytest.approx(40 * per_layer)
    assert res.memory.activations_gib * GIB == pytest.approx(41 * per_layer)
    # NVLink-C2C at 225 GB/s per GPU hides the copies behind the compute (recipe: 1937 TF/GPU)
    assert res.offload_s == 0.0


def test_offload_transfer_not_hidden_is_added_to_the_step() -> None:
    """Over PCIe Gen5 (57.2 GB/s) a large offload outruns the pass it overlaps."""
    s = plan_scenario(FSDP70)
    res = training_step(s)
    assert res.memory is not None and res.plan is not None
    server = load_catalog().server("hgx_h100")
    from fabric_model.training.step import ComputeTimes

    ct = ComputeTimes(1.0, 0.25, 2.0, 0.0, 0.0, 1.0)  # forward 0.25 s, backward 0.75 s
    # 57.2 GB/s and a 2 us copy start-up per offloaded layer (pcie_dma_latency_us)
    transfer = res.memory.offloaded_gib * GIB / 57.2e9 + 40 * 2e-6
    expected = (max(0, transfer - 0.25) + max(0, transfer - 0.75)) * res.plan.micro_batches
    assert offload_time_s(s, res.plan, res.memory, server, ct) == pytest.approx(expected)


def test_offload_is_refused_where_megatron_refuses_it_or_the_host_is_full() -> None:
    s = plan_scenario(FSDP70)
    for over, key_words in (
        ({"parallel.pp": 2}, "pipeline"),
        ({"training.recompute": "selective"}, "recomputation"),
        ({"training.offload_layers": 80}, "less than"),
    ):
        res = training_step(apply_overrides(s, {**over, "parallel.dp": "auto"}))
        assert any(
            p.key == "training.offload_layers" and key_words in p.message for p in res.problems
        ), over
    # 8 H100 per 2 TB server: 79 layers of a 64K-token micro-batch do not fit the host
    big = apply_overrides(
        s,
        {
            "cluster.gpu": "h100",
            "cluster.gpus_per_node": 8,
            "cluster.nvlink_domain": 8,
            "training.micro_batch": 8,
            "training.offload_layers": 79,
        },
    )
    res = training_step(big)
    assert any("host memory" in p.message for p in res.problems)


# ----------------------------------------------------------------------------- folding


def test_expert_parallelism_folds_over_data_and_context_ranks() -> None:
    """NeMo's Mixtral 8x22B: EP8 over DP4 x CP8; expert data parallelism 4 x 8 / 8 = 4."""
    s = plan_scenario("NeMo 25.04 Mixtral 8x22B, 256 GB200, 64K context, FP8")
    plan, problems = resolve_plan(s)
    assert plan is not None and not problems and plan.folded
    assert plan.dp == 4 and plan.cp == 8
    lay = plan.expert_layout
    assert list(lay.members("ep")) == [2 * i for i in range(8)]  # stride TP, across CP
    assert lay.size("edp") == 4
    res = training_step(s)
    assert res.feasible and res.memory is not None
    states = model_state_bytes(s)
    optim = res.memory.params_dense * states[2] / 32 + res.memory.params_expert * states[2] / 4
    assert res.memory.optimizer_gib * GIB == pytest.approx(optim, rel=1e-9)
    bad = apply_overrides(
        s,
        {
            "parallel.ep": 8,
            "parallel.cp": 1,
            "parallel.tp": 4,
            "cluster.n_gpus": 48,
            "parallel.pp": 2,
        },
    )
    assert any(p.key == "parallel.ep" for p in resolve_plan(bad)[1])


# -------------------------------------------------------------------- data parallelism


def test_bucket_queue_matches_a_hand_calculation() -> None:
    """Three 1 s buckets ready every 2 s over a 6 s backward: only the last is exposed."""
    fast = _Buckets(3, 1.0, 0.0, 10.0, None)
    assert fast.exposed_s(6.0) == pytest.approx(1.0)
    slow = _Buckets(3, 3.0, 0.0, 10.0, None)  # max(2 + 9, 6 + 3) - 6 = 5
    assert slow.exposed_s(6.0) == pytest.approx(5.0)
    rest = _Buckets(2, 1.0, 0.5, 10.0, None, rest_params=5.0)  # ready 2.4, 4.8; rest at 6
    assert rest.exposed_s(6.0) == pytest.approx(0.5)
    # two interleaved chunks at PP4: chunk 0 ends 4 slots after chunk 1 and hides its queue
    chunked = _Buckets(3, 1.0, 0.0, 10.0, None, chunks=2)
    assert chunked.total_s == 6.0
    assert chunked.exposed_s(6.0, pp=4) == pytest.approx(1.0)  # the last bucket only


def test_weak_scaling_of_a_small_model_bends_on_a_slow_fabric() -> None:
    """Llama 3 8B, ZeRO-1, 8 sequences per GPU: the gradient reduction outgrows the backward."""

    def step(n: int) -> float:
        s = apply_overrides(
            Scenario(),
            {
                "model.name": "llama3-8b",
                "parallel.tp": 1,
                "parallel.pp": 1,
                "cluster.n_gpus": n,
                "fabric.link_gbps": 200,
                "training.global_batch_tokens": 8192 * n,
                "training.recompute": "full",
            },
        )
        res = training_step(s)
        assert res.feasible, res.reason
        return res.step_time_s

    small, large = step(16), step(1024)
    assert large > 1.01 * small  # weak-scaling efficiency below 99 %
    fixed = apply_overrides(Scenario(), {"training.dp_overlap": 0.9})
    assert training_step(fixed).feasible  # the override still runs
    assert math.isfinite(training_step(fixed).step_time_s)
