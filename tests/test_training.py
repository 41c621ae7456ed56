"""Training-step model: shapes, memory, bubble, monotonicity, feasibility, search, sweep."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fabric_model.collectives.context as context_mod
from fabric_model.cli import main
from fabric_model.collectives import FabricContext
from fabric_model.collectives.algorithms import _ring_pattern
from fabric_model.errors import ScenarioError
from fabric_model.scenario import MODEL_SHAPES, Scenario, apply_overrides
from fabric_model.training import (
    resolve_plan,
    search_plans,
    shape_counts,
    sweep,
    training_step,
)
from fabric_model.training.layout import GroupContext, Layout
from fabric_model.training.memory import (
    GIB,
    activation_bytes_per_layer,
    micro_batches_in_flight,
)

# A GPT-3-style shape (MHA, ungated 4h MLP, tied embeddings): the shape the Megatron-LM
# and Korthikanti formulas were written for.
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
    "model.dropout": True,
}


def scen(**over: object) -> Scenario:
    return apply_overrides(Scenario(), {k.replace("__", "."): v for k, v in over.items()})


# ------------------------------------------------------------------------ shapes


@pytest.mark.parametrize("name", list(MODEL_SHAPES))
def test_published_parameter_counts(name: str) -> None:
    """Shape formula vs the parameter counts the model cards and papers publish."""
    entry = MODEL_SHAPES[name]
    counts = shape_counts(apply_overrides(Scenario(), {"model.name": name}).model)
    assert counts.total / 1e9 == pytest.approx(entry["published_params_b"], rel=0.01)
    if "published_active_params_b" in entry:  # DeepSeek-V3 counts 37B without embeddings
        assert counts.active / 1e9 == pytest.approx(entry["published_active_params_b"], rel=0.02)


def test_megatron_flops_formula() -> None:
    """6N + attention equals Megatron-LM's 72 B s L h^2 (1 + s/6h + V/12hL) for GPT shapes."""
    m = apply_overrides(Scenario(), GPT).model
    b, s, layers, h, v = 512, m.seq_len, m.layers, m.hidden, m.vocab
    megatron = 72 * b * s * layers * h**2 * (1 + s / (6 * h) + v / (12 * h * layers))
    ours = shape_counts(m).model_flops_per_token(s) * b * s
    assert ours == pytest.approx(megatron, rel=1e-12)


def test_model_name_sets_shape_and_custom_follows_edits() -> None:
    s = apply_overrides(Scenario(), {"model.name": "deepseek-v3"})
    assert (s.model.kind, s.model.n_experts, s.model.kv_lora_rank) == ("moe", 256, 512)
    back = apply_overrides(s, {"model.name": "llama3-8b"})
    assert back.model.kv_lora_rank == 0 and back.model.dense_layers == 0
    edited = apply_overrides(back, {"model.layers": 40})
    assert edited.model.name == "custom"
    assert apply_overrides(edited, {"model.layers": 32}).model.name == "llama3-8b"


def test_model_cross_checks() -> None:
    with pytest.raises(ScenarioError, match=r"model\.params_b"):
        apply_overrides(Scenario(), {"model.params_b": 100})
    assert apply_overrides(Scenario(), {"model.params_b": 70.6}).model.params_b == 70.6
    with pytest.raises(ScenarioError, match=r"model\.n_experts"):
        apply_overrides(Scenario(), {"model.n_experts": 8})
    with pytest.raises(ScenarioError, match=r"model\.kv_heads"):
        apply_overrides(Scenario(), {"model.kv_heads": 7})


# ------------------------------------------------------------------------ memory


def test_activation_memory_matches_korthikanti() -> None:
    """34 s b h / t with selective recomputation, + 5 a s / h without, 2 s b h / t full."""
    base = apply_overrides(
        Scenario(), {**GPT, "training.flash_attention": False, "parallel.tp": 4, "parallel.pp": 1}
    )
    m = base.model
    sbh = m.seq_len * 1 * m.hidden
    for mode, per in (
        ("selective", 34.0),
        ("none", 34.0 + 5 * m.heads * m.seq_len / m.hidden),
        ("full", 2.0),
    ):
        s = apply_overrides(base, {"training.recompute": mode})
        plan, _ = resolve_plan(s)
        assert plan is not None
        assert activation_bytes_per_layer(s, plan, False) == pytest.approx(sbh * per / 4)


