"""Per-job traffic on the shared fabric (run/traffic.py, run/interference.py): every parallel
dimension that leaves an NVLink domain, the exactness of solving only the links jobs share,
and failed upper switches."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_model.flows import FlowSet, solve_maxmin
from fabric_model.presets import load_preset
from fabric_model.routing import route
from fabric_model.run.cluster_sim import Cluster, Job, _Sim
from fabric_model.run.interference import FabricRates
from fabric_model.run.traffic import TrafficShape, job_pattern
from fabric_model.scenario import apply_overrides
from fabric_model.training.layout import Layout

BASE = load_preset("dgx-h100-ib-ndr")  # 1,024 H100, 128 DGX, rail-optimized, adaptive routing
DP16 = TrafficShape.data_parallel(16, 8)
#: TP8 inside a node, 4 pipeline stages, DP 2: 8 nodes
PP = TrafficShape(
    Layout(tp=8, cp=1, ep=1, pp=4, edp=2),
    Layout(tp=8, cp=1, ep=1, pp=4, edp=2),
    (("dp", 1.0), ("pp", 0.5), ("tp", 3.0)),
)
#: an MoE job: TP8, EP4 over nodes, DP 2: 8 nodes
MOE = TrafficShape(
    Layout(tp=8, cp=1, ep=4, pp=1, edp=2),
    Layout(tp=8, cp=1, ep=4, pp=1, edp=2),
    (("dp", 1.0), ("ep", 2.0)),
)


@pytest.fixture(scope="module")
def tapered() -> Cluster:
    return Cluster.build(apply_overrides(BASE, {"fabric.oversubscription": 4}))


@pytest.fixture(scope="module")
def flat() -> FabricRates:
    cl = Cluster.build(BASE)
    return FabricRates(cl.ctx, cl.layout)


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_non_blocking_adaptive_never_slows_any_mix(flat: FabricRates, data) -> None:
    """1:1 fat-tree, adaptive routing: whatever the jobs' dimensions and nodes, every job runs
    at its contiguous rate alone and with the others (each NIC's weighted load is at most its
    capacity, and a non-blocking leaf's uplinks hold all its NICs)."""
    rates = flat
    free = list(range(rates.layout.n_nodes))
    jobs = {}
    for i, shape in enumerate(data.draw(st.lists(st.sampled_from([DP16, PP, MOE]), max_size=8))):
        k = shape.n_gpus // 8
        if len(free) < k:
            break
        nodes = sorted(data.draw(st.sets(st.sampled_from(free), min_size=k, max_size=k)))
        free = [n for n in free if n not in nodes]
        jobs[f"j{i}"] = (shape, tuple(nodes))
    shared = rates.shared(jobs)
    for j, (shape, nodes) in jobs.items():
        contig = rates.contiguous(shape, len(nodes))
        for d, rate in rates.alone(j, shape, nodes).items():
            assert rate == pytest.approx(contig[d], rel=1e-9)
            assert shared[j][d] == pytest.approx(rate, rel=1e-9)


def _old_ring_pattern(nodes: np.ndarray, per: int) -> tuple[np.ndarray, np.ndarray]:
    """The ring the simulator used before per-dimension traffic: node j of each one-server
    domain (rank order) sends from every NIC to the same NIC of the next node."""
    nxt = np.roll(nodes, -1)
    slot = np.arange(per)
    if nodes.size < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return (nodes[:, None] * per + slot).ravel(), (nxt[:, None] * per + slot).ravel()


@settings(max_examples=20, deadline=None)
@given(nodes=st.lists(st.integers(0, 127), min_size=2, max_size=12, unique=True))
def test_a_data_parallel_job_is_the_rail_matched_ring(nodes: list[int]) -> None:
    shape = TrafficShape.data_parallel(8 * len(nodes), 8)
    pat = job_pattern(shape, np.array(nodes), 8, 1, 1)
    src, dst = _old_ring_pattern(np.array(nodes), 8)
    assert sorted(zip(pat.src.tolist(), pat.dst.tolist(), strict=True)) == sorted(
        zip(src.tolist(), dst.tolist(), strict=True)
    )
    assert pat.dims == ("dp",) and (pat.split == 1.0).all()


def test_dimensions_that_leave_the_domain_and_their_weights() -> None:
    nodes = np.arange(8)
    pp = job_pattern(PP, nodes, 8, 1, 1)
    assert pp.dims == ("dp", "pp")  # TP8 stays inside each node
    assert pp.share.tolist() == pytest.approx([1 / 1.5, 0.5 / 1.5])
    sends = pp.dim == pp.dims.index("pp")
    # pipeline outermost (Megatron-Core's default order): stage s of each pipeline (nodes 2s
    # and 2s + 1) sends to stage s + 1, two nodes on, every GPU
    assert sends.sum() == 2 * 3 * 8
    assert set((pp.dst[sends] // 8 - pp.src[sends] // 8).tolist()) == {2}
    # data parallelism outermost (Llama 3's order): stage s on nodes s and 4 + s, one node on
    dp_last = Layout(tp=8, cp=1, ep=1, pp=4, edp=2, order="tp-cp-ep-pp-dp")
    near = job_pattern(TrafficShape(dp_last, dp_last, PP.comm_s), nodes, 8, 1, 1)
    sends = near.dim == near.dims.index("pp")
    assert set((near.dst[sends] // 8 - near.src[sends] // 8).tolist()) == {1}
    moe = job_pattern(MOE, nodes, 8, 1, 1)
    a2a = moe.dim == moe.dims.index("ep")
    # each GPU to the same GPU of the 3 other nodes of its EP group, a third of its NIC each
    assert a2a.sum() == 8 * 8 * 3
    assert moe.split[a2a] == pytest.approx(1 / 3)


def _reference(rates: FabricRates, jobs: dict) -> dict:
    """Every connection of every job (one-switch ones and NIC links included) in one solve."""
    ctx = rates.ctx
    g = ctx.topology.graph
    indptr_o, order = g.out_indptr_indices
    up = order[indptr_o[: ctx.topology.n_endpoints]].astype(np.int64)
    cap = ctx.capacity_Bps
    ids = sorted(jobs)
    pats = [rates.pattern(*jobs[j]) for j in ids]
    src = np.concatenate([p.src for p in pats])
    dst = np.concatenate([p.dst for p in pats])
    rf = route(ctx.topology, src, dst, ctx.policy, cap)
    conn_cap = np.minimum(cap[up[src]], cap[(up ^ 1)[dst]]) * np.concatenate(
        [p.split for p in pats]
    )
    share = np.concatenate([p.share[p.dim] for p in pats])
    f = rf.flows
    per = np.diff(f.flow_link_indptr)
    fc = rf.flow_of_connection
    flows = FlowSet(
        f.flow_link_indptr,
        f.flow_link_indices,
        f.flow_link_weights * np.repeat(share[fc], per),
        f.n_links,
        conn_cap[fc] * rf.flow_fraction,
        max_weight=f.max_weight,
    )
    sol = solve_maxmin(flows, rf.link_capacity_Bps)
    rate = np.full(src.size, np.inf)
    np.minimum.at(rate, fc, sol.rate_Bps / rf.flow_fraction)
    out, start = {}, 0
    for j, p in zip(ids, pats, strict=True):
        r = rate[start : start + p.n_connections] / p.split
        start += p.n_connections
        out[j] = {d: float(r[p.dim == i].min()) for i, d in enumerate(p.dims)}
    return out


def test_solving_only_shared_links_equals_the_full_solve(tapered: Cluster) -> None:
    """One-switch connections at their caps, NIC links out of the solve, components solved
    apart: the same rates as every connection of every job in one solve."""
    lay = tapered.layout
    rates = FabricRates(tapered.ctx, lay)
    leaf = [np.flatnonzero(lay.leaf_of == i) for i in range(3)]
    jobs = {
        **{f"p{i}": (DP16, (int(leaf[0][i]), int(leaf[1][i]))) for i in range(16)},
        "pp": (PP, tuple(sorted(int(n) for n in np.r_[leaf[0][20:24], leaf[2][:4]]))),
        "moe": (MOE, tuple(int(n) for n in np.r_[leaf[1][30:34], leaf[2][10:14]])),
        "inside": (PP, tuple(int(n) for n in leaf[2][18:26])),
    }
    got = rates.shared(jobs)
    want = _reference(rates, jobs)
    assert len(rates.components(jobs)) == 1  # the pairs, the pipeline and the MoE job meet
    for j in jobs:
        assert got[j].keys() == want[j].keys()
        for d in got[j]:
            assert got[j][d] == pytest.approx(want[j][d], rel=1e-9), (j, d)
    # leaf group 0's uplinks (a quarter of its NICs) carry the pairs' rings and the pipeline
    # job's sends from stage 1 to stage 2 (pipeline outermost: its data-parallel pairs are
    # neighbouring nodes of one leaf): both slower than alone
    alone = rates.alone("pp", *jobs["pp"])
    assert got["pp"]["pp"] < alone["pp"] and got["pp"]["dp"] == alone["dp"]
    assert got["p0"]["dp"] < rates.alone("p0", *jobs["p0"])["dp"]


def test_jobs_on_disjoint_leaves_are_solved_apart(tapered: Cluster) -> None:
    lay = tapered.layout
    rates = FabricRates(tapered.ctx, lay)
    leaf = [np.flatnonzero(lay.leaf_of == i) for i in range(3)]
    jobs = {
        "a": (DP16, (int(leaf[0][0]), int(leaf[1][0]))),
        "b": (DP16, (int(leaf[0][1]), int(leaf[1][1]))),
        "c": (DP16, (int(leaf[2][0]), int(leaf[2][1]))),  # one leaf group, one rail each
    }
    assert sorted(map(sorted, rates.components(jobs))) == [["a", "b"]]
    assert rates.shared(jobs) == rates.full_solve(jobs)


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_failed_spine_never_speeds_a_job_up(tapered: Cluster, data) -> None:
    """Adaptive routing on a 4:1 fat-tree: with any upper switch down, no job runs faster
    alone, and the slowest job of a joint solve is no faster (the first level of progressive
    filling is ``min_l capacity_l / load_l``, and a failure only lowers capacities)."""
    lay = tapered.layout
    rates = FabricRates(tapered.ctx, lay)
    spine = int(data.draw(st.sampled_from(tapered.upper_switches.tolist())))
    leaf = [np.flatnonzero(lay.leaf_of == i) for i in range(3)]
    n = data.draw(st.integers(2, 12))
    picks = data.draw(st.lists(st.integers(0, 25), min_size=n, max_size=n, unique=True))
    jobs = {
        f"j{i}": (DP16, (int(leaf[i % 3][k]), int(leaf[(i + 1) % 3][k])))
        for i, k in enumerate(picks)
    }
    jobs["pp"] = (PP, tuple(int(x) for x in np.r_[leaf[0][40:44], leaf[1][40:44]]))
    healthy = {j: rates.alone(j, *jobs[j]) for j in jobs}
    together = rates.shared(jobs)
    assert not rates.cuts_paths(("switch", spine))
    rates.fail(("switch", spine))
    for j in jobs:
        for d, r in rates.alone(j, *jobs[j]).items():
            assert r <= healthy[j][d] * (1 + 1e-9)
    degraded = rates.shared(jobs)
    assert min(min(v.values()) for v in degraded.values()) <= min(
        min(v.values()) for v in together.values()
    ) * (1 + 1e-9)
    rates.repair(("switch", spine))
    assert rates.shared(jobs) == together


def test_a_spine_failure_degrades_the_running_jobs_until_repair(tapered: Cluster) -> None:
    """A spine down: the jobs crossing it are slowed, none is interrupted; repaired, they
    run as before."""
    lay = tapered.layout
    leaf = [np.flatnonzero(lay.leaf_of == i) for i in range(2)]
    pairs = {f"p{i}": (int(leaf[0][i]), int(leaf[1][i])) for i in range(24)}
    jobs = [Job(j, 0.0, 16, "llama3-8b", duration_h=10.0, line=i + 1) for i, j in enumerate(pairs)]
    sim = _Sim(tapered, jobs, "first-fit", 1.0, 0)
    for r in sim.runs:
        sim._start(r, 0.0, (pairs[r.job.id], [(n, 8) for n in pairs[r.job.id]]))
    sim._refresh_interference(0.0)
    before = [(r.place_sd, r.sd) for r in sim.runs]
    sim._fail(0.5, "spine", 0)
    assert sim.rates.state == {("switch", int(tapered.upper_switches[0]))}
    sim._refresh_interference(0.5)
    assert all(r.state == "running" and r.interruptions == 0 for r in sim.runs)
    after = [(r.place_sd, r.sd) for r in sim.runs]
    assert all(a[0] >= b[0] - 1e-12 for a, b in zip(after, before, strict=True))
    assert any(a[1] > b[1] + 1e-9 for a, b in zip(after, before, strict=True))
    for part in list(sim.rates.state):
        sim.rates.repair(part)
    sim._refresh_interference(1.0)
    assert np.array([(r.place_sd, r.sd) for r in sim.runs]) == pytest.approx(np.array(before))


def test_static_ecmp_moves_flows_off_every_dead_spine() -> None:
    """RoCE with static ECMP, half the spines down: every job's flows hashed onto one move to
    a live spine (never onto another dead one), the others keep their paths."""
    cl = Cluster.build(load_preset("dgx-h100-roce-ecmp"))
    lay = cl.layout
    rates = FabricRates(cl.ctx, lay, seed=3)
    leaf = [np.flatnonzero(lay.leaf_of == i) for i in range(2)]
    jobs = {f"j{i}": (DP16, (int(leaf[0][i]), int(leaf[1][i]))) for i in range(24)}
    healthy = rates.shared(jobs)
    spines = cl.upper_switches[: cl.upper_switches.size // 2].tolist()
    for s in spines:
        assert not rates.cuts_paths(("switch", int(s)))
        rates.fail(("switch", int(s)))
    degraded = rates.shared(jobs)
    g = cl.ctx.topology.graph
    dead = np.isin(g.link_src, spines) | np.isin(g.link_dst, spines)
    for j in jobs:
        routed, _ = rates._routed_for(j, *jobs[j], rates.state)
        assert not dead[routed.indices[routed.indices < dead.size]].any()
        assert 0 < degraded[j]["dp"] < np.inf
    assert min(v["dp"] for v in degraded.values()) <= min(v["dp"] for v in healthy.values())
