"""The "versus the best fabric" view: the pure comparison and sentence
(``fabric_model.report.summaries.versus_best`` / ``fabric_gap_sentence``) and the Scaling and MoE
pages that show them (AppTest: the view and the sentence follow the sidebar)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabric_model.report.summaries import (
    NEGLIGIBLE_GAP_PCT,
    VERSUS_BEST_METRICS,
    fabric_gap_sentence,
    versus_best,
)
from tests.apptest_helpers import assert_no_exception, figure_titled, open_page

NAN = math.nan
VS_TITLE = "Versus the best fabric"

# ------------------------------------------------------------------------------ pure


def test_versus_best_gaps_are_relative_to_the_best_design_at_each_size() -> None:
    values = {
        "A": {1024: 10.0, 16384: 1.0},
        "B": {1024: 10.1, 16384: 1.4},
        "C": {1024: NAN, 16384: 0.8},  # does not run at 1,024
    }
    rows = {(r.design, r.x): r for r in versus_best(values, "step_time_s")}
    assert rows["A", 1024].gap == 0.0 and rows["A", 1024].best_design == "A"
    assert rows["B", 1024].gap == pytest.approx(1.0)
    assert math.isnan(rows["C", 1024].gap)
    assert rows["C", 16384].best_design == "C" and rows["C", 16384].gap == 0.0
    assert rows["A", 16384].gap == pytest.approx(25.0)
    assert rows["B", 16384].gap == pytest.approx(75.0)
    mfu = {(r.design, r.x): r.gap for r in versus_best({"A": {8: 0.40}, "B": {8: 0.30}}, "mfu")}
    assert mfu == {("A", 8): 0.0, ("B", 8): pytest.approx(10.0)}  # points below the best


def test_versus_best_names_the_allowed_metrics() -> None:
    with pytest.raises(ValueError, match="step_time_s"):
        versus_best({"A": {8: 1.0}}, "latency")


@given(
    st.dictionaries(
        st.sampled_from(["A", "B", "C", "D"]),
        st.dictionaries(
            st.sampled_from([64, 1024, 16384]),
            st.one_of(st.floats(0.01, 1e4), st.just(NAN)),
            min_size=1,
        ),
        min_size=1,
    ),
    st.sampled_from(sorted(VERSUS_BEST_METRICS)),
)
def test_gaps_are_never_negative_and_the_best_sits_on_zero(
    values: dict[str, dict[int, float]], metric: str
) -> None:
    rows = versus_best(values, metric)
    for x in {r.x for r in rows}:
        ran = [r for r in rows if r.x == x and math.isfinite(r.gap)]
        if ran:
            assert min(r.gap for r in ran) == 0.0
            assert all(r.gap >= 0.0 for r in ran)
            assert all(r.best_design == ran[0].best_design for r in ran)
    fabric_gap_sentence(versus_best(values, "step_time_s"))  # always a sentence, never raises


def test_sentence_says_where_the_fabric_matters_and_where_it_does_not() -> None:
    values = {
        "Fat-tree on InfiniBand": {1024: 10.0, 16384: 1.0, 131072: 0.20},
        "Fat-tree on Spectrum-X": {1024: 10.05, 16384: 1.004, 131072: 0.218},
    }
    text = fabric_gap_sentence(versus_best(values, "step_time_s"), subject="With Llama 3 70B")
    assert text == (
        "With Llama 3 70B, the fabric matters most at 131,072 GPUs, where Fat-tree on "
        "Spectrum-X is 9.0 % slower than Fat-tree on InfiniBand; from 1,024 GPUs to 16,384 GPUs "
        f"every design is within {NEGLIGIBLE_GAP_PCT:g} % of the fastest."
    )
    flat = {k: {n: v for n, v in d.items() if n < 131072} for k, d in values.items()}
    assert fabric_gap_sentence(versus_best(flat, "step_time_s")) == (
        "The fabric barely matters here: from 1,024 GPUs to 16,384 GPUs every design's step "
        "is within 0.5 % of the fastest."
    )
    far = {"A": {8: 1.0, 16: 1.0}, "B": {8: 1.5, 16: 1.05}}
    assert fabric_gap_sentence(versus_best(far, "step_time_s"), lambda e: f"EP {e}") == (
        "The fabric matters most at EP 8, where B is 50 % slower than A; the designs are "
        "closest at EP 16 (5.0 % apart)."
    )
    alone = versus_best({"A": {8: 1.0}, "B": {16: 2.0}}, "step_time_s")
    assert "nothing to compare" in fabric_gap_sentence(alone)


# ------------------------------------------------------------------------------ pages


def _sentence(at) -> str:  # type: ignore[no-untyped-def]
    found = [m.value.strip("*") for m in at.markdown if m.value.startswith("**With ")]
    assert len(found) == 1, [m.value for m in at.markdown]
    return found[0]


def _step_times(at) -> dict[str, dict[int, float]]:  # type: ignore[no-untyped-def]
    """Each design's step time per size, read from the page's MFU chart's hover data."""
    mfu = figure_titled(at, "Model FLOPs utilisation")
    vs = figure_titled(at, VS_TITLE)
    names = [t["name"] for t in vs["data"]]  # the same designs, in the same order
    out: dict[str, dict[int, float]] = {}
    for name, trace in zip(names, mfu["data"], strict=True):
        out[name] = {
            int(x): (float(c[1]) if y is not None else NAN)
            for x, y, c in zip(trace["x"], trace["y"], trace["customdata"], strict=True)
        }
    return out


