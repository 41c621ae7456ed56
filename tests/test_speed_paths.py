"""The model's fast paths give the reference paths' results, exactly (issue 13, model speed).

- ECMP on a fat-tree: the numba walk (``routing/_kernels.py``) against the vectorised
  reference (``fat_tree._per_path``): the same flows, the same generator state after.
- Adaptive fat-tree routing by path slots (``ColumnRouted``) against the path matrix.
- The max-min solve's first round (``collectives/first_round.py``): the smallest rate, the
  flow ``argmin`` picks and the link that froze it, against the full solve (hypothesis).
- Whole collectives and training steps with every fast path on, against each shortcut of
  :class:`~fabric_model._fastpaths.FastPaths` off alone and all of them off (a shortcut
  declared there is tested here the moment it exists), and the communicator cache shared
  between layouts of one group shape (``training/fabric.py``).
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_model._fastpaths import NAMES, FastPaths, consulted, fast_paths, reference_paths
from fabric_model.caching import clear_caches as clear_every_cache
from fabric_model.collectives import _reference as collectives_reference
from fabric_model.collectives import collective, context, first_round
from fabric_model.collectives.context import FabricContext
from fabric_model.flows import FlowSet, solve_maxmin
from fabric_model.presets import load_preset
from fabric_model.routing import fat_tree, rail_only, route
from fabric_model.routing.base import ColumnRouted, RoutedFlows
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.topology import _reference as topo_reference
from fabric_model.topology import base as topo_base
from fabric_model.topology import fat_tree as topo_fat_tree
from fabric_model.topology._kernels import stable_order_by_key
from fabric_model.training import layout as training_layout
from fabric_model.training import training_step
from fabric_model.training.fabric import clear_caches, group_shape
from fabric_model.training.layout import DIMENSIONS, Layout

#: Designs that reach every branch: 2 tiers, 3 tiers with uneven down cables, a partial
#: pod whose paths need the reference's re-pick (NEEDS_REFERENCE), and full pods (draw rows
#: no path reads are left zero, ``fat_tree._walk_tables``).
ECMP_DESIGNS = {
    "2-tier roce": ("dgx-h100-roce-ecmp", {}),
    "3-tier roce 7:1": (
        "meta-24k-roce",
        {"cluster.n_gpus": 2048, "fabric.tiers": 3, "fabric.spine_oversubscription": 7},
    ),
    "3-tier ib partial pod": (
        "dgx-h100-ib-ndr",
        {
            "cluster.n_gpus": 6152,
            "fabric.tiers": 3,
            "fabric.spine_oversubscription": 7,
            "fabric.routing": "ecmp",
        },
    ),
    # full pods, one down cable per spine: the walk leaves the down-cable draws unread
    "3-tier ib full pods": (
        "dgx-h100-ib-ndr",
        {"cluster.n_gpus": 8192, "fabric.tiers": 3, "fabric.routing": "ecmp"},
    ),
}


def _ctx(preset: str, over: dict[str, Any]) -> FabricContext:
    return FabricContext.from_scenario(apply_overrides(load_preset(preset), over))


_CTXS: dict[str, FabricContext] = {}


def _design(name: str) -> FabricContext:
    if name not in _CTXS:
        _CTXS[name] = _ctx(*ECMP_DESIGNS[name])
    return _CTXS[name]


def _same_flows(a: Any, b: Any) -> None:
    fa, fb = a.flows, b.flows
    assert np.array_equal(fa.flow_link_indptr, fb.flow_link_indptr)
    assert np.array_equal(fa.flow_link_indices, fb.flow_link_indices)
    assert np.array_equal(fa.flow_link_weights, fb.flow_link_weights)
    assert fa.n_links == fb.n_links
    assert np.array_equal(a.flow_of_connection, b.flow_of_connection)
    assert np.array_equal(a.flow_fraction, b.flow_fraction)
    assert np.array_equal(a.link_class, b.link_class)
    assert a.class_names == b.class_names
    assert np.array_equal(a.switch_hops, b.switch_hops)
    assert np.array_equal(a.link_capacity_Bps, b.link_capacity_Bps)


@pytest.mark.parametrize("design", list(ECMP_DESIGNS))
@settings(max_examples=12, deadline=None, derandomize=True)
@given(
    n=st.integers(1, 3000),
    qps=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
    pattern_seed=st.integers(0, 2**32 - 1),
)
def test_ecmp_walk_equals_the_reference(
    design: str, n: int, qps: int, seed: int, pattern_seed: int
) -> None:
    ctx = _design(design)
    topo = ctx.topology
    pick = np.random.default_rng(pattern_seed)
    src = pick.integers(0, topo.n_endpoints, n)
    dst = pick.integers(0, topo.n_endpoints, n)
    rng_fast, rng_ref = np.random.default_rng(seed), np.random.default_rng(seed)
    fast = route(topo, src, dst, "ecmp", ctx.capacity_Bps, qps=qps, rng=rng_fast)
    with fast_paths(ecmp_kernel=False):
        ref = route(topo, src, dst, "ecmp", ctx.capacity_Bps, qps=qps, rng=rng_ref)
    _same_flows(fast, ref)
    assert rng_fast.bit_generator.state == rng_ref.bit_generator.state  # rng left alike
    if isinstance(fast, fat_tree.EcmpWalk):
        fl = ref.flows
        unit = np.bincount(fl.flow_link_indices, weights=fl.flow_link_weights, minlength=fl.n_links)
        assert np.array_equal(fast.link_loads(), unit)
        w = pick.random(fl.n_flows) + 0.5
        per_entry = fl.flow_link_weights * np.repeat(w, np.diff(fl.flow_link_indptr))
        weighted = np.bincount(fl.flow_link_indices, weights=per_entry, minlength=fl.n_links)
        assert np.array_equal(fast.link_loads(w), weighted)
        marked = np.zeros(fl.n_links, bool)
        marked[pick.choice(fl.n_links, 5)] = True
        f, links = fast.first_flow_on(marked)
        hit = np.flatnonzero(
            np.add.reduceat(marked[fl.flow_link_indices], fl.flow_link_indptr[:-1])
        )
        assert f == (int(hit[0]) if hit.size else -1)
        if f >= 0:
            assert (
                links.tolist()
                == fl.flow_link_indices[
                    fl.flow_link_indptr[f] : fl.flow_link_indptr[f + 1]
                ].tolist()
            )


def test_every_ecmp_branch_is_reached() -> None:
    """The designs above take the kernel, its extra down-cable draw, and the reference."""
    from fabric_model.routing import _kernels

    seen = set()
    for name in ECMP_DESIGNS:
        ctx = _design(name)
        topo = ctx.topology
        pick = np.random.default_rng(0)
        src = pick.integers(0, topo.n_endpoints, 20000)
        dst = pick.integers(0, topo.n_endpoints, 20000)
        walk = fat_tree.EcmpWalk(
            topo,
            fat_tree._layout(topo),
            src,
            dst,
            np.zeros(src.size, np.int64),
            ctx.capacity_Bps,
            2,
            np.random.default_rng(0).bit_generator.state,
            2 if topo.tiers == 2 else 4,
            False,
        )
        seen.add(
            walk._walk(_kernels.ADD_LOADS, np.zeros(0), out_loads=np.zeros(topo.graph.n_links))
        )
    assert {0, _kernels.UNEVEN_DOWN} <= seen
    assert any(flags & _kernels.NEEDS_REFERENCE for flags in seen)


def _adaptive_reference(topo: Any, src: np.ndarray, dst: np.ndarray, cap: np.ndarray) -> FlowSet:
    """The adaptive fat-tree's flows as a path matrix, the way the router laid them before."""
    lay = fat_tree._layout(topo)
    space = fat_tree._bundle_space(topo, lay, cap)
    leaf = lay["leaf_of_e"]
    a, b = leaf[src], leaf[dst]
    off = a != b
    paths = np.full((src.size, 6), -1, dtype=np.int64)
    paths[:, 0] = 2 * src
    paths[:, 5] = 2 * dst + 1
    paths[off, 1] = space["b_lu"] + a[off]
    paths[off, 4] = space["b_ld"] + b[off]
    if topo.tiers == 3:
        lpp = int(lay["lpp"])
        xp = off & (a // lpp != b // lpp)
        paths[xp, 2] = space["b_pu"] + a[xp] // lpp
        paths[xp, 3] = space["b_pd"] + b[xp] // lpp
    return fat_tree._csr(paths, space["total"])


@pytest.mark.parametrize(
    ("preset", "over"),
    [
        ("dgx-h100-ib-ndr", {}),
        ("dgx-h100-spectrum-x", {"cluster.n_gpus": 4096, "fabric.tiers": 3}),
        ("dgx-h100-ib-ndr", {"cluster.n_gpus": 6152, "fabric.tiers": 3}),
    ],
)
def test_adaptive_slots_equal_the_path_matrix(preset: str, over: dict[str, Any]) -> None:
    ctx = _ctx(preset, over)
    topo = ctx.topology
    pick = np.random.default_rng(3)
    src = pick.integers(0, topo.n_endpoints, 5000)
    dst = pick.integers(0, topo.n_endpoints, 5000)
    rf = route(topo, src, dst, "adaptive", ctx.capacity_Bps)
    assert isinstance(rf, ColumnRouted)
    ref = _adaptive_reference(topo, src, dst, ctx.capacity_Bps)
    fl = rf.flows
    assert np.array_equal(fl.flow_link_indptr, ref.flow_link_indptr)
    assert np.array_equal(fl.flow_link_indices, ref.flow_link_indices)
    assert np.array_equal(fl.flow_link_weights, ref.flow_link_weights)
    w = pick.random(src.size) + 0.1
    per_entry = ref.flow_link_weights * np.repeat(w, np.diff(ref.flow_link_indptr))
    assert np.array_equal(
        rf.link_loads(w),
        np.bincount(ref.flow_link_indices, weights=per_entry, minlength=ref.n_links),
    )


# ------------------------------------------------------------------ the first round


@st.composite
def flow_sets(draw: st.DrawFn) -> tuple[FlowSet, np.ndarray]:
    """Small flow sets with many exact ties (few distinct capacities and weights)."""
    n_links = draw(st.integers(1, 12))
    n_flows = draw(st.integers(1, 25))
    caps = draw(
        st.lists(st.sampled_from([1.0, 2.0, 3.0, 4.0, 7.5]), min_size=n_links, max_size=n_links)
    )
    indptr, indices, weights = [0], [], []
    for _ in range(n_flows):
        links = draw(st.lists(st.integers(0, n_links - 1), min_size=1, max_size=4, unique=True))
        indices += links
        weights += [draw(st.sampled_from([1.0, 0.5, 0.25, 1.0 / 3.0, 3.0])) for _ in links]
        indptr.append(len(indices))
    fs = FlowSet(np.array(indptr), np.array(indices), np.array(weights), n_links, max_weight=np.inf)
    return fs, np.array(caps)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(flow_sets())
def test_first_round_is_the_full_solves_slowest_flow(inputs: tuple[FlowSet, np.ndarray]) -> None:
    fs, cap = inputs
    sol = solve_maxmin(fs, cap)
    first = first_round.first_round(fs, cap)
    assert first is not None
    worst = int(np.argmin(sol.rate_Bps))
    assert first.level_Bps == sol.rate_Bps.min()  # bit for bit
    assert first.worst_flow == worst
    assert first.bottleneck_link() == int(sol.bottleneck_link[worst])
    fast = first_round.slowest(fs, cap, 0.25, str)
    assert fast == (sol.rate_Bps.min() / 0.25, str(int(sol.bottleneck_link[worst])))
    # per-flow weights (progress-fair demands) summed in place: the weighted flow set's round
    demand = np.linspace(0.5, 3.0, fs.n_flows)
    rf = RoutedFlows(
        fs,
        cap,
        np.zeros(fs.n_links, np.int16),
        (),
        np.arange(fs.n_flows),
        np.ones(fs.n_flows),
        np.ones(fs.n_flows, np.int64),
        "adaptive",
    )
    weighted = first_round.weighted_flows(rf, demand)
    ref, got = first_round.first_round(weighted, cap), first_round.first_round(fs, cap, demand)
    assert ref is not None and got is not None
    fl = weighted  # the loop's sums are bincount's, bit for bit
    loads = np.bincount(fl.flow_link_indices, fl.flow_link_weights, minlength=fs.n_links)
    used = loads > 0
    assert np.array_equal(got.fill_Bps[used], cap[used] / loads[used])
    assert np.all(np.isinf(got.fill_Bps[~used]))
    assert (got.level_Bps, got.worst_flow, got.bottleneck_link()) == (
        ref.level_Bps,
        ref.worst_flow,
        ref.bottleneck_link(),
    )


def _class_pattern(seed: int, n: int) -> tuple[Any, Any, np.ndarray, np.ndarray, np.ndarray]:
    """A class solve's inputs on a 3-tier fabric: n connections, member counts 1-8."""
    ctx = _ctx("dgx-h100-spectrum-x", {"cluster.n_gpus": 4096, "fabric.tiers": 3})
    n_e = ctx.topology.n_endpoints
    pick = np.random.default_rng(seed)
    src, dst = pick.permutation(n_e)[:n], pick.permutation(n_e)[:n]
    rf = route(ctx.topology, src, dst, "adaptive", ctx.capacity_Bps)
    return ctx, rf, src, dst, pick.integers(1, 9, src.size)


def _rounds_equal(a: first_round.FirstRound | None, b: first_round.FirstRound | None) -> None:
    assert (a is None) == (b is None)
    if a is None or b is None:
        return
    assert a.level_Bps == b.level_Bps and a.worst_flow == b.worst_flow  # bit for bit
    assert np.array_equal(a.worst_links, b.worst_links)
    assert np.array_equal(a.worst_fill_Bps, b.worst_fill_Bps)
    assert np.array_equal(a.fill_Bps, b.fill_Bps)
    assert a.bottleneck_link() == b.bottleneck_link()


@settings(max_examples=300, deadline=None, derandomize=True)
@given(flow_sets(), st.integers(0, 40))
def test_the_sparse_first_round_is_the_dense_one(
    inputs: tuple[FlowSet, np.ndarray], spare: int
) -> None:
    """Sums over the crossed links only (a class solve) against every link's, ties included."""
    fs, cap = inputs
    cap = np.concatenate([cap, np.full(spare, 5.0)])  # links no flow crosses
    demand = np.linspace(0.5, 3.0, fs.n_flows)
    old = first_round.SPARSE_FRACTION
    try:
        got = {}
        for frac in (0.0, np.inf):  # never sparse, always sparse
            first_round.SPARSE_FRACTION = frac
            got[frac] = (first_round.first_round(fs, cap), first_round.first_round(fs, cap, demand))
    finally:
        first_round.SPARSE_FRACTION = old
    for dense, sparse in zip(got[0.0], got[np.inf], strict=True):
        _rounds_equal(dense, sparse)


def test_the_sparse_first_round_of_slots_is_the_dense_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A class solve's slot pattern (few flows, a fabric of links): both sums, the full solve."""
    ctx, rf, src, dst, members = _class_pattern(seed=5, n=300)
    up, down, _ = ctx._endpoint_links
    n_links = rf.link_capacity_Bps.size + 2 * src.size
    flows = first_round.class_flows(rf, up[src], down[dst], members, n_links)
    assert isinstance(flows, ColumnRouted)
    capacity = np.concatenate(
        [
            rf.link_capacity_Bps,
            members * ctx.capacity_Bps[up[src]],
            members * ctx.capacity_Bps[down[dst]],
        ]
    )
    assert flows.n_flows * len(flows.columns) < first_round.SPARSE_FRACTION * capacity.size
    sparse = first_round.first_round(flows, capacity)
    n_base = rf.link_capacity_Bps.size
    appended = first_round.Appended(capacity[:n_base], capacity[n_base:])  # as the model does
    assert np.array_equal(np.asarray(appended), capacity)
    _rounds_equal(sparse, first_round.first_round(flows, appended))
    monkeypatch.setattr(first_round, "SPARSE_FRACTION", 0.0)
    dense = first_round.first_round(flows, capacity)
    _rounds_equal(dense, sparse)
    _rounds_equal(dense, first_round.first_round(flows, appended))
    sol = solve_maxmin(flows.flows, capacity)
    assert sparse is not None and sparse.level_Bps == sol.rate_Bps.min()
    assert sparse.bottleneck_link() == int(sol.bottleneck_link[int(np.argmin(sol.rate_Bps))])


def test_first_round_declines_what_it_cannot_shortcut() -> None:
    fs = FlowSet(np.array([0, 1]), np.array([0]), np.array([1.0]), 1, np.array([5.0]))
    assert first_round.first_round(fs, np.array([10.0])) is None  # a demand
    assert first_round.slowest(fs, np.array([10.0]), np.array([1.0, 0.5]), str) is None


# ------------------------------------------------------------- whole results, both ways

SCENARIOS = {
    "roce ecmp 2-tier": ("dgx-h100-roce-ecmp", {}),
    "roce ecmp 3-tier, MoE skew": (
        "meta-24k-roce",
        {
            "cluster.n_gpus": 2048,
            "model.name": "deepseek-v3",
            "parallel.ep": 8,
            "parallel.vpp": 1,  # the preset interleaves Llama 3 405B; 61 layers < 16 x 4
            "model.routing_skew": 2.0,
        },
    ),
    "ib ecmp partial pod": (
        "dgx-h100-ib-ndr",
        {**ECMP_DESIGNS["3-tier ib partial pod"][1], "parallel.pp": 1},
    ),
    "spectrum-x 3-tier": ("dgx-h100-spectrum-x", {"cluster.n_gpus": 4096, "fabric.tiers": 3}),
    "rail-only": ("dgx-h100-ib-ndr", {"fabric.topology": "rail-only", "fabric.tiers": "auto"}),
    "dragonfly+": ("dragonfly-plus-16k", {"cluster.n_gpus": 2048}),
    # 1,024 GPUs: the all-to-all by orbits (127 flows) against every class (16,384); on the
    # preset's 4,096 the every-class reference takes seconds
    "torus": ("torus-3d-4k", {"cluster.n_gpus": 1024}),
    "degraded nic": ("dgx-h100-ib-ndr", {"what_if.degraded_link_factor": 0.5}),
}


def _results(s: Scenario) -> Any:
    clear_caches()
    rows = [
        dataclasses.asdict(r)
        for op in ("allreduce", "alltoall", "allgather")
        for r in collective(s, op, "auto", [2**20, 2**30])
    ]
    step = training_step(s).to_dict()
    return rows, step


def _equal(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN (infeasible steps carry NaN figures)."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def _close(a: Any, b: Any, rel: float) -> bool:
    """:func:`_equal`, floats within ``rel`` of each other (``rel = 0``: bit for bit)."""
    if not rel:
        return _equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], rel) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_close(x, y, rel) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=rel, abs_tol=0.0) or (math.isnan(a) and math.isnan(b))
    return bool(a == b)


