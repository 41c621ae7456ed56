"""Rail-only, dragonfly+, 3D torus and hypercube: closed forms, infeasible designs, invariants.

Hand computations are written next to each golden value. Sources: rail-only, Wang et al.,
arXiv 2307.12169; dragonfly+, Shpiner et al., HiPINEB 2017; torus formulas and the k = 64
dragonfly+ sizes, hardware-and-cost-facts sections 6.3-6.5.
"""

from __future__ import annotations

import math
from collections import Counter

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_model.errors import InfeasibleDesignError
from fabric_model.plant.design import SWITCHLESS
from fabric_model.topology.base import Topology, TopologyRequest
from fabric_model.topology.dragonfly_plus import (
    build_dragonfly_plus,
    dragonfly_plus_shape,
    max_dragonfly_plus_endpoints,
)
from fabric_model.topology.hypercube import build_hypercube
from fabric_model.topology.ocs import build_ocs
from fabric_model.topology.rail_only import build_rail_only
from fabric_model.topology.torus3d import INTERNAL_LINK_CLASS, build_torus3d, torus_dims

BUILD = {
    "rail-only": build_rail_only,
    "dragonfly-plus": build_dragonfly_plus,
    "torus-3d": build_torus3d,
    "hypercube": build_hypercube,
    "ocs": build_ocs,
}
#: Most blocks an OCS fabric of the default request has (one port per block on each of its
#: 136-port OCSes).
OCS_MAX_BLOCKS = 136
RATE_GBPS = 400 / 8  # 400G link, GB/s one direction
H100 = {"gpus_per_node": 8, "nvlink_domain": 8}
GB200 = {"gpus_per_node": 4, "nvlink_domain": 72}


def build(family: str, n_gpus: int, **kw: object) -> Topology:
    return BUILD[family](TopologyRequest(n_gpus=n_gpus, **kw))  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------
# rail-only
# --------------------------------------------------------------------------------------


def test_rail_only_1024_h100_radix_64():
    # 1,024 H100 = 128 DGX domains of 8 -> 8 rails of 128 ports each. 128 > 64, so 2 tiers
    # per rail: 32 down / 32 up per leaf -> ceil(128/32) = 4 leaves and 4*32/64 = 2 spines
    # per rail; x 8 rails = 32 leaves + 16 spines, 1,024 NIC-leaf and 8*4*32 = 1,024
    # leaf-spine cables. Pairs on the same rail leaf (same 32-domain block): 4 leaves x
    # (256^2 - 32*8^2) = 253,952 of 1,024^2 - 128*8^2 = 1,040,384 ordered pairs.
    t = build("rail-only", 1024, radix=64)
    assert dict(t.switches_by_tier) == {"leaf": 32, "spine": 16}
    assert t.links_by_class == {"nic-leaf": 1024, "leaf-spine": 1024}
    assert t.params["n_rails"] == 8 and t.params["endpoints_per_rail"] == 128
    assert t.hop_histogram[1] == pytest.approx(253_952 / 1_040_384)
    assert t.max_switch_hops == 3
    assert t.bisection_GBps == pytest.approx(8 * 128 / 2 * RATE_GBPS)  # non-blocking rails


def test_rail_only_fits_one_switch_per_rail():
    # SN5600 at 400G (k = 128): 128 domains fit one rail switch -> 8 switches, 1 hop
    t = build("rail-only", 1024, radix=128)
    assert dict(t.switches_by_tier) == {"leaf": 8}
    assert t.hop_histogram == {1: 1.0}


def test_rail_only_three_tiers_per_rail():
    # 131,072 GPUs = 16,384 domains per rail > 2,048 (2-tier k=64): 3 tiers per rail,
    # k^3/4-style pods: 512 leaves, 16 pods x 32 spines, 32 planes x 8 cores per rail.
    t = build("rail-only", 131072, radix=64)
    assert dict(t.switches_by_tier) == {"leaf": 8 * 512, "spine": 8 * 512, "core": 8 * 256}
    assert t.max_switch_hops == 5


def test_rail_only_gb200_rails_follow_the_nvlink_domain():
    # NVL72 with 2 NICs per GPU: 144 rails; 10 domains of 72 with the last one holding 36 GPUs
    t = build("rail-only", 9 * 72 + 36, radix=64, nics_per_gpu=2, **GB200)
    assert t.params["n_rails"] == 144 and t.params["n_full_rails"] == 72
    assert t.links_by_class["nic-leaf"] == (9 * 72 + 36) * 2
    assert dict(t.switches_by_tier) == {"leaf": 144}


def test_rail_only_beyond_three_tiers_is_infeasible():
    # radix 8: 3 tiers hold 8*4*4 = 128 ports per rail = 128 domains = 1,024 H100 GPUs
    build("rail-only", 1024, radix=8)
    with pytest.raises(InfeasibleDesignError, match=r"cluster\.n_gpus <= 1,024") as e:
        build("rail-only", 1032, radix=8)
    assert e.value.key == "cluster.n_gpus"
    # forced 2 tiers at k = 64: 2,048 domains per rail = 16,384 GPUs
    with pytest.raises(InfeasibleDesignError, match=r"cluster\.n_gpus <= 16,384") as e:
        build("rail-only", 16392, radix=64, tiers=2)
    assert e.value.key == "fabric.tiers"


# --------------------------------------------------------------------------------------
# dragonfly+
# --------------------------------------------------------------------------------------


def test_dragonfly_plus_shape_radix_64():
    # facts 6.4: k = 64 -> (k/2)^2 = 1,024 hosts per group, k^2/4 + 1 = 1,025 groups
    s = dragonfly_plus_shape(64)
    assert s["hosts_per_group"] == 1024 and s["max_groups"] == 1025
    assert max_dragonfly_plus_endpoints(64) == 1024 * 1025


def test_dragonfly_plus_16384_endpoints():
    # 16,384 NICs / 1,024 per group = 16 groups of 32 leaves + 32 spines = 1,024 switches;
    # 1,024 global ports per group over 15 peers: floor(1024/15) = 68 per pair,
    # 68 * 16*15/2 = 8,160 global links, 1,024 - 68*15 = 4 ports left per group.
    t = build("dragonfly-plus", 16384, radix=64)
    assert t.params["n_groups"] == 16
    assert dict(t.switches_by_tier) == {"leaf": 512, "spine": 512}
    assert t.links_by_class == {"nic-leaf": 16384, "leaf-spine": 16384, "global": 8160}
    assert t.params["global_links_per_group_pair"] == 68
    assert t.params["unused_global_ports_per_group"] == 4
    # rail-optimized: same leaf = same 256-GPU SU, same group = same 1,024-GPU block
    total = 16384**2 - 16384 * 8
    assert t.hop_histogram[1] == pytest.approx(64 * (256**2 - 32 * 64) / total)
    same_group = 16 * (1024**2 - 128 * 64) / total
    assert t.hop_histogram[3] == pytest.approx(same_group - t.hop_histogram[1])
    assert t.max_switch_hops == 4 and t.params["valiant_max_hops"] == 7
    # bisection: 8 x 8 group pairs x 68 links = 4,352 < 8,192 = E/2
    assert t.bisection_GBps == pytest.approx(4352 * RATE_GBPS)


@pytest.mark.parametrize("g", [2, 3, 16, 47, 48, 513, 514])
def test_dragonfly_plus_global_links_follow_the_floor_rule(g):
    # m = floor(G / (g-1)) links per group pair. Note: not monotone in g once g exceeds
    # about 1.5 sqrt(G) (47 -> 48 groups: 23,782 -> 23,688 links; 513 -> 514 halves them).
    t = build("dragonfly-plus", g * 1024, radix=64, rail_optimized=False)
    m = 1024 // (g - 1)
    assert t.params["n_groups"] == g
    assert t.links_by_class["global"] == m * g * (g - 1) // 2


def test_dragonfly_plus_single_group_is_a_leaf_spine():
    # 1,024 NICs at k = 128: 16 leaves of 64 down / 64 up; 1,024 uplinks need
    # ceil(1024/64) = 16 spines (a divisor of 64): 4 parallel links from every leaf.
    t = build("dragonfly-plus", 1024, radix=128)
    assert t.params["n_groups"] == 1
    assert dict(t.switches_by_tier) == {"leaf": 16, "spine": 16}
    assert t.links_by_class["global"] == 0
    assert any("degenerates to a 2-tier leaf/spine" in n for n in t.notes)


def test_dragonfly_plus_over_max_groups_is_infeasible():
    # radix 8: 4 leaves x 4 down = 16 NICs and 4 x 4 = 16 global ports per group, 17 groups
    with pytest.raises(InfeasibleDesignError, match=r"at most 272 NIC ports") as e:
        build("dragonfly-plus", 280, radix=8)
    assert e.value.key == "cluster.n_gpus"
    # k = 64 with 2 NICs per GPU: 1,049,600 NIC ports = 524,800 GPUs
    with pytest.raises(InfeasibleDesignError, match=r"cluster\.n_gpus <= 524,800"):
        build("dragonfly-plus", 524_808, radix=64, nics_per_gpu=2)


# --------------------------------------------------------------------------------------
# 3D torus
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "dims"),
    [
        (1, (1, 1, 1)),
        (7, (7, 1, 1)),
        (8, (2, 2, 2)),
        (12, (3, 2, 2)),
        (64, (4, 4, 4)),
        (128, (8, 4, 4)),
        (1000, (10, 10, 10)),
        (16384, (32, 32, 16)),
    ],
)
def test_torus_dims(n, dims):
    assert torus_dims(n) == dims


@pytest.mark.parametrize(("n_nodes", "dims"), [(64, (4, 4, 4)), (128, (8, 4, 4))])
def test_torus_closed_forms(n_nodes, dims):
    # H100 domains of 8 GPUs: P = 8 ports, c = 8 // 6 = 1 cable per direction, and the
    # 8 - 6 = 2 leftover ports one more cable per direction in x (every NIC wired)
    t = build("torus-3d", n_nodes * 8)
    x, y, _ = dims
    assert t.params["dims"] == dims and t.tiers == 0 and dict(t.switches_by_tier) == {}
    assert t.params["cables_per_direction_by_dim"] == (2, 1, 1)
    assert t.n_links == 4 * n_nodes  # N (c_x + c_y + c_z)
    assert t.params["unused_ports_per_node"] == 0
    assert t.max_switch_hops == sum(d // 2 for d in dims)
    cut = min(2 * n_nodes * 2 / x, 2 * n_nodes / y)  # min over dimensions of 2 N c_i / L_i
    assert t.bisection_GBps == pytest.approx(cut * RATE_GBPS)
    # mean ring distance over all positions is L/4 for even L; excluding the node itself:
    assert t.mean_switch_hops == pytest.approx(sum(d / 4 for d in dims) * n_nodes / (n_nodes - 1))


def test_torus_size_two_dimension_and_gb200_ports():
    # 2x2x2: each neighbour pair shares 2 c_i cables, N c_i per dimension; cut = N min c_i
    t = build("torus-3d", 64)
    assert t.links_by_class == {"torus-x": 16, "torus-y": 8, "torus-z": 8}
    assert t.bisection_GBps == pytest.approx(8 * RATE_GBPS)
    # P = 16 (2 NICs per GPU): c = 2, 4 leftover ports -> (3, 3, 2), all 16 wired
    t16 = build("torus-3d", 512, nics_per_gpu=2)
    assert t16.params["cables_per_direction_by_dim"] == (3, 3, 2)
    assert t16.params["unused_ports_per_node"] == 0
    # NVL72: P = 72 ports, a multiple of 6: c = 12 per direction, the degree-6 closed form;
    # 27 domains = 3x3x3 -> 3 * 27 * 12 cables
    g = build("torus-3d", 27 * 72, **GB200)
    assert g.params["cables_per_direction"] == 12 and g.n_links == 972
    assert g.params["dims"] == (3, 3, 3)


def test_torus_ring_for_prime_node_count():
    t = build("torus-3d", 7 * 8)
    # one active dimension: c = 1 and the 6 leftover ports 3 more cables per direction
    assert t.params["dims"] == (7, 1, 1) and t.links_by_class == {"torus-x": 28}
    assert any("ring" in n for n in t.notes)


def test_torus_infeasible_designs():
    with pytest.raises(InfeasibleDesignError, match=r"Nearest valid: 1,024 or 1,032") as e:
        build("torus-3d", 1028)
    assert e.value.key == "cluster.n_gpus"
    with pytest.raises(InfeasibleDesignError, match=r"cluster\.nics_per_gpu >= 2") as e:
        build("torus-3d", 64, gpus_per_node=4, nvlink_domain=4)
    assert e.value.key == "cluster.nics_per_gpu"


# --------------------------------------------------------------------------------------
# hypercube
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("d", "nics"), [(1, 1), (3, 1), (7, 1), (8, 1), (11, 2), (14, 2)])
def test_hypercube_closed_forms(d, nics):
    n = 2**d
    t = build("hypercube", n * 8, nics_per_gpu=nics)
    c = 8 * nics // d
    assert t.params["dimensions"] == d and t.params["cables_per_dimension"] == c
    assert t.n_links == n // 2 * d * c
    assert t.max_switch_hops == d
    # Hamming distance: sum_h h C(d,h) = d 2^(d-1) over the N - 1 other domains
    assert t.mean_switch_hops == pytest.approx(d / 2 * n / (n - 1))
    assert t.hop_histogram[1] == pytest.approx(d / (n - 1))
    assert t.bisection_GBps == pytest.approx(n / 2 * c * RATE_GBPS)


