"""Multi-plane fabrics (``fabric.planes``): sizing, optics, collectives across planes, what-ifs.

Golden example (OCP MRC 1.0 via [SP1] in assets/catalog.yaml): 131,072 GPUs with 800G NICs,
8 planes of 100G on a 51.2T switch (512 ports of 100G) = 2 tiers per plane, 512 leaves and
256 spines per plane, 6,144 switches in all; one plane of 800G on the same ASIC (radix 64)
holds at most 64^3 / 4 = 65,536 NIC ports in 3 tiers.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_model.cli import main
from fabric_model.collectives import algo_models
from fabric_model.collectives.context import FabricContext
from fabric_model.errors import InfeasibleDesignError, ScenarioError
from fabric_model.flows import FlowSet, solve_maxmin
from fabric_model.plant.cost import bill_of_materials
from fabric_model.plant.design import build_topology
from fabric_model.routing import route
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.topology import TopologyRequest, build_topology_from_request
from fabric_model.topology.planes import plane_share

#: B300 servers: 8 GPUs, an 800G ConnectX-8 per GPU on PCIe Gen6 (an HGX B200's PCIe Gen5
#: host link cannot feed an 800G NIC, so the model refuses 800G on b200).
MRC = {
    "cluster.gpu": "b300",
    "fabric.vendor": "lossy-ethernet",
    "fabric.link_gbps": 800,
}


def s(n_gpus: int, planes: int = 1, **extra: object) -> Scenario:
    return apply_overrides(
        Scenario(), {**MRC, "cluster.n_gpus": n_gpus, "fabric.planes": planes, **extra}
    )


# --------------------------------------------------------------------------------------
# sizing and the bill of materials
# --------------------------------------------------------------------------------------


def test_131072_gpus_on_8_planes_of_100g_is_two_tiers_and_6144_switches() -> None:
    bom = bill_of_materials(s(131_072, 8))
    topo = bom.topology
    assert topo.tiers == 2 and topo.planes == 8
    assert bom.hardware.radix == 512 and bom.hardware.switch.key == "th5"
    assert dict(topo.switches_by_tier) == {"leaf": 8 * 512, "spine": 8 * 256}
    assert topo.n_switches == 6_144
    assert topo.params["switches_per_plane"] == 768
    assert topo.max_switch_hops == 3
    # 8 x 100G links per NIC, one fiber leg each; one breakout module per NIC port
    assert topo.links_by_class == {"nic-leaf": 8 * 131_072, "leaf-spine": 8 * 131_072}
    nic_side = [x for x in bom.lines if x.where == "nic-leaf (NIC side)"]
    assert [(x.key, x.quantity) for x in nic_side] == [("osfp_800g_dr8_breakout_nic", 131_072)]
    # switch side: 8 x 100G ports per 800G cage module
    leaf_side = [x for x in bom.lines if x.where == "nic-leaf (leaf side)"]
    assert sum(x.quantity for x in leaf_side) == 8 * 131_072 // 8
    assert bom.to_dict()["planes"] == 8


TH5 = {"fabric.switch": "th5"}  # the same 51.2T ASIC (auto picks Tomahawk 6 for 1 x 800G)


def test_one_plane_of_800g_on_the_same_asic_is_refused_at_131072() -> None:
    with pytest.raises(InfeasibleDesignError, match="65,536") as err:
        build_topology(s(131_072, 1, **{"fabric.tiers": 3}, **TH5))
    assert err.value.key == "fabric.tiers"
    assert build_topology(s(65_536, 1, **TH5)).tiers == 3
    assert build_topology(s(131_072, 1, **TH5)).tiers == 4  # auto: 3 tiers cannot hold it
    # fabric.switch = auto: Tomahawk 6 (128 x 800G) needs one tier fewer than Tomahawk 5
    auto = bill_of_materials(s(131_072, 1))
    assert auto.hardware.switch.key == "th6" and auto.topology.tiers == 3
    assert "over th5" in auto.hardware.switch_choice


@pytest.mark.parametrize("n_endpoints", [2_048, 16_384, 32_768, 65_536, 131_072])
def test_per_plane_closed_form(n_endpoints: int) -> None:
    """Per plane, radix k: leaves = N / (k / 2), spines = N / k (a non-blocking 2-tier build)."""
    k, planes = 512, 8
    req = TopologyRequest(n_gpus=n_endpoints, link_gbps=100, radix=k, planes=planes)
    topo = build_topology_from_request("fat-tree", req)
    assert topo.tiers == 2
    assert topo.switches_by_tier["leaf"] == planes * n_endpoints // (k // 2)
    assert topo.switches_by_tier["spine"] == planes * n_endpoints // k
    assert topo.bisection_GBps == pytest.approx(n_endpoints / 2 * 100 / 8 * planes)
    assert topo.full_bisection_GBps == pytest.approx(n_endpoints / 2 * 800 / 8)


def test_spectrum_x_planes_follow_the_sn5600_manual() -> None:
    """The SN5600 manual lists 100GbE on at most 256 ports [S5]: 3 tiers per plane at 131K."""
    topo = build_topology(s(131_072, 8, **{"fabric.vendor": "spectrum-x"}))
    assert topo.tiers == 3 and topo.params["radix"] == 256


def test_rail_only_builds_in_planes() -> None:
    one = build_topology(s(4_096, 1, **{"fabric.topology": "rail-only"}))
    eight = build_topology(s(4_096, 8, **{"fabric.topology": "rail-only"}))
    assert eight.planes == 8 and eight.n_switches % 8 == 0
    assert eight.tiers <= one.tiers


@settings(max_examples=40, deadline=None)
@given(
    nodes=st.integers(1, 512),
    planes=st.sampled_from([1, 2, 4, 8]),
    radix=st.sampled_from([16, 32, 64, 128]),
    rail=st.booleans(),
)
def test_switch_and_cable_counts_are_planes_times_one_plane(
    nodes: int, planes: int, radix: int, rail: bool
) -> None:
    req = TopologyRequest(n_gpus=8 * nodes, link_gbps=100, radix=radix, rail_optimized=rail)
    try:
        one = build_topology_from_request("fat-tree", req)
    except InfeasibleDesignError:
        return
    many = build_topology_from_request("fat-tree", dataclasses.replace(req, planes=planes))
    assert many.n_switches == planes * one.n_switches
    assert many.n_links == planes * one.n_links
    assert many.tiers == one.tiers and many.max_switch_hops == one.max_switch_hops
    np.testing.assert_allclose(many.graph.link_capacity_Bps, planes * one.graph.link_capacity_Bps)


# --------------------------------------------------------------------------------------
# collectives across planes
# --------------------------------------------------------------------------------------


def _model(sc: Scenario, op: str, algo: str):  # type: ignore[no-untyped-def]
    return algo_models(FabricContext.from_scenario(sc), op, algo)[0]


@pytest.mark.parametrize(("op", "algo"), [("allreduce", "ring"), ("alltoall", "direct")])
def test_eight_planes_match_one_plane_of_the_same_total_rate(op: str, algo: str) -> None:
    one, eight = _model(s(4_096, 1, **TH5), op, algo), _model(s(4_096, 8), op, algo)
    assert eight.busbw_Bps == pytest.approx(one.busbw_Bps, rel=0.10)
    # fewer tiers per plane: fewer hops, less latency
    assert build_topology(s(4_096, 1, **TH5)).tiers == 3
    assert build_topology(s(4_096, 8)).tiers == 2
    assert eight.mean_switch_hops <= one.mean_switch_hops
    assert all(eight.latency_us[p] <= one.latency_us[p] for p in eight.latency_us)


def test_failed_plane_runs_at_seven_eighths() -> None:
    for op, algo in (("allreduce", "ring"), ("alltoall", "direct")):
        healthy = _model(s(1_024, 8), op, algo)
        failed = _model(s(1_024, 8, **{"what_if.failed_planes": 1}), op, algo)
        assert failed.inter_Bps == pytest.approx(7 / 8 * healthy.inter_Bps, rel=1e-9)
        assert 7 / 8 * healthy.busbw_Bps - 1 <= failed.busbw_Bps <= healthy.busbw_Bps


def test_degraded_plane_adaptive_adds_rates_static_is_paced_by_the_slowest() -> None:
    healthy = _model(s(1_024, 8), "alltoall", "direct")
    slow = _model(s(1_024, 8, **{"what_if.degraded_plane_factor": 0.5}), "alltoall", "direct")
    assert slow.inter_Bps == pytest.approx(7.5 / 8 * healthy.inter_Bps, rel=1e-9)
    static = {"fabric.routing": "ecmp"}
    h_static = _model(s(1_024, 8, **static), "alltoall", "direct")
    s_static = _model(
        s(1_024, 8, **static, **{"what_if.degraded_plane_factor": 0.5}), "alltoall", "direct"
    )
    assert s_static.inter_Bps == pytest.approx(0.5 * h_static.inter_Bps, rel=1e-9)


def test_failed_leaf_in_one_plane_slows_its_gpus_by_one_plane() -> None:
    healthy = _model(s(1_024, 8), "alltoall", "direct")
    leaf = _model(s(1_024, 8, **{"what_if.failed_switch": "leaf"}), "alltoall", "direct")
    spine = _model(s(4_096, 8, **{"what_if.failed_switch": "spine"}), "alltoall", "direct")
    assert leaf.inter_Bps == pytest.approx(7 / 8 * healthy.inter_Bps, rel=1e-9)
    assert spine.inter_Bps <= _model(s(4_096, 8), "alltoall", "direct").inter_Bps * (1 + 1e-12)
    notes = FabricContext.from_scenario(s(1_024, 8, **{"what_if.failed_switch": "leaf"})).notes()
    assert any("7 of 8 plane copies" in n for n in notes)


@settings(max_examples=12, deadline=None)
@given(
    nodes=st.sampled_from([2, 4, 16, 64]),
    planes=st.sampled_from([2, 4, 8]),
    failed=st.integers(1, 7),
    op=st.sampled_from(["allreduce", "alltoall"]),
)
def test_busbw_never_increases_when_a_plane_fails(
    nodes: int, planes: int, failed: int, op: str
) -> None:
    failed = min(failed, planes - 1)
    algo = "ring" if op == "allreduce" else "direct"
    healthy = _model(s(8 * nodes, planes), op, algo)
    down = _model(s(8 * nodes, planes, **{"what_if.failed_planes": failed}), op, algo)
    assert down.busbw_Bps <= healthy.busbw_Bps * (1 + 1e-12)
    assert down.inter_Bps == pytest.approx((planes - failed) / planes * healthy.inter_Bps)


def _explicit_planes_rates(
    plane_topo, src: np.ndarray, dst: np.ndarray, factors: list[float]
) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Each connection split into one flow per plane, each plane a separate copy of the links."""
    rf = route(plane_topo, src, dst, "adaptive", plane_topo.graph.link_capacity_Bps)
    fl, n = rf.flows, rf.link_capacity_Bps.size
    k = len(factors)
    lengths = np.diff(fl.flow_link_indptr)
    indptr = np.concatenate([[0], np.cumsum(np.tile(lengths, k))])
    indices = np.concatenate([fl.flow_link_indices + p * n for p in range(k)])
    weights = np.tile(fl.flow_link_weights, k)
    cap = np.concatenate([rf.link_capacity_Bps * f for f in factors])
    sol = solve_maxmin(FlowSet(indptr, indices, weights, k * n), cap)
    per_plane = sol.rate_Bps.reshape(k, -1) / rf.flow_fraction
    conn = np.zeros(src.size)
    for p in range(k):
        np.add.at(conn, rf.flow_of_connection, per_plane[p])
    return conn