#: How close each shortcut's results are to its reference's: bit for bit, or the ``rel_tol``
#: its field declares (the orbit solve sums in another order).
REL_TOL = {f.name: float(f.metadata.get("rel_tol", 0.0)) for f in dataclasses.fields(FastPaths)}
INEXACT = tuple(name for name, tol in REL_TOL.items() if tol)
#: Each shortcut is switched off alone on the first of these that takes it (the quickest
#: first); every scenario switches all of them off at once.
ALONE_ON = (
    "degraded nic",
    "spectrum-x 3-tier",
    "rail-only",
    "dragonfly+",
    "torus",
    "roce ecmp 2-tier",
    "roce ecmp 3-tier, MoE skew",
    "ib ecmp partial pod",
)
CASES = [(name, "first that takes it") for name in NAMES]
CASES += [("all off", scenario) for scenario in SCENARIOS]

_RESULTS: dict[tuple[tuple[str, ...], str], Any] = {}
#: The shortcuts each scenario takes (read, with every shortcut on).
_TAKEN: dict[str, frozenset[str]] = {}


def _scenario(name: str) -> Scenario:
    preset, over = SCENARIOS[name]
    return apply_overrides(load_preset(preset), over)


def _results_with(off: tuple[str, ...], name: str) -> Any:
    """``name``'s results with the shortcuts ``off`` off (from a cold start), computed once."""
    if (off, name) not in _RESULTS:
        if off:
            with fast_paths(**dict.fromkeys(off, False)):  # empties every cache in and out
                _RESULTS[off, name] = _results(_scenario(name))
        else:
            with consulted() as read:
                _RESULTS[off, name] = _results(_scenario(name))
            _TAKEN[name] = frozenset(read)
    return _RESULTS[off, name]


