"""Slices of an OCS design in the shared cluster (`schedule` on fabric.topology = ocs): shapes,
placement, each job's own circuits, no neighbours, spares, and the slice-packer-torus finding."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_model.cli import main
from fabric_model.presets import load_preset
from fabric_model.run.cluster_sim import Cluster, _Sim, job_step, run_schedule
from fabric_model.run.jobs import Job
from fabric_model.run.placement import SLICE_POLICIES
from fabric_model.run.slices import (
    box_shapes,
    find_box,
    random_box_slices,
    slice_blocks_needed,
    slice_rings,
    valid_shape,
)
from fabric_model.run.traffic import TrafficShape
from fabric_model.scenario import apply_overrides
from fabric_model.topology.torus3d import torus_dims

BASE = load_preset("dgx-h100-ib-ndr")
#: 32 blocks of one 8-GPU server each, a 4 x 4 x 2 grid, two spare blocks
OCS = apply_overrides(
    BASE,
    {
        "cluster.n_gpus": 256,
        "fabric.topology": "ocs",
        "ocs.circuits": "torus",
        "ocs.spare_blocks": 2,
    },
)
GOLDEN = yaml.safe_load((Path(__file__).parent / "golden" / "ocs_slices.yaml").read_text())


@pytest.fixture(scope="module")
def torus() -> Cluster:
    return Cluster.build(OCS)


@pytest.fixture(scope="module")
def installed() -> Cluster:
    """The same blocks on a torus installed once (ocs.reconfigure = never), no spares."""
    return Cluster.build(apply_overrides(OCS, {"ocs.reconfigure": "never", "ocs.spare_blocks": 0}))


def _shape(cl: Cluster, gpus: int) -> TrafficShape:
    return TrafficShape.from_step(job_step(cl.step_scenario, "llama3-8b", gpus, "auto"))


def _diameter(hops: np.ndarray) -> int:
    return int(hops.max())


# ------------------------------------------------------------------------------ shapes


def test_torus_slices_round_up_to_a_shape_of_the_grid(torus: Cluster) -> None:
    g = torus.layout.ocs
    assert g is not None and g.dims == (4, 4, 2) and g.n_blocks == 32
    # a job of 5 blocks is no 3D shape inside 4 x 4 x 2: it holds 6 (3 x 2 x 1); 13 and 14
    # are none either, so 16 (4 x 4 x 1)
    needed = {nb: slice_blocks_needed(g, nb, "ocs-slice") for nb in (2, 5, 7, 9, 13, 16, 32)}
    assert needed == {2: 2, 5: 6, 7: 8, 9: 9, 13: 16, 16: 16, 32: 32}
    assert slice_blocks_needed(g, 5, "ocs-any") == 5
    assert not valid_shape(5, g.dims) and valid_shape(6, g.dims)
    assert box_shapes(8, (4, 4, 2))[0] == (2, 2, 2)  # the most cubic first
    # a box may wrap around the grid's edges (the pod is a torus)
    free = np.zeros(32, dtype=bool)
    free[[3, 0, 7, 4]] = True  # x = 3 and x = 0 of rows y = 0, 1 in layer z = 0
    pos = find_box(free, (4, 4, 2), 4)
    assert pos is not None and sorted(pos.tolist()) == [0, 3, 4, 7]
    assert find_box(free, (4, 4, 2), 6) is None
    assert slice_rings((4, 2, 2), (4, 4, 2)) == (True, False, True)


def test_an_installed_box_keeps_a_ring_only_where_it_spans(installed: Cluster) -> None:
    """The installed torus's circuits among a box's blocks: a ring in a dimension it spans
    (the hop diameter counts d // 2 there), a line elsewhere (d - 1), as slice_rings says."""
    sf = installed.slices
    assert sf is not None and sf.grid.dims == (4, 4, 2)
    shape = _shape(installed, 16)
    for box in [(4, 1, 1), (3, 1, 1), (4, 3, 1), (4, 4, 2), (3, 3, 2)]:
        free = np.ones(32, dtype=bool)
        pos = find_box(free, (4, 4, 2), math.prod(box))
        assert pos is not None
        got = box_shapes(math.prod(box), (4, 4, 2))[0]
        rings = slice_rings(got, (4, 4, 2))
        want = sum(d // 2 if ring else d - 1 for d, ring in zip(got, rings, strict=True))
        circ = sf.circuits(tuple(pos.tolist()), shape)
        assert _diameter(circ.hops) == want, got


def test_slice_packer_torus_golden(torus: Cluster) -> None:
    """Held-out: random boxes of a static 16-ary 3-cube keep all three rings almost never
    (the source: 0 of 485); the OCS forms each torus slice's own torus (every ring closed)."""
    (case,) = GOLDEN["cases"]
    assert case["use"] == "held-out" and "slice-packer-torus" in case["source"]
    dims = tuple(case["grid"])
    boxes = random_box_slices(dims, case["slices"], np.random.default_rng(case["seed"]))
    rings = np.array([slice_rings(tuple(b), dims) for b in boxes.tolist()])
    assert int(rings.all(axis=1).sum()) == case["expect"]["full_torus"]
    assert (~rings.all(axis=1)).mean() == pytest.approx(case["expect"]["lost_a_ring_share"])
    # with the OCS: each torus slice of the scheduler (a count of blocks with a shape) gets
    # the diameter of a torus, sum of d // 2, not a mesh's
    sf = torus.slices
    assert sf is not None
    shape = _shape(torus, 16)
    full = []
    for n in (4, 6, 8, 12, 16, 32):
        circ = sf.circuits(tuple(range(n)), shape)
        full.append(_diameter(circ.hops) == sum(d // 2 for d in torus_dims(n)))
    assert np.mean(full) == pytest.approx(case["ocs_full_torus_share"])


# ------------------------------------------------------------------------------ invariants


def _block_of(cl: Cluster, node: int) -> int:
    g = cl.layout.ocs
    assert g is not None
    return node // g.nodes_per_block


def _is_box(blocks: list[int], dims: tuple[int, int, int]) -> bool:
    X, Y, _ = dims
    coords = np.array([(b % X, (b // X) % Y, b // (X * Y)) for b in blocks])
    spans = []
    for d, size in enumerate(dims):
        vals = sorted(set(coords[:, d].tolist()))
        # contiguous modulo the grid: one gap at most, around the wrap
        gaps = sum(1 for a, b in zip(vals, [*vals[1:], vals[0] + size], strict=True) if b - a > 1)
        if gaps > 1 or (gaps == 0 and len(vals) != size):
            return False
        spans.append(len(vals))
    return math.prod(spans) == len(blocks)


_JOB = st.tuples(
    st.integers(1, 12),  # blocks of 8 GPUs
    st.floats(0.0, 8.0),  # submit_h
    st.floats(0.5, 10.0),  # duration_h
)


@settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(jobs=st.lists(_JOB, min_size=4, max_size=10), policy=st.sampled_from(SLICE_POLICIES))
def test_slices_hold_their_blocks_alone_and_take_valid_shapes(torus: Cluster, jobs, policy) -> None:
    trace = [
        Job(f"j{i}", submit, 8 * nb, "llama3-8b", duration_h=dur, line=i + 1)
        for i, (nb, submit, dur) in enumerate(jobs)
    ]
    res = run_schedule(torus, trace, policy, 1.0, 0)
    g = torus.layout.ocs
    assert g is not None
    horizon = 24.0
    # no block holds two jobs at once when one of them is a slice (several blocks)
    spans: dict[int, list[tuple[float, float, int, bool]]] = defaultdict(list)
    for job, start, end, slots in res.segments:
        blocks = {_block_of(torus, n) for n, _ in slots}
        for b in blocks:
            spans[b].append((start, horizon if math.isnan(end) else end, job, len(blocks) > 1))
    for held in spans.values():
        for i, (s1, e1, j1, m1) in enumerate(held):
            for s2, e2, j2, m2 in held[i + 1 :]:
                if j1 != j2 and (m1 or m2):
                    assert e1 <= s2 or e2 <= s1
    # a torus slice is a shape of the grid; a box is a box
    for row in res.jobs:
        blocks = row.get("blocks") or []
        if len(blocks) < 2:
            continue
        if policy == "ocs-slice":
            assert valid_shape(len(blocks), g.dims)
        if policy == "ocs-box":
            assert _is_box(blocks, g.dims)
        assert len(blocks) == slice_blocks_needed(g, g.blocks_for(row["gpus"] // 8), policy)
    assert all(j["interference_slowdown"] in (None, 1.0) for j in res.jobs)


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_slice_routes_only_on_its_own_circuits_within_the_port_budget(
    torus: Cluster, installed: Cluster, data
) -> None:
    """Any blocks, any pattern: each block's circuits are at most its uplinks, and every link
    the job's routes cross is one of its own blocks' fibers or a pair of its own blocks."""
    cl = data.draw(st.sampled_from([torus, installed]))
    sf = cl.slices
    g = cl.layout.ocs
    assert sf is not None and g is not None
    nb = data.draw(st.integers(2, 10))
    if g.reconfigurable:
        blocks = data.draw(st.permutations(range(g.n_blocks)))[:nb]
        circuits = data.draw(st.sampled_from([None, "uniform", "ring", "job"]))
    else:
        pos = find_box(np.ones(32, dtype=bool), g.dims, data.draw(st.sampled_from([2, 4, 8])))
        assert pos is not None
        blocks, circuits = pos.tolist(), None
    blocks = tuple(int(b) for b in blocks)
    shape = _shape(cl, 8 * len(blocks))
    k = len(blocks) * g.nodes_per_block
    fr = sf.fabric(blocks, shape, circuits)
    circ = fr.ctx.topology.params["circuits_data"]
    per_block = np.bincount(np.concatenate([circ.a, circ.b]), minlength=len(blocks))
    assert per_block.max() <= g.uplinks
    assert len(set(zip(circ.a.tolist(), circ.slot.tolist(), strict=True))) == circ.a.size
    if circuits is None:
        mapped = sf.on_cluster(shape, k, blocks)
        n_fibers = 2 * g.n_built * g.uplinks
        fibers = mapped.links[mapped.links < n_fibers]
        assert set((fibers // 2 // g.uplinks).tolist()) <= set(blocks)
        pairs = mapped.links[mapped.links >= n_fibers] - n_fibers
        assert set((pairs // g.n_built).tolist()) | set((pairs % g.n_built).tolist()) <= set(blocks)


# ------------------------------------------------------------------------------ the fabric


def test_slices_share_nothing_and_too_few_circuits_slow_a_job() -> None:
    """Uniform circuits: three slices solved together on the cluster's link space run as fast
    as each alone (no neighbours), and a data-parallel ring over too few circuits between its
    blocks runs below the non-blocking fabric's rate (a placement slowdown)."""
    cl = Cluster.build(apply_overrides(OCS, {"ocs.circuits": "uniform"}))
    sf = cl.slices
    assert sf is not None
    shape = _shape(cl, 64)
    jobs = {
        "a": (shape, 8, tuple(range(0, 8))),
        "b": (shape, 8, (8, 31, 9, 30, 10, 29, 11, 28)),
        "c": (shape, 8, tuple(range(12, 20))),
    }
    joint = sf.joint(jobs)
    links = [set(sf.on_cluster(*job).links.tolist()) for job in jobs.values()]
    assert not (links[0] & links[1]) and not (links[1] & links[2]) and not (links[0] & links[2])
    for jid, job in jobs.items():
        assert joint[jid] == pytest.approx(sf.rates(*job))
    ref = sf.contiguous(shape, 8)
    got = sf.rates(*jobs["a"])
    assert got["dp"] < ref["dp"]
    res = run_schedule(cl, [Job("dp", 0.0, 64, "llama3-8b", duration_h=2.0, line=1)], None, 1.0, 0)
    (row,) = res.jobs
    assert row["placement_slowdown"] > 1.0 and row["interference_slowdown"] == 1.0


def test_shape_fragmentation_a_box_waits_where_a_torus_slice_starts(torus: Cluster) -> None:
    """Every other block of the grid's first layer held for long: a 20-block job (rounded to
    24 = 4 x 3 x 2) starts at once on any 24 free blocks, but no 24-block box is free, so
    under ocs-box it waits with 192 GPUs free: fragmentation by shape."""
    trace = [
        Job(f"s{i}", 0.0, 8, "llama3-8b", duration_h=1.0 if i % 2 else 100.0, line=i + 1)
        for i in range(16)
    ]
    trace.append(Job("big", 2.0, 160, "llama3-8b", duration_h=3.0, line=17))
    any_ = run_schedule(torus, trace, "ocs-slice", 0.5, 0)
    box = run_schedule(torus, trace, "ocs-box", 0.5, 0)
    big_any = {j["id"]: j for j in any_.jobs}["big"]
    big_box = {j["id"]: j for j in box.jobs}["big"]
    assert big_any["start_h"] == pytest.approx(2.0) and len(big_any["blocks"]) == 24
    assert big_box["start_h"] is None
    assert any_.summary["shape_fragmentation"] == 0.0
    assert box.summary["shape_fragmentation"] > 0.0
    # the timeline's last column: GPUs free while the head waits with enough of them free
    assert box.timeline[:, 5].max() >= 160


# ------------------------------------------------------------------------------ failures


def test_a_spare_block_takes_a_failed_blocks_place() -> None:
    """A node of a running slice fails: with a spare free the OCS puts the spare in its place
    and the job restarts from its checkpoint at once on its slice (no requeue, the block stays
    up); without one, and on the fat-tree (whose node drains), it requeues."""
    job = [Job("j", 0.0, 64, "llama3-8b", duration_h=10.0, line=1)]
    fail = [(2.0, "node", 0)]
    spare = Cluster.build(apply_overrides(OCS, {"ocs.spare_blocks": 1}))
    none = Cluster.build(apply_overrides(OCS, {"ocs.spare_blocks": 0}))
    tree = Cluster.build(apply_overrides(BASE, {"cluster.n_gpus": 256}))
    with_spare = _Sim(spare, job, "ocs-slice", 1.0, 0).run(fail)
    without = _Sim(none, job, "ocs-slice", 1.0, 0).run(fail)
    fat = _Sim(tree, job, "tree", 1.0, 0).run(fail)
    (a,), (b,), (c,) = with_spare.jobs, without.jobs, fat.jobs
    assert with_spare.summary["spare_swaps"] == 1 and a["interruptions"] == 1
    assert a["blocks"] == list(range(8))  # the same slice, the spare behind block 0
    assert len(with_spare.segments) == 1  # never released: restarted in place
    assert without.summary["spare_swaps"] == 0 and b["interruptions"] == 1
    assert 0 not in b["nodes"] and len(without.segments) == 2  # requeued, block 0 down
    assert c["interruptions"] == 1 and 0 not in c["nodes"] and len(fat.segments) == 2
    # the restart (from the checkpoint, plus setting circuits) costs the same either way; the
    # spare saves the wait for free blocks, which this empty cluster does not make
    assert a["status"] == b["status"] == "finished"
    assert a["end_h"] == pytest.approx(b["end_h"])


# ------------------------------------------------------------------------------ command line


def test_the_command_line_chooses_slices_on_ocs_and_refuses_the_others(capsys) -> None:
    args = ["schedule", "--generate", "30", "--days", "1", "--set", "cluster.n_gpus=256"]
    ocs = [*args, "--set", "fabric.topology=ocs"]
    assert main([*ocs, "--policy", "tree"]) == 2
    err = capsys.readouterr().err
    assert "--policy tree" in err and "fabric.topology = ocs" in err and "ocs-slice" in err
    assert main([*args, "--policy", "ocs-slice"]) == 2
    assert "fabric.topology = ocs only" in capsys.readouterr().err
    assert main([*ocs, "--compare-policies", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["policy"] == "ocs-slice" and set(out["policies"]) == set(SLICE_POLICIES)
    assert out["slices"]["grid_blocks"] == [4, 4, 2] and out["slices"]["block_gpus"] == 8
    assert {"shape_fragmentation", "spare_swaps"} <= set(out)
    assert all("blocks" in j for j in out["jobs"])
