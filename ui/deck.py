"""The design's story as slides: one list, drawn as a PPTX deck and as presentation mode.

:func:`deck_slides` walks the HTML report's sections (:data:`ui.report.SECTIONS`, in the
order of :data:`DECK_ORDER`) over the same :func:`ui.report.report_context`, so the report,
the slides and the presentation show the same figures, tables and numbers: one slide per
chart and per key table, each titled, with the scenario and the sources of its numbers as
speaker notes. A part the model cannot compute is a slide saying why.

:func:`build_pptx` writes the slides with python-pptx: charts as PNG from the dashboard's
server-side export (:func:`ui.exports.figure_png`, kaleido on the system chromium; PPTX
pictures through python-pptx are raster, so the PNG is rendered at twice the figure's
pixel size), tables as native PowerPoint tables (editable, searchable). Pure: plotly and
python-pptx, no streamlit.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import plotly.graph_objects as go

from fabric_model.errors import FabricModelError
from fabric_model.scenario import Scenario
from ui.report import report_context

__all__ = [
    "DECK_ORDER",
    "Slide",
    "build_pptx",
    "build_slides",
    "deck_slides",
    "pptx_file_name",
    "projector_figure",
    "section_notes",
]

#: The story's order: the scenario and its key numbers, the step and where it goes, the
#: collectives on this fabric, the fabric and its cost, the vendor comparison, the scaling.
DECK_ORDER: tuple[str, ...] = (
    "key-numbers",
    "training",
    "collectives",
    "topology",
    "bom",
    "cost",
    "scaling",
)
#: Key-number groups whose metrics the first slide lists (one line each).
_FIRST_SLIDE_METRICS = (
    "step_time_s",
    "mfu",
    "exposed_comm_share",
    "allreduce_busbw_GBps",
    "capex_usd",
    "capex_per_gpu_usd",
)


@dataclass(frozen=True)
class Slide:
    """One slide: a title, a few lines, then a chart or a table (or a problem)."""

    section: str  # the report section id it comes from ("what-ifs" for pinned what-ifs)
    title: str
    lines: tuple[str, ...] = ()
    figure: go.Figure | None = None
    #: the report's table: ``{"head": [(label, numeric)], "rows": [[(text, numeric)]]}``
    table: Mapping[str, Any] | None = None
    problem: str = ""
    notes: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)


def _chart_title(chart: Mapping[str, Any]) -> str:
    """Return a chart's title as plain text: its first line, without plotly's markup."""
    fig: go.Figure = chart["figure"]
    text = str((fig.layout.title.text if fig.layout.title else None) or "")
    return re.sub(r"<[^>]+>", "", re.split(r"<br\s*/?>", text)[0]).strip()


def section_notes(context: Mapping[str, Any], section: str) -> str:
    """Return a slide's speaker notes: the scenario in one line, the versions, the sources.

    The sources are those behind the section's numbers: the catalog's for the fabric, cost
    and vendor slides, the NCCL constants for the collectives, the training constants and
    the model shape for the step and the scaling.
    """
    scen, src = context["scenario"], context["sources"]
    lines = [
        f"Scenario {scen['name']}: {scen['design']}.",
        f"Model and data: {context['versions']['line']}.",
    ]
    if section in ("training", "scaling", "key-numbers"):
        shape = src["model"]["shape"]
        if shape:
            lines.append(f"Model shape: {shape.name}: {shape.source}.")
        lines.append(
            f"Training-model constants (assets/training_constants.yaml, version "
            f"{src['training']['version']}): "
            + "; ".join(f"{n.name} = {n.value}: {n.source}" for n in src["training"]["constants"])
        )
    if section in ("collectives", "training", "key-numbers"):
        lines.append(
            f"NCCL-like constants (assets/nccl_constants.yaml, version {src['nccl']['version']}): "
            + "; ".join(f"{n.name}: {n.source}" for n in src["nccl"]["sources"])
        )
    if section in ("topology", "bom", "cost", "key-numbers", "scaling"):
        refs = src["catalog"]["refs"]
        lines.append(
            f"Hardware catalog version {src['catalog']['version']}; sources: "
            + "; ".join(f"[{r['key']}] {r['title']}, {r['url']}" for r in refs)
        )
    lines.append(
        "Figures are model estimates from these sources, not measurements or quotes; the "
        "HTML report (python -m fabric_model report) lists every formula and catalog entry."
    )
    return "\n".join(lines)


def _key_numbers_slide(context: Mapping[str, Any]) -> Slide:
    scen, k = context["scenario"], context["key_numbers"]
    metrics = {m["key"]: m for g in k.get("groups", []) for m in g["metrics"]}
    lines = [scen["description"], scen["design"]]
    lines += [
        f"{metrics[key]['label']}: {metrics[key]['value']}"
        for key in _FIRST_SLIDE_METRICS
        if key in metrics
    ]
    problems = [p for g in k.get("groups", []) for p in g["problems"]]
    return Slide(
        "key-numbers",
        str(scen["name"]),
        tuple(lines),
        problem=k.get("problem") or "; ".join(problems),
        notes=section_notes(context, "key-numbers"),
    )


def deck_slides(context: Mapping[str, Any]) -> list[Slide]:
    """Return the story's slides from a :func:`ui.report.report_context`.

    One slide per chart and per key table of each section of :data:`DECK_ORDER` (the
    report's headings as titles, the chart's title after it); a section the model cannot
    compute is one slide with its message.
    """
    headings = context["headings"]
    out = [_key_numbers_slide(context)]
    for sid in DECK_ORDER[1:]:
        part = context[sid.replace("-", "_")]
        heading = headings[sid]
        notes = section_notes(context, sid)
        problem = part.get("problem") or part.get("none_runs") or ""
        if problem and not part.get("charts"):
            out.append(Slide(sid, heading, problem=problem, notes=notes))
            continue
        charts = [part["chart"]] if part.get("chart") else list(part.get("charts") or [])
        lines: tuple[str, ...] = ()
        if sid == "training":
            lines = (f"Plan {part['plan']}, {part['micro_batches']} micro-batches",)
        for chart in charts:
            title = _chart_title(chart)
            out.append(
                Slide(
                    sid,
                    f"{heading}: {title}" if title else heading,
                    lines,
                    figure=chart["figure"],
                    notes=notes,
                )
            )
        for p in part.get("problems") or ():
            out.append(Slide(sid, heading, problem=p, notes=notes))
        for key in ("comm", "table"):
            table = part.get(key)
            if table:
                caption = table.get("caption") or ""
                out.append(
                    Slide(
                        sid,
                        f"{heading}: {caption}" if caption else f"{heading} (table)",
                        table=table,
                        notes=notes,
                    )
                )
    return out


#: Projector sizes: text readable from the back of a meeting room, a chart filling the view.
PROJECTOR_FONT_PX = 20
PROJECTOR_MIN_HEIGHT_PX = 620


def projector_figure(fig: go.Figure) -> go.Figure:
    """Return a copy of ``fig`` for a projector: larger text and a taller plot."""
    out = go.Figure(fig)
    height = max(int(out.layout.height or 450) * 13 // 10, PROJECTOR_MIN_HEIGHT_PX)
    out.update_layout(
        font={"size": PROJECTOR_FONT_PX},
        title_font={"size": PROJECTOR_FONT_PX + 6},
        legend_font={"size": PROJECTOR_FONT_PX},
        height=height,
    )
    out.update_xaxes(tickfont={"size": PROJECTOR_FONT_PX}, title_font={"size": PROJECTOR_FONT_PX})
    out.update_yaxes(tickfont={"size": PROJECTOR_FONT_PX}, title_font={"size": PROJECTOR_FONT_PX})
    return out


def pptx_file_name(preset: str | None) -> str:
    """Return the deck's file name for a preset: ``slides_<preset>.pptx``."""
    from ui.exports import export_file_name

    return export_file_name("slides", preset, "pptx")


