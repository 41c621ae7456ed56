"""Presentation mode: the design's story, one view at a time, sized for a projector.

``?present=1`` (or the sidebar's "Presentation mode" toggle) replaces any page with the
slides of :func:`ui.deck.deck_slides` (the report's sections, the same figures and numbers
as the HTML report and the PPTX deck) followed by the what-ifs pinned on the Compare page:
the sidebar, the page header and the controls are hidden, fonts and charts enlarged, and
"Previous" / "Next" step through the views. Every view has its URL, ``?present=1&slide=3``
(the sidebar's own parameters and the Compare page's pins stay in it), so a presenter can
bookmark or share a view; "Leave presentation" goes back to the page.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
import streamlit as st

from fabric_model.scenario import Scenario
from ui.cache_keys import scenario_cache
from ui.deck import Slide, deck_slides, projector_figure, section_notes

__all__ = [
    "PRESENT_PARAM",
    "SLIDE_PARAM",
    "TOGGLE_KEY",
    "active",
    "presentation_toggle",
    "run",
]

PRESENT_PARAM = "present"
SLIDE_PARAM = "slide"
#: Widget key of the sidebar toggle (and of the buttons' CSS classes: ``st-key-present_*``).
TOGGLE_KEY = "present_mode"

#: Projector styling: no sidebar, no header, no page navigation; larger text.
_CSS = """
<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"],
[data-testid="stSidebarNav"], [data-testid="stHeader"], [data-testid="stToolbar"] {
  display: none !important; }
[data-testid="stMain"] .block-container { padding-top: 1.2rem; max-width: 100%; }
[data-testid="stMain"] p, [data-testid="stMain"] li { font-size: 1.6rem !important;
  line-height: 1.45; }
[data-testid="stMain"] h1 { font-size: 2.8rem !important; }
[data-testid="stMain"] table { font-size: 1.3rem !important; }
</style>
"""


def active() -> bool:
    """Whether this run presents: ``?present=1`` in the URL."""
    return st.query_params.get(PRESENT_PARAM) == "1"


def _on_toggle() -> None:
    if st.session_state.get(TOGGLE_KEY):
        st.query_params[PRESENT_PARAM] = "1"
        st.query_params[SLIDE_PARAM] = "1"
    else:
        _leave()


def _leave() -> None:
    for key in (PRESENT_PARAM, SLIDE_PARAM):
        if key in st.query_params:
            del st.query_params[key]
    st.session_state[TOGGLE_KEY] = False


def presentation_toggle() -> None:
    """Draw the sidebar's "Presentation mode" toggle (in sync with ``?present=1``)."""
    st.session_state[TOGGLE_KEY] = active()
    st.sidebar.toggle(
        "Presentation mode",
        key=TOGGLE_KEY,
        on_change=_on_toggle,
        help="the design's story one view at a time, for a projector: no sidebar or "
        "controls, large text; Previous / Next step through it, each view has its URL "
        "(?present=1&slide=N)",
    )


@scenario_cache(4)
def _context(scenario: Scenario) -> dict[str, Any]:
    """Return the report's context of a scenario, once per design."""
    from ui.report import report_context

    return report_context(scenario)


def _pinned_slide(scenario: Scenario, context: Mapping[str, Any]) -> tuple[Slide, Any]:
    """Return the last view: the what-ifs pinned on the Compare page, and their table."""
    from ui import compare
    from ui.compare_figures import compare_display_frame, compare_frame

    compare.read_url_once()
    notes = section_notes(context, "key-numbers")
    if not compare.pins():
        return (
            Slide(
                "what-ifs",
                "What-ifs",
                ("No what-ifs pinned: pin designs on the Compare page and they appear here.",),
                notes=notes,
            ),
            None,
        )
    frame = compare_display_frame(compare_frame(compare.columns(scenario)))
    return Slide("what-ifs", "What-ifs pinned on the Compare page", notes=notes), frame


def _go(n: int) -> None:
    st.query_params[SLIDE_PARAM] = str(n)


def _table_frame(table: Mapping[str, Any]) -> pd.DataFrame:
    return pd.DataFrame(
        [[text for text, _ in row] for row in table["rows"]],
        columns=[label for label, _ in table["head"]],
    )


def run(scenario: Scenario) -> None:
    """Present ``scenario``'s story at the URL's ``slide`` and stop the page."""
    st.markdown(_CSS, unsafe_allow_html=True)
    with st.spinner("Modelling the design's story (the report's sections) ..."):
        context = _context(scenario)
    slides = deck_slides(context)
    last, pinned_frame = _pinned_slide(scenario, context)
    slides.append(last)
    raw = st.query_params.get(SLIDE_PARAM, "1")
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if not 1 <= n <= len(slides):
        st.warning(f"URL parameter slide = {raw!r}: must be 1 to {len(slides)}; showing 1")
        n = 1
    slide = slides[n - 1]

    left, mid, right, leave = st.columns([1, 2, 1, 1.2], vertical_alignment="center")
    left.button(
        "Previous",
        key="present_prev",
        on_click=_go,
        args=(n - 1,),
        disabled=n == 1,
        width="stretch",
    )
    mid.markdown(f"<p style='text-align:center;margin:0'>{n} of {len(slides)}</p>", True)
    right.button(
        "Next",
        key="present_next",
        on_click=_go,
        args=(n + 1,),
        disabled=n == len(slides),
        type="primary",
        width="stretch",
    )
    leave.button("Leave presentation", key="present_leave", on_click=_leave, width="stretch")

    st.title(slide.title)
    for line in slide.lines:
        st.markdown(line)
    if slide.problem:
        st.warning(f"Not shown: {slide.problem}")
    if slide.figure is not None:
        st.plotly_chart(
            projector_figure(slide.figure),
            width="stretch",
            theme=None,  # the figure's own (projector) fonts, not Streamlit's template
            config={"displaylogo": False},
            key=f"present_chart_{n}",
        )
    if slide.table is not None:
        st.table(_table_frame(slide.table))
    if slide.section == "what-ifs" and pinned_frame is not None:
        st.table(pinned_frame)
    with st.expander("Speaker notes: the scenario and the sources"):
        st.text(slide.notes)
    st.stop()
