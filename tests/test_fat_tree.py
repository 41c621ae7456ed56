"""Fat-tree counts: closed forms, vendor reference designs (golden), and invariants."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_model.errors import InfeasibleDesignError
from fabric_model.topology import TopologyRequest
from fabric_model.topology.fat_tree import balanced_count, build_fat_tree, leaf_ports, max_endpoints


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
# [S49] DGX B300 XDR SuperPOD, Q3400 (k=144 at 800G), SU = 72 nodes = 576 GPUs.
B300_XDR_RA = [
    (576, {"leaf": 8, "spine": 4}),
    (1152, {"leaf": 16, "spine": 8}),
    (2304, {"leaf": 32, "spine": 18}),
    (4608, {"leaf": 64, "spine": 36}),
    (10368, {"leaf": 144, "spine": 72}),
]


@pytest.mark.parametrize(("n_gpus", "switches"), B200_RA)
def test_golden_dgx_b200_superpod(n_gpus, switches):
    t = ft(n_gpus, 64, link_gbps=400)
    assert dict(t.switches_by_tier) == switches
    assert all(n == n_gpus for n in t.links_by_class.values())  # "cables per tier = GPUs"


@pytest.mark.parametrize(("n_gpus", "switches"), B300_XDR_RA)
def test_golden_dgx_b300_xdr_superpod(n_gpus, switches):
    t = ft(n_gpus, 144, link_gbps=800)
    assert dict(t.switches_by_tier) == switches


def test_balanced_spine_count_is_a_divisor():
    assert balanced_count(16, 72) == 18 and balanced_count(32, 72) == 36
    assert balanced_count(8, 32) == 8 and balanced_count(3, 32) == 4


def test_infeasible_designs_name_the_key_and_maximum():
    with pytest.raises(InfeasibleDesignError, match=r"cluster\.n_gpus: .*at most 65,536") as e:
        ft(131072, 64)
    assert e.value.key == "cluster.n_gpus"
    with pytest.raises(InfeasibleDesignError, match=r"fabric\.tiers: .*2 tiers.*at most 2,048"):
        ft(4096, 64, tiers=2)
    with pytest.raises(InfeasibleDesignError, match=r"fabric\.tiers"):
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
        assert nodes * 8 * nics > max_endpoints(radix, 2, r)
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
    bigger = ft((nodes + 1) * 8, **req) if (nodes + 1) * 8 * nics <= 2000 else None
    if bigger is not None and bigger.tiers == t.tiers:
        assert bigger.n_switches >= t.n_switches and bigger.n_links >= t.n_links
