"""Where the report's sources come from: ``fabric_model.citations`` reads them from the model.

Docstring references (numpydoc ``References``/``Sources`` sections and "Name et al. YEAR" in
prose) and the data files' source notes, with no list kept by hand; and the report's
template escapes every value it prints.
"""

from __future__ import annotations

import pytest

from fabric_model.catalog import load_catalog
from fabric_model.citations import (
    author_year_citations,
    bom_catalog_entries,
    cited_source_keys,
    docstring_references,
    entry_sources,
    model_references,
    model_shape_source,
    nccl_sources,
    training_constant_sources,
    used_catalog_entries,
    value_text,
)
from fabric_model.collectives import nccl_constants
from fabric_model.cost import compare_vendors
from fabric_model.presets import DEFAULT_PRESET, load_preset
from fabric_model.scenario import MODEL_SHAPES
from fabric_model.training.constants import training_constants

DOC = """Do a thing.

Parameters
----------
x
    A value; see Smith et al. 1999 for why.

Notes
-----
The formula follows Narayanan et al. 2021, eq. 3. It is exact (e.g. for GPT shapes). Bubbles
follow Narayanan et al. 2021 too.

References
----------
.. [1] D. Bertsekas and R. Gallager, *Data Networks*, 2nd ed.,
   Prentice Hall, 1992.
.. [2] ``Megatron-LM`` docs.

Examples
--------
>>> 1
1
"""


def test_the_references_section_ends_at_the_next_heading() -> None:
    assert docstring_references(DOC) == (
        "D. Bertsekas and R. Gallager, Data Networks, 2nd ed., Prentice Hall, 1992.",
        "Megatron-LM docs.",
    )
    assert docstring_references("Nothing cited.\n\nNotes\n-----\nA note.") == ()
    assert docstring_references(None) == ()


def test_a_sources_section_of_paragraphs_counts_too() -> None:
    doc = "Sum.\n\n    Sources\n    -------\n    First work,\n    2020.\n\n    Second work.\n"
    assert docstring_references(doc) == ("First work, 2020.", "Second work.")


def test_author_year_citations_keep_their_first_sentence() -> None:
    found = dict(author_year_citations(DOC))
    assert list(found) == ["Smith et al. 1999", "Narayanan et al. 2021"]
    # "et al." and "e.g." do not end a sentence; the heading above is not part of it
    assert found["Narayanan et al. 2021"] == "The formula follows Narayanan et al. 2021, eq. 3."
    venue = author_year_citations("- Sizing (Al-Fares et al., SIGCOMM 2008):\n- next item")
    assert venue == (("Al-Fares et al. 2008", "Sizing (Al-Fares et al., SIGCOMM 2008)."),)


def test_model_references_merge_the_places_that_cite_a_work() -> None:
    refs = model_references(["fabric_model.training.shapes", "fabric_model.training.step"])
    (narayanan,) = [r for r in refs if r.label == "Narayanan et al. 2021"]
    assert narayanan.cited_in == ("fabric_model.training.shapes", "fabric_model.training.step")
    assert "Megatron-LM formula" in narayanan.text
    (solver,) = model_references(["fabric_model.flows.solver"])
    assert solver.label == "" and solver.cited_in == ("fabric_model.flows.solver.solve_maxmin",)
    assert "progressive filling" in solver.text


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
