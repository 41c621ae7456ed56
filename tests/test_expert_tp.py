"""Expert tensor parallelism (``parallel.etp``) and Megatron-Core's expert grid.

Hand calculations of the expert shards, groups, GEMM shapes and expert-TP collectives; the
rules the frameworks enforce, refused naming the key; every plan the search returns obeys
them, and at ``etp = tp`` the expert terms are the attention grid's (the default).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from fabric_model.catalog import load_catalog
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.scenario.shapes import shape_counts
from fabric_model.training import training_step
from fabric_model.training.fabric import CommTime
from fabric_model.training.gemm import gemm_rates
from fabric_model.training.memory import GIB, activation_bytes_per_layer, model_state_bytes
from fabric_model.training.moe import moe_layer_time
from fabric_model.training.step import _tensor_parallel_s, resolve_plan
from fabric_model.training.sweep import plan_search
from fabric_model.validate.training_golden import golden_scenario

H100 = load_catalog().gpu("h100")
#: Megatron-Core's Mixtral 8x7B release test (tests/golden/training_memory.yaml): TP2 PP4
#: VPP8 EP8 with --expert-tensor-parallel-size 1, on 64 H100.
MIXTRAL = {
    "cluster": {"gpu": "h100", "n_gpus": 64},
    "model": {"name": "mixtral-8x7b", "seq_len": 4096},
    "parallel": {"tp": 2, "pp": 4, "vpp": 8, "cp": 1, "ep": 8, "etp": 1, "zero_stage": 1},
    "training": {"micro_batch": 1, "global_batch_tokens": 1048576, "recompute": "none"},
}


def _mixtral(**over: Any) -> Scenario:
    return apply_overrides(golden_scenario(MIXTRAL), over)


def _problems(s: Scenario) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in resolve_plan(s)[1]:
        out[p.key] = out.get(p.key, "") + " | " + p.message
    return out


# ------------------------------------------------------------------- shards and groups


def test_mixtral_expert_shards_and_groups_by_hand() -> None:
    """ETP1: each GPU holds its 1 expert of 8 whole; expert DP = 2 x 8 / (1 x 8) = 2."""
    s = _mixtral()
    plan, problems = resolve_plan(s)
    assert plan is not None and not problems
    assert (plan.expert_tp, plan.edp, plan.folded) == (1, 2, True)
    grid = plan.expert_layout
    # Megatron-Core's expert RankGenerator: EP on the 8 consecutive ranks (one 8-GPU node)
    assert grid.members("ep").tolist() == list(range(8)) and grid.size("edp") == 2
    assert grid.size("tp") == 1 and plan.layout.size("dp") == 8  # attention DP unchanged
    mem = training_step(s).memory
    assert mem is not None
    c = shape_counts(s.model)
    layers = 8  # 32 layers over 4 stages
    assert mem.params_expert == pytest.approx(c.expert_params / 32 * layers / 8)
    # ZeRO-1: 4 B FP32 gradients whole, 12 B of optimizer over DP 8 (dense) and 2 (experts)
    _, g_b, o_b, _ = model_state_bytes(s)
    assert mem.grads_gib * GIB == pytest.approx(g_b * (mem.params_dense + mem.params_expert))
    hand = mem.params_dense * o_b / 8 + mem.params_expert * o_b / 2
    assert mem.optimizer_gib * GIB == pytest.approx(hand)
    # at Megatron-Core's default (etp = tp = 2) the experts are split over 16 GPUs: half
    default = training_step(_mixtral(**{"parallel.etp": "auto"})).memory
    assert default is not None and default.params_expert == pytest.approx(mem.params_expert / 2)


def test_expert_gemms_and_routed_input_by_hand() -> None:
    """M = b s / cp x k x ep / n x etp / tp tokens per expert, ffn / etp wide; same FLOPs."""
    s1 = _mixtral()
    s2 = _mixtral(**{"parallel.etp": 2})
    p1, p2 = resolve_plan(s1)[0], resolve_plan(s2)[0]
    assert p1 is not None and p2 is not None
    t1, t2 = moe_layer_time(s1, p1, H100), moe_layer_time(s2, p2, H100)
    assert t1.tokens_per_expert == 4096 * 2 * 8 / 8 * 1 / 2  # 4,096: its own GPU's copies
    assert t2.tokens_per_expert == 4096 * 2 * 8 / 8  # 8,192: the TP pair's, gathered
    # one local expert, 6 M (f / etp) h FLOPs per matrix, 3 matrices: the same work per GPU
    f, h, rate = 14336, 4096, gemm_rates(s1, H100).flops
    for t, etp in ((t1, 1), (t2, 2)):
        assert t.expert_gemm_s * t.utilisation * rate == pytest.approx(
            6 * t.tokens_per_expert * f / etp * h * 3
        )
    # the routed input a GPU keeps: etp / tp of its stage's top_k copies per token, whole
    diff = activation_bytes_per_layer(s2, p2, True) - activation_bytes_per_layer(s1, p1, True)
    assert diff == pytest.approx(4096 * 2 * h * 2.0 * (2 - 1) / 2)


class _Bytes:
    """A fabric whose collectives take one second per GB: their sizes add up."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, float]] = []

    def collective(self, dim: str, op: str, size_bytes: float) -> CommTime:
        self.calls.append((dim, op, size_bytes))
        return CommTime(size_bytes * 1e-9, "ring", "Simple", 0.0, "nvlink")


