"""Topology: the design's diagram, counts and hop distribution."""

from __future__ import annotations

import streamlit as st

from fabric_model.errors import FabricModelError
from ui import facade
from ui.deployment import deployment_downloads
from ui.diagrams import cable_info, topology_diagram
from ui.page_common import current_scenario, show_model_error
from ui.theme import tiers_label
from ui.topology_figures import hop_histogram_figure, topology_counts_frame
from ui.widgets import chart

scenario = current_scenario()
st.title("Topology")
try:
    topo = facade.topology(scenario)
except FabricModelError as exc:
    show_model_error(exc)
    st.stop()

gbps = topo.request.link_gbps
top = st.columns(3)
top[0].metric("GPUs", f"{topo.n_gpus:,}", help="GPUs in the job; NIC ports = GPUs x NICs per GPU")
top[1].metric("Switch tiers", tiers_label(topo.tiers, dict(topo.switches_by_tier)))
top[2].metric("Switches", f"{topo.n_switches:,}")
bottom = st.columns(3)
bottom[0].metric("Cables", f"{topo.n_links:,}")
bottom[1].metric(
    "Hops max / mean",
    f"{topo.max_switch_hops} / {topo.mean_switch_hops:.2f}",
    help="switches (or, switchless, links between NVLink domains) crossed between "
    "GPUs in different NVLink domains, rail-matched",
)
bottom[2].metric(
    "Bisection per GPU",
    f"{topo.bisection_per_gpu_GBps:,.1f} GB/s",
    help=f"bisection bandwidth / (GPUs / 2); line rate is {gbps / 8:g} GB/s per NIC",
)

try:
    cables = cable_info(facade.bom(scenario))
except FabricModelError:
    cables = None  # a design the catalog cannot price is still drawn, without its media
chart(topology_diagram(topo, cables), key="topology_diagram", name="topology diagram")
left, right = st.columns([3, 2])
with left:
    st.subheader("Counts")
    counts = topology_counts_frame(topo)
    st.dataframe(counts, hide_index=True, width="stretch")
    st.download_button(
        "Download counts (CSV)",
        counts.to_csv(index=False).encode(),
        file_name=f"{scenario.name}-topology-counts.csv",
        mime="text/csv",
        key="dl_counts",
    )
    for note in topo.notes:
        st.caption(note)
with right:
    if topo.hop_histogram:
        chart(hop_histogram_figure(topo), key="hop_histogram", name="topology hops")
    else:
        st.info("All GPUs share one NVLink domain: no traffic crosses the scale-out fabric.")

st.subheader("Deployment files")
st.caption(
    "The design as files for the installer and the scheduler, consistent with the bill "
    "of materials: `python -m fabric_model export --format FORMAT --out FILE` writes the "
    "same files."
)
deployment_downloads(scenario, topo)
