"""OCS beside fat-tree and rail-only on the same GPUs: the Cost and Explore pages' section.

:func:`family_compare_section` draws a toggle (off by default: three fabrics' bills,
collectives and training steps take a few seconds cold), then the cached table
(:func:`ui.facade.family_comparison`, from
:func:`fabric_model.report.family_compare.compare_families`) and its chart
(:func:`ui.cost_figures.family_compare_figure`: each figure relative to the fat-tree's).
"""

from __future__ import annotations

import streamlit as st

from fabric_model.errors import FabricModelError
from fabric_model.report.family_compare import COMPARED_FAMILIES, DENSE_CASE, MOE_CASE
from fabric_model.scenario import Scenario
from ui import facade
from ui.cost_figures import FAMILY_FIGURES, family_compare_figure
from ui.tables import display_frame
from ui.widgets import chart, csv_download

__all__ = ["family_compare_section"]


def family_compare_section(scenario: Scenario, *, key: str) -> None:
    """Draw the toggle and, when on, the comparison table and chart (a page's section)."""
    if not st.toggle(
        "OCS beside fat-tree and rail-only (same GPUs)",
        key=f"{key}_families",
        help="the sidebar's cluster with fabric.topology = "
        + ", ".join(COMPARED_FAMILIES)
        + " (the OCS with the sidebar's ocs.* keys): capex, power, all-reduce and all-to-all "
        "at 1 GiB, and a training step of a dense and an MoE model per $M of cluster capex",
    ):
        return
    try:
        frame = facade.family_comparison(scenario)
    except FabricModelError as exc:  # the sidebar's own design cannot be varied
        st.warning(f"The comparison cannot be made: {exc}")
        return
    dense = f"{DENSE_CASE['model.name']} (TP{DENSE_CASE['parallel.tp']})"
    moe = f"{MOE_CASE['model.name']} (TP{MOE_CASE['parallel.tp']} EP{MOE_CASE['parallel.ep']})"
    st.caption(
        f"{scenario.cluster.n_gpus:,} GPUs, {scenario.fabric.vendor}, "
        f"{scenario.fabric.link_gbps}G on each fabric; steps of {dense} and {moe}; tokens/s "
        "per $M of cluster capex (servers and network) is the throughput at equal cost."
    )
    chart(family_compare_figure(frame), key=f"{key}_families_chart", name="fabric families")
    shown = frame.rename(
        columns={
            "label": "fabric",
            **{c: f"{FAMILY_FIGURES[c][0]} ({FAMILY_FIGURES[c][1]})" for c in FAMILY_FIGURES},
        }
    )
    shown = shown.drop(columns=["family"])
    st.dataframe(display_frame(shown), hide_index=True, width="stretch")
    csv_download(frame, label="Download (CSV)", name="fabric families", key=f"dl_{key}_families")
    for reason in frame["reasons"]:
        if reason:
            st.caption(reason)
