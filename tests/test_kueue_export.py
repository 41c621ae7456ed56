"""`export --format kueue-topology`: Kueue's Topology, a flavor using it, and node labels."""

from __future__ import annotations

from collections import defaultdict

import pytest
import yaml

from fabric_model.cli import main
from fabric_model.presets import load_preset
from fabric_model.report.export import KUEUE_LEVELS, export_design
from fabric_model.run.placement import ClusterLayout

BLOCK, RACK, HOST = KUEUE_LEVELS


def _docs(preset: str) -> list[dict]:
    return list(yaml.safe_load_all(export_design(load_preset(preset), "kueue-topology").text))


@pytest.mark.parametrize(
    ("preset", "servers_per_rack"), [("dgx-h100-ib-ndr", 32), ("gb200-nvl72-ndr", 18)]
)
def test_levels_nest_and_every_server_is_labelled(preset: str, servers_per_rack: int) -> None:
    docs = _docs(preset)
    topo, flavor, nodes = docs[0], docs[1], docs[2:]
    assert topo["kind"] == "Topology"
    assert [lvl["nodeLabel"] for lvl in topo["spec"]["levels"]] == list(KUEUE_LEVELS)
    assert flavor["kind"] == "ResourceFlavor"
    assert flavor["spec"]["topologyName"] == topo["metadata"]["name"]
    scenario = load_preset(preset)
    n_servers = scenario.cluster.n_gpus // scenario.cluster.gpus_per_node
    assert [n["metadata"]["name"] for n in nodes] == [f"node{i}" for i in range(n_servers)]
    blocks_of_rack: dict[str, set[str]] = defaultdict(set)
    servers: dict[str, int] = defaultdict(int)
    for n in nodes:
        labels = n["metadata"]["labels"]
        assert set(flavor["spec"]["nodeLabels"].items()) <= set(labels.items())
        blocks_of_rack[labels[RACK]].add(labels[BLOCK])
        servers[labels[RACK]] += 1
    assert all(len(b) == 1 for b in blocks_of_rack.values())  # a rack sits in one block
    assert max(servers.values()) == servers_per_rack


def test_racks_are_the_groups_the_scheduler_places_on() -> None:
    scenario = load_preset("dgx-h100-ib-ndr")
    lay = ClusterLayout.from_scenario(scenario)
    racks = [n["metadata"]["labels"][RACK] for n in _docs("dgx-h100-ib-ndr")[2:]]
    by_rack: dict[str, set[int]] = defaultdict(set)
    for i, r in enumerate(racks):
        by_rack[r].add(int(lay.leaf_of[i]))
    assert all(len(v) == 1 for v in by_rack.values())
    assert len(by_rack) == lay.n_leaves


def test_a_switchless_design_of_single_server_domains_is_refused(capsys) -> None:
    code = main(["export", "--format", "kueue-topology", "--preset", "torus-3d-4k", "--out", "-"])
    assert code == 2
    assert "kueue-topology" in capsys.readouterr().err