def test_model_state_memory_by_zero_stage() -> None:
    """Megatron's distributed-optimizer table: 2 + 4 + 12 bytes per parameter (bf16 weights,
    fp32 main gradients, fp32 master weights and Adam moments); ZeRO-1 shards the 12, ZeRO-2
    the gradients too, ZeRO-3 all 18 (and gathers two layers' weights as a transient)."""
    base = apply_overrides(
        Scenario(),
        {
            **GPT,
            "cluster.n_gpus": 64,
            "parallel.tp": 2,
            "parallel.pp": 2,
            "training.recompute": "full",
        },
    )
    counts = shape_counts(base.model)
    per_gpu = (counts.non_expert_layer_params * 12 / 24 + counts.output_layer) / 2
    dp = 16
    want = {
        0: 18 * per_gpu,
        1: (6 + 12 / dp) * per_gpu,
        2: (2 + 16 / dp) * per_gpu,
        3: 18 / dp * per_gpu,
    }
    for stage, total in want.items():
        mem = training_step(apply_overrides(base, {"parallel.zero_stage": stage})).memory
        assert mem is not None
        states = mem.weights_gib + mem.grads_gib + mem.optimizer_gib
        assert states * GIB == pytest.approx(total, rel=1e-9)


def test_memory_reports_first_middle_last_stage_and_balances_the_ends() -> None:
    """Llama 3 405B on PP16: 126 layers, the two missing come off the first and last ranks;
    rank 0 holds 16 micro-batches in flight (1F1B), the last one, plus its logits."""
    s = apply_overrides(
        Scenario(),
        {
            "model.name": "llama3-405b",
            "cluster.n_gpus": 8192,
            "parallel.pp": 16,
            "training.recompute": "selective",
        },
    )
    mem = training_step(s).memory
    assert mem is not None
    by_rank = {st.rank: st for st in mem.stages}
    assert {0, 8, 15} <= set(by_rank)
    assert by_rank[0].layers == by_rank[15].layers == 7 and by_rank[8].layers == 8
    assert by_rank[0].micro_batches_in_flight == 16 and by_rank[15].micro_batches_in_flight == 1
    assert by_rank[15].transient_gib > 0 == by_rank[8].transient_gib
    assert mem.total_gib == pytest.approx(max(st.total_gib for st in mem.stages))


def test_interleaving_holds_more_micro_batches_on_the_first_rank() -> None:
    """Korthikanti et al. 4.2.3: the first rank keeps 1 + (p - 1) / (p v) times 1F1B's."""
    base = apply_overrides(
        Scenario(),
        {
            "model.name": "llama3-70b",
            "cluster.n_gpus": 1024,
            "parallel.pp": 8,
            "training.recompute": "full",
        },
    )
    plain = resolve_plan(base)[0]
    inter = resolve_plan(apply_overrides(base, {"parallel.vpp": 5}))[0]
    assert plain is not None and inter is not None
    assert micro_batches_in_flight(plain, 0) == 8
    assert micro_batches_in_flight(inter, 0) == pytest.approx(8 * (1 + 7 / 40))


def test_plan_that_does_not_fit_is_reported_with_numbers() -> None:
    s = apply_overrides(
        Scenario(), {"model.name": "llama3-405b", "cluster.n_gpus": 64, "parallel.pp": 1}
    )
    res = training_step(s)
    assert not res.feasible and math.isnan(res.step_time_s)
    assert "GiB per GPU" in res.reason and res.memory is not None and not res.memory.fits


@pytest.mark.parametrize(
    ("over", "key"),
    [
        ({"cluster.n_gpus": 1000}, "cluster.n_gpus"),
        ({"parallel.dp": 3}, "parallel.dp"),
        ({"parallel.ep": 2}, "parallel.ep"),
        ({"parallel.tp": 16}, "parallel.tp"),
        ({"training.global_batch_tokens": 8192}, "training.global_batch_tokens"),
        ({"parallel.vpp": 2, "parallel.pp": 1}, "parallel.vpp"),
        ({"model.name": "mixtral-8x7b", "parallel.ep": 8, "cluster.n_gpus": 64}, "parallel.ep"),
    ],
)
def test_infeasible_plans_name_the_key(over: dict[str, object], key: str) -> None:
    res = training_step(apply_overrides(Scenario(), over))
    assert not res.feasible
    assert key in {p.key for p in res.problems}


