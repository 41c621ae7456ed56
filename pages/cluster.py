"""Cluster: a job mix on the sidebar's fabric under each scheduler policy, with failures."""

from __future__ import annotations

import streamlit as st

from fabric_model.errors import FabricModelError
from ui import cluster
from ui.page_common import current_scenario, require_buildable, show_model_error
from ui.widgets import chart

scenario = current_scenario()
st.title("Cluster")
require_buildable(scenario)
cluster.read_url_once()
st.caption(
    "Many jobs on this fabric: a generated job mix (assets/job_mix.yaml, shaped after the "
    "Philly, Helios and Acme traces), FIFO with EASY backfill, each job placed by first-fit, "
    "Slurm topology/tree, Slurm topology/block or Kueue TAS on the fabric's own leaf and "
    "spine groups, its step slowed by its placement and its neighbours (max-min solver), "
    "failures over the bill of materials. `python -m fabric_model schedule` runs the same."
)
left, mid, right = st.columns(3)
_, _, lo, hi, step = cluster.CONTROLS["jobs"]
n_jobs = left.slider("Jobs", lo, hi, step=step, key=cluster.CONTROLS["jobs"][0])
_, _, lo, hi, _ = cluster.CONTROLS["days"]
days = mid.slider("Days", lo, hi, key=cluster.CONTROLS["days"][0])
_, _, lo, hi, _ = cluster.CONTROLS["seed"]
seed = int(right.number_input("Seed", lo, hi, key=cluster.CONTROLS["seed"][0]))
with st.expander(
    "Simulate every policy on this job mix", key=cluster.RUN_OPEN, on_change="rerun"
) as section:
    cluster.write_url()
    if section.open:
        try:
            with st.spinner("Simulating the job mix ..."):
                results = cluster.run_policies(scenario, n_jobs, float(days), seed)
        except FabricModelError as exc:
            show_model_error(exc)
        else:
            st.dataframe(cluster.summary_frame(results), hide_index=True)
            chart(cluster.slowdown_cdf_figure(results), key="cluster_cdf", name="cluster slowdown")
            chart(cluster.cost_figure(results), key="cluster_cost", name="cluster cost")
            bs = next(iter(results.values()))["block_sizes"]
            st.caption(
                f"Recommended Slurm BlockSizes {bs['BlockSizes']} (base block "
                f"{bs['base_block_nodes']} nodes); --segment per job size in nodes: "
                f"{bs['segment_by_job_nodes']}."
            )