@pytest.mark.parametrize(("etp", "shared"), [(1, 0), (2, 0), (2, 1)])
def test_tensor_parallel_collectives_by_hand(etp: int, shared: int) -> None:
    """Attention (and shared experts) all-gather and reduce-scatter b s h over TP; the routed
    experts' tokens over expert TP: etp / tp x k x b s h, none at etp 1 (Megatron-Core's
    all-to-all dispatcher)."""
    s = _mixtral(**{"parallel.etp": etp, "model.shared_experts": shared})
    plan = resolve_plan(s)[0]
    assert plan is not None
    fab, efab = _Bytes(), _Bytes()
    total, _ = _tensor_parallel_s(s, plan, shape_counts(s.model), fab, efab)  # type: ignore[arg-type]
    act = 4096 * 4096 * 2.0
    mb, layers = plan.micro_batches, 8
    blocks = layers * (1 + shared)  # every layer is MoE: attention + shared experts
    routed = act * 2 * etp / 2 if etp > 1 else 0.0
    hand = 2 * mb * (blocks * 2 * act + layers * 2 * routed) * 1e-9
    assert total == pytest.approx(hand)
    assert {d for d, _, _ in efab.calls} <= {"tp"} and bool(efab.calls) == (etp > 1)


def test_qwen3_235b_needs_expert_tp_1() -> None:
    """Megatron-Bridge's Qwen3 235B on 256 H100: EP32 over DP16 runs only on TP x DP ranks."""
    over = {
        "model.name": "custom",
        "model.kind": "moe",
        "model.layers": 94,
        "model.hidden": 4096,
        "model.ffn_hidden": 1536,
        "model.heads": 64,
        "model.kv_heads": 4,
        "model.head_dim": 128,
        "model.n_experts": 128,
        "model.top_k": 8,
        "cluster.n_gpus": 256,
        "parallel.tp": 2,
        "parallel.pp": 8,
        "parallel.ep": 32,
        "training.global_batch_tokens": 8192 * 4096,
    }
    s = apply_overrides(Scenario(), over)
    assert "must divide tp x cp x dp = 32" in _problems(s)["parallel.ep"]
    plan, problems = resolve_plan(apply_overrides(s, {"parallel.etp": 1}))
    assert plan is not None and not problems and plan.edp == 1


# ------------------------------------------------------------------------------- rules


