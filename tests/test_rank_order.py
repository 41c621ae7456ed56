"""Rank order (``parallel.order``): which parallel dimension is outermost.

Hand calculations of the two orders on 16 GPUs, the groups tiling the ranks under either
order (hypothesis), the expert grid on its stage's GPUs, the rule Megatron-Core asserts for
data parallelism outermost, and the mechanism: on a 2:1 oversubscribed two-tier fat-tree
the pipeline-outermost order keeps a stage's data-parallel ring within fewer leaf groups,
and the data-parallel-outermost order keeps the pipeline's sends there.

Sources: Megatron-Core ``initialize_model_parallel(order="tp-cp-ep-dp-pp")``
(``megatron/core/parallel_state.py``, core_v0.15.0), Megatron-LM ``--use-tp-pp-dp-mapping``
-> ``tp-cp-ep-pp-dp`` (``megatron/training/initialize.py``), Llama 3 section 3.3.2
("[TP, CP, PP, DP]").
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_model.run.placement import ClusterLayout
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.scenario.workload import RANK_ORDERS, rank_order
from fabric_model.topology.ocs import OcsRequest, _job_pairs
from fabric_model.training.fabric import DimensionFabric
from fabric_model.training.layout import DIMENSIONS, Layout
from fabric_model.training.plan import Plan, resolve_plan

PP_LAST, DP_LAST = "tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp"


@pytest.mark.parametrize(
    ("order", "dp0", "pp0"),
    [
        # rank = tp_r + 2 (dp_r + 4 pp_r): a stage is 8 consecutive ranks
        (PP_LAST, [0, 2, 4, 6], [0, 8]),
        # rank = tp_r + 2 (pp_r + 2 dp_r): a replica is 4 consecutive ranks
        (DP_LAST, [0, 4, 8, 12], [0, 2]),
    ],
)
def test_groups_of_tp2_pp2_dp4_on_16_gpus(order: str, dp0: list[int], pp0: list[int]) -> None:
    s = apply_overrides(
        Scenario(),
        {
            "cluster.n_gpus": 16,
            "parallel.tp": 2,
            "parallel.pp": 2,
            "parallel.order": order,
            "training.global_batch_tokens": 16 * 8192,
        },
    )
    plan, problems = resolve_plan(s)
    assert plan is not None and not problems
    lay = plan.layout
    assert (plan.dp, lay.order) == (4, order)
    assert lay.members("dp").tolist() == dp0
    assert lay.members("pp").tolist() == pp0
    assert lay.members("tp").tolist() == [0, 1]


def test_auto_is_the_frameworks_order() -> None:
    s = Scenario()
    assert s.parallel.order == "auto"
    for fw in ("megatron", "torchtitan"):  # both pipeline outermost
        t = apply_overrides(s, {"training.framework": fw})
        assert rank_order(t.parallel, t.training) == PP_LAST
    assert resolve_plan(apply_overrides(s, {"parallel.order": DP_LAST}))[0].order == DP_LAST


@settings(max_examples=25, deadline=None)
@given(
    degrees=st.tuples(*(st.sampled_from((1, 2, 3, 4)) for _ in range(5))),
    order=st.sampled_from(RANK_ORDERS),
)
def test_every_rank_is_in_one_group_per_dimension(
    degrees: tuple[int, int, int, int, int], order: str
) -> None:
    lay = Layout(*degrees, order=order)
    n = lay.n_gpus
    for dim in DIMENSIONS:
        groups = lay.members(dim)[None, :] + lay.offsets(dim)[:, None]
        assert groups.shape == (n // lay.size(dim), lay.size(dim))
        assert np.array_equal(np.sort(groups.ravel()), np.arange(n))


def _moe_plan(order: str, etp: int) -> Plan:
    # Mixtral-like: TP2 PP4 EP8 on 64 GPUs (DP8), experts folded when etp < tp
    return Plan(2, 4, 8, 8, 1, 1, 1, 1, 8, 8, "selective", etp=etp, order=order)


def test_folded_expert_grid_sits_on_its_stage_and_dp_outermost_is_refused() -> None:
    plan = _moe_plan(PP_LAST, etp=1)
    assert plan.folded
    lay, ex = plan.layout, plan.expert_layout
    stage0 = set((lay.members("pp")[None, :] + lay.offsets("pp")[:, None])[:, 0].tolist())
    ex_stage0 = set((ex.members("pp")[None, :] + ex.offsets("pp")[:, None])[:, 0].tolist())
    assert stage0 == ex_stage0 == set(range(16))  # pipeline outermost: 16 consecutive GPUs
    s = apply_overrides(
        Scenario(),
        {
            "cluster.n_gpus": 64,
            "model.name": "mixtral-8x7b",
            "parallel.tp": 2,
            "parallel.pp": 4,
            "parallel.ep": 8,
            "parallel.etp": 1,
            "parallel.order": DP_LAST,
        },
    )
    problems = {p.key: p.message for p in resolve_plan(s)[1]}
    assert "etp x ep = tp x cp" in problems["parallel.order"]
    ok = apply_overrides(s, {"parallel.order": "auto"})
    assert "parallel.order" not in {p.key for p in resolve_plan(ok)[1]}


@pytest.fixture(scope="module")
def tapered() -> Scenario:
    # 256 H100 (32 nodes) on a 2-tier fat-tree whose leaves (5-6 nodes each, not
    # rail-optimized) are 2:1 oversubscribed
    return apply_overrides(
        Scenario(),
        {
            "cluster.n_gpus": 256,
            "fabric.tiers": 2,
            "fabric.rail_optimized": False,
            "fabric.oversubscription": 2.0,
            "parallel.tp": 8,
            "parallel.pp": 4,
        },
    )


def test_pipeline_outermost_keeps_the_dp_ring_within_fewer_leaves(tapered: Scenario) -> None:
    leaf_of = ClusterLayout.from_scenario(tapered).leaf_of
    per_node = tapered.cluster.gpus_per_node
    lays = {o: Layout(tp=8, cp=1, ep=1, pp=4, edp=8, order=o) for o in RANK_ORDERS}

    def leaves(lay: Layout, dim: str) -> int:
        """Leaf groups the widest group of ``dim`` spans."""
        groups = lay.members(dim)[None, :] + lay.offsets(dim)[:, None]
        return max(np.unique(leaf_of[g // per_node]).size for g in groups)

    # a stage's 8 replicas on 8 neighbouring nodes (2 leaves), or every 4th node (6)
    assert leaves(lays[PP_LAST], "dp") == 2 < leaves(lays[DP_LAST], "dp") == 6
    assert leaves(lays[DP_LAST], "pp") == 2 < leaves(lays[PP_LAST], "pp") == 4
    # and the flow solver times the ring faster where it crosses fewer leaf uplinks
    size = 256 * 2**20
    t = {
        o: DimensionFabric(tapered, lay).collective("dp", "allreduce", size)
        for o, lay in lays.items()
    }
    assert t[PP_LAST].bottleneck == "nic-leaf" and t[DP_LAST].bottleneck == "leaf-up bundle"
    assert t[PP_LAST].time_s < t[DP_LAST].time_s


@pytest.mark.parametrize(
    ("order", "dp_ring", "pp_pair", "absent"),
    [(PP_LAST, (0, 3), (0, 4), (0, 2)), (DP_LAST, (0, 6), (0, 1), (0, 4))],
)
def test_ocs_job_circuits_follow_the_order(
    order: str, dp_ring: tuple[int, int], pp_pair: tuple[int, int], absent: tuple[int, int]
) -> None:
    # TP8 PP2 DP4 on 8 blocks of 8 GPUs: pipeline outermost, stage 0's ring is blocks 0-1-2-3
    # (closing 3 -> 0) and block 0 sends to block 4; data parallelism outermost, the ring is
    # 0-2-4-6 (closing 6 -> 0) and block 0 sends to block 1
    a, b, note = _job_pairs(OcsRequest(n_gpus=64, job_tp=8, job_pp=2, job_order=order), 8, 8)
    pairs = set(zip(a.tolist(), b.tolist(), strict=True))
    assert not note and dp_ring in pairs and pp_pair in pairs and absent not in pairs
