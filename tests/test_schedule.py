"""The shared-cluster simulation (`schedule`): traces, policies, slowdowns, invariants."""

from __future__ import annotations

import dataclasses
import json
import math
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_model.cli import main
from fabric_model.presets import load_preset
from fabric_model.run.cluster_sim import (
    Cluster,
    job_step,
    run_schedule,
    schedule,
    step_with_factor,
)
from fabric_model.run.interference import FabricRates
from fabric_model.run.jobs import Job, TraceError, generate_jobs, load_jobs
from fabric_model.run.placement import POLICIES, blocks_spanned, leaves_spanned, place
from fabric_model.run.traffic import TrafficShape
from fabric_model.scenario import apply_overrides

BASE = load_preset("dgx-h100-ib-ndr")  # 1,024 H100, 128 DGX, a rail-optimized fat-tree


@pytest.fixture(scope="module")
def flat() -> Cluster:
    return Cluster.build(BASE)


@pytest.fixture(scope="module")
def tapered() -> Cluster:
    return Cluster.build(apply_overrides(BASE, {"fabric.oversubscription": 4}))


# ------------------------------------------------------------------------------ traces


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        ("a,0,16,llama3-8b,2\na,1,8,llama3-8b,1\n", 3, "id"),
        ("a,0,16,llama9,2\n", 2, "model"),
        ("a,-1,16,llama3-8b,2\n", 2, "submit_h"),
        ("a,0,0,llama3-8b,2\n", 2, "gpus"),
        ("a,0,8,llama3-8b,-2\n", 2, "duration_h"),
    ],
)
def test_bad_trace_names_line_and_field(text: str, line: int, field: str) -> None:
    with pytest.raises(TraceError) as err:
        load_jobs("t.csv", "id,submit_h,gpus,model,duration_h\n" + text)
    assert f"line {line}: {field}:" in str(err.value)


def test_yaml_trace_and_cli_refuses_a_job_larger_than_the_cluster(tmp_path, capsys) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(
        "jobs:\n  - {id: big, submit_h: 0, gpus: 4096, model: llama3-70b, duration_h: 1}\n"
    )
    assert [j.gpus for j in load_jobs(path)] == [4096]
    assert main(["schedule", "--jobs", str(path), "--days", "1"]) == 2
    err = capsys.readouterr().err
    assert "line 1" in err and "gpus:" in err and "1,024" in err


def test_generator_is_seeded_and_sourced() -> None:
    a = generate_jobs(200, 1024, np.random.default_rng(3))
    b = generate_jobs(200, 1024, np.random.default_rng(3))
    c = generate_jobs(200, 1024, np.random.default_rng(4))
    assert a == b and a != c
    assert all(1 <= j.gpus <= 256 for j in a)  # the cap: a quarter of the cluster


# ------------------------------------------------------------------------------ runs


def test_same_seed_same_result_and_the_contract(flat: Cluster) -> None:
    one = schedule(BASE, generate=60, days=2, seed=5, cluster=flat, compare=True)
    two = schedule(BASE, generate=60, days=2, seed=5, cluster=flat, compare=True)
    assert json.dumps(one, sort_keys=True) == json.dumps(two, sort_keys=True)
    keys = {
        "policy", "n_jobs", "days", "utilization", "goodput", "mean_wait_h", "p95_wait_h",
        "slowdown_p50", "slowdown_p95", "placement_slowdown_p50", "interference_slowdown_p50",
        "fragmentation", "interrupted_jobs", "useful_gpu_hours", "cost_per_useful_gpu_hour_usd",
        "block_sizes", "jobs", "policies",
    }  # fmt: skip
    assert keys <= set(one)
    assert set(one["policies"]) == set(POLICIES)
    job_keys = {"id", "gpus", "submit_h", "start_h", "end_h", "nodes", "slowdown",
                "placement_slowdown", "interference_slowdown", "interruptions"}  # fmt: skip
    assert all(job_keys <= set(j) for j in one["jobs"])