# ------------------------------------------------------------------------ bubble


@pytest.mark.parametrize(("pp", "vpp", "mb"), [(4, 1, 8), (8, 1, 32), (4, 2, 8), (8, 3, 16)])
def test_bubble_fraction(pp: int, vpp: int, mb: int) -> None:
    """(p - 1) / (m + p - 1), and (p - 1) / (v m + p - 1) interleaved (Narayanan et al.)."""
    s = apply_overrides(
        Scenario(),
        {
            **GPT,
            "cluster.n_gpus": pp,
            "cluster.gpus_per_node": pp,
            "cluster.nvlink_domain": pp,
            "parallel.tp": 1,
            "parallel.pp": pp,
            "parallel.vpp": vpp,
            "training.global_batch_tokens": mb * 2048,
        },
    )
    res = training_step(s)
    assert res.feasible and res.plan is not None and res.plan.micro_batches == mb
    frac = res.bubble_s / (res.compute_s + res.bubble_s)
    assert frac == pytest.approx((pp - 1) / (vpp * mb + pp - 1), rel=1e-9)


# ------------------------------------------------------------------ monotonicity

_DESIGNS = st.fixed_dictionaries(
    {
        "model.name": st.sampled_from(["llama3-8b", "llama3-70b"]),
        "cluster.n_gpus": st.sampled_from([64, 256, 1024]),
        "parallel.pp": st.sampled_from([1, 2, 4]),
        "fabric.oversubscription": st.sampled_from([1.0, 2.0]),
        "training.dp_overlap": st.sampled_from([0.0, 0.5]),
        "parallel.zero_stage": st.sampled_from([1, 3]),
    }
)


@settings(max_examples=12, deadline=None)
@given(_DESIGNS, st.sampled_from([(200, 400), (400, 800)]))
def test_more_bandwidth_is_never_slower(design: dict[str, object], speeds: tuple[int, int]) -> None:
    # B300: its PCIe Gen6 host link feeds every speed drawn (an H100 stops at 400G)
    slow, fast = (
        training_step(
            apply_overrides(Scenario(), {**design, "cluster.gpu": "b300", "fabric.link_gbps": g})
        )
        for g in speeds
    )
    assert slow.feasible == fast.feasible
    if slow.feasible:
        assert fast.step_time_s <= slow.step_time_s * (1 + 1e-9)


@settings(max_examples=12, deadline=None)
@given(
    _DESIGNS,
    st.sampled_from(["dp_overlap", "tp_overlap"]),
    st.sampled_from([(0.0, 0.5), (0.5, 1.0)]),
)
def test_more_overlap_is_never_slower(
    design: dict[str, object], key: str, values: tuple[float, float]
) -> None:
    design = {k: v for k, v in design.items() if k != f"training.{key}"}
    lo, hi = (
        training_step(apply_overrides(Scenario(), {**design, f"training.{key}": v})) for v in values
    )
    assert hi.feasible == lo.feasible
    if hi.feasible:
        assert hi.step_time_s <= lo.step_time_s * (1 + 1e-9)


def test_degraded_link_and_skew_slow_the_step() -> None:
    base = training_step(Scenario())
    degraded = training_step(scen(what_if__degraded_link_factor=0.25))
    assert degraded.exposed_s["dp"] > base.exposed_s["dp"]
    moe = {
        "model.name": "mixtral-8x7b",
        "parallel.tp": 2,
        "parallel.pp": 1,
        "parallel.ep": 8,
        "cluster.n_gpus": 256,
    }
    uniform = training_step(apply_overrides(Scenario(), moe))
    skewed = training_step(apply_overrides(Scenario(), {**moe, "model.routing_skew": 4.0}))
    assert uniform.feasible and skewed.feasible
    assert skewed.comm_s["ep"] > uniform.comm_s["ep"]
    assert skewed.imbalance_s > 0 == uniform.imbalance_s
    assert skewed.step_time_s > uniform.step_time_s


