"""AppTest tests of the Cluster page: nothing runs until the section opens; then every policy's
numbers, the time series, the server timeline and a second fabric's are the model's
(``fabric_model.run.cluster_sim``), never the page's."""

from __future__ import annotations

import numpy as np
import pytest

from fabric_model.presets import DEFAULT_PRESET, load_preset
from fabric_model.run.cluster_sim import Cluster, generated_jobs, run_schedule, schedule
from fabric_model.run.placement import POLICIES, SLICE_POLICIES
from fabric_model.scenario import apply_overrides
from tests.apptest_helpers import array, figure_titled, open_page, url
from ui.cluster import PolicyRun, occupancy_grid, policy_label

pytestmark = pytest.mark.app

PAGE = "pages/cluster.py"
OPEN = {"cluster_run_open": True}
SMALL = {"schedule.jobs": "100", "schedule.days": "2"}


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
    cl = Cluster.build(base)
    jobs = generated_jobs(100, cl.layout.n_gpus, 0)
    runs = {p: run_schedule(cl, jobs, p, 2.0, 0) for p in POLICIES}
    for row, policy in zip(table.to_dict("records"), POLICIES, strict=True):
        model = runs[policy].summary
        assert row["utilization"] == pytest.approx(model["utilization"])
        assert row["$ per useful GPU-h"] == pytest.approx(model["cost_per_useful_gpu_hour_usd"])
    assert len(figure_titled(at, "Job slowdown")["data"]) == len(POLICIES)
    cost = figure_titled(at, "Cost per useful GPU-hour")
    assert cost["data"][0]["y"] == pytest.approx(
        [runs[p].summary["cost_per_useful_gpu_hour_usd"] for p in POLICIES]
    )
    # utilisation, queue and fragmentation over time: the model's timeline, per policy
    over = figure_titled(at, "fragmentation over time")["data"]
    assert len(over) == 3 * len(POLICIES)
    tl = runs["first-fit"].timeline
    assert array(over[0]["y"])[1:-1] == pytest.approx(tl[:, 1] / cl.layout.n_gpus)
    assert array(over[1]["y"])[1:-1] == pytest.approx(tl[:, 2])
    # the servers over time: who holds each server, from the run's allocations
    res = runs["tree"]
    run = PolicyRun({"jobs": res.jobs}, res.segments, res.timeline, 0, cl.layout.n_nodes,
                    cl.layout.block_of)  # fmt: skip
    (heat,) = figure_titled(at, "Which job holds each server")["data"]
    want = occupancy_grid(run, 2.0)
    np.testing.assert_array_equal(array(heat["z"]), want)
    assert res.segments and not np.isnan(want).all()


def test_the_controls_live_in_the_url() -> None:
    at = open_page(
        PAGE,
        {**SMALL, "schedule.seed": "3", "schedule.view": "block"},
        title="Cluster",
    )
    assert not at.exception and not at.error
    assert not at.dataframe  # a link shows the controls; the run waits for the section
    at.session_state["cluster_run_open"] = True
    at.run()
    assert at.slider(key="cluster_jobs").value == 100
    assert at.slider(key="cluster_days").value == 2
    assert at.selectbox(key="cluster_view").value == "block"
    assert (
        "Slurm block" in figure_titled(at, "Which job holds each server")["layout"]["title"]["text"]
    )
    assert len(at.dataframe[0].value) == len(POLICIES)
    assert {k: v for k, v in url(at).items() if k.startswith("schedule.")} == {
        **SMALL,
        "schedule.seed": "3",
        "schedule.view": "block",
    }


def test_a_pinned_fabric_runs_the_same_jobs() -> None:
    """The URL's second fabric (an OCS design: slices of blocks with their own circuits) runs
    the sidebar's generated trace under each of its slice policies; the comparison holds both
    fabrics' model numbers, fragmentation by shape beside the fat-tree's."""
    vs = f"{DEFAULT_PRESET}~fabric.topology=ocs"
    at = open_page(PAGE, {**SMALL, "schedule.vs": vs}, title="Cluster", session_state=OPEN)
    assert not at.exception and not at.error
    table = at.dataframe[1].value
    assert len(table) == len(POLICIES) + len(SLICE_POLICIES)
    pinned = apply_overrides(load_preset(DEFAULT_PRESET), {"fabric.topology": "ocs"})
    model = schedule(pinned, generate=100, days=2.0, seed=0)
    assert model["policy"] == "ocs-slice"
    row = table[
        (table["policy"] == policy_label("ocs-slice")) & table["fabric"].str.endswith("(pinned)")
    ]
    assert row["utilization"].iloc[0] == pytest.approx(model["utilization"])
    assert row["$ per useful GPU-h"].iloc[0] == pytest.approx(model["cost_per_useful_gpu_hour_usd"])
    assert row["fragmentation by shape"].iloc[0] == pytest.approx(model["shape_fragmentation"])
    here = table[~table["fabric"].str.endswith("(pinned)")]
    assert set(here["policy"]) == {policy_label(p) for p in POLICIES}
    assert url(at)["schedule.vs"] == vs
    at.button(key="cluster_unpin").click().run()
    assert len(at.dataframe) == 1 and "schedule.vs" not in url(at)


def test_a_bad_url_value_is_named_and_ignored() -> None:
    at = open_page(PAGE, {"schedule.jobs": "75", "schedule.vs": "nope~x=1"}, title="Cluster")
    assert not at.exception
    errors = [e.value for e in at.error]
    assert errors[0] == (
        "schedule.jobs = '75': must be an integer from 50 to 2,000 in steps of 50; ignored"
    )
    assert errors[1].startswith("schedule.vs = 'nope~x=1': starts with 'nope', which is not a")
    assert at.slider(key="cluster_jobs").value == 300
    assert not at.dataframe


def test_an_ocs_design_runs_its_slice_policies() -> None:
    """The sidebar's design on optical circuit switches: its three slice policies, the slices
    named above the table (fragmentation by shape among its columns) and the servers grouped
    by OCS block."""
    at = open_page(PAGE, {**SMALL, "fabric.topology": "ocs"}, title="Cluster", session_state=OPEN)
    assert not at.exception and not at.error
    table = at.dataframe[0].value
    assert list(table["policy"]) == [policy_label(p) for p in SLICE_POLICIES]
    assert "fragmentation by shape" in table.columns
    assert any("Slices of 128 nvlink blocks" in c.value for c in at.caption)
    assert at.selectbox(key="cluster_view").value == "ocs-slice"
    timeline = figure_titled(at, "Which job holds each server")["layout"]
    assert timeline["yaxis"]["title"]["text"] == "server, by OCS block"
    assert "schedule.view" not in url(at)
