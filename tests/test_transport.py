"""Congestion control by transport and the misconfiguration what-ifs (issue 29, items 1, 3, 4).

Hand calculations for DCQCN's cut and recovery (Zhu et al., SIGCOMM 2015), an incast on a
shallow buffer, the host-staged (GPUDirect RDMA off) bandwidth and a flapping link's stall;
the DCQCN kernel held equal to its readable twin; InfiniBand never below RoCE on one
pattern; a pattern without incast left exactly at the max-min answer by every transport;
every misconfiguration lowering or leaving the busbw, never raising it (hypothesis); bad
keys refused with exit 2; the What-if page with one misconfiguration; check-nccl naming
GPUDirect RDMA on a log the model made with it off.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_model.cli import main
from fabric_model.collectives import FabricContext, _kernels, _reference, algo_models, collective
from fabric_model.collectives.failure_modes import failure_modes, misconfigured
from fabric_model.collectives.model import bus_factor
from fabric_model.collectives.transport import _dcqcn_vector, incast, overload
from fabric_model.errors import FabricModelError
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.transports import flap_stall_s, misconfig_params, mtu_goodput_factor
from fabric_model.validate.compare import compare_log
from fabric_model.validate.nccl_log import parse_nccl_tests
from tests.apptest_helpers import alerts, find_metric, open_page, url

C = 50e9  # a 400G port's payload rate, bytes/s
GOLDEN = Path(__file__).parent / "golden" / "misconfig_public.yaml"
SIZES = [2**k for k in range(20, 34, 2)]  # 1 MiB .. 8 GiB


def s16(**over: object) -> Scenario:
    """Two HGX H100 nodes (16 GPUs) with the given keys."""
    return apply_overrides(Scenario(), {"cluster.n_gpus": 16, **over})


# ------------------------------------------------------------------------------ DCQCN


def test_dcqcn_cut_and_fast_recovery_by_hand() -> None:
    """A CNP halves the rate (alpha = 1); five timer events of 55 us close 31/32 of the gap.

    Zhu et al. 2015, section 3.1: on a CNP ``R_T = R_C``, ``R_C = R_C (1 - alpha / 2)``,
    ``alpha = (1 - g) alpha + g``; each rate-increase event of fast recovery sets
    ``R_C = (R_T + R_C) / 2``, so after ``k`` events the gap is ``(R_T / 2) / 2^k``.
    """
    p = dict(zip(_kernels.DCQCN_FIELDS, _dcqcn_vector(), strict=True))
    assert p["rate_timer_s"] == pytest.approx(55e-6) and p["fast_recovery_steps"] == 5
    s = _reference._Sender(C, C)
    s.cut(p["g"])
    assert s.rate == pytest.approx(C / 2) and s.target == C and s.alpha == pytest.approx(1.0)
    dt, elapsed = 0.5e-6, 0.0
    while s.t_events < 5:  # five timer events (no byte-counter event: nothing is sent)
        s.tick(dt, 0.0, p, C)
        elapsed += dt
    assert 5 * 55e-6 - dt <= elapsed <= 5 * (55e-6 + dt) + 1e-12  # an event a step after 55 us
    assert s.rate == pytest.approx(C - (C / 2) / 2**5, rel=1e-9)  # 0.984 C
    # alpha decays by (1 - g) per 55 us without a CNP: five decays
    assert s.alpha == pytest.approx((1 - 1 / 256) ** 5, rel=1e-9)


@pytest.mark.parametrize(
    "case",
    [
        (2e6, 3, C, C, 1.3e6, 1.2e6, 6e-6, 4096.0, True),
        (3e7, 7, C / 3, C, 1.3e6, 1.2e6, 6e-6, 4096.0, False),
        (5e6, 4, C * 0.6, C, 1e6, 0.9e6, 5e-6, 1024.0, True),
    ],
)
def test_dcqcn_kernel_equals_its_twin(case: tuple) -> None:
    params = _dcqcn_vector()
    fast = _kernels.dcqcn_incast(*case, params, 1.5e-6, 200_000)
    slow = _reference.dcqcn_incast(*case, params, 1.5e-6, 200_000)
    assert fast == pytest.approx(slow, rel=1e-12, abs=1e-15)
    assert fast[0] >= case[0] / case[3] * (1 - 1e-9)  # never faster than the port


def test_incast_on_a_shallow_buffer_by_hand() -> None:
    """UEC (receiver credits after one round trip): the burst beyond the buffer is resent.

    16 senders at line rate for one 4 us round trip bring 16 x 50 GB/s x 4 us = 3.2 MB;
    the port drains 0.2 MB and holds 1 MB: 2.0 MB are trimmed and sent again, so a 10 MB
    phase takes (10 + 2) / 10 of its time. A 4 MB buffer holds the burst.
    """
    kw = dict(pfc=False, fan_in=16, load=16.0, port_Bps=C, rtt_s=4e-6, mtu_bytes=4096, cable_m=20)
    shallow = incast("uec", buffer_bytes=1e6, **kw)
    deep = incast("uec", buffer_bytes=4e6, **kw)
    assert shallow is not None and deep is not None
    assert shallow.at(10e6) == pytest.approx(1.2, rel=1e-3)
    assert deep.at(10e6) == pytest.approx(1.0)
    # RoCE with PFC pauses instead of dropping; on the shallow buffer the senders' links
    # are held paused part of the time (victim flows behind them wait as long)
    roce = incast("roce-dcqcn", buffer_bytes=0.3e6, **{**kw, "pfc": True})
    assert roce is not None and max(roce.pause_fraction) > 0


def test_overload_counts_each_senders_share_of_its_nic() -> None:
    ring = (np.arange(8), (np.arange(8) + 1) % 8)
    assert overload(*ring) == (1, 1.0)
    a2a_src, a2a_dst = np.nonzero(~np.eye(8, dtype=bool))
    assert overload(a2a_src, a2a_dst) == (7, pytest.approx(1.0))  # uniform: no incast
    weight = np.where(a2a_dst == 0, 4.0, 1.0)  # receiver 0 hot: its senders end on it alone
    assert overload(a2a_src, a2a_dst, weight) == (7, pytest.approx(7.0))


# ----------------------------------------------------------------- transports compared


@pytest.fixture(scope="module")
def skewed() -> dict[str, float]:
    """A hot-expert all-to-all on 128 GPUs (1 GPU per node): delivered busbw per transport."""
    out = {}
    for vendor, transport in (
        ("infiniband", "auto"),
        ("roce", "roce-dcqcn"),
        ("roce", "roce-pfc"),
        ("spectrum-x", "spectrum-x"),
        ("lossy-ethernet", "uec"),
    ):
        s = apply_overrides(
            Scenario(),
            {
                "cluster.n_gpus": 128,
                "cluster.gpus_per_node": 1,
                "cluster.nvlink_domain": 1,
                "fabric.vendor": vendor,
                "fabric.transport": transport,
                "model.routing_skew": 4.0,
            },
        )
        rows = collective(s, "alltoall", "direct", [2**24, 2**28])
        out[f"{vendor}/{transport}"] = min(r.transport_efficiency for r in rows)
    return out


def test_infiniband_is_never_below_roce_on_the_same_pattern(skewed: dict[str, float]) -> None:
    assert skewed["infiniband/auto"] == 1.0  # credits: the max-min answer
    assert skewed["roce/roce-pfc"] == 1.0  # PFC without rate cuts keeps the port busy too
    assert skewed["roce/roce-dcqcn"] < 1.0  # DCQCN over-cuts and recovers by its timers
    assert all(skewed["infiniband/auto"] >= v for v in skewed.values())


@pytest.mark.parametrize(
    ("vendor", "transports"),
    [
        ("roce", ("roce-dcqcn", "roce-pfc")),
        ("spectrum-x", ("spectrum-x", "roce-dcqcn")),
        ("lossy-ethernet", ("lossy-spray", "uec")),
    ],
)
def test_a_pattern_without_incast_keeps_the_max_min_answer(vendor: str, transports: tuple) -> None:
    """A ring (fan-in 1) and a uniform all-to-all (overload 1) come out equal on every
    transport of a vendor: the transport only acts on an incast."""
    got = []
    for tr in transports:
        s = s16(**{"fabric.vendor": vendor, "fabric.transport": tr})
        ring = collective(s, "allreduce", "ring", SIZES)
        a2a = collective(s, "alltoall", "hierarchical", SIZES)
        assert all(r.transport_efficiency == 1.0 for r in ring + a2a)
        got.append([r.time_us for r in ring + a2a])
    assert got[0] == got[1]


# --------------------------------------------------------------------- misconfigurations


def test_host_staged_bandwidth_by_hand() -> None:
    """GDR off on HGX H100: min(PCIe uplink 57.2 / 2, DRAM 614.4 x 0.8 / (4 x 8)) per GPU."""
    ctx = FabricContext.from_scenario(s16(**{"what_if.gdr": "off"}))
    dram = 614.4 * misconfig_params("host")["dram_efficiency"] / (4 * 8)
    assert dram == pytest.approx(15.36)
    assert ctx.nic_feed_Bps == pytest.approx(min(57.2 / 2, dram) * 1e9)
    assert ctx.host_label == "host memory (GDR off: host-staged)"
    # the ring's network side: 8 NICs per node, each fed at the host-staged rate
    ring = algo_models(ctx, "allreduce", "ring")[0]
    assert ring.inter_Bps == pytest.approx(8 * dram * 1e9, rel=1e-6)
    assert ring.ceiling == "host-memory"


def test_mtu_flapping_and_channels_by_hand() -> None:
    # RoCEv2 carries 82 B of headers per packet: 1024 / 1106 against 4096 / 4178
    assert mtu_goodput_factor("ethernet", 1024) == pytest.approx(
        (1024 / 1106) / (4096 / 4178), rel=1e-12
    )
    stall, _, budget = flap_stall_s()  # 4.096 us x 2^20 = 4.29 s; 7 retries
    assert stall == pytest.approx(4.096e-6 * 2**20) and budget == pytest.approx(7 * stall)
    base = collective(s16(), "allreduce", "ring", [2**30])[0]
    flap = collective(s16(**{"what_if.flapping_link": 100}), "allreduce", "ring", [2**30])
    assert flap[0].time_us == pytest.approx(base.time_us / (1 - stall / 100), rel=1e-9)
    few = FabricContext.from_scenario(s16(**{"nccl.max_channels": 4}))
    assert few.nics_used_per_domain == 2  # two channels per NIC


#: The misconfiguration keys of issue 29 (fewer QPs can only be compared on an ECMP fabric:
#: more QPs hash better there, so a design with several is not "misconfigured" by one).
MISCONFIG_KEYS = {
    "what_if.gdr",
    "what_if.pfc",
    "what_if.mtu",
    "what_if.nic_affinity",
    "what_if.acs",
    "what_if.flapping_link",
    "nccl.max_channels",
}
MISCONFIGS = [m for m in failure_modes() if set(m.overrides) <= MISCONFIG_KEYS] + [None]


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    vendor=st.sampled_from(["infiniband", "roce", "spectrum-x", "lossy-ethernet"]),
    gpu=st.sampled_from(["h100", "b200", "gb200"]),
    n=st.sampled_from([16, 144]),
    op=st.sampled_from(["allreduce", "alltoall", "allgather"]),
    mode=st.sampled_from(MISCONFIGS),
    skew=st.sampled_from([1.0, 3.0]),
)
def test_a_misconfiguration_never_raises_the_busbw(
    vendor: str, gpu: str, n: int, op: str, mode: object, skew: float
) -> None:
    try:
        base = apply_overrides(
            Scenario(),
            {
                "cluster.gpu": gpu,
                "cluster.n_gpus": n,
                "fabric.vendor": vendor,
                "model.routing_skew": skew,
            },
        )
        FabricContext.from_scenario(base)
    except FabricModelError:
        return  # a design the catalog refuses (the fuzz tests cover the refusal)
    modes = MISCONFIGS[:-1] if mode is None else [mode]
    sizes = [2**16, 2**26, 2**32]
    before = collective(base, op, "auto", sizes)
    for m in modes:
        bad = misconfigured(base, m)  # type: ignore[arg-type]
        if bad is None:
            continue  # the design refuses this mode (PFC on InfiniBand) or already has it
        after = collective(bad, op, "auto", sizes)
        for b, a in zip(before, after, strict=True):
            # NCCL's tuner may switch algorithm under a misconfiguration (fewer channels drop
            # its ring estimate below NVLS-Tree's, which the channel cap does not touch), so
            # the delivered time is held to the healthy fabric's fastest candidate
            assert a.time_us >= b.fastest_time_us * (1 - 1e-9), (m.key, b.size_bytes)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("setting", "words"),
    [
        ("what_if.pfc=off", "InfiniBand has no PFC"),
        ("what_if.mtu=9000", "what_if.mtu"),
        ("nccl.max_channels=0", "nccl.max_channels"),
        ("what_if.flapping_link=3", "leaves no progress"),
        ("fabric.transport=uec", "fabric.transport"),
    ],
)
def test_bad_keys_exit_2_naming_the_key(setting: str, words: str, capsys) -> None:
    code = main(["collective", "--op", "allreduce", "--sizes", "1M", "--set", setting])
    err = capsys.readouterr().err
    assert code == 2 and words in err and setting.split("=")[0] in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_check_nccl_names_gdr_on_a_log_the_model_made_with_gdr_off() -> None:
    n = 16
    rows = collective(s16(**{"what_if.gdr": "off"}), "allreduce", "auto", SIZES)
    lines = [
        "#       size         count      type   redop    root     time   algbw   busbw "
        "#wrong     time   algbw   busbw #wrong"
    ]
    for size, row in zip(SIZES, rows, strict=True):
        alg = size / row.time_us / 1e3
        cells = f"{row.time_us:10.2f} {alg:7.2f} {alg * bus_factor('allreduce', n):7.2f}      0"
        lines.append(f"{size:12d} {size // 4:13d}     float     sum      -1 {cells} {cells}")
    result = compare_log(parse_nccl_tests("\n".join(lines) + "\n", op="allreduce"), s16())
    assert result.diagnosis_key == "gdr-off"
    assert "GPUDirect RDMA is not in use" in result.diagnosis[0]
    assert "NCCL_NET_GDR_LEVEL" in result.diagnosis[0]
    assert result.rows[-1].failure_match == "gdr-off"
    assert result.median_ratio < 0.85  # the healthy model misses it


def test_whatif_page_offers_a_misconfiguration_in_the_url() -> None:
    at = open_page("pages/whatif.py", **{"wi.gdr": "off"})
    assert not alerts(at)
    assert url(at)["wi.gdr"] == "off"
    table = at.dataframe[0].value.set_index("what_if")
    assert "host-staged (GDR off)" in table.loc["GPUDirect RDMA", "setting"]
    assert find_metric(at, "Step time").delta.startswith("+")  # the step shows its cost
    at.radio(key="wi:what_if.acs").set_value("on").run()
    assert url(at)["wi.acs"] == "on"


def test_published_mtu_gain_matches_the_header_overhead() -> None:
    """Held-out: jumbo frames against 1500 on RoCE (RDMA MTU 4096 against 1024), ~5 %."""
    doc = yaml.safe_load(GOLDEN.read_text(encoding="utf-8"))
    (case,) = [c for c in doc["cases"] if c["key"] == "what_if.mtu"]
    small, large = case["values"]
    model = mtu_goodput_factor(case["protocol"], large) / mtu_goodput_factor(
        case["protocol"], small
    )
    assert model == pytest.approx(case["ratio"], abs=case["tolerance"])  # 1.059 vs 1.05
