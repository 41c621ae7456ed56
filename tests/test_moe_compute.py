"""MoE compute as it runs (issue 25 item 4) and the offload targets (item 1's memory pools).

Hand calculations of each mechanism (grouped GEMM tiles and roofline, router, permutation,
small-kernel floor, capacity, CXL / Grace paths, BF16 optimizer state) and the published
figures they rest on; the MoE rows of ``tests/golden/training_public.yaml`` hold the model
to published MoE throughput (``tests/test_training_golden.py``).
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_model.catalog import load_catalog
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.training import training_step
from fabric_model.training.gemm import (
    HBM_EFFICIENCY,
    TILE_M,
    TILE_N,
    GemmRates,
    expert_gemm_utilisation,
    grouped_gemm_utilisation,
)
from fabric_model.training.memory import model_state_bytes
from fabric_model.training.moe import (
    KERNEL_FLOOR_S,
    MOE_SMALL_KERNELS,
    ROUTER_SCORE_PASSES,
    hottest_load,
    moe_layer_time,
)
from fabric_model.training.offload import CXL_DEVICE_GBPS, offload_path
from fabric_model.training.step import resolve_plan

CAT = load_catalog()
H100 = CAT.gpu("h100")
HBM_BPS = H100.hbm_GBps * 1e9 * HBM_EFFICIENCY
MIXTRAL = {
    "model.name": "mixtral-8x7b",
    "cluster.n_gpus": 8,
    "parallel.tp": 1,
    "parallel.pp": 1,
    "parallel.ep": 8,
    "training.micro_batch": 1,
    "training.global_batch_tokens": 8 * 4096,
    "training.recompute": "none",
}


def _plan(over: dict[str, object]):  # type: ignore[no-untyped-def]
    s = apply_overrides(Scenario(), over)
    plan, problems = resolve_plan(s)
    assert plan is not None and not problems, problems
    return s, plan


# ------------------------------------------------------------------------ grouped GEMM


def test_grouped_gemm_tiles_by_hand() -> None:
    """8 experts of 4,096 tokens, N 1,536 (Qwen3-30B-A3B's FC1 at EP16): pooled tiles."""
    # 128 x 256 tiles: (4096 + 64) / 128 = 32.5 expected row tiles (dropless), 6 column
    # tiles, 8 experts: 1,560 tiles in 1,560 / 132 + 0.5 = 12.32 waves
    waves = 8 * 32.5 * 6 / H100.n_sms + 0.5
    hand = 8 * 4096 * 1536 / (waves * H100.n_sms * TILE_M * TILE_N)
    assert grouped_gemm_utilisation(4096, 1536, 2048, 8, H100) == pytest.approx(hand)
    # fixed shapes (capacity padding): 32 x 6 x 8 = 1,536 tiles in 12 full waves
    exact = 8 * 4096 * 1536 / (12 * H100.n_sms * TILE_M * TILE_N)
    assert grouped_gemm_utilisation(4096, 1536, 2048, 8, H100, exact=True) == pytest.approx(exact)


def test_grouped_gemm_roofline_by_hand() -> None:
    """At 64 tokens an expert's weights, read whatever M is, bound the GEMM (Williams 2009)."""
    rates = GemmRates(flops=989e12 * 0.661, hbm_Bps=HBM_BPS, elem_bytes=2.0)
    m, n, k, g = 64, 1536, 2048, 64  # 64 experts fill 3.4 waves of one-row-tile GEMMs
    moved = g * (n * k + m * (n + k)) * 2.0
    roofline = 2.0 * g * m * n * k / rates.flops / (moved / HBM_BPS)
    tiles = grouped_gemm_utilisation(m, n, k, g, H100)
    assert roofline < tiles
    assert grouped_gemm_utilisation(m, n, k, g, H100, rates) == pytest.approx(roofline)


@settings(max_examples=40, deadline=None)
@given(
    m=st.floats(1, 20_000),
    dm=st.floats(0.5, 5_000),
    n=st.integers(64, 20_000),
    k=st.integers(64, 20_000),
    groups=st.integers(1, 64),
    fp8=st.booleans(),
)
def test_grouped_gemm_efficiency_is_monotone_in_tokens_per_expert(
    m: float, dm: float, n: int, k: int, groups: int, fp8: bool
) -> None:
    """More tokens per expert never lowers the grouped GEMMs' efficiency (dropless)."""
    rates = GemmRates(
        flops=989e12 * 0.661 * (2 if fp8 else 1), hbm_Bps=HBM_BPS, elem_bytes=1 if fp8 else 2
    )
    for r in (None, rates):
        lo = grouped_gemm_utilisation(m, n, k, groups, H100, r)
        hi = grouped_gemm_utilisation(m + dm, n, k, groups, H100, r)
        assert hi >= lo - 1e-12
        assert 0 < lo <= 1
    f, h = n / 2, k
    lo = expert_gemm_utilisation(m, f, h, True, groups, H100, rates)
    assert expert_gemm_utilisation(m + dm, f, h, True, groups, H100, rates) >= lo - 1e-12


# ------------------------------------------------------------- router and permutation


def test_mixtral_router_and_permutation_by_hand() -> None:
    """Mixtral 8x7B on one H100 node, EP8: the gate GEMM and Megatron's all-to-all permutes."""
    s, plan = _plan(MIXTRAL)
    lt = moe_layer_time(s, plan, H100)
    t, h, e, k = 4096, 4096, 8, 2
    gate_bytes = 3 * (t * h * 2 + t * e * 4) + 4 * h * e * 4  # memory-bound: 3 x T h BF16
    router = gate_bytes / HBM_BPS + ROUTER_SCORE_PASSES * t * e * 4 / HBM_BPS
    assert lt.router_s == pytest.approx(router)
    # one local expert: permute (2 T k rows), unpermute (T k read, T written), both passes
    rows = 2 * t * k + t * k + t
    assert lt.permute_s == pytest.approx(2 * rows * h * 2 / HBM_BPS)
    assert lt.overhead_s == pytest.approx(max(router + lt.permute_s, 40 * 3e-6))
    assert lt.tokens_per_expert == t * k * 8 / 8  # 8,192 tokens: full GEMM waves
    assert lt.utilisation > 0.9


def test_small_kernels_floor_the_layer_where_tensors_are_small() -> None:
    """1K-token micro-batches of Mixtral: 40 kernels of >= 3 us outlast their bytes."""
    s, plan = _plan({**MIXTRAL, "model.seq_len": 1024, "training.global_batch_tokens": 8 * 1024})
    lt = moe_layer_time(s, plan, H100)
    assert lt.router_s + lt.permute_s < MOE_SMALL_KERNELS * KERNEL_FLOOR_S
    assert lt.overhead_s == pytest.approx(MOE_SMALL_KERNELS * KERNEL_FLOOR_S)


def test_fine_grained_experts_pay_more_per_flop() -> None:
    """DeepSeek-V3 (top-8 of 256, 2,048 wide) moves more bytes per expert FLOP than Mixtral."""
    mix = moe_layer_time(*_plan(MIXTRAL), H100)
    ds_over = {**MIXTRAL, "model.name": "deepseek-v3", "parallel.ep": 8}
    ds = moe_layer_time(*_plan(ds_over), H100)
    assert ds.overhead_s / ds.expert_gemm_s > 3 * mix.overhead_s / mix.expert_gemm_s
    assert ds.local_experts == 32


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(["mixtral-8x7b", "deepseek-v3"]),
    ep=st.sampled_from([1, 2, 8]),
    tp=st.sampled_from([1, 2]),
    mb=st.sampled_from([1, 2, 4]),
    seq=st.sampled_from([512, 4096]),
    dispatch=st.sampled_from(["per_expert", "per_node"]),
    precision=st.sampled_from(["bf16", "fp8"]),
    capacity=st.sampled_from([0.0, 1.0, 1.25]),
    pad=st.booleans(),
)
def test_moe_layer_never_beats_the_dense_equivalent_gemms(
    name: str,
    ep: int,
    tp: int,
    mb: int,
    seq: int,
    dispatch: str,
    precision: str,
    capacity: float,
    pad: bool,
) -> None:
    """The same active expert FLOPs as one dense GEMM at the full rate are a floor."""
    over = {
        **MIXTRAL,
        "model.name": name,
        "model.seq_len": seq,
        "parallel.ep": ep,
        "parallel.tp": tp,
        "training.micro_batch": mb,
        "training.global_batch_tokens": 8 * mb * seq,
        "training.ep_dispatch": dispatch,
        "training.precision": precision,
        "training.moe_capacity_factor": capacity,
        "training.moe_pad_to_capacity": pad and capacity > 0,
    }
    over["cluster.n_gpus"] = 8 * tp  # data parallelism 8: every ep divides it
    s, plan = _plan(over)
    lt = moe_layer_time(s, plan, H100)
    assert lt.expert_gemm_s >= lt.dense_equivalent_s * (1 - 1e-12)
    assert lt.layer_s > lt.dense_equivalent_s
    assert lt.overhead_s >= MOE_SMALL_KERNELS * KERNEL_FLOOR_S