def _check_invariants(
    cluster: Cluster, jobs: list[Job], policy: str, days: float, seed: int, preempt: bool = False
) -> None:
    res = run_schedule(cluster, jobs, policy, days, seed, preempt)
    horizon = days * 24.0
    gpn = cluster.layout.gpus_per_node
    # no GPU holds two jobs at once: per node, the GPUs of overlapping allocations fit
    events: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for _, start, end, slots in res.segments:
        stop = horizon if math.isnan(end) else end
        for node, g in slots:
            events[node] += [(start, g), (stop, -g)]
    for ev in events.values():
        held = 0
        for _, g in sorted(ev, key=lambda e: (e[0], e[1])):
            held += g
            assert held <= gpn
    # every job finished, runs at the horizon, waits, or was not yet submitted
    assert set(res.status) == {j.id for j in jobs}
    for row in res.jobs:
        if row["status"] == "finished":
            assert row["end_h"] is not None and row["end_h"] <= horizon + 1e-9
        if row["status"] in ("queued", "not-submitted"):
            assert row["end_h"] is None
    assert res.busy_gpu_hours <= res.capacity_gpu_hours * (1 + 1e-12)
    assert 0 <= res.summary["goodput"] <= 1 + 1e-12


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 10_000), policy=st.sampled_from(POLICIES))
def test_invariants_hold(flat: Cluster, seed: int, policy: str) -> None:
    jobs = generate_jobs(40, flat.layout.n_gpus, np.random.default_rng(seed))
    _check_invariants(flat, jobs, policy, 2.0, seed)


@settings(
    max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 10_000), policy=st.sampled_from(POLICIES))
def test_preemption_never_runs_more_gpus_than_exist(flat: Cluster, seed: int, policy: str) -> None:
    rng = np.random.default_rng(seed)
    jobs = [
        dataclasses.replace(j, priority=int(rng.integers(0, 3)))
        for j in generate_jobs(40, flat.layout.n_gpus, rng)
    ]
    _check_invariants(flat, jobs, policy, 2.0, seed, preempt=True)


def test_a_high_priority_job_preempts_the_fewest_newest_low_ones(flat: Cluster) -> None:
    """128 nodes busy with eight 16-node jobs started an hour apart; a 32-node job of higher
    priority takes the two started last (Kueue: lowest priority, then newest first), which
    requeue and resume from their last checkpoint."""
    low = [Job(f"l{i}", float(i), 128, "llama3-8b", duration_h=30.0, line=i + 1) for i in range(8)]
    high = Job("high", 9.0, 256, "llama3-8b", duration_h=2.0, priority=1, line=9)
    res = run_schedule(flat, [*low, high], "first-fit", 1.0, 0, preempt=True)
    rows = {j["id"]: j for j in res.jobs}
    assert rows["high"]["start_h"] == pytest.approx(9.0)
    assert {j for j, r in rows.items() if r["preemptions"]} == {"l6", "l7"}
    assert res.summary["preempted_jobs"] == 2
    without = run_schedule(flat, [*low, high], "first-fit", 1.0, 0)
    assert {j["id"]: j["start_h"] for j in without.jobs}["high"] is None  # waits
    _check_invariants(flat, [*low, high], "first-fit", 1.0, 0, preempt=True)


def test_failures_interrupt_and_requeue(flat: Cluster) -> None:
    s = apply_overrides(BASE, {"reliability.server_failures_per_year": 100.0})
    cl = Cluster.build(s)
    jobs = [Job(f"j{i}", 0.0, 64, "llama3-8b", duration_h=20.0, line=i + 1) for i in range(4)]
    res = run_schedule(cl, jobs, "tree", 2.0, 1)
    assert res.summary["interrupted_jobs"] > 0
    assert res.summary["goodput"] < 1.0
    _check_invariants(cl, jobs, "tree", 2.0, 1)


# ------------------------------------------------------------------------------ the fabric


def _pairs_across_leaves(cluster: Cluster, n: int) -> dict[str, tuple[int, ...]]:
    """``n`` two-node jobs, each with one node under leaf group 0 and one under group 1."""
    lay = cluster.layout
    a = np.flatnonzero(lay.leaf_of == 0)
    b = np.flatnonzero(lay.leaf_of == 1)
    return {f"p{i}": (int(a[i]), int(b[i])) for i in range(n)}


DP16 = TrafficShape.data_parallel(16, 8)  # two DGX nodes, TP8 inside each, one DP ring


def test_non_blocking_adaptive_has_no_interference(flat: Cluster) -> None:
    rates = FabricRates(flat.ctx, flat.layout)
    running = {j: (DP16, n) for j, n in _pairs_across_leaves(flat, 16).items()}
    shared = rates.shared(running)
    for jid, (shape, nodes) in running.items():
        assert shared[jid]["dp"] == pytest.approx(rates.alone(jid, shape, nodes)["dp"], rel=1e-9)
        assert rates.alone(jid, shape, nodes)["dp"] == pytest.approx(
            rates.contiguous(shape, 2)["dp"], rel=1e-9
        )


