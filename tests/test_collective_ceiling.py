"""Every collective row explains itself: regime, ceiling, % of ceiling; the busiest links."""

from __future__ import annotations

import json

import pytest

from fabric_model.cli import main
from fabric_model.collectives import collective
from fabric_model.collectives.model import CEILINGS
from fabric_model.scenario import Scenario, apply_overrides

GIB = 2**30


@pytest.fixture(scope="module")
def rows_1k():
    s = apply_overrides(Scenario(), {"cluster.n_gpus": 1024})
    return collective(s, "allreduce", "auto", [8, GIB, 16 * GIB])


def test_regime_follows_the_larger_term(rows_1k):
    for r in rows_1k:
        assert r.regime == ("latency" if r.latency_us > r.bandwidth_us else "bandwidth")
    assert rows_1k[0].regime == "latency"
    assert rows_1k[-1].regime == "bandwidth"


def test_pct_of_ceiling_is_busbw_over_the_algorithms_bound(rows_1k):
    for r in rows_1k:
        assert r.ceiling in CEILINGS
        assert 0 < r.ceiling_GBps
        assert r.pct_of_ceiling == pytest.approx(100 * r.busbw_GBps / r.ceiling_GBps)
        assert r.pct_of_ceiling <= 100 + 1e-9  # a bound is never beaten
    assert rows_1k[-1].pct_of_ceiling > 90  # 16 GiB: the latency term is ~0.5 %


@pytest.mark.parametrize(
    ("over", "op", "algo", "ceiling"),
    [
        ({"cluster.n_gpus": 8}, "allreduce", "nvls", "nvls"),
        ({"cluster.n_gpus": 8}, "allreduce", "ring", "nvlink"),
        ({"cluster.n_gpus": 256}, "alltoall", "hierarchical", "nic"),
        ({"cluster.n_gpus": 256, "fabric.oversubscription": 4}, "alltoall", "direct", "leaf-spine"),
    ],
)
def test_ceiling_names_the_bound(over, op, algo, ceiling):
    r = collective(apply_overrides(Scenario(), over), op, algo, [GIB])[0]
    assert r.ceiling == ceiling
    assert r.to_dict()["ceiling"] == ceiling


def test_links_lists_the_busiest_links(capsys):
    argv = ["collective", "--op", "alltoall", "--algo", "direct", "--sizes", "1G", "--links", "4"]
    argv += ["--set", "cluster.n_gpus=256", "--set", "fabric.oversubscription=4"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    links = out["links"]
    assert len(links) == 4
    assert [x["utilisation"] for x in links] == sorted(
        (x["utilisation"] for x in links), reverse=True
    )
    assert links[0]["tier"] == "leaf-spine"  # a 4:1 leaf's uplinks saturate first
    assert links[0]["utilisation"] == pytest.approx(1.0, rel=1e-6)
    assert out["rows"][0]["ceiling"] == "leaf-spine"
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "busiest links" in text and "leaf-spine" in text and "pct_of_ceiling" in text


def test_links_out_of_range_is_refused(capsys):
    assert main(["collective", "--sizes", "1G", "--links", "-1"]) == 2
    assert "--links" in capsys.readouterr().err