def _taken(name: str) -> frozenset[str]:
    _results_with((), name)
    return _TAKEN[name]


@pytest.mark.parametrize(("switch", "name"), CASES)
def test_fast_paths_give_the_reference_results(
    monkeypatch: pytest.MonkeyPatch, switch: str, name: str
) -> None:
    """Every collective row and the step with shortcuts off, from cold caches."""
    if switch != "all off":  # a shortcut declared in FastPaths is taken by some scenario
        name = next(s for s in ALONE_ON if switch in _taken(s))
        fast = _results_with((), name)
        assert _close(fast, _results_with((switch,), name), REL_TOL[switch])
        return
    fast = _results_with((), name)
    monkeypatch.setattr(context, "ROUTE_CACHE_MIN_CONNECTIONS", 2**62)  # no pattern kept
    with reference_paths():  # empties every cache on the way in and out
        reference = _results(_scenario(name))
    assert _close(fast, reference, max(REL_TOL.values()))
    # the exact shortcuts all off give bit for bit what they give on (the others off in both;
    # a shortcut not taken gives its reference's result by construction)
    baseline = _results_with(tuple(sorted(_taken(name) & set(INEXACT))), name)
    assert _equal(baseline, reference)


def test_kept_routes_and_seed_free_patterns_give_the_reference_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """MoE skews re-solve kept routed patterns; same-leaf patterns solve one ECMP seed."""
    base = apply_overrides(
        load_preset(SCENARIOS["roce ecmp 3-tier, MoE skew"][0]),
        {**SCENARIOS["roce ecmp 3-tier, MoE skew"][1], "model.routing_skew": 1.0},
    )
    skews = [apply_overrides(base, {"model.routing_skew": k}) for k in (1.0, 2.0, 4.0)]
    monkeypatch.setattr(context, "ROUTE_CACHE_MIN_CONNECTIONS", 0)  # keep every pattern
    clear_caches()
    context.clear_route_cache()
    fast = [training_step(s).to_dict() for s in skews]  # the skews reuse the uniform's routes
    assert context._ROUTES
    monkeypatch.setattr(context, "ROUTE_CACHE_MIN_CONNECTIONS", 2**62)
    reference = []
    with fast_paths(seed_shortcut=False):
        for s in skews:
            clear_caches()
            reference.append(training_step(s).to_dict())
    context.clear_route_cache()
    clear_caches()
    assert _equal(fast, reference)