# --------------------------------------------------------------------- layout


@pytest.mark.parametrize(
    ("order", "pp_members"),
    [("tp-cp-ep-dp-pp", [0, 96, 192, 288]), ("tp-cp-ep-pp-dp", [0, 32, 64, 96])],
)
def test_layout_groups_follow_megatron_order(order: str, pp_members: list[int]) -> None:
    # Megatron-Core's default (pipeline outermost: stages 8 x 2 x 2 x 3 = 96 ranks apart)
    # and --use-tp-pp-dp-mapping / Llama 3's (data parallelism outermost: 8 x 2 x 2 apart)
    lay = Layout(tp=8, cp=2, ep=2, pp=4, edp=3, order=order)
    assert lay.n_gpus == 384
    assert list(lay.members("tp")) == list(range(8))
    assert list(lay.members("cp")) == [0, 8]
    assert list(lay.members("pp")) == pp_members
    assert lay.size("dp") == 2 * 2 * 3 and lay.size("edp") == 2 * 3
    for dim in ("tp", "cp", "ep", "pp", "dp", "edp"):
        everyone = (lay.members(dim)[None, :] + lay.offsets(dim)[:, None]).ravel()
        assert sorted(everyone) == list(range(384))  # the groups tile the ranks


def test_dp_group_busbw_is_one_nic_and_tp_stays_on_nvlink() -> None:
    s = Scenario()
    base = FabricContext.from_scenario(s)
    lay = Layout(tp=8, cp=1, ep=1, pp=4, edp=32)
    dp = GroupContext.for_dimension(base, lay, "dp")
    assert (dp.n_ranks, dp.domain, dp.concurrent_groups) == (32, 1, 32)
    tp = GroupContext.for_dimension(base, lay, "tp")
    assert tp.n_domains == 1
    res = dp.solve(*_ring_pattern(dp, dp.slots_spread(dp.nics_used_per_domain)))
    assert res.rate_Bps == pytest.approx(50e9)  # one 400G NIC per rank, nothing shared


