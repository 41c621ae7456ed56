"""Hybrid fabric: two partitions (fat-tree + dragonfly+) joined by a shared core tier.

BOM closed forms (partitions as built alone + the shared tier of
:mod:`fabric_model.topology.hybrid`), placement (a job in one partition touches only its
links), collectives (the job on both partitions is bounded by the shared tier) and the bad
input lines of the command line.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_model.cli import main
from fabric_model.collectives import collective
from fabric_model.flows import solve_maxmin
from fabric_model.plant.cost import bill_of_materials, compare_with_fat_tree
from fabric_model.plant.design import build_topology
from fabric_model.plant.hybrid import partition_scenario
from fabric_model.presets import load_preset
from fabric_model.routing import route
from fabric_model.routing.hybrid import route_hybrid
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.topology.hybrid import HybridTopology

GIB = 2**30


def hybrid(n_gpus: int = 2048, **over: object) -> Scenario:
    return apply_overrides(
        Scenario(), {"cluster.n_gpus": n_gpus, "fabric.topology": "hybrid", **over}
    )


@pytest.fixture(scope="module")
def small() -> HybridTopology:
    topo = build_topology(hybrid(2048, **{"hybrid.shared_oversubscription": 4}))
    assert isinstance(topo, HybridTopology)
    return topo


# --------------------------------------------------------------------------------------
# BOM: closed-form counts
# --------------------------------------------------------------------------------------


def test_preset_counts_are_the_partitions_alone_plus_the_closed_form_shared_tier() -> None:
    s = load_preset("hybrid-32k")
    topo = build_topology(s)
    a = build_topology(partition_scenario(s, "a"))
    b = build_topology(partition_scenario(s, "b"))
    assert (a.family, a.n_gpus, b.family, b.n_gpus) == ("fat-tree", 16384, "dragonfly-plus", 16384)
    radix, oversub = 64, 7.0
    up = math.ceil(16384 / oversub)  # U = ceil(E / s) per partition
    assert up == 2341
    # top tiers grow to hold their internal ports D plus U: T' = ceil((D + U) / R)
    d_a = 256 * 64  # the fat-tree's 256 cores are full (16 pods x 32 spines x 32 uplinks)
    d_b = 512 * 32 + 448 * 32 + 64 * 31  # dragonfly+ spines: 32 leaf ports + global ports
    assert topo.switches_by_tier["A core"] == math.ceil((d_a + up) / radix) == 293
    assert topo.switches_by_tier["B spine"] == math.ceil((d_b + up) / radix) == 548
    assert topo.switches_by_tier["shared core"] == math.ceil(2 * up / radix) == 74
    for tier in ("leaf", "spine"):
        assert topo.switches_by_tier[f"A {tier}"] == a.switches_by_tier[tier]
    assert topo.switches_by_tier["B leaf"] == b.switches_by_tier["leaf"]
    # every cable of both partitions, then U shared uplinks each
    for name, n in a.links_by_class.items():
        assert topo.links_by_class[f"A {name}"] == n
    for name, n in b.links_by_class.items():
        assert topo.links_by_class[f"B {name}"] == n
    assert topo.links_by_class["A core-shared"] == topo.links_by_class["B spine-shared"] == up
    assert topo.n_links == a.n_links + b.n_links + 2 * up
    assert topo.n_switches == a.n_switches + b.n_switches + (293 - 256) + (548 - 512) + 74
    assert topo.max_switch_hops == 3 + 1 + 2  # A leaf-spine-core, a shared core, B spine-leaf


def test_bom_prices_both_partitions_and_the_shared_tier() -> None:
    s = load_preset("hybrid-32k")
    bom = bill_of_materials(s)
    topo = bom.topology
    switches = {ln.where: ln.quantity for ln in bom.lines if ln.category == "switches"}
    assert switches == {t: n for t, n in topo.switches_by_tier.items() if n}
    assert sum(ln.quantity for ln in bom.lines if ln.category == "nics") == 32768
    cabled = {ln.where for ln in bom.lines if ln.category == "cables"}
    assert {"A nic-leaf", "B global", "A core-shared", "B spine-shared"} <= cabled
    assert bom.capex_usd == pytest.approx(sum(ln.capex_usd for ln in bom.lines))
    # partition A's switches are the fat-tree's alone plus its top tier's extra cores
    a = bill_of_materials(partition_scenario(s, "a"))
    price = next(ln.unit_price_usd for ln in a.lines if ln.category == "switches")
    a_switches = sum(
        ln.capex_usd for ln in bom.lines if ln.category == "switches" and ln.where[:2] == "A "
    )
    assert a_switches == pytest.approx(a.capex_by_category_usd["switches"] + 37 * price)
    rows = compare_with_fat_tree(s)
    assert [r["design"] for r in rows] == ["hybrid", "single fat-tree"]
    assert rows[0]["capex_usd"] == pytest.approx(bom.capex_usd)
    assert rows[1]["error"] == "" and rows[1]["n_switches"] > 0


@settings(max_examples=12, derandomize=True, deadline=None, database=None)
@given(
    a_domains=st.integers(1, 300),
    b_domains=st.integers(1, 300),
    oversub=st.sampled_from([1.0, 2.5, 7.0, 16.0]),
    families=st.sampled_from(
        [("fat-tree", "dragonfly-plus"), ("dragonfly-plus", "rail-only"), ("rail-only", "fat-tree")]
    ),
)
def test_shared_tier_closed_form_holds_for_any_split(a_domains, b_domains, oversub, families):
    n_a, n_b = 8 * a_domains, 8 * b_domains
    s = hybrid(
        n_a + n_b,
        **{
            "hybrid.a_gpus": n_a,
            "hybrid.a_topology": families[0],
            "hybrid.b_topology": families[1],
            "hybrid.shared_oversubscription": oversub,
        },
    )
    topo = build_topology(s)
    assert isinstance(topo, HybridTopology)
    g = topo.graph
    assert (
        g.n_links == 2 * topo.n_links
        and g.n_nodes
        == topo.n_endpoints
        + sum(p.topology.n_switches for p in topo.partitions)
        + topo.n_shared_cores
    )
    total_up = 0
    for p in topo.partitions:
        e = p.topology.n_endpoints
        assert p.n_uplinks == math.ceil(e / oversub - 1e-9)  # U = ceil(E / s)
        assert e / p.n_uplinks <= oversub + 1e-9
        counts = p.uplink_counts()
        assert counts.sum() == p.n_uplinks and counts.max() - counts.min() <= 1
        # a top switch of the built tier never exceeds its radix
        d = sum(
            gr.n_ports for lc in p.topology.links for gr in lc.port_groups if gr.tier == p.top_tier
        )
        assert d + p.n_uplinks <= p.n_top_built * p.topology.request.radix
        total_up += p.n_uplinks
    assert topo.n_shared_cores == math.ceil(total_up / topo.request.radix)
    per_core = np.bincount(
        g.link_dst[0::2][g.node_tier[g.link_dst[0::2]] == topo.shared_graph_tier]
    )
    assert per_core[per_core > 0].max() <= topo.request.radix


# --------------------------------------------------------------------------------------
# placement
# --------------------------------------------------------------------------------------


def _graph_links_used(rf, n_graph: int) -> np.ndarray:
    idx = rf.flows.flow_link_indices
    return np.unique(idx[idx < n_graph])


def test_a_job_in_one_partition_touches_only_its_links(small: HybridTopology) -> None:
    part_a, part_b = small.partitions
    e_a, e_b = part_a.topology.n_endpoints, part_b.topology.n_endpoints
    n_graph = small.graph.n_links
    cap = small.graph.link_capacity_Bps
    for p, n_e in ((part_a, e_a), (part_b, e_b)):
        src = p.endpoint_offset + np.arange(n_e)
        dst = p.endpoint_offset + (np.arange(n_e) + n_e // 2) % n_e
        for policy in ("adaptive", "ecmp"):
            rf = route_hybrid(small, src, dst, policy, cap, rng=np.random.default_rng(0))
            used = _graph_links_used(rf, n_graph)
            lo, hi = p.link_offset, p.link_offset + p.topology.graph.n_links
            assert used.min() >= lo and used.max() < hi, (p.name, policy)
            names = {rf.class_names[c] for c in rf.link_class[rf.flows.flow_link_indices]}
            assert all(n.startswith(f"{p.name} ") for n in names), names
        # the same pattern solved on the partition alone: identical rates
        rf = route_hybrid(small, src, dst, "adaptive", cap)
        alone = route(p.topology, src - p.endpoint_offset, dst - p.endpoint_offset, "adaptive")
        r_h = solve_maxmin(rf.flows, rf.link_capacity_Bps).rate_Bps
        r_a = solve_maxmin(alone.flows, alone.link_capacity_Bps).rate_Bps
        assert np.sort(r_h) == pytest.approx(np.sort(r_a), rel=1e-12)


def test_a_job_on_both_crosses_the_shared_cores(small: HybridTopology) -> None:
    part_a, part_b = small.partitions
    e_a = part_a.topology.n_endpoints
    n = small.n_endpoints
    src = np.arange(n)
    dst = (src + e_a) % n  # every connection crosses
    rf = route_hybrid(small, src, dst, "adaptive", small.graph.link_capacity_Bps)
    names = [rf.class_names[c] for c in rf.link_class[rf.flows.flow_link_indices]]
    assert {"A shared-up bundle", "B shared-down bundle", "B shared-up bundle"} <= set(names)
    assert set(rf.switch_hops) == {part_a.depth + 1 + part_b.depth}
    # the shared bundles hold exactly the shared uplinks: U cables of link_gbps each
    sh = [i for i, c in enumerate(rf.link_class) if rf.class_names[c] == "A shared-up bundle"]
    assert rf.link_capacity_Bps[sh].sum() == pytest.approx(part_a.n_uplinks * 50e9)
    rate = solve_maxmin(rf.flows, rf.link_capacity_Bps).rate_Bps
    # 1,024 NICs of 50 GB/s share 1,024 / 4 = 256 uplinks: a quarter of the line rate each
    assert part_a.n_uplinks == 256
    assert rate.min() == pytest.approx(50e9 / 4, rel=1e-9)


def test_ecmp_hashes_each_crossing_queue_pair_onto_one_shared_core(small) -> None:
    part_a, _ = small.partitions
    n, e_a = small.n_endpoints, part_a.topology.n_endpoints
    src = np.arange(n)
    dst = (src + e_a) % n
    g = small.graph
    shared = g.node_tier == small.shared_graph_tier
    ecmp = route_hybrid(
        small, src, dst, "ecmp", g.link_capacity_Bps, qps=2, rng=np.random.default_rng(1)
    )
    fl = ecmp.flows
    assert fl.n_flows == 2 * n and np.allclose(ecmp.flow_fraction, 0.5)
    for f in range(0, fl.n_flows, 97):
        links = fl.flow_link_indices[fl.flow_link_indptr[f] : fl.flow_link_indptr[f + 1]]
        cable = links[links < g.n_links]
        up = cable[shared[g.link_dst[cable]]]
        down = cable[shared[g.link_src[cable]]]
        assert up.size == down.size == 1 and g.link_dst[up[0]] == g.link_src[down[0]]
    adaptive = route_hybrid(small, src, dst, "adaptive", g.link_capacity_Bps)
    r_e = solve_maxmin(ecmp.flows, ecmp.link_capacity_Bps).rate_Bps
    r_a = solve_maxmin(adaptive.flows, adaptive.link_capacity_Bps).rate_Bps
    # hash collisions on the shared tier: the slowest queue pair is below the even spread
    assert 2 * r_e.min() < r_a.min()


# --------------------------------------------------------------------------------------
# collectives
# --------------------------------------------------------------------------------------


def test_job_a_runs_as_the_same_fat_tree_built_alone() -> None:
    on_a = collective(hybrid(2048), "allreduce", "ring", [GIB])[0]
    alone = collective(
        apply_overrides(Scenario(), {"cluster.n_gpus": 1024}), "allreduce", "ring", [GIB]
    )[0]
    assert on_a.n_ranks == alone.n_ranks == 1024
    assert on_a.busbw_GBps == pytest.approx(alone.busbw_GBps, rel=0.02)
    on_b = collective(hybrid(2048, **{"hybrid.job": "b"}), "alltoall", "auto", [GIB])[0]
    assert on_b.n_ranks == 1024


def test_job_on_both_is_bounded_by_the_shared_tier() -> None:
    a2a, ring = [], []
    for s in (1, 4, 16):
        over = {"hybrid.job": "both", "hybrid.shared_oversubscription": s}
        a2a.append(collective(hybrid(2048, **over), "alltoall", "direct", [GIB])[0].busbw_GBps)
        scattered = {**over, "what_if.placement": "scattered"}
        ring.append(collective(hybrid(2048, **scattered), "allreduce", "ring", [GIB])[0].busbw_GBps)
        # half of every GPU's bytes cross: busbw <= 4 U b / n = 2 b / s (b = 50 GB/s)
        assert a2a[-1] <= 2 * 50 / s * 1.001
    assert a2a[0] > a2a[1] > a2a[2] and ring[0] > ring[1] > ring[2]
    assert a2a[2] > 0.5 * 2 * 50 / 16
    # a contiguous ring crosses the shared tier at two places only: it hardly notices
    both = collective(hybrid(2048, **{"hybrid.job": "both"}), "allreduce", "ring", [GIB])[0]
    assert both.bottleneck != "A shared-up bundle"


# --------------------------------------------------------------------------------------
# bad input: exit 2, one line naming the key and what is allowed
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sets", "words"),
    [
        (
            ["hybrid.a_gpus=600", "hybrid.b_gpus=600"],
            ["hybrid.b_gpus", "must equal cluster.n_gpus = 1,024"],
        ),
        (
            ["hybrid.a_topology=torus-3d"],
            ["hybrid.a_topology", "fat-tree, rail-only, dragonfly-plus"],
        ),
        (
            ["hybrid.b_topology=hybrid"],
            ["hybrid.b_topology", "fat-tree, rail-only, dragonfly-plus"],
        ),
        (["hybrid.b_vendor=roce"], ["hybrid.b_vendor", "allowed: auto, infiniband"]),
        (["hybrid.a_gpus=516"], ["hybrid.a_gpus", "cluster.nvlink_domain = 8"]),
        (
            ["cluster.n_gpus=32768", "fabric.tiers=2"],
            ["hybrid.a_topology", "partition A", "fabric.tiers"],
        ),
        (["fabric.routing=dmodk", "hybrid.job=both"], ["fabric.routing", "adaptive, ecmp"]),
    ],
)
def test_bad_hybrid_input_is_one_line_and_exit_2(capsys, sets, words) -> None:
    args = ["collective", "--op", "allreduce", "--sizes", "1M", "--set", "fabric.topology=hybrid"]
    for kv in sets:
        args += ["--set", kv]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    for w in words:
        assert w in err, err


def test_deployment_exports_refuse_a_hybrid_in_one_line(capsys, tmp_path) -> None:
    out = tmp_path / "cables.csv"
    args = [
        "export",
        "--format",
        "cabling-csv",
        "--out",
        str(out),
        "--set",
        "fabric.topology=hybrid",
    ]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "fabric.topology" in err and "per partition" in err


def test_a_degraded_nic_in_either_partition_slows_a_job_on_both() -> None:
    both = {"hybrid.job": "both"}
    healthy = collective(hybrid(2048, **both), "allreduce", "ring", [GIB])[0].busbw_GBps
    for where in ("root", "interior"):  # rank 0 (partition A), the middle domain (B)
        slow = hybrid(
            2048,
            **both,
            **{"what_if.degraded_link_factor": 0.25, "what_if.degraded_position": where},
        )
        assert collective(slow, "allreduce", "ring", [GIB])[0].busbw_GBps < 0.5 * healthy


def test_direct_all_to_all_refuses_a_rail_only_partition(capsys) -> None:
    sets = ["fabric.topology=hybrid", "hybrid.a_topology=rail-only", "hybrid.job=both"]
    args = ["collective", "--op", "alltoall", "--algo", "direct", "--sizes", "1M"]
    assert main([*args, *(x for kv in sets for x in ("--set", kv))]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "hierarchical" in err, err


def test_keys_lists_the_hybrid_keys(capsys) -> None:
    assert main(["keys"]) == 0
    out = capsys.readouterr().out
    for key in ("hybrid.a_topology", "hybrid.b_gpus", "hybrid.shared_oversubscription"):
        assert key in out
    assert "hybrid.job" in out and "partition A's GPUs only" in out