# ------------------------------------------------------------------------------ PPTX

_SLIDE_W_IN, _SLIDE_H_IN = 13.333, 7.5  # 16:9
_MARGIN_IN = 0.5
_TITLE_H_IN = 1.0
#: Largest rows of a table slide (a longer table continues on the next slide).
_ROWS_PER_SLIDE = 14


def _fit(img_w: int, img_h: int, box_w: float, box_h: float) -> tuple[float, float]:
    scale = min(box_w / img_w, box_h / img_h)
    return img_w * scale, img_h * scale


def build_pptx(
    scenario: Scenario,
    *,
    context: Mapping[str, Any] | None = None,
    render_png: Callable[[go.Figure], bytes] | None = None,
) -> bytes:
    """Return the story of ``scenario`` as a PPTX deck (bytes).

    Parameters
    ----------
    scenario
        The what-if; its :func:`ui.report.report_context` is computed unless ``context``
        is given.
    context
        A report context already computed (the dashboard's cached one).
    render_png
        Figure -> PNG bytes (default: :func:`ui.exports.figure_png`, kaleido and a system
        chromium; raises :class:`ui.exports.StaticExportError` without one).

    Returns
    -------
    bytes
        One slide per :class:`Slide` of :func:`deck_slides` (a table longer than
        ``_ROWS_PER_SLIDE`` rows continues on the next slide), each with its title, the
        chart as a picture or the table, and the scenario and sources as notes.
    """
    from pptx import Presentation
    from pptx.util import Inches, Pt

    if context is None:
        context = report_context(scenario)
    if render_png is None:
        from ui.exports import figure_png

        render_png = figure_png
    deck = Presentation()
    deck.slide_width, deck.slide_height = Inches(_SLIDE_W_IN), Inches(_SLIDE_H_IN)
    layout = deck.slide_layouts[5]  # "Title Only"
    body_w = _SLIDE_W_IN - 2 * _MARGIN_IN
    for s in deck_slides(context):
        pieces: list[Mapping[str, Any] | None] = [s.table]
        if s.table is not None and len(s.table["rows"]) > _ROWS_PER_SLIDE:
            rows = s.table["rows"]
            pieces = [
                {**s.table, "rows": rows[i : i + _ROWS_PER_SLIDE]}
                for i in range(0, len(rows), _ROWS_PER_SLIDE)
            ]
        for n, table in enumerate(pieces):
            slide = deck.slides.add_slide(layout)
            title = slide.shapes.title
            title.left, title.top = Inches(_MARGIN_IN), Inches(0.2)
            title.width, title.height = Inches(body_w), Inches(_TITLE_H_IN)
            title.text = s.title + (f" ({n + 1} of {len(pieces)})" if len(pieces) > 1 else "")
            for para in title.text_frame.paragraphs:
                for run in para.runs:
                    run.font.size = Pt(26)
            top = 0.2 + _TITLE_H_IN + 0.1
            text = [*s.lines] + ([f"Not shown: {s.problem}"] if s.problem else [])
            if text:
                box_h = 0.4 * len(text) + 0.2 if (s.figure or table) else 4.5
                tb = slide.shapes.add_textbox(
                    Inches(_MARGIN_IN), Inches(top), Inches(body_w), Inches(box_h)
                )
                tb.text_frame.word_wrap = True
                for i, line in enumerate(text):
                    para = tb.text_frame.paragraphs[0] if i == 0 else tb.text_frame.add_paragraph()
                    para.text = line
                    para.font.size = Pt(20 if not (s.figure or table) else 16)
                top += box_h
            avail_h = _SLIDE_H_IN - top - _MARGIN_IN * 0.6
            if s.figure is not None:
                from ui.exports import export_size

                png = render_png(s.figure)
                w_px, h_px = export_size(s.figure)
                w, h = _fit(w_px, h_px, body_w, avail_h)
                slide.shapes.add_picture(
                    io.BytesIO(png),
                    Inches(_MARGIN_IN + (body_w - w) / 2),
                    Inches(top),
                    Inches(w),
                    Inches(h),
                )
            if table is not None:
                _add_table(slide, table, top, body_w, avail_h)
            slide.notes_slide.notes_text_frame.text = s.notes
    buf = io.BytesIO()
    deck.save(buf)
    return buf.getvalue()


