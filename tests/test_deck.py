"""The slides (``ui.deck``): the PPTX deck of ``python -m fabric_model report --format pptx``
opens with python-pptx and has one titled slide per chart and key table of the report's
sections, the charts as PNG pictures, the tables as tables, the scenario and the sources in
the notes."""

from __future__ import annotations

from pathlib import Path

import pytest
from pptx import Presentation
from pptx.enum.shapes import MSO_SHAPE_TYPE

from fabric_model.cli import main
from fabric_model.presets import DEFAULT_PRESET, load_preset
from ui.deck import DECK_ORDER, deck_slides
from ui.exports import static_export_available
from ui.report import SECTIONS, report_context

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def context() -> dict:
    return report_context(load_preset(DEFAULT_PRESET))


def test_the_deck_walks_the_reports_sections_in_story_order(context: dict) -> None:
    slides = deck_slides(context)
    ids = [sid for sid, _ in SECTIONS]
    assert set(DECK_ORDER) <= set(ids)  # one list of sections for the report and the deck
    order = [s.section for s in slides]
    assert order == sorted(order, key=DECK_ORDER.index)
    assert set(order) == set(DECK_ORDER)
    charts = [c["name"] for sid in DECK_ORDER[1:] for c in _charts(context[sid.replace("-", "_")])]
    assert sum(s.figure is not None for s in slides) == len(charts) == 7
    assert sum(s.table is not None for s in slides) == 4  # comm, BOM, vendors, scaling
    headings = dict(SECTIONS)
    for s in slides:
        assert s.title.startswith(headings[s.section]) or s.section == "key-numbers"
        assert "<" not in s.title  # plotly's markup stripped
        assert context["scenario"]["design"] in s.notes
        assert "sources" in s.notes.lower() or "source" in s.notes.lower()
    first = slides[0]
    assert first.title.startswith(DEFAULT_PRESET)
    assert any(line.startswith("Step time: ") for line in first.lines)


def _charts(part: dict) -> list[dict]:
    return [part["chart"]] if part.get("chart") else list(part.get("charts") or [])


@pytest.mark.skipif(not static_export_available(), reason="no chromium for the chart images")
def test_cli_writes_a_pptx_that_opens_with_the_expected_slides(
    context: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "deck.pptx"
    assert main(["report", "--format", "pptx", "--out", str(out)]) == 0
    assert str(out) in capsys.readouterr().out
    deck = Presentation(str(out))
    slides = deck_slides(context)
    got = list(deck.slides)
    # a table of more than 14 rows continues on a second slide titled "(n of m)"
    titles = [s.shapes.title.text for s in got]
    base = [t.split(" (1 of ")[0].split(" (2 of ")[0] for t in titles]
    assert list(dict.fromkeys(base)) == [s.title for s in slides]
    pictures = tables = 0
    for s, title in zip(got, titles, strict=True):
        kinds = [sh.shape_type for sh in s.shapes]
        for sh in s.shapes:
            if sh.shape_type == MSO_SHAPE_TYPE.PICTURE:
                assert sh.image.blob.startswith(PNG_MAGIC)
                assert sh.image.size[0] >= 1000  # rendered at twice the layout size
                pictures += 1
        tables += kinds.count(MSO_SHAPE_TYPE.TABLE)
        notes = s.notes_slide.notes_text_frame.text
        assert context["scenario"]["design"] in notes, title
    assert pictures == sum(s.figure is not None for s in slides)
    assert tables >= sum(s.table is not None for s in slides)
    vendor = next(s for s in got if s.shapes.title.text.endswith("Vendor comparison"))
    grid = next(sh for sh in vendor.shapes if sh.has_table).table
    assert grid.cell(0, 0).text == "vendor" and grid.cell(1, 0).text == "InfiniBand"
    assert "None" not in {c.text for row in grid.rows for c in row.cells}


def test_cli_refuses_an_unknown_format(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["report", "--format", "pdf", "--out", "x.pdf"])
    assert exc.value.code == 2
    assert "html" in capsys.readouterr().err
