"""Deployment exports agree with the BOM on every family: cabling CSV, Slurm topology, graph.

For each design the cabling plan has one row per BOM cable, per link class as many rows as
the BOM's cable line, every NIC port and switch port used at most once; the graph loads in
networkx with the BOM's cables and links; the Slurm files place every server exactly once and
define every switch they name.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import networkx as nx
import pandas as pd
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from fabric_model.errors import FabricModelError
from fabric_model.presets import load_preset
from fabric_model.report.export import (
    EXPORT_FORMATS,
    cabling_frame,
    deployment_plan,
    export_design,
    export_unavailable_reason,
    hostlist,
    load_node_link_graph,
    node_link_data,
)
from fabric_model.scenario import Scenario, apply_overrides

ROOT = Path(__file__).resolve().parents[1]

#: (id, preset, overrides): every family, 1 to 3 tiers, rail-optimized or not, tapered,
#: splitter copper, NVL72, planes.
DESIGNS = [
    ("fat-tree-1tier", "dgx-h100-ib-ndr", {"cluster.n_gpus": 64}),
    ("fat-tree-2tier-rail", "dgx-h100-ib-ndr", {}),
    ("fat-tree-3tier", "dgx-h100-ib-ndr", {"cluster.n_gpus": 4096}),
    (
        "fat-tree-tor-oversubscribed",
        "dgx-h100-ib-ndr",
        {"fabric.rail_optimized": False, "fabric.oversubscription": 2},
    ),
    ("fat-tree-splitter-dac", "dgx-h100-ib-ndr", {"fabric.nic_leaf_m": 2.0}),
    ("fat-tree-partial", "dgx-h100-roce-ecmp", {"cluster.n_gpus": 1000}),
    ("fat-tree-nvl72-3tier", "gb200-nvl72-ndr", {}),
    ("rail-only", "dgx-h100-ib-ndr", {"fabric.topology": "rail-only"}),
    (
        "rail-only-3tier",
        "dgx-h100-ib-ndr",
        {"fabric.topology": "rail-only", "cluster.n_gpus": 8192, "fabric.tiers": 3},
    ),
    (
        "dragonfly-plus",
        "dgx-h100-ib-ndr",
        {"fabric.topology": "dragonfly-plus", "cluster.n_gpus": 4096},
    ),
    ("torus-3d", "torus-3d-4k", {}),
    ("hypercube", "dgx-h100-ib-ndr", {"fabric.topology": "hypercube"}),
    (
        "hypercube-copper",
        "dgx-h100-ib-ndr",
        {"fabric.topology": "hypercube", "fabric.direct_link_m": 2.0},
    ),
]
PLANES = {
    "cluster.gpu": "b300",
    "fabric.vendor": "lossy-ethernet",
    "fabric.link_gbps": 800,
    "cluster.n_gpus": 1024,
    "fabric.planes": 8,
}


def scenario(preset: str, overrides: dict[str, object]) -> Scenario:
    return apply_overrides(load_preset(preset), overrides) if overrides else load_preset(preset)


@pytest.fixture(scope="module", params=[*DESIGNS, ("planes-8", None, PLANES)], ids=lambda d: d[0])
def plan(request):  # type: ignore[no-untyped-def]
    _, preset, overrides = request.param
    s = apply_overrides(Scenario(), overrides) if preset is None else scenario(preset, overrides)
    return deployment_plan(s)


def expand(expr: str) -> list[str]:
    """Expand a Slurm hostlist expression (``node[0-3,7],leaf5``) into names."""
    out: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?", expr):
        m = re.fullmatch(r"([^\[]+)\[([^\]]*)\]", part)
        if not m:
            out.append(part)
            continue
        for rng in m.group(2).split(","):
            lo, _, hi = rng.partition("-")
            out += [f"{m.group(1)}{i}" for i in range(int(lo), int(hi or lo) + 1)]
    return out


# ------------------------------------------------------------------------------------------
# cabling CSV


def test_cabling_rows_equal_the_bom_cables(plan) -> None:  # type: ignore[no-untyped-def]
    export = export_design(plan, "cabling-csv")
    frame = pd.read_csv(io.StringIO(export.text), keep_default_na=False)
    bom, topo = plan.bom, plan.bom.topology
    assert len(frame) == export.n_items == bom.n_cables
    assert frame["cable_id"].tolist() == list(range(1, len(frame) + 1))
    assert int(frame["links"].sum()) == topo.n_links
    # per class: the BOM's cable line quantity, the class's length and speed
    cable_lines = Counter()
    for line in bom.lines:
        if line.category == "cables":
            cable_lines[line.where] += line.quantity
    assert frame.groupby("link_class").size().to_dict() == dict(cable_lines)
    for lc in topo.links:
        rows = frame[frame["link_class"] == lc.name]
        assert set(rows["length_m"]) == {lc.length_m}
        assert set(rows["link_gbps"]) == {lc.link_gbps}
    assert ("plane" in frame.columns) == (topo.planes > 1)
    # the media and transceivers are the BOM's parts
    keys = {line.key for line in bom.lines if line.category in ("cables", "optics")}
    used = set(frame["cable"]) | set(frame["a_transceiver"]) | set(frame["b_transceiver"])
    assert used - {""} <= keys


def test_every_port_is_used_once(plan) -> None:  # type: ignore[no-untyped-def]
    frame = cabling_frame(plan)
    topo = plan.bom.topology
    ends = [e for col in ("a_end", "b_end") for cell in frame[col] for e in cell.split("+")]
    counts = Counter(ends)
    assert max(counts.values()) == 1, counts.most_common(3)
    nic_ends = [e for e in ends if ":nic" in e]
    switch_ends = [e for e in ends if ":p" in e]
    assert len(nic_ends) + len(switch_ends) == len(ends)
    # every NIC leg of a switched fabric is cabled (switchless ones may leave a port free)
    if topo.tiers:
        assert len(nic_ends) == topo.n_endpoints * topo.planes
    ports = Counter(e.split(":")[0] for e in switch_ends)
    if ports:
        assert max(ports.values()) <= plan.bom.hardware.radix
        assert len(ports) == topo.n_switches
    servers = {e.split(":")[0] for e in nic_ends}
    assert servers <= {f"node{i}" for i in range(plan.n_servers)}


def test_multi_link_copper_is_one_row_per_cable() -> None:
    plan = deployment_plan(scenario("dgx-h100-ib-ndr", {"fabric.nic_leaf_m": 2.0}))
    frame = cabling_frame(plan)
    dac = frame[frame["link_class"] == "nic-leaf"]
    assert set(dac["media"]) == {"DAC"} and set(dac["links"]) == {2}
    assert all(
        a.count("+") == 1 and b.count("+") == 1
        for a, b in zip(dac["a_end"], dac["b_end"], strict=True)
    )
    # both legs of a splitter land on adjacent ports of one leaf cage
    for b in dac["b_end"]:
        (s1, p1), (s2, p2) = (x.split(":p") for x in b.split("+"))
        assert s1 == s2 and int(p2) == int(p1) + 1 and int(p1) % 2 == 1


def test_splitter_counting_convention_is_reported_when_a_cable_straddles() -> None:
    # leaves of 33 NIC ports (1.1:1 taper): the BOM's ceil(links / 2) pairs a leaf's last
    # port with the next leaf's first, which no splitter does; the export says so
    plan = deployment_plan(
        scenario("dgx-h100-ib-ndr", {"fabric.nic_leaf_m": 2.0, "fabric.oversubscription": 1.1})
    )
    assert plan.bom.topology.params["down_per_leaf"] % 2 == 1
    export = export_design(plan, "cabling-csv")
    assert export.n_items == plan.bom.n_cables
    frame = cabling_frame(plan)
    dac = frame[frame["link_class"] == "nic-leaf"]
    two_leaves = sum(len({e.split(":")[0] for e in b.split("+")}) > 1 for b in dac["b_end"])
    assert two_leaves > 0
    assert any(f"{two_leaves:,} of" in n and "ceil(links / 2)" in n for n in export.notes)


# ------------------------------------------------------------------------------------------
# networkx graph


def test_graph_loads_and_counts_the_bom_cables(plan) -> None:  # type: ignore[no-untyped-def]
    export = export_design(plan, "networkx-json")
    data = json.loads(export.text)
    graph = load_node_link_graph(data)
    topo = plan.bom.topology
    assert graph.number_of_nodes() == plan.n_servers + topo.n_switches
    edges = list(graph.edges(data=True))
    assert sum(d["cables"] for _, _, d in edges) == pytest.approx(plan.bom.n_cables)
    assert sum(d["links"] for _, _, d in edges) == topo.n_links
    assert {d["link_class"] for _, _, d in edges} == {lc.name for lc in topo.links}
    assert graph.graph["n_cables"] == plan.bom.n_cables
    servers = [n for n, d in graph.nodes(data=True) if d["kind"] == "server"]
    assert len(servers) == plan.n_servers
    # switched fabrics reach every server; a switchless one may leave servers without cables
    if topo.tiers:
        assert nx.is_connected(graph)


def test_graph_is_what_networkx_writes() -> None:
    plan = deployment_plan(scenario("dgx-h100-ib-ndr", {"cluster.n_gpus": 256}))
    data = node_link_data(plan)
    graph = load_node_link_graph(data)
    try:
        again = nx.node_link_data(graph, edges="edges")
    except TypeError:  # networkx < 3.4
        again = nx.node_link_data(graph, link="edges")

    def norm(d):  # type: ignore[no-untyped-def]
        nodes = sorted(json.dumps(n, sort_keys=True) for n in d["nodes"])
        edges = sorted(
            json.dumps(
                {
                    **e,
                    "source": min(e["source"], e["target"]),
                    "target": max(e["source"], e["target"]),
                },
                sort_keys=True,
            )
            for e in d["edges"]
        )
        return d["directed"], d["multigraph"], d["graph"], nodes, edges

    assert norm(again) == norm(data)


# ------------------------------------------------------------------------------------------
# Slurm


def parse_conf(text: str) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    nodes: dict[str, list[str]] = {}
    children: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        fields = dict(f.split("=", 1) for f in line.split())
        name = fields["SwitchName"]
        assert name not in nodes and name not in children, f"{name} defined twice"
        assert ("Nodes" in fields) != ("Switches" in fields), line
        if "Nodes" in fields:
            nodes[name] = expand(fields["Nodes"])
        else:
            children[name] = expand(fields["Switches"])
    return nodes, children


def check_tree(plan, nodes: dict[str, list[str]], children: dict[str, list[str]]) -> None:  # type: ignore[no-untyped-def]
    placed = Counter(n for ns in nodes.values() for n in ns)
    assert set(placed) == {f"node{i}" for i in range(plan.n_servers)}
    assert max(placed.values()) == 1  # every server under exactly one leaf-level switch
    defined = set(nodes) | set(children)
    assert {c for cs in children.values() for c in cs} <= defined

    # some switch reaches every server through its descendants
    def reach(name: str) -> set[str]:
        if name in nodes:
            return set(nodes[name])
        return set().union(*(reach(c) for c in children[name]))

    assert any(len(reach(s)) == plan.n_servers for s in defined)


def test_slurm_topology_conf(plan) -> None:  # type: ignore[no-untyped-def]
    topo = plan.bom.topology
    if topo.tiers == 0:
        with pytest.raises(FabricModelError, match="needs switches"):
            export_design(plan, "slurm-topology")
        assert export_unavailable_reason(topo, "slurm-topology")
        return
    assert export_unavailable_reason(topo, "slurm-topology") is None
    export = export_design(plan, "slurm-topology")
    nodes, children = parse_conf(export.text)
    check_tree(plan, nodes, children)
    assert export.n_items == len(nodes) + len(children)
    assert "slurm.schedmd.com/topology.conf" in export.text


def test_slurm_topology_yaml(plan) -> None:  # type: ignore[no-untyped-def]
    topo = plan.bom.topology
    req = topo.request
    per_domain = req.nvlink_domain // req.gpus_per_node
    if topo.tiers == 0 and per_domain <= 1:
        with pytest.raises(FabricModelError, match="no Slurm topology"):
            export_design(plan, "slurm-topology-yaml")
        return
    doc = yaml.safe_load(export_design(plan, "slurm-topology-yaml").text)
    by_name = {t["topology"]: t for t in doc}
    assert sum(bool(t["cluster_default"]) for t in doc) == 1
    if topo.tiers:
        switches = by_name["fabric"]["tree"]["switches"]
        nodes = {s["switch"]: expand(s["nodes"]) for s in switches if "nodes" in s}
        children = {s["switch"]: expand(s["children"]) for s in switches if "children" in s}
        check_tree(plan, nodes, children)
        conf_nodes, conf_children = parse_conf(export_design(plan, "slurm-topology").text)
        assert (nodes, children) == (conf_nodes, conf_children)
    if per_domain > 1:
        block = by_name["nvlink"]["block"]
        assert block["block_sizes"] == [per_domain]
        members = Counter(n for b in block["blocks"] for n in expand(b["nodes"]))
        assert set(members) == {f"node{i}" for i in range(plan.n_servers)}
        assert max(members.values()) == 1
        assert all(len(expand(b["nodes"])) <= per_domain for b in block["blocks"])
    else:
        assert "nvlink" not in by_name


def test_rail_optimized_units_are_one_slurm_switch() -> None:
    plan = deployment_plan(load_preset("dgx-h100-ib-ndr"))
    nodes, children = parse_conf(export_design(plan, "slurm-topology").text)
    down = int(plan.bom.topology.params["down_per_leaf"])
    assert sorted(len(v) for v in nodes.values()) == [down] * len(nodes)  # a unit = 32 servers
    assert len(children) == 1  # one spine group over the units


def test_dragonfly_gets_a_virtual_root() -> None:
    s = scenario("dgx-h100-ib-ndr", {"fabric.topology": "dragonfly-plus", "cluster.n_gpus": 4096})
    export = export_design(s, "slurm-topology")
    _, children = parse_conf(export.text)
    assert "fabric" in children and any("virtual root" in n for n in export.notes)


# ------------------------------------------------------------------------------------------
# hostlists


@given(st.sets(st.integers(min_value=0, max_value=5000), min_size=1, max_size=60))
def test_hostlist_round_trips(numbers: set[int]) -> None:
    assert expand(hostlist("node", sorted(numbers))) == [f"node{n}" for n in sorted(numbers)]


def test_hostlist_examples() -> None:
    assert hostlist("node", [0, 1, 2, 5]) == "node[0-2,5]"
    assert hostlist("leaf", [7]) == "leaf7"
    assert hostlist("x", []) == ""


# ------------------------------------------------------------------------------------------
# command line


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fabric_model", "export", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_writes_each_format(tmp_path: Path) -> None:
    for fmt in EXPORT_FORMATS:
        out = tmp_path / f"x{EXPORT_FORMATS[fmt].file_suffix}"
        done = run_cli("--format", fmt, "--out", str(out), "--preset", "gb200-nvl72-ndr", "--json")
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert summary["format"] == fmt and Path(summary["path"]) == out
        assert out.stat().st_size > 0


def test_cli_stdout_matches_the_library() -> None:
    done = run_cli("--format", "cabling-csv", "--out", "-", "--set", "cluster.n_gpus=256")
    assert done.returncode == 0, done.stderr
    expected = export_design(scenario("dgx-h100-ib-ndr", {"cluster.n_gpus": 256}), "cabling-csv")
    assert done.stdout == expected.text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--format", "visio", "--out", "-"], "invalid choice"),
        (
            [
                "--format",
                "cabling-csv",
                "--out",
                "-",
                "--preset",
                "torus-3d-4k",
                "--set",
                "cluster.n_gpus=8",
            ],
            "nothing to export",
        ),
        (["--format", "slurm-topology", "--out", "-", "--preset", "torus-3d-4k"], "needs switches"),
        (["--format", "cabling-csv", "--out", "/nonexistent/dir/x.csv"], "no directory"),
        (["--format", "cabling-csv"], "required"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(args: list[str], message: str) -> None:
    done = run_cli(*args)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_unknown_format_in_the_library() -> None:
    with pytest.raises(FabricModelError, match="must be one of"):
        export_design(load_preset("dgx-h100-ib-ndr"), "visio")


def test_cli_choices_are_the_registered_formats() -> None:
    from fabric_model.cli import _EXPORT_FORMATS

    assert tuple(EXPORT_FORMATS) == _EXPORT_FORMATS
