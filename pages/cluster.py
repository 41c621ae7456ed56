"""Cluster: a job mix on the sidebar's fabric under each scheduler policy, with failures."""

from __future__ import annotations

import streamlit as st

from fabric_model.errors import FabricModelError
from ui import cluster
from ui.page_common import current_scenario, require_buildable, show_model_error
from ui.tables import display_frame
from ui.widgets import chart, current_preset

scenario = current_scenario()
st.title("Cluster")
require_buildable(scenario)
cluster.read_url_once()
preset = current_preset() or scenario.name
st.caption(
    "Many jobs on this fabric: a generated job mix (assets/job_mix.yaml, shaped after the "
    "Philly, Helios and Acme traces), FIFO with EASY backfill, each job placed by first-fit, "
    "Slurm topology/tree, Slurm topology/block or Kueue TAS on the fabric's own leaf and "
    "spine groups (on an OCS design: a slice of blocks with circuits of its own), its step "
    "slowed by its placement and its neighbours (every parallel dimension that leaves an "
    "NVLink domain, max-min solved), failures over the bill of materials. "
    "`python -m fabric_model schedule` runs the same."
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
    if section.open:
        try:
            with st.spinner("Simulating the job mix ..."):
                runs = cluster.run_policies(scenario, n_jobs, float(days), seed)
        except FabricModelError as exc:
            show_model_error(exc)
        else:
            results = cluster.results_of(runs)
            slices = cluster.slices_caption(results)
            if slices:
                st.caption(slices)
            st.dataframe(display_frame(cluster.summary_frame(results)), hide_index=True)
            chart(cluster.slowdown_cdf_figure(results), key="cluster_cdf", name="cluster slowdown")
            chart(cluster.cost_figure(results), key="cluster_cost", name="cluster cost")
            chart(
                cluster.over_time_figure(runs, float(days)),
                key="cluster_time",
                name="cluster over time",
            )
            view = str(
                st.selectbox(
                    "Servers over time under",
                    cluster.view_options(runs, scenario),
                    key=cluster.VIEW,
                    format_func=cluster.policy_label,
                )
            )
            chart(
                cluster.server_timeline_figure(runs[view], float(days), view),
                key="cluster_servers",
                name="cluster servers",
            )
            bs = results[view]["block_sizes"]
            if not slices:
                st.caption(
                    f"Recommended Slurm BlockSizes {bs['BlockSizes']} (base block "
                    f"{bs['base_block_nodes']} nodes); --segment per job size in nodes: "
                    f"{bs['segment_by_job_nodes']}."
                )
            st.subheader("Against another fabric")
            pinned = cluster.pinned_fabric()
            a, b = st.columns(2)
            a.button(
                "Pin this fabric",
                key="cluster_pin",
                on_click=cluster.pin_fabric,
                args=(preset, scenario),
                help="keep the sidebar's design; change the sidebar to compare the two under "
                "the same jobs and failures",
            )
            b.button(
                "Clear the pinned fabric",
                key="cluster_unpin",
                on_click=cluster.unpin_fabric,
                disabled=pinned is None,
            )
            if pinned is None:
                st.caption("No fabric pinned: pin this one, then change the sidebar.")
            else:
                try:
                    with st.spinner("Simulating the pinned fabric ..."):
                        other = cluster.second_fabric_runs(
                            pinned, scenario, n_jobs, float(days), seed
                        )
                except FabricModelError as exc:
                    st.warning(f"The pinned fabric cannot run this job mix: {exc}")
                else:
                    fabrics = {
                        f"{pinned[0]} (pinned)": cluster.results_of(other),
                        "this fabric": results,
                    }
                    st.dataframe(display_frame(cluster.comparison_frame(fabrics)), hide_index=True)
                    chart(
                        cluster.fabric_cost_figure(fabrics),
                        key="cluster_fabrics",
                        name="cluster fabrics",
                    )
    cluster.write_url(scenario)
