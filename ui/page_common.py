"""What every page does first: get the sidebar's scenario or explain why there is none."""

from __future__ import annotations

import streamlit as st

from fabric_model.errors import FabricModelError
from fabric_model.scenario import Scenario
from ui.state import sidebar_scenario

__all__ = ["current_scenario", "show_model_error"]


def current_scenario() -> Scenario:
    """Draw the shared sidebar and return its scenario; on bad input show why and stop the page.

    The sidebar stays usable, so the user can fix the key the message names.
    """
    state = sidebar_scenario()
    st.session_state["scenario_state"] = state
    if state.scenario is None:
        st.error(state.error)
        st.stop()
    return state.scenario


def show_model_error(exc: FabricModelError) -> None:
    """An infeasible design is content: say which key to change and what is allowed."""
    st.warning(f"This design cannot be built: {exc}")
