"""Topology diagrams (``ui/diagrams/``): one style per family, readable at any scale.

The invariants: the figure builds for every family at small and large sizes, its title names
the family and the GPU count, the cables of the drawn bundles add up per link class to the
topology's (one plane of a multi-plane fabric), and the number of traces and drawn bundles
stays bounded at 131,072 GPUs (the drawing aggregates instead of growing).
"""

from __future__ import annotations

import dataclasses

import plotly.graph_objects as go
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_model.plant.cost import bill_of_materials
from fabric_model.plant.design import build_topology
from fabric_model.presets import load_preset
from fabric_model.scenario import apply_overrides
from fabric_model.topology import BUILDERS, Topology, TopologyRequest, build_topology_from_request
from ui.diagrams import (
    DIAGRAMS,
    MAX_UNITS,
    cable_info,
    diagram_bundles,
    sketch,
    topology_diagram,
)
from ui.theme import TOPOLOGY_LABELS

#: Most traces a diagram may have, whatever the size (boxes, bundle styles, hovers, legend).
MAX_TRACES = 40
#: Most drawn bundles (lines) of any diagram (the torus draws its 8 x 8 x 8 block lattice).
MAX_DRAWN = 1_300

SMALL = settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def req(n_gpus: int, **kw: object) -> TopologyRequest:
    return TopologyRequest(n_gpus=n_gpus, **kw)  # type: ignore[arg-type]


def build(family: str, n_gpus: int, **kw: object) -> Topology:
    return build_topology_from_request(family, req(n_gpus, **kw))


#: (family, request) pairs at several sizes, from one switch to 131,072 GPUs
CASES = {
    "fat-tree-1-tier": ("fat-tree", {"n_gpus": 32}),
    "fat-tree-1k": ("fat-tree", {"n_gpus": 1024}),
    "fat-tree-1k-tor-2to1": (
        "fat-tree",
        {"n_gpus": 1024, "rail_optimized": False, "oversubscription": 2.0},
    ),
    "fat-tree-16k-3-tiers": ("fat-tree", {"n_gpus": 16384}),
    "fat-tree-131k": ("fat-tree", {"n_gpus": 131072, "radix": 128}),
    "fat-tree-nvl72": (
        "fat-tree",
        {"n_gpus": 4608, "gpus_per_node": 4, "nvlink_domain": 72, "radix": 144},
    ),
    "rail-only-1k": ("rail-only", {"n_gpus": 1024}),
    "rail-only-131k": ("rail-only", {"n_gpus": 131072}),
    "rail-only-nvl72": (
        "rail-only",
        {"n_gpus": 4608, "gpus_per_node": 4, "nvlink_domain": 72, "radix": 144},
    ),
    "dragonfly-plus-2k": ("dragonfly-plus", {"n_gpus": 2048}),
    "dragonfly-plus-16k": ("dragonfly-plus", {"n_gpus": 16384}),
    "dragonfly-plus-131k": ("dragonfly-plus", {"n_gpus": 131072}),
    "torus-64": ("torus-3d", {"n_gpus": 64}),
    "torus-4k": ("torus-3d", {"n_gpus": 4096}),
    "torus-131k": ("torus-3d", {"n_gpus": 131072}),
    "hypercube-64": ("hypercube", {"n_gpus": 64}),
    "hypercube-131k": ("hypercube", {"n_gpus": 131072, "nics_per_gpu": 2}),
}


def bundle_sums(topo: Topology) -> dict[str, int]:
    frame = diagram_bundles(topo)
    return {str(k): int(v) for k, v in frame.groupby("link_class")["n_cables"].sum().items()}


