"""AppTest tests of the dashboard pages: every page runs on every preset, widgets drive figures
and the URL, bad URL input and infeasible designs are explained, not crashes.

Every page draws the shared sidebar itself (``ui.page_common.current_scenario``), so the
sidebar widgets exist on every page. ``open_app`` switches to the page *before* the first run,
which lands on it the way a browser opening ``/topology?...`` does (this works because each
page's ``url_path`` is its file name). Expected numbers come from the model, never from the
page, so a page that shows the wrong scenario fails.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import app_pages
from streamlit.testing.v1 import AppTest

from fabric_model.plant.cost import bill_of_materials
from fabric_model.plant.design import build_topology
from fabric_model.presets import DEFAULT_PRESET, list_presets, load_preset
from fabric_model.scenario import apply_overrides
from tests.apptest_helpers import (
    assert_no_exception,
    figure,
    messages,
    metric_value,
    open_page,
    url,
)

pytestmark = pytest.mark.app

PAGES = {p.script: p for p in app_pages()}
TOPOLOGY = "pages/topology.py"
COST = "pages/cost.py"
VALIDATE = "pages/validate.py"
#: Pages that model nothing until a section is opened: (its expander key, its label start)
ON_DEMAND = {
    VALIDATE: ("validate_acceptance_open", "Expected nccl-tests results"),
    "pages/cluster.py": ("cluster_run_open", "Simulate every policy"),
}
PRESETS = [p.name for p in list_presets()]
#: plotly charts each page draws for a buildable design
N_CHARTS = {TOPOLOGY: 2, COST: 3}
DOWNLOADS = {
    TOPOLOGY: ["Download counts (CSV)"],
    COST: ["Download BOM (CSV)", "Download comparison (CSV)"],
}


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def open_app(page: str = TOPOLOGY, **query: str) -> AppTest:
    """Open ``page`` with URL query parameters in a new session (one script run)."""
    return open_page(page, query, title=PAGES[page].title)


def title(at: AppTest, index: int = 0) -> str:
    return figure(at, index)["layout"]["title"]["text"]


def y_values(at: AppTest, index: int = 0) -> list[Any]:
    return [trace.get("y") for trace in figure(at, index)["data"]]


def metric(at: AppTest, label_start: str) -> str:
    return metric_value(at, label_start, prefix=True)


def headline_vendor(at: AppTest) -> str:
    """The Cost page's caption naming whose bill the metrics show."""
    captions = [c.value for c in at.caption if c.value.startswith("Headline figures for")]
    assert len(captions) == 1, [c.value for c in at.caption]
    return captions[0]


def set_gpus(at: AppTest, n: int) -> AppTest:
    return at.select_slider(key="w:cluster.n_gpus").set_value(n).run()


def capex_label(overrides: dict[str, Any], preset: str = DEFAULT_PRESET) -> str:
    """The capex metric the Cost page should show, computed by the model."""
    bom = bill_of_materials(apply_overrides(load_preset(preset), overrides))
    return f"${bom.capex_usd / 1e6:,.2f} M"


# --------------------------------------------------------------------------------------
# (a) every page runs on every preset
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("page", list(PAGES))
@pytest.mark.parametrize("preset", PRESETS)
def test_page_runs_on_every_preset(page: str, preset: str) -> None:
    at = open_app(page)
    at.selectbox(key="w:preset").set_value(preset).run()
    assert_no_exception(at)
    scenario = load_preset(preset)
    # the sidebar shows the preset, and the URL is the preset alone (nothing differs from it)
    assert at.select_slider(key="w:cluster.n_gpus").value == scenario.cluster.n_gpus
    assert at.radio(key="w:fabric.vendor").value == scenario.fabric.vendor
    assert at.selectbox(key="w:fabric.topology").value == scenario.fabric.topology
    assert url(at) == {"preset": preset}
    assert not at.error, messages(at.error)
    topo = build_topology(scenario)  # every preset builds (a preset that does not is a bug)
    if page in ON_DEMAND:  # its first view is instructions; a closed section holds the rest
        assert [e for e in at.expander if e.label.startswith(ON_DEMAND[page][1])]
        assert not at.warning, messages(at.warning)
        return
    assert at.get("plotly_chart") or at.metric, "the page drew neither charts nor metrics"
    if page == TOPOLOGY:
        assert not at.warning, messages(at.warning)
        assert len(at.get("plotly_chart")) == N_CHARTS[TOPOLOGY] - (not topo.hop_histogram)
        assert f"{scenario.cluster.n_gpus:,} GPUs" in title(at)
        assert f"{topo.n_switches:,} switches" in title(at)
        assert metric(at, "Switches") == f"{topo.n_switches:,}"
    elif page == COST:
        assert not at.warning, messages(at.warning)
        assert len(at.get("plotly_chart")) == N_CHARTS[COST]
        assert metric(at, "Network capex") == capex_label({}, preset)