def test_expert_tp_rules_are_refused_naming_the_key() -> None:
    """Megatron-Core's grid and TE's split; torchtitan's two settings; NVLink; dense models."""
    assert "must divide tp x cp x dp = 12" in _problems(
        _mixtral(**{"cluster.n_gpus": 24, "parallel.pp": 2, "parallel.vpp": 1})
    ).get("parallel.etp", "")
    assert "ffn_hidden = 14336" in _problems(
        _mixtral(**{"parallel.tp": 4, "parallel.etp": 3, "parallel.ep": 1})
    ).get("parallel.etp", "")
    assert "NVLink domain of 8" in _problems(
        _mixtral(**{"parallel.etp": 16, "parallel.ep": 1, "parallel.pp": 1, "parallel.vpp": 1})
    ).get("parallel.etp", "")
    dense = apply_overrides(Scenario(), {"parallel.etp": 1})  # Llama 3 70B, TP8
    assert "needs an MoE model" in _problems(dense)["parallel.etp"]
    titan = {"training.framework": "torchtitan", "parallel.vpp": 1, "parallel.pp": 1}
    assert "1 or at parallel.tp" in _problems(
        _mixtral(**titan, **{"parallel.tp": 4, "parallel.etp": 2})
    ).get("parallel.etp", "")
    assert "needs expert parallelism" in _problems(
        _mixtral(**titan, **{"parallel.ep": 1, "parallel.etp": 1})
    ).get("parallel.etp", "")
    assert "multiple of 4" in _problems(  # EP borrows all of cp x tp at etp 1
        _mixtral(**titan, **{"parallel.cp": 2, "parallel.ep": 2, "parallel.etp": 1})
    ).get("parallel.ep", "")
    # torchtitan's default is 1 with EP, so TP2 EP8 is its ETP1 layout
    plan = resolve_plan(_mixtral(**titan, **{"parallel.etp": "auto"}))[0]
    assert plan is not None and plan.expert_tp == 1


# ------------------------------------------------------------------------- the search


@pytest.fixture(scope="module")
def searched() -> tuple[Scenario, list[dict[str, Any]]]:
    """A small MoE case whose fastest plans mix ETP1 with TP2 and ETP = TP."""
    s = apply_overrides(
        Scenario(),
        {
            "model.name": "deepseek-v3",
            "model.layers": 6,
            "model.dense_layers": 1,
            "cluster.n_gpus": 32,
            "training.global_batch_tokens": 2**20,
        },
    )
    return s, [c.overrides for c in plan_search(s, top=8).plans]


def test_searched_plans_obey_the_rules_and_etp_tp_is_the_attention_grid(
    searched: tuple[Scenario, list[dict[str, Any]]],
) -> None:
    """Every plan the search returns is one Megatron-Core builds; at etp = tp (explicit or
    auto, the same step) the expert grid is the attention's: experts over ep x tp, expert DP
    dp x cp / ep, b s k ep / (cp n) tokens per expert, as before the model had parallel.etp."""
    s, plans = searched
    assert any(o["parallel.etp"] < o["parallel.tp"] for o in plans)
    c = shape_counts(s.model)
    for over in plans:
        plan, problems = resolve_plan(apply_overrides(s, over))
        assert plan is not None and not problems, (over, problems)
        at_tp = apply_overrides(s, {**over, "parallel.etp": over["parallel.tp"]})
        auto = apply_overrides(s, {**over, "parallel.etp": "auto"})
        p_tp, probs = resolve_plan(at_tp)
        assert p_tp is not None
        if (p_tp.dp * p_tp.cp) % p_tp.ep:  # EP over more than DP x CP needs etp < tp
            assert "parallel.ep" in {p.key for p in probs}
            continue
        assert not probs and p_tp.edp == p_tp.dp * p_tp.cp // p_tp.ep
        if p_tp.dp % p_tp.ep == 0:
            assert p_tp.expert_layout == p_tp.layout
        step, default = training_step(at_tp), training_step(auto)
        assert json.dumps(step.to_dict(), sort_keys=True, default=str) == json.dumps(
            default.to_dict(), sort_keys=True, default=str
        )
        mem = step.memory
        assert mem is not None
        heaviest = next(st for st in mem.stages if st.rank == mem.heaviest_rank)
        expert = c.expert_params / s.model.layers * heaviest.layers / (p_tp.ep * p_tp.tp)
        assert mem.params_expert == pytest.approx(expert)
        m = s.model
        tokens = p_tp.micro_batch * m.seq_len / p_tp.cp * m.top_k * p_tp.ep / m.n_experts
        assert moe_layer_time(at_tp, p_tp, H100).tokens_per_expert == tokens
