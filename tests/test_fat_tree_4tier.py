"""4-tier fat-trees: closed-form counts, the refusal past 4 tiers, BFS hops and bisection.

A full non-blocking fat-tree of ``t`` tiers of radix-``k`` switches holds ``2 (k/2)^t``
endpoints on ``2 (k/2)^(t-1)`` switches per lower tier and ``(k/2)^(t-1)`` at the top
(``fabric_model.topology.fat_tree``). The small radix-8 build is checked against an explicit
networkx breadth-first search and max-flow on its graph, and its collectives' orbit solve
against the full solve.
"""

from __future__ import annotations

import dataclasses

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_model._fastpaths import fast_paths
from fabric_model.catalog import FrozenMap, load_catalog
from fabric_model.collectives import FabricContext
from fabric_model.errors import InfeasibleDesignError, ScenarioError
from fabric_model.plant.design import build_topology
from fabric_model.routing import route
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.topology.base import TopologyRequest
from fabric_model.topology.fat_tree import build_fat_tree, max_endpoints

IB_1M = {"cluster.n_gpus": 1048576, "fabric.vendor": "infiniband"}


@pytest.mark.parametrize(("tiers", "cap"), [(2, 2048), (3, 65536), (4, 2097152)])
def test_closed_form_capacity_k64(tiers: int, cap: int) -> None:
    assert max_endpoints(64, tiers) == cap == 2 * 32**tiers


def test_million_gpus_on_infiniband_ndr_build_four_tiers() -> None:
    topo = build_topology(apply_overrides(Scenario(), IB_1M))
    assert topo.tiers == 4 and topo.params["radix"] == 64
    # 2^20 NIC ports = half of the 2^21 a full radix-64 4-tier tree holds: half of every tier
    # of the full build (65,536 x 3 + 32,768 switches)
    assert topo.switches_by_tier == {
        "leaf": 32768,
        "spine": 32768,
        "core": 32768,
        "super": 16384,
    }
    assert topo.n_switches == 114688 == 7 * 64**3 // 8 // 2
    assert {lc.name: lc.n_links for lc in topo.links} == {
        "nic-leaf": 2**20,
        "leaf-spine": 2**20,
        "spine-core": 2**20,
        "core-super": 2**20,
    }
    assert topo.max_switch_hops == 7
    assert topo.params["n_super_pods"] == 32 and topo.params["pods_per_super_pod"] == 32


def test_full_radix_64_four_tier_counts() -> None:
    req = TopologyRequest(n_gpus=2**21, radix=64, rail_optimized=False)
    topo = build_fat_tree(req)
    assert topo.tiers == 4
    assert topo.switches_by_tier == {
        "leaf": 65536,
        "spine": 65536,
        "core": 65536,
        "super": 32768,
    }


def test_beyond_four_tiers_is_refused() -> None:
    req = TopologyRequest(n_gpus=2**21 + 8, radix=64, rail_optimized=False)
    with pytest.raises(InfeasibleDesignError, match=r"4 tiers.*2,097,152") as info:
        build_fat_tree(req)
    assert info.value.key == "cluster.n_gpus" and "\n" not in str(info.value)
    with pytest.raises(ScenarioError, match=r"fabric\.tiers"):
        apply_overrides(Scenario(), {"fabric.tiers": 5})


def test_auto_keeps_three_tiers_where_they_fit() -> None:
    topo = build_fat_tree(TopologyRequest(n_gpus=65536, radix=64, rail_optimized=False))
    assert topo.tiers == 3


def _small_req(**kw: object) -> TopologyRequest:
    base = {"n_gpus": 512, "radix": 8, "rail_optimized": False, "tiers": 4}
    base.update(kw)
    return TopologyRequest(**base)  # type: ignore[arg-type]


