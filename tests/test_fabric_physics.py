"""Fabric physics on 2026 hardware (issue 10): host links, degraded NICs, NCCL's protocol
caps, partial NVLink domains and the catalog's current parts. Each test fails on the model
before the fix and names the mechanism it checks."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fabric_model.collectives import FabricContext, algo_models, collective
from fabric_model.errors import InfeasibleDesignError, ScenarioError
from fabric_model.presets import load_preset
from fabric_model.scenario import Scenario, apply_overrides

GIB = 2**30


def sc(**kw: object) -> Scenario:
    return apply_overrides(Scenario(), {k.replace("__", "."): v for k, v in kw.items()})


def busbw(s: Scenario, op: str, algo: str, size: int) -> float:
    return collective(s, op, algo, [size])[0].busbw_GBps


# ---------------------------------------------------------------- 1. host link (PCIe)


def test_two_nics_per_h100_are_capped_at_its_pcie_gen5_link():
    # PCIe Gen5 x16: 63.0 GB/s raw, 57.2 GB/s of 256-byte TLP payload per direction; the
    # model used to give 2 x one NIC = 93.6 GB/s of all-to-all per H100
    one = busbw(sc(), "alltoall", "auto", GIB)
    two = busbw(sc(cluster__nics_per_gpu=2), "alltoall", "auto", GIB)
    assert 44 < one < 48.5  # one 400G NIC: NIC-bound, below the host link
    # busbw counts the (n - 1) / n of the data that leaves each GPU; the 8 / 1,024 that stays
    # in its NVLink domain does not cross PCIe
    assert two <= 57.2 * 1024 / (1024 - 8) * (1 + 1e-6)
    assert two > one  # the second NIC still helps, up to the host link


def test_b300_pcie_gen6_feeds_two_400g_nics_in_full():
    one = busbw(sc(cluster__gpu="b300"), "alltoall", "auto", GIB)
    two = busbw(sc(cluster__gpu="b300", cluster__nics_per_gpu=2), "alltoall", "auto", GIB)
    assert two == pytest.approx(2 * one, rel=0.01)


@pytest.mark.parametrize(
    ("gpu", "gbps", "allowed"),
    [
        ("h100", 800, "200, 400"),
        ("h200", 1600, "200, 400"),
        ("a100", 400, "200"),
        ("gb200", 800, "200, 400"),
        ("b300", 1600, "200, 400, 800"),
    ],
)
def test_a_nic_the_gpu_cannot_feed_is_refused(gpu, gbps, allowed):
    vendor = "spectrum-x" if gbps == 1600 else "infiniband"
    with pytest.raises(InfeasibleDesignError) as exc:
        collective(
            sc(
                cluster__gpu=gpu,
                fabric__link_gbps=gbps,
                fabric__vendor=vendor,
                **(
                    {"cluster__gpus_per_node": 4, "cluster__nvlink_domain": 72}
                    if gpu == "gb200"
                    else {}
                ),
            ),
            "allreduce",
            "auto",
            [GIB],
        )
    assert exc.value.key == "fabric.link_gbps"
    assert f"allowed: {allowed} Gb/s" in str(exc.value)


def test_cli_refuses_an_800g_nic_on_h100_with_exit_2():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "fabric_model",
            "collective",
            "--op",
            "alltoall",
            "--algo",
            "auto",
            "--sizes",
            "1G",
            "--set",
            "fabric.link_gbps=800",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "fabric.link_gbps" in out.stderr
    assert "allowed: 200, 400 Gb/s" in out.stderr


def test_gb300_runs_800g_and_the_old_gb200_xdr_preset_says_why_it_is_gone():
    s = load_preset("gb300-nvl72-xdr")
    assert s.cluster.gpu == "gb300" and s.fabric.link_gbps == 800
    assert load_preset("gb200-nvl72-ndr").fabric.link_gbps == 400
    with pytest.raises(ScenarioError, match="ConnectX-7"):
        load_preset("gb200-nvl72-xdr")


# ---------------------------------------------------------------- 3. degraded NIC


@pytest.mark.parametrize("algo", ["ring", "tree", "nvls", "auto"])
def test_half_rate_nic_halves_a_large_allreduce_whatever_the_algorithm(algo):
    # the NIC of an interior node of NCCL's tree runs near line rate when healthy: at half
    # rate it sets the pace of every channel it carries (the plain tree sits at NCCL's
    # per-channel cap, 80 % of its NICs' rate, so it loses a little less than half)
    healthy = busbw(sc(), "allreduce", algo, 16 * GIB)
    half = busbw(sc(what_if__degraded_link_factor=0.5), "allreduce", algo, 16 * GIB)
    assert 0.45 < half / healthy < 0.62


def test_the_tree_root_is_the_best_case_position_and_is_named():
    healthy = busbw(sc(), "allreduce", "tree", 16 * GIB)
    root = sc(what_if__degraded_link_factor=0.5, what_if__degraded_position="root")
    assert busbw(root, "allreduce", "tree", 16 * GIB) == pytest.approx(healthy, rel=1e-6)
    ctx = FabricContext.from_scenario(sc(what_if__degraded_link_factor=0.5))
    assert ctx.degraded_rank == 64 * 8  # GPU 0 of the middle of 128 domains
    assert "NIC 0 of rank 512" in ctx.degraded_description()
    assert "interior" in ctx.degraded_description()


# ---------------------------------------------------------------- 5. NCCL protocol caps


def test_ll_cap_is_per_collective_not_per_gpu_of_a_node():
    # tuning.cc: busBw = min(llMaxBw, 0.5 busBw) with llMaxBw 20.4 GB/s on > 2 nodes
    # (Intel hosts) and 39 GB/s on 2 nodes, whatever the GPUs per node
    for n, cap in ((16, 39.0), (1024, 20.4)):
        m = algo_models(FabricContext.from_scenario(sc(cluster__n_gpus=n)), "allreduce", "ring")[0]
        assert m.bandwidth_Bps(GIB, "LL") == pytest.approx(cap * 1e9)


def test_tree_ll_uses_nccls_one_over_3_8():
    m = algo_models(FabricContext.from_scenario(sc()), "allreduce", "tree")[0]
    assert m.protocol_bw_factor["LL"] == pytest.approx(1 / 3.8)
    assert m.protocol_bw_factor["LL128"] == pytest.approx(120 / 128)


def test_ll_is_not_chosen_for_mid_size_messages_at_scale():
    # with NCCL's per-collective cap LL gives way to LL128 by 64 MiB on 1,024 H100; the old
    # per-GPU-of-a-node cap (163 GB/s) kept LL up to 256 MiB
    # (ring: from NCCL 2.31 auto runs PAT across the domains with NVLS inside at these sizes)
    rows = collective(sc(), "allgather", "ring", [GIB // 16, GIB // 4])
    assert [r.proto for r in rows] == ["LL128", "LL128"]
    ring = collective(sc(cluster__n_gpus=16384), "allreduce", "ring", [GIB, 4 * GIB])
    assert all(r.proto != "LL" for r in ring)
    # the crossover LL -> LL128 of the ring all-gather lies between 16 and 64 MiB
    small = collective(sc(), "allgather", "ring", [16 * 2**20])[0]
    assert small.proto == "LL" and small.busbw_GBps <= 20.4


# ---------------------------------------------------------------- 8. partial NVL72 racks


GB200_ROCE = dict(
    cluster__gpu="gb200", cluster__gpus_per_node=4, cluster__nvlink_domain=72, fabric__vendor="roce"
)


@pytest.mark.parametrize("op", ["allreduce", "allgather", "reducescatter", "alltoall"])
def test_one_full_and_one_partial_nvl72_rack_answer(op):
    # 128 GPUs = 72 + 56: used to raise IndexError (index 130 out of bounds for size 128)
    row = collective(sc(cluster__n_gpus=128, **GB200_ROCE), op, "auto", [8 * GIB])[0]
    assert row.busbw_GBps > 0 and row.time_us > 0


def test_the_partial_rack_sets_the_pace_of_nvls_tree():
    full = busbw(sc(cluster__n_gpus=144, **GB200_ROCE), "allreduce", "nvls", 8 * GIB)
    partial = busbw(sc(cluster__n_gpus=128, **GB200_ROCE), "allreduce", "nvls", 8 * GIB)
    assert 0 < partial <= full * (1 + 1e-9)


def test_dragonfly_ecmp_on_partial_racks_answers():
    s = sc(
        cluster__n_gpus=4096,
        cluster__gpu="gb200",
        cluster__gpus_per_node=4,
        cluster__nvlink_domain=72,
        fabric__topology="dragonfly-plus",
        fabric__routing="ecmp",
    )
    assert busbw(s, "allgather", "ring", 64 * 2**20) > 0


# ---------------------------------------------------------------- 2. straddling groups


def test_ep64_on_nvl72_is_timed_on_the_groups_that_cross_racks():
    # EP64 groups g cover ranks [64 g, 64 g + 63]: 7 of every 9 span two 72-GPU racks, so
    # their all-to-all runs partly on the 800G NICs, not at NVLink speed (was 717 GB/s)
    from fabric_model.training import training_step

    s = apply_overrides(
        load_preset("gb300-nvl72-xdr"),
        {
            "model.name": "deepseek-v3",
            "model.seq_len": 4096,
            "parallel.tp": 1,
            "parallel.pp": 8,
            "parallel.ep": 64,
            "parallel.vpp": 1,  # the preset's recipe interleaves (VP4): not this plan's
            "training.global_batch_tokens": 62914560,
        },
    )
    step = training_step(s)
    assert "56 of 72 groups straddle" in step.comm_detail["ep"]
    assert "nvlink" not in step.comm_detail["ep"]
    busbw_GBps = float(step.comm_detail["ep"].split(" at ")[1].split(" GB/s")[0])
    assert busbw_GBps < 200  # network-bound: one 800G NIC per GPU, not NVLink


def test_degrees_that_tile_the_domain_do_not_straddle():
    from fabric_model.training import training_step

    s = apply_overrides(load_preset("gb300-nvl72-xdr"), {"parallel.tp": 8, "parallel.pp": 8})
    assert "straddle" not in training_step(s).comm_detail["tp"]


# ---------------------------------------------------------------- 9. explain the numbers


def test_output_names_the_host_link_the_degraded_nic_and_the_partial_rack():
    two = collective(sc(cluster__nics_per_gpu=2), "alltoall", "auto", [GIB])[0]
    assert two.bottleneck == "host link (PCIe)"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "fabric_model",
            "collective",
            "--op",
            "allreduce",
            "--sizes",
            "1G",
            "--set",
            "cluster.n_gpus=128",
            "--set",
            "cluster.gpu=gb200",
            "--set",
            "cluster.gpus_per_node=4",
            "--set",
            "cluster.nvlink_domain=72",
            "--set",
            "what_if.degraded_link_factor=0.5",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "# partial NVLink domain: 128 GPUs fill 1 domain(s) of 72 and one of 56" in out.stdout
    assert "# degraded: NIC 0 of rank 72" in out.stdout
