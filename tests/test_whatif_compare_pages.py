"""AppTest tests of the What-if and Compare pages: controls drive the figures and the URL,
bad URL entries are reported and ignored, pins survive in a fresh session from the URL.

Expected numbers come from the model (``fabric_model``), never from the page.
"""

from __future__ import annotations

from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from fabric_model.collectives import collective
from fabric_model.presets import DEFAULT_PRESET, load_preset
from fabric_model.scenario import apply_overrides, scenario_from_text
from fabric_model.training import training_step
from fabric_model.units import GIB
from tests.apptest_helpers import assert_no_exception, figure, find_metric, open_page, url
from ui.compare import Pin, comparison_yaml, decode_pin, default_label, encode_pin, parse_params
from ui.compare_figures import ScenarioMetrics, compare_frame, unique_labels
from ui.whatif import PARAMS, url_params
from ui.whatif import parse_params as parse_whatif

pytestmark = pytest.mark.app

WHATIF = "pages/whatif.py"
COMPARE = "pages/compare.py"
BASE = load_preset(DEFAULT_PRESET)


def _fig(at: AppTest, key: str) -> dict[str, Any]:
    charts = [i for i, c in enumerate(at.get("plotly_chart")) if key in c.proto.id]
    assert len(charts) == 1, [c.proto.id for c in at.get("plotly_chart")]
    return figure(at, charts[0])


def _traces(at: AppTest, key: str) -> dict[str, list[Any]]:
    return {t["name"]: t["y"] for t in _fig(at, key)["data"]}


def _table(at: AppTest) -> Any:
    return at.dataframe[0].value


# --------------------------------------------------------------------------- What-if


def test_whatif_page_runs_and_a_degraded_nic_slows_the_step() -> None:
    at = open_page(WHATIF)
    assert [t.value for t in at.title] == ["What-if"]
    assert not at.error and not at.warning and not at.info
    assert any("No change yet" in c.value for c in at.caption)
    assert url(at) == {"preset": DEFAULT_PRESET}
    assert list(_traces(at, "whatif_step")) == ["before (sidebar)"]

    at.slider(key="wi:what_if.degraded_link_factor").set_value(0.5).run()
    assert_no_exception(at)
    assert url(at) == {"preset": DEFAULT_PRESET, "wi.degraded_link_factor": "0.5"}
    step = _traces(at, "whatif_step")
    assert set(step) == {"before (sidebar)", "after (all changes)"}
    before = training_step(BASE)
    after = training_step(apply_overrides(BASE, {"what_if.degraded_link_factor": 0.5}))
    assert after.step_time_s > before.step_time_s  # the model's verdict, shown by the page
    assert find_metric(at, "Step time").value == f"{after.step_time_s:,.2f} s"
    assert find_metric(at, "Step time").delta.startswith("+")
    assert sum(step["after (all changes)"]) == pytest.approx(after.step_time_s, rel=1e-9)
    rows = _table(at).set_index("what_if")
    # the baseline's deltas say so (never "None"); the column is text, printed as formatted
    assert rows.loc["baseline (sidebar)", "step_delta_s"] == "baseline"
    assert rows.loc["degraded link", "step_delta_s"] == (
        f"{after.step_time_s - before.step_time_s:+.3f}"
    )
    assert "NIC link at 50%" in rows.loc["degraded link", "setting"]


