"""The HTML report (``ui.report.build_report``) and the ``report`` CLI verb.

The report must parse, show the model's own numbers, carry plotly.js exactly once and load
nothing from the network, escape user text, turn infeasible parts into messages, and list
the sources of its numbers. The CLI writes it; ``fabric_model`` stays free of plotly and
streamlit at import time.

The template escapes with markupsafe (``'`` as ``&#39;``, ``"`` as ``&#34;``), so the
expected text is escaped the same way (:func:`esc`).
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markupsafe import escape
from plotly.offline import get_plotlyjs

import fabric_model
from fabric_model.catalog import load_catalog
from fabric_model.cli import main
from fabric_model.collectives import collective, nccl_constants
from fabric_model.plant.cost import bill_of_materials, compare_vendors
from fabric_model.presets import DEFAULT_PRESET, load_preset
from fabric_model.report.citations import formula_citations, training_constant_sources
from fabric_model.scenario import MODEL_SHAPES, Scenario, apply_overrides, dump_scenario
from fabric_model.training import training_step
from ui.report import SECTIONS, build_report, scaling_sizes
from ui.report_button import REPORT_BUTTON_KEY, report_file_name

ROOT = Path(__file__).resolve().parents[1]
PRESETS = (DEFAULT_PRESET, "gb300-nvl72-xdr", "meta-24k-roce")
WHEN = datetime(2026, 3, 14, 15, 9, tzinfo=UTC)
#: The report's charts, by the ``fig-<name>`` id of their div.
CHARTS = ("step", "busbw", "scaling-eff", "scaling-mfu", "capex", "power", "topology")


def esc(text: str) -> str:
    """``text`` as the report's template prints it (autoescaped by markupsafe)."""
    return str(escape(text))


VOID = {"meta", "link", "br", "hr", "img", "input", "col", "wbr", "source", "area", "base"}