def _nx(topo):  # type: ignore[no-untyped-def]
    g = topo.graph
    h = nx.Graph()
    for a, b, c in zip(g.link_src[::2], g.link_dst[::2], g.link_capacity_Bps[::2], strict=True):
        a, b = int(a), int(b)
        if h.has_edge(a, b):
            h[a][b]["capacity"] += float(c)
        else:
            h.add_edge(a, b, capacity=float(c))
    return h


@pytest.mark.parametrize("n_gpus", [512, 384], ids=["full", "partial"])
def test_radix_8_hops_match_a_bfs(n_gpus: int) -> None:
    topo = build_fat_tree(_small_req(n_gpus=n_gpus))
    if n_gpus == 512:  # 2 (8/2)^4 endpoints: 128 + 128 + 128 + 64 switches
        assert topo.switches_by_tier == {"leaf": 128, "spine": 128, "core": 128, "super": 64}
    h = _nx(topo)
    n_e = topo.n_endpoints
    # one GPU per NVLink domain of 8: count every pair of endpoints in different servers
    ends = np.arange(n_e)
    hist: dict[int, int] = {}
    for s in ends[:: 8 * 4]:  # one source per leaf (4 servers... ToR leaves of 4 NICs)
        dist = nx.single_source_shortest_path_length(h, int(s))
        for d in ends:
            if d // 8 != s // 8:
                sw = dist[int(d)] - 1  # endpoint-leaf-...-leaf-endpoint: switches = edges - 1
                hist[sw] = hist.get(sw, 0) + 1
    assert max(hist) == topo.max_switch_hops == 7
    # the builder's histogram over every pair, against the sampled sources (one per leaf
    # group of 32 NICs is a full orbit of the ToR build: all leaves look alike)
    total = sum(hist.values())
    bfs_mean = sum(k * v for k, v in hist.items()) / total
    if n_gpus == 512:
        assert topo.mean_switch_hops == pytest.approx(bfs_mean, rel=1e-12)
    # and the router's hop counts are the BFS distances
    rng = np.random.default_rng(1)
    src = rng.integers(0, n_e, 400)
    dst = rng.integers(0, n_e, 400)
    keep = src // 8 != dst // 8
    src, dst = src[keep], dst[keep]
    rf = route(topo, src, dst, "adaptive", topo.graph.link_capacity_Bps)
    want = [nx.shortest_path_length(h, int(a), int(b)) - 1 for a, b in zip(src, dst, strict=True)]
    assert list(rf.switch_hops) == want


def test_radix_8_bisection_is_the_max_flow_between_halves() -> None:
    topo = build_fat_tree(_small_req())
    h = _nx(topo)
    n_e = topo.n_endpoints
    for e in range(n_e):
        if e < n_e // 2:
            h.add_edge("S", e, capacity=float("inf"))
        else:
            h.add_edge(e, "T", capacity=float("inf"))
    flow = nx.maximum_flow_value(h, "S", "T")
    assert flow == pytest.approx(topo.bisection_GBps * 1e9, rel=1e-9)


@pytest.mark.parametrize("policy", ["ecmp", "dmodk"])
@pytest.mark.parametrize(
    "n_gpus", [512, 384, 96], ids=["full", "six-super-pods", "partial-super-pod"]
)
def test_per_cable_paths_are_walks_of_bfs_length(policy: str, n_gpus: int) -> None:
    topo = build_fat_tree(_small_req(n_gpus=n_gpus))
    if n_gpus == 96:  # 6 pods: a full super-pod and one of 2 pods, 2 positions per core
        assert topo.params["n_super_pods"] == 2
        assert topo.switches_by_tier["core"] == 16 + 8
    g = topo.graph
    h = _nx(topo)
    n_e = topo.n_endpoints
    rng = np.random.default_rng(7)
    src, dst = rng.integers(0, n_e, 300), rng.integers(0, n_e, 300)
    keep = src // 8 != dst // 8
    src, dst = src[keep], dst[keep]
    rf = route(topo, src, dst, policy, g.link_capacity_Bps, qps=2, rng=rng)
    fl = rf.flows
    for f in range(rf.flow_of_connection.size):
        links = fl.flow_link_indices[fl.flow_link_indptr[f] : fl.flow_link_indptr[f + 1]]
        c = int(rf.flow_of_connection[f])
        assert int(g.link_src[links[0]]) == src[c] and int(g.link_dst[links[-1]]) == dst[c]
        assert np.array_equal(g.link_dst[links[:-1]], g.link_src[links[1:]])  # a walk
        assert links.size - 1 == rf.switch_hops[c]
    want = [nx.shortest_path_length(h, int(x), int(y)) - 1 for x, y in zip(src, dst, strict=True)]
    assert list(rf.switch_hops) == want