@pytest.mark.parametrize("factors", [[1.0, 1.0], [1.0, 0.5], [1.0, 1.0, 1.0, 0.25]])
def test_bundled_planes_equal_an_explicit_multi_plane_solve(factors: list[float]) -> None:
    """The ``x planes`` graph with spraying over planes equals separate copies solved together."""
    planes = len(factors)
    req = TopologyRequest(n_gpus=128, link_gbps=100, radix=16, rail_optimized=False)
    plane = build_topology_from_request("fat-tree", req)
    stacked = build_topology_from_request("fat-tree", dataclasses.replace(req, planes=planes))
    rng = np.random.default_rng(7)
    src = np.arange(128)
    dst = rng.permutation(128)
    keep = src // 8 != dst // 8
    src, dst = src[keep], dst[keep]
    explicit = _explicit_planes_rates(plane, src, dst, factors)
    share = plane_share(planes, 0, min(factors), spreading=True)
    cap = stacked.graph.link_capacity_Bps * share
    rf = route(stacked, src, dst, "adaptive", cap)
    sol = solve_maxmin(rf.flows, rf.link_capacity_Bps)
    bundled = np.full(src.size, np.inf)
    np.minimum.at(bundled, rf.flow_of_connection, sol.rate_Bps / rf.flow_fraction)
    # every connection gets the sum of its planes; the bundled graph's slowest agrees
    assert bundled.min() == pytest.approx(explicit.min(), rel=1e-9)


