"""AppTest tests of the Explore page: the current design's run, the design set, its URL, the
Pareto chart and table, loading a design into the sidebar.

Expected numbers come from the model (``fabric_model.run.explore``), never from the page.
"""

from __future__ import annotations

from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from fabric_model.presets import DEFAULT_PRESET, load_preset
from fabric_model.run.explore import DesignTask, evaluate_design, explore, parse_vary
from tests.apptest_helpers import figures, metric_value, open_page, url
from ui.explore import parse_params, url_params

pytestmark = pytest.mark.app

PAGE = "pages/explore.py"
BASE = load_preset(DEFAULT_PRESET)


def _open(**query: str) -> AppTest:
    return open_page(PAGE, query, title="Explore")


def _figure(at: AppTest) -> dict[str, Any]:
    charts = figures(at)
    assert len(charts) == 1
    return charts[0]


def test_page_shows_the_sidebars_run_and_nothing_varied() -> None:
    at = _open()
    run = evaluate_design(DesignTask(BASE, {}))
    assert metric_value(at, "Time to train") == f"{run['time_to_train_days']:,.1f} days"
    assert metric_value(at, "Cost per run") == f"${run['cost_per_run_usd'] / 1e6:,.2f} M"
    assert metric_value(at, "Goodput") == f"{run['goodput']:.1%}"
    assert not at.error and not at.warning
    assert not at.get("plotly_chart")
    assert url(at) == {"preset": DEFAULT_PRESET}


def test_picking_values_draws_the_front_and_writes_the_url() -> None:
    at = _open()
    at.multiselect(key="ex:fabric.vendor").set_value(["infiniband", "roce"]).run()
    at.multiselect(key="ex:fabric.link_gbps").set_value([200, 400]).run()
    assert not at.exception and not at.error
    assert url(at) == {
        "preset": DEFAULT_PRESET,
        "ex.fabric.vendor": "infiniband~roce",
        "ex.fabric.link_gbps": "200~400",
    }
    model = explore(
        BASE, [parse_vary("fabric.vendor=infiniband,roce"), parse_vary("fabric.link_gbps=200,400")]
    )
    table = at.dataframe[0].value
    assert len(table) == 4
    assert list(table["pareto"]) == [d["pareto"] for d in model.designs]
    assert list(table["cost_per_run_usd"]) == [d["cost_per_run_usd"] for d in model.designs]
    fig = _figure(at)
    assert fig["layout"]["title"]["text"].startswith("Time to train vs cost per run")
    names = {t["name"] for t in fig["data"]}
    assert {"Pareto front", "InfiniBand · Fat-tree", "RoCE (ECMP) · Fat-tree"} <= names
    n_front = sum(d["pareto"] for d in model.designs)
    front = next(t for t in fig["data"] if t["name"] == "Pareto front")
    assert len(front["x"]) == n_front
    assert [b.label for b in at.main.get("download_button") if "designs" in b.label] == [
        "Download designs (CSV)"
    ]


def test_the_url_restores_the_design_set_and_reports_bad_entries() -> None:
    at = _open(
        **{
            "ex.fabric.topology": "fat-tree~rail-only",
            "ex.fabric.link_gbps": "200~300",
            "ex.nope": "1",
        }
    )
    errors = [e.value for e in at.error]
    assert len(errors) == 2, errors
    assert any("ex.fabric.link_gbps" in e and "100, 200, 400, 800, 1600" in e for e in errors)
    assert any("ex.nope" in e for e in errors)
    assert at.multiselect(key="ex:fabric.topology").value == ["fat-tree", "rail-only"]
    assert len(at.dataframe[0].value) == 2
    # the bad entries are dropped from the URL, the good one stays
    assert url(at) == {"preset": DEFAULT_PRESET, "ex.fabric.topology": "fat-tree~rail-only"}


def test_a_load_button_puts_the_design_in_the_sidebar_and_the_url() -> None:
    at = _open(**{"ex.fabric.vendor": "infiniband~spectrum-x"})
    at.button(key="ex_load_1").click().run()
    assert not at.exception
    assert at.radio(key="w:fabric.vendor").value == "spectrum-x"
    assert url(at) == {
        "preset": DEFAULT_PRESET,
        "fabric.vendor": "spectrum-x",
        "ex.fabric.vendor": "infiniband~spectrum-x",
    }


def test_too_many_designs_is_a_warning() -> None:
    at = _open(
        **{
            "ex.cluster.gpu": "a100~h100~h200~b200~gb200~gb300~b300",
            "ex.fabric.switch": "auto~qm9700~q3400~sn5600~th5~th6~sn6810",
            "ex.fabric.topology": "fat-tree~rail-only~dragonfly-plus~torus-3d~hypercube",
        }
    )
    warnings = [w.value for w in at.warning]
    assert len(warnings) == 1 and "245 designs" in warnings[0], warnings
    assert not at.get("plotly_chart")


def test_url_params_round_trip() -> None:
    sel = {"fabric.oversubscription": [1.0, 2.0], "cluster.nics_per_gpu": [1, 2]}
    params = url_params(sel, True)
    assert params == {
        "ex.fabric.oversubscription": "1~2",
        "ex.cluster.nics_per_gpu": "1~2",
        "ex.plan_search": "true",
    }
    assert parse_params(params) == (sel, True, [])


def test_the_sensitivity_tornado_matches_the_model() -> None:
    from fabric_model.run.explore import sensitivity

    at = _open()
    at.toggle(key="ex_tornado_on").set_value(True).run()
    assert not at.exception and not at.error
    fig = _figure(at)
    rows = sensitivity(BASE)
    assert fig["layout"]["title"]["text"].startswith("What moves the cost per run")
    high = next(t for t in fig["data"] if t["name"] == "high end of the range")
    # widest swing on top (plotly's last category)
    assert high["y"][-1].startswith(rows[0].label)
    assert any("link speed" in c.value and "800" in c.value for c in at.caption)
