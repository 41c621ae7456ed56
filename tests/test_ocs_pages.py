"""AppTest of the pages an OCS fabric changes: Topology (its diagram), Cost and Explore.

The Topology page draws blocks, the OCS tier and the circuits; the Cost page shows the OCS
design's circuits, optics and availability and, on its toggle, the same GPUs as a fat-tree,
a rail-only fabric and the OCS side by side (the Explore page has the same toggle); the
sidebar's OCS section changes the circuits. Small designs (64 GPUs) keep them quick.
"""

from __future__ import annotations

import pytest

from fabric_model.plant.design import build_topology
from fabric_model.scenario import Scenario, apply_overrides
from tests.apptest_helpers import assert_no_exception, chart_titles, figure, open_page

pytestmark = pytest.mark.app

OCS = {"fabric.topology": "ocs", "cluster.n_gpus": "64"}


def test_topology_page_draws_blocks_and_circuits() -> None:
    at = open_page("pages/topology.py", **OCS, **{"ocs.circuits": "ring"})
    topo = build_topology(
        apply_overrides(Scenario(), {**OCS, "cluster.n_gpus": 64, "ocs.circuits": "ring"})
    )
    fig = figure(at)
    title = fig["layout"]["title"]["text"]
    assert title.startswith("OCS") and "ring circuits" in title
    tiers = next(m.value for m in at.metric if m.label == "Switch tiers")
    assert tiers == "OCS only"  # NVLink blocks on the OCS: no electrical tier, not switchless
    hover = next(t for t in fig["data"] if t.get("name") == "cables")["hovertext"]
    circuits = [h for h in hover if " circuits (circuit)" in h]
    assert sum(int(h.split("<br>")[1].split()[0]) for h in circuits) == topo.params["n_circuits"]
    # the sidebar's OCS section: uniform circuits redraw the chords
    at.selectbox(key="w:ocs.circuits").set_value("uniform").run()
    assert_no_exception(at)
    assert "uniform circuits" in figure(at)["layout"]["title"]["text"]


@pytest.mark.parametrize(
    ("page", "key"), [("pages/cost.py", "cost"), ("pages/explore.py", "explore")]
)
def test_pages_put_ocs_beside_fat_tree_and_rail_only(page: str, key: str) -> None:
    at = open_page(page, **OCS)
    if key == "cost":  # the OCS design's own figures
        rows = list(at.dataframe[0].value["what"])
        assert rows[:2] == ["blocks", "optical circuit switches"] and "availability" in rows
    at.toggle(key=f"{key}_families").set_value(True).run()
    assert_no_exception(at)
    assert "The same GPUs on each fabric, relative to the fat-tree" in chart_titles(at)
    table = next(d.value for d in at.dataframe if "fabric" in d.value.columns)
    assert list(table["fabric"]) == ["Fat-tree", "Rail-only", "OCS (optical circuit switches)"]