def test_tapered_spine_slows_jobs_that_share_it(tapered: Cluster) -> None:
    rates = FabricRates(tapered.ctx, tapered.layout)
    running = {j: (DP16, n) for j, n in _pairs_across_leaves(tapered, 16).items()}
    shared = rates.shared(running)
    for jid, (shape, nodes) in running.items():
        assert rates.alone(jid, shape, nodes)["dp"] / shared[jid]["dp"] > 1.0 + 1e-6
    # and the step of a job whose data-parallel traffic is exposed grows with it
    from fabric_model.run.cluster_sim import job_step

    step = job_step(tapered.scenario, "llama3-8b", 16, "auto")
    factor = rates.alone("p0", *running["p0"])["dp"] / shared["p0"]["dp"]
    assert step_with_factor(step, factor) > step.step_time_s


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_tree_and_block_never_place_worse_than_first_fit(flat: Cluster, data) -> None:
    lay = flat.layout
    free = np.array(data.draw(st.lists(st.booleans(), min_size=lay.n_nodes, max_size=lay.n_nodes)))
    k = data.draw(st.integers(1, max(1, int(free.sum()))))
    ff = place("first-fit", lay, free, k)
    tree = place("tree", lay, free, k)
    if ff is None:
        return
    assert tree is not None and free[tree].all() and tree.size == k
    assert leaves_spanned(lay, tree) <= leaves_spanned(lay, ff)
    block = place("block", lay, free, k)
    if block is not None:
        assert free[block].all() and np.unique(block).size == k
        assert blocks_spanned(lay, block) <= blocks_spanned(lay, ff)


def test_dask_engine_matches_local(flat: Cluster) -> None:
    from fabric_model.run.schedule_seeds import schedule_seeds

    local = [schedule(BASE, generate=10, days=0.5, seed=s) for s in (0, 1)]
    dask = schedule_seeds(BASE, None, [0, 1], generate=10, days=0.5)
    assert json.dumps(local, sort_keys=True) == json.dumps(dask, sort_keys=True)


def test_neighbours_slow_the_running_jobs_steps(tapered: Cluster) -> None:
    """Sixteen jobs crossing the same two leaves of a 4:1 fat-tree: each alone runs at full
    rate (placement 1), together they share the leaves' uplinks (interference > 1)."""
    from fabric_model.run.cluster_sim import _Sim

    pairs = _pairs_across_leaves(tapered, 16)
    jobs = [Job(j, 0.0, 16, "llama3-8b", duration_h=10.0, line=i + 1) for i, j in enumerate(pairs)]
    sim = _Sim(tapered, jobs, "first-fit", 1.0, 0)
    for r in sim.runs:
        nodes = pairs[r.job.id]
        sim._start(r, 0.0, (nodes, [(n, 8) for n in nodes]))
    sim._refresh_interference(0.0)
    for r in sim.runs:
        assert r.place_sd == pytest.approx(1.0)
        assert r.sd > 1.0 + 1e-6


def test_a_job_split_over_nvlink_domains_pays_the_network() -> None:
    """GB200 NVL72 (18 trays a domain): 8 trays fit one domain, so contiguous the job sends
    nothing on the network; split 4 + 4 over two racks, its data-parallel bytes leave NVLink."""
    from fabric_model.run.cluster_sim import _Sim

    cl = Cluster.build(load_preset("gb200-nvl72-ndr"))
    together = tuple(range(36, 44))
    split = (0, 1, 2, 3, 18, 19, 20, 21)
    jobs = [Job(n, 0.0, 32, "llama3-8b", duration_h=5.0, line=i + 1) for i, n in enumerate("ab")]
    sim = _Sim(cl, jobs, "first-fit", 1.0, 0)
    a, b = sim.runs
    sim._start(a, 0.0, (together, [(n, 4) for n in together]))
    sim._start(b, 0.0, (split, [(n, 4) for n in split]))
    assert a.place_sd == 1.0
    assert 1.0 < b.place_sd < math.inf
    res = run_schedule(
        cl, generate_jobs(60, cl.layout.n_gpus, np.random.default_rng(2)), "first-fit", 2.0, 2
    )
    assert all(j["slowdown"] is None or math.isfinite(j["slowdown"]) for j in res.jobs)


def test_an_auto_job_plan_is_its_own_not_the_designs():
    # gb200-nvl72-ndr's recipe interleaves Llama 3 405B (VP4); a 70B job plans without it
    design = apply_overrides(load_preset("gb200-nvl72-ndr"), {"cluster.n_gpus": 9216})
    step = job_step(design, "llama3-70b", 2048, "auto")
    assert step.feasible and step.plan is not None and step.plan.vpp == 1
