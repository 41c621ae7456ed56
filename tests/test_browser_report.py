"""Real-browser test of the sidebar's "Download report (HTML)" button: Chromium
(pytest-playwright) against a live ``streamlit run app.py``.

The button builds the report only when clicked; the downloaded file is the report of the
sidebar's scenario (title, the model's numbers, every chart's data), and opened from disk
with the browser offline it draws every chart and requests nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import app_pages, wait_for_page
from markupsafe import escape
from playwright.sync_api import Page, expect

from fabric_model.plant.cost import bill_of_materials
from fabric_model.presets import DEFAULT_PRESET, load_preset
from fabric_model.scenario import apply_overrides, dump_scenario
from fabric_model.training import training_step
from ui.report import SECTIONS
from ui.report_button import REPORT_BUTTON_KEY, report_file_name

pytestmark = pytest.mark.e2e

PAGES = {p.url: p for p in app_pages()}
IDLE = "[data-testid=stApp][data-test-script-state=notRunning]"
PAGE_TIMEOUT_MS = 60_000
#: the click builds the whole report on the server (seconds on two busy cores)
REPORT_TIMEOUT_MS = 120_000
CHARTS = ("step", "busbw", "scaling-eff", "scaling-mfu", "capex", "power", "topology")

expect.set_options(timeout=30_000)


def download_report(page: Page, base: str, url: str, title: str) -> tuple[str, str]:
    """Open ``url``, click the sidebar's report button; return (file name, document)."""
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    page.goto(base + url)
    wait_for_page(page, title, PAGE_TIMEOUT_MS)
    button = page.locator(f".st-key-{REPORT_BUTTON_KEY}").get_by_role(
        "button", name="Download report (HTML)"
    )
    expect(button).to_be_enabled()
    page.wait_for_selector(IDLE)
    with page.expect_download(timeout=REPORT_TIMEOUT_MS) as info:
        button.click()
    dl = info.value
    return dl.suggested_filename, Path(dl.path()).read_text(encoding="utf-8")


def test_sidebar_report_download_is_the_report(page: Page, live_app: str, tmp_path: Path) -> None:
    default = next(p for p in app_pages() if p.url == "/")
    name, doc = download_report(page, live_app, "/", default.title)

    scenario = load_preset(DEFAULT_PRESET)
    assert name == report_file_name(DEFAULT_PRESET) == f"report_{DEFAULT_PRESET}.html"
    assert f"<title>Fabric report: {DEFAULT_PRESET}</title>" in doc
    assert f"Fabric what-if report: {DEFAULT_PRESET}" in doc
    for _, heading in SECTIONS:
        assert f">{escape(heading)}</h2>" in doc
    assert f"{training_step(scenario).step_time_s:,.2f} s" in doc
    assert f"${bill_of_materials(scenario).capex_usd:,.0f}" in doc
    # every chart's data, drawn by the plotly.js inlined once
    assert doc.count("Plotly.newPlot(") == len(CHARTS)
    for chart in CHARTS:
        assert f'id="fig-{chart}"' in doc
    assert len(re.findall(r"plotly\.js v\d+\.\d+\.\d+", doc)) == 1
    assert not re.search(r"<script[^>]*\bsrc=", doc)
    expect(page.locator("[data-testid=stException]")).to_have_count(0)

    # opened from disk with the network off, the report draws every chart and fetches nothing
    copy = tmp_path / name
    copy.write_text(doc, encoding="utf-8")
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.context.set_offline(True)
    try:
        page.goto(copy.as_uri())
        for chart in CHARTS:
            expect(page.locator(f"#fig-{chart} .main-svg").first).to_be_attached()
        expect(page.locator("#fig-busbw .gtitle")).to_contain_text("All-reduce across 1,024 GPUs")
        expect(page.locator("h1")).to_have_text(f"Fabric what-if report: {DEFAULT_PRESET}")
    finally:
        page.context.set_offline(False)
    assert requests == [copy.as_uri()], requests


