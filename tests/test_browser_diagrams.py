"""Real-browser checks of the topology diagrams: Chromium (pytest-playwright) against the
session's live ``streamlit run app.py`` (``live_app`` from ``conftest.py``).

For the four designs of the README tour (a 1K fat-tree, a 16K dragonfly+, a 4K torus and a
4.6K NVL72 fat-tree) the Topology page draws the family's diagram, and hovering a bundle
shows its cable count, media and length, as the bill of materials has them.
"""

from __future__ import annotations

import pytest
from conftest import wait_for_page
from playwright.sync_api import Page, expect

from fabric_model.plant.cost import bill_of_materials
from fabric_model.presets import load_preset
from ui.diagrams import cable_info
from ui.theme import TOPOLOGY_LABELS

pytestmark = pytest.mark.e2e

CHART = "[data-testid=stPlotlyChart] .js-plotly-plot"
PAGE_TIMEOUT_MS = 60_000
#: (preset, family) of the README tour's diagrams
TOUR = [
    ("dgx-h100-ib-ndr", "fat-tree"),
    ("dragonfly-plus-16k", "dragonfly-plus"),
    ("torus-3d-4k", "torus-3d"),
    ("gb300-nvl72-xdr", "fat-tree"),
]

#: Move the mouse onto the first point of the diagram's bundle-hover trace ("cables"):
#: plotly's own axes give its pixel position inside the graph div.
_BUNDLE_POINT_JS = """gd => {
  const i = gd.data.findIndex(t => t.name === 'cables');
  const fl = gd._fullLayout, xa = fl.xaxis, ya = fl.yaxis;
  const r = gd.getBoundingClientRect();
  return {traces: gd.data.length,
          x: r.left + xa._offset + xa.l2p(gd.data[i].x[0]),
          y: r.top + ya._offset + ya.l2p(gd.data[i].y[0]),
          text: gd.data[i].hovertext[0]};
}"""


@pytest.mark.parametrize(("preset", "family"), TOUR, ids=[p for p, _ in TOUR])
def test_topology_page_draws_the_family_diagram_with_bundle_hover(
    page: Page, live_app: str, preset: str, family: str
) -> None:
    scenario = load_preset(preset)
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    page.goto(f"{live_app}/topology?preset={preset}")
    wait_for_page(page, "Topology", PAGE_TIMEOUT_MS)
    expect(page.locator("[data-testid=stException]")).to_have_count(0)
    chart = page.locator(CHART).first
    title = chart.locator(".gtitle")
    expect(title).to_contain_text(TOPOLOGY_LABELS[family])
    expect(title).to_contain_text(f"{scenario.cluster.n_gpus:,} GPUs")
    # boxes and bundles are drawn as SVG paths, a bounded number of traces
    assert chart.locator(".scatterlayer .trace").count() >= 5
    point = chart.evaluate(_BUNDLE_POINT_JS)
    assert point["traces"] <= 40
    page.mouse.move(point["x"], point["y"])
    hover = chart.locator(".hoverlayer .hovertext")
    expect(hover).to_contain_text(" cables (")
    expect(hover).to_contain_text("media:")
    # the hover carries the BOM's media and length for that bundle's link class
    link_class = point["text"].split(" cables (")[1].split(")")[0]
    info = cable_info(bill_of_materials(scenario))[link_class]
    expect(hover).to_contain_text(f"length: {info.length_m:g} m")