# --------------------------------------------------------------------------------------
# (b) a key widget changes the figure
# --------------------------------------------------------------------------------------


def test_topology_widgets_change_the_diagram() -> None:
    at = open_app(TOPOLOGY)
    before = figure(at)
    assert "1,024 GPUs" in title(at)

    set_gpus(at, 4096)
    assert_no_exception(at)
    assert "4,096 GPUs" in title(at)
    assert figure(at)["data"] != before["data"]
    topo = build_topology(apply_overrides(load_preset(DEFAULT_PRESET), {"cluster.n_gpus": 4096}))
    assert f"{topo.n_switches:,} switches" in title(at)
    assert metric(at, "GPUs") == "4,096"

    # 2,048 NIC ports fit 2 tiers of radix 64; forcing 3 adds a core row and switches
    set_gpus(at, 2048)
    assert metric(at, "Switch tiers") == "2"
    assert "core" not in figure(at)["layout"]["yaxis"]["ticktext"]
    two = build_topology(apply_overrides(load_preset(DEFAULT_PRESET), {"cluster.n_gpus": 2048}))
    at.segmented_control(key="w:fabric.tiers").set_value(3).run()
    assert_no_exception(at)
    assert metric(at, "Switch tiers") == "3"
    three = build_topology(
        apply_overrides(load_preset(DEFAULT_PRESET), {"cluster.n_gpus": 2048, "fabric.tiers": 3})
    )
    assert three.n_switches > two.n_switches
    assert f"{three.n_switches:,} switches" in title(at)
    assert "core" in figure(at)["layout"]["yaxis"]["ticktext"]


def test_cost_widgets_change_the_capex_chart() -> None:
    at = open_app(COST)
    base = y_values(at)
    assert all(v > 0 for v in base[-1])  # the totals above the three bars

    set_gpus(at, 2048)
    assert_no_exception(at)
    bigger = y_values(at)
    assert all(b > a for a, b in zip(base[-1], bigger[-1], strict=True))
    assert metric(at, "Network capex") == capex_label({"cluster.n_gpus": 2048})

    # the vendor picks whose bill the metrics show ...
    at.radio(key="w:fabric.vendor").set_value("spectrum-x").run()
    assert_no_exception(at)
    assert "Spectrum-X" in headline_vendor(at)
    spectrum = {"cluster.n_gpus": 2048, "fabric.vendor": "spectrum-x"}
    assert metric(at, "Network capex") == capex_label(spectrum)
    # ... and which bar a switch price override moves (it applies to the own vendor only)
    at.number_input(key="cost:costs.switch_usd").set_value(1000.0).run()
    on_spectrum = y_values(at)
    at.radio(key="w:fabric.vendor").set_value("roce").run()
    assert_no_exception(at)
    on_roce = y_values(at)
    switches = 0  # traces follow fabric_model.plant.cost.CATEGORIES; bars are IB, Spectrum-X, RoCE
    assert on_roce[switches][0] == on_spectrum[switches][0]
    assert on_roce[switches][1] > on_spectrum[switches][1]
    assert on_roce[switches][2] < on_spectrum[switches][2]

    at.toggle(key="cost_per_gpu").set_value(True).run()
    assert "per GPU" in title(at)


# --------------------------------------------------------------------------------------
# (c) the URL follows the widgets, and seeds them
# --------------------------------------------------------------------------------------


