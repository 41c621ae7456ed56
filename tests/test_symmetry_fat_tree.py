"""The orbit solve of a uniform all-to-all on fat-trees, rail-only fabrics, planes, dragonfly+.

:mod:`fabric_model.collectives.symmetry` solves one flow per orbit of flow classes; here it is
held equal (1e-9) to the full class solve (``fast_paths(symmetry=False)``) on designs where
both run, and to an explicit solve of every connection over separate plane copies. Where the
build is not uniform (a partial pod or scalable unit, a degraded link, a switch down) it
falls back to every class.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_model._fastpaths import fast_paths
from fabric_model.collectives import FabricContext, symmetry
from fabric_model.flows import FlowSet, solve_maxmin
from fabric_model.routing import route
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.topology import build_topology_from_request


def ctx_of(**kw: object) -> FabricContext:
    return FabricContext.from_scenario(
        apply_overrides(Scenario(), {k.replace("__", "."): v for k, v in kw.items()})
    )


def components(ctx: FabricContext, rail: bool) -> list[np.ndarray]:
    """The all-to-all's endpoint sets, as ``alltoall_model`` builds them."""
    n, d, m = ctx.n_ranks, ctx.domain, ctx.n_domains
    if rail:
        return [ctx.endpoint(np.arange(m), np.full(m, k)) for k in range(d * ctx.nics)]
    gpu = np.arange(n, dtype=np.int64)
    return [ctx.rank_endpoint(gpu, k) for k in range(ctx.nics)]


def both(ctx: FabricContext, rail: bool):  # type: ignore[no-untyped-def]
    sym, n_sym = ctx.solve_all_to_all(components(ctx, rail), full=True)
    with fast_paths(symmetry=False):
        full, n_full = ctx.solve_all_to_all(components(ctx, rail), full=True)
    return sym, n_sym, full, n_full


def assert_equal(sym, full) -> None:  # type: ignore[no-untyped-def]
    assert sym.rate_Bps == pytest.approx(full.rate_Bps, rel=1e-9)
    assert sym.mean_rate_Bps == pytest.approx(full.mean_rate_Bps, rel=1e-9)
    assert sym.mean_switch_hops == pytest.approx(full.mean_switch_hops, rel=1e-9)
    assert sym.max_switch_hops == full.max_switch_hops


B300_LOSSY = {"cluster__gpu": "b300", "fabric__vendor": "lossy-ethernet", "fabric__link_gbps": 800}

