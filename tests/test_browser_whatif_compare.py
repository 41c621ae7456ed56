"""Real-browser tests of the What-if and Compare pages (Chromium via pytest-playwright).

Same fixtures and habits as ``test_browser.py``: a live server per worker, waits on concrete
text or selectors, no fixed sleeps; expected numbers come from ``fabric_model``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import IDLE, wait_for_page
from playwright.sync_api import BrowserContext, Locator, Page, expect

from fabric_model.presets import DEFAULT_PRESET, load_preset
from fabric_model.scenario import apply_overrides
from fabric_model.training import training_step

pytestmark = pytest.mark.e2e

CHART = "[data-testid=stPlotlyChart] .js-plotly-plot"
MAIN = "[data-testid=stMain]"
PAGE_TIMEOUT_MS = 60_000

expect.set_options(timeout=30_000)


def open_page(page: Page, base: str, url: str, title: str) -> Page:
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    page.goto(base + url)
    wait_for_page(page, title, PAGE_TIMEOUT_MS)
    return page


def query(url: str) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlsplit(url).query).items()}


def expect_no_error(page: Page) -> None:
    expect(page.locator("[data-testid=stException]")).to_have_count(0)
    expect(page.locator("[data-testid=stAlertContentError]")).to_have_count(0)


def legend(page: Page, text: str) -> Locator:
    return page.locator(CHART + " .legendtext", has_text=text)


def main_slider(page: Page, name: str) -> Locator:
    return page.locator(MAIN).get_by_role("slider", name=re.compile(f"^{re.escape(name)}"))


def gpu_slider(page: Page) -> Locator:
    return page.locator("[data-testid=stSidebar]").get_by_role(
        "slider", name=re.compile(r"^GPUs( GPUs)?$")
    )


def pins_in_charts(page: Page) -> list[str]:
    """Legend entries of the Compare page's busbw chart: one per column."""
    chart = page.locator(CHART).filter(
        has=page.locator(".gtitle", has_text="All-reduce bus bandwidth vs message size")
    )
    return chart.locator(".legendtext").all_text_contents()


def test_whatif_control_updates_the_charts(page: Page, live_app: str) -> None:
    open_page(page, live_app, "/whatif", "What-if")
    expect(page).to_have_url(re.compile(rf"/whatif\?preset={DEFAULT_PRESET}$"))
    expect(page.locator("[data-testid=stAlert]")).to_have_count(0)
    expect(page.locator(CHART)).to_have_count(3)  # the two what-if charts and the health view's
    expect(legend(page, "after (all changes)")).to_have_count(0)

    slider = main_slider(page, "NICs (rails) per GPU")
    slider.focus()
    slider.press("ArrowRight")  # 1 -> 2 NICs per GPU
    expect(page).to_have_url(re.compile(r"[?&]wi\.nics_per_gpu=2(&|$)"))
    expect(legend(page, "after (all changes)")).to_have_count(2)  # both charts
    base = load_preset(DEFAULT_PRESET)
    before = training_step(base).step_time_s
    after = training_step(apply_overrides(base, {"cluster.nics_per_gpu": 2})).step_time_s
    # a redraw briefly shows the old chart beside the new one: wait for the new title
    expect(
        page.locator(
            CHART + " .gtitle",
            has_text=f"Step time per term, before vs after: {before:,.2f} s → {after:,.2f} s",
        ).first
    ).to_be_visible()
    page.wait_for_selector(IDLE)
    expect_no_error(page)
    expect(page.locator("[data-testid=stAlert]")).to_have_count(0)


def test_compare_pins_two_scenarios_and_the_link_restores_them(
    page: Page, new_context: Callable[..., BrowserContext], live_app: str
) -> None:
    open_page(page, live_app, "/compare", "Compare")
    expect(page).to_have_url(re.compile(rf"/compare\?preset={DEFAULT_PRESET}$"))
    expect(page.locator("[data-testid=stAlert]")).to_have_count(0)
    pin = page.get_by_role("button", name="Pin current scenario")
    label = page.get_by_role("textbox", name="Label for the pin")

    expect(label).to_have_value("1024 H100 IB fat-tree")
    pin.click()
    expect(page).to_have_url(re.compile(rf"[?&]cmp\.1={DEFAULT_PRESET}(&|$)"))
    page.wait_for_selector(IDLE)

    slider = gpu_slider(page)
    slider.focus()
    slider.press("ArrowRight")  # 1,024 -> 2,048 GPUs
    expect(page).to_have_url(re.compile(r"cluster\.n_gpus=2048"))
    expect(label).to_have_value("2048 H100 IB fat-tree")  # the label follows the sidebar
    page.wait_for_selector(IDLE)
    pin.click()
    expect(page).to_have_url(re.compile(r"[?&]cmp\.2=[^&]*cluster\.n_gpus(%3D|=)2048"))
    page.wait_for_selector(IDLE)
    expected = ["1024 H100 IB fat-tree", "2048 H100 IB fat-tree", "current"]
    expect(
        page.locator(CHART + " .legendtext", has_text="2048 H100 IB fat-tree")
    ).not_to_have_count(0)
    assert pins_in_charts(page) == expected
    expect_no_error(page)

    # the same link in a new browser context (no session): the same pins
    shared = page.url
    other = new_context().new_page()
    open_page(other, live_app, shared.removeprefix(live_app), "Compare")
    expect(
        other.locator(CHART + " .legendtext", has_text="2048 H100 IB fat-tree")
    ).not_to_have_count(0)
    assert pins_in_charts(other) == expected
    pinned = other.locator(MAIN).locator("input[type=text]")
    expect(pinned).to_have_count(3)  # the new label field and the two pins
    assert [pinned.nth(i).input_value() for i in (1, 2)] == expected[:2]
    assert query(other.url) == query(shared)
    expect_no_error(other)
    expect(other.locator("[data-testid=stAlert]")).to_have_count(0)
