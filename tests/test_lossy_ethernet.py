"""The lossy packet-spraying Ethernet transport (``fabric.vendor = lossy-ethernet``).

UEC 1.0 / OCP MRC 1.0 class: no PFC, per-packet spraying over every path, packet trimming.
At the flow level its spraying is the adaptive router's physics (``fabric.routing = spray``
is an alias of ``adaptive``); its goodput fraction is ``net_efficiency_lossy`` in
``assets/nccl_constants.yaml`` (an estimate: no public goodput measurement was found).
"""

from __future__ import annotations

import pytest

from fabric_model.catalog import load_catalog
from fabric_model.cli import main
from fabric_model.collectives import algo_models
from fabric_model.collectives.context import FabricContext, nccl_constants
from fabric_model.scenario import Scenario, apply_overrides

BASE = {"cluster.gpu": "b300", "fabric.link_gbps": 800, "cluster.n_gpus": 1024}


def ctx(**keys: object) -> FabricContext:
    return FabricContext.from_scenario(apply_overrides(Scenario(), {**BASE, **keys}))


def test_vendor_entry_is_lossy_and_sprays() -> None:
    v = load_catalog().vendor("lossy-ethernet")
    assert v.protocol == "ethernet" and not v.lossless
    assert v.default_routing == "adaptive" and not v.sharp_available
    assert all(w.lossless for k, w in load_catalog().vendors.items() if k != "lossy-ethernet")


def test_efficiency_constant_is_the_lossy_one() -> None:
    c = nccl_constants()
    assert 0 < c["net_efficiency_lossy"] < c["net_efficiency"]
    assert ctx(**{"fabric.vendor": "lossy-ethernet"}).constants["net_efficiency"] == pytest.approx(
        c["net_efficiency_lossy"]
    )
    assert ctx(**{"fabric.vendor": "roce"}).constants["net_efficiency"] == c["net_efficiency"]


@pytest.mark.parametrize(("op", "algo"), [("allreduce", "ring"), ("alltoall", "direct")])
def test_same_fabric_scales_by_the_efficiency_ratio(op: str, algo: str) -> None:
    """Same switches, NICs and spraying: network-side busbw in the ratio of efficiencies."""
    c = nccl_constants()
    lossy = algo_models(ctx(**{"fabric.vendor": "lossy-ethernet"}), op, algo)[0]
    roce = algo_models(ctx(**{"fabric.vendor": "roce", "fabric.routing": "adaptive"}), op, algo)[0]
    ratio = c["net_efficiency_lossy"] / c["net_efficiency"]
    assert lossy.inter_Bps == pytest.approx(ratio * roce.inter_Bps, rel=1e-9)


def test_spray_is_the_adaptive_router() -> None:
    a = ctx(**{"fabric.vendor": "roce", "fabric.routing": "spray"})
    b = ctx(**{"fabric.vendor": "roce", "fabric.routing": "adaptive"})
    assert a.policy == b.policy == "adaptive"
    ma, mb = algo_models(a, "alltoall", "direct")[0], algo_models(b, "alltoall", "direct")[0]
    assert ma.busbw_Bps == mb.busbw_Bps


def test_spraying_avoids_what_ecmp_hashing_loses() -> None:
    """RoCE's default static ECMP: ring flows that cross spines collide (ToR wiring)."""
    keys = {"cluster.n_gpus": 4096, "fabric.rail_optimized": False}
    lossy = algo_models(ctx(**keys, **{"fabric.vendor": "lossy-ethernet"}), "allreduce", "ring")
    roce = algo_models(ctx(**keys, **{"fabric.vendor": "roce"}), "allreduce", "ring")
    assert lossy[0].inter_Bps > 2 * roce[0].inter_Bps
    # spraying leaves the spine: the NIC link or NVLink binds (they are within 1 % of each
    # other here, 8 x 50 x 0.92 GB/s against NCCL's 18 x 20.6 GB/s NVLink figure)
    assert roce[0].bottleneck == "leaf-spine" and lossy[0].bottleneck in ("nic-leaf", "nvlink")


def test_cli_prices_the_lossy_fabric(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bom", "--set", "fabric.vendor=lossy-ethernet", "--set", "cluster.gpu=b300"]
    assert main([*args, "--set", "fabric.link_gbps=800", "--set", "fabric.planes=8"]) == 0
    out = capsys.readouterr().out
    assert "lossy-ethernet" in out and "8 planes of 100G" in out
    assert main(["bom", "--set", "fabric.vendor=uec"]) == 2
    assert "lossy-ethernet" in capsys.readouterr().err
