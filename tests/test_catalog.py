"""Tests of the hardware catalog: the shipped data file, its loader and the selection helpers."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_model.catalog import (
    DEFAULT_CATALOG_PATH,
    SECTIONS,
    Catalog,
    FrozenMap,
    load_catalog,
)
from fabric_model.errors import (
    CatalogError,
    FabricModelError,
    InfeasibleDesignError,
    UnknownCatalogKeyError,
)

SOURCE_REF = re.compile(r"\[(S[A-Za-z0-9]+)\]")


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    with DEFAULT_CATALOG_PATH.open(encoding="utf-8") as fh:
        data: dict[str, Any] = yaml.safe_load(fh)
    return data


def _is_numeric(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    return isinstance(value, list) and any(_is_numeric(v) for v in value)


# --- the shipped file ------------------------------------------------------------------------


def test_shipped_catalog_loads_and_has_the_required_entries(cat: Catalog) -> None:
    assert isinstance(cat.version, str) and cat.version
    assert set(cat.gpus) >= {"a100", "h100", "h200", "b200", "gb200", "b300"}
    assert set(cat.servers) >= {
        "hgx_a100",
        "hgx_h100",
        "hgx_h200",
        "dgx_b200",
        "hgx_b300",
        "gb200_nvl72",
    }
    assert set(cat.nics) >= {"cx7", "cx8", "bf3_supernic"}
    assert set(cat.switches) >= {"qm9700", "q3400", "sn5600", "th5", "th6", "sn6810"}
    assert set(cat.vendors) == {"infiniband", "spectrum-x", "roce", "lossy-ethernet"}
    assert {c.kind for c in cat.cables.values()} >= {"dac", "acc", "lacc", "fiber"}
    for section in SECTIONS:
        assert len(cat.section(section)) > 0


def test_every_numeric_field_of_every_entry_has_a_source_note(raw: dict[str, Any]) -> None:
    checked = 0
    for section in SECTIONS:
        for key, entry in raw[section].items():
            notes = entry.get("sources") or {}
            for field, value in entry.items():
                if field == "sources":
                    continue
                if _is_numeric(value) or (value is None and field.endswith(("_gbps", "tflops"))):
                    assert field in notes, f"{section}.{key}.{field} has no source note"
                    note = " ".join(str(notes[field]).split())
                    assert note.startswith("estimate:") or SOURCE_REF.match(note), note
                    checked += 1
    assert checked > 200


def test_every_cited_source_is_defined_and_every_source_is_cited(raw: dict[str, Any]) -> None:
    cited: set[str] = set()
    for section in SECTIONS:
        for entry in raw[section].values():
            for note in (entry.get("sources") or {}).values():
                cited.update(SOURCE_REF.findall(note))
    assert cited <= set(raw["sources"]), cited - set(raw["sources"])
    assert set(raw["sources"]) <= cited, set(raw["sources"]) - cited


def test_units_are_the_last_token_of_numeric_keys(raw: dict[str, Any]) -> None:
    units = {
        "gbps",
        "GBps",
        "gib",
        "gb",
        "mb",
        "w",
        "usd",
        "ns",
        "m",
        "tflops",
        "units",
        "db",
        "ms",
    }
    counts = {
        "n_ports",
        "n_cages",
        "n_sms",
        "max_ports",
        "gpus_per_server",
        "nvlink_domain",
        "max_nvlink_domain",
        "cpo_lasers_per_port",
        "split",
        "n_fibers",
    }
    for section in SECTIONS:
        for entry in raw[section].values():
            for field, value in entry.items():
                if _is_numeric(value) and field not in counts | {"links_per_cable"}:
                    assert field.rsplit("_", 1)[-1] in units, field


def test_gpu_servers_and_units(cat: Catalog) -> None:
    for gpu in cat.gpus.values():
        assert cat.server(gpu.server).gpus_per_server >= 1
        # the device memory CUDA reports: binary-sized stacks, a little below hbm_gb GiB
        assert gpu.hbm_gb * 1e9 / 2**30 - 0.051 <= gpu.hbm_gib <= gpu.hbm_gb
    assert cat.gpu("a100").fp8_dense_tflops is None
    assert cat.gpu("a100").arch == "ampere"
    assert cat.server("gb200_nvl72").gpus_per_server == 4
    assert cat.server("gb200_nvl72").nvlink_domain == 72


def test_golden_values_with_their_sources(cat: Catalog) -> None:
    # H100 SXM5: 989 dense BF16 TFLOP/s, 900 GB/s NVLink bidirectional [S40]
    assert cat.gpu("h100").bf16_dense_tflops == 989
    assert cat.gpu("h100").nvlink_GBps == 450
    # A100 SXM4 80GB: 312 BF16 dense, 80 GB = 74.5 GiB, 600 GB/s NVLink bidir (A100 datasheet)
    assert cat.gpu("a100").bf16_dense_tflops == 312
    assert cat.gpu("a100").hbm_gib == 79.14  # as CUDA reports an 80 GB A100
    assert cat.gpu("a100").nvlink_GBps == 300
    # B200 inside GB200: 2,500 dense BF16 TFLOP/s [S41]
    assert cat.gpu("gb200").bf16_dense_tflops == 2500
    # QM9700: 64 ports at 400G, 32 twin-port OSFP cages, 25.6 Tb/s one way [S1]
    assert cat.switch("qm9700").radix(400) == 64
    assert cat.switch("qm9700").n_cages == 32
    assert cat.switch("qm9700").capacity_one_way_gbps == 25_600
    # 800G twin-port 2xDR4 single-mode: 17 W in all configurations [S28]
    assert cat.optic("osfp_800g_2xdr4_100m").power_w == 17
    # 800G twin-port 2xSR4 multimode: 15 W, 50 m [S27]
    assert cat.optic("osfp_800g_2xsr4").power_w == 15
    assert cat.optic("osfp_800g_2xsr4").reach_m == 50
    # DGX H100: 10.2 kW max [S59], minus 8 NIC cards the network BOM counts
    assert 9_800 <= cat.server("hgx_h100").power_w <= 10_200


def test_source_notes_expand_to_title_and_url(cat: Catalog) -> None:
    note = cat.source_note("gpus", "h100", "bf16_dense_tflops")
    assert cat.sources["S40"].url in note and "[S40]" not in note
    assert cat.source_note("switches", "q3400", "price_usd").startswith("estimate:")
    with pytest.raises(UnknownCatalogKeyError, match="price_usd"):
        cat.source_note("switches", "qm9700", "no_such_field")
    with pytest.raises(UnknownCatalogKeyError):
        cat.source_note("switches", "no_such_switch", "price_usd")


def test_to_frame_has_a_source_column(cat: Catalog) -> None:
    frame = cat.to_frame("switches")
    assert list(frame["key"]) == list(cat.switches)
    assert {"name", "price_usd", "power_w", "remark", "source"} <= set(frame.columns)
    assert all("price_usd:" in s for s in frame["source"])
    sources = cat.to_frame("sources")
    assert list(sources.columns) == ["key", "title", "url", "date"]
    assert len(sources) == len(cat.sources)
    with pytest.raises(UnknownCatalogKeyError):
        cat.to_frame("widgets")


def test_entries_are_immutable_hashable_and_picklable(cat: Catalog) -> None:
    sw = cat.switch("qm9700")
    with pytest.raises(dataclasses.FrozenInstanceError):
        sw.price_usd = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        sw.sources["price_usd"] = "x"  # type: ignore[index]
    assert hash(sw) == hash(copy.deepcopy(sw))
    assert pickle.loads(pickle.dumps(cat)) == cat
    assert FrozenMap({"a": 1}) == {"a": 1}


def test_default_catalog_is_cached(cat: Catalog) -> None:
    assert load_catalog() is cat
    assert load_catalog(DEFAULT_CATALOG_PATH) is cat


# --- lookups and selection -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("switch", "link_gbps", "radix"),
    [
        ("qm9700", 400, 64),  # [S1] 64 x NDR
        ("qm9700", 200, 128),  # [S1] 128 x NDR200
        ("sn5600", 400, 128),  # [S5]
        ("sn5600", 800, 64),  # [S5]
        ("sn5600", 200, 256),  # [S5]
        ("q3400", 800, 144),  # [S9]
        ("th5", 400, 128),  # [S16]
        ("th6", 800, 128),  # [S17]
        ("th6", 1600, 64),  # [S17]
    ],
)
def test_switch_radix(cat: Catalog, switch: str, link_gbps: int, radix: int) -> None:
    assert cat.switch(switch).radix(link_gbps) == radix


def test_radix_rejects_an_unsupported_speed(cat: Catalog) -> None:
    with pytest.raises(InfeasibleDesignError, match=r"qm9700.*200, 400.*800") as info:
        cat.switch("qm9700").radix(800)
    assert info.value.key == "fabric.link_gbps"
    assert isinstance(info.value, FabricModelError)


@pytest.mark.parametrize("vendor", ["infiniband", "spectrum-x", "roce"])
@pytest.mark.parametrize("link_gbps", [400, 800])
def test_switch_and_nic_for_every_vendor(cat: Catalog, vendor: str, link_gbps: int) -> None:
    v = cat.vendor(vendor)
    sw = cat.switch_for(vendor, link_gbps)
    nic = cat.nic_for(v, link_gbps)
    assert sw.protocol == v.protocol
    assert sw.radix(link_gbps) >= 64
    assert nic.supports(link_gbps) and v.protocol in nic.protocols
    if v.requires_spectrum_x_nic:
        assert nic.spectrum_x_endpoint


def test_vendor_defaults(cat: Catalog) -> None:
    assert cat.switch_for("infiniband", 400).key == "qm9700"
    assert cat.switch_for("infiniband", 800).key == "q3400"
    assert cat.switch_for("spectrum-x", 400).key == "sn5600"
    assert cat.nic_for("spectrum-x", 400).key == "bf3_supernic"
    assert cat.switch_for("roce", 400).key == "th5"
    assert cat.vendor("roce").default_routing == "ecmp"
    assert cat.vendor("spectrum-x").default_routing == "adaptive"
    assert [v.key for v in cat.vendors.values() if v.sharp_available] == ["infiniband"]


def test_speed_not_offered_is_infeasible(cat: Catalog) -> None:
    msg = "infiniband offers 200, 400, 800 Gb/s links in this catalog; got 1600"
    with pytest.raises(InfeasibleDesignError, match=re.escape(msg)) as info:
        cat.switch_for("infiniband", 1600)
    assert info.value.key == "fabric.link_gbps"
    with pytest.raises(InfeasibleDesignError, match="got 100"):
        cat.nic_for("spectrum-x", 100)
    with pytest.raises(InfeasibleDesignError, match="got 50"):
        cat.nic_for("roce", 50)


def test_optic_for_picks_by_reach_and_price(cat: Catalog) -> None:
    short = cat.optic_for("switch", 400, 30.0, cage_gbps=800)
    assert short.media == "mmf" and short.side == "switch"
    long = cat.optic_for("switch", 400, 200.0)
    assert long.media == "smf" and long.reach_m >= 200
    assert cat.optic_for("nic", 400, 30.0).side == "nic"
    assert cat.optic_for("switch", 400, 1500.0).reach_m >= 1500
    with pytest.raises(InfeasibleDesignError, match=r"400 Gb/s over 5000 m"):
        cat.optic_for("switch", 400, 5000.0)
    with pytest.raises(ValueError, match="side"):
        cat.optic_for("spine", 400, 1.0)


def test_optic_for_respects_the_cage_and_protocol(cat: Catalog) -> None:
    q3400 = cat.switch("q3400")
    xdr = cat.optic_for("switch", 800, 30.0, cage_gbps=q3400.cage_gbps, protocol="infiniband")
    assert xdr.module_gbps == 1600 and xdr.ports_per_module(800) == 2
    sn5600 = cat.switch("sn5600")
    eth = cat.optic_for("switch", 800, 30.0, cage_gbps=sn5600.cage_gbps, protocol="ethernet")
    assert eth.module_gbps == 800 and eth.ports_per_module(800) == 1
    with pytest.raises(InfeasibleDesignError, match="1600 Gb/s cage"):
        cat.optic_for("switch", 200, 30.0, cage_gbps=1600)  # XDR cages: 800G or 400G legs [SL3]


def test_every_offered_design_has_optics(cat: Catalog) -> None:
    for v in cat.vendors.values():
        for speed in v.link_speeds_gbps:
            sw = cat.switch_for(v, speed)
            on_switch = cat.optic_for(
                "switch", speed, 100.0, cage_gbps=sw.cage_gbps, protocol=v.protocol
            )
            on_nic = cat.optic_for("nic", speed, 30.0, protocol=v.protocol)
            for optic, reach_m in ((on_switch, 100.0), (on_nic, 30.0)):
                assert speed in optic.port_speeds_gbps and v.protocol in optic.protocols
                assert optic.reach_m >= reach_m
            assert on_switch.module_gbps == sw.cage_gbps and on_switch.side == "switch"
            assert on_nic.side == "nic"


def test_ports_per_module(cat: Catalog) -> None:
    twin = cat.optic("osfp_800g_2xdr4_100m")
    assert twin.ports_per_module(400) == 2
    assert twin.ports_per_module(800) == 1
    assert twin.ports_per_module(200) == 4
    assert cat.optic("osfp_400g_dr4_nic").ports_per_module(400) == 1
    with pytest.raises(InfeasibleDesignError):
        cat.optic("osfp_400g_dr4_nic").ports_per_module(800)


def test_cable_for(cat: Catalog) -> None:
    dac = cat.cable_for(400, 2.0)
    assert dac is not None and dac.kind == "dac"
    splitter = cat.cable_for(400, 3.0, split=2)
    assert splitter is not None and splitter.kind == "dac" and splitter.split == 2
    acc = cat.cable_for(400, 4.5)
    assert acc is not None and acc.kind == "acc"
    assert cat.cable_for(400, 20.0) is None
    # no passive DAC at 200G/lane [S36]: at 800G only a linear active copper cable, if any
    c800 = cat.cable_for(800, 2.0)
    lacc_in_catalog = any(c.kind == "lacc" for c in cat.cables.values())
    if lacc_in_catalog:
        assert c800 is not None and c800.kind == "lacc" and c800.lane_gbps == 200
    else:
        assert c800 is None
    assert cat.cable_for(800, 2.0, lane_gbps=100) is None
    assert cat.fiber.kind == "fiber" and cat.fiber.power_w == 0


@settings(max_examples=60, deadline=None)
@given(
    length_m=st.floats(min_value=0.0, max_value=2000.0, allow_nan=False),
    link_gbps=st.sampled_from([200, 400, 800]),
)
def test_optic_for_returns_the_cheapest_module_that_reaches(
    length_m: float, link_gbps: int
) -> None:
    cat = load_catalog()
    try:
        best = cat.optic_for("switch", link_gbps, length_m, cage_gbps=800)
    except InfeasibleDesignError:
        assert all(
            o.reach_m < length_m
            for o in cat.optics.values()
            if o.side == "switch" and o.module_gbps == 800 and link_gbps in o.port_speeds_gbps
        )
        return
    assert best.reach_m >= length_m
    per_port = best.price_usd / best.ports_per_module(link_gbps)
    for o in cat.optics.values():
        if (
            o.side == "switch"
            and o.module_gbps == 800
            and link_gbps in o.port_speeds_gbps
            and o.reach_m >= length_m
        ):
            assert per_port <= o.price_usd / o.ports_per_module(link_gbps)


@pytest.mark.parametrize(
    ("method", "kind"),
    [
        ("gpu", "GPU"),
        ("server", "server"),
        ("nic", "NIC"),
        ("switch", "switch"),
        ("optic", "optic"),
        ("cable", "cable"),
        ("vendor", "vendor"),
    ],
)
def test_unknown_keys_list_the_known_ones(cat: Catalog, method: str, kind: str) -> None:
    with pytest.raises(UnknownCatalogKeyError) as info:
        getattr(cat, method)("nope")
    err = info.value
    assert err.kind == kind and err.key == "nope"
    assert set(err.known) == set(cat.section(method + ("es" if method == "switch" else "s")))
    assert f"unknown {kind} 'nope'; known: " in str(err)
    assert isinstance(err, LookupError)


def test_unknown_vendor_in_selection(cat: Catalog) -> None:
    with pytest.raises(UnknownCatalogKeyError, match="infiniband"):
        cat.switch_for("myrinet", 400)


# --- corrupted copies ------------------------------------------------------------------------


def _drop_note(d: dict[str, Any]) -> None:
    del d["switches"]["qm9700"]["sources"]["price_usd"]


def _negative_price(d: dict[str, Any]) -> None:
    d["optics"]["osfp_800g_2xsr4"]["price_usd"] = -5


def _missing_switch(d: dict[str, Any]) -> None:
    d["vendors"]["roce"]["switch_by_gbps"][400] = "tomahawk9"


def _entry_not_mapping(d: dict[str, Any]) -> None:
    d["nics"]["cx7"] = 400


def _unknown_source(d: dict[str, Any]) -> None:
    d["gpus"]["h100"]["sources"]["tdp_w"] = "[S9999] made up"


def _bare_note(d: dict[str, Any]) -> None:
    d["gpus"]["h100"]["sources"]["tdp_w"] = "from a blog"


def _bool_number(d: dict[str, Any]) -> None:
    d["switches"]["th5"]["max_ports"] = True


def _float_count(d: dict[str, Any]) -> None:
    d["switches"]["th5"]["n_cages"] = 64.5


def _missing_field(d: dict[str, Any]) -> None:
    del d["servers"]["hgx_h100"]["power_w"]
    del d["servers"]["hgx_h100"]["sources"]["power_w"]


def _unknown_field(d: dict[str, Any]) -> None:
    d["cables"]["fiber"]["colour"] = "yellow"


def _gpu_missing_server(d: dict[str, Any]) -> None:
    d["gpus"]["b200"]["server"] = "dgx_b999"


def _nic_wrong_speed(d: dict[str, Any]) -> None:
    d["vendors"]["infiniband"]["nic_by_gbps"][800] = "cx7"


def _bad_gib(d: dict[str, Any]) -> None:
    d["gpus"]["h200"]["hbm_gib"] = 150  # more than the 141 GB the stacks hold


def _bad_cages(d: dict[str, Any]) -> None:
    d["switches"]["sn5600"]["n_cages"] = 32


def _unsorted_speeds(d: dict[str, Any]) -> None:
    d["switches"]["sn5600"]["port_speeds_gbps"] = [400, 200, 800]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (_drop_note, r"switches\.qm9700\.price_usd: numeric field has no source note"),
        (_negative_price, r"optics\.osfp_800g_2xsr4\.price_usd: must be > 0"),
        (_missing_switch, r"vendors\.roce\.switch_by_gbps: 'tomahawk9' is not a switch"),
        (_entry_not_mapping, r"nics\.cx7: an entry must be a mapping"),
        (_unknown_source, r"gpus\.h100\.tdp_w: .*\[S9999\]"),
        (_bare_note, r"gpus\.h100\.tdp_w: source note must start"),
        (_bool_number, r"switches\.th5\.max_ports: must be a number"),
        (_float_count, r"switches\.th5\.n_cages: must be a whole number"),
        (_missing_field, r"servers\.hgx_h100\.power_w: required field is missing"),
        (_unknown_field, r"cables\.fiber: unknown field\(s\) colour"),
        (_gpu_missing_server, r"gpus\.b200\.server: 'dgx_b999' is not a server"),
        (_nic_wrong_speed, r"vendors\.infiniband\.nic_by_gbps: cx7 does not run"),
        (_bad_gib, r"gpus\.h200\.hbm_gib"),
        (_bad_cages, r"switches\.sn5600\.n_cages"),
        (_unsorted_speeds, r"switches\.sn5600\.port_speeds_gbps: must be strictly ascending"),
    ],
)
def test_corrupted_catalog_raises_naming_entry_and_field(
    raw: dict[str, Any],
    tmp_path: Path,
    mutate: Callable[[dict[str, Any]], None],
    expected: str,
) -> None:
    data = copy.deepcopy(raw)
    mutate(data)
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    with pytest.raises(CatalogError, match=expected):
        load_catalog(path)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("- just\n- a list\n", "top level must be a mapping"),
        ("version: '1'\nsources: {}\n", "missing top-level section"),
        ("a: [unclosed\n", "not valid YAML"),
        ("version: '1'\nversion: '2'\n", "duplicate key"),
    ],
)
def test_malformed_documents(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "catalog.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CatalogError, match=expected):
        load_catalog(path)


def test_a_section_that_is_not_a_mapping(raw: dict[str, Any], tmp_path: Path) -> None:
    data = copy.deepcopy(raw)
    data["switches"] = ["qm9700", "sn5600"]
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    with pytest.raises(CatalogError, match="switches must be a non-empty mapping"):
        load_catalog(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="cannot read catalog"):
        load_catalog(tmp_path / "absent.yaml")


def test_an_unchanged_copy_loads_uncached(raw: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    copy_cat = load_catalog(str(path))
    assert copy_cat is not load_catalog()
    assert copy_cat.switches == load_catalog().switches
