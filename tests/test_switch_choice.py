"""fabric.switch = auto (N3, N10), co-packaged optics (fabric.optics), the Vera Rubin parts and
the GPU / NIC / NVLink-domain compatibility table (issue 31, items 4 and 8).

Sources are the catalog's: Quantum-X800 runs 288 x 400G legs [SL3]; Quantum-X Photonics,
Spectrum-X Photonics and their ~9 W co-packaged ports [SV3] [SV5]; Vera Rubin NVL72 [SV1];
an H100 NVLink domain reaches 256 GPUs only in the NVLink Switch System [SV9].
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_model.catalog import compatibility, load_catalog
from fabric_model.cli import main
from fabric_model.errors import FabricModelError, InfeasibleDesignError, ScenarioError
from fabric_model.plant.cost import bill_of_materials
from fabric_model.plant.design import _switch_candidates, resolve_hardware
from fabric_model.presets import load_preset
from fabric_model.scenario import Scenario, apply_overrides


def sc(**over: object) -> Scenario:
    return apply_overrides(Scenario(), dict(over))


# --------------------------------------------------------------------------------------
# the choice
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpu", "n_gpus", "vendor", "link", "switch"),
    [
        ("h100", 16_384, "infiniband", 400, "qm9700"),  # DGX H100 SuperPOD [S47] (CX-7 lanes)
        ("b200", 4_096, "infiniband", 400, "qm9700"),  # DGX B200 SuperPOD [S47]
        ("gb300", 4_608, "infiniband", 800, "q3400"),  # DGX B300 XDR SuperPOD [S49]
        ("h100", 24_576, "spectrum-x", 400, "sn5600"),  # Spectrum-X on BlueField-3 [S105]
        ("h100", 24_576, "roce", 400, "th5"),
    ],
)
def test_reference_designs_keep_their_switch(gpu, n_gpus, vendor, link, switch) -> None:
    over = {"cluster.gpu": gpu, "cluster.n_gpus": n_gpus, "fabric.vendor": vendor}
    if gpu == "gb300":
        over |= {"cluster.gpus_per_node": 4, "cluster.nvlink_domain": 72}
    hw = resolve_hardware(sc(**over, **{"fabric.link_gbps": link}))
    assert hw.switch.key == switch


def test_explicit_switch_wins() -> None:
    base = {"cluster.gpu": "b300", "cluster.n_gpus": 16_384, "fabric.vendor": "infiniband"}
    hw = resolve_hardware(
        sc(**base, **{"fabric.link_gbps": 800, "fabric.planes": 2, "fabric.switch": "qm9700"})
    )
    assert hw.switch.key == "qm9700" and hw.switch_choice == ""


def test_lane_rate_and_announced_gates_say_why() -> None:
    cat = load_catalog()
    s = sc(**{"cluster.gpu": "h100", "fabric.vendor": "infiniband", "fabric.link_gbps": 400})
    hw = resolve_hardware(s)
    ok, why = _switch_candidates(s, cat, hw.vendor, hw.switch, hw.nic, hw.gpu)
    assert [x.key for x in ok] == ["qm9700"]
    assert any("q3400: 200G lanes, cx7 has 100G lanes" in w for w in why)
    s2 = sc(**{"cluster.gpu": "b300", "fabric.vendor": "spectrum-x", "fabric.link_gbps": 800})
    hw2 = resolve_hardware(s2)
    _, why2 = _switch_candidates(s2, cat, hw2.vendor, hw2.switch, hw2.nic, hw2.gpu)
    assert any(w.startswith("sn6810: announced") for w in why2)


CASES = st.fixed_dictionaries(
    {
        "cluster.gpu": st.sampled_from(["b300", "vr200"]),
        "cluster.n_gpus": st.sampled_from([512, 2_048, 9_216, 20_480, 65_536]),
        "fabric.vendor": st.sampled_from(["infiniband", "spectrum-x", "roce"]),
        "fabric.link_gbps": st.sampled_from([400, 800, 1600]),
        "fabric.planes": st.sampled_from([1, 2]),
        "fabric.oversubscription": st.sampled_from([1.0, 3.0]),
    }
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CASES)
def test_auto_never_needs_more_tiers_nor_costs_more_than_an_eligible_switch(over) -> None:
    if over["cluster.gpu"] == "vr200":
        over = {**over, "cluster.gpus_per_node": 4, "cluster.nvlink_domain": 72}
    try:
        s = sc(**over)
        auto = bill_of_materials(s)
    except FabricModelError:
        return  # a design the catalog cannot build is refused, not chosen
    cat, hw = load_catalog(), auto.hardware
    cands, _ = _switch_candidates(s, cat, hw.vendor, hw.switch, hw.nic, hw.gpu)
    assert hw.switch.key in {c.key for c in cands}
    for c in cands:
        variant = dataclasses.replace(s, fabric=dataclasses.replace(s.fabric, switch=c.key))
        try:
            other = bill_of_materials(variant)
        except FabricModelError:
            continue
        assert auto.topology.tiers <= other.topology.tiers
        if auto.topology.tiers == other.topology.tiers:
            assert auto.capex_usd <= other.capex_usd * (1 + 1e-12)


# --------------------------------------------------------------------------------------
# every design says what shapes it (N10)
# --------------------------------------------------------------------------------------


def test_compare_and_explore_show_switch_radix_pod_and_limit(capsys) -> None:
    args = ["--preset", "meta-24k-roce", "--set", "cluster.n_gpus=16384", "--json"]
    assert main(["bom", "--compare", *args]) == 0
    rows = {r["vendor"]: r for r in json.loads(capsys.readouterr().out)}
    ib, roce = rows["infiniband"], rows["roce"]
    assert (ib["switch"], ib["switch_radix"]) == ("qm9700", 64)
    assert (roce["switch"], roce["switch_radix"]) == ("th5", 128)
    # the 7:1 spine taper sets the pod: a spine's 7/8 down-ports take 56 leaves of 32 ports
    # (radix 64) or 112 leaves of 64 (radix 128)
    assert (ib["pod_nics"], roce["pod_nics"]) == (56 * 32, 112 * 64)
    assert "7:1 spine taper" in ib["limit"] and "radix 64 at 400G" in ib["limit"]
    assert main(["bom", "--compare", *args[:-1]]) == 0
    text = capsys.readouterr().out
    assert "pod_nics" in text and "1,792" in text
    vary = ["--vary", "fabric.vendor=roce,infiniband", "--set", "model.name=llama3-8b"]
    assert main(["explore", *args, *vary]) == 0
    designs = json.loads(capsys.readouterr().out)["designs"]
    shape = {d["keys"]["fabric.vendor"]: (d["switch"], d["switch_radix"]) for d in designs}
    assert shape == {"roce": ("th5", 128), "infiniband": ("qm9700", 64)}
    assert all(d["limit"] and d["pod_nics"] for d in designs)


# --------------------------------------------------------------------------------------
# co-packaged optics
# --------------------------------------------------------------------------------------

XDR = {"cluster.gpu": "gb300", "cluster.gpus_per_node": 4, "cluster.nvlink_domain": 72}


def test_cpo_cuts_optics_power_and_is_priced() -> None:
    plug = bill_of_materials(
        sc(
            **XDR,
            **{"cluster.n_gpus": 4_608, "fabric.vendor": "infiniband", "fabric.link_gbps": 800},
        )
    )
    cpo = bill_of_materials(
        sc(
            **XDR,
            **{
                "cluster.n_gpus": 4_608,
                "fabric.vendor": "infiniband",
                "fabric.link_gbps": 800,
                "fabric.optics": "cpo",
            },
        )
    )
    sw = cpo.hardware.switch
    assert cpo.hardware.optics == "cpo" and plug.hardware.optics == "pluggable"
    # every switch port of every link class becomes one co-packaged 800G port
    ports = sum(
        g.n_switches * g.ports_per_switch for lc in cpo.topology.links for g in lc.port_groups
    )
    assert cpo.n_cpo_ports == ports
    assert cpo.n_lasers == pytest.approx(ports * sw.cpo_lasers_per_port)
    cpo_w = sum(x.power_w for x in cpo.lines if x.key.endswith(":cpo"))
    assert cpo_w == pytest.approx(ports * sw.cpo_port_w)
    assert cpo.power_by_category_w["optics"] < plug.power_by_category_w["optics"]
    # the NIC ends keep their pluggable modules; the switch ends have none
    assert cpo.n_transceivers == cpo.n_nics
    assert cpo.to_dict()["optics"] == "cpo"


def test_cpo_with_auto_switch_picks_a_switch_that_has_a_cpo_variant() -> None:
    over = {"cluster.gpu": "b300", "fabric.vendor": "roce", "fabric.link_gbps": 800}
    hw = resolve_hardware(sc(**over, **{"fabric.optics": "cpo"}))
    assert (hw.switch.key, hw.optics) == ("th6", "cpo")  # Tomahawk 5 has no CPO variant
    assert "the only switch of roce that qualifies (th5: no CPO variant" in hw.switch_choice


def test_cpo_refused_for_a_switch_without_a_cpo_variant(capsys) -> None:
    with pytest.raises(InfeasibleDesignError) as err:
        resolve_hardware(sc(**{"fabric.vendor": "infiniband", "fabric.optics": "cpo"}))
    assert err.value.key == "fabric.optics" and "q3400" in str(err.value)
    rc = main(["bom", "--set", "fabric.optics=cpo", "--set", "fabric.switch=qm9700"])
    assert rc == 2 and "fabric.optics" in capsys.readouterr().err
    with pytest.raises(InfeasibleDesignError, match="only with co-packaged"):
        resolve_hardware(
            sc(
                **{
                    "cluster.gpu": "vr200",
                    "cluster.gpus_per_node": 4,
                    "cluster.nvlink_domain": 72,
                    "fabric.vendor": "spectrum-x",
                    "fabric.link_gbps": 1600,
                    "fabric.optics": "pluggable",
                    "fabric.switch": "sn6810",
                }
            )
        )


# --------------------------------------------------------------------------------------
# Vera Rubin and compatibility
# --------------------------------------------------------------------------------------


def test_vera_rubin_parts_are_flagged_announced_and_sourced() -> None:
    cat = load_catalog()
    for entry in (cat.gpu("vr200"), cat.nic("cx9"), cat.switch("sn6810"), cat.switch("sn6800")):
        assert entry.announced and "ANNOUNCED" in entry.remark.upper()
    vr = cat.gpu("vr200")
    assert vr.nvlink_GBps == 1800 and vr.hbm_gb == 288 and vr.fp4_tflops
    assert "[SV1]" in vr.sources["nvlink_GBps"] and "[SV1]" in vr.sources["fp4_tflops"]
    assert cat.switch("sn6800").radix(800) == 512 and cat.switch("th6").radix(200) == 512


def test_vr_preset_builds_on_announced_spectrum_x_photonics() -> None:
    p = load_preset("vr-nvl72-spectrum-x")
    assert "ANNOUNCED" in p.description
    bom = bill_of_materials(p)
    assert bom.hardware.switch.key == "sn6800" and bom.hardware.optics == "cpo"
    assert bom.topology.tiers == 2 and bom.topology.planes == 2
    assert "announced, not shipping" in bom.hardware.switch_choice


def test_nvlink_domain_beyond_the_gpus_largest_is_refused(capsys) -> None:
    with pytest.raises(ScenarioError, match="at most 256") as err:
        resolve_hardware(sc(**{"cluster.n_gpus": 9_216, "cluster.nvlink_domain": 576}))
    assert err.value.key == "cluster.nvlink_domain"
    resolve_hardware(sc(**{"cluster.n_gpus": 9_216, "cluster.nvlink_domain": 256}))
    rc = main(
        [
            "collective",
            "--sizes",
            "1G",
            "--set",
            "cluster.gpu=b200",
            "--set",
            "cluster.nvlink_domain=16",
        ]
    )
    assert rc == 2 and "cluster.nvlink_domain" in capsys.readouterr().err


def test_compat_table_lists_domains_nics_and_speeds(capsys) -> None:
    rows = {r["gpu"]: r for r in compatibility(load_catalog())}
    assert rows["h100"]["nvlink_domain_max"] == 256 and rows["gb200"]["nvlink_domain_max"] == 72
    assert 800 not in rows["h100"]["link_gbps"] and 800 in rows["b300"]["link_gbps"]
    assert 1600 in rows["vr200"]["nics"]["cx9"]
    assert main(["compat"]) == 0
    assert "vr200 (announced)" in capsys.readouterr().out