def test_dmodk_spreads_one_leafs_destinations_over_the_up_ports() -> None:
    topo = build_fat_tree(_small_req())
    g = topo.graph
    # the 4 NICs of leaf 0 to the 4 NICs of the last leaf (another super-pod)
    src, dst = np.arange(4), np.arange(508, 512)
    rf = route(topo, src, dst, "dmodk", g.link_capacity_Bps)
    up = [int(rf.flows.flow_link_indices[rf.flows.flow_link_indptr[f] + 1]) for f in range(4)]
    assert len(set(up)) == 4  # each destination leaves on its own leaf uplink


def test_per_cable_policies_need_full_pods_on_four_tiers() -> None:
    topo = build_fat_tree(_small_req(n_gpus=480))  # 30 pods: a super-pod of 2
    with pytest.raises(InfeasibleDesignError, match="allowed: adaptive") as info:
        route(topo, np.array([0]), np.array([400]), "ecmp", topo.graph.link_capacity_Bps)
    assert info.value.key == "fabric.routing"
    adaptive = route(topo, np.array([0]), np.array([400]), "adaptive", topo.graph.link_capacity_Bps)
    assert adaptive.switch_hops[0] == 7


def _radix_8_ctx(**kw: object) -> FabricContext:
    """A scenario on a radix-8 Quantum-2 (a 3.2 Tb/s test switch) forced to 4 tiers."""
    cat = load_catalog()
    sw = cat.switches["qm9700"]
    small = dataclasses.replace(sw, capacity_one_way_gbps=3200, max_ports=8, n_cages=4)
    cat = dataclasses.replace(cat, switches=FrozenMap({**cat.switches, "qm9700": small}))
    over = {
        "cluster.n_gpus": 512,
        "fabric.vendor": "infiniband",
        "fabric.rail_optimized": False,
        "fabric.tiers": 4,
        # servers of 4 GPUs: one server per ToR leaf of 4 NICs, so the leaf shifts keep the
        # NVLink domains whole
        "cluster.gpus_per_node": 4,
        "cluster.nvlink_domain": 4,
        **kw,
    }
    return FabricContext.from_scenario(apply_overrides(Scenario(), over), cat)


@pytest.mark.parametrize("rail", [False, True], ids=["direct", "rail-aligned"])
def test_orbit_solve_equals_every_class_on_four_tiers(rail: bool) -> None:
    ctx = _radix_8_ctx()
    assert ctx.topology.tiers == 4
    n, d, m = ctx.n_ranks, ctx.domain, ctx.n_domains
    if rail:
        comps = [ctx.endpoint(np.arange(m), np.full(m, k)) for k in range(d * ctx.nics)]
    else:
        comps = [ctx.rank_endpoint(np.arange(n, dtype=np.int64), k) for k in range(ctx.nics)]
    sym, n_sym = ctx.solve_all_to_all(comps, full=True)
    with fast_paths(symmetry=False):
        full, n_full = ctx.solve_all_to_all(comps, full=True)
    assert n_sym < n_full
    assert sym.rate_Bps == pytest.approx(full.rate_Bps, rel=1e-9)
    assert sym.mean_rate_Bps == pytest.approx(full.mean_rate_Bps, rel=1e-9)
    assert sym.mean_switch_hops == pytest.approx(full.mean_switch_hops, rel=1e-9)
    assert sym.max_switch_hops == full.max_switch_hops == 7


