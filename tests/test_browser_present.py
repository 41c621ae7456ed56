"""Real-browser test of presentation mode: Chromium (pytest-playwright) against a live
``streamlit run app.py``: ``?present=1`` hides the sidebar and the controls, draws each view
large, and Next / Previous step through the views, each at its own URL."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from fabric_model.presets import DEFAULT_PRESET

pytestmark = pytest.mark.e2e

IDLE = "[data-testid=stApp][data-test-script-state=notRunning]"
#: the first view models the report's sections on the server (seconds on two busy cores)
STORY_TIMEOUT_MS = 120_000

expect.set_options(timeout=30_000)


def _heading(page: Page):  # type: ignore[no-untyped-def]
    return page.locator("[data-testid=stMain] h1").first


def test_presentation_mode_steps_through_its_views(page: Page, live_app: str) -> None:
    page.set_default_timeout(STORY_TIMEOUT_MS)
    page.goto(live_app + "/?present=1")
    expect(_heading(page)).to_have_text(DEFAULT_PRESET, timeout=STORY_TIMEOUT_MS)
    expect(page.locator("[data-testid=stSidebar]")).to_be_hidden()  # no sidebar, no controls
    expect(page.get_by_text("1 of 13")).to_be_visible()
    size = _heading(page).evaluate("e => parseFloat(getComputedStyle(e).fontSize)")
    assert size >= 40  # projector-sized (the dashboard's h1 is about 44 px at 2.75rem ...)
    body = page.get_by_text("Step time: ").first.evaluate(
        "e => parseFloat(getComputedStyle(e).fontSize)"
    )
    assert body >= 24  # ... and its text 16 px: here 1.6rem

    page.get_by_role("button", name="Next").click()
    expect(page).to_have_url(re.compile(r"[?&]slide=2(&|$)"))
    expect(_heading(page)).to_have_text("Training step: Where the step goes")
    chart = page.locator("[data-testid=stPlotlyChart] .main-svg").first
    expect(chart).to_be_visible()
    box = chart.bounding_box()
    assert box is not None and box["height"] >= 600  # enlarged for the room

    page.get_by_role("button", name="Next").click()
    expect(page).to_have_url(re.compile(r"[?&]slide=3(&|$)"))
    expect(_heading(page)).to_contain_text("Communication per parallel dimension")
    page.get_by_role("button", name="Previous").click()
    expect(page).to_have_url(re.compile(r"[?&]slide=2(&|$)"))
    expect(_heading(page)).to_have_text("Training step: Where the step goes")

    # a view opens from its URL (a bookmark, a link sent before the meeting)
    page.goto(live_app + "/?present=1&slide=4")
    expect(_heading(page)).to_contain_text("Collectives: All-reduce across 1,024 GPUs")
    page.get_by_role("button", name="Leave presentation").click()
    expect(page.locator("[data-testid=stSidebar]")).to_be_visible()
    expect(page).not_to_have_url(re.compile(r"present="))
    page.wait_for_selector(IDLE)
