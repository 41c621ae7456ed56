"""The sidebar's "Download report (HTML)" and "Download slides (PPTX)" buttons.

The report itself is ``ui.report``, the slides ``ui.deck`` (the same sections). Each is built
only when its button is clicked: ``st.download_button`` gets a callable that Streamlit runs
on the server at click time, so drawing the sidebar costs nothing.
"""

from __future__ import annotations

from functools import partial

import streamlit as st

from fabric_model.scenario import Scenario
from ui.exports import export_file_name

__all__ = [
    "REPORT_BUTTON_KEY",
    "SLIDES_BUTTON_KEY",
    "report_download_button",
    "report_file_name",
]

#: Widget key of the button (Streamlit adds the CSS class ``st-key-dl_report``).
REPORT_BUTTON_KEY = "dl_report"
#: Widget key of the slides button.
SLIDES_BUTTON_KEY = "dl_slides"
_PPTX_MIME = "application/vnd.openxmlformats-officedocument.presentationml.presentation"


def report_file_name(preset: str | None) -> str:
    """Return the report's file name for a preset: ``report_<preset>.html``."""
    return export_file_name("report", preset, "html")


def _report_bytes(scenario: Scenario) -> bytes:
    from ui.report import build_report  # plotly.js and the model runs: only when clicked

    return build_report(scenario).encode("utf-8")


def _slides_bytes(scenario: Scenario) -> bytes:
    from ui.deck import build_pptx  # python-pptx, the model runs and the PNGs: only when clicked

    return build_pptx(scenario)


def report_download_button(preset: str, scenario: Scenario | None) -> None:
    """Draw the report and slides download buttons (disabled while the scenario is invalid).

    Call it inside the sidebar, under the scenario download button. The slides need the
    server-side chart export (a Chromium): without one their button is disabled and says so.
    """
    st.download_button(
        "Download report (HTML)",
        partial(_report_bytes, scenario) if scenario is not None else b"",
        file_name=report_file_name(preset),
        mime="text/html",
        key=REPORT_BUTTON_KEY,
        on_click="ignore",
        disabled=scenario is None,
        width="stretch",
        help="one HTML file with the key numbers, charts, bill of materials, vendor "
        "comparison, the scenario and the sources of the numbers; opens offline. "
        "Same as python -m fabric_model report --out FILE.html",
    )
    from ui.deck import pptx_file_name
    from ui.exports import static_export_available

    can_render = static_export_available()
    st.download_button(
        "Download slides (PPTX)",
        partial(_slides_bytes, scenario) if scenario is not None and can_render else b"",
        file_name=pptx_file_name(preset),
        mime=_PPTX_MIME,
        key=SLIDES_BUTTON_KEY,
        on_click="ignore",
        disabled=scenario is None or not can_render,
        width="stretch",
        help=(
            "one slide per chart and key table of the report, titled, with the scenario "
            "and the sources in the speaker notes. Same as python -m fabric_model report "
            "--format pptx --out FILE.pptx"
            if can_render
            else "needs a Chromium on the server for the chart images (apt-get install "
            "chromium, or set BROWSER_PATH)"
        ),
    )
