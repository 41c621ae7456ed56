"""Cheap cache keys for the frozen scenario.

Streamlit's cache hasher walks a dataclass field by field through ``__reduce__`` (about
15,000 steps for one :class:`~fabric_model.scenario.Scenario`, ~9 ms), and a page rerun
looks up half a dozen cached results, so hashing the same scenario was a quarter of a
slider move's server time. The scenario is a frozen tree of plain values, so its pickle is
an exact, deterministic key (equal field values, equal bytes; 0.03 ms). Every
``st.cache_resource`` / ``st.cache_data`` keyed on a scenario passes
``hash_funcs=SCENARIO_HASH``.
"""

from __future__ import annotations

import pickle
from typing import Any

from fabric_model.scenario import Scenario

__all__ = ["SCENARIO_HASH", "scenario_key"]


def scenario_key(scenario: Scenario) -> bytes:
    """Return the bytes that identify ``scenario`` in a cache (its pickle)."""
    return pickle.dumps(scenario, protocol=pickle.HIGHEST_PROTOCOL)


#: ``hash_funcs`` for Streamlit's caches: hash a scenario through :func:`scenario_key`.
SCENARIO_HASH: dict[Any, Any] = {Scenario: scenario_key}
