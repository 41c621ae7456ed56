"""The Collectives page: pure figure builders, the cached facades, and AppTest runs.

Expected numbers come from ``fabric_model.collectives`` (the front door ``collective``),
never from the page, so a page or facade that draws the wrong curve fails.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import pytest
from streamlit.testing.v1 import AppTest

from fabric_model.collectives import ALGOS, AlgorithmUnavailableError, collective
from fabric_model.presets import DEFAULT_PRESET, list_presets, load_preset
from fabric_model.scenario import apply_overrides
from tests.apptest_helpers import (
    assert_no_exception,
    figure_titled,
    figures,
    messages,
    url,
)
from tests.apptest_helpers import open_page as open_app_page
from ui import facade
from ui.collective_figures import (
    auto_crossovers,
    auto_summary_text,
    collective_breakdown_figure,
    collective_breakdown_frame,
    collective_busbw_figure,
    collective_curve_frame,
    fabric_effects_figure,
    fabric_effects_notes,
    unavailable_text,
)
from ui.figure_base import size_label
from ui.theme import ALGO_COLORS, VENDOR_COLORS

PAGE = "pages/collectives.py"
PRESETS = [p.name for p in list_presets()]
SIZES = list(facade.COLLECTIVE_SIZES)
GIB = 2**30
CURVE_TITLE = "bus bandwidth vs message size"
#: The fabric effects expander's key: closed, the section is not solved.
EFFECTS_OPEN = "coll_effects_open"


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def curves_of(scenario: Any, op: str, algos: tuple[str, ...]) -> dict[str, list[Any]]:
    """Each algorithm's curve straight from the model's front door."""
    return {a: collective(scenario, op, a, SIZES) for a in algos}


def scattered_roce() -> Any:
    return apply_overrides(load_preset("dgx-h100-roce-ecmp"), {"what_if.placement": "scattered"})


def open_page(effects: bool = False, **query: str) -> AppTest:
    """Open the page in a new session; ``effects`` opens the (lazy) fabric effects section."""
    state = {EFFECTS_OPEN: True} if effects else None
    return open_app_page(PAGE, query, warm=True, session_state=state)


def trace(fig: dict[str, Any], name_start: str) -> dict[str, Any]:
    found = [t for t in fig["data"] if str(t.get("name", "")).startswith(name_start)]
    assert found, [t.get("name") for t in fig["data"]]
    return found[0]


def auto_markers(fig: dict[str, Any]) -> dict[str, Any]:
    return trace(fig, "auto's choice")


# --------------------------------------------------------------------------------------
# pure figure builders
# --------------------------------------------------------------------------------------


def test_sizes_and_labels() -> None:
    assert SIZES[0] == 8 and SIZES[-1] == 16 * GIB
    assert all(b == 2 * a for a, b in itertools.pairwise(SIZES))
    assert [size_label(s) for s in (8, 1024, 3 * 2**20, GIB, 16 * GIB)] == [
        "8 B",
        "1 KiB",
        "3 MiB",
        "1 GiB",
        "16 GiB",
    ]


def test_busbw_figure_is_log_log_with_one_line_per_algorithm() -> None:
    scenario = load_preset(DEFAULT_PRESET)
    curves = curves_of(scenario, "allreduce", ("ring", "tree", "nvls"))
    auto = collective(scenario, "allreduce", "auto", SIZES)
    fig = collective_busbw_figure(curves, auto, title="t")
    assert isinstance(fig, go.Figure)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert "GB/s" in fig.layout.yaxis.title.text and "bytes" in fig.layout.xaxis.title.text
    lines = {
        t.name: t
        for t in fig.data
        if t.mode == "lines" and t.fill is None and t.line.width and t.line.width < 5
    }
    assert set(lines) == {"ring", "tree (double binary)", "NVLS"}
    ring = lines["ring"]
    assert list(ring.x) == SIZES
    assert list(ring.y) == pytest.approx([r.busbw_GBps for r in curves["ring"]])
    assert ring.line.color == ALGO_COLORS["ring"]
    assert "time" in ring.hovertemplate and "algbw" in ring.hovertemplate
    assert ring.customdata[0][0] == "8 B"  # the size, with a binary suffix
    # auto: markers whose hover names the chosen algorithm and protocol
    markers = next(t for t in fig.data if t.mode == "markers")
    assert list(markers.y) == pytest.approx([r.busbw_GBps for r in auto])
    assert [c[3] for c in markers.customdata] == [r.algo for r in auto]
    assert [c[4] for c in markers.customdata] == [r.proto for r in auto]
    assert list(markers.marker.color) == [ALGO_COLORS[r.algo] for r in auto]
    # deterministic (adaptive) routing: no ECMP band
    assert not [t for t in fig.data if t.fill == "tonexty"]
    assert fig.layout.yaxis.type == "log"
    assert collective_busbw_figure(curves, auto, log_y=False).layout.yaxis.type == "linear"


def test_crossover_lines_where_auto_switches_algorithm() -> None:
    scenario = load_preset(DEFAULT_PRESET)
    auto = collective(scenario, "allreduce", "auto", SIZES)
    switches = auto_crossovers(auto)
    # the model's own choice, read independently of the figure code
    expected = [
        (b.size_bytes, a.algo, b.algo) for a, b in itertools.pairwise(auto) if a.algo != b.algo
    ]
    assert switches == expected and switches, "the default preset's auto switches algorithm"
    fig = collective_busbw_figure(curves_of(scenario, "allreduce", ("tree",)), auto)
    vlines = [s for s in fig.layout.shapes if s.type == "line" and s.x0 == s.x1]
    assert sorted(s.x0 for s in vlines) == [size for size, _, _ in switches]
    assert all(s.line.dash == "dot" for s in vlines)
    texts = [a.text for a in fig.layout.annotations]
    for size, old, new in switches:
        assert any(f"{old} → {new}" in t and size_label(size) in t for t in texts), texts
        # annotations on a log axis are placed in log10 units
        assert any(a.x == pytest.approx(math.log10(size)) for a in fig.layout.annotations)
    assert f"{switches[0][1]} → {switches[0][2]}" in auto_summary_text(auto)

    # a protocol change alone is not a crossover: all-gather runs ring only (before NCCL
    # 2.31, whose PAT with NVLS inside takes the sizes up to 2 GiB here)
    ag = collective(apply_overrides(scenario, {"nccl.version": "2.30"}), "allgather", "auto", SIZES)
    assert len({r.proto for r in ag}) > 1
    assert auto_crossovers(ag) == []
    assert not collective_busbw_figure({}, ag).layout.shapes


def test_ecmp_band_between_min_and_max_over_seeds() -> None:
    scenario = scattered_roce()
    curves = curves_of(scenario, "allreduce", ("ring", "tree"))
    fig = collective_busbw_figure(curves, ecmp=True)
    bands = [t for t in fig.data if t.fill == "tonexty"]
    assert len(bands) == 2
    for band, algo in zip(bands, ("ring", "tree"), strict=True):
        upper = fig.data[fig.data.index(band) - 1]  # filled towards the trace drawn before it
        assert list(band.y) == pytest.approx([r.busbw_min_GBps for r in curves[algo]])
        assert list(upper.y) == pytest.approx([r.busbw_max_GBps for r in curves[algo]])
        assert band.legendgroup == algo
    ring = curves["ring"][-1]
    assert ring.busbw_min_GBps < ring.busbw_GBps < ring.busbw_max_GBps  # hashing collides
    assert not [t for t in collective_busbw_figure(curves).data if t.fill]


def test_breakdown_figure_and_frame() -> None:
    scenario = load_preset(DEFAULT_PRESET)
    curves = curves_of(scenario, "allreduce", ("ring", "tree", "nvls"))
    auto = collective(scenario, "allreduce", "auto", SIZES)
    fig = collective_breakdown_figure(curves, GIB)
    assert fig.layout.barmode == "stack"
    bars = [t for t in fig.data if t.type == "bar"]
    assert [b.name for b in bars] == ["latency term", "bandwidth term"]
    assert all(b.orientation == "h" for b in bars)
    at_size = [next(r for r in rows if r.size_bytes == GIB) for rows in curves.values()]
    assert list(bars[0].x) == pytest.approx([r.latency_us for r in at_size])
    assert list(bars[1].x) == pytest.approx([r.bandwidth_us for r in at_size])
    assert "1 GiB" in fig.layout.title.text and "us" in fig.layout.xaxis.title.text

    from fabric_model.collectives import FabricContext, algo_models

    ctx = FabricContext.from_scenario(scenario)
    models = {a: algo_models(ctx, "allreduce", a)[0] for a in curves}
    frame = collective_breakdown_frame(curves, models, GIB, auto)
    # across NVLink domains the nvls request runs NCCL's NVLS-Tree, labelled as such
    assert list(frame["algo"]) == ["ring", "tree", "nvls-tree"]
    assert frame["nvlink_busbw_GBps"].notna().all()
    assert {
        "time_us",
        "latency_us",
        "bandwidth_us",
        "busbw_GBps",
        "busbw_range_GBps",
        "bottleneck",
        "nvlink_busbw_GBps",
        "network_busbw_GBps",
        "proto",
        "regime",
        "ceiling",
        "pct_of_ceiling",
    } <= set(frame)
    # every row says why it is where it is (issue 31 item 7)
    assert set(frame["regime"]) <= {"latency", "bandwidth"}
    assert (frame["pct_of_ceiling"] <= 100 + 1e-9).all()
    assert frame["ceiling"].tolist() == [models[a].ceiling for a in curves]
    assert frame["time_us"].tolist() == pytest.approx(
        (frame["latency_us"] + frame["bandwidth_us"]).tolist()
    )
    assert frame["nvlink_busbw_GBps"].tolist() == pytest.approx(
        [models[a].intra_Bps / 1e9 for a in curves]
    )
    assert frame["network_busbw_GBps"].tolist() == pytest.approx(
        [models[a].inter_Bps / 1e9 for a in curves]
    )
    picked = next(r.algo for r in auto if r.size_bytes == GIB)
    assert frame.loc[frame["auto_pick"], "algo"].tolist() == [picked]


def test_curve_frame_has_every_algorithm_and_size() -> None:
    scenario = load_preset(DEFAULT_PRESET)
    curves = curves_of(scenario, "allreduce", ("ring", "tree"))
    auto = collective(scenario, "allreduce", "auto", SIZES)
    frame = collective_curve_frame(curves, auto)
    assert len(frame) == 3 * len(SIZES)
    assert frame["curve"].unique().tolist() == ["ring", "tree", "auto"]
    assert {
        "bytes",
        "size",
        "time_us",
        "algbw_GBps",
        "busbw_GBps",
        "proto",
        "algo",
        "busbw_min_GBps",
        "busbw_max_GBps",
        "latency_us",
        "bandwidth_us",
    } <= set(frame)
    auto_rows = frame[frame["curve"] == "auto"]
    assert auto_rows["busbw_GBps"].tolist() == pytest.approx([r.busbw_GBps for r in auto])
    assert "ring" in frame.to_csv(index=False)


def test_fabric_effects_figure_draws_vendor_bars_and_unavailable_cases() -> None:
    row = {
        "size_bytes": 4 * GIB,
        "n_gpus": 1024,
        "placement": "scattered",
        "proto": "Simple",
        "time_us": 1.0,
        "bottleneck": "leaf-spine",
        "busbw_large_GBps": 1.0,
    }
    effects = pd.DataFrame(
        [
            {
                **row,
                "vendor": "infiniband",
                "routing": "adaptive",
                "op": "allreduce",
                "algo": "ring",
                "busbw_GBps": 290.0,
                "busbw_min_GBps": 290.0,
                "busbw_max_GBps": 290.0,
                "reason": "",
            },
            {
                **row,
                "vendor": "infiniband",
                "routing": "adaptive",
                "op": "alltoall",
                "algo": "hierarchical",
                "busbw_GBps": float("nan"),
                "busbw_min_GBps": float("nan"),
                "busbw_max_GBps": float("nan"),
                "reason": "needs too many connections",
            },
            {
                **row,
                "vendor": "roce",
                "routing": "ecmp",
                "op": "allreduce",
                "algo": "ring",
                "busbw_GBps": 90.0,
                "busbw_min_GBps": 80.0,
                "busbw_max_GBps": 110.0,
                "reason": "",
            },
            {
                **row,
                "vendor": "roce",
                "routing": "ecmp",
                "op": "alltoall",
                "algo": "hierarchical",
                "busbw_GBps": 47.0,
                "busbw_min_GBps": 47.0,
                "busbw_max_GBps": 47.0,
                "reason": "",
            },
        ]
    )
    fig = fabric_effects_figure(effects)
    assert fig.layout.barmode == "group"
    ib, roce = fig.data
    assert ib.marker.color == VENDOR_COLORS["infiniband"]
    assert roce.marker.color == VENDOR_COLORS["roce"]
    assert list(ib.y) == [290.0, 0.0] and list(ib.text) == ["290", "n/a"]
    assert "too many connections" in ib.customdata[1]
    assert list(roce.error_y.array) == pytest.approx([20.0, 0.0])
    assert list(roce.error_y.arrayminus) == pytest.approx([10.0, 0.0])
    assert "scattered" in fig.layout.title.text and "4 GiB" in fig.layout.title.text
    notes = fabric_effects_notes(effects)
    assert notes.count("\n- ") == 1 and "InfiniBand" in notes
    assert fabric_effects_notes(effects[effects["reason"] == ""]) == ""


def test_unavailable_text_names_each_algorithm_and_reason() -> None:
    text = unavailable_text({"sharp": "needs InfiniBand", "nvls": "needs Hopper"}, "allreduce")
    assert "all-reduce" in text and "**sharp**: needs InfiniBand" in text and "nvls" in text


# --------------------------------------------------------------------------------------
# facades (called outside a streamlit run: st.cache_resource works in bare mode)
# --------------------------------------------------------------------------------------


def test_op_algorithms_table_matches_the_model() -> None:
    # registered buffers: SHARP all-gather / reduce-scatter (NVLS + IB SHARP) runs on them
    scenario = apply_overrides(
        load_preset(DEFAULT_PRESET),
        {"cluster.n_gpus": 64, "nccl.registered_buffers": True},
    )
    for op, listed in facade.OP_ALGORITHMS.items():
        assert set(facade.DEFAULT_ALGORITHMS[op]) <= set(listed)
        for algo in ALGOS:
            if algo == "auto":
                continue
            if algo in listed:
                collective(scenario, op, algo, [GIB])  # runs (sharp and nvls are available)
            else:
                with pytest.raises(AlgorithmUnavailableError):
                    collective(scenario, op, algo, [GIB])


@pytest.mark.parametrize(
    ("preset", "op", "unavailable"),
    [
        (DEFAULT_PRESET, "allreduce", set()),
        # the page also tries NVLS all-gather, which runs inside one NVLink domain only, and
        # SHARP's (NVLS + IB SHARP), which needs registered buffers
        (DEFAULT_PRESET, "allgather", {"nvls", "sharp"}),
        ("dgx-h100-roce-ecmp", "allreduce", {"sharp"}),  # no in-network reduction on RoCE
    ],
)
def test_facade_curves_equal_the_models_front_door(
    preset: str, op: str, unavailable: set[str]
) -> None:
    scenario = load_preset(preset)
    algos = facade.DEFAULT_ALGORITHMS[op]
    got = facade.collective_curves(scenario, op, algos)
    assert set(got.unavailable) == unavailable
    assert set(got.curves) == set(algos) - unavailable and got.curves
    assert got.sizes == tuple(SIZES)
    assert got.auto == tuple(collective(scenario, op, "auto", SIZES))
    for algo in algos:
        try:
            expected = collective(scenario, op, algo, SIZES)
        except AlgorithmUnavailableError as exc:
            assert got.unavailable[algo] == str(exc)
            assert algo not in got.curves
        else:
            assert got.curves[algo] == tuple(expected)
    assert got.ecmp == (preset == "dgx-h100-roce-ecmp")


def test_default_algorithms_drop_what_cannot_run() -> None:
    assert facade.default_algorithms(load_preset(DEFAULT_PRESET), "allreduce") == (
        "ring",
        "tree",
        "nvls",
        "sharp",
    )
    spectrum = load_preset("dgx-h100-spectrum-x")
    assert facade.default_algorithms(spectrum, "allreduce") == ("ring", "tree", "nvls")
    assert "InfiniBand" in facade.collective_curves(spectrum, "allreduce", ()).unavailable["sharp"]


def test_all_to_all_refusal_is_explained_not_raised() -> None:
    # the model refuses all-to-all patterns too large to solve (connections or flow
    # classes); the facade keeps the model's message instead of raising. A uniform
    # all-to-all at 98,304 GPUs is solved by symmetry; a degraded NIC breaks the symmetry,
    # and the 2.4 M flow classes left are over the model's limit
    scenario = apply_overrides(
        load_preset("colossus-100k-spectrum-x"), {"what_if.degraded_link_factor": 0.5}
    )
    got = facade.collective_curves(scenario, "alltoall", ("direct", "hierarchical"))
    assert set(got.unavailable) == {"direct"} and set(got.curves) == {"hierarchical"}
    with pytest.raises(AlgorithmUnavailableError) as refused:
        collective(scenario, "alltoall", "direct", SIZES)
    assert got.unavailable["direct"] == str(refused.value)
    assert "a limit of the model" in got.unavailable["direct"], got.unavailable
    assert got.curves["hierarchical"] == tuple(
        collective(scenario, "alltoall", "hierarchical", SIZES)
    )


def test_fabric_effects_facade() -> None:
    scenario = load_preset(DEFAULT_PRESET)
    effects = facade.fabric_effects(scenario)
    assert list(effects["vendor"].unique()) == ["infiniband", "spectrum-x", "roce"]
    assert effects.groupby("vendor", sort=False)["routing"].first().tolist() == [
        "adaptive",
        "adaptive",
        "ecmp",
    ]
    assert (effects["reason"] == "").all()
    ib_ring = effects[(effects["vendor"] == "infiniband") & (effects["algo"] == "ring")].iloc[0]
    assert ib_ring["busbw_GBps"] == pytest.approx(
        collective(scenario, "allreduce", "ring", [facade.EFFECT_SIZE_BYTES])[0].busbw_GBps
    )

    # scattered: static hashing collides across the spines, adaptive routing does not
    scattered = facade.fabric_effects(apply_overrides(scenario, {"what_if.placement": "scattered"}))
    ring = scattered[scattered["algo"] == "ring"].set_index("vendor")["busbw_GBps"]
    assert ring["roce"] < 0.5 * ring["infiniband"]
    assert ring["spectrum-x"] == pytest.approx(ring["infiniband"], rel=0.02)

    # a design one vendor cannot build (radix-64 InfiniBand at 98,304 GPUs): reasons
    big = facade.fabric_effects(load_preset("colossus-100k-spectrum-x"))
    reasons = big.set_index(["vendor", "op"])["reason"]
    assert "cannot be built on infiniband" in reasons[("infiniband", "allreduce")]
    assert "fabric.tiers" in reasons[("infiniband", "alltoall")]
    assert reasons[("spectrum-x", "allreduce")] == ""
    assert big.loc[big["reason"] != "", "busbw_GBps"].isna().all()


# --------------------------------------------------------------------------------------
# AppTest: the page
# --------------------------------------------------------------------------------------

pytest_app = pytest.mark.app


@pytest_app
@pytest.mark.parametrize("preset", PRESETS)
def test_page_runs_on_every_preset(preset: str) -> None:
    at = open_page(effects=True, preset=preset)
    assert url(at) == {"preset": preset}
    scenario = load_preset(preset)
    # every preset builds and runs auto (a preset that does not is a bug, not a branch)
    auto = collective(scenario, "allreduce", "auto", SIZES)
    assert not at.warning, messages(at.warning)
    fig = figure_titled(at, CURVE_TITLE)
    assert f"{scenario.cluster.n_gpus:,} GPUs" in fig["layout"]["title"]["text"]
    assert fig["layout"]["xaxis"]["type"] == "log" and fig["layout"]["yaxis"]["type"] == "log"
    assert auto_markers(fig)["y"] == pytest.approx([r.busbw_GBps for r in auto])
    assert [d.label for d in at.main.get("download_button") if d.label.startswith("Download")] == [
        "Download breakdown (CSV)",
        "Download curves (CSV)",
    ]
    figure_titled(at, "Fabric effects")
    figure_titled(at, "Time of one call")


@pytest_app
def test_operation_widget_changes_the_chart() -> None:
    at = open_page()
    scenario = load_preset(DEFAULT_PRESET)
    before = figure_titled(at, CURVE_TITLE)
    assert before["layout"]["title"]["text"].startswith("all-reduce")
    assert at.multiselect(key="coll_algos:allreduce").value == ["ring", "tree", "nvls", "sharp"]

    at.radio(key="coll_op").set_value("allgather").run()
    assert_no_exception(at)
    after = figure_titled(at, CURVE_TITLE)
    assert after["layout"]["title"]["text"].startswith("all-gather")
    assert after["data"] != before["data"]
    expected = collective(scenario, "allgather", "auto", SIZES)
    assert auto_markers(after)["y"] == pytest.approx([r.busbw_GBps for r in expected])
    # PAT (NCCL 2.23+, with NVLS inside from 2.31) and the ring
    assert at.multiselect(key="coll_algos:allgather").value == ["pat", "ring"]

    # the breakdown follows the size slider
    at.select_slider(key="coll_size").set_value(2**20).run()
    assert_no_exception(at)
    assert "1 MiB" in figure_titled(at, "Time of one call")["layout"]["title"]["text"]

    # an algorithm removed from the plot leaves the chart; auto stays
    at.radio(key="coll_op").set_value("allreduce").run()
    at.multiselect(key="coll_algos:allreduce").unselect("ring").run()
    assert_no_exception(at)
    names = [t.get("name") for t in figure_titled(at, CURVE_TITLE)["data"]]
    assert "ring" not in names and "NVLS" in names
    assert at.multiselect(key="coll_algos:allreduce").value == ["tree", "nvls", "sharp"]


@pytest_app
def test_unavailable_algorithm_is_an_info_not_a_crash() -> None:
    at = open_page(preset="dgx-h100-spectrum-x")
    algos = at.multiselect(key="coll_algos:allreduce")
    assert algos.value == ["ring", "tree", "nvls"]  # sharp dropped from the default
    infos = messages(at.info)
    assert len(infos) == 1 and "sharp" in infos[0] and "InfiniBand" in infos[0], infos

    algos.select("sharp").run()
    assert_no_exception(at)
    infos = messages(at.info)
    assert len(infos) == 1 and "sharp" in infos[0], infos
    names = [t.get("name") for t in figure_titled(at, CURVE_TITLE)["data"]]
    assert "SHARP" not in names and "ring" in names


@pytest_app
def test_refused_all_to_all_is_explained() -> None:
    at = open_page(effects=True, preset="colossus-100k-spectrum-x")
    at.radio(key="coll_op").set_value("alltoall").run()
    assert_no_exception(at)
    scenario = load_preset("colossus-100k-spectrum-x")
    infos = messages(at.info)
    for algo in facade.OP_ALGORITHMS["alltoall"]:
        try:
            collective(scenario, "alltoall", algo, SIZES)
        except AlgorithmUnavailableError as exc:
            assert any(str(exc) in i for i in infos), infos
    figure_titled(at, "Fabric effects")  # the rest of the page still draws
    assert "cannot be built on infiniband" in " ".join(infos)


@pytest_app
def test_placement_toggle_changes_the_comparison_and_the_url() -> None:
    at = open_page(effects=True, preset="dgx-h100-roce-ecmp")
    contiguous = figure_titled(at, "Fabric effects")
    assert "contiguous" in contiguous["layout"]["title"]["text"]
    at.toggle(key="coll:what_if.placement").set_value(True).run()
    assert_no_exception(at)
    assert url(at) == {"preset": "dgx-h100-roce-ecmp", "what_if.placement": "scattered"}
    scattered = figure_titled(at, "Fabric effects")
    assert "scattered" in scattered["layout"]["title"]["text"]
    roce = trace(scattered, "RoCE")
    ib = trace(scattered, "InfiniBand")
    assert roce["y"][0] < 0.5 * ib["y"][0]  # ring: hashing collides on the spines
    # ECMP: the main chart shows the band
    assert [t for t in figure_titled(at, CURVE_TITLE)["data"] if t.get("fill") == "tonexty"]

    at.toggle(key="coll:what_if.placement").set_value(False).run()
    assert url(at) == {"preset": "dgx-h100-roce-ecmp"}


@pytest_app
def test_fabric_effects_are_solved_only_when_opened() -> None:
    at = open_page()
    (section,) = [e for e in at.expander if e.label.startswith("The same design on")]
    assert "4 GiB" in section.label
    assert not [f for f in figures(at) if "Fabric effects" in f["layout"]["title"]["text"]]
    assert at.toggle(key="coll:what_if.placement").value is False  # the toggle stays outside
    at.session_state[EFFECTS_OPEN] = True
    at.run()
    assert_no_exception(at)
    assert "contiguous" in figure_titled(at, "Fabric effects")["layout"]["title"]["text"]
    figure_titled(at, CURVE_TITLE)  # the curves are still drawn


@pytest_app
def test_placement_from_the_url_seeds_the_toggle() -> None:
    at = open_page(**{"what_if.placement": "scattered"})
    assert at.toggle(key="coll:what_if.placement").value is True
    assert not at.error, messages(at.error)


@pytest_app
def test_a_131072_gpu_curve_renders() -> None:
    at = open_page(preset="colossus-100k-spectrum-x", **{"cluster.n_gpus": "131072"})
    assert not at.warning, messages(at.warning)
    fig = figure_titled(at, CURVE_TITLE)
    assert "131,072 GPUs" in fig["layout"]["title"]["text"]
    assert len(auto_markers(fig)["y"]) == len(SIZES)


@pytest_app
def test_infeasible_design_is_a_warning() -> None:
    at = open_page(**{"cluster.n_gpus": "131072", "fabric.tiers": "3"})
    warnings = messages(at.warning)
    assert len(warnings) == 1 and "fabric.tiers" in warnings[0], warnings
    assert not at.get("plotly_chart")


@pytest_app
def test_download_button() -> None:
    at = open_page()
    assert [d.label for d in at.main.get("download_button") if d.label.startswith("Download")] == [
        "Download breakdown (CSV)",
        "Download curves (CSV)",
    ]
