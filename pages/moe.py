"""MoE: the expert all-to-all vs EP size, topology and routing skew; dense vs MoE scaling."""

from __future__ import annotations

import time

import streamlit as st

from fabric_model.presets import DEFAULT_PRESET
from fabric_model.scenario import MODEL_SHAPES, field_spec
from ui import facade
from ui import moe as moe_page
from ui.page_common import current_scenario, require_buildable
from ui.state import cli_command
from ui.tables import display_frame
from ui.theme import TOPOLOGY_LABELS
from ui.training_figures import (
    dense_vs_moe_figure,
    moe_ep_figure,
    moe_frame,
    moe_skew_figure,
)
from ui.versus_best import (
    METRIC_LABELS,
    MOE_METRICS,
    model_title,
    moe_gap_rows,
    moe_gap_sentence,
    versus_best_figure,
)
from ui.widgets import chart, csv_download, current_preset

scenario = current_scenario()
require_buildable(scenario)
st.title("MoE")

moe_names = moe_page.moe_names()
if scenario.model.kind != "moe":
    st.caption(
        f"The sidebar's model ({scenario.model.name}) is dense, so this page shows an "
        f"MoE model on the same cluster: pick it here or in the sidebar's model "
        f"section."
    )
    default_moe = moe_page.DEFAULT_MOE
else:
    default_moe = scenario.model.name if scenario.model.name in moe_names else "custom"


