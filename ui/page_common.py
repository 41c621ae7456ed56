"""What every page does first: get the sidebar's scenario or explain why there is none."""

from __future__ import annotations

import streamlit as st

from fabric_model.errors import FabricModelError
from fabric_model.scenario import Scenario
from ui import present
from ui.state import sidebar_scenario

__all__ = ["current_scenario", "require_buildable", "show_model_error"]


def _leave_legacy_multipage_mode() -> None:
    """Make a first visit to ``/cost`` run through ``app.py`` like every other visit.

    Streamlit starts in its legacy multipage mode whenever a ``pages/`` folder sits next to
    the main script, and stays there until some session runs ``app.py`` (whose
    ``st.navigation`` call switches it off). Until then a visitor who opens a page URL first
    gets the bare page script: no page config, no navigation. The page notices and reruns,
    and the rerun takes the normal route: ``app.py`` -> ``st.navigation`` -> this page.
    """
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


def current_scenario() -> Scenario:
    """Draw the shared sidebar and return its scenario; on bad input show why and stop the page.

    The sidebar stays usable, so the user can fix the key the message names.
    """
    _leave_legacy_multipage_mode()
    state = sidebar_scenario()
    st.session_state["scenario_state"] = state
    present.presentation_toggle()
    if state.scenario is None:
        st.error(state.error)
        st.stop()
    if present.active():  # ?present=1: the story replaces the page (and stops it)
        present.run(state.scenario)
    return state.scenario


def show_model_error(exc: FabricModelError) -> None:
    """Show an infeasible design as content: which key to change and what is allowed."""
    st.warning(f"This design cannot be built: {exc}")


def require_buildable(scenario: Scenario) -> None:
    """Stop the page with the model's reason when the sidebar's design cannot be built.

    Pages that also model other designs (other sizes, what-ifs, pins) still need the
    sidebar's own design: it is their baseline.
    """
    from ui import facade  # the caching layer; imported late to keep this module light

    try:
        facade.topology(scenario)
    except FabricModelError as exc:
        show_model_error(exc)
        st.stop()
