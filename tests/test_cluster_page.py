"""AppTest tests of the Cluster page: nothing runs until the section opens; then every policy's
numbers are the model's (``fabric_model.run.cluster_sim.schedule``), never the page's."""

from __future__ import annotations

import pytest

from fabric_model.presets import DEFAULT_PRESET, load_preset
from fabric_model.run.cluster_sim import schedule
from fabric_model.run.placement import POLICIES
from tests.apptest_helpers import figures, open_page, url

pytestmark = pytest.mark.app

PAGE = "pages/cluster.py"


def test_nothing_runs_until_opened_then_every_policy_is_the_models() -> None:
    at = open_page(PAGE, title="Cluster")
    assert not at.get("plotly_chart") and not at.dataframe
    at.slider(key="cluster_jobs").set_value(100)
    at.slider(key="cluster_days").set_value(2)
    at.session_state["cluster_run_open"] = True
    at.run()
    assert not at.exception and not at.error
    table = at.dataframe[0].value
    assert len(table) == len(POLICIES)
    base = load_preset(DEFAULT_PRESET)
    for row, policy in zip(table.to_dict("records"), POLICIES, strict=True):
        model = schedule(base, generate=100, policy=policy, days=2.0, seed=0)
        assert row["utilization"] == pytest.approx(model["utilization"])
        assert row["$ per useful GPU-h"] == pytest.approx(model["cost_per_useful_gpu_hour_usd"])
    cdf, cost = figures(at)
    assert len(cdf["data"]) == len(POLICIES)
    assert cost["data"][0]["y"] == pytest.approx(
        [schedule(base, generate=100, policy=p, days=2.0, seed=0)["cost_per_useful_gpu_hour_usd"]
         for p in POLICIES]
    )  # fmt: skip


def test_the_controls_live_in_the_url() -> None:
    at = open_page(
        PAGE,
        {
            "schedule.jobs": "100",
            "schedule.days": "2",
            "schedule.seed": "3",
        },
        title="Cluster",
    )
    assert not at.exception and not at.error
    assert not at.dataframe  # a link shows the controls; the run waits for the section
    at.session_state["cluster_run_open"] = True
    at.run()
    assert at.slider(key="cluster_jobs").value == 100
    assert at.slider(key="cluster_days").value == 2
    assert len(at.dataframe[0].value) == len(POLICIES)
    assert {k: v for k, v in url(at).items() if k.startswith("schedule.")} == {
        "schedule.jobs": "100",
        "schedule.days": "2",
        "schedule.seed": "3",
    }


def test_a_bad_url_value_is_named_and_ignored() -> None:
    at = open_page(PAGE, {"schedule.jobs": "75"}, title="Cluster")
    assert not at.exception
    assert [e.value for e in at.error] == [
        "schedule.jobs = '75': must be an integer from 50 to 2,000 in steps of 50; ignored"
    ]
    assert at.slider(key="cluster_jobs").value == 300
    assert not at.dataframe