def test_a_same_leaf_pattern_solves_alike_for_every_seed() -> None:
    ctx = _design("3-tier roce 7:1")
    leaf = fat_tree._layout(ctx.topology)["leaf_of_e"]
    ep = np.flatnonzero(leaf == leaf[0])
    src, dst = np.repeat(ep, ep.size), np.tile(ep, ep.size)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    demand = np.linspace(0.5, 2.0, src.size)
    fast = [ctx._solve(src, dst, d) for d in (None, demand)]
    full = ctx._solve(src, dst, None, full=True)
    with fast_paths(seed_shortcut=False):
        reference = [ctx._solve(src, dst, d) for d in (None, demand)]
        assert fast == reference  # deferred means, solved in full on comparing
        ref_full = ctx._solve(src, dst, None, full=True)
    assert np.array_equal(full.min_rate_Bps, ref_full.min_rate_Bps)
    assert (full.mean_rate_Bps, full.bottleneck, full.mean_switch_hops) == (
        ref_full.mean_rate_Bps,
        ref_full.bottleneck,
        ref_full.mean_switch_hops,
    )


def test_a_deferred_mean_is_the_full_solves() -> None:
    ctx = _design("2-tier roce")
    pick = np.random.default_rng(5)
    src = pick.integers(0, ctx.topology.n_endpoints, 4000)
    dst = pick.integers(0, ctx.topology.n_endpoints, 4000)
    fast = ctx._solve(src, dst, None)
    full = ctx._solve(src, dst, None, full=True)
    assert isinstance(fast, first_round.DeferredMean)
    assert "deferred" in repr(fast)
    assert np.array_equal(fast.min_rate_Bps, full.min_rate_Bps)
    assert (fast.bottleneck, fast.mean_switch_hops, fast.max_switch_hops) == (
        full.bottleneck,
        full.mean_switch_hops,
        full.max_switch_hops,
    )
    assert fast.mean_rate_Bps == full.mean_rate_Bps
    assert fast == full


