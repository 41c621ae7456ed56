"""The Overview's per-scenario caches: cheap scenario keys and figures built once per design.

``ui.cache_keys.scenario_key`` must tell apart any two different scenarios and agree on equal
ones however they were built; a slider move back to a size drawn before must show the same
figures and table as the first time, and a move to a new size that size's figures.
Expected values come from ``fabric_model`` and the pure figure builders, never the page.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_model.presets import DEFAULT_PRESET, load_preset
from fabric_model.scenario import apply_overrides
from tests.apptest_helpers import assert_no_exception, chart_titles, figures, open_page
from ui.cache_keys import scenario_key
from ui.state import GPU_COUNT_STEPS

OVERVIEW = "pages/overview.py"

_OVERRIDES = st.fixed_dictionaries(
    {},
    optional={
        "cluster.n_gpus": st.sampled_from(GPU_COUNT_STEPS[:8]),
        "fabric.vendor": st.sampled_from(["infiniband", "spectrum-x", "roce"]),
        "fabric.oversubscription": st.sampled_from([1.0, 2.0, 3.0]),
        "costs.pue": st.sampled_from([1.1, 1.25, 1.5]),
    },
)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(a=_OVERRIDES, b=_OVERRIDES)
def test_scenario_key_is_equal_exactly_for_equal_scenarios(a: dict, b: dict) -> None:
    base = load_preset(DEFAULT_PRESET)
    sa, sb = apply_overrides(base, a), apply_overrides(load_preset(DEFAULT_PRESET), b)
    assert (scenario_key(sa) == scenario_key(sb)) == (sa == sb)


def test_scenario_key_sees_a_deep_field() -> None:
    base = load_preset(DEFAULT_PRESET)
    other = dataclasses.replace(
        base, costs=dataclasses.replace(base.costs, years=base.costs.years + 1)
    )
    assert scenario_key(other) != scenario_key(base)
    assert scenario_key(dataclasses.replace(base)) == scenario_key(base)


@pytest.mark.app
def test_overview_shows_the_same_figures_when_the_slider_comes_back() -> None:
    at = open_page(OVERVIEW, title="Overview")
    start = at.select_slider(key="w:cluster.n_gpus").value
    first, first_table = figures(at), at.dataframe[0].value
    other = next(n for n in GPU_COUNT_STEPS if n > int(start))
    at.select_slider(key="w:cluster.n_gpus").set_value(other).run()
    assert_no_exception(at)
    assert any(f"{other:,} GPUs" in t for t in chart_titles(at)), chart_titles(at)
    assert figures(at) != first
    at.select_slider(key="w:cluster.n_gpus").set_value(start).run()
    assert_no_exception(at)
    assert figures(at) == first
    assert at.dataframe[0].value.equals(first_table)
