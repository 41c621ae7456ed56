"""What Megatron-Core, Transformer Engine and torchtitan allocate that the memory model counts
by hand: QK norm inputs, the router's state, the precision-aware optimizer's 16-bit master
remainder, and torchao's FP8 weight casts under activation checkpointing (issue 25)."""

from __future__ import annotations

import pytest

from fabric_model.catalog import load_catalog
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.scenario.shapes import shape_counts
from fabric_model.training.memory import (
    GIB,
    ROUTER_BYTES_PER_EXPERT,
    activation_bytes_per_layer,
    fp8_casts_rebuilt,
    memory_per_gpu,
    model_state_bytes,
)
from fabric_model.training.step import resolve_plan

QWEN3 = {  # Qwen3-30B-A3B's shape, two layers, on one GPU
    "cluster.n_gpus": 8,
    "model.name": "custom",
    "model.kind": "moe",
    "model.layers": 2,
    "model.hidden": 2048,
    "model.ffn_hidden": 768,
    "model.heads": 32,
    "model.kv_heads": 4,
    "model.head_dim": 128,
    "model.vocab": 151936,
    "model.seq_len": 4096,
    "model.n_experts": 128,
    "model.top_k": 8,
    "model.tied_embeddings": False,
    "parallel.tp": 1,
    "parallel.pp": 1,
    "parallel.ep": 8,
    "training.recompute": "none",
    "training.global_batch_tokens": 8 * 4096,
}


def _plan(s: Scenario):  # type: ignore[no-untyped-def]
    plan, problems = resolve_plan(s)
    assert plan is not None and not problems, problems
    return plan


def test_qk_norm_keeps_the_query_and_key_heads_again() -> None:
    """Megatron-Core attention.py normalises the query and key heads and TE's RMSNorm saves
    its input: per token (32 + 4) heads x 128 x 2 bytes = 9,216 bytes a layer."""
    s = apply_overrides(Scenario(), QWEN3)
    plan = _plan(s)
    with_norm = apply_overrides(s, {"model.qk_norm": True})
    for moe in (True, False):
        extra = activation_bytes_per_layer(with_norm, plan, moe) - activation_bytes_per_layer(
            s, plan, moe
        )
        assert extra == pytest.approx(4096 * (32 + 4) * 128 * 2, rel=1e-12)
    # full recomputation keeps only the layer's input
    full = {"training.recompute": "full"}
    assert activation_bytes_per_layer(
        apply_overrides(with_norm, full), plan, True, "full"
    ) == activation_bytes_per_layer(apply_overrides(s, full), plan, True, "full")


def test_the_router_keeps_fp32_scores_and_a_map_per_expert() -> None:
    """TE's FusedTopkScoreFunction saves the FP32 scores and the bool routing map: 4 + 1
    bytes per token and expert, split over the tensor-parallel GPUs with the tokens."""
    assert ROUTER_BYTES_PER_EXPERT == 5
    s = apply_overrides(Scenario(), QWEN3)
    plan = _plan(s)
    more = apply_overrides(s, {"model.n_experts": 256})
    extra = activation_bytes_per_layer(more, plan, True) - activation_bytes_per_layer(s, plan, True)
    assert extra == pytest.approx(4096 * 128 * 5, rel=1e-12)
    assert activation_bytes_per_layer(more, plan, False) == activation_bytes_per_layer(
        s, plan, False
    )


def test_precision_aware_optimizer_keeps_a_16_bit_master_remainder() -> None:
    """use_precision_aware_optimizer over BF16 weights: TE's FusedAdam stores the master as an
    int16 remainder (store_param_remainders) and reads the BF16 gradient buffer
    (decoupled_grad): 2 + 4 + 4 bytes of optimizer state, no FP32 gradient copy."""
    bf16_grads = {"training.grad_reduce_in_fp32": False}
    s = apply_overrides(Scenario(), bf16_grads)
    assert model_state_bytes(s) == (2, 2, 12, 4)  # Megatron-Core's own FP32 master and copy
    pa = apply_overrides(s, {"training.precision_aware_optimizer": True})
    assert model_state_bytes(pa) == (2, 2, 10, 0)
    both = apply_overrides(pa, {"training.optimizer_moments": "bf16"})
    assert model_state_bytes(both) == model_state_bytes(
        apply_overrides(s, {"training.optimizer_moments": "bf16"})
    )
    assert model_state_bytes(both) == (2, 2, 6, 0)
    # FP8 weights: Megatron-Core keeps the FP32 master whole
    fp8 = {"training.precision": "fp8", "training.fp8_param_gather": True}
    assert model_state_bytes(apply_overrides(pa, fp8))[2] == 12


def test_torchao_fp8_casts_are_rebuilt_under_checkpointing() -> None:
    """Under activation checkpointing a torchtitan block keeps none of the FP8 weights its
    Float8 matmuls saved: only the computing layer's casts exist; without it every layer's
    copy is held (1 byte per GEMM weight), and Megatron-Core's TE cache always is."""
    over = {
        "cluster.n_gpus": 8,
        "model.name": "llama3-8b",
        "model.seq_len": 8192,
        "parallel.tp": 1,
        "parallel.pp": 1,
        "parallel.zero_stage": 3,
        "training.framework": "torchtitan",
        "training.micro_batch": 2,
        "training.global_batch_tokens": 131072,
        "training.precision": "fp8",
    }
    hbm = load_catalog().gpu("h100").hbm_gib

    def memory(extra: dict):  # type: ignore[no-untyped-def]
        s = apply_overrides(Scenario(), {**over, **extra})
        plan = _plan(s)
        return s, plan, memory_per_gpu(s, plan, shape_counts(s.model), hbm)

    s_sel, plan_sel, sel = memory({"training.recompute": "selective"})
    s_none, plan_none, none = memory({"training.recompute": "none"})
    assert fp8_casts_rebuilt(s_sel, plan_sel) and not fp8_casts_rebuilt(s_none, plan_none)
    gemm = shape_counts(s_sel.model).non_expert_layer_params  # the 32 layers' GEMM weights
    assert none.weights_gib - sel.weights_gib == pytest.approx(gemm / GIB, rel=1e-9)
    # the computing layer's casts sit among the transients instead (one of 32 layers)
    assert sel.stages[0].transient_gib >= gemm / 32 / GIB
    megatron = apply_overrides(s_sel, {"training.framework": "megatron", "parallel.zero_stage": 1})
    assert not fp8_casts_rebuilt(megatron, _plan(megatron))