# ------------------------------------------------------------ communicator cache keys


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.lists(st.sampled_from([1, 2, 3, 4, 8]), min_size=5, max_size=5),
    st.lists(st.sampled_from([1, 2, 3, 4, 8]), min_size=5, max_size=5),
    st.sampled_from(sorted(DIMENSIONS)),
)
def test_one_group_shape_is_one_communicator(a: list[int], b: list[int], dim: str) -> None:
    """Layouts of one shape have the same members and offsets (so share the solves)."""
    la, lb = Layout(*a), Layout(*b)
    if la.n_gpus != lb.n_gpus or group_shape(la, dim) != group_shape(lb, dim):
        return
    assert np.array_equal(la.members(dim), lb.members(dim))
    assert np.array_equal(la.offsets(dim), lb.offsets(dim))


def test_shared_communicators_do_not_change_a_step() -> None:
    """A plan evaluated after others that share its groups equals the plan evaluated alone."""
    base = load_preset("dgx-h100-roce-ecmp")
    plans = [
        {"parallel.tp": 8, "parallel.pp": 4},
        {"parallel.tp": 8, "parallel.pp": 2, "parallel.cp": 2},
        {"parallel.tp": 4, "parallel.pp": 4, "training.micro_batch": 2},
        {"model.name": "llama3-8b", "parallel.tp": 8, "parallel.pp": 4},
    ]
    scenarios = [apply_overrides(base, {**p, "parallel.dp": "auto"}) for p in plans]
    alone = []
    for s in scenarios:
        clear_caches()
        alone.append(training_step(s).to_dict())
    clear_caches()
    together = [training_step(s).to_dict() for s in scenarios]
    clear_caches()
    assert _equal(alone, together)