# --------------------------------------------------------------------------- capacity


def test_capacity_caps_the_hottest_expert_and_padding_costs_the_capacity() -> None:
    """Switch Transformer's capacity factor 1.25 (Fedus et al. 2021): dropped or padded."""
    skew = {
        **MIXTRAL,
        "cluster.n_gpus": 64,
        "training.global_batch_tokens": 64 * 4096,
        "model.routing_skew": 2.0,
        "model.hot_fraction": 0.125,
    }
    s, plan = _plan(skew)
    assert hottest_load(s, 8) == pytest.approx(2.0)  # one GPU of 8 gets twice the tokens
    drop, _ = _plan({**skew, "training.moe_capacity_factor": 1.25})
    assert hottest_load(drop, 8) == pytest.approx(1.25)
    pad_s, pad_plan = _plan(
        {**skew, "training.moe_capacity_factor": 1.25, "training.moe_pad_to_capacity": True}
    )
    assert hottest_load(pad_s, 8) == 1.0
    base = moe_layer_time(s, plan, H100)
    padded = moe_layer_time(pad_s, pad_plan, H100)
    assert padded.tokens_per_expert == pytest.approx(1.25 * base.tokens_per_expert)
    assert padded.expert_gemm_s >= 1.25 * base.dense_equivalent_s
    step_skew, step_pad = training_step(s), training_step(pad_s)
    assert step_skew.imbalance_s > 0 and step_pad.imbalance_s == 0
    # the padded dispatch moves 1.25 x the bytes
    assert step_pad.comm_s["ep"] > 1.2 * step_skew.comm_s["ep"]


