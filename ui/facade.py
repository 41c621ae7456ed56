"""Cached facades over the model: the only place the dashboard caches.

Results hold numpy arrays and lazily built graphs, so they are cached as shared immutable
resources (``st.cache_resource``) keyed by the frozen scenario, not pickled copies.
"""

from __future__ import annotations

import streamlit as st

from fabric_model.cost import BillOfMaterials, VendorComparison, bill_of_materials, compare_vendors
from fabric_model.design import build_topology
from fabric_model.scenario import Scenario
from fabric_model.topology import Topology

__all__ = ["topology", "bom", "vendor_comparison"]


@st.cache_resource(max_entries=64, show_spinner=False)
def topology(scenario: Scenario) -> Topology:
    """The scenario's topology (raises the model's errors)."""
    return build_topology(scenario)


@st.cache_resource(max_entries=64, show_spinner=False)
def bom(scenario: Scenario) -> BillOfMaterials:
    """The scenario's bill of materials."""
    return bill_of_materials(scenario)


@st.cache_resource(max_entries=64, show_spinner=False)
def vendor_comparison(scenario: Scenario) -> list[VendorComparison]:
    """The scenario's design priced on InfiniBand, Spectrum-X and RoCE."""
    return compare_vendors(scenario)
