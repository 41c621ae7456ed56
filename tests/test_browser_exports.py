"""Real-browser tests of exports and scenario files: Chromium (pytest-playwright) against a
live ``streamlit run app.py``.

Chart downloads (PNG and SVG rendered on the server by kaleido, standalone HTML), a table's
CSV, and the sidebar's scenario uploader (a good file moves the widgets and the URL, a bad
one shows an error and the page keeps working). Waits are on concrete selectors and text.
"""

from __future__ import annotations

import csv
import io
import re
import struct
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import app_pages, wait_for_page
from playwright.sync_api import Download, Locator, Page, expect

from fabric_model.plant.cost import compare_vendors
from fabric_model.plant.design import build_topology
from fabric_model.presets import DEFAULT_PRESET, load_preset
from fabric_model.scenario import apply_overrides
from ui.exports import PNG_SCALE
from ui.widgets import export_key

pytestmark = pytest.mark.e2e

PAGES = {p.url: p for p in app_pages()}
CHART = "[data-testid=stPlotlyChart] .js-plotly-plot"
IDLE = "[data-testid=stApp][data-test-script-state=notRunning]"
PAGE_TIMEOUT_MS = 60_000
#: the first PNG of a server process starts its export Chromium (seconds on two busy cores)
EXPORT_TIMEOUT_MS = 90_000
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SVG_ROOT = "{http://www.w3.org/2000/svg}svg"

expect.set_options(timeout=30_000)


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def open_page(page: Page, base: str, url: str) -> Page:
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    page.goto(base + url)
    wait_for_page(page, PAGES[urlsplit(url).path].title, PAGE_TIMEOUT_MS)
    return page


def query(url: str) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlsplit(url).query).items()}


def gpu_slider(page: Page) -> Locator:
    return page.get_by_role("slider", name=re.compile(r"^GPUs( GPUs)?$"))


def export_button(page: Page, chart_key: str, fmt: str) -> Locator:
    # Streamlit gives a keyed element the class st-key-<key>; the container also holds a
    # hidden copy of the button (for layout), which the accessibility tree leaves out
    return page.locator(f".st-key-{export_key(chart_key, fmt)}").get_by_role(
        "button", name=fmt.upper(), exact=True
    )


def download(page: Page, button: Locator, timeout_ms: float = PAGE_TIMEOUT_MS) -> Download:
    page.wait_for_selector(IDLE)
    with page.expect_download(timeout=timeout_ms) as info:
        button.click()
    return info.value


def check_png(dl: Download, file_name: str) -> tuple[int, int]:
    assert dl.suggested_filename == file_name
    data = Path(dl.path()).read_bytes()
    assert data[:8] == PNG_SIGNATURE, data[:16]
    assert len(data) > 10_000, len(data)  # a drawn chart, not an empty canvas
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def check_svg(dl: Download, file_name: str) -> str:
    assert dl.suggested_filename == file_name
    data = Path(dl.path()).read_bytes()
    assert ET.fromstring(data).tag == SVG_ROOT
    return data.decode("utf-8")


def check_html(dl: Download, file_name: str) -> str:
    assert dl.suggested_filename == file_name
    html = Path(dl.path()).read_text(encoding="utf-8")
    assert "Plotly.newPlot" in html  # the figure's data, drawn by ...
    assert re.search(r"plotly\.js v\d+\.\d+\.\d+", html)  # ... plotly.js inlined
    assert not re.search(r"<script[^>]*\bsrc=", html), "HTML must not load scripts"
    return html


def upload_scenario(page: Page, name: str, content: str) -> None:
    page.wait_for_selector(IDLE)
    uploader = page.locator("[data-testid=stSidebar] [data-testid=stFileUploader]").filter(
        has_text="Load scenario (YAML/JSON)"
    )
    uploader.locator("input[type=file]").set_input_files(
        files=[{"name": name, "mimeType": "application/x-yaml", "buffer": content.encode()}]
    )


# --------------------------------------------------------------------------------------
# chart exports
# --------------------------------------------------------------------------------------


def test_topology_chart_downloads_png_svg_html(page: Page, live_app: str) -> None:
    open_page(page, live_app, "/topology")
    topo = build_topology(load_preset(DEFAULT_PRESET))
    title = f"{topo.n_gpus:,} GPUs, {topo.n_switches:,} switches"
    stem = f"topology-diagram_{DEFAULT_PRESET}"

    png = download(page, export_button(page, "topology_diagram", "png"), EXPORT_TIMEOUT_MS)
    width, height = check_png(png, f"{stem}.png")
    assert width >= 800 * PNG_SCALE and height >= 300 * PNG_SCALE, (width, height)

    svg = check_svg(
        download(page, export_button(page, "topology_diagram", "svg"), EXPORT_TIMEOUT_MS),
        f"{stem}.svg",
    )
    assert title in svg

    html = check_html(
        download(page, export_button(page, "topology_diagram", "html")), f"{stem}.html"
    )
    assert title in html

    # the second chart of the page has its own buttons and names
    hops = download(page, export_button(page, "hop_histogram", "png"), EXPORT_TIMEOUT_MS)
    check_png(hops, f"topology-hops_{DEFAULT_PRESET}.png")
    expect(page.locator("[data-testid=stException]")).to_have_count(0)