def test_report_follows_the_sidebar_scenario(page: Page, live_app: str) -> None:
    url = "/cost?preset=gb300-nvl72-xdr&cluster.n_gpus=2304"
    name, doc = download_report(page, live_app, url, PAGES["/cost"].title)

    scenario = apply_overrides(load_preset("gb300-nvl72-xdr"), {"cluster.n_gpus": 2304})
    assert name == "report_gb300-nvl72-xdr.html"
    assert "Fabric what-if report: gb300-nvl72-xdr" in doc
    assert escape(dump_scenario(scenario)) in doc
    assert f"{training_step(scenario).step_time_s:,.2f} s" in doc
    assert f"${bill_of_materials(scenario).capex_usd:,.0f}" in doc


# --------------------------------------------------------------------------------------
# layout: every chart sized by its container, no two charts on top of each other
# --------------------------------------------------------------------------------------

#: Each plot's outer box and its drawn SVG, and the box of the figure that holds it.
_BOXES_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(el => {
  const box = r => ({left: r.left, right: r.right, top: r.top, bottom: r.bottom});
  return {id: el.id, plot: box(el.getBoundingClientRect()),
          svg: box(el.querySelector('.main-svg').getBoundingClientRect()),
          holder: box(el.closest('figure').getBoundingClientRect())};
})"""


def _intersect(a: dict, b: dict) -> bool:
    """Whether two boxes share area (touching edges do not count)."""
    return min(a["right"], b["right"]) - max(a["left"], b["left"]) > 0.5 and (
        min(a["bottom"], b["bottom"]) - max(a["top"], b["top"]) > 0.5
    )


@pytest.fixture(scope="module")
def report_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ui.report import build_report

    path = tmp_path_factory.mktemp("report") / "report.html"
    path.write_text(build_report(load_preset(DEFAULT_PRESET)), encoding="utf-8")
    return path


def _assert_no_overlap(page: Page, where: str) -> None:
    boxes = page.evaluate(_BOXES_JS)
    assert [b["id"] for b in boxes] == [f"fig-{c}" for c in CHARTS], where
    for b in boxes:  # the drawing fits its column: a wider SVG spills over its neighbour
        assert b["svg"]["right"] <= b["holder"]["right"] + 1, (where, b)
        assert b["svg"]["left"] >= b["holder"]["left"] - 1, (where, b)
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            for ka in ("plot", "svg"):
                for kb in ("plot", "svg"):
                    assert not _intersect(a[ka], b[kb]), (where, a["id"], b["id"], ka, kb)


@pytest.mark.parametrize("width", [800, 1200, 2000])
def test_report_charts_never_overlap(page: Page, report_file: Path, width: int) -> None:
    """At 800, 1,200 and 2,000 px (the side-by-side pairs stack below 900 px) and in print,
    each chart is drawn at its own column's width, and no two plot boxes intersect."""
    page.set_viewport_size({"width": width, "height": 1000})
    page.goto(report_file.as_uri())
    for chart in CHARTS:
        expect(page.locator(f"#fig-{chart} .main-svg").first).to_be_attached()
    page.wait_for_load_state("load")
    _assert_no_overlap(page, f"{width} px")
    pair = page.evaluate(
        "() => ['fig-scaling-eff', 'fig-scaling-mfu'].map("
        "id => document.getElementById(id).getBoundingClientRect().top)"
    )
    assert (pair[0] == pair[1]) == (width > 900), pair  # side by side only where they fit
    page.emulate_media(media="print")
    page.wait_for_function(  # the print layout stacks the pairs; the charts follow it
        "() => { const a = document.querySelector('#fig-scaling-eff .main-svg');"
        " return a.getBoundingClientRect().width >="
        " document.querySelector('#fig-scaling-eff').getBoundingClientRect().width - 1; }"
    )
    _assert_no_overlap(page, f"{width} px, print")
