"""Torus and hypercube collectives on every link, and all-to-all by symmetry at any scale.

Sources: multi-colour bucket all-reduce on tori (Jain and Sabharwal, ICS 2010; TPU v4,
Jouppi et al., ISCA 2023), recursive halving-doubling (Thakur, Rabenseifner and Gropp, IJHPCA
2005), the all-reduce bandwidth lower bound (Patarasuk and Yuan, JPDC 2009), the all-to-all
bisection bound (half of a uniform all-to-all crosses the bisection: busbw <= 4 B_bis / N).
Values before this change (issue items 6 and 7, physics-review D6/D9): torus 4,096 ring 16G
43.7 GB/s, auto 1G 46.6 / 31.1 / 23.3 GB/s at 4K / 16K / 64K, hypercube 4,096 23.3 GB/s, and
all-to-all refused at >= 16K on torus and hypercube and at 131K on dragonfly+.
"""

from __future__ import annotations

import numpy as np
import pytest

from fabric_model._fastpaths import fast_paths
from fabric_model.collectives import (
    AlgorithmUnavailableError,
    FabricContext,
    algo_models,
    collective,
)
from fabric_model.collectives.switchless import node_link_bound_Bps, torus_phase_times
from fabric_model.plant.cost import bill_of_materials
from fabric_model.scenario import Scenario, apply_overrides

GIB = 2**30


def sc(**kw: object) -> Scenario:
    return apply_overrides(Scenario(), {k.replace("__", "."): v for k, v in kw.items()})


def ctx_of(**kw: object) -> FabricContext:
    return FabricContext.from_scenario(sc(**kw))


def busbw(s: Scenario, algo: str = "auto", size: int = 16 * GIB, op: str = "allreduce") -> float:
    return collective(s, op, algo, [size])[0].busbw_GBps


# ----------------------------------------------------------------- all-reduce on every link


def test_torus_ring_uses_all_six_directions():
    s = sc(cluster__n_gpus=4096, fabric__topology="torus-3d")
    value = busbw(s, "ring")
    assert value >= 3 * 43.7
    assert value * 1e9 <= node_link_bound_Bps(FabricContext.from_scenario(s), "allreduce")


@pytest.mark.parametrize(("n", "before"), [(4096, 46.6), (16384, 31.1)])
def test_torus_auto_allreduce_does_not_degrade_with_n(n, before):
    value = busbw(sc(cluster__n_gpus=n, fabric__topology="torus-3d"), size=GIB)
    assert value >= 3 * before
    assert value > 250  # ~ P x 47 GB/s less the latency of 1 GiB


def test_hypercube_halving_doubling_uses_every_dimension():
    s = sc(cluster__n_gpus=4096, fabric__topology="hypercube", cluster__nics_per_gpu=2)
    value = busbw(s, "ring")
    assert value >= 3 * 23.3
    ctx = FabricContext.from_scenario(s)
    assert value * 1e9 <= node_link_bound_Bps(ctx, "allreduce") * (1 + 1e-9)


@pytest.mark.parametrize(
    "kw",
    [
        {"fabric__topology": "torus-3d", "cluster__n_gpus": 64},  # 2 x 2 x 2
        {"fabric__topology": "torus-3d", "cluster__n_gpus": 480},  # 5 x 4 x 3
        {"fabric__topology": "torus-3d", "cluster__n_gpus": 56},  # 7: a ring
        {"fabric__topology": "torus-3d", "cluster__n_gpus": 1024, "cluster__nics_per_gpu": 2},
        {"fabric__topology": "hypercube", "cluster__n_gpus": 256},
        {"fabric__topology": "hypercube", "cluster__n_gpus": 2048},
    ],
)
@pytest.mark.parametrize("op", ["allreduce", "allgather", "reducescatter"])
def test_switchless_busbw_respects_the_node_link_bound(kw, op):
    """busbw <= eff x B_node x bus_factor(n) / bus_factor(m) (Patarasuk-Yuan per node)."""
    ctx = ctx_of(**kw)
    bound = node_link_bound_Bps(ctx, op)
    algos = ["ring", "hierarchical"] if op == "allreduce" else ["ring"]
    got = {a: algo_models(ctx, op, a)[0] for a in algos}
    for m in got.values():
        assert 0 < m.inter_Bps <= bound * (1 + 1e-9)
        assert m.busbw_Bps <= min(m.intra_Bps, m.inter_Bps) * (1 + 1e-12)
    if op == "allreduce":  # every trunk at once beats one dimension at a time
        assert got["ring"].inter_Bps >= got["hierarchical"].inter_Bps * (1 - 1e-12)


def test_uncontended_torus_equals_the_closed_form():
    """No contention: the solver's neighbour rates are the trunks, c_i x line rate (1e-6)."""
    ctx = ctx_of(cluster__n_gpus=480, fabric__topology="torus-3d")  # 5 x 4 x 3, c = (2, 1, 1)
    line = ctx.nic_Bps
    rates = np.array([[2 * line] * 2, [line] * 2, [line] * 2])
    per_byte, _ = torus_phase_times([5, 4, 3], rates, 3)
    expected = 2 * (480 - 1) / 480 / (2 * per_byte) * ctx.constants["net_efficiency"]
    assert algo_models(ctx, "allreduce", "ring")[0].inter_Bps == pytest.approx(expected, rel=1e-6)


def test_a_degraded_torus_cable_slows_the_torus_allreduce():
    base = busbw(sc(cluster__n_gpus=512, fabric__topology="torus-3d"), "ring")
    slow = busbw(
        sc(
            cluster__n_gpus=512,
            fabric__topology="torus-3d",
            what_if__degraded_link="nic",  # switchless: the first cable of the first class
            what_if__degraded_link_factor=0.5,
        ),
        "ring",
    )
    assert slow < base