SYMMETRIC = [
    # 2 tiers, rail-optimized: 4 SUs of 32 servers, 32 leaves
    pytest.param({"cluster__n_gpus": 1024}, id="fat-tree-2tier"),
    # 3 tiers: 4 pods of 32 leaves (4 SUs of 8 rails each), non-blocking
    pytest.param({"cluster__n_gpus": 4096}, id="fat-tree-3tier"),
    # 3:1 leaves (48 down, 16 up): 3 pods of 4 SUs; the leaf uplink bundles bind
    pytest.param(
        {"cluster__n_gpus": 4608, "fabric__oversubscription": 3}, id="fat-tree-3tier-3to1"
    ),
    # 3:1 at the spines too: the pod bundles bind
    pytest.param(
        {"cluster__n_gpus": 4608, "fabric__spine_oversubscription": 3},
        id="fat-tree-3tier-spine-3to1",
    ),
    pytest.param(
        {"cluster__n_gpus": 4096, "fabric__rail_optimized": False}, id="fat-tree-tor-leaves"
    ),
    pytest.param(
        {"cluster__n_gpus": 3072, "fabric__oversubscription": 3, "cluster__nics_per_gpu": 2},
        id="fat-tree-2-nics",
    ),
    pytest.param({"cluster__n_gpus": 16384, "fabric__vendor": "roce"}, id="fat-tree-ecmp"),
    # 8 planes of 100G (2 tiers per plane), 3:1; and one of them down
    pytest.param(
        {**B300_LOSSY, "fabric__planes": 8, "cluster__n_gpus": 6144, "fabric__oversubscription": 3},
        id="8-planes",
    ),
    pytest.param(
        {
            **B300_LOSSY,
            "fabric__planes": 2,
            "cluster__n_gpus": 4096,
            "what_if__failed_planes": 1,
        },
        id="2-planes-one-down",
    ),
    pytest.param(
        {"cluster__n_gpus": 4608, "fabric__oversubscription": 3, "fabric__topology": "rail-only"},
        id="rail-only-3to1",
    ),
    pytest.param(
        {"cluster__n_gpus": 16384, "fabric__topology": "rail-only", "fabric__vendor": "spectrum-x"},
        id="rail-only-2tier",
    ),
    pytest.param(
        {
            **B300_LOSSY,
            "fabric__planes": 4,
            "fabric__topology": "rail-only",
            "cluster__n_gpus": 8192,
        },
        id="rail-only-4-planes",
    ),
    # dragonfly+ with a partial last group (24 of 32 leaves, its SUs full): one source per
    # group; and with full groups: one source leaf
    pytest.param(
        {
            "fabric__topology": "dragonfly-plus",
            "cluster__n_gpus": 3840,
            "fabric__oversubscription": 3,
        },
        id="dragonfly-partial-group",
    ),
    pytest.param(
        {
            "fabric__topology": "dragonfly-plus",
            "cluster__n_gpus": 6144,
            "fabric__oversubscription": 3,
        },
        id="dragonfly-full-groups",
    ),
    # ... and a partial last SU (32 of 48 servers) in the partial last group: its leaves are
    # an orbit apart (as in every 1,048,576-GPU dragonfly+ of radix 144)
    pytest.param(
        {
            "fabric__topology": "dragonfly-plus",
            "cluster__n_gpus": 4096,
            "fabric__oversubscription": 3,
        },
        id="dragonfly-partial-su",
    ),
]


@pytest.mark.parametrize("kw", SYMMETRIC)
@pytest.mark.parametrize("rail", [False, True], ids=["direct", "rail-aligned"])
def test_orbit_solve_equals_every_class(kw, rail):
    ctx = ctx_of(**kw)
    if not rail and ctx.topology.family == "rail-only":
        pytest.skip("rail-only runs the rail-aligned all-to-all only")
    sym, n_sym, full, n_full = both(ctx, rail)
    assert n_sym < n_full
    assert_equal(sym, full)


def test_one_source_leaf_on_a_full_fat_tree():
    ctx = ctx_of(cluster__n_gpus=4096)  # 128 leaves
    _, n_sym, _, n_full = both(ctx, False)
    assert (n_sym, n_full) == (128, 128**2)


@pytest.mark.parametrize(
    "kw",
    [
        pytest.param({"cluster__n_gpus": 4096, "what_if__degraded_link_factor": 0.5}, id="nic"),
        pytest.param(
            {
                "cluster__n_gpus": 4096,
                "what_if__degraded_link_factor": 0.5,
                "what_if__degraded_link": "spine-core",
            },
            id="spine-core",
        ),
        pytest.param({"cluster__n_gpus": 2560}, id="partial-pod"),  # 80 leaves, pods of 32
        pytest.param({"cluster__n_gpus": 4000}, id="partial-su"),
        pytest.param(
            {
                **B300_LOSSY,
                "fabric__planes": 2,
                "cluster__n_gpus": 4096,
                "what_if__failed_switch": "leaf",
            },
            id="switch-down",
        ),
    ],
)
def test_a_non_uniform_build_solves_every_class(kw):
    ctx = ctx_of(**kw)
    sym, n_sym, full, n_full = both(ctx, False)
    assert n_sym == n_full
    assert_equal(sym, full)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(
    n_su=st.integers(1, 12),
    oversubscription=st.sampled_from([1, 3]),
    rail_optimized=st.booleans(),
    nics=st.sampled_from([1, 2]),
    rail=st.booleans(),
)
def test_orbit_solve_equals_every_class_on_random_fat_trees(
    n_su: int, oversubscription: int, rail_optimized: bool, nics: int, rail: bool
) -> None:
    """Whatever the build (full pods or not), the answer is the full class solve's."""
    down = 32 if oversubscription == 1 else 48  # radix-64 leaves
    ctx = ctx_of(
        cluster__n_gpus=n_su * down * 8 // nics,
        cluster__nics_per_gpu=nics,
        fabric__oversubscription=oversubscription,
        fabric__rail_optimized=rail_optimized,
    )
    sym, _ = ctx.solve_all_to_all(components(ctx, rail), full=True)
    with fast_paths(symmetry=False):
        full, _ = ctx.solve_all_to_all(components(ctx, rail), full=True)
    assert_equal(sym, full)


