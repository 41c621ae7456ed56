"""AppTest of the Topology and Cost pages on the hybrid preset (two partitions, shared core).

The Topology page draws both partitions under the shared core tier; the Cost page compares the
hybrid with one fat-tree of the same size and vendor. Expected numbers come from the model.
"""

from __future__ import annotations

import pytest

from fabric_model.plant.cost import compare_with_fat_tree
from fabric_model.plant.design import build_topology
from fabric_model.presets import load_preset
from fabric_model.scenario import apply_overrides
from tests.apptest_helpers import assert_no_exception, figure, messages, open_page

pytestmark = pytest.mark.app

PRESET = "hybrid-32k"


def test_topology_page_draws_both_partitions_and_the_shared_tier() -> None:
    at = open_page("pages/topology.py", preset=PRESET)
    topo = build_topology(load_preset(PRESET))
    fig = figure(at)
    title = fig["layout"]["title"]["text"]
    assert title.startswith("Hybrid") and f"{topo.n_switches:,} switches" in title
    texts = [a.get("text", "") for a in fig["layout"].get("annotations", [])]
    texts += [t for tr in fig["data"] for t in (tr.get("text") or []) if isinstance(t, str)]
    joined = " ".join(texts)
    assert "partition A" in joined and "partition B" in joined and "shared core" in joined
    # the design follows the URL: a thinner shared tier has fewer shared cores
    at = open_page("pages/topology.py", preset=PRESET, **{"hybrid.shared_oversubscription": "14"})
    thin = build_topology(
        apply_overrides(load_preset(PRESET), {"hybrid.shared_oversubscription": 14})
    )
    assert thin.n_switches < topo.n_switches
    assert f"{thin.n_switches:,} switches" in figure(at)["layout"]["title"]["text"]


def test_cost_page_compares_the_hybrid_with_one_fat_tree() -> None:
    at = open_page("pages/cost.py", preset=PRESET)
    assert "Hybrid against one fat-tree of the same size" in [s.value for s in at.subheader]
    frame = at.dataframe[0].value
    assert list(frame["design"]) == ["hybrid", "single fat-tree"]
    expected = compare_with_fat_tree(load_preset(PRESET))
    assert list(frame["capex_usd"]) == pytest.approx([r["capex_usd"] for r in expected])
    # sidebar change and rerun: a size the partitions no longer fit is one message, no crash
    at.select_slider(key="w:cluster.n_gpus").set_value(16384).run()
    assert_no_exception(at)
    shown = messages([*at.error, *at.warning])
    assert any("hybrid." in m for m in shown), shown
