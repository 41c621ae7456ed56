"""Compare: two to four scenarios side by side (pinned ones and the sidebar's current one)."""

from __future__ import annotations

import streamlit as st

from ui import compare
from ui.compare_figures import (
    compare_busbw_figure,
    compare_display_frame,
    compare_frame,
    compare_step_figure,
)
from ui.exports import export_file_name
from ui.page_common import current_scenario, require_buildable
from ui.widgets import chart, csv_download, current_preset

scenario = current_scenario()
st.title("Compare")
require_buildable(scenario)
compare.read_url_once()
preset = current_preset() or scenario.name
st.caption(
    f"Pin the sidebar's scenario, change the sidebar, pin again: up to {compare.MAX_PINS} "
    "pinned scenarios and the current one (last column) side by side, with every column's "
    "difference from the first. The pins are kept in the URL."
)


@st.fragment
def compare_view() -> None:
    """Pins and the comparison they drive (reruns without the sidebar)."""
    compare.pin_controls(scenario, preset)
    compare.pinned_list()
    compare.write_url()

    with st.spinner("Modelling each scenario ..."):
        cols = compare.columns(scenario)
    if len(cols) == 1:
        st.caption(
            "Nothing pinned yet: pin the current scenario, change the sidebar (GPUs, "
            "vendor, topology ...) and the table compares the two."
        )
    for label, metrics in cols:
        if metrics.problem:
            st.warning(f"{label}: {metrics.problem}")

    frame = compare_frame(cols)
    st.dataframe(
        compare_display_frame(frame),
        hide_index=True,
        width="stretch",
        height=36 * (len(frame) + 1) + 3,
    )  # every row, no inner scrolling
    st.caption(
        (
            f"Δ: difference from {cols[0][0]} in the row's unit (percentage points for shares); "
            "Δ%: relative difference. "
            if len(cols) > 1
            else ""
        )
        + "Collectives at 1 GiB per GPU with the NCCL-like algorithm choice across all GPUs; "
        "capex and power are the scale-out network's."
    )
    downloads = st.columns(2, gap="small")
    with downloads[0]:
        csv_download(frame, label="Download comparison (CSV)", name="compare", key="dl_compare_csv")
    with downloads[1]:
        st.download_button(
            "Download comparison (YAML)",
            compare.comparison_yaml([(label, m.scenario) for label, m in cols]).encode(),
            file_name=export_file_name("compare", preset, "yaml"),
            mime="application/x-yaml",
            key="dl_compare_yaml",
            on_click="ignore",
            help="every compared scenario as a complete scenario file (one YAML document each, "
            "named by its label)",
        )

    chart(
        compare_busbw_figure(cols, highlight=len(cols) - 1),
        key="compare_busbw",
        name="compare allreduce busbw",
    )
    chart(compare_step_figure(cols), key="compare_step", name="compare step breakdown")


compare_view()
