"""Real-browser test of the Explore page (Chromium via pytest-playwright).

Same fixtures and habits as ``test_browser.py``: a live server per worker, waits on concrete
text or selectors, no fixed sleeps; expected numbers come from ``fabric_model``.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import IDLE, wait_for_page
from playwright.sync_api import Page, expect

from fabric_model.presets import DEFAULT_PRESET, load_preset
from fabric_model.run.explore import explore, parse_vary

pytestmark = pytest.mark.e2e

CHART = "[data-testid=stPlotlyChart] .js-plotly-plot"
PAGE_TIMEOUT_MS = 60_000

expect.set_options(timeout=30_000)


def query(url: str) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlsplit(url).query).items()}


def test_explore_link_draws_the_front_and_a_design_loads_into_the_sidebar(
    page: Page, live_app: str
) -> None:
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    page.goto(live_app + "/explore?ex.fabric.vendor=infiniband~roce&ex.fabric.link_gbps=200~400")
    wait_for_page(page, "Explore", PAGE_TIMEOUT_MS)
    model = explore(
        load_preset(DEFAULT_PRESET),
        [parse_vary("fabric.vendor=infiniband,roce"), parse_vary("fabric.link_gbps=200,400")],
    )
    n_front = sum(d["pareto"] for d in model.designs)
    expect(
        page.locator(CHART + " .gtitle", has_text=f"{n_front} of 4 designs on the Pareto front")
    ).to_be_visible()
    expect(page.locator(CHART + " .legendtext", has_text="RoCE (ECMP) · Fat-tree")).to_be_visible()
    expect(page.locator("[data-testid=stException]")).to_have_count(0)
    expect(page.locator("[data-testid=stAlert]")).to_have_count(0)

    # design 3 is RoCE at 200G: loading it moves the sidebar and the URL
    page.wait_for_selector(IDLE)
    page.get_by_role("button", name=re.compile(r"^Load #3")).click()
    expect(page).to_have_url(re.compile(r"[?&]fabric\.vendor=roce(&|$)"))
    expect(page).to_have_url(re.compile(r"[?&]fabric\.link_gbps=200(&|$)"))
    assert query(page.url)["ex.fabric.vendor"] == "infiniband~roce"
    sidebar = page.locator("[data-testid=stSidebar]")
    expect(sidebar.get_by_role("radio", name="RoCE (ECMP)")).to_be_checked()
    page.wait_for_selector(IDLE)
    expect(page.locator("[data-testid=stException]")).to_have_count(0)
