"""Optical-circuit-switched fabrics (``fabric.topology = ocs``): counts, circuits, routes, step.

The invariants: closed-form counts (uplinks per block, OCS count), no block with more
circuits than uplinks and every circuit on one OCS, routes over existing circuits only (a
trunk per circuit pair, the two fibers of a circuit), the ring circuits giving the ring
all-reduce a direct path and beating the uniform spread at it, all-to-all never faster than a
non-blocking fat-tree of the same link rate, the per-phase reconfiguration adding exactly
its time, the kernels equal to their readable twins, the exports agreeing with the bill, and
bad keys refused with exit 2 naming the key.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_model.cli import main
from fabric_model.collectives import AlgorithmUnavailableError, FabricContext, collective
from fabric_model.plant.cost import bill_of_materials
from fabric_model.plant.design import build_topology
from fabric_model.plant.ocs import ocs_summary, slice_availability
from fabric_model.report.export import export_design
from fabric_model.routing import route
from fabric_model.routing.ocs import TRUNK_CLASS_NAME, trunk_table
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.topology.ocs import (
    OcsRequest,
    block_hops,
    block_hops_reference,
    block_shape,
    build_ocs,
    ocs_count,
)
from fabric_model.training import training_step
from fabric_model.units import GIB

#: 128 H100 (16 NVLink domains of 8): small enough that a step solves in milliseconds.
BASE = {"cluster.n_gpus": 128, "fabric.topology": "ocs"}


def ocs(**over: object) -> Scenario:
    return apply_overrides(Scenario(), {**BASE, **over})


# ------------------------------------------------------------------------- closed forms


@pytest.mark.parametrize(
    ("block", "kw", "block_gpus", "uplinks"),
    [
        ("nvlink", {}, 8, 8),  # HGX: its 8 NICs
        ("nvlink", {"gpus_per_node": 4, "nvlink_domain": 72, "n_gpus": 144}, 72, 72),  # NVL72
        ("cube", {"n_gpus": 1024}, 512, 96),  # 64 domains of 8: c = 8 // 6 = 1 -> 96 faces
        ("cube", {"n_gpus": 1024, "nics_per_gpu": 2}, 512, 192),  # 16 ports: c = 2
        ("pod", {"n_gpus": 1024, "radix": 64}, 512, 512),  # half the cluster, 1:1 uplinks
    ],
)
def test_blocks_and_uplinks_in_closed_form(
    block: str, kw: dict[str, int], block_gpus: int, uplinks: int
) -> None:
    req = OcsRequest(**{"n_gpus": 128, "block": block, **kw})  # type: ignore[arg-type]
    shape = block_shape(req)
    assert (shape.block_gpus, shape.uplinks) == (block_gpus, uplinks)
    assert shape.n_blocks == req.n_gpus // block_gpus
    if block == "pod":  # ceil(E_b / (k/2)) leaves and spines, k/2 ports down and up
        assert shape.pod_leaves == shape.pod_spines == 512 // 32


def test_tpu_v4_counts_48_ocs_for_64_cubes_on_palomar() -> None:
    # 64 cubes, 96 face links each, 136-port OCS with circulators: 2 uplinks of every cube
    # per OCS, 48 OCS (Jouppi et al., ISCA 2023: 48 OCS; 6,144 links)
    assert ocs_count(96, 64, 136, 1) == (2, 48)
    t = build_topology(
        apply_overrides(
            Scenario(),
            {
                "cluster.n_gpus": 64 * 64 * 8,
                "fabric.topology": "ocs",
                "ocs.block": "cube",
                "ocs.switch": "palomar",
                "ocs.circuits": "torus",
            },
        )
    )
    assert t.switches_by_tier["ocs"] == 48
    assert t.links_by_class["block-ocs"] == 6144
    assert t.params["block_dims"] == (4, 4, 4)  # the cubes as a 4 x 4 x 4 torus of cubes


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n_blocks=st.integers(1, 40),
    nics=st.sampled_from([1, 2]),
    circuits=st.sampled_from(["uniform", "ring", "torus", "job"]),
    ports=st.sampled_from([40, 96, 136, 300]),
    spare=st.integers(0, 2),
)
def test_circuits_stay_within_every_blocks_ports_and_on_one_ocs(
    n_blocks: int, nics: int, circuits: str, ports: int, spare: int
) -> None:
    req = OcsRequest(
        n_gpus=8 * n_blocks,
        nics_per_gpu=nics,
        circuits=circuits,
        ocs_ports=ports,
        spare_blocks=spare,
        failed_blocks=min(spare, 1),
        job_tp=8,
    )
    built = n_blocks + spare
    p, n_ocs = ocs_count(8 * nics, built, ports, 1)
    if p < 1:
        return  # refused (tested below)
    t = build_ocs(req)
    c = t.params["circuits_data"]
    U = t.params["uplinks_per_block"]
    assert t.switches_by_tier["ocs"] == n_ocs == math.ceil(U / p)
    # each uplink (block, slot) in at most one circuit: no block over its port budget
    ends = np.concatenate([c.a * U + c.slot, c.b * U + c.slot])
    assert np.unique(ends).size == ends.size
    assert (c.slot < U).all() and (c.a != c.b).all()
    # both ends of a circuit on the same OCS (slot // p); no OCS over its ports
    used = np.bincount(c.slot // p, minlength=n_ocs) * 2
    assert used.max(initial=0) <= ports
    assert not np.isin(np.concatenate([c.a, c.b]), c.failed).any()  # no circuit on a dead block


# ------------------------------------------------------------------------------- routes


def _pairs_with_circuits(t: object) -> set[tuple[int, int]]:
    c = t.params["circuits_data"]  # type: ignore[attr-defined]
    return set(zip(c.a.tolist(), c.b.tolist(), strict=True)) | set(
        zip(c.b.tolist(), c.a.tolist(), strict=True)
    )


@pytest.mark.parametrize("circuits", ["uniform", "ring", "torus"])
def test_routes_use_only_existing_circuits(circuits: str) -> None:
    t = build_topology(ocs(**{"ocs.circuits": circuits}))
    table = trunk_table(t)
    pairs = _pairs_with_circuits(t)
    g = t.graph
    rng = np.random.default_rng(0)
    src = rng.integers(0, t.n_endpoints, 200)
    dst = rng.integers(0, t.n_endpoints, 200)
    # adaptive: the trunks are ordered block pairs with circuits, one level nearer per hop
    rf = route(t, src, dst, "adaptive")
    trunk_pair = {
        int(table.trunk[k]): (u, int(table.target[k]))
        for u in range(table.n_blocks)
        for k in range(table.indptr[u], table.indptr[u + 1])
    }
    fl = rf.flows
    for f in range(src.size):
        links = fl.flow_link_indices[fl.flow_link_indptr[f] : fl.flow_link_indptr[f + 1]]
        trunks = links[links >= g.n_links] - g.n_links
        assert all(trunk_pair[int(k)] in pairs for k in trunks)
        assert (
            rf.class_names[rf.link_class[links[links >= g.n_links][0]]] == TRUNK_CLASS_NAME
            if trunks.size
            else True
        )
    # ecmp: each hop is the two fibers of one circuit (towards the OCS, away from it)
    U = t.params["uplinks_per_block"]
    circuit_fibers = {
        (int(a) * U + int(s), int(b) * U + int(s))
        for a, b, s in zip(
            t.params["circuits_data"].a,
            t.params["circuits_data"].b,
            t.params["circuits_data"].slot,
            strict=True,
        )
    }
    circuit_fibers |= {(b, a) for a, b in circuit_fibers}
    rf = route(t, src, dst, "ecmp", qps=2, rng=np.random.default_rng(1))
    n_fibers = t.params["n_blocks_built"] * U
    fl = rf.flows
    for f in range(rf.flow_of_connection.size):
        links = fl.flow_link_indices[fl.flow_link_indptr[f] : fl.flow_link_indptr[f + 1]]
        fibers = links[links < 2 * n_fibers]
        out, back = fibers[0::2], fibers[1::2]
        assert (out % 2 == 0).all() and (back % 2 == 1).all()
        assert all(
            (int(o) // 2, int(b) // 2) in circuit_fibers for o, b in zip(out, back, strict=True)
        )


def test_adaptive_split_is_even_over_every_shortest_path() -> None:
    t = build_topology(ocs(**{"ocs.circuits": "torus"}))
    table = trunk_table(t)
    hops = table.hops
    # the readable twin: enumerate the shortest paths of the trunk graph with networkx
    graph = nx.DiGraph()
    for u in range(table.n_blocks):
        for k in range(table.indptr[u], table.indptr[u + 1]):
            graph.add_edge(u, int(table.target[k]), trunk=int(table.trunk[k]))
    g = t.graph
    per_block = t.params["block_gpus"] * t.request.nics_per_gpu
    for s, d in [(0, 5), (0, 15), (3, 12)]:
        paths = list(nx.all_shortest_paths(graph, s, d))
        assert len(paths[0]) - 1 == hops[s, d]
        expected: dict[int, float] = {}
        for path in paths:
            for u, v in itertools.pairwise(path):
                tr = graph[u][v]["trunk"]
                expected[tr] = expected.get(tr, 0.0) + 1 / len(paths)
        rf = route(t, np.array([s * per_block]), np.array([d * per_block]), "adaptive")
        fl = rf.flows
        on = fl.flow_link_indices >= g.n_links
        got = dict(
            zip(
                (fl.flow_link_indices[on] - g.n_links).tolist(),
                fl.flow_link_weights[on].tolist(),
                strict=True,
            )
        )
        assert got.keys() == expected.keys()
        assert all(got[k] == pytest.approx(v) for k, v in expected.items())


def test_block_hops_kernel_equals_its_readable_twin() -> None:
    rng = np.random.default_rng(3)
    for n in (1, 5, 17):
        a = rng.integers(0, n, 2 * n)
        b = rng.integers(0, n, 2 * n)
        keep = a != b
        alive = rng.random(n) > 0.1
        assert (
            block_hops(n, a[keep], b[keep], alive)
            == block_hops_reference(n, a[keep], b[keep], alive)
        ).all()


def test_ring_circuits_give_the_ring_all_reduce_a_direct_path() -> None:
    ring, uniform = ocs(**{"ocs.circuits": "ring"}), ocs(**{"ocs.circuits": "uniform"})
    ctx = FabricContext.from_scenario(ring)
    m = ctx.n_domains
    slots = ctx.slots_spread(ctx.nics_used_per_domain)
    d = np.repeat(np.arange(m), slots.size)
    s = np.tile(slots, m)
    rf = route(ctx.topology, ctx.endpoint(d, s), ctx.endpoint(d + 1, s), "adaptive")
    assert (rf.switch_hops == 1).all()  # one circuit from each domain to the next
    fast = collective(ring, "allreduce", "ring", [GIB])[0].busbw_GBps
    slow = collective(uniform, "allreduce", "ring", [GIB])[0].busbw_GBps
    assert fast > 1.5 * slow


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n_gpus=st.sampled_from([32, 64, 128]),
    circuits=st.sampled_from(["uniform", "ring", "torus", "job"]),
    vendor=st.sampled_from(["infiniband", "roce"]),
)
def test_all_to_all_never_beats_the_non_blocking_fat_tree(
    n_gpus: int, circuits: str, vendor: str
) -> None:
    over = {"cluster.n_gpus": n_gpus, "fabric.vendor": vendor, "parallel.tp": 8, "parallel.pp": 1}
    fat = apply_overrides(Scenario(), {**over, "fabric.topology": "fat-tree"})
    opt = apply_overrides(fat, {"fabric.topology": "ocs", "ocs.circuits": circuits})
    for algo in ("direct", "hierarchical"):
        a = collective(opt, "alltoall", algo, [GIB])[0].busbw_GBps
        b = collective(fat, "alltoall", algo, [GIB])[0].busbw_GBps
        assert a <= b * (1 + 1e-9)


# --------------------------------------------------------------------------------- step


def test_per_phase_reconfiguration_adds_exactly_its_time() -> None:
    over = {"model.name": "mixtral-8x7b", "parallel.tp": 1, "parallel.pp": 2, "parallel.ep": 8}
    over |= {"ocs.reconfigure": "phase", "cluster.n_gpus": 64}
    a = training_step(ocs(**over, **{"ocs.reconfig_ms": 10}))
    b = training_step(ocs(**over, **{"ocs.reconfig_ms": 35}))
    assert a.feasible and b.feasible
    assert a.ocs_reconfig_s == pytest.approx(0.020) and b.ocs_reconfig_s == pytest.approx(0.070)
    assert b.step_time_s - a.step_time_s == pytest.approx(0.050, abs=1e-12)
    # job-start reconfiguration pays nothing per step
    assert training_step(ocs(**{**over, "ocs.reconfigure": "job"})).ocs_reconfig_s == 0.0


# ------------------------------------------------------------------------ plant, exports


def test_exports_know_the_ocs_ports_and_circuits() -> None:
    s = ocs(**{"ocs.circuits": "ring"})
    bom = bill_of_materials(s)
    t = bom.topology
    csv = export_design(s, "cabling-csv")
    rows = csv.text.strip().splitlines()[1:]
    assert len(rows) == bom.n_cables == t.links_by_class["block-ocs"]
    ocs_ends = [r.split(",")[3] for r in rows]
    assert len(set(ocs_ends)) == len(ocs_ends)  # one fiber per OCS port
    assert all(e.startswith("ocs") for e in ocs_ends)
    data = json.loads(export_design(s, "networkx-json").text)
    assert data["graph"]["n_circuits"] == t.params["n_circuits"]
    assert sum(e["cables"] for e in data["edges"]) == bom.n_cables


def test_availability_in_closed_form() -> None:
    a = 0.9
    with_ocs, static = slice_availability(a, 2, 4)
    assert with_ocs == pytest.approx(
        sum(math.comb(4, k) * a**k * (1 - a) ** (4 - k) for k in (2, 3, 4))
    )
    assert static == pytest.approx(1 - (1 - a**2) ** 2)
    assert slice_availability(a, 4, 4)[0] == pytest.approx(a**4)  # no spare: no gain


# ---------------------------------------------------------------------------- bad keys


@pytest.mark.parametrize(
    ("sets", "key"),
    [
        (["ocs.block=ring"], "ocs.block"),
        (["ocs.circuits=job", "ocs.reconfigure=never"], "ocs.reconfigure"),
        (["ocs.failed_blocks=2", "ocs.spare_blocks=1"], "ocs.failed_blocks"),
        (["ocs.circuits=twisted-torus", "cluster.n_gpus=192"], "ocs.circuits"),  # 24 blocks
        (["cluster.n_gpus=2048", "ocs.switch=palomar"], "ocs.switch"),  # 256 blocks > 136 ports
        (["fabric.link_gbps=800", "cluster.gpu=b300", "ocs.switch=calient-s320"], "ocs.switch"),
        (["ocs.block_gpus=12", "ocs.block=pod"], "ocs.block_gpus"),
        (["ocs.reconfig_ms=0"], "ocs.reconfig_ms"),
    ],
)
def test_bad_keys_exit_2_naming_the_key(
    sets: list[str], key: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = ["bom", "--set", "fabric.topology=ocs", "--set", "cluster.n_gpus=128"]
    for s in sets:
        args += ["--set", s]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and key in err, err


# -------------------------------------------------------------------------------- golden

GOLDEN = Path(__file__).parent / "golden" / "ocs_tpu_v4.yaml"


def test_tpu_v4_golden() -> None:
    """TPU v4's OCS count, cost and power shares and availability gain, in kind (sourced)."""
    doc = yaml.safe_load(GOLDEN.read_text(encoding="utf-8"))
    scenario = Scenario.from_dict(doc["scenario"])
    bom = bill_of_materials(scenario)
    summary = ocs_summary(scenario, bom)
    for case in doc["cases"]:
        assert case["use"] == "held-out" and case["source"]
        if "expect" in case:
            assert summary["n_ocs"] == case["expect"]["n_ocs"], case["name"]
            assert bom.topology.links_by_class["block-ocs"] == case["expect"]["block_ocs_links"]
        elif "bound" in case:
            assert 0 < summary[case["bound"]["figure"]] < case["bound"]["max"], case["name"]
        else:
            a = case["host_availability"] ** case["hosts_per_block"]
            gains = [
                np.divide(*slice_availability(a, s, case["pod_blocks"])) for s in case["slices"]
            ]
            assert case["band"]["min"] <= max(gains) <= case["band"]["max"], gains
            assert all(g >= 1.0 for g in gains)  # the OCS never makes a slice less available


def test_sharp_is_refused_on_an_ocs_fabric() -> None:
    s = ocs(**{"ocs.block": "pod", "fabric.sharp": True, "cluster.n_gpus": 1024})
    for op in ("allreduce", "allgather"):
        with pytest.raises(AlgorithmUnavailableError, match="optical circuit switch"):
            collective(s, op, "sharp", [GIB])
