"""1,048,576 GPUs (issue 17): the design builds, its curves answer, refusals say why.

The design: B300 (PCIe Gen6 feeds an 800G NIC) on lossy packet-spraying Ethernet, each 800G
NIC split into 8 planes of 100G on Tomahawk 5 (radix 512): 3 tiers per plane, 4,096 leaves,
4,096 spines and 2,048 cores per plane. The all-to-all is solved on one source leaf's classes
(:mod:`fabric_model.collectives.symmetry`), the tree on one NIC slot's copy; the figures of
time and memory are in ``benchmarks/bench_collectives.py --million`` (tests assert no time).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from fabric_model.collectives import (
    AlgorithmUnavailableError,
    FabricContext,
    ModelLimitError,
    algo_models,
    times_from_models,
    unavailable_message,
)
from fabric_model.scenario import Scenario, apply_overrides
from tests.apptest_helpers import open_page

MILLION = 1_048_576
#: AppTest budget of a page at a million GPUs (a budget, not an assertion).
BIG_TIMEOUT_S = 600
GIB = 2**30
DESIGN = {
    "cluster.n_gpus": MILLION,
    "cluster.gpu": "b300",
    "fabric.vendor": "lossy-ethernet",
    "fabric.link_gbps": 800,
    "fabric.planes": 8,
}
DRAGONFLY = {
    "cluster.n_gpus": MILLION,
    "cluster.gpu": "b300",
    "fabric.vendor": "infiniband",
    "fabric.link_gbps": 800,
    "fabric.topology": "dragonfly-plus",
}


def scenario(overrides: dict[str, object]) -> Scenario:
    return apply_overrides(Scenario(), overrides)


@pytest.fixture(scope="module")
def ctx() -> FabricContext:
    return FabricContext.from_scenario(scenario(DESIGN))


def components(ctx: FabricContext, rail: bool) -> list[np.ndarray]:
    n, d, m = ctx.n_ranks, ctx.domain, ctx.n_domains
    if rail:
        return [ctx.endpoint(np.arange(m), np.full(m, k)) for k in range(d * ctx.nics)]
    return [ctx.rank_endpoint(np.arange(n, dtype=np.int64), k) for k in range(ctx.nics)]


def test_the_design_builds_in_8_planes_of_3_tiers(ctx: FabricContext) -> None:
    topo = ctx.topology
    assert (topo.tiers, topo.planes, topo.n_endpoints) == (3, 8, MILLION)
    # per plane 1,048,576 / 256 = 4,096 leaves, as many spines, 2,048 cores: x 8 planes
    assert dict(topo.switches_by_tier) == {"leaf": 32768, "spine": 32768, "core": 16384}
    assert topo.n_links == 3 * 8 * MILLION  # NIC-leaf, leaf-spine, spine-core per plane


def test_busbw_curves_answer(ctx: FabricContext) -> None:
    for op in ("allreduce", "alltoall"):
        rows = times_from_models(algo_models(ctx, op, "auto"), [2**20, GIB], "auto")
        assert all(r.busbw_GBps > 0 and np.isfinite(r.time_us) for r in rows)
        assert rows[1].busbw_GBps > rows[0].busbw_GBps


@pytest.mark.parametrize("algo", ["direct", "hierarchical"])
def test_alltoall_runs_at_the_nic_rate_on_the_non_blocking_planes(
    ctx: FabricContext, algo: str
) -> None:
    (model,) = algo_models(ctx, "alltoall", algo)
    line = ctx.nic_Bps * ctx.constants["net_efficiency"]  # 100 GB/s x the lossy goodput
    assert model.inter_Bps == pytest.approx(line, rel=1e-4)
    assert model.bottleneck == "nic-leaf"
    # half of a uniform all-to-all crosses the bisection: busbw <= 4 B_bis / N
    assert model.inter_Bps <= 4 * ctx.topology.bisection_GBps * 1e9 / MILLION


@pytest.mark.parametrize("rail", [False, True], ids=["direct", "rail-aligned"])
def test_alltoall_is_solved_on_one_source_leaf(ctx: FabricContext, rail: bool) -> None:
    result, n_classes = ctx.solve_all_to_all(components(ctx, rail))
    leaves = int(ctx.topology.params["n_leaves"])
    assert n_classes <= leaves  # instead of 4,096^2
    assert result.rate_Bps > 0


@pytest.mark.parametrize("algo", ["direct", "hierarchical"])
def test_dragonfly_alltoall_answers_with_its_partial_group(algo: str) -> None:
    ctx = FabricContext.from_scenario(scenario(DRAGONFLY))
    assert int(ctx.topology.params["leaves_last_group"]) < int(
        ctx.topology.params["leaves_per_group"]
    )
    (model,) = algo_models(ctx, "alltoall", algo)
    assert 0 < model.inter_Bps <= ctx.nic_Bps


def test_auto_names_every_candidates_reason(ctx: FabricContext) -> None:
    degraded = FabricContext.from_scenario(
        scenario({**DESIGN, "what_if.degraded_link_factor": 0.5})
    )  # a degraded NIC breaks the symmetry: every class of 4,097 groups, beyond the limit
    with pytest.raises(AlgorithmUnavailableError) as err:
        algo_models(degraded, "alltoall", "auto")
    text = str(err.value)
    assert "no algorithm of auto can run alltoall (a limit of the model, not of the design)" in text
    assert "direct (model limit:" in text and "hierarchical (model limit:" in text
    assert "4 B_bis / N" in text


def test_the_message_tells_model_limits_from_what_the_design_cannot_run() -> None:
    text = unavailable_message(
        "alltoall",
        [
            ("direct", AlgorithmUnavailableError("rail-only has no path between rails")),
            ("hierarchical", ModelLimitError("5,000^2 group pairs")),
        ],
    )
    assert text == (
        "no algorithm of auto can run alltoall (limits of the model and of the design): "
        "direct (cannot run here: rail-only has no path between rails); "
        "hierarchical (model limit: 5,000^2 group pairs)"
    )


def test_cli_exits_2_with_the_reasons() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "fabric_model",
            "collective",
            "--op",
            "alltoall",
            "--sizes",
            "1G",
            *[f"--set={k}={v}" for k, v in DESIGN.items()],
            "--set=what_if.degraded_link_factor=0.5",
            "--set=fabric.topology=rail-only",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr
    assert "direct (cannot run here: rail-only has no path between rails" in lines[0]
    assert "hierarchical (model limit:" in lines[0]


@pytest.mark.app
def test_the_collectives_page_answers_at_a_million_gpus() -> None:
    query = {key: str(value) for key, value in DESIGN.items()}
    at = open_page("pages/collectives.py", query, warm=True, timeout_s=BIG_TIMEOUT_S)
    assert not at.error, [e.value for e in at.error]
    titles = [c.proto.spec for c in at.get("plotly_chart")]
    assert any("1,048,576 GPUs" in t for t in titles)


@pytest.mark.app
def test_the_scaling_page_offers_a_million_gpus_and_moe_stops_at_131072() -> None:
    from ui import facade

    at = open_page("pages/scaling.py", warm=True, timeout_s=BIG_TIMEOUT_S)
    gpu_range = at.select_slider(key="scal_range")
    assert 1_048_576 in [int(o.replace(",", "")) for o in gpu_range.options]
    assert gpu_range.value == (64, 131_072)  # the default range is unchanged
    assert max(facade.SCALING_SIZES) == 1_048_576 >= facade.MOE_SWEEP_MAX_GPUS == 131_072
