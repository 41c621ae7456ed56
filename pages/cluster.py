"""Cluster: a job mix on the sidebar's fabric under each scheduler policy, with failures."""

from __future__ import annotations

import streamlit as st

from fabric_model.errors import FabricModelError
from ui import cluster
from ui.page_common import current_scenario, require_buildable, show_model_error
from ui.widgets import chart

RUN_OPEN = "cluster_run_open"  # the results' expander

scenario = current_scenario()
st.title("Cluster")
require_buildable(scenario)
st.caption(
    "Many jobs on this fabric: a generated job mix (assets/job_mix.yaml, shaped after the "
    "Philly, Helios and Acme traces), FIFO with EASY backfill, each job placed by first-fit, "
    "Slurm topology/tree, Slurm topology/block or Kueue TAS on the fabric's own leaf and "
    "spine groups, its step slowed by its placement and its neighbours (max-min solver), "
    "failures over the bill of materials. `python -m fabric_model schedule` runs the same."
)
left, mid, right = st.columns(3)
n_jobs = left.slider("Jobs", 50, 2000, 300, step=50, key="cluster_jobs")
days = mid.slider("Days", 1, 30, 7, key="cluster_days")
seed = int(right.number_input("Seed", 0, 10_000, 0, key="cluster_seed"))
with st.expander(
    "Simulate every policy on this job mix", key=RUN_OPEN, on_change="rerun"
) as section:
    if section.open:
        try:
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