def test_url_follows_widgets_across_pages() -> None:
    at = open_app(TOPOLOGY)
    assert url(at) == {"preset": DEFAULT_PRESET}

    set_gpus(at, 4096)
    at.radio(key="w:fabric.vendor").set_value("spectrum-x").run()
    at.segmented_control(key="w:fabric.tiers").set_value(3).run()
    assert_no_exception(at)
    assert url(at) == {
        "preset": DEFAULT_PRESET,
        "cluster.n_gpus": "4096",
        "fabric.vendor": "spectrum-x",
        "fabric.tiers": "3",
    }

    # back to the preset's value: the key leaves the URL
    at.segmented_control(key="w:fabric.tiers").set_value("auto").run()
    assert url(at) == {
        "preset": DEFAULT_PRESET,
        "cluster.n_gpus": "4096",
        "fabric.vendor": "spectrum-x",
    }

    # the scenario and the URL survive page switches
    for page in PAGES:
        at.switch_page(page).run()
        assert_no_exception(at)
        assert at.select_slider(key="w:cluster.n_gpus").value == 4096, page
        assert url(at) == {
            "preset": DEFAULT_PRESET,
            "cluster.n_gpus": "4096",
            "fabric.vendor": "spectrum-x",
        }, page

    # another preset starts from scratch: only its name is in the URL
    at.selectbox(key="w:preset").set_value("meta-24k-roce").run()
    assert url(at) == {"preset": "meta-24k-roce"}
    set_gpus(at, 16384)
    assert url(at) == {"preset": "meta-24k-roce", "cluster.n_gpus": "16384"}


def test_url_seeds_widgets() -> None:
    query = {
        "preset": DEFAULT_PRESET,
        "cluster.n_gpus": "4096",
        "fabric.vendor": "spectrum-x",
        "fabric.link_gbps": "200",
        "fabric.tiers": "3",
        "costs.switch_usd": "20000",
    }
    at = open_app(COST, **query)
    assert not at.error, messages(at.error)
    assert at.select_slider(key="w:cluster.n_gpus").value == 4096
    assert at.radio(key="w:fabric.vendor").value == "spectrum-x"
    assert at.select_slider(key="w:fabric.link_gbps").value == 200
    assert at.segmented_control(key="w:fabric.tiers").value == 3
    assert at.number_input(key="cost:costs.switch_usd").value == 20000
    assert url(at) == query
    overrides = {k: v for k, v in query.items() if k != "preset"}
    assert metric(at, "Network capex") == capex_label(overrides)


def test_url_keys_without_a_widget_are_kept() -> None:
    at = open_app(TOPOLOGY, **{"fabric.routing": "ecmp"})
    assert not at.error, messages(at.error)
    assert url(at) == {"preset": DEFAULT_PRESET, "fabric.routing": "ecmp"}
    set_gpus(at, 2048)
    assert url(at) == {"preset": DEFAULT_PRESET, "fabric.routing": "ecmp", "cluster.n_gpus": "2048"}


# --------------------------------------------------------------------------------------
# (d) bad URL input: one error naming the key and what is allowed; the page still draws
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "named"),
    [
        ("cluster.n_gpus", "99999999", ["cluster.n_gpus", "2 to 1,048,576"]),
        ("cluster.n_gpus", "abc", ["cluster.n_gpus", "integer", "1,048,576"]),
        ("fabric.link_gbps", "300", ["fabric.link_gbps", "one of 100, 200, 400, 800, 1600"]),
        ("fabric.tiers", "7", ["fabric.tiers", "one of auto, 1, 2, 3"]),
        ("costs.switch_usd", "-5", ["costs.switch_usd", "0 to 10,000,000"]),
        ("bogus.key", "1", ["bogus.key", "unknown key", "cluster, fabric"]),
        ("preset", "nope", ["preset", "nope", ", ".join(PRESETS)]),
        ("preset", "gb200-nvl72-xdr", ["gb200-nvl72-ndr", "gb300-nvl72-xdr", "ConnectX-7"]),
    ],
)
def test_bad_url_parameter_is_reported_and_ignored(key: str, value: str, named: list[str]) -> None:
    at = open_app(TOPOLOGY, **{key: value})
    errors = messages(at.error)
    assert len(errors) == 1, errors
    for text in named:
        assert text in errors[0], (text, errors[0])
    # ignored: the default scenario is drawn, and the URL drops the bad parameter
    assert len(at.get("plotly_chart")) == N_CHARTS[TOPOLOGY]
    assert "1,024 GPUs" in title(at)
    assert url(at) == {"preset": DEFAULT_PRESET}
    # the error is about the URL as loaded; it does not stick to later reruns
    set_gpus(at, 2048)
    assert not at.error, messages(at.error)