@st.fragment
def moe_view() -> None:
    """The page's own controls and everything they drive (reruns without the sidebar)."""
    c1, c2, c3 = st.columns([1.2, 1.8, 1.4], gap="medium")
    options = moe_names + (["custom"] if scenario.model.kind == "moe" else [])
    name = c1.selectbox(
        "MoE model",
        options,
        index=options.index(default_moe),
        key="moe_model",
        format_func=lambda n: (
            MODEL_SHAPES[n]["description"] if n in MODEL_SHAPES else "the sidebar's custom MoE"
        ),
        help="published shape (assets/models.yaml); custom = the sidebar's shape",
    )
    topologies = c2.multiselect(
        "Topologies",
        list(field_spec("fabric.topology").choices),
        default=moe_page.default_topologies(scenario),
        format_func=lambda t: TOPOLOGY_LABELS.get(t, t),
        key="moe_topos",
        help="add topologies to compare (each costs one training step per EP degree); "
        "rail-only has no path between rails: its all-to-all goes through NVLink first",
    )
    skews = c3.multiselect(
        "Routing skews",
        list(moe_page.SKEWS),
        default=list(moe_page.DEFAULT_SKEWS),
        key="moe_skews",
        format_func=lambda s: f"{s:g}x",
        help="hot-expert skew: the GPUs hosting hot experts receive this "
        "many times the mean traffic (model.hot_fraction of the GPUs)",
    )

    moe = moe_page.setup(scenario, name)
    s = moe.moe
    tp, pp = s.parallel.tp, s.parallel.pp
    if not moe.eps:
        st.warning(
            f"parallel.tp x pp x cp = {tp * pp * s.parallel.cp} does not divide "
            f"cluster.n_gpus = {s.cluster.n_gpus:,}; change the plan in the sidebar."
        )
        return
    st.caption(
        f"{s.model.name}: {s.model.n_experts} experts, top-{s.model.top_k}, on "
        f"{s.cluster.n_gpus:,} GPUs with TP{tp} PP{pp}; expert parallelism spreads the "
        f"experts over data-parallel ranks (EP divides DP = {moe.dp:,}). Plan: "
        f"{moe.plan_source}."
    )

    deadline = time.monotonic() + facade.COMPUTE_BUDGET_S
    with st.spinner(
        f"Modelling a training step per EP degree ({len(moe.eps)}) on each topology, then "
        "per routing skew ..."
    ):
        points = moe_page.ep_points(moe, topologies or [scenario.fabric.topology], deadline)
        ep_now = moe_page.current_ep(moe, points)
        skew_points = moe_page.skew_points(moe, ep_now, skews, deadline)
    cut = moe_page.skipped([*points, *skew_points])
    if cut:
        st.warning(
            f"Cut short after the page's {facade.COMPUTE_BUDGET_S:.0f} s budget: {len(cut)} "
            "point(s) are not modelled yet (parallel.ep, model.routing_skew). Rerun the page "
            "(press R) to go on from the points already modelled, pick fewer topologies or "
            "skews, or time one point on the command line: "
            f"`{cli_command('step', current_preset() or DEFAULT_PRESET, s)}`"
        )

    left, right = st.columns(2, gap="medium")
    with left:
        chart(moe_ep_figure(points), key="moe_ep", name="moe alltoall share")
    with right:
        chart(moe_skew_figure(skew_points), key="moe_skew", name="moe skew")
    st.subheader("Versus the best fabric")
    st.markdown(f"**{moe_gap_sentence(points, model_title(s.model.name))}**")
    vs_metric = st.radio(
        "Compare by",
        list(MOE_METRICS),
        format_func=METRIC_LABELS.__getitem__,
        key="moe_vs_metric",
        horizontal=True,
        help="each topology against the best one at the same EP degree: step time in percent "
        "above the fastest, MFU in points below the best",
    )
    chart(
        versus_best_figure(
            moe_gap_rows(points, vs_metric),
            vs_metric,
            x_title="expert-parallel degree (EP)",
            log_x=False,
        ),
        key="moe_vs_best",
        name="moe versus best",
    )

    bad = [
        p
        for p in points + list(skew_points)
        if not p.step.feasible and not p.step.reason.endswith(facade.MOE_SKIPPED_REASON)
    ]
    if bad:
        with st.expander(f"{len(bad)} point(s) cannot run"):
            for p in bad:
                st.markdown(
                    f"- **{TOPOLOGY_LABELS.get(p.topology, p.topology)}, EP {p.ep}, "
                    f"skew {p.skew:g}x**: {p.step.reason}"
                )

    st.subheader("Dense vs MoE as the cluster grows")
    with st.expander(
        f"Sweep both models over {moe_page.SWEEP_MIN_GPUS} to 131,072 GPUs "
        f"(a fabric per size: takes a while on a new design)",
        key="moe_dense_open",
        on_change="rerun",
    ) as sweep:
        if sweep.open:
            with st.spinner(
                f"Sweeping both models over {moe_page.SWEEP_MIN_GPUS:,} to 131,072 GPUs "
                "(a fabric per size) ..."
            ):
                lines = moe_page.dense_vs_moe_lines(
                    scenario, moe, ep_now, time.monotonic() + facade.COMPUTE_BUDGET_S
                )
            if any(p.skipped for line in lines.values() for p in line):
                sizes = [
                    n
                    for n in facade.SCALING_SIZES
                    if moe_page.SWEEP_MIN_GPUS <= n <= facade.MOE_SWEEP_MAX_GPUS
                ]
                command = cli_command(
                    "sweep",
                    current_preset() or DEFAULT_PRESET,
                    s,
                    "--gpus",
                    ",".join(map(str, sizes)),
                )
                st.warning(
                    f"Cut short after the {facade.COMPUTE_BUDGET_S:.0f} s budget: the largest "
                    "sizes (cluster.n_gpus) are not modelled yet. Close and reopen this "
                    f"section to go on, or sweep the MoE model on the command line: `{command}`"
                )
            chart(dense_vs_moe_figure(lines), key="moe_dense", name="dense vs moe")

    frame = moe_frame(points + list(skew_points))
    with st.expander("All points (table)"):
        st.dataframe(display_frame(frame), hide_index=True, width="stretch")
    csv_download(frame, label="Download MoE table (CSV)", name="moe", key="dl_moe")


moe_view()
