"""The registries: topology families, vendors (the catalog) and collective algorithms.

Each registry is the one place a family, vendor or algorithm is described; the old tables
(``BUILDERS``, ``POLICIES``, ``PLANE_FAMILIES``, ``TOPOLOGY_LABELS``, ``VENDOR_LABELS``,
``OP_ALGORITHMS`` ...) are views of it. These tests hold every entry usable end to end (a
family builds, routes with each of its policies and draws; a vendor's defaults exist; an
algorithm runs every operation it lists and refuses the others) and a vendor added as data
only reaching the labels, colours and the vendor comparison.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from fabric_model import families
from fabric_model.catalog import DEFAULT_CATALOG_PATH, load_catalog
from fabric_model.collectives import (
    ALGORITHMS,
    ALGOS,
    AUTO_CANDIDATES,
    OPS,
    AlgorithmUnavailableError,
    auto_candidates,
    collective,
    registry,
    symmetry,
)
from fabric_model.collectives.context import CLASS_FAMILIES
from fabric_model.errors import CatalogError, InfeasibleDesignError, ScenarioError
from fabric_model.families import FAMILIES, FAMILY_KEYS, OKABE_ITO, family, family_label
from fabric_model.plant.cost import compare_vendors
from fabric_model.plant.design import SWITCHLESS, build_topology
from fabric_model.presets import DEFAULT_PRESET, load_preset
from fabric_model.routing import POLICIES, route
from fabric_model.scenario import VENDORS, Scenario, apply_overrides, field_spec
from fabric_model.topology import BUILDERS, PLANE_FAMILIES
from fabric_model.units import GIB
from fabric_model.validate import compare as validate_compare
from ui import facade
from ui.diagrams import DIAGRAMS, STYLES, sketch
from ui.explore import TOPOLOGY_SYMBOLS
from ui.theme import (
    ALGO_COLORS,
    ALGO_LABELS,
    TOPOLOGY_COLORS,
    TOPOLOGY_LABELS,
    VENDOR_COLORS,
    VENDOR_DASHES,
    VENDOR_LABELS,
    topology_label,
    vendor_label,
    vendor_styles,
)

HEX = re.compile(r"#[0-9A-Fa-f]{6}")
MIB = 2**20


def _on(family_name: str, **over: object) -> Scenario:
    """A 64-GPU (8 NVLink domains) H100 design on ``family_name``."""
    return apply_overrides(
        Scenario(), {"cluster.n_gpus": 64, "fabric.topology": family_name, **over}
    )


# --------------------------------------------------------------------------------------
# topology families
# --------------------------------------------------------------------------------------


def test_family_views_are_the_registry() -> None:
    names = list(FAMILIES)
    assert list(BUILDERS) == names and list(field_spec("fabric.topology").choices) == names
    assert {n: BUILDERS[n] for n in names} == {n: f.builder for n, f in FAMILIES.items()}
    assert POLICIES == {n: f.policies for n, f in FAMILIES.items()}
    assert PLANE_FAMILIES == tuple(n for n, f in FAMILIES.items() if f.plane_capable)
    assert {n for n, f in FAMILIES.items() if f.switchless} == SWITCHLESS
    assert CLASS_FAMILIES == tuple(n for n, f in FAMILIES.items() if f.class_solve)
    # the symmetry flag and the orbit solver's own branches say the same
    assert set(symmetry.SYMMETRIC_FAMILIES) == set(symmetry._FAMILIES)
    assert TOPOLOGY_LABELS == {n: f.label for n, f in FAMILIES.items()}
    assert TOPOLOGY_COLORS == {n: f.color for n, f in FAMILIES.items()}
    assert TOPOLOGY_SYMBOLS == {n: f.marker for n, f in FAMILIES.items()}
    assert "nope" not in BUILDERS and BUILDERS.get("nope") is None
    with pytest.raises(KeyError):
        BUILDERS["nope"]


@pytest.mark.parametrize("name", list(FAMILIES))
def test_every_family_is_complete(name: str) -> None:
    f = FAMILIES[name]
    assert f.name == name and f.label and family_label(name) == f.label
    assert HEX.fullmatch(f.color) and f.marker
    assert f.diagram in STYLES and DIAGRAMS[name] is STYLES[f.diagram]
    assert f.policies and len(set(f.policies)) == len(f.policies)
    assert set(f.keys) <= set(FAMILY_KEYS)
    assert not (f.switchless and f.plane_capable)
    topo = build_topology(_on(name))
    assert topo.family == name and topo.n_gpus == 64
    assert sketch(topo).bundles  # its diagram style draws it


@pytest.mark.parametrize(
    ("name", "policy"), [(n, p) for n, f in FAMILIES.items() for p in f.policies]
)
def test_every_family_routes_with_each_of_its_policies(name: str, policy: str) -> None:
    (row,) = collective(_on(name, **{"fabric.routing": policy}), "allreduce", "ring", [64 * MIB])
    assert row.busbw_GBps > 0 and row.time_us > 0


def test_a_policy_a_family_does_not_list_is_refused_by_its_router() -> None:
    for name, f in FAMILIES.items():
        topo = build_topology(_on(name, **{"cluster.n_gpus": 1024}))  # 2 tiers: no shortcut
        other = next(p for p in ("dmodk", "dor", "valiant") if p not in f.policies)
        ends = np.array([0], dtype=np.int64)
        with pytest.raises(InfeasibleDesignError) as err:
            route(topo, ends, ends + 1, other)
        assert err.value.key == "fabric.routing", name


def test_unknown_family_names_the_key_and_the_families() -> None:
    with pytest.raises(ScenarioError, match="fat-tree") as err:
        family("slim-fly")
    assert err.value.key == "fabric.topology"
    assert family_label("slim-fly") == "slim-fly" == topology_label("slim-fly")


def test_family_keys_are_scenario_keys() -> None:
    for key in FAMILY_KEYS:
        field_spec(key)  # raises on an unknown key
    assert {n for n, f in FAMILIES.items() if "fabric.tiers" in f.keys} >= {"fat-tree"}


def test_the_registry_imports_no_builder() -> None:
    # the scenario layer (and so the CLI's presets and keys) reads the registry without
    # importing numpy or a family's module
    code = (
        "import sys, fabric_model.scenario, fabric_model.families as f; "
        "assert f.FAMILIES; "
        "print(sorted(m for m in sys.modules if m == 'numpy' or m.startswith('fabric_model.top')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def test_okabe_ito_is_shared_with_the_theme() -> None:
    from ui import theme

    assert theme.OKABE_ITO is OKABE_ITO
    assert families.OKABE_ITO["blue"] == "#0072B2"


# --------------------------------------------------------------------------------------
# vendors (the catalog's vendors section)
# --------------------------------------------------------------------------------------


def test_every_catalog_vendor_has_labels_and_defaults_that_exist() -> None:
    cat = load_catalog()
    assert tuple(cat.vendors) == VENDORS == field_spec("fabric.vendor").choices
    any_policy = {p for f in FAMILIES.values() for p in f.policies}
    for key, v in cat.vendors.items():
        assert VENDOR_LABELS[key] == v.display_label and vendor_label(key) == v.display_label
        assert HEX.fullmatch(VENDOR_COLORS[key]) and VENDOR_DASHES[key]
        assert v.link_speeds_gbps
        assert all(s in cat.switches for s in v.switch_by_gbps.values())
        assert all(n in cat.nics for n in v.nic_by_gbps.values())
        assert v.default_routing in any_policy
    assert len(set(VENDOR_COLORS.values())) == len(VENDOR_COLORS)
    assert vendor_label("acme") == "acme"  # an unknown vendor shows as itself


def test_compared_vendors_come_from_the_catalog() -> None:
    cat = load_catalog()
    compared = tuple(k for k, v in cat.vendors.items() if v.compared)
    assert compared == ("infiniband", "spectrum-x", "roce") == facade.EFFECT_VENDORS


def _catalog_with_acme(tmp_path: Path, **extra: object) -> Path:
    doc = yaml.safe_load(DEFAULT_CATALOG_PATH.read_text(encoding="utf-8"))
    acme = {k: v for k, v in doc["vendors"]["roce"].items() if k not in ("label", "color")}
    doc["vendors"]["acme"] = {**acme, "name": "Acme Ethernet", "short_label": "Acme", **extra}
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def test_a_vendor_added_as_data_only_gets_labels_colour_and_a_comparison(tmp_path: Path) -> None:
    cat = load_catalog(_catalog_with_acme(tmp_path))
    styles = vendor_styles(cat)
    assert styles["acme"]["label"] == "Acme Ethernet" and styles["acme"]["short_label"] == "Acme"
    # the next Okabe-Ito colour no vendor names, distinct from the others
    assert styles["acme"]["color"] in OKABE_ITO.values()
    assert styles["acme"]["color"] not in {s["color"] for k, s in styles.items() if k != "acme"}
    assert {k: s for k, s in styles.items() if k != "acme"} == vendor_styles(load_catalog())
    rows = compare_vendors(load_preset(DEFAULT_PRESET), catalog=cat)
    assert [r.vendor for r in rows] == ["infiniband", "spectrum-x", "roce", "acme"]
    acme = rows[-1]
    assert acme.error is None and acme.bom is not None and acme.bom.capex_usd > 0


def test_a_vendor_colour_must_be_hex(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match=r"vendors\.acme\.color"):
        load_catalog(_catalog_with_acme(tmp_path, color="teal"))


# --------------------------------------------------------------------------------------
# collective algorithms
# --------------------------------------------------------------------------------------

#: 64 GPUs in 8 NVLink domains, SHARP and NVLS available (InfiniBand NDR, H100)
MULTI = apply_overrides(load_preset(DEFAULT_PRESET), {"cluster.n_gpus": 64})
#: one NVLink domain
ONE = apply_overrides(load_preset(DEFAULT_PRESET), {"cluster.n_gpus": 8})


def test_algorithm_views_are_the_registry() -> None:
    assert ALGOS == (*ALGORITHMS, "auto")
    for op in OPS:
        assert facade.OP_ALGORITHMS[op] == registry.OP_ALGORITHMS[op]
        assert set(facade.OP_ALGORITHMS[op]) == {n for n, a in ALGORITHMS.items() if op in a.ops}
        assert set(AUTO_CANDIDATES[op]) == {n for n, a in ALGORITHMS.items() if op in a.auto_ops}
        assert set(facade.DEFAULT_ALGORITHMS[op]) <= set(facade.OP_ALGORITHMS[op])
    for name, a in ALGORITHMS.items():
        assert ALGO_LABELS[name] == a.label and ALGO_COLORS[name] == a.color
        assert a.nccl and a.valid
        if name not in ("hierarchical", "direct"):  # all-to-all variants: PXN on or off
            assert all(validate_compare.nccl_setting(name, op) == a.nccl for op in a.ops)
        for alias, label in a.aliases:
            assert ALGO_LABELS[alias] == label and ALGO_COLORS[alias] == a.color
        assert set(a.all_ops) <= set(OPS) and set(a.auto_ops) <= set(a.all_ops)
    assert "auto" in ALGO_LABELS


@pytest.mark.parametrize(("algo", "op"), [(n, op) for n, a in ALGORITHMS.items() for op in a.ops])
def test_every_listed_pair_runs(algo: str, op: str) -> None:
    # SHARP all-gather / reduce-scatter (NVLS + IB SHARP) needs SHARP on and registered buffers
    s = apply_overrides(MULTI, {"fabric.sharp": True, "nccl.registered_buffers": True})
    (row,) = collective(s if algo == "sharp" else MULTI, op, algo, [GIB])
    assert row.op == op and row.busbw_GBps > 0


@pytest.mark.parametrize(
    ("algo", "op"), [(n, op) for n, a in ALGORITHMS.items() for op in a.one_domain_ops]
)
def test_one_domain_pairs_run_inside_one_domain_only(algo: str, op: str) -> None:
    (row,) = collective(ONE, op, algo, [GIB])
    assert row.busbw_GBps > 0
    with pytest.raises(AlgorithmUnavailableError, match="one NVLink domain"):
        collective(MULTI, op, algo, [GIB])


@pytest.mark.parametrize(
    ("algo", "op"),
    [(n, op) for n, a in ALGORITHMS.items() for op in OPS if op not in a.all_ops],
)
def test_every_unlisted_pair_is_refused(algo: str, op: str) -> None:
    with pytest.raises(AlgorithmUnavailableError, match=rf"{algo} runs .* only, not {op}$"):
        collective(ONE, op, algo, [MIB])


def test_auto_flags_switch_candidates_off() -> None:
    on = apply_overrides(MULTI, {"fabric.sharp": True}).fabric
    # symmetric kernels need registered buffers (nccl.registered_buffers, off by default)
    assert (*auto_candidates(on, "allreduce"), "symmetric") == AUTO_CANDIDATES["allreduce"]
    assert "sharp" not in auto_candidates(MULTI.fabric, "allreduce")  # fabric.sharp off
    off = apply_overrides(MULTI, {"fabric.sharp": False, "fabric.nvls": False}).fabric
    assert auto_candidates(off, "allreduce") == ("ring", "tree")
    assert auto_candidates(off, "allgather") == ("pat", "ring")  # PAT: NCCL 2.23+


def test_every_step_term_reads_apart_from_the_others() -> None:
    """No two step terms share colour and hatch (compute and the optimizer were two greys)."""
    from ui.training_figures import TERMS, term_marker

    looks = [(term_marker(t)["color"], term_marker(t)["pattern"]["shape"]) for t in TERMS]
    assert len(set(looks)) == len(TERMS)
    hatch = {t: term_marker(t)["pattern"]["shape"] for t in ("optimizer", "compute")}
    assert hatch["optimizer"] != hatch["compute"]