# --------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "key", "words"),
    [
        ({"fabric.planes": 3}, "fabric.planes", "one of 1, 2, 4, 8"),
        (
            {"fabric.planes": 8, "fabric.topology": "dragonfly-plus"},
            "fabric.planes",
            "allows fabric.planes = 1",
        ),
        (
            {"fabric.planes": 4, "fabric.vendor": "infiniband", "fabric.link_gbps": 400},
            "fabric.planes",
            "runs 200, 400 Gb/s ports, not 100",
        ),
        ({"fabric.planes": 1, "what_if.failed_planes": 1}, "what_if.failed_planes", ">= 2"),
        ({"fabric.planes": 8, "what_if.failed_planes": 8}, "what_if.failed_planes", "0 to 7"),
        (
            {"fabric.planes": 2, "what_if.failed_planes": 1, "what_if.degraded_plane_factor": 0.5},
            "what_if.failed_planes",
            "at least one plane must stay healthy",
        ),
        ({"fabric.planes": 1, "what_if.failed_switch": "leaf"}, "what_if.failed_switch", ">= 2"),
    ],
)
def test_bad_planes_exit_2_with_one_line(
    keys: dict[str, object], key: str, words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["bom", "--set", "cluster.gpu=b300", "--set", "cluster.n_gpus=1024"]
    merged = {"fabric.link_gbps": 800, "fabric.vendor": "lossy-ethernet", **keys}
    for k, v in merged.items():
        args += ["--set", f"{k}={v}"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and key in err and words in err, err


def test_planes_key_is_listed_with_its_values(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys"]) == 0
    out = capsys.readouterr().out
    assert "fabric.planes" in out and "what_if.failed_planes" in out


def test_scenario_error_names_the_plane_count() -> None:
    with pytest.raises(ScenarioError, match=r"fabric\.planes"):
        apply_overrides(Scenario(), {"fabric.planes": 5})


# --------------------------------------------------------------------------------------
# the sidebar lever
# --------------------------------------------------------------------------------------


@pytest.mark.app
def test_sidebar_planes_lever_rebuilds_the_topology_page() -> None:
    from test_app_pages import TOPOLOGY, messages, open_app, url

    at = open_app(
        TOPOLOGY,
        **{
            "cluster.gpu": "b300",
            "fabric.vendor": "lossy-ethernet",
            "fabric.link_gbps": "800",
            "cluster.n_gpus": "65536",
        },
    )
    lever = at.selectbox(key="w:fabric.planes")
    assert lever.value == 1 and list(lever.options) == ["1", "2", "4", "8"]
    lever.set_value(8).run()
    assert not at.exception and not at.error, messages(at.error)
    assert url(at)["fabric.planes"] == "8"
    counts = at.dataframe[0].value
    leaves = counts[counts["what"] == "leaf switches"]["count"].iloc[0]
    assert leaves == 8 * 256  # 65,536 NICs / 256 down-ports per plane, x 8 planes


@pytest.mark.app
def test_planes_the_switch_cannot_serve_are_explained_on_the_page() -> None:
    from test_app_pages import TOPOLOGY, messages, open_app

    at = open_app(TOPOLOGY, **{"fabric.planes": "2"})  # NDR InfiniBand: no breakout module
    shown = messages(at.error) + messages(at.warning)
    assert not at.exception
    assert any("fabric.planes" in m for m in shown), shown
