"""Collective times: closed forms, physical bounds, and the fabric effects issue 3 names."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from fabric_model.collectives import (
    AlgorithmUnavailableError,
    FabricContext,
    algo_models,
    collective,
    nccl_constants,
)
from fabric_model.scenario import Scenario, apply_overrides

ROOT = Path(__file__).resolve().parents[1]
GIB = 2**30


def sc(**kw):
    return apply_overrides(Scenario(), {k.replace("__", "."): v for k, v in kw.items()})


def model(s, op="allreduce", algo="ring"):
    return algo_models(FabricContext.from_scenario(s), op, algo)[0]


def test_ring_equals_textbook_on_nonblocking_adaptive_fat_tree():
    """No contention: 2(n-1)/n x S / B plus NCCL's latency terms, to 1e-6."""
    s = sc(cluster__n_gpus=1024)  # 128 DGX H100, IB NDR, 2 tiers, adaptive
    m = model(s)
    c = nccl_constants()
    n, domains, k = 1024, 128, 8
    nic_Bps = 400e9 / 8
    nvl_Bps = 450e9 * c["nvlink_nccl_link_GBps"]["hopper"] / c["nvlink_line_link_GBps"]["hopper"]
    expected_bw = min(nvl_Bps, k * nic_Bps * c["net_efficiency"])
    assert m.busbw_Bps == pytest.approx(expected_bw, rel=1e-9)
    for proto in ("LL", "LL128", "Simple"):
        intra = max(c["hw_latency_us"]["nvlink"]["ring"][proto], 3.0 if proto == "Simple" else 1.0)
        hops = m.mean_switch_hops
        path_us = ((hops - 1) * 200 + (2 * 20 + (hops - 1) * 50) * 5) / 1000  # QM9700 200 ns
        inter = c["hw_latency_us"]["net"]["ring"][proto] + path_us
        lat = (
            c["base_latency_us"]["ring"][proto]
            + (2 * (n - 1) - 2 * (domains - 1)) * intra
            + 2 * (domains - 1) * inter
        )
        for size in (8, 4096, GIB):
            bw = expected_bw * c["protocol_bw_factor"]["ring"][proto]
            if proto == "LL":  # NCCL's llMaxBw on > 2 nodes (Intel hosts): per collective
                bw = min(bw, 20.4e9)
            if proto == "LL128":  # 16 channels x 36.7 GB/s per channel (Hopper)
                bw = min(bw, 16 * 36.7e9)
            plateau = (
                c["ring_plateau_factor"] if (proto == "Simple" and size >= 64 * 2 * k * n) else 1.0
            )
            want = lat * plateau + 2 * (n - 1) / n * size / bw * 1e6
            assert m.time_us(size, proto) == pytest.approx(want, rel=1e-6)


def test_single_node_priors():
    # nccl-tests issue 212: H100 ring over NVLink ~370 GB/s; NVLS ~480 GB/s busbw
    s = sc(cluster__n_gpus=8)
    ring = collective(s, "allreduce", "ring", [16 * GIB])[0]
    nvls = collective(s, "allreduce", "nvls", [16 * GIB])[0]
    assert 340 < ring.busbw_GBps < 400
    assert 440 < nvls.busbw_GBps < 520


def test_multinode_per_nic_prior():
    # nccl-tests issue 290: 46-48 GB/s per 400G NIC, 8 NICs per DGX
    r = collective(sc(cluster__n_gpus=16), "allreduce", "ring", [16 * GIB])[0]
    assert 8 * 44 < r.busbw_GBps < 8 * 48.5


@pytest.mark.parametrize("algo", ["ring", "tree", "hierarchical", "nvls", "sharp"])
def test_bandwidth_never_beats_physical_bounds(algo):
    s = sc(cluster__n_gpus=512, fabric__sharp=True)
    m = model(s, "allreduce", algo)
    per_gpu_injection = 450e9 + 400e9 / 8  # NVLink + NIC, one direction
    n = 512
    for size in (1024, 2**20, GIB, 16 * GIB):
        t_s = m.time_us(size, m.best_protocol(size)) * 1e-6
        algbw = size / t_s
        if algo in ("nvls", "sharp"):  # in-network reduction: each GPU sends and gets S once
            assert algbw <= per_gpu_injection
        else:  # each GPU must send 2(n-1)/n x S
            assert 2 * (n - 1) / n * size / t_s <= per_gpu_injection
        assert t_s * 1e6 >= 0.3  # never faster than fiber and a switch


