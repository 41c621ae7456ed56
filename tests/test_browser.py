"""Real-browser tests: Chromium (via pytest-playwright) against a live ``streamlit run app.py``.

Every test waits for concrete text or selectors (Streamlit renders over a websocket after the
``load`` event); there are no fixed sleeps. Expected numbers come from ``fabric_model``.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import app_pages, wait_for_page
from playwright.sync_api import BrowserContext, Locator, Page, expect

from fabric_model.plant.cost import bill_of_materials, compare_vendors
from fabric_model.presets import DEFAULT_PRESET, load_preset
from fabric_model.scenario import apply_overrides

pytestmark = pytest.mark.e2e

PAGES = {p.url: p for p in app_pages()}
#: plotly charts drawn for the default preset, for the pages this file knows in detail
N_CHARTS = {"/topology": 2, "/cost": 3}
CHART = "[data-testid=stPlotlyChart] .js-plotly-plot"
IDLE = "[data-testid=stApp][data-test-script-state=notRunning]"
PAGE_TIMEOUT_MS = 60_000

expect.set_options(timeout=30_000)


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def open_page(page: Page, base: str, url: str) -> Page:
    """Open a page URL (path plus optional query) and wait until it is drawn and idle."""
    path = urlsplit(url).path
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    page.goto(base + url)
    wait_for_page(page, PAGES[path].title, PAGE_TIMEOUT_MS)
    if path in N_CHARTS:
        expect(page.locator(CHART)).to_have_count(N_CHARTS[path])
    return page


def diagram_title(page: Page) -> Locator:
    return page.locator(CHART + " .gtitle").first


def metric_value(page: Page, label: str) -> Locator:
    label_re = re.compile(f"^{re.escape(label)}")
    card = page.locator("[data-testid=stMetric]").filter(
        has=page.locator("[data-testid=stMetricLabel]", has_text=label_re)
    )
    return card.locator("[data-testid=stMetricValue]")


def gpu_slider(page: Page) -> Locator:
    # the accessible name repeats the label ("GPUs GPUs"); "GPUs per server" is a spinbutton
    return page.get_by_role("slider", name=re.compile(r"^GPUs( GPUs)?$"))


def press_gpu_slider(page: Page, key: str) -> None:
    page.wait_for_selector(IDLE)
    slider = gpu_slider(page)
    slider.focus()
    slider.press(key)


def query(url: str) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlsplit(url).query).items()}


def expect_clean(page: Page) -> None:
    """No exception box, no alert (error/warning/info) and no dialog on the page."""
    expect(page.locator("[data-testid=stException]")).to_have_count(0)
    expect(page.locator("[data-testid=stAlert]")).to_have_count(0)
    expect(page.get_by_role("dialog")).to_have_count(0)


def bom(**overrides: Any) -> Any:
    return bill_of_materials(apply_overrides(load_preset(DEFAULT_PRESET), overrides))


# --------------------------------------------------------------------------------------
# tests
# --------------------------------------------------------------------------------------


def test_first_visitor_of_a_page_url_gets_the_app(first_visit: dict[str, Any]) -> None:
    # a fresh server's first session opened /cost: it must run through app.py like any other
    # (page config, navigation), not as Streamlit's legacy bare pages/ script
    assert first_visit["title"] == "Fabric what-if"
    assert first_visit["nav"] == [p.title for p in PAGES.values()]


def test_gpu_slider_keyboard_changes_diagram_and_url(page: Page, live_app: str) -> None:
    open_page(page, live_app, "/topology")
    expect(diagram_title(page)).to_contain_text("1,024 GPUs")
    press_gpu_slider(page, "ArrowRight")  # a select_slider: the next option, 2,048
    expect(diagram_title(page)).to_contain_text("2,048 GPUs")
    n_switches = bom(**{"cluster.n_gpus": 2048}).topology.n_switches
    expect(diagram_title(page)).to_contain_text(f"{n_switches:,} switches")
    expect(metric_value(page, "Switches")).to_have_text(f"{n_switches:,}")
    expect(page).to_have_url(re.compile(r"/topology\?.*cluster\.n_gpus=2048(&|$)"))
    expect(gpu_slider(page)).to_have_attribute("aria-valuetext", "2,048")
    expect_clean(page)


def test_shared_url_reproduces_the_scenario(
    page: Page, new_context: Callable[..., BrowserContext], live_app: str
) -> None:
    n = bom(**{"cluster.n_gpus": 4096, "fabric.vendor": "spectrum-x"}).topology.n_switches
    shared = "/topology?preset=dgx-h100-ib-ndr&cluster.n_gpus=4096&fabric.vendor=spectrum-x"
    # one user builds the scenario with the sidebar ...
    open_page(page, live_app, "/topology")
    page.locator("[data-testid=stSidebar]").get_by_text("Spectrum-X", exact=True).click()
    expect(page).to_have_url(re.compile(r"fabric\.vendor=spectrum-x"))
    press_gpu_slider(page, "ArrowRight")
    expect(diagram_title(page)).to_contain_text("2,048 GPUs")
    press_gpu_slider(page, "ArrowRight")
    expect(diagram_title(page)).to_contain_text(f"4,096 GPUs, {n:,} switches")
    expect(page).to_have_url(re.compile(r"cluster\.n_gpus=4096"))
    assert urlsplit(page.url).path == "/topology"
    assert query(page.url) == query(shared)

    # ... and another opens the link in a new context (no cookies, no session)
    other = new_context().new_page()
    open_page(other, live_app, shared)
    expect(diagram_title(other)).to_contain_text(f"4,096 GPUs, {n:,} switches")
    expect(metric_value(other, "Switches")).to_have_text(f"{n:,}")
    expect(gpu_slider(other)).to_have_attribute("aria-valuetext", "4,096")
    expect(other.get_by_role("radio", name="Spectrum-X")).to_be_checked()
    assert query(other.url) == query(shared)
    expect_clean(other)


def test_bad_url_shows_an_alert_naming_the_key(page: Page, live_app: str) -> None:
    open_page(page, live_app, "/topology?cluster.n_gpus=abc")
    alert = page.locator("[data-testid=stAlert]")
    expect(alert).to_have_count(1)
    expect(alert).to_contain_text("cluster.n_gpus")
    expect(alert).to_contain_text("1,048,576")
    # the value is ignored: the preset is drawn and the URL no longer carries it
    expect(diagram_title(page)).to_contain_text("1,024 GPUs")
    expect(page).to_have_url(re.compile(rf"/topology\?preset={DEFAULT_PRESET}$"))
    expect(page.locator("[data-testid=stException]")).to_have_count(0)


def test_cost_page_downloads_valid_csv(page: Page, live_app: str) -> None:
    open_page(page, live_app, "/cost")
    expected = bom()

    with page.expect_download() as info:
        page.get_by_role("button", name="Download BOM (CSV)").click()
    download = info.value
    assert download.suggested_filename == f"{DEFAULT_PRESET}-infiniband-bom.csv"
    rows = list(csv.DictReader(io.StringIO(Path(download.path()).read_text(encoding="utf-8"))))
    assert rows, "empty BOM CSV"
    assert {"category", "quantity", "capex_usd"} <= set(rows[0])
    assert [(r["category"], int(r["quantity"])) for r in rows] == [
        (line.category, line.quantity) for line in expected.lines
    ]
    assert sum(float(r["capex_usd"]) for r in rows) == pytest.approx(expected.capex_usd)

    with page.expect_download() as info:
        page.get_by_role("button", name="Download comparison (CSV)").click()
    rows = list(csv.DictReader(io.StringIO(Path(info.value.path()).read_text(encoding="utf-8"))))
    assert [r["vendor"] for r in rows] == ["InfiniBand", "Spectrum-X", "RoCE (ECMP)"]
    model = {c.vendor: c.bom for c in compare_vendors(load_preset(DEFAULT_PRESET))}
    assert [int(r["capex_usd"]) for r in rows] == [
        round(model[v].capex_usd) for v in ("infiniband", "spectrum-x", "roce")
    ]


def test_sidebar_navigation_keeps_the_scenario(page: Page, live_app: str) -> None:
    open_page(page, live_app, "/topology")
    press_gpu_slider(page, "ArrowRight")
    expect(diagram_title(page)).to_contain_text("2,048 GPUs")
    expect(page).to_have_url(re.compile(r"cluster\.n_gpus=2048"))
    page.wait_for_selector(IDLE)

    page.locator("[data-testid=stSidebarNav]").get_by_role("link", name="Cost").click()
    expect(page.locator("[data-testid=stMain] h1")).to_have_text("Cost")
    expect(page).to_have_url(re.compile(r"/cost\?.*cluster\.n_gpus=2048"))
    expected = bom(**{"cluster.n_gpus": 2048})
    expect(metric_value(page, "Capex per GPU")).to_have_text(f"${expected.capex_per_gpu_usd:,.0f}")
    expect(gpu_slider(page)).to_have_attribute("aria-valuetext", "2,048")
    expect_clean(page)
