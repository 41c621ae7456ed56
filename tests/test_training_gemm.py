"""GEMM tile and wave quantization (issue 11, item 3): small per-rank GEMMs run slower."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_model.catalog import load_catalog
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.training import training_step
from fabric_model.training.gemm import TILE_M, TILE_N, gemm_utilisation, linear_utilisation

H100 = load_catalog().gpu("h100")


def test_full_waves_fill_the_gpu_and_a_spare_tile_costs_a_wave() -> None:
    # exactly one wave of whole tiles
    assert gemm_utilisation(TILE_M * H100.n_sms, TILE_N, H100) == pytest.approx(1.0)
    # one tile more: a second wave with one busy SM
    one_more = gemm_utilisation(TILE_M * (H100.n_sms + 1), TILE_N, H100)
    assert one_more == pytest.approx((H100.n_sms + 1) / (2 * H100.n_sms))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(m=st.integers(1, 1 << 16), n=st.integers(1, 1 << 16))
def test_utilisation_is_a_share(m: int, n: int) -> None:
    u = gemm_utilisation(m, n, H100)
    assert 0 < u <= 1 + 1e-12 and math.isfinite(u)
    assert u == pytest.approx(gemm_utilisation(n, m, H100))  # either orientation


def test_small_models_at_high_tensor_parallelism_lose_to_quantization() -> None:
    small = apply_overrides(Scenario(), {"model.name": "llama3-8b"})
    large = apply_overrides(Scenario(), {"model.name": "llama3-405b"})
    u_small = linear_utilisation(small, 8, 1, 1, 1, H100)
    assert u_small < linear_utilisation(small, 1, 1, 1, 1, H100) - 0.05
    assert u_small < linear_utilisation(large, 8, 1, 1, 1, H100) - 0.05


def test_the_step_time_follows_the_utilisation() -> None:
    """Llama 3 8B at TP8 vs TP1 on one node: the same FLOPs per GPU take longer at TP8."""
    base = {
        "model.name": "llama3-8b",
        "cluster.n_gpus": 8,
        "parallel.pp": 1,
        "training.global_batch_tokens": 8 * 8192,
        "training.recompute": "none",
    }
    tp8 = training_step(apply_overrides(Scenario(), {**base, "parallel.tp": 8}))
    tp1 = training_step(
        apply_overrides(Scenario(), {**base, "parallel.tp": 1, "parallel.zero_stage": 3})
    )
    assert tp8.feasible and tp1.feasible
    assert tp8.compute_s > tp1.compute_s