@pytest.mark.app
def test_scaling_page_versus_best_view_and_sentence_follow_the_sidebar() -> None:
    at = open_page("pages/scaling.py", **{"cluster.n_gpus": "1024"})
    vs = figure_titled(at, VS_TITLE)
    assert "step time" in vs["layout"]["title"]["text"]
    times = _step_times(at)
    expected = versus_best(times, "step_time_s")
    gaps = {(r.design, r.x): r.gap for r in expected}
    for trace in vs["data"]:
        for x, y in zip(trace["x"], trace["y"], strict=True):
            if y is None:
                assert math.isnan(gaps[trace["name"], int(x)])
            else:
                assert y == pytest.approx(gaps[trace["name"], int(x)])
    first = _sentence(at)
    assert first == fabric_gap_sentence(expected, subject="With Llama 3 70B")

    at.radio(key="scal_vs_metric").set_value("mfu").run()  # the selector changes the view
    assert "MFU" in figure_titled(at, VS_TITLE)["layout"]["title"]["text"]
    assert _sentence(at) == first  # the sentence always speaks of the step time

    at.radio(key="w:fabric.vendor").set_value("roce").run()  # the sidebar's design changes
    assert_no_exception(at)
    names = [t["name"] for t in figure_titled(at, VS_TITLE)["data"]]
    assert names[0] == "Fat-tree on RoCE (ECMP)"  # the sidebar's design comes first
    again = _step_times(at)
    assert _sentence(at) == fabric_gap_sentence(
        versus_best(again, "step_time_s"), subject="With Llama 3 70B"
    )


@pytest.mark.app
def test_moe_page_versus_best_view_follows_its_topologies_and_model() -> None:
    at = open_page("pages/moe.py")
    vs = figure_titled(at, VS_TITLE)
    names = [t["name"] for t in vs["data"]]
    assert names == ["Fat-tree", "Rail-only"]  # the sidebar's topology and a contrast
    eps = {int(x) for t in vs["data"] for x in t["x"]}
    for ep in eps:  # at each EP degree the best topology sits on zero
        ys = [y for t in vs["data"] for x, y in zip(t["x"], t["y"], strict=True) if x == ep]
        ran = [y for y in ys if y is not None]
        assert not ran or min(ran) == 0.0
    assert any(y is not None for t in vs["data"] for y in t["y"])
    assert _sentence(at).startswith("With DeepSeek-V3, ")
    at.selectbox(key="moe_model").set_value("mixtral-8x7b").run()
    assert_no_exception(at)
    assert _sentence(at).startswith("With Mixtral 8x7B, ")
    at.multiselect(key="moe_topos").set_value(["fat-tree", "dragonfly-plus"]).run()
    assert [t["name"] for t in figure_titled(at, VS_TITLE)["data"]] == ["Fat-tree", "Dragonfly+"]