def test_class_flows_by_slots_equal_the_flow_set() -> None:
    """The class solve's renumbered NIC links and member weights, by slots and by CSR."""
    ctx, rf, src, dst, members = _class_pattern(seed=11, n=3000)
    assert isinstance(rf, ColumnRouted)
    plain = RoutedFlows(  # the same flows as a CSR
        flows=rf.flows,
        link_capacity_Bps=rf.link_capacity_Bps,
        link_class=rf.link_class,
        class_names=rf.class_names,
        flow_of_connection=rf.flow_of_connection,
        flow_fraction=rf.flow_fraction,
        switch_hops=rf.switch_hops,
        policy=rf.policy,
    )
    up, down, _ = ctx._endpoint_links
    n_links = rf.link_capacity_Bps.size + 2 * src.size
    by_slots = first_round.class_flows(rf, up[src], down[dst], members, n_links)
    by_csr = first_round.class_flows(plain, up[src], down[dst], members, n_links)
    assert isinstance(by_slots, ColumnRouted) and isinstance(by_csr, FlowSet)
    fl = by_slots.flows
    assert np.array_equal(fl.flow_link_indptr, by_csr.flow_link_indptr)
    assert np.array_equal(fl.flow_link_indices, by_csr.flow_link_indices)
    assert np.array_equal(fl.flow_link_weights, by_csr.flow_link_weights)
    loads = np.bincount(
        by_csr.flow_link_indices, weights=by_csr.flow_link_weights, minlength=n_links
    )
    assert np.array_equal(by_slots.link_loads(), loads)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(n_rows=st.integers(1, 40), widths=st.lists(st.integers(1, 5), min_size=1, max_size=6))
def test_the_csr_block_fill_equals_numpys(n_rows: int, widths: list[int]) -> None:
    """routing/_kernels.fill_rows (the dragonfly+ bundled router) against the index form."""
    from fabric_model.routing import _kernels

    pick = np.random.default_rng(n_rows * 31 + len(widths))
    blocks = []
    for w in widths:
        rows = np.flatnonzero(pick.random(n_rows) < 0.7)
        ids = pick.integers(0, 1000, (rows.size, w))
        blocks.append((rows, ids, np.broadcast_to(pick.random(), ids.shape)))
    lengths = np.zeros(n_rows, np.int64)
    for rows, ids, _ in blocks:
        lengths[rows] += ids.shape[1]
    start = np.r_[0, np.cumsum(lengths)[:-1]]
    ref_i, ref_w = np.zeros(int(lengths.sum()), np.int64), np.zeros(int(lengths.sum()))
    got_i, got_w = ref_i.copy(), ref_w.copy()
    filled = start.copy()
    for rows, ids, w in blocks:  # the router's former NumPy form
        pos = filled[rows, None] + np.arange(ids.shape[1])
        ref_i[pos], ref_w[pos] = ids, w
        filled[rows] += ids.shape[1]
    filled_k = start.copy()
    for rows, ids, w in blocks:
        _kernels.fill_rows(filled_k, rows, ids, w, got_i, got_w)
    assert np.array_equal(filled_k, filled)
    assert np.array_equal(got_i, ref_i) and np.array_equal(got_w, ref_w)


@pytest.mark.parametrize("policy", ["adaptive", "valiant", "ugal"])
def test_the_dragonfly_routers_unchecked_flow_sets_pass_the_checks(
    monkeypatch: pytest.MonkeyPatch, policy: str
) -> None:
    """``FlowSet.built`` skips the checks for the bundled router's output: it passes them."""
    from fabric_model.flows import solver

    ctx = _ctx("dragonfly-plus-16k", {"cluster.n_gpus": 2048})
    topo = ctx.topology
    pick = np.random.default_rng(11)
    src = pick.integers(0, topo.n_endpoints, 6000)
    dst = pick.integers(0, topo.n_endpoints, 6000)
    rf = route(topo, src, dst, policy, ctx.capacity_Bps, rng=np.random.default_rng(2))
    fl = rf.flows
    checked = FlowSet(
        fl.flow_link_indptr, fl.flow_link_indices, fl.flow_link_weights, fl.n_links
    )  # raises on any malformed field
    assert checked.nnz == fl.nnz and fl.flow_link_indices.dtype == np.int32
    monkeypatch.setattr(solver, "CHECK_BUILT", True)
    again = route(topo, src, dst, policy, ctx.capacity_Bps, rng=np.random.default_rng(2))
    assert np.array_equal(again.flows.flow_link_weights, fl.flow_link_weights)


# ---------------------------------------------------------------- fabric builds (H7)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    n_keys=st.integers(1, 50),
    keys=st.lists(st.integers(0, 49), max_size=300),
)
def test_the_counting_sort_is_numpys_stable_argsort(n_keys: int, keys: list[int]) -> None:
    """``FabricGraph.out_indptr_indices``'s counting sort: the stable argsort, ties in order."""
    arr = np.array([k % n_keys for k in keys], dtype=np.int32)
    fast = stable_order_by_key(arr, n_keys)
    ref = topo_reference.stable_order_by_key(arr, n_keys)  # what the shortcut off runs
    assert fast.dtype == np.int32
    assert np.array_equal(ref, np.argsort(arr, kind="stable").astype(np.int32))
    assert np.array_equal(fast, ref)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(
    keys=st.lists(st.integers(0, 30), min_size=1, max_size=200),
    doms=st.lists(st.integers(0, 12), min_size=1, max_size=200),
    sort=st.booleans(),
)
def test_pair_counts_by_runs_equal_the_unique_count(
    keys: list[int], doms: list[int], sort: bool
) -> None:
    """Sorted combined keys count their runs; anything else takes the ``np.unique`` path."""
    n = min(len(keys), len(doms))
    k, d = np.array(keys[:n], np.int64), np.array(doms[:n], np.int64)
    if sort:  # leaves and domains numbered in GPU order, as the builders pass them
        k, d = np.sort(k), np.sort(d)
    both = np.unique(k * (int(d.max()) + 1) + d, return_inverse=True)[1].ravel()
    reference = topo_base.same_group_pairs(k, k) - topo_base.same_group_pairs(both, both)
    assert topo_base.pairs_not_same_domain(k, d) == reference


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    rows=st.integers(1, 6),
    width=st.integers(1, 40),
    seed=st.integers(0, 2**16),
    sort=st.booleans(),
)
def test_pair_counts_of_all_rails_at_once_equal_rail_by_rail(
    rows: int, width: int, seed: int, sort: bool
) -> None:
    """One call over every rail's keys (shifted apart) sums the per-rail counts exactly."""
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 12, (rows, width))
    dom = rng.integers(0, 5, width)
    if sort:  # as the builders pass them: each rail's leaves and the domains in GPU order
        keys, dom = np.sort(keys, axis=1), np.sort(dom)
    by_rail = 0.0
    for row in keys:  # the builders' former loop, with the np.unique count
        both = np.unique(row * (int(dom.max()) + 1) + dom, return_inverse=True)[1].ravel()
        by_rail += 8.0 * (
            topo_base.same_group_pairs(row, row) - topo_base.same_group_pairs(both, both)
        )
    assert 8.0 * topo_base.pairs_not_same_domain_rows(keys, dom) == by_rail