def test_whatif_control_changes_after_figure_and_url() -> None:
    at = open_page(WHATIF)
    first = _traces(at, "whatif_busbw")
    # an H100's PCIe Gen5 host link feeds at most 400G per NIC: the lever goes down to 200G
    at.select_slider(key="wi:fabric.link_gbps").set_value(200).run()
    assert_no_exception(at)
    assert url(at)["wi.link_gbps"] == "200"
    busbw = _traces(at, "whatif_busbw")
    assert busbw["before (sidebar)"] == first["before (sidebar)"]
    slower = apply_overrides(BASE, {"fabric.link_gbps": 200})
    expected = [
        collective(slower, op, "auto", [GIB])[0].busbw_GBps for op in ("allreduce", "alltoall")
    ]
    assert busbw["after (all changes)"] == pytest.approx(expected)
    assert busbw["after (all changes)"][1] < busbw["before (sidebar)"][1]

    # a second change: each alone plus the combination
    at.radio(key="wi:what_if.placement").set_value("scattered").run()
    assert_no_exception(at)
    assert list(_table(at)["what_if"]) == [
        "baseline (sidebar)",
        "placement",
        "link speed",
        "all changes combined",
    ]
    assert url(at)["wi.placement"] == "scattered"
    # back to the sidebar's value: the change and its URL parameter go
    at.select_slider(key="wi:fabric.link_gbps").set_value(400).run()
    at.radio(key="wi:what_if.placement").set_value("contiguous").run()
    assert_no_exception(at)
    assert url(at) == {"preset": DEFAULT_PRESET}
    assert list(_table(at)["what_if"]) == ["baseline (sidebar)"]


def test_whatif_bad_url_values_are_reported_and_ignored() -> None:
    at = open_page(
        WHATIF, **{"wi.degraded_link_factor": "2", "wi.colour": "red", "wi.oversubscription": "4"}
    )
    errors = [e.value for e in at.error]
    assert len(errors) == 2, errors
    factor = next(e for e in errors if "wi.degraded_link_factor" in e)
    assert "'2'" in factor and "at most 1" in factor and "ignored" in factor
    assert any("wi.colour" in e and "not a what-if setting" in e for e in errors)
    # the good parameter stands, the bad ones are gone from the URL and the controls
    assert url(at) == {"preset": DEFAULT_PRESET, "wi.oversubscription": "4"}
    assert at.slider(key="wi:what_if.degraded_link_factor").value == 1.0
    assert at.slider(key="wi:fabric.oversubscription").value == 4.0
    assert list(_table(at)["what_if"]) == ["baseline (sidebar)", "leaf oversubscription"]
    at.run()  # the URL is read once per session: no repeated messages
    assert not at.error


def test_whatif_plane_levers_need_planes_and_a_failed_plane_costs_an_eighth() -> None:
    at = open_page(WHATIF)
    assert any("fabric.planes" in c.value for c in at.caption)  # one plane: no plane levers
    assert not at.get("select_slider") or all(
        s.key != "wi:what_if.failed_planes" for s in at.get("select_slider")
    )
    planes = {
        "cluster.gpu": "b300",
        "fabric.vendor": "lossy-ethernet",
        "fabric.link_gbps": "800",
        "fabric.planes": "8",
    }
    at = open_page(WHATIF, **planes)
    at.select_slider(key="wi:what_if.failed_planes").set_value(1).run()
    assert_no_exception(at)
    assert url(at)["wi.failed_planes"] == "1"
    base = apply_overrides(BASE, {k: v for k, v in planes.items()})
    down = apply_overrides(base, {"what_if.failed_planes": 1})
    busbw = _traces(at, "whatif_busbw")
    expected = [
        collective(down, op, "auto", [GIB])[0].busbw_GBps for op in ("allreduce", "alltoall")
    ]
    assert busbw["after (all changes)"] == pytest.approx(expected)
    # traffic sprays over the 7 planes left: the network-bound all-to-all keeps ~7/8
    assert busbw["after (all changes)"][1] == pytest.approx(
        busbw["before (sidebar)"][1] * 7 / 8, rel=0.05
    )
    assert "1 plane down" in _table(at).set_index("what_if").loc["failed planes", "setting"]


