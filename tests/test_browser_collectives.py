"""Real-browser tests of the Collectives page (Chromium via pytest-playwright, live server).

Same fixtures and habits as ``test_browser.py``: wait for concrete text or selectors, no
fixed sleeps; expected numbers come from ``fabric_model``.
"""

from __future__ import annotations

import csv
import io
import itertools
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from fabric_model.collectives import collective
from fabric_model.presets import DEFAULT_PRESET, load_preset
from ui.facade import COLLECTIVE_SIZES, DEFAULT_ALGORITHMS

pytestmark = pytest.mark.e2e

CHART = "[data-testid=stPlotlyChart] .js-plotly-plot"
IDLE = "[data-testid=stApp][data-test-script-state=notRunning]"
#: curves and breakdown (the fabric effects chart waits until its section is opened)
N_CHARTS = 2
EFFECTS_SECTION = "The same design on InfiniBand, Spectrum-X and RoCE"
PAGE_TIMEOUT_MS = 60_000

expect.set_options(timeout=30_000)


@pytest.fixture(scope="session")
def app_url(browser: Any, browser_context_args: dict[str, Any], streamlit_server: str) -> str:
    """This worker's server after one visit to ``/`` (runs app.py's ``st.navigation``).

    Like ``conftest.live_app``, but it waits for the app shell to be idle rather than for a
    chart, so these tests do not depend on what the default page draws.
    """
    context = browser.new_context(**browser_context_args)
    try:
        first = context.new_page()
        first.goto(streamlit_server + "/")
        first.wait_for_selector("[data-testid=stSidebarNav]", timeout=PAGE_TIMEOUT_MS)
        first.wait_for_selector(IDLE, timeout=PAGE_TIMEOUT_MS)
    finally:
        context.close()
    return streamlit_server


def open_collectives(page: Page, base: str, query: str = "") -> Page:
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    page.goto(f"{base}/collectives{query}")
    page.wait_for_selector(CHART + " .main-svg", timeout=PAGE_TIMEOUT_MS)
    expect(page.locator(CHART)).to_have_count(N_CHARTS, timeout=PAGE_TIMEOUT_MS)
    page.wait_for_selector(IDLE)
    return page


def chart_title(page: Page, text: str) -> Locator:
    return page.locator(CHART + " .gtitle", has_text=text)


def open_effects(page: Page) -> None:
    """Open the fabric effects section (solved on opening) and wait for its chart."""
    page.get_by_text(EFFECTS_SECTION).click()
    expect(chart_title(page, "Fabric effects")).to_have_count(1)
    page.wait_for_selector(IDLE)


def test_collectives_page_loads(page: Page, app_url: str, screenshot_dir: Path) -> None:
    open_collectives(page, app_url)
    expect(page.locator("h1")).to_have_text("Collectives")
    expect(page).to_have_url(re.compile(rf"/collectives\?preset={DEFAULT_PRESET}$"))
    expect(
        chart_title(page, "all-reduce bus bandwidth vs message size (1,024 GPUs)")
    ).to_have_count(1)
    expect(chart_title(page, "Fabric effects")).to_have_count(0)
    open_effects(page)
    # the default preset's auto switches algorithm: a labelled crossover above the plot
    auto = collective(load_preset(DEFAULT_PRESET), "allreduce", "auto", list(COLLECTIVE_SIZES))
    switch = next(b for a, b in itertools.pairwise(auto) if a.algo != b.algo)
    expect(page.locator(CHART + " .annotation-text", has_text=f"→ {switch.algo}")).to_have_count(1)
    expect(page.locator("[data-testid=stException]")).to_have_count(0)
    expect(page.locator("[data-testid=stAlert]")).to_have_count(0)
    page.set_viewport_size({"width": 1400, "height": 3000})
    page.wait_for_selector(IDLE)
    shot = screenshot_dir / "collectives.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000


def test_operation_and_placement_controls(page: Page, app_url: str) -> None:
    open_collectives(page, app_url)
    page.get_by_text("all-gather", exact=True).click()
    expect(chart_title(page, "all-gather bus bandwidth")).to_have_count(1)
    page.wait_for_selector(IDLE)

    open_effects(page)
    expect(chart_title(page, "contiguous placement")).to_have_count(1)
    page.get_by_text("Scattered placement", exact=True).click()
    expect(page).to_have_url(re.compile(r"[?&]what_if\.placement=scattered(&|$)"))
    expect(chart_title(page, "scattered placement")).to_have_count(1)
    expect(page.locator("[data-testid=stException]")).to_have_count(0)


def test_unavailable_algorithm_is_explained(page: Page, app_url: str) -> None:
    open_collectives(page, app_url, "?preset=dgx-h100-spectrum-x")
    alert = page.locator("[data-testid=stAlert]")
    expect(alert).to_have_count(1)
    expect(alert).to_contain_text("sharp")
    expect(alert).to_contain_text("InfiniBand")
    expect(page.locator("[data-testid=stException]")).to_have_count(0)


def test_curves_csv_download(page: Page, app_url: str) -> None:
    open_collectives(page, app_url)
    with page.expect_download() as info:
        page.get_by_role("button", name="Download curves (CSV)").click()
    download = info.value
    assert download.suggested_filename == f"{DEFAULT_PRESET}-allreduce-curves.csv"
    rows = list(csv.DictReader(io.StringIO(Path(download.path()).read_text(encoding="utf-8"))))
    curves = [*DEFAULT_ALGORITHMS["allreduce"], "auto"]
    assert [r["curve"] for r in rows] == [c for c in curves for _ in COLLECTIVE_SIZES]
    auto = collective(load_preset(DEFAULT_PRESET), "allreduce", "auto", list(COLLECTIVE_SIZES))
    got = [float(r["busbw_GBps"]) for r in rows if r["curve"] == "auto"]
    assert got == pytest.approx([r.busbw_GBps for r in auto])
