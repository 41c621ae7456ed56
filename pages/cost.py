"""Cost: the same design's capex, power and TCO on InfiniBand, Spectrum-X and RoCE."""

from __future__ import annotations

import streamlit as st

from fabric_model.errors import FabricModelError
from ui import facade
from ui.cost_figures import (
    vendor_capex_figure,
    vendor_power_figure,
    vendor_summary_frame,
    vendor_tco_figure,
)
from ui.family_compare import family_compare_section
from ui.floorplan import site_section
from ui.page_common import current_scenario, show_model_error
from ui.state import cost_controls
from ui.tables import display_frame
from ui.theme import vendor_label
from ui.widgets import chart

scenario = current_scenario()
st.title("Cost")
try:
    own = facade.bom(scenario)
except FabricModelError as exc:
    show_model_error(exc)
    st.stop()

label = vendor_label(scenario.fabric.vendor)
st.caption(f"Headline figures for {label}; the charts compare all three vendors.")
cols = st.columns(3)
cols[0].metric(
    "Network capex",
    f"${own.capex_usd / 1e6:,.2f} M",
    help="the compute (scale-out) fabric: switches + NICs + optics + cables; the storage and "
    "management networks are below",
)
cols[1].metric("Capex per GPU", f"${own.capex_per_gpu_usd:,.0f}")
cols[2].metric(
    "Share of cluster",
    f"{own.network_share:.1%}",
    help="compute fabric / (GPU servers without scale-out NICs + compute fabric)",
)
cols = st.columns(3)
cols[0].metric("Network power", f"{own.power_w / 1000:,.0f} kW", help="IT load, before PUE")
cols[1].metric("Power per GPU", f"{own.power_per_gpu_w:,.0f} W")
cols[2].metric(
    f"TCO, {scenario.costs.years:g} years",
    f"${own.tco_usd / 1e6:,.2f} M",
    help="capex + network power x PUE x hours x electricity price",
)

if scenario.fabric.topology == "hybrid":
    st.subheader("Hybrid against one fat-tree of the same size")
    st.caption(
        f"The same {scenario.cluster.n_gpus:,} GPUs, vendor and link speed built as one "
        "fat-tree (fabric.topology = fat-tree): what the two partitions and the shared core "
        "tier cost and give up (bisection, hops); both with the fabric.*_m cable lengths."
    )
    st.dataframe(facade.hybrid_comparison(scenario), hide_index=True, width="stretch")

if scenario.fabric.topology == "ocs":
    st.subheader("Optical circuit switches")
    st.dataframe(facade.ocs_frame(scenario), hide_index=True, width="stretch")

st.subheader("Fat-tree, rail-only and OCS")
family_compare_section(scenario, key="cost")

comparisons = facade.vendor_comparison(scenario)


@st.fragment
def per_vendor_charts() -> None:
    """Capex and power per vendor; the per-GPU toggle reruns only these two charts."""
    per_gpu = st.toggle("Per GPU", key="cost_per_gpu", help="divide by the number of GPUs")
    left, right = st.columns(2)
    with left:
        chart(vendor_capex_figure(comparisons, per_gpu), key="capex_chart", name="cost capex")
    with right:
        chart(vendor_power_figure(comparisons, per_gpu), key="power_chart", name="cost power")


per_vendor_charts()
for c in comparisons:
    if c.error:
        st.info(f"{vendor_label(c.vendor)} cannot build this design: {c.error}")

st.subheader("Side by side")
summary = vendor_summary_frame(comparisons)
st.dataframe(display_frame(summary), hide_index=True, width="stretch")
chart(vendor_tco_figure(comparisons), key="tco_chart", name="cost tco")

st.subheader(f"Bill of materials ({label})")
bom_frame = own.to_frame()
st.dataframe(bom_frame, hide_index=True, width="stretch")
c1, c2 = st.columns(2)
c1.download_button(
    "Download BOM (CSV)",
    bom_frame.to_csv(index=False).encode(),
    file_name=f"{scenario.name}-{scenario.fabric.vendor}-bom.csv",
    mime="text/csv",
    key="dl_bom",
)
c2.download_button(
    "Download comparison (CSV)",
    summary.to_csv(index=False).encode(),
    file_name=f"{scenario.name}-vendor-comparison.csv",
    mime="text/csv",
    key="dl_compare",
)

site_section(own)

with st.expander("Prices and TCO assumptions"):
    st.caption(
        "Empty = catalog price (see the sources in the README). Switch and NIC prices apply "
        "to the selected vendor only; optics, cables and servers to every vendor."
    )
    cost_controls(own)
