"""The storage and management networks in the BOM, the cost charts and the Cost page.

Defaults: 2 x 200 GbE storage ports per server into a Spectrum-4 leaf-spine (NVIDIA's HGX
reference architecture and DGX BasePOD [SF5] [SF3]); one 1 GbE BMC port per server and per
switch into 48-port access switches [SF3] [SF4]. The compute-fabric totals never include
them.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from fabric_model.catalog import load_catalog
from fabric_model.cli import main
from fabric_model.errors import InfeasibleDesignError
from fabric_model.plant.cost import bill_of_materials, compare_vendors
from fabric_model.plant.storage_mgmt import MANAGEMENT_AGGREGATION
from fabric_model.presets import DEFAULT_PRESET, load_preset
from fabric_model.scenario import apply_overrides
from tests.apptest_helpers import metric_value, open_page
from ui.cost_figures import vendor_capex_figure, vendor_power_figure
from ui.floorplan import floorplan_figure, network_split_frame

CAT = load_catalog()
OFF = {"storage.enabled": False, "management.enabled": False}


def bom(preset: str = DEFAULT_PRESET, **overrides: object):  # type: ignore[no-untyped-def]
    return bill_of_materials(apply_overrides(load_preset(preset), overrides))


def _net(b: Any, name: str) -> Any:
    return next(n for n in b.networks if n.name == name)


def _qty(net: Any, where: str) -> int:
    return sum(x.quantity for x in net.lines if x.where == where)


# ------------------------------------------------------------------------------ the bill


def test_default_storage_network() -> None:
    storage = _net(bom(), "storage")
    # 128 DGX x 2 ports = 256 ports of 200G: one SN5600 (256 x 200G) holds them all
    assert _qty(storage, "storage leaf") == 1
    assert _qty(storage, "servers (storage)") == 128  # one dual-port B3220 per server
    assert _qty(storage, "storage nic-leaf") == 256  # one fiber per port
    assert _qty(storage, "storage nic-leaf (NIC side)") == 256
    assert _qty(storage, "storage nic-leaf (leaf side)") == 64  # 4 x 200G per 800G cage
    assert storage.capex_usd == pytest.approx(sum(x.capex_usd for x in storage.lines))


def test_storage_grows_into_a_leaf_spine() -> None:
    storage = _net(bom(**{"cluster.n_gpus": 16384}), "storage")
    # 2,048 servers x 2 = 4,096 ports: leaves of 128 down / 128 up at 200G
    assert _qty(storage, "storage leaf") == 32 and _qty(storage, "storage spine") == 16
    assert _qty(storage, "storage nic-leaf") == 4096
    assert _qty(storage, "storage leaf-spine") == 4096


def test_default_management_network() -> None:
    b = bom()
    mgmt, lay = _net(b, "management"), b.floorplan.layout
    n_switches = b.topology.n_switches + _net(b, "storage").n_switches
    assert _qty(mgmt, "servers and switches (management)") == 128 + n_switches
    access = _qty(mgmt, "management access (in every rack)")
    assert access >= lay.n_compute_racks  # one per compute rack, more for the network racks
    assert _qty(mgmt, "management aggregation") == 2
    assert _qty(mgmt, "management uplink") == 2 * access
    assert _qty(mgmt, "management uplink (both ends)") == 4 * access
    assert CAT.switch(MANAGEMENT_AGGREGATION).radix(100) == 64  # the count's assumption
    fast = _net(bom(**{"management.link_gbps": 25}), "management")
    assert {x.key for x in fast.lines if x.category == "switches"} == {"sn2410", "sn4600c"}
    assert fast.capex_usd > mgmt.capex_usd


def test_the_compute_fabric_totals_stay_compute_only() -> None:
    b, off = bom(), bom(**OFF)
    assert not off.networks
    assert (b.capex_usd, b.power_w, b.network_share) == (
        off.capex_usd,
        off.power_w,
        off.network_share,
    )
    assert [x.to_dict() for x in b.lines] == [x.to_dict() for x in off.lines]
    split = b.capex_by_network_usd
    assert set(split) == {"compute", "storage", "management"} and split["compute"] == b.capex_usd
    # storage is ~9% of the compute fabric here, management ~3%
    assert 0.05 < split["storage"] / b.capex_usd < 0.15
    assert 0.01 < split["management"] / b.capex_usd < 0.05
    d = b.to_dict()
    assert d["capex_by_network_usd"]["total"] == pytest.approx(sum(split.values()))
    assert set(d["networks"]) == {"storage", "management"} and "compute" in d["scope"]


def test_a_storage_speed_the_nic_lacks_is_refused() -> None:
    with pytest.raises(InfeasibleDesignError) as err:
        bom(**{"storage.link_gbps": 400})
    assert err.value.key == "storage.link_gbps" and "allowed: 100, 200" in str(err.value)
    assert bom(**{"storage.link_gbps": 100})


def test_cli_one_line_exit_2_and_the_split(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bom", "--set", "storage.link_gbps=400"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "storage.link_gbps" in err and "100, 200" in err
    assert main(["bom", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["networks"]["storage"]["capex_usd"]["total"] > 0
    assert main(["bom"]) == 0
    text = capsys.readouterr().out
    assert "networks: compute $" in text and "storage network:" in text
    assert "compute-fabric share of cluster capex" in text


@settings(max_examples=12, deadline=None, derandomize=True)
@given(
    servers=st.integers(1, 4096),
    ports=st.integers(1, 8),
    speed=st.sampled_from([100, 200]),
)
def test_storage_counts_conserve_ports(servers: int, ports: int, speed: int) -> None:
    b = bom(
        **{
            "cluster.n_gpus": 8 * servers,
            "storage.nics_per_node": ports,
            "storage.link_gbps": speed,
            "fabric.vendor": "spectrum-x",
        }
    )
    storage = _net(b, "storage")
    assert _qty(storage, "storage nic-leaf") == max(2, servers * ports)
    assert _qty(storage, "servers (storage)") == servers * math.ceil(ports / 2)
    assert storage.capex_usd > 0 and storage.power_w > 0


# ------------------------------------------------------------------------------ figures


def test_vendor_charts_stack_storage_and_management_on_top() -> None:
    comparisons = compare_vendors(load_preset(DEFAULT_PRESET))
    fig = vendor_capex_figure(comparisons)
    names = [t.name for t in fig.data]
    assert names[:4] == ["switches", "nics", "optics", "cables"]
    assert names[4:6] == ["storage network", "management network"]
    ok = [c.bom for c in comparisons if c.bom is not None]
    totals = fig.data[-1].y
    for total, b in zip(totals, ok, strict=True):
        assert total == pytest.approx(sum(b.capex_by_network_usd.values()) / 1e6)
    power = vendor_power_figure(comparisons, per_gpu=True)
    assert [t.name for t in power.data][4:6] == ["storage network", "management network"]
    off = vendor_capex_figure(compare_vendors(apply_overrides(load_preset(DEFAULT_PRESET), OFF)))
    assert [t.name for t in off.data][:-1] == ["switches", "nics", "optics", "cables"]


def test_floorplan_figure_and_split_frame() -> None:
    b = bom()
    fig = floorplan_figure(b.floorplan)
    assert "37 racks" in fig.layout.title.text and "kW per rack" in fig.layout.title.text
    assert fig.layout.yaxis.scaleanchor == "x"
    assert any(t.name.startswith("compute racks (32)") for t in fig.data)
    frame = network_split_frame(b)
    assert list(frame["network"]) == ["compute fabric", "storage network", "management network"]
    assert frame["share_pct"].sum() == pytest.approx(100, abs=0.2)
    hot = bom("gb300-nvl72-xdr", **{"facility.cooling": "air"})
    assert "#D55E00" in {t.fillcolor for t in floorplan_figure(hot.floorplan).data}


# ------------------------------------------------------------------------------ the page


def _open_cost(**query: str) -> AppTest:
    return open_page("pages/cost.py", query)


@pytest.mark.app
def test_cost_page_shows_racks_cooling_and_the_three_networks() -> None:
    at = _open_cost()
    b = bom()
    assert metric_value(at, "Racks") == f"{b.floorplan.layout.n_racks:,}"
    assert metric_value(at, "kW per compute rack") == f"{b.floorplan.compute_rack_kw:,.1f}"
    assert metric_value(at, "Cooling") == "air, contained"
    assert not at.warning
    tables = [d.value for d in at.dataframe]
    split = next(t for t in tables if "network" in t.columns and "share_pct" in t.columns)
    assert list(split["capex_usd"]) == [round(v) for v in b.capex_by_network_usd.values()]
    n_charts = len(at.get("plotly_chart"))
    at.toggle(key="cost_floorplan").set_value(True).run()
    assert not at.exception
    assert len(at.get("plotly_chart")) == n_charts + 1
    spec = json.loads(at.get("plotly_chart")[-1].proto.spec)
    assert spec["layout"]["title"]["text"].startswith("Floor plan: 37 racks")


@pytest.mark.app
def test_cost_page_warns_about_air_on_a_liquid_rack() -> None:
    at = _open_cost(preset="gb300-nvl72-xdr", **{"facility.cooling": "air"})
    warnings = [w.value for w in at.warning]
    assert len(warnings) == 1 and "facility.air_limit_kw_per_rack" in warnings[0]
    assert metric_value(at, "Cooling") == "liquid"
    at = _open_cost(**{"storage.link_gbps": "400"})
    # the design cannot be priced: the page says which key, as for any infeasible design
    assert any("storage.link_gbps" in w.value and "100, 200" in w.value for w in at.warning)