def one_plane(topo: Topology) -> dict[str, int]:
    return {name: n // topo.planes for name, n in topo.links_by_class.items() if n}


def n_drawn(topo: Topology) -> int:
    return int(diagram_bundles(topo)["drawn"].sum())


def test_every_family_has_a_style() -> None:
    assert set(DIAGRAMS) == set(BUILDERS)


@pytest.mark.parametrize("case", list(CASES))
def test_figure_builds_names_the_family_and_keeps_every_cable(case: str) -> None:
    family, kw = CASES[case]
    topo = build(family, **kw)  # type: ignore[arg-type]
    fig = topology_diagram(topo)
    assert isinstance(fig, go.Figure)
    title = fig.layout.title.text
    assert title.startswith(TOPOLOGY_LABELS[family])
    assert f"{topo.n_gpus:,} GPUs" in title
    assert f"{topo.n_switches:,} switch" in title
    assert f"{topo.n_links:,} cables" in title
    assert bundle_sums(topo) == one_plane(topo)
    assert len(fig.data) <= MAX_TRACES
    assert n_drawn(topo) <= MAX_DRAWN
    # every drawn bundle has a hover with its count
    hover = next(t for t in fig.data if t.name == "cables")
    assert len(hover.hovertext) == n_drawn(topo)
    assert all(" cables (" in h for h in hover.hovertext)


@pytest.mark.parametrize(
    "case", ["fat-tree-131k", "rail-only-131k", "dragonfly-plus-131k", "torus-131k"]
)
def test_at_131072_gpus_the_drawing_aggregates(case: str) -> None:
    family, kw = CASES[case]
    topo = build(family, **kw)  # type: ignore[arg-type]
    s = sketch(topo)
    # merged units say how many they stand for
    merged = [b.text for b in s.boxes if "(x" in b.text] + [m.hover for m in s.marks]
    assert any("x" in t for t in merged) or "block" in s.subtitle
    assert len(topology_diagram(topo).data) <= MAX_TRACES


def test_fat_tree_1k_shows_four_scalable_units_and_the_rails() -> None:
    topo = build("fat-tree", 1024)
    s = sketch(topo)
    frames = [b for b in s.boxes if b.text.startswith("SU ")]
    assert [b.text for b in frames] == ["SU 0", "SU 1", "SU 2", "SU 3"]
    assert [name for name, _ in s.legend] == [f"rail {r}" for r in range(8)]
    bundles = diagram_bundles(topo)
    up = bundles[bundles.link_class == "leaf-spine"]
    # every SU reaches every one of the 16 spines with 8 leaves x 2 cables
    assert len(up) == 4 * 16 and set(up.n_cables) == {16}
    nic = bundles[bundles.link_class == "nic-leaf"]
    assert len(nic) == 4 * 8 and set(nic.n_cables) == {32}  # one bundle per SU and rail
    fig = topology_diagram(topo)
    assert "spine" in fig.layout.yaxis.ticktext and "core" not in fig.layout.yaxis.ticktext
    # 64 equal bundles get one summary label instead of 64 numbers
    notes = [a.text.replace("<br>", " ") for a in fig.layout.annotations]
    assert any("64 bundles x 16 cables" in t for t in notes)


def test_three_tiers_draw_pods_and_a_core_row() -> None:
    topo = build("fat-tree", 16384)
    assert topo.tiers == 3
    s = sketch(topo)
    assert "pods of" in s.subtitle
    assert "core" in topology_diagram(topo).layout.yaxis.ticktext
    inside = diagram_bundles(topo)
    pods = int(topo.params["n_pods"])
    assert len(inside[inside.link_class == "leaf-spine"]) == min(pods, MAX_UNITS)


def test_nvl72_racks_are_drawn_as_racks_of_trays() -> None:
    topo = build("fat-tree", 4608, gpus_per_node=4, nvlink_domain=72, radix=144)
    s = sketch(topo)
    racks = [b for b in s.boxes if b.stripes]
    assert racks and all(b.stripes == 18 for b in racks)
    assert len(racks) == 64  # 16 scalable units of 4 racks
    assert "NVLink racks of 18 trays" in s.subtitle
    assert "racks" in s.rows.values()


def test_rail_only_draws_each_rail_as_its_own_tree() -> None:
    topo = build("rail-only", 1024)
    s = sketch(topo)
    rails = [b for b in s.boxes if b.text.startswith("rail ")]
    assert len(rails) == 8
    bundles = diagram_bundles(topo)
    inside = bundles[bundles.link_class == "leaf-spine"]
    assert len(inside) == 8 and set(inside.a.str.replace(" leaves", "")) == {
        f"rail {r}" for r in range(8)
    }


def test_dragonfly_plus_one_chord_per_group_pair() -> None:
    topo = build("dragonfly-plus", 16384)
    g = int(topo.params["n_groups"])
    bundles = diagram_bundles(topo)
    chords = bundles[(bundles.link_class == "global") & (bundles.a != bundles.b)]
    assert len(chords) == g * (g - 1) // 2
    assert set(chords.n_cables) == {int(topo.params["global_links_per_group_pair"])}
    assert sketch(topo).equal_aspect  # a circle stays a circle


def test_torus_slices_and_wraparound() -> None:
    topo = build("torus-3d", 4096)  # 8 x 8 x 8 domains of 8 GPUs
    s = sketch(topo)
    slices = [b for b in s.boxes if b.text.startswith("z = ")]
    assert len(slices) == 8
    wraps = [b for b in s.bundles if b.dash == "dot"]
    # x and y wrap in every row/column of every slice, z wraps once
    assert len(wraps) == 8 * 8 + 8 * 8 + 1
    assert "wrap" in s.subtitle


def test_hypercube_aggregates_sub_cubes() -> None:
    topo = build("hypercube", 131072, nics_per_gpu=2)
    s = sketch(topo)
    assert len(s.marks) == 16
    drawn = [b for b in s.bundles if b.xs]
    assert len(drawn) == 32  # the edges of a 4-cube
    assert "sub-cubes" in s.subtitle


def test_planes_draw_one_plane_and_say_so() -> None:
    topo = build("fat-tree", 8192, link_gbps=100, radix=512, planes=8)
    assert topo.planes == 8
    fig = topology_diagram(topo)
    assert "plane 1 of 8 (all 8 identical)" in fig.layout.title.text
    assert bundle_sums(topo) == one_plane(topo)
    hover = next(t for t in fig.data if t.name == "cables").hovertext
    assert all("over the 8 planes" in h for h in hover)


def test_hover_gives_the_boms_media_and_length() -> None:
    scenario = load_preset("dgx-h100-ib-ndr")
    bom = bill_of_materials(scenario)
    cables = cable_info(bom)
    assert set(cables) == set(bom.topology.links_by_class)
    fig = topology_diagram(build_topology(scenario), cables)
    hover = next(t for t in fig.data if t.name == "cables").hovertext
    for name, info in cables.items():
        mine = [h for h in hover if f"({name})" in h]
        assert mine and all(info.media in h and f"{info.length_m:g} m" in h for h in mine)
    # the BOM's link classes add up to the drawn bundles
    assert sum(bundle_sums(bom.topology).values()) == bom.topology.n_links


@SMALL
@given(
    nodes=st.integers(1, 2048),
    rail=st.booleans(),
    oversub=st.sampled_from([1.0, 2.0, 3.0]),
)
def test_fat_tree_bundles_add_up_at_any_size(nodes: int, rail: bool, oversub: float) -> None:
    topo = build("fat-tree", nodes * 8, rail_optimized=rail, oversubscription=oversub)
    assert bundle_sums(topo) == one_plane(topo)
    assert len(topology_diagram(topo).data) <= MAX_TRACES


@SMALL
@given(nodes=st.integers(2, 2048), domain=st.sampled_from([8, 72]))
def test_rail_only_and_dragonfly_bundles_add_up_at_any_size(nodes: int, domain: int) -> None:
    gpn = 8 if domain == 8 else 4
    for family in ("rail-only", "dragonfly-plus"):
        topo = build(family, nodes * gpn, gpus_per_node=gpn, nvlink_domain=domain)
        assert bundle_sums(topo) == one_plane(topo), family
        assert n_drawn(topo) <= MAX_DRAWN


@SMALL
@given(domains=st.integers(2, 4096))
def test_torus_bundles_add_up_at_any_size(domains: int) -> None:
    topo = build("torus-3d", domains * 8)
    assert bundle_sums(topo) == one_plane(topo)
    assert n_drawn(topo) <= MAX_DRAWN


@SMALL
@given(d=st.integers(1, 12))
def test_hypercube_bundles_add_up_at_any_size(d: int) -> None:
    topo = build("hypercube", 8 * 2**d, nics_per_gpu=2)
    assert bundle_sums(topo) == one_plane(topo)
    assert n_drawn(topo) <= 32


def test_single_domain_designs_draw_without_cables() -> None:
    topo = build("torus-3d", 8)
    assert topo.n_links == 0
    fig = topology_diagram(topo)
    assert f"{topo.n_gpus:,} GPUs" in fig.layout.title.text
    assert bundle_sums(topo) == {}


def test_a_forced_third_tier_draws_one_pod() -> None:
    # a forced third tier on a small design still draws (one pod, cores above)
    topo = build_topology_from_request("fat-tree", dataclasses.replace(req(2048), tiers=3))
    assert topo.tiers == 3
    assert bundle_sums(topo) == one_plane(topo)


def test_presets_draw() -> None:
    for name in ("dgx-h100-ib-ndr", "dragonfly-plus-16k", "torus-3d-4k", "gb300-nvl72-xdr"):
        topo = build_topology(load_preset(name))
        fig = topology_diagram(topo)
        assert len(fig.data) <= MAX_TRACES
        assert bundle_sums(topo) == one_plane(topo)


def test_scenario_overrides_draw_rail_only_nvl72() -> None:
    scenario = apply_overrides(load_preset("gb300-nvl72-xdr"), {"fabric.topology": "rail-only"})
    topo = build_topology(scenario)
    s = sketch(topo)
    assert any(b.stripes for b in s.boxes)
    assert bundle_sums(topo) == one_plane(topo)
