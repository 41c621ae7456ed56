"""What Megatron-Core, Transformer Engine and torchtitan allocate that the memory model counts
by hand: QK norm inputs, the router's state, the precision-aware optimizer's 16-bit master
remainder, torchao's FP8 weight casts under activation checkpointing, and what torchtitan's
tensor parallelism keeps (the all-gathered linear inputs, the rematerialised block, the
loss-parallel cross entropy) (issue 25)."""

from __future__ import annotations

import pytest

from fabric_model.catalog import load_catalog
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.scenario.shapes import shape_counts
from fabric_model.training.memory import (
    GIB,
    ROUTER_BYTES_PER_EXPERT,
    TITAN_LOGITS_BYTES,
    TITAN_LOSS_PARALLEL_BYTES,
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


#: A small Llama-shaped dense model under torchtitan's FSDP2 + TP (pp = 1: no loss on rank 0
#: unless pp = 1; pp = 2 separates the rematerialised block from the loss).
TITAN_TP = {
    "cluster.n_gpus": 8,
    "model.name": "custom",
    "model.kind": "dense",
    "model.layers": 4,
    "model.hidden": 1024,
    "model.ffn_hidden": 4096,
    "model.heads": 8,
    "model.kv_heads": 4,
    "model.vocab": 32768,
    "model.seq_len": 2048,
    "model.tied_embeddings": False,
    "parallel.tp": 4,
    "parallel.pp": 1,
    "parallel.cp": 1,
    "parallel.zero_stage": 2,
    "training.framework": "torchtitan",
    "training.micro_batch": 2,
    "training.global_batch_tokens": 32 * 2048,
    "training.recompute": "full",
    "training.flash_attention": True,
    "training.precision": "bf16",
}
H, F, D, TOKENS = 1024, 4096, 128, 2 * 2048


def _titan(extra: dict | None = None) -> tuple[Scenario, object]:
    s = apply_overrides(Scenario(), {**TITAN_TP, **(extra or {})})
    return s, _plan(s)


def test_torchtitan_tp_keeps_the_gathered_qkv_and_fc1_inputs_whole() -> None:
    """torchtitan's PrepareModuleInput all-gathers the norm output (Shard(1) -> Replicate)
    before wq/wk/wv and w1/w3, and autograd saves that whole sequence; Megatron's sequence
    parallelism saves the shard and gathers again in the backward pass. Per GPU and layer
    the two inputs differ by 2 x tokens x h x 2 bytes x (1 - 1 / tp); under Float8 the
    gathered input is the FP8 cast (torchao PrepareFloat8ModuleInput): 1 byte."""
    s, plan = _titan({"training.recompute": "none"})
    megatron = apply_overrides(s, {"training.framework": "megatron", "parallel.zero_stage": 1})
    titan_b = activation_bytes_per_layer(s, plan, False)
    mega_b = activation_bytes_per_layer(megatron, _plan(megatron), False)
    assert titan_b - mega_b == pytest.approx(2 * TOKENS * H * 2 * (1 - 1 / 4), rel=1e-12)
    # by hand: norm inputs 2 x 2h / tp, gathered inputs 2 x 2h, Q K V (8 + 2 x 4) heads x 128,
    # the attention output 8 x 128, FC1 output 2f and FC2 input f, all BF16 and over tp
    per_token = 2 * 2 * H / 4 + 2 * 2 * H + 2 * ((8 + 8) * D + 8 * D + 2 * F + F) / 4
    assert titan_b == pytest.approx(TOKENS * per_token, rel=1e-12)
    fp8, plan8 = _titan({"training.recompute": "none", "training.precision": "fp8"})
    assert titan_b - activation_bytes_per_layer(fp8, plan8, False) == pytest.approx(
        2 * TOKENS * H * 1, rel=1e-12
    )
    # one GPU: nothing is gathered, the frameworks agree
    one, plan1 = _titan({"training.recompute": "none", "parallel.tp": 1})
    mega1 = apply_overrides(one, {"training.framework": "megatron", "parallel.zero_stage": 1})
    assert activation_bytes_per_layer(one, plan1, False) == activation_bytes_per_layer(
        mega1, _plan(mega1), False
    )


def test_torchtitan_full_ac_rematerialises_the_whole_block() -> None:
    """ptd_checkpoint_wrapper reruns the whole block in the backward pass, so the transient of
    full AC on a rank without the loss is what the block saves without checkpointing (not
    the op-level selective policy's subset)."""
    s, plan = _titan({"parallel.pp": 2})
    hbm = load_catalog().gpu("h100").hbm_gib
    mem = memory_per_gpu(s, plan, shape_counts(s.model), hbm)
    rank0 = next(st for st in mem.stages if st.rank == 0)
    none = activation_bytes_per_layer(s, plan, False, "none")
    assert rank0.transient_gib * GIB == pytest.approx(none, rel=1e-12)
    assert none > activation_bytes_per_layer(s, plan, False, "selective")


def test_loss_parallel_cross_entropy_and_the_output_layers_inputs() -> None:
    """Under TP torchtitan's loss runs DTensor's loss_parallel decompositions: the backward
    pass holds four FP32 tensors per local logit (16 bytes) where the fused kernel's count
    is 14; beside it the output layer keeps its all-gathered BF16 input whole and the final
    norm its sharded input: 2 x tokens x h x (1 + 1 / tp) bytes."""
    assert (TITAN_LOSS_PARALLEL_BYTES, TITAN_LOGITS_BYTES) == (16, 14)
    hbm = load_catalog().gpu("h100").hbm_gib
    s, plan = _titan()
    mem = memory_per_gpu(s, plan, shape_counts(s.model), hbm)
    loss = TOKENS * 32768 / 4 * 16 + 2 * TOKENS * H * (1 + 1 / 4)
    assert mem.transient_gib * GIB == pytest.approx(loss, rel=1e-12)
    one, plan1 = _titan({"parallel.tp": 1})
    mem1 = memory_per_gpu(one, plan1, shape_counts(one.model), hbm)
    assert mem1.transient_gib * GIB == pytest.approx(
        TOKENS * 32768 * 14 + 2 * TOKENS * H * 2, rel=1e-12
    )


# ----------------------------------------------------------------- NCCL's buffers (issue 25)
#: One connection's LL + LL128 + Simple buffers (NCCL src/init.cc DEFAULT_*BUFFSIZE):
#: 8 x 512 x 8 x 16 + 120 x 640 x 8 x 8 + 4 MiB.
CONNECTION = 524_288 + 4_915_200 + 4_194_304
MIB = 2**20


def _llama8b(extra: dict) -> tuple[Scenario, object]:
    s = apply_overrides(
        Scenario(),
        {
            "cluster.n_gpus": 8,
            "model.name": "llama3-8b",
            "model.seq_len": 8192,
            "training.micro_batch": 1,
            "training.recompute": "none",
            "training.global_batch_tokens": 512 * 8192,
            "parallel.pp": 1,
            "parallel.cp": 1,
            "parallel.ep": 1,
            **extra,
        },
    )
    return s, _plan(s)


def test_a_connection_holds_the_three_protocols_buffers() -> None:
    from fabric_model.training.nccl_memory import CONNECTION_BYTES

    assert CONNECTION_BYTES == CONNECTION == 9_633_792


def test_eager_nccl_connects_ring_and_tree_on_every_megatron_group() -> None:
    """NCCL 2.21, TP8 on 8 A800 (no NVLS): world, TP and the model-parallel group, each
    16 channels x (ring + tree) x one connection: 3 x 294 MiB."""
    from fabric_model.training.nccl_memory import communicators, nccl_bytes_per_gpu

    s, plan = _llama8b({"cluster.gpu": "a100", "parallel.tp": 8, "nccl.version": "2.21"})
    assert [c.name for c in communicators(s, plan)] == ["world", "tp", "model-parallel"]
    assert nccl_bytes_per_gpu(s, plan) == 3 * 16 * 2 * CONNECTION


def test_nvls_buffers_where_nccl_runs_nvls() -> None:
    """TP2 DP4 on 8 H100, NCCL 2.21: world (8 GPUs) ring + tree and NVLS 16 channels x 2 x
    (1 MiB + 2 MiB sync) x 8 heads; TP2 and the model-parallel group a ring only (a two-rank
    chain reuses it; NVLS needs 3+ GPUs); both DP groups ring + tree and NVLS over 4 heads."""
    from fabric_model.training.nccl_memory import nccl_bytes_per_gpu

    s, plan = _llama8b({"parallel.tp": 2, "nccl.version": "2.21"})
    ring_tree = 16 * 2 * CONNECTION
    world = ring_tree + 16 * 2 * 3 * MIB * 8
    dp = ring_tree + 16 * 2 * 3 * MIB * 4
    assert nccl_bytes_per_gpu(s, plan) == world + 2 * 16 * CONNECTION + 2 * dp
    # NCCL_NVLS_ENABLE=0: the rings and trees only
    off = apply_overrides(s, {"fabric.nvls": False})
    assert nccl_bytes_per_gpu(off, plan) == 3 * ring_tree + 2 * 16 * CONNECTION
    # 2.32 connects at first use: the ring, and NVLS without the sync area (1 MiB a
    # channel and head); from 2.28 a two-GPU group runs NVLS too
    lazy = apply_overrides(s, {"nccl.version": "2.32"})
    ring = 16 * CONNECTION
    expected = (
        (ring + 16 * 2 * MIB * 8) + 2 * (ring + 16 * 2 * MIB * 2) + 2 * (ring + 16 * 2 * MIB * 4)
    )
    assert nccl_bytes_per_gpu(lazy, plan) == expected


def test_nccl_buffers_are_in_nvidia_smi_not_in_pytorch_reserved() -> None:
    s, plan = _llama8b({"parallel.tp": 2, "nccl.version": "2.21"})
    gpu = load_catalog().gpu(s.cluster.gpu)
    eager = memory_per_gpu(s, plan, shape_counts(s.model), gpu.hbm_gib)
    lazy = memory_per_gpu(
        apply_overrides(s, {"nccl.version": "2.32"}), plan, shape_counts(s.model), gpu.hbm_gib
    )
    assert eager.reserved_gib == lazy.reserved_gib and eager.allocated_gib == lazy.allocated_gib
    assert eager.total_gib > lazy.total_gib


def test_pipeline_sends_use_two_channels_to_a_peer_across_the_network() -> None:
    """Llama 3 8B PP2 TP8 on 16 H100: the two stages sit in different NVLink domains, so
    the pipeline communicator connects 2 channels to its one peer (paths.cc)."""
    from fabric_model.training.nccl_memory import communicator_bytes, communicators

    s, plan = _llama8b({"cluster.n_gpus": 16, "parallel.tp": 8, "parallel.pp": 2})
    (pp,) = [c for c in communicators(s, plan) if c.name == "pp"]
    assert (pp.kind, pp.peers, pp.domains) == ("p2p", 1, 2)
    assert communicator_bytes(s, pp) == 2 * CONNECTION