@pytest.mark.parametrize(
    "op,algo",
    [
        ("allreduce", "ring"),
        ("allreduce", "tree"),
        ("allgather", "ring"),
        ("alltoall", "hierarchical"),
    ],
)
def test_time_monotone_in_bytes_and_link_speed(op, algo):
    sizes = [2**i for i in range(3, 35, 2)]
    base = sc(cluster__n_gpus=128, cluster__gpu="b300")  # PCIe Gen6: feeds an 800G NIC
    slow = collective(base, op, algo, sizes)
    fast = collective(apply_overrides(base, {"fabric.link_gbps": 800}), op, algo, sizes)
    assert all(a.time_us <= b.time_us for a, b in itertools.pairwise(slow))
    assert all(f.time_us <= s.time_us * (1 + 1e-12) for f, s in zip(fast, slow, strict=True))


def test_ecmp_loses_to_adaptive_and_more_qps_narrow_the_gap():
    common = dict(cluster__n_gpus=4096, what_if__placement="scattered")
    adaptive = model(sc(fabric__vendor="spectrum-x", **common)).inter_Bps
    ecmp1 = model(sc(fabric__vendor="roce", **common)).inter_Bps
    ecmp4 = model(sc(fabric__vendor="roce", fabric__qps_per_connection=4, **common)).inter_Bps
    assert ecmp1 < 0.8 * adaptive
    assert ecmp1 < ecmp4 <= adaptive * (1 + 1e-9)


def test_oversubscription_hurts_cross_pod_rings_not_intra_leaf_ones():
    scattered = dict(cluster__n_gpus=8192, what_if__placement="scattered")
    full = model(sc(**scattered)).inter_Bps
    half = model(sc(fabric__oversubscription=2, **scattered)).inter_Bps
    # 2:1 at radix 64 = 42 down / 21 up: rings that leave every leaf get 21/42 of line rate
    assert half == pytest.approx(full * 21 / 42, rel=1e-6)
    # 256 GPUs = one scalable unit: every ring hop stays on its rail's leaf
    local = model(sc(cluster__n_gpus=256)).inter_Bps
    local_over = model(sc(cluster__n_gpus=256, fabric__oversubscription=2)).inter_Bps
    assert local_over == pytest.approx(local)


def test_degraded_nic_slows_a_ring_in_proportion():
    healthy = model(sc(cluster__n_gpus=1024)).inter_Bps
    sick = model(sc(cluster__n_gpus=1024, what_if__degraded_link_factor=0.5)).inter_Bps
    assert sick == pytest.approx(healthy * 0.5, rel=1e-6)


def test_adaptive_fabric_absorbs_a_degraded_spine_link():
    common = dict(
        cluster__n_gpus=4096,
        what_if__placement="scattered",
        what_if__degraded_link="leaf-spine",
        what_if__degraded_link_factor=0.25,
    )
    adaptive = model(sc(**common)).inter_Bps
    adaptive_ok = model(sc(cluster__n_gpus=4096, what_if__placement="scattered")).inter_Bps
    assert adaptive > 0.9 * adaptive_ok  # one cable of a 32-cable bundle: small share
    dmodk = model(sc(fabric__routing="dmodk", **common)).inter_Bps
    dmodk_ok = model(
        sc(cluster__n_gpus=4096, what_if__placement="scattered", fabric__routing="dmodk")
    ).inter_Bps
    assert dmodk <= dmodk_ok


def test_nvls_and_sharp_beat_ring_at_large_sizes():
    s = sc(cluster__n_gpus=1024, fabric__sharp=True)
    big = [16 * GIB]
    ring = collective(s, "allreduce", "ring", big)[0].busbw_GBps
    assert collective(s, "allreduce", "sharp", big)[0].busbw_GBps > 1.2 * ring
    assert (
        collective(sc(cluster__n_gpus=8), "allreduce", "nvls", big)[0].busbw_GBps
        > collective(sc(cluster__n_gpus=8), "allreduce", "ring", big)[0].busbw_GBps
    )


def test_tree_beats_ring_small_not_large():
    t = lambda m, size: min(m.time_us(size, p) for p in m.protocols)  # noqa: E731
    big = sc(cluster__n_gpus=8192)
    tree, ring = model(big, algo="tree"), model(big, algo="ring")
    assert t(tree, 2**20) < t(ring, 2**20)  # log2(n) vs 2(n-1) latency steps
    assert ring.busbw_Bps > tree.busbw_Bps  # so ring wins above a finite crossover
    # ring latency grows linearly with ranks: at 1K GPUs the crossover is below 64 GiB
    mid = sc(cluster__n_gpus=1024)
    assert t(model(mid, algo="ring"), 64 * GIB) < t(model(mid, algo="tree"), 64 * GIB)