def _add_table(
    slide: Any, table: Mapping[str, Any], top: float, width: float, height: float
) -> None:
    from pptx.enum.text import PP_ALIGN
    from pptx.util import Inches, Pt

    head: Sequence[tuple[str, bool]] = table["head"]
    rows: Sequence[Sequence[tuple[str, bool]]] = table["rows"]
    n_rows = len(rows) + 1
    shape = slide.shapes.add_table(
        n_rows,
        len(head),
        Inches(_MARGIN_IN),
        Inches(top),
        Inches(width),
        Inches(min(height, 0.4 * n_rows)),
    )
    size = Pt(12 if len(head) <= 8 else 9)
    grid = shape.table
    for j, (label, numeric) in enumerate(head):
        cell = grid.cell(0, j)
        cell.text = label
        for para in cell.text_frame.paragraphs:
            para.font.size = size
            para.font.bold = True
            para.alignment = PP_ALIGN.RIGHT if numeric else PP_ALIGN.LEFT
    for i, row in enumerate(rows, start=1):
        for j, (text, numeric) in enumerate(row):
            cell = grid.cell(i, j)
            cell.text = text
            for para in cell.text_frame.paragraphs:
                para.font.size = size
                para.alignment = PP_ALIGN.RIGHT if numeric else PP_ALIGN.LEFT


def build_slides(scenario: Scenario) -> bytes:
    """Return the report's sections as a PPTX deck (:func:`ui.deck.build_pptx`).

    Raises
    ------
    FabricModelError
        If the charts' images cannot be rendered (no Chromium for the server-side export),
        or python-pptx is not installed; the message says what to install.
    """
    from ui.exports import StaticExportError

    try:
        return build_pptx(scenario)
    except ImportError as exc:  # python-pptx is imported when the deck is built
        raise FabricModelError(f"--format pptx needs python-pptx ({exc})") from None
    except StaticExportError as exc:
        raise FabricModelError(
            f"--format pptx: the charts need a Chromium for their images ({exc})"
        ) from None