class _Doc(HTMLParser):
    """Parse a document strictly enough: every non-void element closed in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: dict[str, list[str]] = {}
        self.scripts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        if self.stack:
            self.text.setdefault(self.stack[-1], []).append(data)
            if self.stack[-1] == "script":
                self.scripts.append(data)


def parse(doc: str) -> _Doc:
    parser = _Doc()
    parser.feed(doc)
    parser.close()
    return parser


@pytest.fixture(scope="module")
def reports() -> dict[str, tuple[Scenario, str]]:
    out = {}
    for name in PRESETS:
        scenario = load_preset(name)
        out[name] = (scenario, build_report(scenario, generated_at=WHEN))
    return out


# --------------------------------------------------------------------------------------
# the document
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", PRESETS)
def test_report_parses_and_has_every_section(reports: dict, name: str) -> None:
    scenario, doc = reports[name]
    parsed = parse(doc)
    assert parsed.errors == []
    assert parsed.stack == []
    assert doc.startswith("<!DOCTYPE html>")
    h2 = [t.strip() for t in parsed.text.get("h2", [])]
    assert h2 == [title for _, title in SECTIONS]
    assert "".join(parsed.text["title"]) == f"Fabric report: {name}"
    assert f"Fabric what-if report: {name}" in parsed.text["h1"]
    assert esc(scenario.description) in doc
    ids = {attrs.get("id") for _, attrs in parsed.tags}
    assert {sid for sid, _ in SECTIONS} <= ids
    assert {f"fig-{c}" for c in CHARTS} <= ids
    assert doc.count("Plotly.newPlot(") == len(CHARTS)
    assert 'class="problem"' not in doc  # these presets model completely


@pytest.mark.parametrize("name", PRESETS)
def test_report_is_self_contained(reports: dict, name: str) -> None:
    _, doc = reports[name]
    bundle = get_plotlyjs()
    assert doc.count(bundle) == 1
    assert len(re.findall(r"plotly\.js v\d+\.\d+\.\d+", doc)) == 1
    assert not re.search(r"<script[^>]*\bsrc\s*=", doc, re.I)
    assert not re.search(r"<(link|img|iframe|embed|object)\b", doc, re.I)
    assert "cdn.plot.ly" not in doc.replace(bundle, "")
    # the bundle plus a modest amount of page and figure JSON
    assert len(doc.encode()) - len(bundle.encode()) < 600_000


@pytest.mark.parametrize("name", PRESETS)
def test_report_shows_the_models_numbers(reports: dict, name: str) -> None:
    scenario, doc = reports[name]
    step = training_step(scenario)
    bom = bill_of_materials(scenario)
    allreduce = collective(scenario, "allreduce", "auto", [2**30])[0]
    alltoall = collective(scenario, "alltoall", "auto", [2**30])[0]
    assert step.feasible
    assert f"{step.step_time_s:,.2f} s" in doc
    assert f"{step.mfu:.1%}" in doc
    assert f"${bom.capex_usd:,.0f}" in doc
    assert f"${bom.capex_per_gpu_usd:,.0f}" in doc
    assert f"{allreduce.busbw_GBps:,.1f} GB/s" in doc
    values = dict(re.findall(r'data-metric="([a-z_A-Z]+)" data-value="([^"]+)"', doc))
    assert float(values["step_time_s"]) == step.step_time_s
    assert float(values["mfu"]) == step.mfu
    assert float(values["capex_usd"]) == bom.capex_usd
    assert float(values["power_per_gpu_w"]) == pytest.approx(bom.power_per_gpu_w)
    assert float(values["network_share"]) == pytest.approx(bom.network_share)
    assert float(values["allreduce_busbw_GBps"]) == pytest.approx(allreduce.busbw_GBps)
    assert float(values["alltoall_busbw_GBps"]) == pytest.approx(alltoall.busbw_GBps)
    topo = bom.topology
    assert int(float(values["n_switches"])) == topo.n_switches
    assert int(float(values["n_transceivers"])) == bom.n_transceivers
    assert int(float(values["max_switch_hops"])) == topo.max_switch_hops
    for metric in (
        "tokens_per_s",
        "exposed_comm_share",
        "bubble_share",
        "n_cables",
        "tiers",
        "bisection_per_gpu_GBps",
        "capex_per_gpu_usd",
    ):
        assert metric in values
    # the vendor comparison table and the BOM lines
    for c in compare_vendors(scenario):
        assert f"{round(c.bom.capex_usd):,}" in doc
    for line in bom.lines:
        assert esc(line.item) in doc
    # the step's communication per dimension
    for dim, seconds in step.comm_s.items():
        if seconds > 0:
            assert esc(step.comm_detail[dim]) in doc


_TABLE = re.compile(r'<table class="(\w+)">(.*?)</table>', re.S)
_CELL = re.compile(r'<t([dh]) class="(num)?">(.*?)</t[dh]>')


@pytest.mark.parametrize("name", PRESETS)
def test_report_tables_have_no_empty_none_or_nan_cell_and_units_in_headers(
    reports: dict, name: str
) -> None:
    """Every cell says something: an em dash for nothing, never "None", "nan" or blank;
    numeric cells are bare numbers (the unit is in the column's header)."""
    _, doc = reports[name]
    tables = _TABLE.findall(doc)
    assert {css for css, _ in tables} >= {"comm", "scaling", "vendors", "bom", "assumptions"}
    for css, body in tables:
        for kind, num, text in _CELL.findall(body):
            assert text.strip(), (css, "an empty cell")
            assert not re.search(r"\b(None|nan|NaN|inf)\b", text), (css, text)
            if kind == "d" and num:
                assert re.fullmatch(r"-?[\d,]+(\.\d+)?|\u2014", text), (css, text)
    heads = dict(re.findall(r'<table class="(\w+)">.*?<thead>(.*?)</thead>', doc, re.S))
    assert "MFU (%)" in heads["scaling"] and "network capex (USD)" in heads["scaling"]
    assert "capex (USD)" in heads["bom"] and "power (W)" in heads["bom"]
    assert "of the step (%)" in heads["comm"]


def test_report_has_the_scenario_versions_and_date(reports: dict) -> None:
    scenario, doc = reports[DEFAULT_PRESET]
    assert esc(dump_scenario(scenario)) in doc
    assert f"fabric_model {fabric_model.__version__}" in doc
    assert f"NCCL constants {nccl_constants()['version']}" in doc
    assert "generated 2026-03-14 15:09 UTC" in doc


@pytest.mark.parametrize("name", PRESETS)
def test_report_lists_the_sources_used(reports: dict, name: str) -> None:
    scenario, doc = reports[name]
    cat = load_catalog()
    bom = bill_of_materials(scenario)
    hw = bom.hardware
    sources = doc[doc.index('id="sources"') :]
    for section, entry in (
        ("gpus", hw.gpu),
        ("servers", hw.server),
        ("switches", hw.switch),
        ("nics", hw.nic),
        ("vendors", hw.vendor),
    ):
        assert f'data-entry="{section}.{entry.key}"' in sources
        for note in entry.sources.values():
            assert esc(note) in sources
    for line in bom.lines:  # optics and cables actually bought
        assert f'.{line.key}"' in sources
    cited = set(re.findall(r"\[(S[A-Za-z0-9]+)\]", sources))
    for key in cited:
        assert f'id="src-{key}"' in sources
        assert esc(cat.sources[key].url) in sources
    for text in nccl_constants()["sources"].values():
        assert esc(text) in sources
    assert esc(MODEL_SHAPES[scenario.model.name]["source"]) in sources
    for constant in training_constant_sources()[1]:
        assert f'data-constant="{constant.name}"' in sources
        assert esc(constant.source) in sources
    assert "bucket_size" in sources  # Megatron-core's gradient buckets, from its constant
    for formula in formula_citations(scenario.fabric.topology):
        assert f'data-formula="{formula.key}"' in sources
        assert esc(formula.source) in sources


def test_the_formulas_section_lists_the_designs_formulas_from_the_data_file(
    reports: dict,
) -> None:
    scenario, doc = reports[DEFAULT_PRESET]
    sources = _sources(doc)
    formulas = formula_citations(scenario.fabric.topology)
    shown = re.findall(r'data-formula="([a-z0-9_]+)"', sources)
    assert shown == [f.key for f in formulas]  # every one, in the file's order, once
    assert "fat_tree_sizing" in shown and "torus3d" not in shown  # the design's family only
    for f in formulas:
        item = sources[sources.index(f'data-formula="{f.key}"') :]
        item = item[: item.index("</li>")]
        assert f"<strong>{esc(f.title)}</strong>: <code>{esc(f.formula)}</code>" in item
        assert f"Implemented in <code>{f.implemented_by}</code>" in item
        assert f"Source: {esc(f.source)}." in item
    # a catalog source a formula cites is listed with the catalog's sources
    (fat_tree,) = [f for f in formulas if f.key == "fat_tree_sizing"]
    assert "[S49]" in fat_tree.source and 'id="src-S49"' in sources


def _sources(doc: str) -> str:
    return doc[doc.index('id="sources"') :]


def test_default_report_cites_nccl_tuning_and_its_gpu_and_switch(reports: dict) -> None:
    scenario, doc = reports[DEFAULT_PRESET]
    sources = _sources(doc)
    tuning = nccl_constants()["sources"]["tuning"]
    assert "tuning.cc (NCCL 2.30" in tuning
    assert f"<strong>tuning</strong>: {esc(tuning)}</li>" in sources
    hw = bill_of_materials(scenario).hardware
    assert (hw.gpu.key, hw.switch.key) == ("h100", "qm9700")
    for section, entry in (("gpus", hw.gpu), ("switches", hw.switch)):
        item = sources[sources.index(f'data-entry="{section}.{entry.key}"') :]
        item = item[: item.index("</ul></li>")]
        for field, note in entry.sources.items():
            assert f"<code>{field}</code> = " in item
            assert esc(note) in item


def test_a_different_gpu_cites_that_gpus_source_instead() -> None:
    scenario = apply_overrides(load_preset(DEFAULT_PRESET), {"cluster.gpu": "b200"})
    sources = _sources(build_report(scenario, generated_at=WHEN))
    cat = load_catalog()
    assert 'data-entry="gpus.b200"' in sources
    assert 'data-entry="gpus.h100"' not in sources
    for note in cat.gpus["b200"].sources.values():
        assert esc(note) in sources
    h100_only = set(cat.gpus["h100"].sources.values()) - set(cat.gpus["b200"].sources.values())
    assert h100_only and not any(esc(note) in sources for note in h100_only)


def test_scaling_sizes_are_a_modest_range_around_the_scenario() -> None:
    assert scaling_sizes(load_preset(DEFAULT_PRESET)) == (32, 64, 128, 256, 512, 1024, 2048)
    big = scaling_sizes(load_preset("colossus-100k-spectrum-x"))
    assert len(big) == 8 and big[-2] == 98_304 and big[0] == 98_304 // 64


# --------------------------------------------------------------------------------------
# user text and infeasible parts
# --------------------------------------------------------------------------------------


def test_user_text_is_escaped() -> None:
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    scenario = dataclasses.replace(load_preset(DEFAULT_PRESET), name="mine <b>&", description=evil)
    doc = build_report(scenario)
    assert "<script>alert" not in doc
    assert "<img" not in doc
    assert esc(evil) in doc
    assert "Fabric what-if report: mine &lt;b&gt;&amp;" in doc
    parsed = parse(doc)
    assert parsed.errors == []
    # plotly.js, one per chart, and the script that fits every chart to its container
    assert sum(1 for tag, _ in parsed.tags if tag == "script") == 1 + len(CHARTS) + 1


def test_infeasible_plan_is_a_message() -> None:
    scenario = apply_overrides(load_preset(DEFAULT_PRESET), {"model.name": "llama3-405b"})
    step = training_step(scenario)
    assert not step.feasible
    doc = build_report(scenario)
    assert parse(doc).errors == []
    assert "this parallel plan cannot run: " + esc(step.reason) in doc
    assert 'id="fig-step"' not in doc
    # the fabric parts still come out
    assert f"${bill_of_materials(scenario).capex_usd:,.0f}" in doc
    assert 'id="fig-busbw"' in doc and 'id="fig-topology"' in doc


def test_design_that_cannot_be_built_is_a_message() -> None:
    scenario = apply_overrides(load_preset(DEFAULT_PRESET), {"fabric.tiers": 1})
    doc = build_report(scenario)
    parsed = parse(doc)
    assert parsed.errors == []
    assert [t.strip() for t in parsed.text["h2"]] == [title for _, title in SECTIONS]
    assert "this design cannot be built: fabric.tiers: a fat-tree of 1 tier" in doc
    assert "InfiniBand cannot build this design" in doc
    for chart in ("step", "busbw", "topology", "capex"):
        assert f'id="fig-{chart}"' not in doc
    assert esc(dump_scenario(scenario)) in doc


# --------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------


def test_cli_writes_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "gb200.html"
    assert (
        main(
            [
                "report",
                "--preset",
                "gb300-nvl72-xdr",
                "--set",
                "cluster.n_gpus=2304",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out.strip()
    size = out.stat().st_size
    assert printed == f"{out} ({size / 1e6:.1f} MB, {size:,} bytes)"
    doc = out.read_text(encoding="utf-8")
    assert "Fabric what-if report: gb300-nvl72-xdr" in doc
    assert "n_gpus: 2304" in doc
    step = training_step(apply_overrides(load_preset("gb300-nvl72-xdr"), {"cluster.n_gpus": 2304}))
    assert f"{step.step_time_s:,.2f} s" in doc


@pytest.mark.parametrize("where", ["missing-dir/r.html", ".", "/proc/r.html"])
def test_cli_bad_out_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    path = where if where.startswith("/") else str(tmp_path / where)
    assert main(["report", "--out", path]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: --out {path}: "), captured.err


def test_cli_out_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["report"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--out" in err[0]


def test_fabric_model_imports_without_plotly_or_streamlit() -> None:
    code = (
        "import sys, fabric_model, fabric_model.cli, fabric_model.training\n"
        "fabric_model.cli.build_parser()\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('plotly', 'streamlit'))\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_report_module_imports_without_streamlit() -> None:
    code = (
        "import sys, ui.report\n"
        "sys.exit(1 if any(m.split('.')[0] == 'streamlit' for m in sys.modules) else 0)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stdout + run.stderr


# --------------------------------------------------------------------------------------
# dashboard button (AppTest; the download itself is in test_browser_report.py)
# --------------------------------------------------------------------------------------


@pytest.mark.app
def test_sidebar_button_is_deferred_and_named_from_the_preset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.apptest_helpers import capture_downloads, open_page

    stored = capture_downloads(monkeypatch)  # file name -> (MIME type, bytes)
    at = open_page("pages/cost.py", preset="meta-24k-roce")
    labels = [b.label for b in at.sidebar.get("download_button")]
    assert labels[labels.index("Download scenario (YAML)") + 1] == "Download report (HTML)"
    button = next(b for b in at.sidebar.get("download_button") if b.key == REPORT_BUTTON_KEY)
    assert not button.proto.disabled
    # built only when clicked: drawing the page stores the scenario file, not the report
    assert "scenario_meta-24k-roce.yaml" in stored
    assert report_file_name("meta-24k-roce") == "report_meta-24k-roce.html"
    assert not [name for name in stored if name.startswith("report")], list(stored)
