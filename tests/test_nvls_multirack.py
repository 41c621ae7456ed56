"""NVLS-Tree across NVL72 racks as NCCL runs it: heads, the tree of racks, its latency.

NCCL's NVLS-Tree reduces inside the rack on the NVSwitch, then all-reduces each head's
S / heads share over the double binary tree of racks on that head's NIC (search.cc,
connect.cc connectNvls; 16 heads between GB200 MNNVL domains, NCCL 2.27.3). Its busbw is
min(NVLS bound, network side, heads x perChMaxNVLSTreeBw): it cannot rise with the rack count
(the tree only adds load per NIC from 2 to 3+ racks, NCCL's table value drops from 96 to 80
GB/s per channel) and cannot fall with a faster NIC.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_model.collectives import FabricContext, algo_models, collective, nccl_constants
from fabric_model.collectives.algorithms import nvls_heads
from fabric_model.collectives.model import bus_factor
from fabric_model.presets import load_preset
from fabric_model.scenario import apply_overrides

GIB = 2**30
TOL = 1e-6


def _nvls(racks: int, gbps: int, preset: str = "gb200-nvl72-ndr"):
    s = apply_overrides(
        load_preset(preset), {"cluster.n_gpus": 72 * racks, "fabric.link_gbps": gbps}
    )
    return algo_models(FabricContext.from_scenario(s), "allreduce", "nvls")[0]


@settings(max_examples=5, deadline=None)
@given(racks=st.integers(2, 12), more=st.integers(1, 8), gbps=st.sampled_from([200, 400]))
def test_multirack_nvls_busbw_does_not_rise_with_racks(racks, more, gbps):
    a, b = _nvls(racks, gbps), _nvls(racks + more, gbps)
    assert a.algo == b.algo == "nvls-tree"
    # the time of an S-byte call never drops with more racks: algbw = busbw / (2(n-1)/n)
    # (busbw itself gains the bus factor's (n-1)/n, +0.07 % from 4 to 5 racks)
    assert b.busbw_Bps / bus_factor("allreduce", b.n_ranks) <= a.busbw_Bps / bus_factor(
        "allreduce", a.n_ranks
    ) * (1 + TOL)
    assert b.busbw_Bps <= a.busbw_Bps * (1 + 1 / (72 * racks))


@pytest.mark.parametrize("racks", [2, 3, 8])
def test_multirack_nvls_busbw_rises_with_nic_rate(racks):
    slow, fast = _nvls(racks, 200), _nvls(racks, 400)
    assert fast.busbw_Bps >= slow.busbw_Bps * (1 - TOL)
    assert slow.ceiling == "nic"  # 16 heads x 23.5 GB/s is below the rack's NVLS bound
    assert slow.busbw_Bps < fast.busbw_Bps


def test_heads_are_nccls_and_the_network_side_is_heads_x_nic():
    m = _nvls(8, 400)
    ctx = FabricContext.from_scenario(
        apply_overrides(load_preset("gb200-nvl72-ndr"), {"cluster.n_gpus": 576})
    )
    heads = nvls_heads(ctx)
    assert heads == 16  # MNNVL between GB200 racks (NCCL 2.27.3)
    nic = 400e9 / 8 * nccl_constants()["net_efficiency"]
    # 3+ racks: an interior head NIC carries 4 streams of S / (2 heads): heads x NIC busbw
    assert m.inter_Bps == pytest.approx(2 * (575 / 576) * heads * nic / 2, rel=1e-6)
    assert m.busbw_Bps == pytest.approx(m.inter_Bps, rel=1e-9)


def test_hgx_nodes_keep_one_head_per_gpu():
    s = apply_overrides(load_preset("dgx-h100-ib-ndr"), {"cluster.n_gpus": 64})
    assert nvls_heads(FabricContext.from_scenario(s)) == 8


@pytest.mark.parametrize("racks", [2, 3, 5, 20])
def test_nvls_tree_latency_is_tuning_cc(racks):
    """intraLat + 2 x log2i(nNodes) x interLat (NVLS-Tree, Simple), plus the path."""
    m = _nvls(racks, 400)
    c = nccl_constants()["hw_latency_us"]
    lat = m.latency_us["Simple"]
    base = (
        c["nvlink"]["nvls"]["Simple"]
        + 2 * math.floor(math.log2(racks)) * c["net"]["nvls_tree"]["Simple"]
    )
    assert base <= lat <= base + 2 * math.floor(math.log2(racks)) * 2.0  # wire: < 2 us a hop
    row = collective(
        apply_overrides(load_preset("gb200-nvl72-ndr"), {"cluster.n_gpus": 72 * racks}),
        "allreduce",
        "nvls",
        [8],
    )[0]
    assert row.regime == "latency" and row.time_us == pytest.approx(lat)