def test_cost_chart_downloads_follow_the_preset(page: Page, live_app: str) -> None:
    open_page(page, live_app, "/cost?preset=meta-24k-roce")
    expect(page.locator(CHART)).to_have_count(3)
    stem = "cost-capex_meta-24k-roce"

    width, height = check_png(
        download(page, export_button(page, "capex_chart", "png"), EXPORT_TIMEOUT_MS), f"{stem}.png"
    )
    assert (width, height) == (1100 * PNG_SCALE, 420 * PNG_SCALE)  # default width, figure height
    svg = check_svg(
        download(page, export_button(page, "capex_chart", "svg"), EXPORT_TIMEOUT_MS), f"{stem}.svg"
    )
    html = check_html(download(page, export_button(page, "capex_chart", "html")), f"{stem}.html")
    for vendor in ("InfiniBand", "Spectrum-X"):
        assert vendor in svg and vendor in html


def test_overview_table_csv_and_chart_html(page: Page, live_app: str) -> None:
    open_page(page, live_app, "/")
    dl = download(page, page.get_by_role("button", name="Download comparison (CSV)"))
    assert dl.suggested_filename == f"overview-vendor-comparison_{DEFAULT_PRESET}.csv"
    rows = list(csv.DictReader(io.StringIO(Path(dl.path()).read_text(encoding="utf-8"))))
    assert [r["vendor"] for r in rows] == ["InfiniBand", "Spectrum-X", "RoCE (ECMP)"]
    model = {c.vendor: c.bom for c in compare_vendors(load_preset(DEFAULT_PRESET))}
    assert [int(r["capex_usd"]) for r in rows] == [
        round(model[v].capex_usd) for v in ("infiniband", "spectrum-x", "roce")
    ]

    html = check_html(
        download(page, export_button(page, "overview_busbw", "html")),
        f"overview-allreduce-busbw_{DEFAULT_PRESET}.html",
    )
    assert "All-reduce across 1,024 GPUs" in html


# --------------------------------------------------------------------------------------
# scenario files
# --------------------------------------------------------------------------------------


def test_upload_scenario_moves_the_slider_and_the_url(page: Page, live_app: str) -> None:
    open_page(page, live_app, "/topology")
    expect(gpu_slider(page)).to_have_attribute("aria-valuetext", "1,024")
    upload_scenario(page, "big.yaml", "cluster: {n_gpus: 4096}\nfabric: {routing: ecmp}\n")

    expect(gpu_slider(page)).to_have_attribute("aria-valuetext", "4,096")
    expect(page).to_have_url(re.compile(r"cluster\.n_gpus=4096"))
    n = build_topology(
        apply_overrides(load_preset(DEFAULT_PRESET), {"cluster.n_gpus": 4096})
    ).n_switches
    expect(page.locator(CHART + " .gtitle").first).to_contain_text(f"4,096 GPUs, {n:,} switches")
    assert query(page.url) == {
        "preset": DEFAULT_PRESET,
        "cluster.n_gpus": "4096",
        "fabric.routing": "ecmp",
    }
    expect(page.locator("[data-testid=stSidebar]")).to_contain_text("Loaded big.yaml")
    expect(page.locator("[data-testid=stAlert]")).to_have_count(0)


def test_malformed_scenario_shows_an_error_and_the_page_works(page: Page, live_app: str) -> None:
    open_page(page, live_app, "/topology")
    upload_scenario(page, "broken.yaml", "fabric: {link_gbps: 300\ncluster: [\n")
    alert = page.locator("[data-testid=stSidebar] [data-testid=stAlert]")
    expect(alert).to_have_count(1)
    expect(alert).to_contain_text("Could not load broken.yaml")
    expect(alert).to_contain_text("malformed YAML/JSON")
    expect(alert).to_contain_text("unchanged")
    expect(gpu_slider(page)).to_have_attribute("aria-valuetext", "1,024")
    assert query(page.url) == {"preset": DEFAULT_PRESET}

    upload_scenario(page, "range.yaml", "fabric: {link_gbps: 300}\n")
    expect(alert).to_contain_text("fabric.link_gbps")
    expect(alert).to_contain_text("one of 100, 200, 400, 800, 1600")

    # still working: the slider redraws the diagram, and the message goes away
    page.wait_for_selector(IDLE)
    slider = gpu_slider(page)
    slider.focus()
    slider.press("ArrowRight")
    expect(page.locator(CHART + " .gtitle").first).to_contain_text("2,048 GPUs")
    expect(page).to_have_url(re.compile(r"cluster\.n_gpus=2048"))
    expect(alert).to_have_count(0)
    expect(page.locator("[data-testid=stException]")).to_have_count(0)