def test_every_torus_nic_is_wired_and_priced():
    s = sc(cluster__n_gpus=4096, fabric__topology="torus-3d")
    ctx = FabricContext.from_scenario(s)
    t = ctx.topology
    # 512 nodes x 8 ports, each cable takes two ports: 2,048 cables (1,536 before)
    assert t.n_links * 2 == t.params["n_nodes"] * t.params["ports_per_node"] == 4096
    assert t.params["unused_ports_per_node"] == 0
    bom = bill_of_materials(s)
    assert bom.n_cables == 2048


# -------------------------------------------------------------- all-to-all by symmetry


def _components(ctx: FabricContext, rail: bool) -> list[np.ndarray]:
    n, d, m = ctx.n_ranks, ctx.domain, ctx.n_domains
    if rail:
        return [ctx.endpoint(np.arange(m), np.full(m, k)) for k in range(d * ctx.nics)]
    gpu = np.arange(n, dtype=np.int64)
    return [ctx.endpoint(gpu // d, (gpu % d) * ctx.nics + k) for k in range(ctx.nics)]


@pytest.mark.parametrize(
    "kw",
    [
        {"fabric__topology": "torus-3d", "cluster__n_gpus": 512},
        {"fabric__topology": "torus-3d", "cluster__n_gpus": 480},
        {"fabric__topology": "torus-3d", "cluster__n_gpus": 4096},
        {"fabric__topology": "torus-3d", "cluster__n_gpus": 1024, "cluster__nics_per_gpu": 2},
        {"fabric__topology": "hypercube", "cluster__n_gpus": 256},
        {"fabric__topology": "hypercube", "cluster__n_gpus": 2048},
        {"fabric__topology": "dragonfly-plus", "cluster__n_gpus": 8192},
        # 3:1 leaves (48 down, 16 up): 1,536 GPUs per group, 4 and 8 full groups
        {
            "fabric__topology": "dragonfly-plus",
            "cluster__n_gpus": 6144,
            "fabric__oversubscription": 3,
        },
        {
            "fabric__topology": "dragonfly-plus",
            "cluster__n_gpus": 12288,
            "fabric__rail_optimized": False,
            "fabric__oversubscription": 3,
        },
    ],
)
@pytest.mark.parametrize("rail", [False, True])
def test_symmetry_equals_the_full_class_solve(kw, rail):
    """The aggregation error of the orbit solve against every class, where both run."""
    ctx = ctx_of(**kw)
    sym, n_sym = ctx.solve_all_to_all(_components(ctx, rail))
    with fast_paths(symmetry=False):
        full, n_full = ctx.solve_all_to_all(_components(ctx, rail))
    assert n_sym < n_full
    assert sym.rate_Bps == pytest.approx(full.rate_Bps, rel=1e-9)
    assert sym.mean_rate_Bps == pytest.approx(full.mean_rate_Bps, rel=1e-9)
    assert sym.mean_switch_hops == pytest.approx(full.mean_switch_hops, rel=1e-9)
    # the bottleneck name is not compared: leaf-up and leaf-down bundles saturate together


def test_a_partial_dragonfly_group_is_solved_by_group():
    ctx = ctx_of(
        fabric__topology="dragonfly-plus", cluster__n_gpus=4096, fabric__oversubscription=3
    )  # 88 leaves: the third group has 24 of 32 (more in tests/test_symmetry_fat_tree.py)
    sym, n_sym = ctx.solve_all_to_all(_components(ctx, False))
    with fast_paths(symmetry=False):
        full, n_full = ctx.solve_all_to_all(_components(ctx, False))
    assert n_sym < n_full and sym.rate_Bps == pytest.approx(full.rate_Bps, rel=1e-9)


@pytest.mark.parametrize("n", [16384, 65536, 131072])
@pytest.mark.parametrize(
    "kw",
    [
        {"fabric__topology": "torus-3d"},
        {"fabric__topology": "hypercube", "cluster__nics_per_gpu": 2},
        {"fabric__topology": "dragonfly-plus"},
        {"fabric__topology": "dragonfly-plus", "fabric__rail_optimized": False},
    ],
)
def test_alltoall_answers_at_every_scale(n, kw):
    row = collective(sc(cluster__n_gpus=n, **kw), "alltoall", "auto", [GIB])[0]
    assert row.busbw_GBps > 0 and row.time_us > 0


@pytest.mark.parametrize("n", [4096, 16384])
def test_torus_alltoall_is_the_bisection_bound(n):
    ctx = ctx_of(cluster__n_gpus=n, fabric__topology="torus-3d")
    m = algo_models(ctx, "alltoall", "direct")[0]
    # N S / 4 bytes cross the bisection each way: busbw = (n-1)/n S / t <= (n-1)/n 4 B_bis / N
    bound = (n - 1) / n * 4 * ctx.topology.bisection_GBps * 1e9 / n
    bound *= ctx.constants["net_efficiency"]
    assert m.inter_Bps == pytest.approx(bound, rel=1e-6)


def test_a_refused_alltoall_names_the_model_limit_and_the_bound():
    with pytest.raises(AlgorithmUnavailableError) as e:
        collective(
            # a degraded NIC breaks the symmetry: every class of 2,049 groups
            sc(
                cluster__n_gpus=131072,
                fabric__vendor="spectrum-x",
                what_if__degraded_link_factor=0.5,
            ),
            "alltoall",
            "direct",
            [GIB],
        )
    text = str(e.value)
    assert "more flow classes than this model version solves" in text
    assert "not of the design" in text and "4 B_bis / N" in text
