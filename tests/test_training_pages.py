"""AppTest tests of the Scaling and MoE pages: they draw, controls change the figures."""

from __future__ import annotations

import pytest

from tests.apptest_helpers import chart_titles, figure, figure_titled, open_page

pytestmark = pytest.mark.app


def test_scaling_page_draws_lines_per_design_and_mode_changes_them() -> None:
    at = open_page("pages/scaling.py", **{"cluster.n_gpus": "1024"})
    eff = figure(at, 0)
    names = [t["name"] for t in eff["data"]]
    assert names[0].endswith("(this design)") and len(names) == 6  # 3 topologies x 2 vendors
    assert "strong" in eff["layout"]["title"]["text"]
    strong_y = eff["data"][0]["y"]
    feasible = [y for y in strong_y if y is not None]
    assert feasible[0] == pytest.approx(1.0) and feasible[-1] < 0.9  # the batch wall
    at.radio(key="scal_mode").set_value("weak").run()
    assert not at.exception
    weak = figure(at, 0)
    assert "weak" in weak["layout"]["title"]["text"]
    assert weak["data"][0]["y"] != strong_y
    # beside the mean curve, the step at its p50 (the slowest rank): never above, and the
    # gap grows with the cluster (order statistics of N ranks)
    mean, tail = (t["y"] for t in figure_titled(at, "Scaling efficiency with stragglers")["data"])
    gaps = [m - t for m, t in zip(mean, tail, strict=True) if m is not None and t is not None]
    assert all(g >= -1e-12 for g in gaps) and gaps[-1] > gaps[1]
    # the breakdown stacks to 100% at every size
    bars = figure_titled(at, "Where the step goes")["data"]
    totals = [sum(t["y"][i] for t in bars) for i in range(len(bars[0]["y"]))]
    assert totals == pytest.approx([1.0] * len(totals))


def test_scaling_page_explains_sizes_the_design_cannot_build() -> None:
    # 3 tiers forced: 131,072 NIC ports need the 4th tier of a radix-64 fat-tree
    at = open_page("pages/scaling.py", **{"fabric.tiers": "3"})
    texts = " ".join(m.value for m in at.markdown)
    assert "131,072 GPUs" in texts and "65,536 NIC ports" in texts


def test_moe_page_skew_raises_the_step() -> None:
    at = open_page(
        "pages/moe.py", **{"model.name": "mixtral-8x7b", "parallel.tp": "2", "parallel.pp": "1"}
    )
    assert [t.value for t in at.title] == ["MoE"]
    skew = figure(at, 1)
    totals = [sum(t["y"][i] for t in skew["data"]) for i in range(len(skew["data"][0]["y"]))]
    assert totals == sorted(totals) and totals[-1] > totals[0]
    # the sidebar's topology and one contrast until others are picked (each costs a step
    # per EP degree): rail-only, whose all-to-all goes through NVLink first
    assert [t["name"] for t in figure(at, 0)["data"]] == ["Fat-tree", "Rail-only"]
    at.multiselect(key="moe_topos").select("dragonfly-plus").run()
    assert not at.exception
    assert {t["name"] for t in figure(at, 0)["data"]} == {"Fat-tree", "Rail-only", "Dragonfly+"}
    at.multiselect(key="moe_skews").set_value([1.0, 8.0]).run()
    assert not at.exception
    assert len(figure(at, 1)["data"][0]["x"]) == 2


def test_moe_page_sweeps_dense_vs_moe_only_when_opened() -> None:
    at = open_page("pages/moe.py")
    assert not any("Dense vs MoE" in t for t in chart_titles(at))
    assert [e for e in at.expander if e.label.startswith("Sweep both models")]
    at.session_state["moe_dense_open"] = True
    at.run()
    assert not at.exception
    titles = chart_titles(at)
    assert sum("Dense vs MoE" in t for t in titles) == 1
    sweep = figure(at, titles.index(next(t for t in titles if "Dense vs MoE" in t)))
    names = [t["name"] for t in sweep["data"]]
    assert names[0] == "dense: llama3-70b" and names[1].startswith("MoE: deepseek-v3 (EP")
    assert any(y is not None for y in sweep["data"][1]["y"])  # the MoE line has points


def test_sidebar_model_and_plan_drive_the_overview_and_the_url() -> None:
    at = open_page("pages/overview.py")
    step_70b = next(m.value for m in at.metric if m.label == "Step time")
    at.selectbox(key="w:model.name").set_value("llama3-8b").run()
    assert not at.exception
    step_8b = next(m.value for m in at.metric if m.label == "Step time")
    assert step_8b != step_70b
    assert at.query_params["model.name"] == "llama3-8b"
    assert "model.layers" not in at.query_params  # the name implies the shape
    at.select_slider(key="w:parallel.pp").set_value(1).run()
    assert at.query_params["parallel.pp"] == "1"
    # a plan that cannot run is explained, the page keeps working
    at.select_slider(key="w:parallel.tp").set_value(256).run()
    assert not at.exception
    assert any("parallel.tp" in w.value for w in at.warning)


def test_overview_warns_when_memory_is_tight_and_shows_it_by_pipeline_rank() -> None:
    """Llama 3 405B on PP16 (the issue's plan): it runs, with the memory warning."""
    at = open_page(
        "pages/overview.py",
        **{"model.name": "llama3-405b", "cluster.n_gpus": "8192", "parallel.pp": "16"},
    )
    assert not at.exception
    assert any(w.value.startswith("Memory is tight") and "GiB" in w.value for w in at.warning)
    caption = next(c.value for c in at.caption if "by pipeline rank" in c.value)
    assert "rank 0" in caption and "rank 15" in caption and "(tight)" in caption


def test_moe_page_runs_a_swapped_in_moe_model_with_its_published_plan() -> None:
    """A dense sidebar (TP8 PP4): DeepSeek-V3 on the MoE page gets its own PP16, no TP."""
    from fabric_model.scenario import Scenario, apply_overrides
    from ui import moe as moe_page

    moe = moe_page.setup(Scenario(), "deepseek-v3")
    par = moe.moe.parallel
    assert (par.tp, par.pp, par.zero_stage) == (1, 16, 1) and "DeepSeek-V3" in moe.plan_source
    assert moe.dp == 64 and 64 in moe.eps
    own = apply_overrides(Scenario(), {"model.name": "mixtral-8x7b", "parallel.tp": 2})
    kept = moe_page.setup(own, "mixtral-8x7b")  # the sidebar's own MoE model keeps its plan
    assert kept.moe.parallel.tp == 2 and kept.plan_source == "the sidebar's plan"
    # 200 GPUs (TP8 PP5 DP5): PP16 does not divide them, the sidebar's plan stays
    odd = moe_page.setup(
        apply_overrides(Scenario(), {"cluster.n_gpus": 200, "parallel.pp": 5}), "deepseek-v3"
    )
    assert odd.moe.parallel.pp == 5 and odd.plan_source == "the sidebar's plan"