def test_whatif_impossible_change_is_a_warning_row() -> None:
    at = open_page(WHATIF, **{"wi.link_gbps": "1600", "wi.nics_per_gpu": "2"})
    warnings = [w.value for w in at.warning]
    assert any(
        w.startswith("link speed") and "cannot be built" in w and "fabric.link_gbps" in w
        for w in warnings
    ), warnings
    table = _table(at).set_index("what_if")
    assert table.loc["link speed", "note"]
    assert table.loc["link speed", "step_time_s"] == "\u2014"  # no number: a dash, not None
    assert float(table.loc["NICs per GPU", "step_time_s"]) > 0  # the other change still works
    assert len([c for c in at.get("plotly_chart") if "whatif" in c.proto.id]) == 2
    assert find_metric(at, "Step time").value == "n/a"  # after = both changes: not buildable


def test_whatif_url_helpers_round_trip() -> None:
    overrides, errors = parse_whatif(
        {
            name: "0.25"
            if "factor" in name
            else {
                "wi.degraded_link": "leaf-spine",
                "wi.placement": "scattered",
                "wi.oversubscription": "2.5",
                "wi.link_gbps": "800",
                "wi.nics_per_gpu": "2",
                "wi.failed_planes": "1",
                "wi.failed_switch": "spine",
                "wi.gdr": "off",
                "wi.pfc": "off",
                "wi.mtu": "1024",
                "wi.nic_affinity": "cross-socket",
                "wi.acs": "on",
                "wi.flapping_link": "600",
                "wi.max_channels": "4",
                "wi.qps_per_connection": "4",
            }[name]
            for name in PARAMS
        }
    )
    assert not errors
    assert parse_whatif(url_params(overrides)) == (overrides, [])


# --------------------------------------------------------------------------- Compare


def _pin(at: AppTest) -> AppTest:
    at.button(key="cmp_pin").click().run()
    assert_no_exception(at)
    return at


def test_compare_pins_two_scenarios_with_deltas_and_removes_one() -> None:
    at = open_page(COMPARE)
    assert [t.value for t in at.title] == ["Compare"]
    assert any("Nothing pinned" in c.value for c in at.caption)
    assert list(_table(at).columns) == ["metric", "unit", "current"]

    _pin(at)
    at.select_slider(key="w:cluster.n_gpus").set_value(2048).run()
    _pin(at)
    small, big = "1024 H100 IB fat-tree", "2048 H100 IB fat-tree"
    assert url(at) == {
        "preset": DEFAULT_PRESET,
        "cluster.n_gpus": "2048",
        "cmp.1": DEFAULT_PRESET,
        "cmp.2": f"{DEFAULT_PRESET}~cluster.n_gpus=2048",
    }
    table = _table(at).set_index("metric")
    assert list(table.columns) == [
        "unit",
        small,
        big,
        f"{big} Δ",
        f"{big} Δ%",
        "current",
        "current Δ",
        "current Δ%",
    ]
    assert table.loc["GPUs", small] == "1,024" and table.loc["GPUs", big] == "2,048"
    assert table.loc["GPUs", f"{big} Δ"] == "+1,024"
    assert table.loc["GPUs", f"{big} Δ%"] == "+100.0%"
    step = training_step(apply_overrides(BASE, {"cluster.n_gpus": 2048})).step_time_s
    assert table.loc["Step time", big] == f"{step:,.2f}"
    curves = sorted(_fig(at, "compare_busbw")["data"], key=lambda t: t["legendrank"])
    assert [t["name"] for t in curves] == [small, big, "current"]
    assert curves[-1]["line"]["width"] > curves[0]["line"]["width"]  # current: thicker
    assert _fig(at, "compare_step")["data"][0]["x"] == [small, big, "current"]

    at.button(key="cmp_remove:1").click().run()
    assert_no_exception(at)
    assert list(_table(at).columns) == ["metric", "unit", big, "current", "current Δ", "current Δ%"]
    assert url(at)["cmp.1"] == f"{DEFAULT_PRESET}~cluster.n_gpus=2048"
    assert "cmp.2" not in url(at)


