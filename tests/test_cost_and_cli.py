"""Bill of materials against hand counts, vendor comparison, and the CLI contract."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fabric_model.cli import main
from fabric_model.plant.cost import bill_of_materials, compare_vendors
from fabric_model.presets import list_presets, load_preset
from fabric_model.scenario import Scenario, apply_overrides

ROOT = Path(__file__).resolve().parents[1]


def test_worked_example_1024_h100_ndr():
    # hardware-and-cost-facts section 8.3 (and the optics rule of section 6.1): 2 tiers,
    # 32 leaves / 16 spines, 1,024 NIC-side modules, 512 + 1,024 twin-port modules.
    bom = bill_of_materials(Scenario())
    assert dict(bom.topology.switches_by_tier) == {"leaf": 32, "spine": 16}
    optics = {line.where: line.quantity for line in bom.lines if line.category == "optics"}
    assert optics["nic-leaf (NIC side)"] == 1024
    assert optics["nic-leaf (leaf side)"] == 512
    assert optics["leaf-spine (leaf side)"] + optics["leaf-spine (spine side)"] == 1024
    assert bom.n_transceivers == 2560
    # capex = sum of lines; per-GPU and share are consistent
    assert bom.capex_usd == pytest.approx(sum(x.capex_usd for x in bom.lines))
    assert bom.capex_per_gpu_usd == pytest.approx(bom.capex_usd / 1024)
    assert 0.08 < bom.network_share < 0.20  # facts 8.2: 8-15% default, 10-20% band
    assert 60_000 < bom.power_w < 130_000  # facts 8.3: ~96 kW


def test_copper_at_short_reach_removes_optics():
    s = apply_overrides(Scenario(), {"fabric.nic_leaf_m": 2})
    bom = bill_of_materials(s)
    nic_side = [x for x in bom.lines if x.where.startswith("nic-leaf")]
    assert {x.category for x in nic_side} == {"cables"}
    assert nic_side[0].quantity == 512  # 1:2 splitter DACs: one per twin-port cage
    assert bom.capex_usd < bill_of_materials(Scenario()).capex_usd


def test_price_overrides_apply_where_documented():
    base = bill_of_materials(Scenario())
    cheap = apply_overrides(Scenario(), {"costs.switch_usd": 1000, "costs.optic_nic_usd": 1})
    bom = bill_of_materials(cheap)
    assert bom.capex_by_category_usd["switches"] == 48 * 1000
    assert bom.capex_by_category_usd["optics"] < base.capex_by_category_usd["optics"]
    by_vendor = {c.vendor: c.bom for c in compare_vendors(cheap)}
    # switch price is the scenario vendor's only; NIC-side optics are vendor-neutral
    assert by_vendor["spectrum-x"].capex_by_category_usd["switches"] > 24 * 1000
    sx_optics = by_vendor["spectrum-x"].lines
    assert all(x.unit_price_usd == 1 for x in sx_optics if x.where.endswith("(NIC side)"))


def test_tco_formula():
    bom = bill_of_materials(Scenario())
    c = bom.costs
    expected = bom.power_w / 1000 * c.pue * 8760 * c.years * c.electricity_usd_per_kwh
    assert bom.tco_usd == pytest.approx(bom.capex_usd + expected)


def test_ethernet_radix_halves_switches_not_optics():
    # facts 1.1: at 400G a 51.2T Ethernet switch has radix 128 vs QM9700's 64
    results = {c.vendor: c.bom for c in compare_vendors(Scenario())}
    ib, sx = results["infiniband"], results["spectrum-x"]
    assert sx.topology.n_switches * 2 == ib.topology.n_switches
    assert sx.n_transceivers == ib.n_transceivers


def test_vendor_without_the_speed_is_reported_not_faked():
    s = apply_overrides(Scenario(), {"fabric.link_gbps": 1600, "fabric.vendor": "spectrum-x"})
    results = {c.vendor: c for c in compare_vendors(s)}
    assert results["infiniband"].bom is None
    assert "fabric.link_gbps" in results["infiniband"].error  # no 1.6T InfiniBand switch
    # Ethernet has 1.6T switches, but no GPU in the catalog can feed a 1.6T NIC over PCIe
    assert results["spectrum-x"].bom is None
    assert "can feed" in results["spectrum-x"].error
    s = apply_overrides(Scenario(), {"fabric.link_gbps": 800, "cluster.gpu": "b300"})
    assert all(c.bom is not None for c in compare_vendors(s))


@pytest.mark.parametrize("preset", [p.name for p in list_presets()])
def test_every_preset_builds_and_prices(preset):
    bom = bill_of_materials(load_preset(preset))
    assert bom.capex_usd > 0 and bom.power_w > 0
    assert bom.n_nics == bom.topology.n_endpoints


# ---------------------------------------------------------------------------------- CLI


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "fabric_model", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_presets_json():
    out = run_cli("presets", "--json")
    assert out.returncode == 0
    rows = json.loads(out.stdout)
    assert {"name", "description"} <= set(rows[0]) and len(rows) == len(list_presets())


def test_cli_bom_json_contract():
    out = run_cli("bom", "--json", "--set", "cluster.n_gpus=4096")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    for key in (
        "switches_by_tier",
        "n_switches",
        "n_links",
        "n_transceivers",
        "n_cables",
        "n_nics",
        "capex_usd",
        "power_w",
        "max_switch_hops",
        "bisection_GBps",
    ):
        assert key in d
    assert set(d["capex_usd"]) == {"switches", "nics", "optics", "cables", "total"}
    assert d["switches_by_tier"] == {"leaf": 128, "spine": 128, "core": 64}


def test_cli_text_table(capsys):
    assert main(["bom", "--preset", "dgx-h100-spectrum-x"]) == 0
    text = capsys.readouterr().out
    assert "switches by tier: leaf 16, spine 8" in text and "capex USD" in text
    assert main(["bom", "--compare"]) == 0
    assert "spectrum-x" in capsys.readouterr().out


def test_cli_scenario_file(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text("cluster: {n_gpus: 2048}\nfabric: {vendor: roce}\n")
    assert main(["bom", "--scenario", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["vendor"] == "roce"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["bom", "--set", "fabric.link_gbps=300"], "fabric.link_gbps = '300': must be one of"),
        (["bom", "--set", "fabric.linkgbps=800"], "unknown key"),
        (["bom", "--set", "cluster.n_gpus"], "expected KEY=VALUE"),
        (
            ["bom", "--set", "cluster.n_gpus=131072", "--set", "fabric.tiers=3"],
            "fabric.tiers: a fat-tree of 3 tiers",
        ),
        (["bom", "--preset", "nope"], "preset = 'nope': must be one of"),
        (["bom", "--scenario", "/nonexistent.yaml"], "cannot read scenario file"),
        (["bom", "--frobnicate"], "unrecognized arguments"),
        (["nosuchverb"], "invalid choice"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(args, words):
    out = run_cli(*args)
    assert out.returncode == 2
    assert words in out.stderr
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_cli_malformed_scenario_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster: {n_gpus: [\n")
    out = run_cli("bom", "--scenario", str(bad))
    assert out.returncode == 2 and "malformed YAML/JSON at line" in out.stderr


def test_cli_help_on_every_verb():
    from fabric_model.cli import VERBS

    for name in VERBS:
        out = run_cli(name, "--help")
        assert out.returncode == 0 and "--json" in out.stdout


def test_model_never_imports_streamlit_or_plotly():
    code = (
        "import sys, fabric_model.cli, fabric_model.plant.cost, fabric_model.plant.design;"
        "import fabric_model.topology, fabric_model.catalog, fabric_model.scenario;"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('streamlit', 'plotly')];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout


@pytest.mark.parametrize("verb", ["step", "collective"])
def test_small_default_verbs_load_no_compiler(verb: str) -> None:
    """The default step and collective run no kernel, so they never import numba (their start)."""
    code = (
        "import sys\n"
        "from fabric_model.cli import main\n"
        "try:\n"
        f"    main([{verb!r}])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "sys.exit(3 if 'numba' in sys.modules else 0)\n"
    )
    # without the suite's full flow-set checks, whose duplicate-link scan is a kernel
    env = {k: v for k, v in os.environ.items() if k != "FABRIC_MODEL_CHECK_FLOWS"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, (out.returncode, out.stderr[-500:])


def test_preload_names_every_kernel_module() -> None:
    """``fabric_model.kernels.KERNEL_MODULES`` is every module that compiles a kernel."""
    from fabric_model import kernels

    pkg = ROOT / "fabric_model"
    compiling = {
        ".".join(f.relative_to(ROOT).with_suffix("").parts)
        for f in pkg.rglob("*.py")
        if "from fabric_model._jit import" in f.read_text()
    }
    assert compiling == set(kernels.KERNEL_MODULES)
    assert kernels.preload() >= 0.0