def test_padding_without_a_capacity_is_refused_naming_the_key() -> None:
    pad = {**MIXTRAL, "training.moe_pad_to_capacity": True}
    res = training_step(apply_overrides(Scenario(), pad))
    assert not res.feasible
    assert res.problems[0].key == "training.moe_pad_to_capacity"


# --------------------------------------------------------------- offload and memory pools


def test_offload_paths_by_hand_and_their_published_rates() -> None:
    """PCIe 5.0 host, NVLink-C2C to Grace (900 GB/s per Grace, two GPUs), CXL 2.0 x16 pools."""
    x86, grace = CAT.server("hgx_h100"), CAT.server("gb200_nvl72")
    s = Scenario()
    host, _ = offload_path(s, x86)
    assert host is not None and host.GBps == 57.2 and host.capacity_gb == 2000
    c2c, _ = offload_path(apply_overrides(s, {"training.offload_target": "grace"}), grace)
    assert c2c is not None and c2c.GBps == pytest.approx(900 / 2 / 2)  # per direction, per GPU
    assert c2c.latency_s < host.latency_s
    # 1,024 GB = 4 expanders of 256 GB at 57.2 GB/s, shared by 8 GPUs: 28.6 GB/s each
    cxl, _ = offload_path(apply_overrides(s, {"training.offload_target": "cxl"}), x86)
    assert cxl is not None and cxl.GBps == pytest.approx(4 * CXL_DEVICE_GBPS / 8)
    assert cxl.latency_s > host.latency_s and cxl.capacity_gb == 1024
    big = apply_overrides(s, {"training.offload_target": "cxl", "training.cxl_memory_gb": 8192})
    assert offload_path(big, x86)[0].GBps == 57.2  # type: ignore[union-attr]  # PCIe bound
    assert offload_path(apply_overrides(s, {"training.offload_target": "grace"}), x86)[0] is None
    assert offload_path(apply_overrides(s, {"training.offload_target": "cxl"}), grace)[0] is None


