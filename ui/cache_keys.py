"""Cheap cache keys for the frozen scenario.

Streamlit's cache hasher walks a dataclass field by field through ``__reduce__`` (about
15,000 steps for one :class:`~fabric_model.scenario.Scenario`, ~9 ms), and a page rerun
looks up half a dozen cached results, so hashing the same scenario was a quarter of a
slider move's server time. The scenario is a frozen tree of plain values, so its pickle is
an exact, deterministic key (equal field values, equal bytes; 0.03 ms). Every
``st.cache_resource`` / ``st.cache_data`` keyed on a scenario passes
``hash_funcs=SCENARIO_HASH``; the facade's go through :func:`scenario_cache`, which also
registers each with the model's caches (``fabric_model.caching``), so one
``clear_caches()`` empties them too.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import streamlit as st

from fabric_model.caching import register
from fabric_model.scenario import Scenario

__all__ = ["SCENARIO_HASH", "scenario_cache", "scenario_key"]


def scenario_key(scenario: Scenario) -> bytes:
    """Return the bytes that identify ``scenario`` in a cache (its pickle)."""
    return pickle.dumps(scenario, protocol=pickle.HIGHEST_PROTOCOL)


#: ``hash_funcs`` for Streamlit's caches: hash a scenario through :func:`scenario_key`.
SCENARIO_HASH: dict[Any, Any] = {Scenario: scenario_key}


def scenario_cache(max_entries: int) -> Callable[[Callable[..., Any]], Any]:
    """``st.cache_resource`` keyed by the whole scenario and every argument, registered.

    Streamlit keys a call by all its arguments (those named ``_x`` excepted: deadlines and
    progress callbacks, which change no cached value); a scenario by its pickle, so every
    section is in the key.
    """

    def wrap(fn: Callable[..., Any]) -> Any:
        cached = st.cache_resource(
            max_entries=max_entries, show_spinner=False, hash_funcs=SCENARIO_HASH
        )(fn)
        register(
            f"{fn.__module__}.{fn.__name__}",
            key="the whole scenario (its pickle) and every argument not named _x",
            size=f"{max_entries} entries",
            lock="streamlit's cache_resource",
            clear=cached.clear,
        )
        return cached

    return wrap
