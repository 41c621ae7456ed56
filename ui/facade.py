"""Cached facades over the model: the only place the dashboard caches.

Results hold numpy arrays and lazily built graphs, so they are cached as shared immutable
resources (``st.cache_resource``) keyed by the frozen scenario, not pickled copies.
"""

from __future__ import annotations

import streamlit as st

from fabric_model.cost import BillOfMaterials, VendorComparison, bill_of_materials, compare_vendors
from fabric_model.design import build_topology
from fabric_model.errors import InfeasibleDesignError
from fabric_model.scenario import Scenario
from fabric_model.topology import BUILDERS, Topology

__all__ = ["bom", "topology", "vendor_comparison"]


def _require_builder(scenario: Scenario) -> None:
    """Turn a topology family without a registered builder into an explained, infeasible design.

    ``fabric.topology`` accepts every planned family, but only the registered ones can be
    built; the model's lookup would otherwise escape as a bare ``KeyError``.
    """
    family = scenario.fabric.topology
    if family not in BUILDERS:
        raise InfeasibleDesignError(
            "fabric.topology",
            f"{family} cannot be built yet; available: {', '.join(sorted(BUILDERS))}",
        )


@st.cache_resource(max_entries=64, show_spinner=False)
def topology(scenario: Scenario) -> Topology:
    """The scenario's topology (raises the model's errors)."""
    _require_builder(scenario)
    return build_topology(scenario)


@st.cache_resource(max_entries=64, show_spinner=False)
def bom(scenario: Scenario) -> BillOfMaterials:
    """The scenario's bill of materials."""
    _require_builder(scenario)
    return bill_of_materials(scenario)


@st.cache_resource(max_entries=64, show_spinner=False)
def vendor_comparison(scenario: Scenario) -> list[VendorComparison]:
    """The scenario's design priced on InfiniBand, Spectrum-X and RoCE."""
    _require_builder(scenario)
    return compare_vendors(scenario)
