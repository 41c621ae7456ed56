"""Fat-tree counts: closed forms, vendor reference designs (golden), and invariants."""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_model.cli import main
from fabric_model.errors import InfeasibleDesignError
from fabric_model.plant.design import build_topology
from fabric_model.presets import load_preset
from fabric_model.routing import route
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.topology import TopologyRequest
from fabric_model.topology.fat_tree import (
    balanced_count,
    build_fat_tree,
    leaf_ports,
    max_endpoints,
    pair_share,
)


def ft(n_gpus, radix=64, **kw):
    return build_fat_tree(TopologyRequest(n_gpus=n_gpus, radix=radix, **kw))


@pytest.mark.parametrize("k", [8, 16, 64, 128, 144])
def test_full_two_tier_closed_form(k):
    # k^2/2 endpoints on 3k/2 switches (k leaves, k/2 spines), N inter-switch links
    t = ft(k * k // 2, k, rail_optimized=False, tiers=2)
    assert dict(t.switches_by_tier) == {"leaf": k, "spine": k // 2}
    assert t.n_switches == 3 * k // 2
    assert t.links_by_class == {"nic-leaf": k * k // 2, "leaf-spine": k * k // 2}


@pytest.mark.parametrize("k", [8, 16, 32, 64])
def test_full_three_tier_closed_form(k):
    # Al-Fares et al. (SIGCOMM 2008): k^3/4 hosts, 5k^2/4 switches, (k/2)^2 cores, 2N links
    n = k**3 // 4
    t = ft(n, k, rail_optimized=False)
    assert t.tiers == 3
    assert t.n_switches == 5 * k * k // 4
    assert t.switches_by_tier["core"] == (k // 2) ** 2
    assert t.links_by_class["leaf-spine"] == n and t.links_by_class["spine-core"] == n
    assert t.max_switch_hops == 5


def test_radix_limits_and_auto_tiers():
    assert max_endpoints(64, 1) == 64
    assert max_endpoints(64, 2) == 2048 and max_endpoints(64, 3) == 65536
    assert max_endpoints(128, 3) == 524288 and max_endpoints(144, 2) == 10368
    assert ft(64).tiers == 1 and ft(72).tiers == 2 and ft(2048).tiers == 2 and ft(2056).tiers == 3


@pytest.mark.parametrize(
    ("r", "down", "up"), [(1, 32, 32), (2, 42, 21), (3, 48, 16), (7, 56, 8), (1.5, 38, 26)]
)
def test_oversubscribed_leaf_ports(r, down, up):
    assert leaf_ports(64, r) == (down, up)
    assert down + up <= 64 and down / up <= r + 1e-9


def test_oversubscription_halves_bisection_and_switches():
    # 3,840 NICs fill 40 leaves of 96 down / 32 up exactly (radix 128, 3:1)
    full = ft(3840, rail_optimized=False, tiers=2, radix=128)
    over = ft(3840, rail_optimized=False, tiers=2, radix=128, oversubscription=3)
    assert over.bisection_GBps == pytest.approx(full.bisection_GBps / 3)
    assert over.switches_by_tier["spine"] < full.switches_by_tier["spine"]
    assert over.oversubscription == 3.0


# Golden: NVIDIA DGX SuperPOD reference architectures (hardware-and-cost-facts section 6.2).
# [S47] DGX B200 SuperPOD, QM9700 (k=64 at 400G), 8 GPUs per node, rail-optimized:
B200_RA = [
    (512, {"leaf": 16, "spine": 8}),
    (1024, {"leaf": 32, "spine": 16}),
    (2048, {"leaf": 64, "spine": 32}),
    (4096, {"leaf": 128, "spine": 128, "core": 64}),
    (8192, {"leaf": 256, "spine": 256, "core": 128}),
    (16384, {"leaf": 512, "spine": 512, "core": 256}),
]
# [S49] DGX B300 XDR SuperPOD, Q3400 (k=144 at 800G), SU = 72 nodes = 576 GPUs:
# (GPUs, leaves, the RA's spines, the port minimum). The RA picks a divisor of the 72 leaf
# uplinks (balanced striping): 18 spines for 32 leaves and 36 for 64. The model now builds the
# fewest spines whose ports take every uplink, ceil(72 L / 144) = 16 and 32 (each leaf has 2 or
# 3 cables to each spine), and reports the RA's balanced count next to it (D4).
B300_XDR_RA = [
    (576, 8, 4, 4),
    (1152, 16, 8, 8),
    (2304, 32, 18, 16),
    (4608, 64, 36, 32),
    (10368, 144, 72, 72),
]


@pytest.mark.parametrize(("n_gpus", "switches"), B200_RA)
def test_golden_dgx_b200_superpod(n_gpus, switches):
    t = ft(n_gpus, 64, link_gbps=400)
    assert dict(t.switches_by_tier) == switches
    assert all(n == n_gpus for n in t.links_by_class.values())  # "cables per tier = GPUs"


@pytest.mark.parametrize(("n_gpus", "leaves", "ra_spines", "min_spines"), B300_XDR_RA)
def test_golden_dgx_b300_xdr_superpod(n_gpus, leaves, ra_spines, min_spines):
    t = ft(n_gpus, 144, link_gbps=800)
    assert dict(t.switches_by_tier) == {"leaf": leaves, "spine": min_spines}
    assert min_spines == -(-leaves * 72 // 144)  # every uplink on a spine port, no more
    assert t.params["balanced_spines"] == ra_spines  # the reference architecture's count
    if ra_spines != min_spines:
        assert any("a balanced build needs" in n for n in t.notes)


def test_balanced_spine_count_is_a_divisor():
    assert balanced_count(16, 72) == 18 and balanced_count(32, 72) == 36
    assert balanced_count(8, 32) == 8 and balanced_count(3, 32) == 4


def test_infeasible_designs_name_the_key_and_maximum():
    # past 4 tiers (issue 17 added the fourth: 2 (k/2)^4 = 2,097,152 at k = 64)
    with pytest.raises(InfeasibleDesignError, match=r"cluster\.n_gpus: .*at most 2,097,152") as e:
        ft(2**22, 64)
    assert e.value.key == "cluster.n_gpus"
    with pytest.raises(InfeasibleDesignError, match=r"fabric\.tiers: .*3 tiers.*at most 65,536"):
        ft(131072, 64, tiers=3)
    with pytest.raises(InfeasibleDesignError, match=r"fabric\.tiers: .*2 tiers.*at most 2,048"):
        ft(4096, 64, tiers=2)
    with pytest.raises(InfeasibleDesignError, match=r"fabric\.tiers: .*1 tier.*at most 64 NIC"):
        ft(128, 64, tiers=1)


def test_rail_optimized_hops():
    # 512 GPUs = 2 SUs of 32 DGX: same-rank GPUs of the same SU share a leaf (1 hop);
    # of the other 63 servers, 31 are in the same SU.
    t = ft(512, 64)
    assert t.hop_histogram[1] == pytest.approx(31 / 63)
    assert t.hop_histogram[3] == pytest.approx(32 / 63)
    tor = ft(512, 64, rail_optimized=False)  # 4 servers per leaf, 3 of 63 others share it
    assert tor.hop_histogram[1] == pytest.approx(3 / 63)


def test_single_domain_has_no_scale_out_pairs():
    t = ft(8)
    assert t.hop_histogram == {} and t.max_switch_hops == 0


def test_graph_matches_counts_and_is_connected():
    t = ft(4096, 64, oversubscription=2)
    g = t.graph
    assert g.n_links == 2 * t.n_links
    assert g.n_nodes == t.n_endpoints + t.n_switches
    degree = np.bincount(g.link_src, minlength=g.n_nodes)
    assert degree[: t.n_endpoints].tolist() == [1] * t.n_endpoints
    assert degree[t.n_endpoints :].max() <= 64  # no switch over its radix
    assert nx.is_weakly_connected(g.to_networkx())


@settings(max_examples=40, deadline=None)
@given(
    nodes=st.integers(1, 400),
    radix=st.sampled_from([16, 32, 64, 128]),
    r=st.sampled_from([1.0, 2.0, 3.0]),
    rail=st.booleans(),
    nics=st.sampled_from([1, 2]),
)
def test_properties(nodes, radix, r, rail, nics):
    req = dict(radix=radix, oversubscription=r, rail_optimized=rail, nics_per_gpu=nics)
    try:
        t = ft(nodes * 8, **req)
    except InfeasibleDesignError:  # only a design beyond 3 tiers may fail
        assert nodes * 8 * nics > max_endpoints(radix, 3, r)
        return
    counts = [*t.switches_by_tier.values(), *t.links_by_class.values()]
    assert all(isinstance(c, int) and c >= 0 for c in counts)
    assert t.links_by_class["nic-leaf"] == nodes * 8 * nics  # every NIC is cabled
    for lc in t.links:  # switch ports of each link class add up to its cables
        for tier in {g.tier for g in lc.port_groups}:
            assert sum(g.n_ports for g in lc.port_groups if g.tier == tier) == lc.n_links
    assert 0 <= t.mean_switch_hops <= t.max_switch_hops
    if t.hop_histogram:
        assert sum(t.hop_histogram.values()) == pytest.approx(1)
    if r == 1 and t.tiers <= 2:
        assert t.bisection_GBps == pytest.approx(t.n_endpoints / 2 * 400 / 8)
    # (the guard was `<= 2000`, which can step past the 3-tier maximum at radix 16)
    fits = (nodes + 1) * 8 * nics <= min(2000, max_endpoints(radix, 3, r))
    bigger = ft((nodes + 1) * 8, **req) if fits else None
    if bigger is not None and bigger.tiers == t.tiers:
        assert bigger.n_switches >= t.n_switches and bigger.n_links >= t.n_links


# --------------------------------------------------------------------------------------
# D4 (physics-review.md): the fewest switches whose ports carry every uplink, at any size
# --------------------------------------------------------------------------------------

#: The reviewer's commands and the minimal non-blocking counts. 10,240 GPUs on QM9700 (k = 64):
#: 320 leaves x 32 uplinks = 10,240 spine-core cables on 160 cores (was 256). 8,200 GPUs on
#: SN5600 at 400G (k = 128): 17 SUs x 8 rails = 136 leaves; pods of 64 leaves, so 2 full pods
#: of 64 spines and a partial pod of 8 leaves on ceil(8 x 64 / 64) = 8 spines (was 64); the
#: 8,704 spine uplinks need ceil(8,704 / 128) = 68 cores (was 128). The review's "~68 spines"
#: cannot carry them: at 1:1 a spine has 64 down ports, so 8,704 leaf uplinks need 136.
#: The 4,608-GPU XDR design is now the preset gb300-nvl72-xdr (was gb200-nvl72-xdr).
D4_TABLE = [
    (None, {"cluster.n_gpus": 10240}, {"leaf": 320, "spine": 320, "core": 160}),
    (
        None,
        {"cluster.n_gpus": 8200, "fabric.vendor": "spectrum-x"},
        {"leaf": 136, "spine": 136, "core": 68},
    ),
    ("colossus-100k-spectrum-x", {}, {"leaf": 1536, "spine": 1536, "core": 768}),
    (None, {"cluster.n_gpus": 24576}, {"leaf": 768, "spine": 768, "core": 384}),
    ("gb300-nvl72-xdr", {}, {"leaf": 64, "spine": 32}),
]


def scenario_topology(preset, overrides):
    return build_topology(apply_overrides(load_preset(preset) if preset else Scenario(), overrides))


@pytest.mark.parametrize(("preset", "overrides", "want"), D4_TABLE)
def test_d4_table_builds_the_minimal_non_blocking_counts(preset, overrides, want):
    t = scenario_topology(preset, overrides)
    assert dict(t.switches_by_tier) == want
    k, up, n_leaves = (
        int(t.params["radix"]),
        int(t.params["up_per_leaf"]),
        t.switches_by_tier["leaf"],
    )
    assert t.links_by_class["leaf-spine"] == n_leaves * up  # every leaf uplink is cabled
    if t.tiers == 2:
        assert (want["spine"] - 1) * k < n_leaves * up <= want["spine"] * k
        return
    spine_core = t.links_by_class["spine-core"]
    assert spine_core == n_leaves * up  # 1:1 spines: as many uplinks as leaf cables
    assert (want["core"] - 1) * k < spine_core <= want["core"] * k  # one core fewer won't do
    assert t.bisection_GBps == pytest.approx(t.full_bisection_GBps)  # still non-blocking


def _old_switch_count(t):
    """The pre-D4 rules on the same leaves (divisor spine counts, ``up`` spines in every pod,
    ``up`` core planes of a divisor count each), for r_spine = 1."""
    k, up, n_leaves = (
        int(t.params["radix"]),
        int(t.params["up_per_leaf"]),
        int(t.params["n_leaves"]),
    )
    if t.tiers == 1:
        return 1
    if t.tiers == 2:
        return n_leaves + balanced_count(-(-n_leaves * up // k), up)
    spine_down = leaf_ports(k, 1.0)[0]
    n_pods = -(-n_leaves // spine_down)
    spine_up = [spine_down] * (n_pods - 1) + [n_leaves - spine_down * (n_pods - 1)]
    cores = up * balanced_count(-(-sum(spine_up) // k), max(spine_up))
    return n_leaves + n_pods * up + cores


#: (radix, link_gbps): QM9700 at 400G, Q3400 at 800G, SN5600 at 800G / 400G / 200G.
SWITCHES = [(64, 400), (144, 800), (64, 800), (128, 400), (256, 200)]


def _check_minimal(t, r):
    k = int(t.params["radix"])
    g = t.graph
    n_e = t.n_endpoints
    degree = np.bincount(g.link_src, minlength=g.n_nodes)[n_e:]
    assert degree.min() >= 1  # no switch is left without a cable
    assert degree.max() <= k  # and none is over its radix
    if t.tiers < 2:
        return
    cls = g.link_class[0::2]
    a, b = g.link_src[0::2].astype(np.int64), g.link_dst[0::2].astype(np.int64)
    n_leaves = t.switches_by_tier["leaf"]
    up = int(t.params["up_per_leaf"])
    assert t.links_by_class["leaf-spine"] == n_leaves * up  # every leaf uplink is carried
    n_spines = t.switches_by_tier["spine"]
    spine_down = np.bincount(b[cls == 1] - n_e - n_leaves, minlength=n_spines)
    if t.tiers == 2:
        assert (n_spines - 1) * k < n_leaves * up  # one spine fewer could not take them
        return
    spine_up = np.bincount(a[cls == 2] - n_e - n_leaves, minlength=n_spines)
    assert np.all(spine_up >= spine_down)  # 1:1 spines: every spine uplink is carried
    n_cores = t.switches_by_tier["core"]
    assert (n_cores - 1) * k < int(spine_up.sum()) <= n_cores * k


@settings(derandomize=True, max_examples=60, deadline=None)
@given(
    nodes=st.integers(1, 16384),
    step=st.integers(1, 1024),
    switch=st.sampled_from(SWITCHES),
    r=st.sampled_from([1.0, 2.0, 4.0]),
    rail=st.booleans(),
)
def test_minimal_builds_carry_every_uplink_and_grow_with_size(nodes, step, switch, r, rail):
    radix, gbps = switch
    kw = dict(radix=radix, link_gbps=gbps, oversubscription=r, rail_optimized=rail)
    n_gpus = nodes * 8  # 8 to 131,072 GPUs, whole 8-GPU servers
    try:
        t = ft(n_gpus, **kw)
    except InfeasibleDesignError:
        assert n_gpus > max_endpoints(radix, 4, r)
        return
    if n_gpus > max_endpoints(radix, 3, r):
        # past 3 tiers auto builds the fourth (its counts: tests/test_fat_tree_4tier.py)
        assert t.tiers == 4
        return
    _check_minimal(t, r)
    assert t.n_switches <= _old_switch_count(t)  # never more than the pre-D4 builder
    assert t.warnings == ()
    bigger_gpus = min(n_gpus + 8 * step, max_endpoints(radix, 3, r) // 8 * 8)
    if bigger_gpus > n_gpus:
        assert ft(bigger_gpus, **kw).n_switches >= t.n_switches  # non-decreasing in size


@pytest.mark.parametrize(("radix", "gbps"), [(64, 400), (128, 400)])
def test_no_jump_past_8192_gpus(radix, gbps):
    # QM9700 (k = 64) is 3-tier at both sizes: one more SU (8 leaves) adds 8 spines and
    # ceil(8 x 32 / 64) = 4 cores. SN5600 (k = 128) needs its third tier at 8,200 (136
    # leaves > k): the step is the one from 2 to 3 tiers at the same size, plus one SU.
    kw = dict(radix=radix, link_gbps=gbps)
    at, past = ft(8192, **kw), ft(8200, **kw)
    as_three = ft(8192, tiers=3, **kw)
    su = past.switches_by_tier["leaf"] - at.switches_by_tier["leaf"]
    assert su == 8  # one scalable unit of 8 rails
    assert past.n_switches - as_three.n_switches <= 2 * su + -(-su * radix // 2 // radix) + 1


def test_uneven_striping_is_reported():
    t = ft(10240, 64)  # 160 cores: a pod's 32 uplinks into a plane give 6 or 7 to each of 5
    assert t.params["balanced_cores"] == 256 and t.params["n_cores"] == 160
    assert t.params["pod_pair_share"] == pytest.approx(pair_share(32, 5)) == pytest.approx(30 / 32)
    assert any("uneven striping" in n and "256 cores" in n for n in t.notes)
    assert not any("uneven" in n for n in ft(8192, 64).notes)  # full planes: balanced
    assert pair_share(72, 36) == 1.0 and pair_share(72, 32) == pytest.approx(64 / 72)


@pytest.mark.parametrize(
    ("n_gpus", "kw"),
    [
        (40, {"radix": 8, "rail_optimized": False}),  # pods 4 + 4 + 2 leaves, 5 cores
        (72, {"radix": 8, "rail_optimized": False}),  # 18 leaves: partial pod of 2
        (120, {"radix": 16, "oversubscription": 3, "rail_optimized": False}),  # 2 tiers, 3 spines
        (96, {"radix": 12}),  # rail-optimized: 16 leaves in pods of 6, 6 and 4
        (4608, {"radix": 144, "gpus_per_node": 4, "nvlink_domain": 72}),  # 64 leaves / 32 spines
        (48, {"radix": 8, "spine_oversubscription": 3, "rail_optimized": False}),
    ],
)
@pytest.mark.parametrize("policy", ["ecmp", "dmodk"])
def test_uneven_builds_route_over_real_cables(n_gpus, kw, policy):
    t = ft(n_gpus, **kw)
    g = t.graph
    rng = np.random.default_rng(3)
    src = np.arange(t.n_endpoints)
    dst = rng.permutation(src)
    keep = src // t.request.nics_per_gpu // 8 != dst // t.request.nics_per_gpu // 8
    src, dst = src[keep], dst[keep]
    r = route(t, src, dst, policy, t.graph.link_capacity_Bps, qps=2, rng=rng)
    fs = r.flows
    for f in range(fs.n_flows):
        links = fs.flow_link_indices[fs.flow_link_indptr[f] : fs.flow_link_indptr[f + 1]]
        c = int(r.flow_of_connection[f])
        assert g.link_src[links[0]] == src[c] and g.link_dst[links[-1]] == dst[c]
        assert np.array_equal(g.link_dst[links[:-1]], g.link_src[links[1:]])  # a walk
        assert links.size - 1 == r.switch_hops[c]


def test_forced_third_tier_warns_and_still_builds(capsys):
    t = ft(1024, 64, tiers=3)
    assert dict(t.switches_by_tier) == {"leaf": 32, "spine": 32, "core": 16}  # as asked
    (warning,) = t.warnings
    assert "2 tiers hold them on 48 switches" in warning
    assert "16 core switches carry no traffic" in warning
    assert ft(1024, 64).warnings == () and ft(4096, 64, tiers=3).warnings == ()
    args = ["bom", "--set", "cluster.n_gpus=1024", "--set", "fabric.tiers=3"]
    assert main([*args, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["warnings"] == [warning] and d["switches_by_tier"]["core"] == 16
    assert main(args) == 0
    assert f"warning: {warning}" in capsys.readouterr().out
    assert main(["bom", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == []
