"""Routers of every family: walks, hop counts, line rate, classic results, bundles, scale.

Sources of the expected values: the adversarial dragonfly result (minimal routing collapses
to ``m / H`` of line rate on a group-to-group shift, Valiant keeps about half) is Kim,
Dally, Scott, Abts, "Technology-Driven, Highly-Scalable Dragonfly Topology", ISCA 2008,
section 4 (and Shpiner et al., HiPINEB 2017, for dragonfly+); hop definitions are the
topology builders' (:mod:`fabric_model.topology`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import numpy as np
import pytest

from fabric_model.errors import InfeasibleDesignError
from fabric_model.flows import FlowSet, solve_maxmin
from fabric_model.plant.design import SWITCHLESS
from fabric_model.routing import POLICIES, RoutedFlows, degraded_capacities, route
from fabric_model.routing import dragonfly_plus as df_router
from fabric_model.routing import hypercube as hc_router
from fabric_model.routing import rail_only as ro_router
from fabric_model.routing import torus3d as torus_router
from fabric_model.routing.fat_tree import route_fat_tree
from fabric_model.topology import Topology, TopologyRequest, build_topology_from_request
from fabric_model.topology.fat_tree import build_fat_tree
from fabric_model.topology.rail_only import _rail_request
from fabric_model.units import gbps_to_Bps

LINE_Bps = gbps_to_Bps(400)
GB200 = {"gpus_per_node": 4, "nvlink_domain": 72}
MEMBERS: dict[str, Callable[[Topology], tuple[np.ndarray, np.ndarray]]] = {
    "rail-only": ro_router.bundle_members,
    "dragonfly-plus": df_router.bundle_members,
    "torus-3d": torus_router.bundle_members,
    "hypercube": hc_router.bundle_members,
}

#: Small designs per family (each a different shape: tiers, partial rails, L = 2 rings, c > 1).
SMALL = {
    "rail-only": [
        (256, {"radix": 8}),  # 32 domains per rail, 2 tiers
        (320, {"radix": 8}),  # 40 domains per rail, 3 tiers
        (432, {"radix": 4, "nics_per_gpu": 2, **GB200}),  # 6 domains per rail, 24 rails
        (9 * 72 + 20, {"radix": 4, **GB200}),  # partial last domain: rails of 2 lengths
    ],
    "dragonfly-plus": [
        (128, {"radix": 8}),  # 8 groups, m = 2 < up = 4, SUs straddle groups
        (192, {"radix": 8, "rail_optimized": False}),  # 12 groups, m = 1
        (80, {"radix": 8, "rail_optimized": False}),  # 5 groups, m = up = 4
        (256, {"radix": 16, "nics_per_gpu": 2}),  # 8 groups, m = 9 > up = 8
        (24, {"radix": 8, "rail_optimized": False}),  # 2 groups: m = 16 = 4 up
        (8, {"radix": 8, "rail_optimized": False, "gpus_per_node": 4, "nvlink_domain": 4}),
        # ^ one group: a leaf/spine of 2 spines, 2 parallel cables per leaf-spine pair
    ],
    "torus-3d": [
        (8 * 60, {}),  # 5 x 4 x 3, ties at distance 2 in Y
        (8 * 16, {}),  # 4 x 2 x 2: size-2 rings (2 parallel cables)
        (8 * 12, {"nics_per_gpu": 2}),  # 3 x 2 x 2, c = 2
        (8 * 7, {}),  # a ring of 7
    ],
    "hypercube": [
        (8 * 32, {}),  # d = 5, c = 1
        (8 * 16, {"nics_per_gpu": 2}),  # d = 4, c = 4
    ],
}


def build(family: str, n_gpus: int, **kw: object) -> Topology:
    return build_topology_from_request(family, TopologyRequest(n_gpus=n_gpus, **kw))  # type: ignore[arg-type]


def small_cases(policies: Callable[[str], tuple[str, ...]] = lambda f: POLICIES[f]):
    return [
        pytest.param(family, n, kw, policy, id=f"{family}-{n}-{i}-{policy}")
        for family, designs in SMALL.items()
        for i, (n, kw) in enumerate(designs)
        for policy in policies(family)
    ]


def random_pattern(
    topo: Topology, rng: np.random.Generator, n: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """A random permutation of the endpoints (within each rail for rail-only)."""
    e = np.arange(topo.n_endpoints, dtype=np.int64)
    if topo.family == "rail-only":
        rail, _ = ro_router.rail_and_port(topo, e)
        dst = np.empty_like(e)
        for r in np.unique(rail):
            sel = np.flatnonzero(rail == r)
            dst[sel] = e[sel][rng.permutation(sel.size)]
    else:
        dst = rng.permutation(e)
    if n is not None and n < e.size:
        keep = rng.choice(e.size, n, replace=False)
        return e[keep], dst[keep]
    return e, dst


def check_routed(topo: Topology, r: RoutedFlows, src: np.ndarray) -> None:
    """Shape invariants every router result must meet."""
    n_links = r.flows.n_links
    assert r.link_capacity_Bps.shape == (n_links,) and r.link_class.shape == (n_links,)
    assert np.all(r.link_capacity_Bps > 0)
    assert r.link_class.min() >= 0 and r.link_class.max() < len(r.class_names)
    assert r.flow_of_connection.shape == (r.flows.n_flows,) == r.flow_fraction.shape
    per_conn = np.bincount(r.flow_of_connection, weights=r.flow_fraction, minlength=src.size)
    assert per_conn == pytest.approx(np.ones(src.size))
    assert r.switch_hops.shape == src.shape and r.n_connections == src.size
    cables = topo.graph.n_links
    if n_links > cables:  # a bundle space: the graph's links keep their capacities
        assert r.link_capacity_Bps.dtype == np.float64


# --------------------------------------------------------------------------------------
# walks: every flow's links join its source endpoint to its destination endpoint
# --------------------------------------------------------------------------------------


class Ends:
    """Tail and head nodes of every link of a routed link space (bundles via their members)."""

    def __init__(self, topo: Topology, r: RoutedFlows) -> None:
        g = topo.graph
        self.n = g.n_links
        self.src, self.dst = g.link_src, g.link_dst
        self.members: tuple[np.ndarray, np.ndarray] | None = None
        if r.flows.n_links > g.n_links:
            self.members = MEMBERS[topo.family](topo)
            indptr, links = self.members
            assert indptr.size - 1 == r.flows.n_links - g.n_links
            # the capacities are the members' sums, exactly (empty bundles stand at 1 B/s)
            owner = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
            want = np.bincount(owner, weights=r.link_capacity_Bps[links], minlength=indptr.size - 1)
            got = r.link_capacity_Bps[g.n_links :]
            assert np.array_equal(got[want > 0], want[want > 0])

    def __call__(self, link: int) -> tuple[set[int], set[int]]:
        if link < self.n:
            return {int(self.src[link])}, {int(self.dst[link])}
        assert self.members is not None
        indptr, links = self.members
        b = link - self.n
        m = links[indptr[b] : indptr[b + 1]]
        assert m.size > 0, "a flow crosses an empty bundle"
        return set(self.src[m].tolist()), set(self.dst[m].tolist())


def assert_stage_walk(ends: Ends, ids: np.ndarray, w: np.ndarray, s: int, d: int) -> int:
    """Split a flow's entries into stages of total weight 1 and check they chain s -> d.

    Returns the number of stages (switches crossed = stages - 1).
    """
    stages: list[list[int]] = []
    cur: list[int] = []
    acc = 0.0
    for link, wi in zip(ids.tolist(), w.tolist(), strict=True):
        cur.append(link)
        acc += wi
        if abs(acc - 1.0) < 1e-9:
            stages.append(cur)
            cur, acc = [], 0.0
    assert not cur, "weights do not add up to whole stages"
    tails = [set().union(*(ends(x)[0] for x in st)) for st in stages]
    heads = [set().union(*(ends(x)[1] for x in st)) for st in stages]
    assert tails[0] == {s} and heads[-1] == {d}
    for k in range(len(stages) - 1):
        for x in stages[k + 1]:
            assert ends(x)[0] & heads[k], f"stage {k + 1} does not continue stage {k}"
        for x in stages[k]:
            assert ends(x)[1] & tails[k + 1], f"stage {k} dead-ends"
    return len(stages)


def assert_unit_flow(
    ends: Ends, ids: np.ndarray, w: np.ndarray, s: int, d: int, n_endpoints: int
) -> float:
    """Flow conservation of a (possibly split) flow on single-ended links; returns the
    weight on domain-to-domain links (= links crossed, for a minimal flow)."""
    net: defaultdict[int, float] = defaultdict(float)
    between = 0.0
    for link, wi in zip(ids.tolist(), w.tolist(), strict=True):
        (t,), (h,) = ends(link)  # a trunk's cables share both ends
        net[t] -= wi
        net[h] += wi
        if t >= n_endpoints and h >= n_endpoints:
            between += wi
    want = defaultdict(float, {s: -1.0, d: 1.0} if s != d else {})
    for node in set(net) | {s, d}:
        assert net[node] == pytest.approx(want[node], abs=1e-9)
    return between


@pytest.mark.parametrize(("family", "n_gpus", "kw", "policy"), small_cases())
def test_every_flow_is_a_walk_with_the_right_hop_count(family, n_gpus, kw, policy):
    t = build(family, n_gpus, **kw)
    rng = np.random.default_rng(7)
    src, dst = random_pattern(t, rng, n=200)
    r = route(t, src, dst, policy, qps=2, rng=rng)
    check_routed(t, r, src)
    ends = Ends(t, r)
    fs = r.flows
    for f in range(fs.n_flows):
        lo, hi = fs.flow_link_indptr[f], fs.flow_link_indptr[f + 1]
        ids = fs.flow_link_indices[lo:hi].astype(np.int64)
        w = fs.flow_link_weights[lo:hi]
        c = int(r.flow_of_connection[f])
        s, d = int(src[c]), int(dst[c])
        hops = int(r.switch_hops[c])
        if family in SWITCHLESS:
            between = assert_unit_flow(ends, ids, w, s, d, t.n_endpoints)
            assert between == pytest.approx(hops)  # minimal: every unit crosses `hops` links
        else:
            assert assert_stage_walk(ends, ids, w, s, d) - 1 == hops


# --------------------------------------------------------------------------------------
# hop counts equal the topology's hop histogram
# --------------------------------------------------------------------------------------


def all_pairs(t: Topology) -> tuple[np.ndarray, np.ndarray]:
    """Every ordered GPU pair in different NVLink domains, on the modelled NICs.

    As the topology's histogram: rail-matched (PXN) for rail-only and rail-optimized
    fabrics (i's peer on j's rail sends), else each GPU's first NIC.
    """
    req = t.request
    n, nics, dom, gpn = req.n_gpus, req.nics_per_gpu, req.nvlink_domain, req.gpus_per_node
    i, j = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    other = i // dom != j // dom
    i, j = i[other], j[other]
    if t.family == "rail-only":  # a partial last domain lacks some rails: use one it has
        rail = j % dom
        last = n - (n - 1) // dom * dom
        short = (i // dom) * dom + rail >= n
        rail = np.where(short, rail % last, rail)
        return ((i // dom) * dom + rail) * nics, ((j // dom) * dom + rail) * nics
    if t.family in SWITCHLESS or not req.rail_optimized:
        unit = 1
    else:
        unit = gpn
    peer = (i // unit) * unit + j % unit if unit > 1 else i
    return peer * nics, j * nics


@pytest.mark.parametrize(
    ("family", "n_gpus", "kw", "policy"),
    small_cases(lambda f: tuple(p for p in POLICIES[f] if p not in ("valiant", "ugal"))),
)
def test_minimal_hops_match_the_topology_histogram(family, n_gpus, kw, policy):
    t = build(family, n_gpus, **kw)
    src, dst = all_pairs(t)
    r = route(t, src, dst, policy, rng=np.random.default_rng(0))
    counts = np.bincount(r.switch_hops)
    hist = {h: c / src.size for h, c in enumerate(counts) if c}
    assert hist.keys() == t.hop_histogram.keys()
    for h, frac in hist.items():
        assert frac == pytest.approx(t.hop_histogram[h])


@pytest.mark.parametrize(("n_gpus", "kw"), SMALL["dragonfly-plus"])
@pytest.mark.parametrize("policy", ["valiant", "ugal"])
def test_valiant_hops_stay_within_the_builder_maximum(n_gpus, kw, policy):
    t = build("dragonfly-plus", n_gpus, **kw)
    src, dst = all_pairs(t)
    r = route(t, src, dst, policy, rng=np.random.default_rng(0))
    minimal = route(t, src, dst, "minimal").switch_hops
    assert r.switch_hops.max() <= t.params["valiant_max_hops"]
    assert set(np.unique(r.switch_hops).tolist()) <= {1, 3, 4, 5, 7}
    intra = minimal <= 3
    assert np.array_equal(r.switch_hops[intra], minimal[intra])  # intra-group stays minimal
    if t.params["n_groups"] >= 3 and policy == "valiant":
        assert np.all(r.switch_hops[~intra] >= 5)


# --------------------------------------------------------------------------------------
# a lone connection gets line rate
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("family", "n_gpus", "kw", "policy"), small_cases())
def test_a_single_connection_gets_line_rate(family, n_gpus, kw, policy):
    t = build(family, n_gpus, **kw)
    rng = np.random.default_rng(3)
    src, dst = random_pattern(t, rng)
    dom = t.request.nvlink_domain * t.request.nics_per_gpu
    far = np.flatnonzero(src // dom != dst // dom)[:20]
    for c in far.tolist():
        r = route(t, src[c : c + 1], dst[c : c + 1], policy, rng=rng)
        rate = float(solve_maxmin(r.flows, r.link_capacity_Bps).rate_Bps.sum())
        if family not in SWITCHLESS or policy == "ecmp":
            assert rate == pytest.approx(LINE_Bps)
        else:
            # the endpoint's internal link stands for all of its domain's ports, and a hop is
            # a trunk of c (2c on a size-2 ring) cables, or several trunks (adaptive)
            assert rate >= LINE_Bps * (1 - 1e-9)
            per_hop = t.params.get(
                "cables_per_direction_by_dim", (t.params.get("cables_per_dimension"),)
            )
            one_cable_hops = (
                max(per_hop) == 1 and min(d for d in t.params.get("dims", (3,)) if d > 1) > 2
            )
            if policy == "dor" and one_cable_hops:
                assert rate == pytest.approx(LINE_Bps)


def test_switchless_adaptive_line_rate_along_one_dimension():
    t = build("torus-3d", 8 * 60)  # 5 x 4 x 3; c = (2, 1, 1): the 2 leftover ports go to x
    r = route(t, np.array([0]), np.array([8]), "adaptive")  # one X step: a 2-cable trunk
    assert solve_maxmin(r.flows, r.link_capacity_Bps).rate_Bps[0] == pytest.approx(2 * LINE_Bps)
    r = route(t, np.array([0]), np.array([8 * 5]), "adaptive")  # one Y step
    assert solve_maxmin(r.flows, r.link_capacity_Bps).rate_Bps[0] == pytest.approx(LINE_Bps)
    h = build("hypercube", 8 * 32)
    r = route(h, np.array([0]), np.array([8 * 4]), "adaptive")  # one bit
    assert solve_maxmin(r.flows, r.link_capacity_Bps).rate_Bps[0] == pytest.approx(LINE_Bps)


# --------------------------------------------------------------------------------------
# classic results
# --------------------------------------------------------------------------------------


def group_shift(t: Topology) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Every endpoint of group x sends to the same endpoint of group x + 1 (ToR-filled)."""
    hosts, m = t.params["hosts_per_group"], t.params["global_links_per_group_pair"]
    src = np.arange(t.n_endpoints, dtype=np.int64)
    return src, (src + hosts) % t.n_endpoints, hosts, m


def test_dragonfly_adversarial_minimal_collapses_valiant_holds_half():
    # radix 32: 256 hosts and 256 global ports per group; 33 groups -> m = 8 cables per pair
    t = build("dragonfly-plus", 256 * 33, radix=32, rail_optimized=False)
    src, dst, hosts, m = group_shift(t)
    g = t.params["n_groups"]
    assert (hosts, m, g) == (256, 8, 33)
    rates = {}
    for policy in POLICIES["dragonfly-plus"]:
        r = route(t, src, dst, policy, rng=np.random.default_rng(11))
        rates[policy] = solve_maxmin(r.flows, r.link_capacity_Bps).rate_Bps / LINE_Bps
    # minimal: the m global cables of a group pair carry all H connections: m / H = 1/32
    assert rates["minimal"] == pytest.approx(np.full(src.size, m / hosts))
    assert rates["adaptive"] == pytest.approx(np.full(src.size, m / hosts))
    assert rates["ecmp"].mean() == pytest.approx(m / hosts)
    # Valiant: a global pair carries ~2H/(g-2) connections on m cables, i.e.
    # m (g - 2) / (2 H) = 0.484 of line rate if the intermediate groups were drawn perfectly
    # evenly; drawn per connection they are not, and the mean is 0.43 over seeds
    ideal = m * (g - 2) / (2 * hosts)
    assert 0.8 * ideal <= rates["valiant"].mean() <= ideal
    assert rates["valiant"].min() >= 8 * m / hosts
    assert np.quantile(rates["valiant"], 0.1) >= 10 * m / hosts
    # UGAL keeps m connections per pair minimal and sends the excess via Valiant
    assert rates["ugal"].mean() >= rates["valiant"].mean()
    assert rates["ugal"].min() >= 8 * m / hosts


def test_dragonfly_valiant_with_two_cable_bundles_pays_for_the_random_groups():
    # m = 2 (radix 16, 33 groups): the same pattern, but a group pair's 2 cables (and a
    # leaf's 2-spine parts) see ~4 connections on average and up to ~10, so the draw of the
    # intermediate groups costs more: about 0.34 of line rate instead of 0.48
    t = build("dragonfly-plus", 64 * 33, radix=16, rail_optimized=False)
    src, dst, hosts, m = group_shift(t)
    assert (hosts, m) == (64, 2)
    r = route(t, src, dst, "valiant", rng=np.random.default_rng(0))
    rates = solve_maxmin(r.flows, r.link_capacity_Bps).rate_Bps / LINE_Bps
    assert 0.3 <= rates.mean() <= m * 31 / (2 * hosts)
    assert rates.min() >= 4 * m / hosts


def test_ugal_stays_minimal_when_the_minimal_bundle_has_room():
    t = build("dragonfly-plus", 64 * 33, radix=16, rail_optimized=False)
    hosts, m = t.params["hosts_per_group"], t.params["global_links_per_group_pair"]
    # m connections from each group to the next, the rest intra-group: nothing to detour
    src = np.arange(t.n_endpoints, dtype=np.int64)
    local = src % hosts
    dst = np.where(local < m, (src + hosts) % t.n_endpoints, src - local + (local + 8) % hosts)
    ugal = route(t, src, dst, "ugal", rng=np.random.default_rng(0))
    minimal = route(t, src, dst, "adaptive")
    assert np.array_equal(ugal.switch_hops, minimal.switch_hops)
    # one more connection per pair: exactly one per pair takes the Valiant detour
    dst2 = np.where(local <= m, (src + hosts) % t.n_endpoints, dst)
    ugal2 = route(t, src, dst2, "ugal", rng=np.random.default_rng(0))
    assert int((ugal2.switch_hops >= 5).sum()) == t.params["n_groups"]


def test_ugal_keeps_a_uniform_all_to_all_minimal():
    # every group pair at the mean load: a Valiant detour (two global hops) cannot help
    t = build("dragonfly-plus", 128, radix=8, rail_optimized=False)
    e = np.arange(t.n_endpoints, dtype=np.int64)
    src, dst = (a.ravel() for a in np.meshgrid(e, e, indexing="ij"))
    ugal = route(t, src, dst, "ugal", rng=np.random.default_rng(0))
    assert np.array_equal(ugal.switch_hops, route(t, src, dst, "adaptive").switch_hops)
    rates = {
        p: solve_maxmin(r.flows, r.link_capacity_Bps).rate_Bps.mean()
        for p in ("ugal", "valiant", "adaptive")
        for r in [route(t, src, dst, p, rng=np.random.default_rng(0))]
    }
    assert rates["ugal"] == pytest.approx(rates["adaptive"]) and rates["ugal"] > rates["valiant"]


def test_ugal_counts_a_degraded_global_cable_at_its_rate():
    t = build("dragonfly-plus", 64 * 33, radix=16, rail_optimized=False)
    hosts = t.params["hosts_per_group"]
    src = np.arange(2, dtype=np.int64)  # two connections from group 0 to group 1
    dst = src + hosts
    cap = t.graph.link_capacity_Bps.copy()
    lay = df_router._layout(t)
    cap[lay.global_link(np.array([0]), np.array([1]), np.array([0]))] *= 0.5
    ok = route(t, src, dst, "ugal")
    degraded = route(t, src, dst, "ugal", cap)
    assert ok.switch_hops.tolist() == [4, 4]
    assert degraded.switch_hops.tolist() == [4, 7]  # 1.5 cables of room: one stays minimal


def test_torus_shift_along_x_runs_at_full_rate_under_dor():
    t = build("torus-3d", 8 * 60, nics_per_gpu=2)  # 5 x 4 x 3 nodes, c_x = 3 cables per hop
    X, c, per_node = t.params["dims"][0], t.params["cables_per_direction_by_dim"][0], 16
    node = np.arange(t.params["n_nodes"], dtype=np.int64)
    nxt = node - node % X + (node % X + 1) % X
    k = np.arange(c, dtype=np.int64)
    src = (node[:, None] * per_node + k[None, :]).ravel()
    dst = (nxt[:, None] * per_node + k[None, :]).ravel()
    for policy in ("dor", "adaptive"):
        r = route(t, src, dst, policy)
        rates = solve_maxmin(r.flows, r.link_capacity_Bps).rate_Bps
        assert rates == pytest.approx(np.full(src.size, LINE_Bps))
    # the same shift with all 16 endpoints of a domain shares the c-cable trunk
    src16 = np.arange(t.n_endpoints, dtype=np.int64)
    dst16 = nxt[src16 // per_node] * per_node + src16 % per_node
    r = route(t, src16, dst16, "dor")
    rates = solve_maxmin(r.flows, r.link_capacity_Bps).rate_Bps
    assert rates == pytest.approx(np.full(src16.size, LINE_Bps * c / per_node))


def test_torus_adaptive_splits_a_half_ring_tie_both_ways():
    t = build("torus-3d", 8 * 60)  # Y = 4: distance 2 is a tie
    X = t.params["dims"][0]
    dor = route(t, np.array([0]), np.array([8 * 2 * X]), "dor")
    ada = route(t, np.array([0]), np.array([8 * 2 * X]), "adaptive")
    assert dor.switch_hops[0] == ada.switch_hops[0] == 2
    assert solve_maxmin(ada.flows, ada.link_capacity_Bps).rate_Bps[0] == pytest.approx(
        2 * solve_maxmin(dor.flows, dor.link_capacity_Bps).rate_Bps[0]
    )


# --------------------------------------------------------------------------------------
# bundles and degraded cables
# --------------------------------------------------------------------------------------


def bundles_holding(members: tuple[np.ndarray, np.ndarray], link: int) -> np.ndarray:
    indptr, links = members
    owner = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    return owner[links == link]


@pytest.mark.parametrize(
    ("family", "n_gpus", "kw", "policy", "which"),
    [
        ("rail-only", 256, {"radix": 8}, "adaptive", "leaf-spine"),
        ("rail-only", 320, {"radix": 8}, "adaptive", "spine-core"),
        ("rail-only", 9 * 72 + 20, {"radix": 4, **GB200}, "adaptive", "leaf-spine"),
        ("dragonfly-plus", 128, {"radix": 8}, "adaptive", "leaf-spine"),
        ("dragonfly-plus", 128, {"radix": 8}, "valiant", 2),  # a global cable
        ("dragonfly-plus", 256, {"radix": 16, "nics_per_gpu": 2}, "ugal", 2),
        ("torus-3d", 8 * 12, {"nics_per_gpu": 2}, "dor", "nic"),
        ("torus-3d", 8 * 16, {}, "adaptive", 1),  # torus-y, a size-2 ring: 2 cables per hop
        ("hypercube", 8 * 16, {"nics_per_gpu": 2}, "dor", "nic"),
    ],
)
def test_a_degraded_cable_costs_its_bundle_exactly_its_share(family, n_gpus, kw, policy, which):
    t = build(family, n_gpus, **kw)
    factor = 0.25
    if isinstance(which, int):  # the first cable of that link class
        cap = t.graph.link_capacity_Bps.copy()
        first = int(np.flatnonzero(t.graph.link_class == which)[0])
        cap[first : first + 2] *= factor
    else:
        cap = degraded_capacities(t, which, factor)
    cut = np.flatnonzero(cap != t.graph.link_capacity_Bps)
    assert cut.size == 2  # one cable, both directions
    src, dst = random_pattern(t, np.random.default_rng(0), n=50)
    ok = route(t, src, dst, policy, rng=np.random.default_rng(0))
    bad = route(t, src, dst, policy, cap, rng=np.random.default_rng(0))
    members = MEMBERS[family](t)
    lost = t.graph.link_capacity_Bps[cut] * (1 - factor)
    want = ok.link_capacity_Bps.copy()
    want[cut] -= lost
    for link, loss in zip(cut.tolist(), lost.tolist(), strict=True):
        held = bundles_holding(members, link)
        assert held.size >= 1
        want[t.graph.n_links + held] -= loss
    assert np.array_equal(bad.link_capacity_Bps, want)


def test_rail_only_bundles_are_the_fat_tree_routers_on_each_rail():
    t = build("rail-only", 320, radix=8)  # 8 rails of a 3-tier fat-tree
    cap = degraded_capacities(t, "spine-core", 0.5)
    cap = cap * degraded_capacities(t, "leaf-spine", 0.5) / t.graph.link_capacity_Bps
    src, dst = random_pattern(t, np.random.default_rng(1), n=100)
    r = route(t, src, dst, "adaptive", cap)
    # rail 0 alone, as the fat-tree router sees it (its first cables of each class degraded)
    sub = build_fat_tree(_rail_request(t.request, t.params["endpoints_per_rail"], 3))
    sub_cap = sub.graph.link_capacity_Bps.copy()
    for cls in (1, 2):
        first = int(np.flatnonzero(sub.graph.link_class == cls)[0])
        sub_cap[first : first + 2] *= 0.5
    alone = route_fat_tree(sub, np.array([0]), np.array([1]), "adaptive", sub_cap)
    n_sub_bundles = alone.link_capacity_Bps.size - sub.graph.n_links
    rail0 = r.link_capacity_Bps[t.graph.n_links : t.graph.n_links + n_sub_bundles]
    assert np.array_equal(rail0, alone.link_capacity_Bps[sub.graph.n_links :])


# --------------------------------------------------------------------------------------
# aggregation error: bundles vs an explicit cable-level spray over all shortest paths
# --------------------------------------------------------------------------------------


def spray_flowset(t: Topology, src: np.ndarray, dst: np.ndarray) -> FlowSet:
    """Each connection spread evenly over all its shortest paths in the cable graph.

    Brute force: path counts from the source (sigma_s) and to the destination (sigma_t) by
    BFS on the directed multigraph; a link (u, v) on a shortest path carries
    ``sigma_s(u) sigma_t(v) / sigma_s(dst)`` of the flow.
    """
    g = t.graph
    n, ls, ld = g.n_nodes, g.link_src.astype(np.int64), g.link_dst.astype(np.int64)

    def bfs(start: int, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        dist = np.full(n, -1)
        sigma = np.zeros(n)
        dist[start], sigma[start] = 0, 1.0
        frontier = np.array([start])
        level = 0
        while frontier.size:
            on = np.isin(a, frontier)
            nxt = b[on]
            fresh = dist[nxt] < 0
            dist[nxt[fresh]] = level + 1
            keep = dist[nxt] == level + 1
            np.add.at(sigma, nxt[keep], sigma[a[on][keep]])
            frontier = np.unique(nxt[keep])
            level += 1
        return dist, sigma

    indptr, indices, weights = [0], [], []
    for s, d in zip(src.tolist(), dst.tolist(), strict=True):
        ds, ss = bfs(s, ls, ld)
        dt, st = bfs(d, ld, ls)
        on = (ds[ls] >= 0) & (dt[ld] >= 0) & (ds[ls] + 1 + dt[ld] == ds[d])
        links = np.flatnonzero(on)
        indices.extend(links.tolist())
        weights.extend((ss[ls[links]] * st[ld[links]] / ss[d]).tolist())
        indptr.append(len(indices))
    return FlowSet(np.array(indptr), np.array(indices), np.array(weights), g.n_links)


def aggregation_error(t: Topology, policy: str, seeds: int = 4) -> tuple[float, float]:
    """Largest relative rate difference, bundles vs spray, over contended random patterns.

    Returns ``(error, share of flows whose bottleneck is a bundle)``; the second shows that
    the comparison exercises the bundles (with NIC-bound flows only it would be trivial).
    """
    worst, on_bundle, total = 0.0, 0, 0
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        e = t.n_endpoints
        if seed % 2 == 0:  # every endpoint sends to 3 random others
            src = np.repeat(np.arange(e), 3)
            dst = (src + rng.integers(1, e, src.size)) % e
        else:  # a random permutation plus an all-to-all among a few endpoints
            src, dst = random_pattern(t, rng)
            few = rng.choice(e, min(12, e), replace=False)
            a2a_s, a2a_d = (a.ravel() for a in np.meshgrid(few, few, indexing="ij"))
            src, dst = np.concatenate([src, a2a_s]), np.concatenate([dst, a2a_d])
        src, dst = src[src != dst], dst[src != dst]
        bundled = route(t, src, dst, policy)
        sol = solve_maxmin(bundled.flows, bundled.link_capacity_Bps)
        want = solve_maxmin(spray_flowset(t, src, dst), t.graph.link_capacity_Bps).rate_Bps
        worst = max(worst, float(np.max(np.abs(sol.rate_Bps - want) / want)))
        on_bundle += int((sol.bottleneck_link >= t.graph.n_links).sum())
        total += want.size
    return worst, on_bundle / total


@pytest.mark.parametrize(
    ("n_gpus", "kw", "min_on_bundle"),
    [
        (32, {"radix": 8}, 0.0),  # 2 tiers: 8 leaves x 4 spines, 1 cable per leaf-spine pair
        (8, {"radix": 8, "rail_optimized": False, "tiers": 2}, 0.0),  # 1 spine, 4 cables each
        (24, {"radix": 8, "oversubscription": 3, "rail_optimized": False}, 0.3),  # 6:2 leaves
        (16, {"radix": 4, "rail_optimized": False}, 0.0),  # 3 tiers, 4 pods, 2 cores per plane
        (64, {"radix": 8, "rail_optimized": False}, 0.01),  # 3 tiers, 2 spine-core cables each
        (48, {"radix": 8, "spine_oversubscription": 3, "rail_optimized": False}, 0.1),
    ],
)
def test_fat_tree_adaptive_bundles_equal_an_explicit_spray(n_gpus, kw, min_on_bundle):
    t = build_fat_tree(TopologyRequest(n_gpus=n_gpus, **kw))
    err, on_bundle = aggregation_error(t, "adaptive")
    print(
        f"fat-tree {t.tiers}-tier {n_gpus} endpoints {kw}: max relative rate error "
        f"{err:.1e}; {on_bundle:.0%} of flows bottlenecked on a bundle"
    )
    assert on_bundle >= min_on_bundle
    assert err <= 1e-9


@pytest.mark.parametrize(
    ("n_gpus", "kw"),
    [
        (120, {"radix": 8, "oversubscription": 3}),  # 5 groups, m = 2 = up: one part
        (128, {"radix": 8}),  # 8 groups, m = 2 < up = 4: parts of 2 spines
        (192, {"radix": 8}),  # 12 groups, m = 1: single-cable parts
        (256, {"radix": 16, "nics_per_gpu": 2}),  # 8 groups, m = 9 > up = 8, gcd 1
        (8, {"radix": 8, "gpus_per_node": 4, "nvlink_domain": 4}),  # one group
    ],
)
def test_dragonfly_adaptive_bundles_equal_an_explicit_spray(n_gpus, kw):
    t = build("dragonfly-plus", n_gpus, rail_optimized=False, **kw)
    p = t.params
    err, on_bundle = aggregation_error(t, "adaptive")
    print(
        f"dragonfly+ {p['n_groups']} groups, m = {p['global_links_per_group_pair']}, "
        f"up = {p['up_per_leaf']}: max relative rate error {err:.1e}; {on_bundle:.0%} of "
        f"flows bottlenecked on a bundle"
    )
    assert on_bundle >= (0.2 if p["n_groups"] > 1 else 0.0)
    assert err <= 1e-9


# --------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("family", "n_gpus", "kw", "policy"),
    [
        ("rail-only", 256, {"radix": 8}, "valiant"),
        ("dragonfly-plus", 128, {"radix": 8}, "dor"),
        ("dragonfly-plus", 128, {"radix": 8}, "dmodk"),
        ("torus-3d", 8 * 16, {}, "dmodk"),
        ("hypercube", 8 * 32, {}, "ugal"),
    ],
)
def test_unsupported_policy_names_fabric_routing(family, n_gpus, kw, policy):
    t = build(family, n_gpus, **kw)
    with pytest.raises(InfeasibleDesignError, match=f"{family} supports: ") as e:
        route(t, np.array([0]), np.array([1]), policy)
    assert e.value.key == "fabric.routing"
    assert policy in str(e.value)


def test_rail_only_refuses_cross_rail_connections():
    t = build("rail-only", 256, radix=8)
    with pytest.raises(ValueError, match=r"rail 0\).*rail 1\).*NVLink"):
        route(t, np.array([0, 0]), np.array([8, 9]), "adaptive")


def test_routing_is_deterministic_for_a_seed():
    for family, n_gpus, kw in [
        ("dragonfly-plus", 128, {"radix": 8}),
        ("torus-3d", 8 * 60, {}),
        ("hypercube", 8 * 32, {}),
    ]:
        t = build(family, n_gpus, **kw)
        src, dst = random_pattern(t, np.random.default_rng(0))
        for policy in POLICIES[family]:
            a = route(t, src, dst, policy, qps=3, rng=np.random.default_rng(5))
            b = route(t, src, dst, policy, qps=3, rng=np.random.default_rng(5))
            assert np.array_equal(a.flows.flow_link_indices, b.flows.flow_link_indices)


# --------------------------------------------------------------------------------------
# scale: 131,072 GPUs
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
def test_131072_gpus_route_a_random_permutation(family, kw):
    t = build(family, 131072, **kw)
    rng = np.random.default_rng(0)
    nics = t.request.nics_per_gpu
    src = np.arange(131072, dtype=np.int64) * nics  # every GPU's first NIC
    if family == "rail-only":
        rail, _ = ro_router.rail_and_port(t, src)
        dst = np.empty_like(src)
        for r in np.unique(rail):
            sel = np.flatnonzero(rail == r)
            dst[sel] = src[sel][rng.permutation(sel.size)]
    else:
        dst = src[rng.permutation(src.size)]
    for policy in POLICIES[family]:
        r = route(t, src, dst, policy, qps=2, rng=rng)
        check_routed(t, r, src)
        assert r.switch_hops.max() <= max(t.max_switch_hops, t.params.get("valiant_max_hops", 0))
