"""100G NICs (issue 10, item 8): the A100-era and EFA-style 100 Gb/s interfaces exist on
Ethernet (ConnectX-6 Dx into a Tomahawk 5 running 100G ports) and are refused where the
catalog's parts do not run them (InfiniBand HDR100, Spectrum-X)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fabric_model.catalog import load_catalog
from fabric_model.collectives import collective
from fabric_model.errors import InfeasibleDesignError
from fabric_model.plant.cost import bill_of_materials
from fabric_model.scenario import Scenario, apply_overrides

GIB = 2**30


def sc(**kw: object) -> Scenario:
    return apply_overrides(Scenario(), {k.replace("__", "."): v for k, v in kw.items()})


def oci_like(**kw: object) -> Scenario:
    """OCI's BM.GPU4.8 shape: 8 A100, 2 x 100G RoCE per GPU."""
    base = {
        "cluster__gpu": "a100",
        "cluster__n_gpus": 128,
        "cluster__nics_per_gpu": 2,
        "fabric__vendor": "roce",
        "fabric__link_gbps": 100,
    }
    base.update(kw)
    return sc(**base)


def test_roce_and_lossy_ethernet_run_100g_on_connectx6dx_and_tomahawk5():
    cat = load_catalog()
    for vendor in ("roce", "lossy-ethernet"):
        assert cat.nic_for(vendor, 100).key == "cx6dx"
        assert cat.switch_for(vendor, 100).radix(100) == 512


@pytest.mark.parametrize("vendor", ["infiniband", "spectrum-x"])
def test_100g_is_refused_where_the_catalog_has_no_part_for_it(vendor):
    with pytest.raises(InfeasibleDesignError) as err:
        collective(sc(fabric__vendor=vendor, fabric__link_gbps=100), "allreduce", "ring", [GIB])
    assert err.value.key == "fabric.link_gbps"
    assert "200, 400" in str(err.value)


def test_100g_ring_allreduce_is_nic_bound_at_two_nics_per_gpu():
    # 16 x 100G per node: the inter-node ring is bound by 16 x 12.5 GB/s = 200 GB/s per node,
    # less the RoCE efficiency; it must not exceed the line rate nor the PCIe Gen4 feed
    bw = collective(oci_like(), "allreduce", "ring", [8 * GIB])[0]
    assert 0.85 * 200 < bw.busbw_GBps < 200
    one_nic = collective(oci_like(cluster__nics_per_gpu=1), "allreduce", "ring", [8 * GIB])[0]
    assert bw.busbw_GBps == pytest.approx(2 * one_nic.busbw_GBps, rel=0.02)


def test_100g_bom_breaks_each_800g_switch_cage_into_eight_100g_nic_links():
    bom = bill_of_materials(oci_like())
    optics = {line.key: line.quantity for line in bom.lines if line.category == "optics"}
    nic_ports = 128 * 2
    assert optics["qsfp_100g_dr_nic"] == nic_ports
    # an 800G 2xDR4 module serves 8 x 100G lanes: 256 NIC links need 32 leaf-side modules
    assert optics["osfp_800g_2xdr4_100m"] == nic_ports // 8


def test_cli_accepts_100g_on_roce_and_refuses_it_on_infiniband_with_exit_2():
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "fabric_model",
            "bom",
            "--set",
            "fabric.vendor=roce",
            "--set",
            "fabric.link_gbps=100",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "fabric_model", "bom", "--set", "fabric.link_gbps=100"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0
    assert "fabric.link_gbps" in bad.stderr and "200, 400, 800" in bad.stderr