FSDP70 = {
    "cluster.n_gpus": 64,
    "model.name": "llama3-70b",
    "model.seq_len": 8192,
    "parallel.tp": 1,
    "parallel.pp": 1,
    "parallel.zero_stage": 3,
    "training.micro_batch": 2,
    "training.global_batch_tokens": 64 * 2 * 8192,
    "training.recompute": "none",
    "training.offload_layers": 79,
}


def test_a_cxl_pool_holds_what_host_memory_cannot_at_the_pools_rate() -> None:
    """The memory-pooling what-if: 79 layers of a 16K-token micro-batch per H100.

    The 2 TB of a DGX H100 cannot hold 8 GPUs' offloaded activations; an 8 TB CXL pool can,
    and the step pays its transfers; a pool too small for them is refused naming the key.
    """
    host = training_step(apply_overrides(Scenario(), FSDP70))
    assert any(p.key == "training.offload_layers" for p in host.problems)
    pool = apply_overrides(
        Scenario(), {**FSDP70, "training.offload_target": "cxl", "training.cxl_memory_gb": 8192}
    )
    res = training_step(pool)
    assert res.feasible and res.memory is not None, res.reason
    saved_gb = res.memory.offloaded_gib * 2**30 / 1e9
    assert 2000 / 8 < saved_gb <= 8192 / 8
    transfer = saved_gb / 57.2  # each way, 32 expanders outrun the GPU's PCIe link
    assert res.offload_s >= res.plan.micro_batches * (2 * transfer - res.compute_s)  # type: ignore[union-attr]
    assert res.offload_GBps == 57.2 and res.offload_via.startswith("cxl")
    small = training_step(apply_overrides(pool, {"training.cxl_memory_gb": 2048}))
    assert any("cxl_memory_gb" in p.message for p in small.problems)
    grace = training_step(apply_overrides(pool, {"training.offload_target": "grace"}))
    assert grace.problems[0].key == "training.offload_target"


# ------------------------------------------------------------------ optimizer state


def test_bf16_optimizer_state_of_nemo_1_apex_by_hand() -> None:
    """Apex DistributedFusedAdam with optim.dtype bf16 and FP8 weights: 2 + 2 + 2 bytes."""
    over = {
        "training.precision": "fp8",
        "training.fp8_param_gather": True,
        "training.grad_reduce_in_fp32": False,
        "training.optimizer_moments": "bf16",
    }
    megatron = model_state_bytes(apply_overrides(Scenario(), over))
    apex_s = apply_overrides(Scenario(), {**over, "training.optimizer_master": "bf16"})
    apex = model_state_bytes(apex_s)
    assert megatron[2] == 8 and apex[2] == 6  # FP32 master (4) vs the BF16 shard (2)
    assert apex[3] == 0 and math.isclose(apex[1], 2)  # BF16 gradients, no FP32 copy