def test_good_url_parameters_apply_next_to_bad_ones() -> None:
    at = open_app(
        COST, **{"cluster.n_gpus": "99999999", "fabric.link_gbps": "300", "fabric.vendor": "roce"}
    )
    errors = messages(at.error)
    assert len(errors) == 2, errors
    assert any("cluster.n_gpus" in e for e in errors)
    assert any("fabric.link_gbps" in e for e in errors)
    assert at.radio(key="w:fabric.vendor").value == "roce"
    assert url(at) == {"preset": DEFAULT_PRESET, "fabric.vendor": "roce"}
    assert len(at.get("plotly_chart")) == N_CHARTS[COST]
    assert "RoCE" in headline_vendor(at)


# --------------------------------------------------------------------------------------
# (e) an infeasible design is content, not a crash
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("page", list(PAGES))
def test_infeasible_design_shows_a_warning(page: str) -> None:
    # 131,072 NIC ports do not fit 3 tiers of radix-64 QM9700 (at most 64^3/4 = 65,536)
    at = open_app(page)
    if page in ON_DEMAND:  # the model runs (and explains) only in the opened section
        at.session_state[ON_DEMAND[page][0]] = True
    set_gpus(at, 131072)
    at.segmented_control(key="w:fabric.tiers").set_value(3).run()
    assert_no_exception(at)
    warnings = messages(at.warning)
    assert len(warnings) == 1, warnings
    assert "fabric.tiers" in warnings[0] or "cluster.n_gpus" in warnings[0]
    assert "65,536" in warnings[0]
    assert not at.get("plotly_chart")
    assert url(at) == {"preset": DEFAULT_PRESET, "cluster.n_gpus": "131072", "fabric.tiers": "3"}

    # the sidebar stays usable: a size that fits draws again
    set_gpus(at, 65536)
    assert_no_exception(at)
    assert not any("cannot be built" in w for w in messages(at.warning))
    if page in N_CHARTS:
        assert len(at.get("plotly_chart")) == N_CHARTS[page]


def test_infeasible_design_from_the_url() -> None:
    at = open_app(TOPOLOGY, **{"cluster.n_gpus": "131072", "fabric.tiers": "3"})
    assert not at.error, messages(at.error)  # valid values, just not buildable together
    warnings = messages(at.warning)
    assert len(warnings) == 1 and "fabric.tiers" in warnings[0], warnings


# --------------------------------------------------------------------------------------
# (f) price overrides
# --------------------------------------------------------------------------------------


def test_switch_price_override_changes_capex_and_url() -> None:
    at = open_app(COST)
    catalog_capex = metric(at, "Network capex")
    assert catalog_capex == capex_label({})
    price = at.number_input(key="cost:costs.switch_usd")
    assert price.value is None  # empty = catalog price
    base_chart = y_values(at)

    price.set_value(10000.0).run()
    assert_no_exception(at)
    assert metric(at, "Network capex") == capex_label({"costs.switch_usd": 10000})
    assert metric(at, "Network capex") != catalog_capex
    assert url(at) == {"preset": DEFAULT_PRESET, "costs.switch_usd": "10000"}
    assert y_values(at) != base_chart

    # the override survives a sidebar change and a page round trip
    set_gpus(at, 2048)
    at.switch_page(TOPOLOGY).run()
    at.switch_page(COST).run()
    assert at.number_input(key="cost:costs.switch_usd").value == 10000
    assert metric(at, "Network capex") == capex_label(
        {"costs.switch_usd": 10000, "cluster.n_gpus": 2048}
    )

    # emptying the field goes back to the catalog price and out of the URL
    at.number_input(key="cost:costs.switch_usd").set_value(None).run()
    assert url(at) == {"preset": DEFAULT_PRESET, "cluster.n_gpus": "2048"}
    assert metric(at, "Network capex") == capex_label({"cluster.n_gpus": 2048})


# --------------------------------------------------------------------------------------
# (g) downloads
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("page", [TOPOLOGY, COST])
def test_download_buttons(page: str) -> None:
    at = open_app(page)
    # the page's table downloads (chart exports are PNG/SVG/HTML, see test_exports.py;
    # the sidebar's scenario download, test_scenario_files_page.py)
    assert [
        d.label for d in at.main.get("download_button") if d.label.startswith("Download")
    ] == DOWNLOADS[page]