def test_auto_runs_nccls_pick_and_reports_the_fastest_candidate():
    # auto chooses as NCCL's tuner does (tests/test_nccl_choice.py); the row also names the
    # candidate this fabric runs fastest, which no explicit algorithm beats
    s = sc(cluster__n_gpus=1024)
    sizes = [8, 2**20, 2**30]
    auto = collective(s, "allreduce", "auto", sizes)
    for row in auto:
        for algo in ("ring", "tree", "nvls"):
            other = collective(s, "allreduce", algo, [row.size_bytes])[0]
            assert row.fastest_time_us <= other.time_us * (1 + 1e-12)
        assert row.time_us >= row.fastest_time_us * (1 - 1e-12)
        assert row.requested_algo == "auto" and row.algo in ("ring", "tree", "nvls", "nvls-tree")


def test_sharp_is_not_faked_on_ethernet():
    with pytest.raises(AlgorithmUnavailableError, match="no switch-resident reduction"):
        collective(sc(fabric__vendor="spectrum-x"), "allreduce", "sharp", [GIB])
    with pytest.raises(AlgorithmUnavailableError, match="one domain"):
        collective(sc(cluster__n_gpus=8), "allreduce", "sharp", [GIB])
    # auto never offers sharp unless fabric.sharp is on
    assert all(r.algo != "sharp" for r in collective(sc(), "allreduce", "auto", [16 * GIB]))


def test_alltoall_rail_aligned_beats_direct_on_rail_optimized():
    # direct all-to-all sends cross-rail traffic through the spines; PXN keeps it on-rail
    s = sc(cluster__n_gpus=256, fabric__oversubscription=4)
    direct = collective(s, "alltoall", "direct", [GIB])[0]
    hier = collective(s, "alltoall", "hierarchical", [GIB])[0]
    assert hier.busbw_GBps > direct.busbw_GBps


def test_alltoall_refuses_sizes_it_cannot_solve():
    # a degraded NIC breaks the symmetry the orbit solve needs: every class of 2,049 groups
    with pytest.raises(AlgorithmUnavailableError, match="flow classes"):
        collective(
            sc(
                cluster__n_gpus=131072,
                fabric__vendor="spectrum-x",
                what_if__degraded_link_factor=0.5,
            ),
            "alltoall",
            "direct",
            [GIB],
        )


def test_every_fat_tree_preset_gives_a_curve():
    from fabric_model.presets import list_presets, load_preset

    for p in list_presets():
        s = load_preset(p.name)
        if s.fabric.topology != "fat-tree":
            continue
        rows = collective(s, "allreduce", "auto", [8, GIB])
        assert all(r.time_us > 0 and math.isfinite(r.busbw_GBps) for r in rows)


def test_cli_collective_json_contract():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "fabric_model",
            "collective",
            "--op",
            "allreduce",
            "--algo",
            "auto",
            "--sizes",
            "8,1K,1M,1G",
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [r["bytes"] for r in rows] == [8, 1024, 2**20, 2**30]
    for r in rows:
        assert {"op", "algo", "bytes", "time_us", "algbw_GBps", "busbw_GBps"} <= set(r)
        assert r["busbw_GBps"] == pytest.approx(r["algbw_GBps"] * 2 * 1023 / 1024)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--sizes", "1Q"], "--sizes: not a size"),
        (["--algo", "sharp", "--set", "fabric.vendor=roce"], "sharp needs InfiniBand"),
        (["--op", "broadcast"], "invalid choice"),
    ],
)
def test_cli_collective_bad_input(args, words):
    out = subprocess.run(
        [sys.executable, "-m", "fabric_model", "collective", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and words in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"fabric.oversubscription": 2},
        {"what_if.degraded_link_factor": 0.5},
        {"cluster.nics_per_gpu": 2, "fabric.rail_optimized": False},
        {"fabric.vendor": "roce", "what_if.placement": "scattered"},
    ],
)
@pytest.mark.parametrize("algo", ["direct", "hierarchical"])
def test_alltoall_flow_classes_equal_the_per_connection_solve(monkeypatch, extra, algo):
    """The aggregation error against the full solve, where both run (README: 0)."""
    from fabric_model.collectives import algorithms

    s = apply_overrides(Scenario(), {"cluster.n_gpus": 512, **extra})
    monkeypatch.setattr(algorithms, "ALLTOALL_MAX_CONNECTIONS", 10**9)
    full = collective(s, "alltoall", algo, [GIB])[0]
    monkeypatch.setattr(algorithms, "ALLTOALL_MAX_CONNECTIONS", 0)
    classes = collective(s, "alltoall", algo, [GIB])[0]
    if extra.get("fabric.vendor") == "roce":  # per-connection ECMP keeps its hash collisions
        assert classes.busbw_GBps >= full.busbw_GBps
    else:
        assert classes.busbw_GBps == pytest.approx(full.busbw_GBps, rel=1e-9)