@pytest.mark.parametrize(
    "over",
    [
        {},
        {"fabric.oversubscription": 2.0, "what_if.placement": "scattered"},
        {"what_if.degraded_link_factor": 0.5},
        {
            "cluster.n_gpus": 4096,
            "fabric.tiers": 3,
            "fabric.rail_optimized": False,
            "what_if.degraded_link": "leaf-spine",
            "what_if.degraded_link_factor": 0.3,
        },
        {"cluster.n_gpus": 4096, "fabric.spine_oversubscription": 4.0},
        {"cluster.n_gpus": 4096, "fabric.topology": "rail-only", "fabric.tiers": "auto"},
        {
            "cluster.n_gpus": 2048,
            "fabric.topology": "rail-only",
            "fabric.tiers": "auto",
            "what_if.placement": "scattered",
            "what_if.degraded_link_factor": 0.5,
        },
        {"cluster.n_gpus": 4096, "fabric.topology": "dragonfly-plus", "fabric.tiers": "auto"},
        {
            "cluster.n_gpus": 2048,
            "fabric.topology": "dragonfly-plus",
            "fabric.tiers": "auto",
            "what_if.placement": "scattered",
            "what_if.degraded_link": "leaf-spine",
            "what_if.degraded_link_factor": 0.5,
        },
    ],
)
def test_class_solve_equals_per_connection_solve(
    over: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    s = apply_overrides(Scenario(), over)
    out = []
    for threshold in (10**12, 1):
        monkeypatch.setattr(context_mod, "CLASS_MIN_CONNECTIONS", threshold)
        ctx = FabricContext.from_scenario(s)
        slots = np.arange(ctx.domain * ctx.nics)
        ring = ctx.solve(*_ring_pattern(ctx, slots))
        sharp = ctx.solve(ctx.endpoints(), ctx.endpoints())
        out.append(
            (ring.min_rate_Bps[0], ring.mean_rate_Bps, ring.mean_switch_hops, sharp.min_rate_Bps[0])
        )
    assert out[0] == pytest.approx(out[1], rel=1e-9)


# ---------------------------------------------------------- sweep and search


def test_weak_and_strong_scaling() -> None:
    gpus = [32, 256, 2048]
    weak = sweep(Scenario(), gpus)
    assert [p.feasible for p in weak] == [True] * 3
    assert weak[0].scaling_efficiency == pytest.approx(1.0)
    assert all(p.scaling_efficiency <= 1.0 + 1e-9 for p in weak)
    assert weak[2].step.tokens_per_step == pytest.approx(64 * weak[0].step.tokens_per_step)
    strong = sweep(
        scen(training__global_batch_tokens=2**21), [32, 256, 2048, 16384], scaling="strong"
    )
    assert strong[0].feasible and not strong[3].feasible
    assert "global_batch_tokens" in strong[3].reason
    eff = [p.scaling_efficiency for p in strong if p.feasible]
    assert eff == sorted(eff, reverse=True) and eff[-1] < 0.9  # the batch wall


def test_sweep_reports_sizes_the_design_cannot_build() -> None:
    pts = sweep(scen(cluster__gpus_per_node=8), [12, 64])
    assert not pts[0].feasible and "gpus_per_node" in pts[0].reason
    assert pts[1].feasible and pts[1].network_capex_usd > 0


def test_plan_search_returns_only_feasible_plans_best_first() -> None:
    s = apply_overrides(Scenario(), {"model.name": "llama3-70b", "cluster.n_gpus": 256})
    found = search_plans(s, top=4)
    assert found
    assert all(c.step.feasible for c in found)
    times = [c.step.step_time_s for c in found]
    assert times == sorted(times)
    tiny = apply_overrides(Scenario(), {"model.name": "llama3-405b", "cluster.n_gpus": 8})
    assert search_plans(tiny) == []


# ----------------------------------------------------------------------- CLI


def test_cli_step_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["step", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in (
        "step_time_s",
        "compute_s",
        "bubble_s",
        "exposed_comm_s",
        "comm_s",
        "mfu",
        "tokens_per_s",
        "memory_gib_per_gpu",
    ):
        assert key in out
    assert set(out["comm_s"]) == {"dp", "tp", "pp", "ep", "cp"}
    assert 0 < out["mfu"] < 1


def test_cli_sweep_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "--gpus", "64,512", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["n_gpus"] for r in rows] == [64, 512]
    for r in rows:
        assert {"n_gpus", "step_time_s", "mfu", "scaling_efficiency", "network_capex_usd"} <= set(r)


@pytest.mark.parametrize(
    "argv",
    [
        [
            "step",
            "--set",
            "parallel.pp=1",
            "--set",
            "model.name=llama3-405b",
            "--set",
            "cluster.n_gpus=64",
        ],
        ["sweep", "--gpus", "8,x"],
        ["step", "--set", "model.name=gpt5"],
    ],
)
def test_cli_bad_input_exits_2_with_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err and "Traceback" not in err


def test_training_constants_each_carry_a_source_note() -> None:
    import yaml

    from fabric_model.training.constants import CONSTANTS_PATH, training_constants

    raw = yaml.safe_load(CONSTANTS_PATH.read_text(encoding="utf-8"))["constants"]
    assert set(training_constants()) == set(raw)
    for name, entry in raw.items():
        note = entry["note"]
        cited = any(
            k in note.lower()
            for k in ("megatron", "same source", "torchtitan", "fsdp2", "nvidia", ".py", ".md")
        )
        assert note.startswith(("estimate:", "calibration:")) or cited, name


def test_a_forced_nccl_algorithm_that_cannot_run_a_collective_makes_the_plan_infeasible():
    # NCCL_ALGO=NVLSTree leaves a one-node tensor-parallel all-gather nothing to run: NCCL
    # returns ncclInvalidUsage ("no algorithm/protocol available for function AllGather")
    s = scen(**{"cluster.n_gpus": 64, "model.name": "llama3-8b", "nccl.algo": "nvlstree"})
    step = training_step(s)
    assert not step.feasible
    assert [p.key for p in step.problems] == ["nccl.algo"]
    assert "ncclInvalidUsage" in str(step.problems[0])
    assert training_step(apply_overrides(s, {"nccl.algo": "auto"})).feasible