def test_hypercube_infeasible_designs():
    with pytest.raises(InfeasibleDesignError, match=r"Nearest valid: 64 or 128") as e:
        build("hypercube", 12 * 8)  # 12 domains
    assert e.value.key == "cluster.n_gpus"
    with pytest.raises(InfeasibleDesignError, match=r"Nearest valid: 1,024 or 2,048"):
        build("hypercube", 1028)
    # 512 domains need 9 ports; 8 per domain allow 2^8 = 256 domains = 2,048 GPUs
    with pytest.raises(InfeasibleDesignError, match=r"2\^8 = 256 nodes \(2,048 GPUs\)") as e:
        build("hypercube", 4096)
    assert e.value.key == "cluster.nics_per_gpu"
    assert "cluster.nvlink_domain" in str(e.value)


# --------------------------------------------------------------------------------------
# hop histograms against shortest paths on the graph (small designs)
# --------------------------------------------------------------------------------------


def _oracle_histogram(t: Topology) -> dict[int, float]:
    """Hops of every ordered GPU pair in different domains, by BFS on the fabric graph."""
    req, g = t.request, t.graph
    n, nics, dom, gpn = req.n_gpus, req.nics_per_gpu, req.nvlink_domain, req.gpus_per_node
    cable = g.link_class >= 0
    und = nx.Graph()
    und.add_edges_from(zip(g.link_src[cable].tolist(), g.link_dst[cable].tolist(), strict=True))
    gpu = np.arange(n)
    counts: Counter[int] = Counter()
    if t.family in SWITCHLESS:
        fwd = req.n_endpoints + gpu // dom
        for s in np.unique(fwd).tolist():
            dist = nx.single_source_shortest_path_length(und, s)
            hops = np.array([dist[int(f)] for f in fwd])
            counts.update(Counter((hops[hops > 0]).tolist() * dom))
        return {h: c / sum(counts.values()) for h, c in sorted(counts.items())}
    # the modelled path: rail-only and rail-optimized leave from i's peer on j's rail (PXN,
    # within the domain / the server); ToR-filled leaves from i's own first NIC
    rail_unit = dom if t.family == "rail-only" else gpn if req.rail_optimized else 1
    for j in range(n):
        dist = nx.single_source_shortest_path_length(und, j * nics)
        src = (gpu // rail_unit) * rail_unit + j % rail_unit  # i's peer on j's rail
        other = gpu // dom != j // dom
        hops = np.array([dist[int(e)] - 1 for e in src[other] * nics])
        counts.update(hops.tolist())
    return {h: c / sum(counts.values()) for h, c in sorted(counts.items())}


@pytest.mark.parametrize(
    ("family", "n_gpus", "kw"),
    [
        ("rail-only", 256, {"radix": 8}),  # 32 domains per rail, 2 tiers
        ("rail-only", 320, {"radix": 8}),  # 40 domains per rail, 3 tiers
        ("rail-only", 432, {"radix": 4, "nics_per_gpu": 2, **GB200}),  # 6 domains, 2 tiers
        ("dragonfly-plus", 128, {"radix": 8}),  # 8 groups, SUs straddle groups
        ("dragonfly-plus", 192, {"radix": 8, "rail_optimized": False}),
        ("dragonfly-plus", 256, {"radix": 16, "nics_per_gpu": 2}),
        ("torus-3d", 8 * 60, {}),
        ("torus-3d", 8 * 16, {}),
        ("hypercube", 8 * 32, {}),
    ],
)
def test_hop_histogram_matches_shortest_paths(family, n_gpus, kw):
    t = build(family, n_gpus, **kw)
    oracle = _oracle_histogram(t)
    assert oracle.keys() == t.hop_histogram.keys()
    for h, f in oracle.items():
        assert t.hop_histogram[h] == pytest.approx(f)


# --------------------------------------------------------------------------------------
# invariants (hypothesis)
# --------------------------------------------------------------------------------------


@st.composite
def designs(draw: st.DrawFn, max_gpus: int = 16384) -> tuple[str, dict[str, object], int, int]:
    """A family, its request keywords and two GPU counts ``n < n_bigger`` (whole domains)."""
    family = draw(st.sampled_from(sorted(BUILD)))
    shape = draw(st.sampled_from([H100, GB200]))
    nics = draw(st.sampled_from([1, 2]))
    dom = shape["nvlink_domain"]
    if family == "hypercube":  # 2^d domains, d <= ports per domain
        top = min(dom * nics, int(math.log2(max_gpus // dom)))
        d = draw(st.integers(0, top - 1))
        n, n_bigger = dom * 2**d, dom * 2 ** (d + 1)
    else:
        top = max_gpus // dom if family != "ocs" else min(max_gpus // dom, OCS_MAX_BLOCKS)
        units = draw(st.integers(1, top - 1))
        n, n_bigger = dom * units, dom * draw(st.integers(units + 1, top))
    kw = {
        **shape,
        "nics_per_gpu": nics,
        "radix": draw(st.sampled_from([64, 128, 144])),
        "oversubscription": draw(st.sampled_from([1.0, 3.0])),
        "rail_optimized": draw(st.booleans()),
    }
    return family, kw, n, n_bigger


def _check_invariants(t: Topology) -> None:
    counts = [*t.switches_by_tier.values(), *t.links_by_class.values(), t.max_switch_hops]
    assert all(isinstance(c, int) and c >= 0 for c in counts)
    assert t.max_switch_hops >= t.mean_switch_hops >= 0
    if t.hop_histogram:
        assert sum(t.hop_histogram.values()) == pytest.approx(1)
        assert max(t.hop_histogram) == t.max_switch_hops
    else:
        assert t.request.n_gpus <= t.request.nvlink_domain  # one domain only
    assert 0 <= t.bisection_GBps <= t.full_bisection_GBps + 1e-6
    for lc in t.links:  # switch ports of each class add up to its cables at each switch end
        assert {g.tier for g in lc.port_groups} <= set(lc.ends)
        for tier in set(lc.ends) - {"nic"}:
            ports = sum(g.n_ports for g in lc.port_groups if g.tier == tier)
            assert ports == lc.n_links * lc.ends.count(tier)
        assert lc.port_groups or lc.n_links == 0 or lc.ends == ("nic", "nic")
    if t.family in ("rail-only", "dragonfly-plus"):
        assert t.links_by_class["nic-leaf"] == t.n_endpoints  # every NIC is cabled


def _check_graph(t: Topology) -> None:
    g = t.graph
    # switchless and OCS graphs join each endpoint to its domain's (block's) node
    internal = int(t.params.get("n_internal_links", 0))
    assert internal == (t.n_endpoints if t.family in (*SWITCHLESS, "ocs") else 0)
    # an OCS fabric's blocks' own cables (a pod's, a cube's) are counted, not graph links
    in_graph = np.array(
        [lc.n_links if t.family != "ocs" or lc.name == "block-ocs" else 0 for lc in t.links],
        dtype=np.int64,
    )
    # every cable is 2 directed links; + 1 internal link per endpoint (2 directed)
    assert g.n_links == 2 * (int(in_graph.sum()) + internal)
    assert int((g.link_class == INTERNAL_LINK_CLASS).sum()) == 2 * internal
    per_class = np.bincount(g.link_class[g.link_class >= 0], minlength=len(t.links))
    assert (per_class == 2 * in_graph).all()
    cable = g.link_class >= 0
    degree = np.bincount(g.link_src[cable], minlength=g.n_nodes)[t.n_endpoints :]
    if t.family == "ocs":  # blocks, then the OCSes: no block over its uplinks, no OCS over ports
        p = t.params
        built = int(p["n_blocks_built"])
        assert g.n_nodes == t.n_endpoints + built + t.switches_by_tier["ocs"]
        assert degree[:built].max(initial=0) <= p["uplinks_per_block"]
        per_port = int(p["fibers_per_uplink"])
        assert degree[built:].max(initial=0) * per_port <= p["ocs_ports"]
        return
    assert g.n_nodes == t.n_endpoints + (t.params["n_nodes"] if internal else t.n_switches)
    limit = t.params["ports_per_node"] if internal else t.request.radix
    assert degree.max(initial=0) <= limit  # no switch (domain) over its ports


@settings(max_examples=60, deadline=None)
@given(design=designs())
def test_invariants_and_monotone_counts(design):
    family, kw, n_small, n_big = design
    t = build(family, n_small, **kw)
    _check_invariants(t)
    _check_graph(t)
    big = build(family, n_big, **kw)
    _check_invariants(big)
    if family == "torus-3d":
        return  # not monotone: a prime node count is a ring (fewer cables than a cube)
    assert big.n_switches >= t.n_switches
    for tier, count in t.switches_by_tier.items():
        assert big.switches_by_tier.get(tier, 0) >= count
    for name, count in t.links_by_class.items():
        if (
            name == "global"
            and big.params["n_groups"] ** 2 > big.params["global_ports_per_group"] + 1
        ):
            continue  # the floor rule is only monotone up to sqrt(G) + 1 groups
        assert big.links_by_class.get(name, 0) >= count


@settings(max_examples=25, deadline=None)
@given(design=designs(max_gpus=576))
def test_every_gpu_is_connected(design):
    family, kw, n_gpus, _ = design
    t = build(family, n_gpus, **kw)
    g = t.graph.to_networkx().to_undirected(as_view=True)
    n_e = t.n_endpoints
    if family == "rail-only":  # rails meet only through NVLink: add each domain's NVLink
        g = nx.Graph(g)
        dom = np.arange(n_e) // (t.request.nics_per_gpu * t.request.nvlink_domain)
        first = np.searchsorted(dom, dom)
        g.add_edges_from(zip(first.tolist(), range(n_e), strict=True))
    assert set(range(n_e)) <= nx.node_connected_component(g, 0)


def test_rail_only_rails_are_separate_fabrics():
    t = build("rail-only", 256, radix=8)
    und = t.graph.to_networkx().to_undirected()
    assert nx.number_connected_components(und) == t.params["n_rails"]


def test_partial_last_domain_rail_only_and_dragonfly():
    for family in ("rail-only", "dragonfly-plus"):
        t = build(family, 9 * 72 + 20, radix=64, **GB200)
        _check_invariants(t)
        _check_graph(t)


# --------------------------------------------------------------------------------------
# scale
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("family", "kw"),
    [
        ("rail-only", {"radix": 64}),
        ("dragonfly-plus", {"radix": 64}),
        ("torus-3d", {}),
        ("hypercube", {"nics_per_gpu": 2}),  # 14 dimensions need 14 of 16 ports
    ],
)
def test_131072_gpus_build(family, kw):
    t = build(family, 131072, **kw)
    _check_invariants(t)
    assert t.graph.n_links == 2 * (t.n_links + (t.n_endpoints if family in SWITCHLESS else 0))
    assert math.isfinite(t.bisection_GBps) and t.bisection_GBps > 0
