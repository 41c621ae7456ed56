"""NVLS + IB SHARP all-gather / reduce-scatter (NCCL 2.27+) and copy-engine collectives
(NCCL 2.28+, 2.29's automatic switch on Blackwell), issue 31 items 2 and 3: where NCCL runs
them, what they cost, and the refusals naming the missing condition elsewhere."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_model.cli import main
from fabric_model.collectives import (
    AlgorithmUnavailableError,
    FabricContext,
    algo_models,
    collective,
)
from fabric_model.collectives.context import ce_efficiency, nccl_constants
from fabric_model.collectives.tuner_csv import tuner_rows
from fabric_model.collectives.versions import version_data
from fabric_model.scenario import Scenario, apply_overrides

MIB, GIB = 2**20, 2**30
#: 8 HGX H100 nodes on InfiniBand NDR with SHARP, registered buffers: NCCL runs NVLS + SHARP
SHARP = {"cluster.n_gpus": 64, "fabric.sharp": True, "nccl.registered_buffers": True}


def sc(**overrides: object) -> Scenario:
    return apply_overrides(Scenario(), overrides)


@pytest.mark.parametrize("op", ["allgather", "reducescatter"])
def test_sharp_gather_runs_as_nvls_sharp_within_its_two_bounds(op):
    s = sc(**SHARP)
    (row,) = collective(s, op, "sharp", [16 * GIB])
    assert (row.algo, row.proto) == ("nvls-sharp", "Simple")
    ctx = FabricContext.from_scenario(s)
    c = nccl_constants()
    factor = 63 / 64
    nvls = factor * ctx.nvlink_Bps * c["nvls_efficiency"]["hopper"]  # each GPU gets S once
    nic = factor * 8 * ctx.nic_Bps * c["net_efficiency"]  # a NIC carries S / 8
    assert row.busbw_GBps * 1e9 <= min(nvls, nic) * (1 + 1e-9)
    assert row.busbw_GBps * 1e9 >= 0.99 * min(nvls, nic)
    # NCCL's NVLS latency (25 + 18 us) and the path up the SHARP tree: one step, not a ring's
    (small,) = collective(s, op, "sharp", [8])
    assert 43.0 <= small.time_us < 45.0
    ring = collective(s, op, "ring", [8])[0]
    assert small.time_us < ring.time_us


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"cluster.n_gpus": 8}, "this job fits in one domain"),
        ({"nccl.version": "2.26"}, r"nccl\.version = 2\.26"),
        ({"fabric.vendor": "spectrum-x"}, r"fabric\.vendor = spectrum-x"),
        ({"fabric.nvls": False}, r"fabric\.nvls = false"),
        ({"nccl.registered_buffers": False}, r"nccl\.registered_buffers = true"),
        (  # an NVL72 rack: 72 local ranks, at most 16 NVLS heads between MNNVL domains
            {
                "cluster.n_gpus": 144,
                "cluster.gpu": "gb200",
                "cluster.gpus_per_node": 4,
                "cluster.nvlink_domain": 72,
            },
            r"72 GPUs and 16 heads",
        ),
    ],
)
def test_sharp_gather_is_refused_where_nccl_does_not_run_it(overrides, match):
    s = sc(**{**SHARP, **overrides})
    with pytest.raises(AlgorithmUnavailableError, match=match):
        collective(s, "allgather", "sharp", [MIB])
    # auto falls back to what NCCL runs instead
    assert collective(s, "allgather", "auto", [MIB])[0].algo != "nvls-sharp"


def test_auto_considers_it_only_with_sharp_on():
    # fabric.sharp is NCCL_COLLNET_ENABLE=1 with the plugin; by name it runs (as all-reduce)
    off = sc(**{**SHARP, "fabric.sharp": False})
    assert collective(off, "allgather", "auto", [MIB])[0].algo != "nvls-sharp"
    assert collective(off, "allgather", "sharp", [MIB])[0].algo == "nvls-sharp"


def test_the_cli_answers_where_valid_and_refuses_in_one_line(capsys):
    argv = ["collective", "--op", "allgather", "--algo", "sharp", "--sizes", "1M"]
    argv += ["--set", "cluster.n_gpus=64", "--set", "fabric.sharp=true"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "nccl.registered_buffers" in err and err.count("\n") == 1 and "Traceback" not in err
    assert main([*argv, "--set", "nccl.registered_buffers=true", "--json"]) == 0
    assert '"nvls-sharp"' in capsys.readouterr().out


def test_auto_takes_sharp_as_nccls_tuner_does_and_the_tuner_csv_names_nvls():
    s = sc(**SHARP)
    rows = collective(s, "allgather", "auto", [MIB, 4 * GIB])
    # NCCL's table: one SHARP step beats the ring's 63 steps at 1 MiB; at 4 GiB its NVLS
    # term (nvlsEff x (nCh - 1) / nCh x (ppn - 1) / ppn) leaves the ring ahead
    assert [r.algo for r in rows] == ["nvls-sharp", "ring"]
    csv, _ = tuner_rows(FabricContext.from_scenario(s), [MIB])
    assert {(r.collective, r.algorithm) for r in csv} >= {("allgather", "nvls")}
    # NCCL_ALGO=NVLS runs it across nodes; CollNet Direct's all-gather is not modelled
    forced = apply_overrides(s, {"nccl.algo": "nvls"})
    assert {r.algo for r in collective(forced, "allgather", "auto", [MIB, GIB])} == {"nvls-sharp"}
    with pytest.raises(AlgorithmUnavailableError, match=r"nccl\.algo = collnetdirect"):
        collective(apply_overrides(s, {"nccl.algo": "collnetdirect"}), "allgather", "auto", [MIB])


# ------------------------------------------------------------------------ copy engines

#: one NVLink domain per GPU kind (8 HGX, and one NVL72 rack)
CE_DESIGNS = {
    "h100": {"cluster.n_gpus": 8},
    "b200": {"cluster.n_gpus": 8, "cluster.gpu": "b200"},
    "gb200-nvl72": {
        "cluster.n_gpus": 72,
        "cluster.gpu": "gb200",
        "cluster.gpus_per_node": 4,
        "cluster.nvlink_domain": 72,
    },
}


@settings(max_examples=12, deadline=None)
@given(
    design=st.sampled_from(sorted(CE_DESIGNS)),
    op=st.sampled_from(["allgather", "alltoall"]),
    size=st.integers(min_value=0, max_value=2**36),
)
def test_ce_never_beats_the_nvlink_bound(design, op, size):
    s = sc(**CE_DESIGNS[design], **{"nccl.registered_buffers": True, "nccl.cta_policy": "zero"})
    (row,) = collective(s, op, "auto", [size])
    assert row.algo == "ce"
    ctx = FabricContext.from_scenario(s)
    # every GPU sends (n-1)/n of S: nccl-tests' busbw is the rate on its NVLink
    assert row.busbw_GBps * 1e9 <= ctx.nvlink_Bps * (1 + 1e-9)
    assert row.busbw_GBps * 1e9 <= ctx.nvlink_Bps * ce_efficiency(ctx.constants, ctx.arch) * (
        1 + 1e-9
    )


def test_ce_is_faster_on_nvlink_than_the_sm_ring_and_takes_no_sms():
    # 256 B copy-engine payloads against the SMs' 128 B (nccl-tests issue 149)
    s = sc(**CE_DESIGNS["b200"], **{"nccl.registered_buffers": True, "nccl.cta_policy": "zero"})
    (ce,) = collective(s, "allgather", "ce", [4 * GIB])
    (ring,) = collective(s, "allgather", "ring", [4 * GIB])
    assert ring.busbw_GBps < ce.busbw_GBps < 900
    (model,) = algo_models(FabricContext.from_scenario(s), "allgather", "ce")
    assert any("0 SMs" in n for n in model.notes)


def test_blackwell_switches_large_all_gathers_to_the_copy_engines_at_nccls_threshold():
    s = sc(**CE_DESIGNS["b200"], **{"nccl.registered_buffers": True})
    ce = version_data()["copy_engine"]
    edge = ce["auto_threshold_elements"] * ce["element_bytes"] * 8  # 8 ranks x 32 MiB
    below, above = collective(s, "allgather", "auto", [edge, edge + 8 * 4])
    assert (below.algo, above.algo) == ("symmetric", "ce")  # count > threshold
    # not on Hopper, not before 2.29, not without NCCL_CTA_POLICY_ZERO in 2.28
    h100 = sc(**CE_DESIGNS["h100"], **{"nccl.registered_buffers": True})
    assert collective(h100, "allgather", "auto", [4 * GIB])[0].algo == "symmetric"
    old = apply_overrides(s, {"nccl.version": "2.28"})
    assert collective(old, "allgather", "auto", [4 * GIB])[0].algo == "symmetric"
    # all-to-all never switches by itself
    assert collective(s, "alltoall", "auto", [4 * GIB])[0].algo != "ce"


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"cluster.n_gpus": 16}, "one NVLink domain"),
        ({"nccl.version": "2.27"}, r"nccl\.version = 2\.27"),
        ({"cluster.gpu": "a100", "fabric.link_gbps": 200}, r"cluster\.gpu = a100"),
        ({"fabric.nvls": False}, r"fabric\.nvls = false"),
    ],
)
def test_ce_is_refused_where_nccl_does_not_run_it(overrides, match):
    s = sc(**{"cluster.n_gpus": 8, **overrides})
    with pytest.raises(AlgorithmUnavailableError, match=match):
        collective(s, "alltoall", "ce", [MIB])
