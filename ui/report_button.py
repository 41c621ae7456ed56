"""The sidebar's "Download report (HTML)" button (the report itself is ``ui.report``).

The report is built only when the button is clicked: ``st.download_button`` gets a callable
that Streamlit runs on the server at click time, so drawing the sidebar costs nothing.
"""

from __future__ import annotations

from functools import partial

import streamlit as st

from fabric_model.scenario import Scenario
from ui.exports import export_file_name

__all__ = ["REPORT_BUTTON_KEY", "report_download_button", "report_file_name"]

#: Widget key of the button (Streamlit adds the CSS class ``st-key-dl_report``).
REPORT_BUTTON_KEY = "dl_report"


def report_file_name(preset: str | None) -> str:
    """Return the report's file name for a preset: ``report_<preset>.html``."""
    return export_file_name("report", preset, "html")


def _report_bytes(scenario: Scenario) -> bytes:
    from ui.report import build_report  # plotly.js and the model runs: only when clicked

    return build_report(scenario).encode("utf-8")


def report_download_button(preset: str, scenario: Scenario | None) -> None:
    """Draw the report download button (disabled while the scenario is invalid).

    Call it inside the sidebar, under the scenario download button.
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