def test_compare_label_edit_goes_into_table_and_url() -> None:
    at = open_page(COMPARE)
    at.text_input(key="cmp_new_label").set_value("baseline").run()
    _pin(at)
    assert "baseline" in _table(at).columns
    at.text_input(key="cmp_label:1").set_value("the old design").run()
    assert_no_exception(at)
    assert "the old design" in _table(at).columns
    assert url(at)["cmp.1"] == f"{DEFAULT_PRESET}~label=the old design"


def test_compare_url_restores_pins_in_a_fresh_session() -> None:
    query = {
        "preset": "dgx-h100-spectrum-x",
        "cmp.1": f"{DEFAULT_PRESET}~cluster.n_gpus=4096~label=IB 4K",
        "cmp.2": "dgx-h100-roce-ecmp~fabric.oversubscription=2",
        "cmp.3": "no-such-preset~cluster.n_gpus=8",
    }
    at = open_page(COMPARE, **query)
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "cmp.3" in errors[0] and "not a preset" in errors[0], errors
    roce = default_label(
        apply_overrides(load_preset("dgx-h100-roce-ecmp"), {"fabric.oversubscription": 2})
    )
    assert roce == "1024 H100 RoCE fat-tree, 2:1"
    assert list(_table(at).columns)[2:] == [
        "IB 4K",
        roce,
        f"{roce} Δ",
        f"{roce} Δ%",
        "current",
        "current Δ",
        "current Δ%",
    ]
    assert [t.value for t in at.text_input][1:] == ["IB 4K", roce]
    # the malformed entry is dropped from the URL, the good ones stay
    assert url(at) == {
        "preset": "dgx-h100-spectrum-x",
        "cmp.1": query["cmp.1"],
        "cmp.2": query["cmp.2"],
    }


def test_compare_url_helpers() -> None:
    scenario = apply_overrides(BASE, {"cluster.n_gpus": 2048, "fabric.vendor": "roce"})
    pin = Pin(1, "my~label", DEFAULT_PRESET, scenario)
    raw = encode_pin(pin)
    assert raw == (f"{DEFAULT_PRESET}~cluster.n_gpus=2048~fabric.vendor=roce~label=my-label")
    label, preset, back = decode_pin(raw)
    assert (label, preset, back) == ("my-label", DEFAULT_PRESET, scenario)
    pins, errors = parse_params(
        {
            "cmp.2": raw,
            "cmp.1": DEFAULT_PRESET,
            "cmp.x": "a",
            "cmp.3": f"{DEFAULT_PRESET}~cluster.n_gpus",
        }
    )
    assert [p[2] for p in pins] == [BASE, scenario]
    assert (
        len(errors) == 2
        and any("cmp.x" in e for e in errors)
        and any("not KEY=VALUE" in e for e in errors)
    )


def test_compare_frame_deltas_against_the_first_column() -> None:
    a = ScenarioMetrics(BASE, capex_usd=2e6, n_switches=10.0)
    b = ScenarioMetrics(BASE, capex_usd=3e6, n_switches=float("nan"))
    frame = compare_frame([("a", a), ("b", b)]).set_index("metric")
    assert frame.loc["Network capex", "b Δ"] == pytest.approx(1.0)  # M USD
    assert frame.loc["Network capex", "b Δ%"] == pytest.approx(50.0)
    assert frame.loc["Switches", "b Δ"] != frame.loc["Switches", "b Δ"]  # NaN: not built
    assert unique_labels(["x", "x", " ", "y"]) == ["x", "x #2", "scenario", "y"]


def test_comparison_yaml_is_one_scenario_file_per_column() -> None:
    other = apply_overrides(BASE, {"fabric.vendor": "spectrum-x", "cluster.n_gpus": 4096})
    docs = comparison_yaml([("old", BASE), ("new", other)]).split("---\n")
    back = [scenario_from_text(d) for d in docs]
    assert [s.name for s in back] == ["old", "new"]
    assert back[1].diff(other) == {} and back[0].diff(BASE) == {}