def test_cost_prices_the_fourth_cable_class() -> None:
    from fabric_model.plant.cost import bill_of_materials

    sc = apply_overrides(Scenario(), {**IB_1M, "facility.cable_lengths": "keys"})
    b = bill_of_materials(sc)
    by_where = {line.where: line.quantity for line in b.lines}
    assert by_where["super"] == 16384
    assert by_where["core-super"] == 2**20  # the fiber of every core-super link
    assert by_where["core-super (super side)"] == 2**19  # twin-port: 2 links per module


@settings(derandomize=True, max_examples=40, deadline=None)
@given(
    radix=st.sampled_from([4, 6, 8, 10, 12]),
    fill=st.floats(min_value=0.02, max_value=1.0),
    r_leaf=st.sampled_from([1.0, 2.0, 3.0]),
    r_spine=st.sampled_from([1.0, 2.0]),
    rail=st.booleans(),
)
def test_four_tier_builds_keep_every_port_budget(
    radix: int, fill: float, r_leaf: float, r_spine: float, rail: bool
) -> None:
    cap = max_endpoints(radix, 4, r_leaf, r_spine)
    n_gpus = max(8, int(cap * fill) // 8 * 8)
    req = _small_req(
        n_gpus=n_gpus,
        radix=radix,
        oversubscription=r_leaf,
        spine_oversubscription=r_spine,
        rail_optimized=rail,
    )
    try:
        topo = build_fat_tree(req)
    except InfeasibleDesignError:
        # only where the leaves or pods do not fit (rail-optimized keys can spread the NICs)
        assert rail or n_gpus > cap
        return
    g = topo.graph
    # every switch uses at most radix ports, every endpoint one
    ports = np.bincount(g.link_src, minlength=g.n_nodes)
    assert ports[: topo.n_endpoints].max() == 1
    assert ports[topo.n_endpoints :].max() <= radix
    # the port groups add up to each class's cables at both ends
    for lc in topo.links:
        for end in lc.ends:
            if end == "nic":
                continue
            groups = [pg for pg in lc.port_groups if pg.tier == end]
            assert sum(pg.ports_per_switch * pg.n_switches for pg in groups) == lc.n_links
    # switch counts by tier are the graph's
    tiers = np.bincount(g.node_tier.astype(np.int64))
    assert list(tiers[1:]) == list(topo.switches_by_tier.values())
    # connected; the longest path is 7 switches when there are several super-pods
    assert max(topo.hop_histogram, default=0) <= 7
    if topo.params["n_super_pods"] > 1 and not rail:  # (rail-optimized pairs stay on a rail)
        assert topo.max_switch_hops == 7
    h = _nx(topo)
    assert nx.is_connected(h)


@pytest.mark.app
def test_topology_page_draws_a_four_tier_design() -> None:
    from tests.apptest_helpers import assert_no_exception, figure, messages, open_page

    at = open_page("pages/topology.py", {"cluster.n_gpus": "131072"}, timeout_s=180)
    assert_no_exception(at)
    assert not messages(at.error) and not messages(at.warning), messages(at.warning)
    fig = figure(at)
    assert "4 tiers" in fig["layout"]["title"]["text"]
    assert "super-spine" in fig["layout"]["yaxis"]["ticktext"]


def test_cli_bom_builds_the_million_gpu_infiniband_fabric(capsys) -> None:  # type: ignore[no-untyped-def]
    from fabric_model.cli import main

    argv = ["bom", "--set", "cluster.n_gpus=1048576", "--set", "fabric.vendor=infiniband"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "fat-tree (4 tiers)" in out
    assert "switches by tier: leaf 32,768, spine 32,768, core 32,768, super 16,384" in out