#: Builds that reach every pair-count pass: rail-optimized and not, 2 to 4 tiers, dragonfly+
#: and rail-only (its rails' fat-trees), partial domains.
BUILDS = {
    "fat-tree 2-tier": ("dgx-h100-ib-ndr", {"cluster.n_gpus": 256}),
    "fat-tree 3-tier partial": ("dgx-h100-ib-ndr", {"cluster.n_gpus": 6152, "fabric.tiers": 3}),
    "fat-tree 4-tier": ("dgx-h100-ib-ndr", {"cluster.n_gpus": 4096, "fabric.tiers": 4}),
    "not rail-optimized": ("dgx-h100-roce-ecmp", {"cluster.n_gpus": 1000}),
    "dragonfly+": ("dragonfly-plus-16k", {"cluster.n_gpus": 2048}),
    "rail-only": ("dgx-h100-ib-ndr", {"fabric.topology": "rail-only", "cluster.n_gpus": 1032}),
}


def _build(name: str) -> FabricContext:
    preset, over = BUILDS[name]
    return FabricContext.from_scenario(apply_overrides(load_preset(preset), over))


def _built(ctx: FabricContext) -> tuple[Any, Any, tuple[np.ndarray, np.ndarray]]:
    """What a build computes, evaluated now (some of it is computed on first use)."""
    topo = ctx.topology
    return topo.counts(), dict(topo.hop_histogram), topo.graph.out_indptr_indices


@pytest.mark.parametrize("name", list(BUILDS))
def test_fast_fabric_builds_equal_the_reference(name: str) -> None:
    """Hop histograms, counts and the outgoing-link CSR with the fast paths on and off."""
    fast = _build(name)
    fast_counts, fast_hops, fast_csr = _built(fast)
    # the kernels and pair-count runs off; the kept pod layouts emptied on the way in
    with fast_paths(out_order_kernel=False, pair_count_runs=False):
        ref = _build(name)
        ref_counts, ref_hops, ref_csr = _built(ref)
    assert fast_counts == ref_counts
    assert fast_hops == ref_hops
    for f in ("link_src", "link_dst", "link_capacity_Bps", "link_class", "node_tier"):
        assert np.array_equal(getattr(fast.topology.graph, f), getattr(ref.topology.graph, f))
    g = fast.topology.graph
    for cls in range(len(fast.topology.links)):  # the adaptive router's cable picks
        even = np.arange(g.n_links) % 2 == 0
        expected = np.flatnonzero((g.link_class == cls) & even)
        assert np.array_equal(fat_tree._cables_of_class(g, cls), expected)
    for a, b in zip(fast_csr, ref_csr, strict=True):
        assert a.dtype == b.dtype
        assert np.array_equal(a, b)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(ports=st.lists(st.integers(0, 9), max_size=80))
def test_port_groups_by_unique_equal_the_counter(ports: list[int]) -> None:
    """``fat_tree._groups``: NumPy's unique counts give the Python counter's groups."""
    arr = np.array(ports, dtype=np.int64)
    fast = topo_fat_tree._groups("spine", arr)
    counts = Counter(int(p) for p in arr if p > 0)  # the reference: count in Python
    ref = tuple(topo_base.PortGroup("spine", p, n) for p, n in sorted(counts.items(), reverse=True))
    assert fast == ref
    assert all(type(g.ports_per_switch) is int and type(g.n_switches) is int for g in fast)


def test_a_kept_pod_layout_is_the_computed_one() -> None:
    """``pod_layout``'s cache hands back the layout a fresh computation gives, read-only."""
    for args in ((40, 4, 8, 1.0, 64), (130, 8, 32, 7.0, 64), (33, 3, 16, 2.0, 32)):
        kept = topo_fat_tree.pod_layout(*args)
        assert topo_fat_tree.pod_layout(*args) is kept
        fresh = topo_fat_tree._pod_layout(*args)
        for f in dataclasses.fields(fresh):
            a, b = getattr(kept, f.name), getattr(fresh, f.name)
            if isinstance(b, np.ndarray):
                assert not a.flags.writeable
                assert a.dtype == b.dtype
                assert np.array_equal(a, b)
            else:
                assert a == b


