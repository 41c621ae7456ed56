"""Every page of the app, in Streamlit's light and dark theme: drawn, clean, legible, saved.

The pages come from ``app.py``'s navigation (``conftest.app_pages``), so a new page is
covered as soon as it is added. The light run is the plain page URL (a browser's default
theme), so it is also the page-load test: the app's tab title, the URL the sidebar writes
(the preset alone), no alert, something drawn. The dark theme is chosen with Streamlit's
``?embed_options=dark_theme`` URL option (it works without ``embed=true`` in Streamlit 1.67
and stays in the URL when the app rewrites its query). Each page is saved whole to
``test-artifacts/screenshots/<page>-<theme>.png``: the viewport is made as tall as the page,
since Streamlit scrolls an inner container and ``full_page=True`` would capture only the
viewport.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import IDLE, app_pages, wait_for_page
from playwright.sync_api import Page, expect

from fabric_model.presets import DEFAULT_PRESET

pytestmark = pytest.mark.e2e

PAGES = app_pages()
#: URL query per theme: light is the default theme (no option), dark is asked for
THEMES = {"light": "", "dark": "?embed_options=dark_theme"}
#: plotly charts drawn for the default preset, for the pages whose count is known
N_CHARTS = {"/topology": 2, "/cost": 3}
#: Pages whose first view has no chart or metric, and the closed section that holds them
DRAWS_ON_DEMAND = {
    "/validate": "Expected nccl-tests results",
    "/cluster": "Simulate every policy",
}
PAGE_TIMEOUT_MS = 60_000
WIDTH = 1400
MAX_HEIGHT = 12_000
#: chart text drawn straight on the page background (not bar labels, which may sit inside bars)
CHART_TEXT = ", ".join(
    f"[data-testid=stPlotlyChart] .main-svg {s}"
    for s in (
        ".gtitle",
        ".xtick text",
        ".ytick text",
        ".g-xtitle text",
        ".g-ytitle text",
        ".legendtext",
        ".legendtitletext",
        ".annotation-text",
        ".cbtitle text",
        ".cbaxis text",
        ".scatterlayer .textpoint text",
    )
)
#: WCAG's minimum contrast for large text and graphics; chart labels must reach it
MIN_CONTRAST = 3.0

_RGB = re.compile(r"rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)(?:,\s*([\d.]+))?\)")


def _rgb(css: str) -> tuple[float, float, float, float]:
    m = _RGB.fullmatch(css.strip())
    assert m, f"not a CSS rgb() colour: {css!r}"
    r, g, b, a = m.groups()
    return float(r), float(g), float(b), 1.0 if a is None else float(a)


def _luminance(rgb: tuple[float, ...]) -> float:
    """WCAG relative luminance of an sRGB colour (0 black .. 1 white)."""

    def lin(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (lin(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _contrast(fg: tuple[float, ...], bg: tuple[float, ...]) -> float:
    """WCAG contrast ratio; a translucent foreground is blended onto the background first."""
    alpha = fg[3]
    blended = tuple(alpha * f + (1 - alpha) * b for f, b in zip(fg[:3], bg[:3], strict=True))
    hi, lo = sorted((_luminance(blended), _luminance(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _chart_text_colours(page: Page) -> list[tuple[str, tuple[float, ...]]]:
    """``(text, RGBA fill)`` of every chart label drawn on the page background."""
    found = page.locator(CHART_TEXT).evaluate_all(
        "els => els.filter(e => e.textContent.trim()).map(e => {"
        "  const s = getComputedStyle(e);"
        "  return [e.textContent.trim(), s.fill, s.fillOpacity]; })"
    )
    out = []
    for text, fill, opacity in found:
        r, g, b, a = _rgb(fill)
        out.append((text, (r, g, b, a * float(opacity or 1))))
    return out


def _page_height(page: Page) -> int:
    """Height that shows the whole main area and the whole sidebar without scrolling."""
    return int(
        page.evaluate("""() => {
        const h = s => { const e = document.querySelector(s); return e ? e.scrollHeight : 0; };
        return Math.max(h('[data-testid=stMain]'), h('[data-testid=stSidebarContent]'));
    }""")
    )


def _check_page_load(page: Page, url: str) -> None:
    """What any visitor of the page sees on a default load of the default preset."""
    expect(page).to_have_title("Fabric what-if")  # app.py's st.set_page_config
    expect(page).to_have_url(re.compile(rf"{re.escape(url)}\?preset={DEFAULT_PRESET}$"))
    expect(page.locator("[data-testid=stAlert]")).to_have_count(0)  # no error/warning/info
    expect(page.get_by_role("dialog")).to_have_count(0)
    charts = page.locator("[data-testid=stPlotlyChart] .js-plotly-plot")
    if url in N_CHARTS:
        expect(charts).to_have_count(N_CHARTS[url])
    if url in DRAWS_ON_DEMAND:  # nothing to draw before a log or an opened section
        expect(
            page.locator("[data-testid=stExpander]", has_text=DRAWS_ON_DEMAND[url])
        ).to_have_count(1)
    else:
        drawn = charts.count() + page.locator("[data-testid=stMetric]").count()
        assert drawn, "the page drew neither charts nor metrics"


@pytest.mark.parametrize("theme", list(THEMES))
@pytest.mark.parametrize("app_page", PAGES, ids=[Path(p.script).stem for p in PAGES])
def test_page_screenshot(
    page: Page, live_app: str, screenshot_dir: Path, app_page, theme: str
) -> None:
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    page.goto(f"{live_app}{app_page.url}{THEMES[theme]}")
    wait_for_page(page, app_page.title, PAGE_TIMEOUT_MS)

    expect(page.locator("[data-testid=stException]")).to_have_count(0)
    expect(page.locator("[data-testid=stAlertContentError]")).to_have_count(0)
    if theme == "light":  # the plain page load
        _check_page_load(page, app_page.url)

    # the theme took: a dark page background in dark theme, a light one in light theme
    background = _rgb(
        page.locator("[data-testid=stApp]").evaluate("e => getComputedStyle(e).backgroundColor")
    )
    assert (_luminance(background) < 0.2) == (theme == "dark"), (theme, background)

    # chart titles, axis labels and legends are legible on that background
    unreadable = [
        (text, fill)
        for text, fill in _chart_text_colours(page)
        if _contrast(fill, background) < MIN_CONTRAST
    ]
    assert not unreadable, (
        f"chart text with contrast < {MIN_CONTRAST} on the {theme} "
        f"background {background}: {unreadable[:8]}"
    )

    height = min(MAX_HEIGHT, max(1000, _page_height(page) + 40))
    page.set_viewport_size({"width": WIDTH, "height": height})
    page.wait_for_selector(IDLE)
    main = page.locator("[data-testid=stMain]")
    expect(main.locator("[data-testid=stPlotlyChart]:not(:has(.main-svg))")).to_have_count(0)
    shot = screenshot_dir / f"{Path(app_page.script).stem}-{theme}.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
