"""No crash on any page: random scenarios from the key table, opened through the URL.

Hypothesis hands the generator of ``tests/page_fuzz_cases.py`` (on top of the CLI fuzzer's
``tests/fuzz_scenarios.py``) a seed per case; each case opens one page in a new AppTest
session with the scenario in its URL (and the page's own ``wi.``/``cmp.``/``ex.``
parameters, a pasted nccl-tests log on Validate) and checks the page contract: no exception
element, nothing escaping the run, every error and warning naming a scenario key or a known
physics finding, no nan/inf metric. A failure prints the URL that reproduces it. The CI run
is derandomized and bounded (a few cases per page, clusters of at most 256 GPUs); the long
run is ``python benchmarks/page_fuzz.py --n 1000``.

Below: the crashes this fuzzing found, each fixed where it arose, and the time budgets of
the pages that can compute for long (a budget of 0 s cuts them short at once).
"""

from __future__ import annotations

import random
import time

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from fabric_model.presets import load_preset
from fabric_model.training.sweep import SKIPPED_REASON, plan_search, sweep
from tests.apptest_helpers import alerts, open_page
from tests.page_fuzz_cases import (
    PAGES,
    PageCase,
    describe_page_failure,
    message_problem,
    random_page_case,
    run_page_case,
)
from ui import facade

pytestmark = pytest.mark.app

#: Cases per page in CI (ten pages: about 40 page runs, each well under a second mostly).
EXAMPLES_PER_PAGE = 4
#: Largest cluster the CI cases draw (the base presets hold 1,024 GPUs).
CI_MAX_GPUS = 256
TIMEOUT_S = 300
SEEDS = st.integers(0, 2**32 - 1)


def _check(case: PageCase) -> None:
    note(case.url)
    outcome = run_page_case(case, TIMEOUT_S)
    assert outcome.ok, describe_page_failure(case, outcome)


@pytest.mark.parametrize("page", PAGES)
@settings(
    derandomize=True,
    max_examples=EXAMPLES_PER_PAGE,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(seed=SEEDS)
def test_every_page_keeps_the_contract_on_random_scenarios(page: str, seed: int) -> None:
    _check(random_page_case(random.Random(seed), page, CI_MAX_GPUS))


def test_the_contract_check_flags_what_it_must() -> None:
    assert message_problem("URL parameter cluster.n_gpus = 3: must be ...") == ""
    assert message_problem("URL parameter wi.bogus: not a what-if setting") == ""
    assert message_problem("The pipeline bubble is 40% of the step: ...") == ""
    assert message_problem("Memory is tight: 72.4 +- 13.5 GiB per GPU on pipeline rank 0") == ""
    assert message_problem("Something went wrong") != ""
    assert message_problem("Cut short after the page's 30 s budget: rerun") != ""  # no command


# ------------------------------------------------------------ regressions, explicit


def test_a_routing_the_family_lacks_is_a_warning_on_collectives() -> None:
    """fabric.routing=minimal on a fat-tree built, then crashed at the first routed pattern
    (fuzz seed 0, cases 62, 162, 172): the fabric now refuses it when it is built."""
    at = open_page("pages/collectives.py", **{"fabric.routing": "minimal"})
    shown = alerts(at)
    assert len(shown) == 1, shown
    assert "fabric.routing" in shown[0] and "adaptive, ecmp, dmodk" in shown[0], shown[0]


@pytest.mark.parametrize("factor", ["0.001", "1e-09"])
def test_whatif_slider_reaches_a_tiny_degraded_factor(factor: str) -> None:
    """A degraded-link factor below the slider's first step (allowed by the key table) made
    the What-if slider raise (fuzz seed 1, cases 115, 295, ...)."""
    for query in ({"what_if.degraded_link_factor": factor}, {"wi.degraded_link_factor": factor}):
        at = open_page("pages/whatif.py", **query)
        slider = at.slider(key="wi:what_if.degraded_link_factor")
        assert slider.value == pytest.approx(float(factor))


def test_a_url_the_sidebar_wrote_reloads_whatever_the_key_order() -> None:
    """cluster.n_gpus=12 with cluster.gpus_per_node=4: applied one by one in URL order the
    first key was refused (12 is no multiple of the preset's 8)."""
    query = {"cluster.n_gpus": "12", "cluster.gpus_per_node": "4", "cluster.nvlink_domain": "4"}
    at = open_page("pages/topology.py", **query)
    assert not at.error, alerts(at)
    assert at.select_slider(key="w:cluster.n_gpus").value == 12


def test_the_scaling_progress_bar_survives_a_cache_hit() -> None:
    """The sweep's progress bar was updated from inside the cached line: the next session's
    cache hit replayed that update onto a bar it does not have (CacheReplayClosureError)."""
    for _ in range(2):
        open_page("pages/scaling.py", **{"cluster.n_gpus": "512"})  # raises nothing, twice


# ---------------------------------------------------------------- time budgets


@pytest.fixture
def no_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(facade, "COMPUTE_BUDGET_S", 0.0)


@pytest.mark.usefixtures("no_budget")
@pytest.mark.parametrize(
    ("page", "query", "verb"),
    [
        ("pages/scaling.py", {}, "sweep"),
        ("pages/moe.py", {}, "step"),
        ("pages/explore.py", {"ex.fabric.vendor": "infiniband~roce"}, "explore"),
    ],
)
def test_a_page_over_its_budget_says_so_and_how_to_get_the_rest(
    page: str, query: dict[str, str], verb: str
) -> None:
    at = open_page(page, **{"cluster.n_gpus": "256", **query})
    cut = [m for m in alerts(at) if m.startswith("Cut short")]
    assert len(cut) == 1, alerts(at)
    assert f"`python -m fabric_model {verb} " in cut[0], cut[0]
    assert "--set cluster.n_gpus=256" in cut[0], cut[0]
    assert message_problem(cut[0]) == ""
    assert at.get("plotly_chart")  # the page still draws what it has (empty charts here)


def test_a_cut_short_result_is_not_cached() -> None:
    scenario = load_preset("dgx-h100-ib-ndr")
    gpus = (64, 128)
    cut = facade.scaling_line(scenario, "fat-tree", "roce", gpus, "weak", deadline=0.0)
    assert all(p.skipped for p in cut)
    full = facade.scaling_line(scenario, "fat-tree", "roce", gpus, "weak", deadline=None)
    assert not any(p.skipped for p in full) and all(p.feasible for p in full)


def test_sweep_deadline_skips_the_sizes_left() -> None:
    scenario = load_preset("dgx-h100-ib-ndr")
    points = sweep(scenario, [64, 128, 256], deadline=time.monotonic() - 1)
    assert [p.skipped for p in points] == [True] * 3
    assert all(not p.feasible and p.reason == SKIPPED_REASON for p in points)
    assert not any(p.skipped for p in sweep(scenario, [64, 128], deadline=None))


def test_plan_search_deadline_stops_the_search() -> None:
    found = plan_search(load_preset("dgx-h100-ib-ndr"), top=1, deadline=time.monotonic() - 1)
    assert found.timed_out and not found.exact and not found.plans
    assert not plan_search(load_preset("dgx-h100-ib-ndr"), top=1).timed_out