def test_alltoall_at_131k_by_flow_classes():
    r = collective(
        sc(cluster__n_gpus=131072, fabric__vendor="spectrum-x"),
        "alltoall",
        "hierarchical",
        [16 * GIB],
    )[0]
    assert 40 < r.busbw_GBps < 50  # NIC-bound on a non-blocking fabric


def test_ecmp_seed_range_brackets_the_mean_and_never_beats_adaptive():
    common = {"cluster.n_gpus": 4096, "what_if.placement": "scattered"}
    roce = collective(
        apply_overrides(Scenario(), {**common, "fabric.vendor": "roce"}),
        "allreduce",
        "ring",
        [4 * GIB],
    )[0]
    ib = collective(apply_overrides(Scenario(), common), "allreduce", "ring", [4 * GIB])[0]
    assert roce.busbw_min_GBps <= roce.busbw_GBps <= roce.busbw_max_GBps
    assert roce.busbw_max_GBps <= ib.busbw_GBps * (1 + 1e-9)


@pytest.mark.parametrize("algo", ["direct", "hierarchical"])
def test_hot_experts_slow_the_alltoall_by_their_skew(algo):
    # on a non-blocking fabric the hot receivers' NIC links carry s times the mean
    base = collective(sc(cluster__n_gpus=256), "alltoall", algo, [4 * GIB])[0]
    hot = collective(sc(cluster__n_gpus=256, model__routing_skew=2), "alltoall", algo, [4 * GIB])[0]
    assert hot.busbw_GBps == pytest.approx(base.busbw_GBps / 2, rel=0.02)
    assert hot.bottleneck == "nic-leaf"


def test_skewed_flow_classes_equal_the_per_connection_solve(monkeypatch):
    from fabric_model.collectives import algorithms

    s = sc(cluster__n_gpus=512, model__routing_skew=4, fabric__oversubscription=2)
    for algo in ("direct", "hierarchical"):
        monkeypatch.setattr(algorithms, "ALLTOALL_MAX_CONNECTIONS", 10**9)
        full = collective(s, "alltoall", algo, [GIB])[0].busbw_GBps
        monkeypatch.setattr(algorithms, "ALLTOALL_MAX_CONNECTIONS", 0)
        assert collective(s, "alltoall", algo, [GIB])[0].busbw_GBps == pytest.approx(full)


def test_receive_weights_conserve_traffic():
    from fabric_model.collectives.algorithms import receive_weights

    w = receive_weights(1000, 4.0, 0.125)
    assert w.mean() == pytest.approx(1.0) and w.max() == 4.0
    assert (receive_weights(64, 8.0, 0.125) > 0).sum() == 8  # s h = 1: only hot GPUs receive
    with pytest.raises(Exception, match=r"model\.routing_skew.*at most 1 / model\.hot_fraction"):
        sc(model__routing_skew=9, model__hot_fraction=0.125)


def test_torus_falls_behind_a_fat_tree_past_a_few_thousand_gpus():
    def busbw(topology, n):
        s = sc(cluster__n_gpus=n, fabric__topology=topology)
        return collective(s, "alltoall", "auto", [16 * GIB])[0].busbw_GBps

    # the torus' share of the fat-tree's all-to-all bandwidth shrinks as the job grows: its
    # bisection per GPU falls as 1/L while the non-blocking fat-tree's stays at line rate
    # (all-reduce runs on neighbour links and keeps up: tests/test_switchless_collectives.py)
    small = busbw("torus-3d", 64) / busbw("fat-tree", 64)
    large = busbw("torus-3d", 4096) / busbw("fat-tree", 4096)
    assert large < small / 2
    assert large < 0.25


def test_nvls_allgather_inside_a_node_and_nvls_tree_latency_across():
    one = collective(sc(cluster__n_gpus=8), "allgather", "nvls", [16 * GIB])[0]
    # NVLink-bound at NCCL's nvlsEff on the receive side, which carries the whole buffer: busbw
    # = 450 x 0.85 x 7/8 = 334.7, below the ring's (NVIDIA/nccl #1506: NVLS 300, ring 350)
    assert one.busbw_GBps == pytest.approx(450 * 0.85 * 7 / 8, rel=1e-3)
    ring = collective(sc(cluster__n_gpus=8), "allgather", "ring", [16 * GIB])[0]
    assert one.busbw_GBps < ring.busbw_GBps
    with pytest.raises(AlgorithmUnavailableError, match="inside one NVLink domain"):
        collective(sc(cluster__n_gpus=64), "allgather", "nvls", [GIB])
    small = [
        collective(sc(cluster__n_gpus=n), "allreduce", "nvls", [8])[0].time_us for n in (64, 4096)
    ]
    assert small[1] < 3 * small[0]  # log2(domains) steps, not a ring over domains