@pytest.mark.parametrize("policy", ["adaptive", "ecmp", "dmodk"])
def test_cached_rail_parts_route_as_rebuilt_ones(policy: str) -> None:
    """The per-fabric cache of the rails' fat-trees routes every pattern as a rebuild does."""
    ctx = _build("rail-only")
    topo, cap = ctx.topology, ctx.capacity_Bps
    n_e, unit = topo.n_endpoints, int(topo.params["unit_gpus"]) * topo.request.nics_per_gpu
    src = np.arange(0, n_e - unit, 3, dtype=np.int64)
    dst = (src + unit * (1 + src % 5)) % n_e  # same rail, other domains
    dst = dst - dst % unit + src % unit
    keep = dst < n_e
    src, dst = src[keep], dst[keep]

    def routed(rebuild: bool) -> list[Any]:
        out = []
        for _ in range(2):  # the second call reads the cache, unless emptied
            if rebuild:
                clear_every_cache()
            rf = route(topo, src, dst, policy, cap, rng=np.random.default_rng(7))
            out.append(rf)
        return out

    fast, fast_members = routed(rebuild=False), rail_only.bundle_members(topo)
    ref = routed(rebuild=True)
    clear_every_cache()
    ref_members = rail_only.bundle_members(topo)
    for a, b in zip(fast_members, ref_members, strict=True):
        assert np.array_equal(a, b)
    for a, b in zip(fast, ref, strict=True):
        _same_flows(a, b)
        assert np.array_equal(a.link_capacity_Bps, b.link_capacity_Bps)
        assert np.array_equal(a.link_class, b.link_class)
        assert a.class_names == b.class_names
        assert np.array_equal(a.switch_hops, b.switch_hops)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    degrees=st.lists(st.sampled_from([1, 2, 3, 4, 8]), min_size=5, max_size=5),
    dim=st.sampled_from(sorted(DIMENSIONS)),
    dom=st.sampled_from([1, 2, 4, 8, 72]),
    pick=st.integers(0, 10**6),
)
def test_alike_groups_shortcut_equals_laying_out_every_group(
    degrees: list[int], dim: str, dom: int, pick: int
) -> None:
    """Groups moved by whole NVLink domains: group 0's answer stands for every group."""
    layout = Layout(*degrees)
    members, offsets = layout.members(dim), layout.offsets(dim)
    w = pick % offsets.size  # as GroupContext.for_dimension re-bases on its worst group
    cases = [
        (members, offsets),
        (members + offsets[w], np.sort((offsets - offsets[w]) % layout.n_gpus)),
    ]
    for mem, off in cases:
        fast = training_layout._slowest_group(mem, off, dom)
        with fast_paths(slowest_group=False):
            ref = training_layout._slowest_group(mem, off, dom)
        assert fast == ref


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    domains=st.integers(1, 12),
    dom=st.sampled_from([1, 2, 4, 8, 72]),
    nics=st.sampled_from([1, 2, 8]),
    n_logical=st.integers(0, 40),
    n_groups=st.integers(1, 6),
    seed=st.integers(0, 2**16),
)
def test_physical_endpoints_kernel_equals_the_numpy_expression(
    domains: int, dom: int, nics: int, n_logical: int, n_groups: int, seed: int
) -> None:
    """``GroupContext._physical``: the one-pass kernel against the NumPy form."""
    pick = np.random.default_rng(seed)
    n_gpus = domains * dom
    # the method reads only these fields of its context
    probe = SimpleNamespace(
        scenario=SimpleNamespace(cluster=SimpleNamespace(n_gpus=n_gpus, nvlink_domain=dom)),
        nics=nics,
        cluster_domain_order=pick.permutation(domains).astype(np.int64),
    )
    probe._gpu_place = training_layout.GroupContext._gpu_place.func(probe)  # type: ignore[arg-type]
    logical = pick.integers(0, n_gpus * nics, n_logical)
    # offsets as the model keeps them (mod the cluster), and beyond or below it
    offsets = np.sort(pick.integers(-n_gpus, 3 * n_gpus, n_groups)).astype(np.int64)
    method = training_layout.GroupContext._physical
    threshold = training_layout.PHYSICAL_KERNEL_MIN_ENTRIES
    try:
        training_layout.PHYSICAL_KERNEL_MIN_ENTRIES = 0  # the kernel at every size
        fast = method(probe, logical, offsets)  # type: ignore[arg-type]
        training_layout.PHYSICAL_KERNEL_MIN_ENTRIES = 2**62  # the NumPy expression
        ref = method(probe, logical, offsets)  # type: ignore[arg-type]
    finally:
        training_layout.PHYSICAL_KERNEL_MIN_ENTRIES = threshold
    assert fast.dtype == np.int64 and np.array_equal(fast, ref)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from([1.0, 2.0, 3.0, math.inf]), min_size=1, max_size=60),
    st.data(),
)
def test_first_popped_in_python_pops_as_the_kernel(levels: list[float], data: Any) -> None:
    """The pure-Python heap (small fabrics, no compiler) breaks ties as the solver's heap."""
    from fabric_model.collectives._heap_order import first_popped

    fill = np.asarray(levels)
    finite = np.flatnonzero(fill < math.inf)
    marks = data.draw(st.lists(st.booleans(), min_size=fill.size, max_size=fill.size))
    candidate = np.asarray(marks) & (fill < math.inf)
    if finite.size:  # the caller's candidates: links at the smallest level
        candidate &= fill == fill[finite].min()
    assert collectives_reference.first_popped_py(fill, candidate) == int(
        first_popped(fill, candidate)
    )
