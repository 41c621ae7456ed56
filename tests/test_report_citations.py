"""Where the report's sources come from: ``report.citations`` reads them from data files.

The formulas from ``assets/formulas.yaml`` (each naming the code that implements it and its
source), and the data files' source notes, with no list kept in code and no docstring read;
and the report's template escapes every value it prints.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fabric_model.catalog import load_catalog
from fabric_model.collectives import nccl_constants
from fabric_model.errors import CatalogError
from fabric_model.plant.cost import compare_vendors
from fabric_model.presets import DEFAULT_PRESET, load_preset
from fabric_model.report.citations import (
    bom_catalog_entries,
    cited_source_keys,
    entry_sources,
    formula_citations,
    formula_target,
    load_formulas,
    model_shape_source,
    nccl_sources,
    training_constant_sources,
    used_catalog_entries,
    value_text,
)
from fabric_model.resources import asset
from fabric_model.scenario import MODEL_SHAPES, field_spec
from fabric_model.training.constants import training_constants

FAMILIES = field_spec("fabric.topology").choices or ()


def test_every_formula_names_code_that_exists_and_has_a_source() -> None:
    formulas = load_formulas()
    assert len(formulas) >= 15
    assert len({f.key for f in formulas}) == len(formulas)
    for f in formulas:
        target = formula_target(f)  # raises if the module or the function is gone
        assert callable(target) or isinstance(target, property), f.implemented_by
        assert f.module.startswith("fabric_model.") and f.implemented_by.endswith(f.function)
        for text in (f.title, f.formula, f.source):
            assert text.strip() and "\n" not in text, f.key


def test_catalog_keys_the_formulas_cite_are_catalog_sources() -> None:
    sources = load_catalog().sources
    cited = cited_source_keys(f.source for f in load_formulas())
    assert cited  # the fat-tree's balanced spine count, SHARP, ...
    assert set(cited) <= set(sources), set(cited) - set(sources)


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_cites_its_own_sizing_formula(family: str) -> None:
    own = [f for f in formula_citations(family) if f.families]
    assert own, f"no formula in formulas.yaml cites the {family} family's sizing"
    assert all(family in f.families for f in own)


def test_formulas_are_picked_by_family_in_file_order() -> None:
    every = [f.key for f in load_formulas() if not f.families]
    assert {"maxmin_fair_rates", "collective_time", "model_flops", "capex_power_tco"} <= set(every)
    torus = [f.key for f in formula_citations("torus-3d")]
    assert torus == [
        f.key
        for f in load_formulas()
        if f.key in {*every, "torus3d", "switchless_bucket_allreduce"}
    ]
    assert "fat_tree_sizing" not in torus
    assert "switchless_bucket_allreduce" not in [f.key for f in formula_citations("fat-tree")]


def test_the_formulas_file_is_read_through_the_resource_loader() -> None:
    assert asset("formulas.yaml").is_file()
    (solver,) = [f for f in load_formulas() if f.key == "maxmin_fair_rates"]
    assert solver.implemented_by == "fabric_model.flows.solver.solve_maxmin"
    assert solver.source.startswith("D. Bertsekas and R. Gallager, Data Networks")


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            "{title: t, formula: f, module: m, function: g}",
            r"formulas\.x\.source: must be non-empty",
        ),
        ("{title: t, formula: f, module: m, function: g, source: ' '}", r"x\.source"),
        (
            "{title: t, formula: f, module: m, function: g, source: s, families: [slim-fly]}",
            r"x\.families: unknown slim-fly; allowed: fat-tree",
        ),
        ("{title: t, formula: f, module: m, function: g, source: s, cite: c}", r"unknown field"),
        ("[1, 2]", r"formulas\.x: must be a mapping"),
    ],
)
def test_a_malformed_formulas_file_names_the_entry(
    tmp_path: Path, entry: str, expected: str
) -> None:
    path = tmp_path / "formulas.yaml"
    path.write_text(f"version: 1\nformulas:\n  x: {entry}\n", encoding="utf-8")
    with pytest.raises(CatalogError, match=expected):
        load_formulas(path)


def test_an_empty_formulas_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "formulas.yaml"
    path.write_text("version: 1\n", encoding="utf-8")
    with pytest.raises(CatalogError, match="non-empty 'formulas' mapping"):
        load_formulas(path)


def test_catalog_entries_of_a_design_and_their_notes() -> None:
    scenario = load_preset(DEFAULT_PRESET)
    cat = load_catalog()
    comparisons = {c.vendor: c.bom for c in compare_vendors(scenario, catalog=cat)}
    own = comparisons["infiniband"]
    assert own is not None
    entries = bom_catalog_entries(own)
    assert entries[:3] == (
        ("gpus", "h100"),
        ("servers", own.hardware.server.key),
        ("vendors", "infiniband"),
    )
    assert ("switches", "qm9700") in entries
    for line in own.lines:
        assert any(key == line.key for _, key in entries)
    other = comparisons["roce"]
    assert other is not None
    used = used_catalog_entries([("this design", own), ("RoCE", other)])
    assert used[("gpus", "h100")] == ("this design", "RoCE")
    assert used[("vendors", "roce")] == ("RoCE",)
    sections = [s for s, _ in used]
    assert sections == sorted(
        sections,
        key=["gpus", "servers", "vendors", "switches", "nics", "optics", "cables"].index,
    )
    rows = entry_sources(cat, "gpus", "h100")
    assert {r.name for r in rows} == {f"gpus.h100.{f}" for f in cat.gpus["h100"].sources}
    for r in rows:
        assert r.source == cat.gpus["h100"].sources[r.name.rsplit(".", 1)[-1]]
    keys = cited_source_keys(r.source for r in rows)
    assert keys and all(k in cat.sources for k in keys)
    assert len(set(keys)) == len(keys)


def test_constant_files_and_model_shapes_give_their_sources() -> None:
    version, rows = nccl_sources()
    assert version == nccl_constants()["version"]
    assert {r.name: r.source for r in rows} == nccl_constants()["sources"]
    version, constants = training_constant_sources()
    assert version and [c.name for c in constants] == list(training_constants())
    assert all(c.source.strip() for c in constants)
    shape = model_shape_source("llama3-70b")
    assert shape is not None and shape.source == MODEL_SHAPES["llama3-70b"]["source"]
    assert shape.value == f"{MODEL_SHAPES['llama3-70b']['published_params_b']:g}"
    assert model_shape_source("custom") is None


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1024, "1,024"),
        (0.94, "0.94"),
        (12345.6, "12,346"),
        (True, "yes"),
        (None, "null"),
        ([400, 800], "400, 800"),
        (float("nan"), "-"),
    ],
)
def test_value_text(value: object, text: str) -> None:
    assert value_text(value) == text


def test_the_template_escapes_what_it_prints() -> None:
    from ui.report import render_report, report_context

    context = report_context(load_preset(DEFAULT_PRESET))
    context["scenario"]["description"] = "<b>bold</b> & 'quoted'"
    context["bom"]["table"]["rows"][0][1] = ("<i>item</i>", False)
    doc = render_report(context)
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; &#39;quoted&#39;" in doc
    assert '<td class="">&lt;i&gt;item&lt;/i&gt;</td>' in doc
    assert "<b>bold" not in doc and "<i>item" not in doc