def _explicit_plane_copies(ctx: FabricContext, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Every connection split into one flow per plane, each plane a separate copy of its links.

    Plane ``p`` runs at the rate the plane what-ifs leave it (one plane at
    ``what_if.degraded_plane_factor``); returns each connection's rate summed over planes.
    """
    topo = ctx.topology
    planes = topo.planes
    plane = build_topology_from_request(topo.family, dataclasses.replace(topo.request, planes=1))
    factors = [1.0] * planes
    factors[-1] = ctx.scenario.what_if.degraded_plane_factor
    rf = route(plane, src, dst, "adaptive", plane.graph.link_capacity_Bps)
    fl, n = rf.flows, rf.link_capacity_Bps.size
    lengths = np.diff(fl.flow_link_indptr)
    indptr = np.concatenate([[0], np.cumsum(np.tile(lengths, planes))])
    indices = np.concatenate([fl.flow_link_indices + p * n for p in range(planes)])
    weights = np.tile(fl.flow_link_weights, planes)
    cap = np.concatenate([rf.link_capacity_Bps * f for f in factors])
    sol = solve_maxmin(FlowSet(indptr, indices, weights, planes * n), cap)
    per_plane = sol.rate_Bps.reshape(planes, -1) / rf.flow_fraction
    conn = np.zeros(src.size)
    for p in range(planes):
        np.add.at(conn, rf.flow_of_connection, per_plane[p])
    return conn


@pytest.mark.parametrize("degraded", [1.0, 0.5])
def test_orbit_solve_equals_an_explicit_multi_plane_solve(degraded: float) -> None:
    """On one plane's graph, x planes, the orbit solve is every connection over every plane."""
    ctx = ctx_of(
        **B300_LOSSY,
        fabric__planes=2,
        cluster__n_gpus=1024,
        what_if__degraded_plane_factor=degraded,
    )
    comps = components(ctx, True)
    sym, n_sym = ctx.solve_all_to_all(comps, full=True)
    assert n_sym == 2  # one source leaf, to the two leaves of its rail
    m = ctx.n_domains
    pairs = np.array([(i, j) for i in range(m) for j in range(m) if i != j])
    src = np.concatenate([c[pairs[:, 0]] for c in comps])
    dst = np.concatenate([c[pairs[:, 1]] for c in comps])
    explicit = _explicit_plane_copies(ctx, src, dst)
    assert sym.rate_Bps == pytest.approx(explicit.min(), rel=1e-9)
    assert sym.mean_rate_Bps == pytest.approx(explicit.mean(), rel=1e-9)


# ------------------------------------------------------------ NIC-slot copies (ring, tree)


def tree_pattern(ctx: FabricContext) -> tuple[np.ndarray, np.ndarray]:
    """NCCL's double binary tree over domains on every used NIC slot, as ``tree_model``."""
    from fabric_model.collectives.algorithms import _dtree_edges

    edges = _dtree_edges(ctx.n_domains)
    k = ctx.nics_used_per_domain
    a = np.repeat(np.concatenate([edges[:, 0], edges[:, 1]]), k)
    b = np.repeat(np.concatenate([edges[:, 1], edges[:, 0]]), k)
    s = np.tile(ctx.slots_spread(k), 2 * edges.shape[0])
    return ctx.endpoint(a, s), ctx.endpoint(b, s)


def ring_pattern(ctx: FabricContext) -> tuple[np.ndarray, np.ndarray]:
    from fabric_model.collectives.algorithms import _ring_pattern

    return _ring_pattern(ctx, ctx.slots_spread(ctx.nics_used_per_domain))


SLOT_DESIGNS = [
    pytest.param({"cluster__n_gpus": 4608, "fabric__spine_oversubscription": 3}, id="3-tier"),
    # 7:1 at the spines, domains scattered: the pod bundles (every copy crosses) bind
    pytest.param(
        {
            "cluster__n_gpus": 5376,
            "fabric__spine_oversubscription": 7,
            "what_if__placement": "scattered",
        },
        id="pods-bind",
    ),
    pytest.param(
        {"cluster__n_gpus": 4096, "fabric__oversubscription": 3, "fabric__rail_optimized": False},
        id="tor-leaves",
    ),
    pytest.param(
        {"cluster__n_gpus": 2048, "fabric__oversubscription": 3, "cluster__nics_per_gpu": 2},
        id="2-nics",
    ),
    pytest.param(
        {**B300_LOSSY, "fabric__planes": 8, "cluster__n_gpus": 6144, "fabric__oversubscription": 3},
        id="8-planes",
    ),
    pytest.param(
        {"cluster__n_gpus": 4608, "fabric__oversubscription": 3, "fabric__topology": "rail-only"},
        id="rail-only",
    ),
    pytest.param(
        {
            "fabric__topology": "dragonfly-plus",
            "cluster__n_gpus": 4096,
            "fabric__oversubscription": 3,
        },
        id="dragonfly",
    ),
    pytest.param(
        {
            "fabric__topology": "dragonfly-plus",
            "cluster__n_gpus": 6144,
            "fabric__oversubscription": 3,
            "fabric__rail_optimized": False,
        },
        id="dragonfly-tor",
    ),
]


@pytest.mark.parametrize("kw", SLOT_DESIGNS)
@pytest.mark.parametrize("pattern", [tree_pattern, ring_pattern], ids=["tree", "ring"])
def test_one_slot_copy_equals_every_connection(kw, pattern, monkeypatch):
    monkeypatch.setattr(symmetry, "SLOT_MIN_CONNECTIONS", 0)
    ctx = ctx_of(**kw)
    src, dst = pattern(ctx)
    one = symmetry.solve_slot_copies(ctx, src, dst, full=True)
    assert one is not None
    every = ctx._solve(src, dst, None, full=True)
    assert_equal(one, every)
    fast = symmetry.solve_slot_copies(ctx, src, dst)  # the first-round path
    assert fast.rate_Bps == pytest.approx(every.rate_Bps, rel=1e-9)


@pytest.mark.parametrize(
    "kw",
    [
        pytest.param({"cluster__n_gpus": 4096, "fabric__vendor": "roce"}, id="ecmp"),
        pytest.param(
            {"cluster__n_gpus": 4096, "what_if__degraded_link_factor": 0.5}, id="degraded"
        ),
        pytest.param(
            {
                **B300_LOSSY,
                "fabric__planes": 2,
                "cluster__n_gpus": 4096,
                "what_if__failed_switch": "leaf",
            },
            id="switch-down",
        ),
    ],
)
def test_slot_copies_need_a_symmetric_adaptive_fabric(kw, monkeypatch):
    monkeypatch.setattr(symmetry, "SLOT_MIN_CONNECTIONS", 0)
    ctx = ctx_of(**kw)
    assert symmetry.solve_slot_copies(ctx, *tree_pattern(ctx)) is None


def test_a_pattern_that_is_not_slot_copies_is_left_alone(monkeypatch):
    monkeypatch.setattr(symmetry, "SLOT_MIN_CONNECTIONS", 0)
    ctx = ctx_of(cluster__n_gpus=4096)
    src, dst = tree_pattern(ctx)
    dst = dst.copy()
    dst[[0, 1]] = dst[[1, 0]]  # slots 0 and 1 of one connection swapped: no longer copies
    assert symmetry.solve_slot_copies(ctx, src, dst) is None
