"""Tests of the weighted max-min fair flow solver (fabric_model.flows)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_model.errors import FabricModelError
from fabric_model.flows import (
    FlowSet,
    FlowSolution,
    _kernels,
    _reference,
    flowset_from_paths,
    solve_maxmin,
)

RTOL = 1e-9
INF = math.inf


# --- helpers ---------------------------------------------------------------------------------


def flows_on_links(flows: FlowSet) -> list[np.ndarray]:
    """Flow ids crossing each link."""
    entry_flow = np.repeat(np.arange(flows.n_flows), np.diff(flows.flow_link_indptr))
    return [entry_flow[flows.flow_link_indices == link] for link in range(flows.n_links)]


def assert_feasible(flows: FlowSet, capacity_Bps: np.ndarray, sol: FlowSolution) -> None:
    """Rates >= 0, within demand, loads = sum w r, no link over capacity."""
    assert np.all(sol.rate_Bps >= 0.0)
    if flows.flow_demand_Bps is not None:
        assert np.all(sol.rate_Bps <= flows.flow_demand_Bps)
    entry_flow = np.repeat(np.arange(flows.n_flows), np.diff(flows.flow_link_indptr))
    expected_load = np.zeros(flows.n_links)
    np.add.at(
        expected_load, flows.flow_link_indices, flows.flow_link_weights * sol.rate_Bps[entry_flow]
    )
    np.testing.assert_allclose(sol.link_load_Bps, expected_load, rtol=1e-12, atol=0.0)
    assert np.all(sol.link_load_Bps <= capacity_Bps * (1.0 + RTOL))


def assert_maxmin_certificate(flows: FlowSet, capacity_Bps: np.ndarray, sol: FlowSolution) -> None:
    """Each flow is demand-limited, or its bottleneck is saturated and it has the top rate there.

    Bertsekas & Gallager, Data Networks, 2nd ed., section 6.5.2: a feasible allocation is
    max-min fair iff every flow has a bottleneck link (saturated, and no flow on it has a
    higher rate).
    """
    on_link = flows_on_links(flows)
    demand = np.full(flows.n_flows, INF) if flows.flow_demand_Bps is None else flows.flow_demand_Bps
    for f in range(flows.n_flows):
        path = flows.flow_link_indices[flows.flow_link_indptr[f] : flows.flow_link_indptr[f + 1]]
        link = int(sol.bottleneck_link[f])
        if link < 0:
            assert sol.rate_Bps[f] == demand[f], f"flow {f} marked demand-limited below demand"
            continue
        assert link in path, f"flow {f}: bottleneck {link} is not on its path"
        assert sol.link_load_Bps[link] >= capacity_Bps[link] * (1.0 - 2 * RTOL), (
            f"flow {f}: bottleneck {link} not saturated"
        )
        top_rate = sol.rate_Bps[on_link[link]].max()
        assert sol.rate_Bps[f] >= top_rate * (1.0 - 2 * RTOL), (
            f"flow {f}: another flow on its bottleneck {link} has a higher rate"
        )


@dataclass(frozen=True)
class Instance:
    """A random solver input: builder arguments plus capacities."""

    paths: list[list[tuple[int, float]]]
    n_links: int
    demand_Bps: list[float] | None
    capacity_Bps: np.ndarray

    def flowset(self) -> FlowSet:
        """Build the flow set (merging repeated links)."""
        return flowset_from_paths(self.paths, self.n_links, self.demand_Bps)


def random_instance(seed: int) -> Instance:
    """Varied small-to-medium instance: split flows, demands, repeats, ties, single links."""
    rng = np.random.default_rng(seed)
    large = seed % 10 == 9
    n_links = int(rng.integers(1, 400 if large else 30))
    n_flows = int(rng.integers(1, 1500 if large else 60))
    max_hops = int(rng.integers(1, min(n_links, 12) + 1))

    capacity_kind = seed % 3
    if capacity_kind == 0:
        capacity_Bps = rng.uniform(0.5, 10.0, n_links)
    elif capacity_kind == 1:  # few distinct values: exact ties between links
        capacity_Bps = rng.choice([1.0, 2.0, 4.0], n_links)
    else:  # realistic magnitudes, 25..200 GB/s
        capacity_Bps = 10.0 ** rng.uniform(np.log10(25e9), np.log10(200e9), n_links)
    scale_Bps = float(np.median(capacity_Bps))

    with_demand = seed % 4 != 0
    paths: list[list[tuple[int, float]]] = []
    demand_Bps: list[float] = []
    for _ in range(n_flows):
        u = rng.random()
        n_hops = 0 if u < 0.05 else 1 if u < 0.25 else int(rng.integers(1, max_hops + 1))
        links = rng.choice(n_links, n_hops, replace=False)
        weight_kind = rng.integers(3)
        if weight_kind == 0:
            weights = np.ones(n_hops)
        elif weight_kind == 1:  # spray evenly, NIC-like first hop at weight 1
            weights = np.full(n_hops, 1.0 / max(n_hops - 1, 1))
            weights[:1] = 1.0
        else:
            weights = rng.uniform(0.05, 1.0, n_hops)
        path = [(int(link), float(w)) for link, w in zip(links, weights, strict=True)]
        if path and rng.random() < 0.2:  # repeat a hop in two halves; the builder merges
            k = int(rng.integers(len(path)))
            link, w = path[k]
            path[k] = (link, w / 2)
            path.append((link, w / 2))
        paths.append(path)
        if not path or (with_demand and rng.random() < 0.3):
            demand_Bps.append(float(rng.choice([0.0, rng.uniform(0.01, 2.0) * scale_Bps])))
        else:
            demand_Bps.append(INF)
    has_demand = with_demand or not all(paths)
    return Instance(paths, n_links, demand_Bps if has_demand else None, capacity_Bps)


# --- kernel vs reference ---------------------------------------------------------------------


def test_kernel_is_jit_compiled() -> None:
    assert not numba.config.DISABLE_JIT  # type: ignore[attr-defined]
    for kernel in (_kernels.maxmin_fill, _kernels.first_flow_with_duplicate_link):
        assert isinstance(kernel, numba.core.registry.CPUDispatcher)
        assert kernel.signatures, "explicit signature should compile eagerly"


@pytest.mark.parametrize("seed", range(240))
def test_kernel_matches_reference(seed: int) -> None:
    inst = random_instance(seed)
    flows = inst.flowset()
    fast = solve_maxmin(flows, inst.capacity_Bps)
    slow = solve_maxmin(flows, inst.capacity_Bps, reference=True)
    np.testing.assert_allclose(fast.rate_Bps, slow.rate_Bps, rtol=RTOL, atol=0.0)
    np.testing.assert_allclose(fast.link_load_Bps, slow.link_load_Bps, rtol=RTOL, atol=0.0)
    for sol in (fast, slow):
        assert_feasible(flows, inst.capacity_Bps, sol)
        assert_maxmin_certificate(flows, inst.capacity_Bps, sol)


def test_random_instances_cover_the_advertised_cases() -> None:
    instances = [random_instance(seed) for seed in range(240)]
    hops = [hop for inst in instances for path in inst.paths for hop in path]
    assert any(w < 1.0 for _, w in hops), "split flows"
    assert any(len(p) == 1 for inst in instances for p in inst.paths), "single-link flows"
    assert any(not p for inst in instances for p in inst.paths), "empty paths"
    assert any(len({link for link, _ in p}) < len(p) for inst in instances for p in inst.paths), (
        "repeated links"
    )
    assert any(inst.demand_Bps and any(d < INF for d in inst.demand_Bps) for inst in instances)
    assert max(len(inst.paths) for inst in instances) > 1000


def test_kernel_accepts_plain_writable_arrays() -> None:
    indptr = np.array([0, 1, 2], dtype=np.int64)
    indices = np.array([0, 0], dtype=np.int32)
    weights = np.ones(2)
    rate, load = np.empty(2), np.empty(1)
    bottleneck = np.empty(2, dtype=np.int32)
    n_rounds = _kernels.maxmin_fill(
        indptr, indices, weights, np.array([3.0]), np.full(2, INF), rate, load, bottleneck
    )
    assert n_rounds == 1
    assert rate.tolist() == [1.5, 1.5]
    assert load.tolist() == [3.0]
    assert bottleneck.tolist() == [0, 0]


def test_kernel_terminates_on_nan_capacity() -> None:
    """Kernels never raise or hang on bad input; the public layer rejects it first."""
    rate, load = np.empty(1), np.empty(1)
    _kernels.maxmin_fill(
        np.array([0, 1], dtype=np.int64),
        np.array([0], dtype=np.int32),
        np.ones(1),
        np.array([np.nan]),
        np.array([INF]),
        rate,
        load,
        np.empty(1, dtype=np.int32),
    )
    assert np.isnan(rate[0])


@pytest.mark.parametrize("seed", range(40))
def test_duplicate_check_matches_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_links = int(rng.integers(1, 20))
    lengths = rng.integers(0, 6, int(rng.integers(1, 30)))
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    indices = rng.integers(0, n_links, int(indptr[-1])).astype(np.int32)
    assert _kernels.first_flow_with_duplicate_link(
        indptr, indices, n_links
    ) == _reference.first_flow_with_duplicate_link(indptr, indices, n_links)


# --- hand-checked cases ----------------------------------------------------------------------


@pytest.mark.parametrize("reference", [False, True])
def test_two_flows_share_one_link(reference: bool) -> None:
    flows = flowset_from_paths([[0], [0]], n_links=1)
    sol = solve_maxmin(flows, np.array([50e9]), reference=reference)
    assert sol.rate_Bps.tolist() == [25e9, 25e9]
    assert sol.bottleneck_link.tolist() == [0, 0]
    assert sol.utilization.tolist() == [1.0]


@pytest.mark.parametrize("reference", [False, True])
def test_bertsekas_gallager_three_link_example(reference: bool) -> None:
    """Check rates 1/3, 1/3, 1/3, 2/3 on three unit-capacity links.

    Flows 0, 1, 2 meet on link 0 and get 1/3 each; flow 3 shares link 1 with flow 0 and
    link 2 with flow 2, so it takes the 2/3 they leave.

    The shape of the progressive-filling illustration in Bertsekas & Gallager, Data
    Networks, 2nd ed., section 6.5.2 (rates 1/3, 1/3, 1/3, 2/3 on links of capacity 1).
    Filling: link 0 saturates at level 1/3 (three flows); links 1 and 2 then have 2/3 left
    for flow 3 alone and saturate together at 2/3.
    """
    flows = flowset_from_paths([[0, 1], [0], [0, 2], [1, 2]], n_links=3)
    sol = solve_maxmin(flows, np.ones(3), reference=reference)
    np.testing.assert_allclose(sol.rate_Bps, [1 / 3, 1 / 3, 1 / 3, 2 / 3], rtol=1e-15)
    np.testing.assert_allclose(sol.link_load_Bps, [1.0, 1.0, 1.0], rtol=1e-15)
    assert sol.bottleneck_link[:3].tolist() == [0, 0, 0]
    assert sol.bottleneck_link[3] in (1, 2)
    assert sol.n_rounds == 2


@pytest.mark.parametrize("reference", [False, True])
def test_parking_lot(reference: bool) -> None:
    """A long flow across n unit links, one short flow per link: everyone gets 1/2."""
    n = 5
    flows = flowset_from_paths([list(range(n))] + [[link] for link in range(n)], n_links=n)
    sol = solve_maxmin(flows, np.ones(n), reference=reference)
    np.testing.assert_allclose(sol.rate_Bps, np.full(n + 1, 0.5), rtol=1e-15)


@pytest.mark.parametrize("reference", [False, True])
def test_flow_split_over_two_parallel_links(reference: bool) -> None:
    flows = flowset_from_paths([[(0, 0.5), (1, 0.5)]], n_links=2)
    sol = solve_maxmin(flows, np.ones(2), reference=reference)
    assert sol.rate_Bps.tolist() == [2.0]
    assert sol.link_load_Bps.tolist() == [1.0, 1.0]


@pytest.mark.parametrize("reference", [False, True])
def test_split_flow_against_whole_flow(reference: bool) -> None:
    """Check that half a flow counts half on a link it shares with a whole flow.

    Flow 0 puts half its rate on link 0, flow 1 all of it: link 0 saturates when
    0.5 r + r = 1, so both get 2/3 although link 1 has room left.
    """
    flows = flowset_from_paths([[(0, 0.5), (1, 0.5)], [0]], n_links=2)
    sol = solve_maxmin(flows, np.ones(2), reference=reference)
    np.testing.assert_allclose(sol.rate_Bps, [2 / 3, 2 / 3], rtol=1e-15)
    np.testing.assert_allclose(sol.link_load_Bps, [1.0, 1 / 3], rtol=1e-15)


@pytest.mark.parametrize("reference", [False, True])
def test_demand_cap_leftover_goes_to_others(reference: bool) -> None:
    flows = flowset_from_paths([[0], [0], [0]], n_links=1, demand_Bps=[0.5, INF, 2.0])
    sol = solve_maxmin(flows, np.array([3.0]), reference=reference)
    assert sol.rate_Bps.tolist() == [0.5, 1.25, 1.25]
    assert sol.bottleneck_link.tolist() == [-1, 0, 0]
    assert sol.demand_limited.tolist() == [True, False, False]


@pytest.mark.parametrize("reference", [False, True])
def test_all_demand_limited_leaves_links_unsaturated(reference: bool) -> None:
    flows = flowset_from_paths([[0], [0, 1]], n_links=2, demand_Bps=[1.0, 0.0])
    sol = solve_maxmin(flows, np.array([10.0, 10.0]), reference=reference)
    assert sol.rate_Bps.tolist() == [1.0, 0.0]
    assert sol.bottleneck_link.tolist() == [-1, -1]
    assert sol.utilization.tolist() == [0.1, 0.0]


@pytest.mark.parametrize("reference", [False, True])
def test_flow_without_links_gets_its_demand(reference: bool) -> None:
    flows = flowset_from_paths([[], [0]], n_links=1, demand_Bps=[7.0, INF])
    sol = solve_maxmin(flows, np.array([2.0]), reference=reference)
    assert sol.rate_Bps.tolist() == [7.0, 2.0]
    assert sol.bottleneck_link.tolist() == [-1, 0]


def test_empty_flow_set() -> None:
    flows = flowset_from_paths([], n_links=2)
    sol = solve_maxmin(flows, np.ones(2))
    assert sol.n_flows == 0
    assert sol.link_load_Bps.tolist() == [0.0, 0.0]
    assert sol.min_rate_Bps == INF
    assert sol.n_rounds == 0


def test_solution_accessors_and_to_dict() -> None:
    flows = flowset_from_paths([[0], [0, 1]], n_links=2)
    sol = solve_maxmin(flows, np.array([10.0, 4.0]))
    assert sol.rate_Bps.tolist() == [6.0, 4.0]
    assert sol.min_rate_Bps == 4.0
    assert (sol.n_flows, sol.n_links) == (2, 2)
    d = json.loads(json.dumps(sol.to_dict()))
    assert d["rate_Bps"] == [6.0, 4.0]
    assert d["bottleneck_link"] == [0, 1]
    assert d["utilization"] == [1.0, 1.0]
    assert d["n_rounds"] == 2
    assert not sol.rate_Bps.flags.writeable


def test_flowset_normalises_dtypes_and_freezes_arrays() -> None:
    flows = FlowSet(np.array([0, 2], dtype=np.int32), np.array([1, 0]), np.array([1, 1]), 2)
    assert flows.flow_link_indptr.dtype == np.int64
    assert flows.flow_link_indices.dtype == np.int32
    assert flows.flow_link_weights.dtype == np.float64
    assert (flows.n_flows, flows.nnz) == (1, 2)
    with pytest.raises(ValueError, match="read-only"):
        flows.flow_link_weights[0] = 0.5


def test_builder_merges_repeated_links() -> None:
    flows = flowset_from_paths([[3, (1, 0.25), (3, 0.0), (1, 0.25)]], n_links=4)
    assert flows.flow_link_indices.tolist() == [3, 1]
    assert flows.flow_link_weights.tolist() == [1.0, 0.5]


def test_builder_accepts_numpy_integers() -> None:
    flows = flowset_from_paths([[np.int64(0), (np.int32(1), np.float32(0.5))]], n_links=2)
    assert flows.flow_link_weights.tolist() == [1.0, 0.5]


# --- properties ------------------------------------------------------------------------------


@st.composite
def solver_inputs(draw: st.DrawFn) -> tuple[FlowSet, np.ndarray]:
    n_links = draw(st.integers(1, 6))
    n_flows = draw(st.integers(0, 9))
    capacity = draw(st.lists(st.floats(0.1, 100.0), min_size=n_links, max_size=n_links))
    paths, demands = [], []
    for _ in range(n_flows):
        links = draw(st.lists(st.integers(0, n_links - 1), max_size=n_links, unique=True))
        paths.append([(link, draw(st.floats(0.01, 1.0))) for link in links])
        finite_demand = st.floats(0.0, 60.0)
        demands.append(draw(finite_demand if not links else st.just(INF) | finite_demand))
    return flowset_from_paths(paths, n_links, demands), np.array(capacity)


@settings(max_examples=300, deadline=None)
@given(solver_inputs())
def test_properties_of_the_kernel(inputs: tuple[FlowSet, np.ndarray]) -> None:
    flows, capacity_Bps = inputs
    sol = solve_maxmin(flows, capacity_Bps)
    assert_feasible(flows, capacity_Bps, sol)
    assert_maxmin_certificate(flows, capacity_Bps, sol)


@settings(max_examples=100, deadline=None)
@given(solver_inputs())
def test_properties_of_the_reference(inputs: tuple[FlowSet, np.ndarray]) -> None:
    flows, capacity_Bps = inputs
    sol = solve_maxmin(flows, capacity_Bps, reference=True)
    assert_feasible(flows, capacity_Bps, sol)
    assert_maxmin_certificate(flows, capacity_Bps, sol)


@settings(max_examples=200, deadline=None)
@given(solver_inputs())
def test_kernel_matches_reference_on_generated_inputs(inputs: tuple[FlowSet, np.ndarray]) -> None:
    flows, capacity_Bps = inputs
    fast = solve_maxmin(flows, capacity_Bps)
    slow = solve_maxmin(flows, capacity_Bps, reference=True)
    np.testing.assert_allclose(fast.rate_Bps, slow.rate_Bps, rtol=RTOL, atol=0.0)
    np.testing.assert_allclose(fast.link_load_Bps, slow.link_load_Bps, rtol=RTOL, atol=0.0)


@settings(max_examples=100, deadline=None)
@given(solver_inputs(), st.floats(1.5, 4.0))
def test_more_capacity_never_lowers_the_minimum_rate(
    inputs: tuple[FlowSet, np.ndarray], factor: float
) -> None:
    """The smallest rate is the first filling level, min(lowest demand, min_l c_l / W_l)."""
    flows, capacity_Bps = inputs
    before = solve_maxmin(flows, capacity_Bps)
    after = solve_maxmin(flows, capacity_Bps * factor)
    assert after.min_rate_Bps >= before.min_rate_Bps * (1.0 - 2 * RTOL)


# --- bad input -------------------------------------------------------------------------------


def csr(
    indptr: list[int], indices: list[int], weights: list[float], n_links: int, **kw: object
) -> FlowSet:
    return FlowSet(np.array(indptr), np.array(indices), np.array(weights), n_links, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("build", "match"),
    [
        pytest.param(
            lambda: csr([0, 1], [2], [1.0], 2),
            r"link id 2 .*out of range.*\[0, 1\]",
            id="index-too-big",
        ),
        pytest.param(
            lambda: csr([0, 1], [-1], [1.0], 2),
            r"flow_link_indices must lie in",
            id="index-negative",
        ),
        pytest.param(
            lambda: csr([0, 1], [0], [1.5], 2),
            r"weight 1\.5 .*must lie in \(0, 1\]",
            id="weight-above-1",
        ),
        pytest.param(
            lambda: csr([0, 1], [0], [0.0], 2),
            r"weight 0\.0 .*must lie in \(0, 1\]",
            id="weight-zero",
        ),
        pytest.param(lambda: csr([0, 1], [0], [math.nan], 2), r"weight nan", id="weight-nan"),
        pytest.param(
            lambda: csr([0, 2, 1, 2], [0, 1], [1.0, 1.0], 2), r"drops at flow 1", id="indptr-drops"
        ),
        pytest.param(
            lambda: csr([1, 2], [0, 1], [1.0, 1.0], 2), r"must start at 0", id="indptr-start"
        ),
        pytest.param(
            lambda: csr([0, 2], [0, 1], [1.0], 2),
            r"flow_link_weights has 1 entries",
            id="weights-length",
        ),
        pytest.param(
            lambda: csr([0, 2], [1, 1], [0.5, 0.5], 2),
            r"flow 0 lists a link more than once",
            id="duplicate-link",
        ),
        pytest.param(
            lambda: csr([0, 0], [], [], 2),
            r"flow 0 crosses no link and has no finite demand",
            id="empty-path-no-demand",
        ),
        pytest.param(
            lambda: csr([0, 1], [0], [1.0], 2, flow_demand_Bps=np.array([-1.0])),
            r">= 0",
            id="negative-demand",
        ),
        pytest.param(
            lambda: csr([0, 1], [0], [1.0], 2, flow_demand_Bps=np.ones(2)),
            r"has 2 entries",
            id="demand-length",
        ),
        pytest.param(
            lambda: FlowSet(np.array([0, 1]), np.array([0.0]), np.ones(1), 1),
            r"integers",
            id="float-indices",
        ),
        pytest.param(
            lambda: csr([0, 1], [0], [1.0], 1.5),  # type: ignore[arg-type]
            r"n_links must be an integer",
            id="n-links-float",
        ),
        pytest.param(
            lambda: flowset_from_paths([[(0, 0.7), (0, 0.7)]], 1),
            r"weight 1\.4",
            id="merged-weight-above-1",
        ),
        pytest.param(
            lambda: flowset_from_paths([[(0,)]], 1),  # type: ignore[list-item]
            r"flow 0: hop \(0,\) must be a link id",
            id="hop-tuple-length",
        ),
        pytest.param(
            lambda: flowset_from_paths([[0, "1"]], 2),  # type: ignore[list-item]
            r"hop '1'",
            id="hop-string",
        ),
    ],
)
def test_bad_flowset_is_rejected(build: object, match: str) -> None:
    with pytest.raises(FabricModelError, match=match):
        build()  # type: ignore[operator]


@pytest.mark.parametrize(
    ("capacity", "match"),
    [
        pytest.param(
            [1.0, -2.0], r"link_capacity_Bps\[1\] = -2\.0 must be finite and > 0", id="negative"
        ),
        pytest.param([1.0, 0.0], r"link_capacity_Bps\[1\] = 0\.0", id="zero"),
        pytest.param([math.nan, 1.0], r"link_capacity_Bps\[0\] = nan", id="nan"),
        pytest.param([math.inf, 1.0], r"link_capacity_Bps\[0\] = inf", id="inf"),
        pytest.param([1.0], r"has 1 entries.*n_links = 2", id="wrong-length"),
        pytest.param([[1.0, 1.0]], r"must be 1-D", id="not-1d"),
    ],
)
def test_bad_capacity_is_rejected(capacity: list[float], match: str) -> None:
    flows = flowset_from_paths([[0, 1]], n_links=2)
    with pytest.raises(FabricModelError, match=match):
        solve_maxmin(flows, np.array(capacity))
