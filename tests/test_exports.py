"""Chart exports (``ui.exports``): PNG, SVG and standalone HTML bytes, file names, and the
page helper's buttons with and without a browser.

PNG/SVG render in a real headless Chromium through kaleido; without one they are skipped
locally and fail in CI (as the browser tests do).
"""

from __future__ import annotations

import re
import struct
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from html.parser import HTMLParser

import plotly.graph_objects as go
import pytest
from conftest import in_ci
from streamlit.testing.v1 import AppTest

from fabric_model.plant.design import build_topology
from fabric_model.presets import DEFAULT_PRESET, load_preset
from tests.apptest_helpers import open_page
from ui import exports
from ui.topology_figures import topology_figure
from ui.widgets import export_key

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SVG_NS = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module", autouse=True)
def _stop_export_browser() -> Iterator[None]:
    yield
    exports.shutdown_renderer()


@pytest.fixture
def needs_browser() -> None:
    if not exports.static_export_available():
        message = "no Chromium for kaleido (apt-get install chromium, or set CHROME_PATH)"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def small_figure(**layout: object) -> go.Figure:
    fig = go.Figure(
        go.Bar(
            x=["InfiniBand", "Spectrum-X", "RoCE"], y=[6.51, 5.93, 4.87], name="capex-marker-7319"
        )
    )
    fig.update_layout(title="Network capex (million USD)", **layout)
    return fig


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


# --------------------------------------------------------------------------------------
# names and sizes
# --------------------------------------------------------------------------------------


def test_export_file_name() -> None:
    assert (
        exports.export_file_name("collectives busbw", "dgx-h100-ib-ndr", "png")
        == "collectives-busbw_dgx-h100-ib-ndr.png"
    )
    assert exports.export_file_name("Cost: capex / GPU", None, ".svg") == "cost-capex-gpu.svg"
    assert exports.export_file_name("", "meta-24k-roce", "html") == "chart_meta-24k-roce.html"


def test_export_size_follows_the_figure() -> None:
    assert exports.export_size(small_figure(width=640, height=360)) == (640, 360)
    assert exports.export_size(small_figure(height=420)) == (exports.DEFAULT_EXPORT_WIDTH_PX, 420)


# --------------------------------------------------------------------------------------
# PNG and SVG (real Chromium)
# --------------------------------------------------------------------------------------


@pytest.mark.usefixtures("needs_browser")
def test_png_has_the_signature_and_the_figures_size() -> None:
    data = exports.figure_png(small_figure(width=640, height=360))
    assert png_size(data) == (640 * exports.PNG_SCALE, 360 * exports.PNG_SCALE)
    assert len(data) > 5_000  # bars, title and axes, not a blank image
    assert png_size(exports.figure_png(small_figure(width=640, height=360), scale=1)) == (640, 360)
    # stretched figures (no layout.width) export at the default width
    assert png_size(exports.figure_png(small_figure(height=300), scale=1)) == (
        exports.DEFAULT_EXPORT_WIDTH_PX,
        300,
    )


@pytest.mark.usefixtures("needs_browser")
def test_svg_parses_with_an_svg_root_of_the_figures_size() -> None:
    data = exports.figure_svg(small_figure(width=640, height=360))
    root = ET.fromstring(data)
    assert root.tag == SVG_NS + "svg"
    assert (float(root.get("width", 0)), float(root.get("height", 0))) == (640, 360)
    text = data.decode("utf-8")
    assert "Network capex (million USD)" in text
    assert "Spectrum-X" in text


@pytest.mark.usefixtures("needs_browser")
def test_webgl_traces_export_as_vectors() -> None:
    # the topology diagram draws its cables with scattergl; headless Chromium has no GPU,
    # so they are exported as SVG scatter: paths in the SVG, not an embedded bitmap
    topo = build_topology(load_preset(DEFAULT_PRESET))
    fig = topology_figure(topo)
    assert any(trace.type == "scattergl" for trace in fig.data)
    svg = exports.figure_svg(fig)
    root = ET.fromstring(svg)
    assert root.tag == SVG_NS + "svg"
    assert not list(root.iter(SVG_NS + "image"))
    assert len(list(root.iter(SVG_NS + "path"))) > 10
    assert f"{topo.n_switches:,} switches" in svg.decode("utf-8")
    png = exports.figure_png(fig)
    width, height = exports.export_size(fig)
    assert png_size(png) == (width * exports.PNG_SCALE, height * exports.PNG_SCALE)
    assert len(png) > 50_000
    assert fig.data[0].type == "scattergl"  # the page's figure itself is left as it was


@pytest.mark.usefixtures("needs_browser")
def test_concurrent_exports_each_get_their_own_image() -> None:
    # Streamlit runs each deferred download in its own worker thread
    sizes = [(400 + 40 * i, 300) for i in range(4)]
    results: dict[int, bytes] = {}

    def work(i: int) -> None:
        results[i] = exports.figure_png(small_figure(width=sizes[i][0], height=300), scale=1)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(sizes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert {i: png_size(results[i]) for i in results} == dict(enumerate(sizes))


# --------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------


class _Scripts(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.srcs: list[str] = []
        self.links: list[str] = []
        self.n_scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "script":
            self.n_scripts += 1
            if values.get("src"):
                self.srcs.append(values["src"] or "")
        if tag == "link" and values.get("href"):
            self.links.append(values["href"] or "")


def test_html_is_standalone_with_the_figures_data() -> None:
    html = exports.figure_html(small_figure()).decode("utf-8")
    assert re.match(r"\s*(<!doctype html>\s*)?<html", html, re.IGNORECASE)
    # the figure's data ...
    assert "capex-marker-7319" in html
    assert "Network capex (million USD)" in html
    assert re.search(r"6\.51\b", html)
    # ... and plotly.js itself, inlined
    assert "Plotly.newPlot" in html
    assert re.search(r"plotly\.js v\d+\.\d+\.\d+", html), "plotly.js bundle not inlined"
    assert len(html) > 1_000_000
    # nothing is loaded from the network
    parser = _Scripts()
    parser.feed(html)
    assert parser.n_scripts >= 2
    assert parser.srcs == [], parser.srcs
    assert not [h for h in parser.links if h.startswith(("http:", "https:", "//"))]


# --------------------------------------------------------------------------------------
# the page helper's buttons, with and without a browser
# --------------------------------------------------------------------------------------


def _export_buttons(at: AppTest, chart_key: str) -> list[str]:
    keys = {export_key(chart_key, fmt): fmt for fmt in ("png", "svg", "html")}
    return [keys[b.key] for b in at.get("download_button") if b.key in keys]


@pytest.mark.app
@pytest.mark.parametrize("browser", [True, False])
def test_chart_helper_offers_png_and_svg_only_with_a_browser(
    monkeypatch: pytest.MonkeyPatch, browser: bool
) -> None:
    if browser and not exports.static_export_available():
        pytest.skip("no Chromium")
    if not browser:
        monkeypatch.setenv("CHROME_PATH", "/nonexistent/chromium")
    at = open_page("pages/topology.py")
    expected = ["png", "svg", "html"] if browser else ["html"]
    assert _export_buttons(at, "topology_diagram") == expected
    assert _export_buttons(at, "hop_histogram") == expected
    notes = [c.value for c in at.caption if "need Chromium" in c.value]
    assert len(notes) == (0 if browser else 2), notes
