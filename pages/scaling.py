"""Scaling: efficiency and MFU vs cluster size for several topologies and vendors."""

from __future__ import annotations

import dataclasses
import time

import streamlit as st

from fabric_model.presets import DEFAULT_PRESET
from fabric_model.report.summaries import step_headline, tail_scaling_efficiency
from fabric_model.scenario import field_spec
from ui import facade
from ui.page_common import current_scenario, require_buildable
from ui.state import cli_command
from ui.tables import display_frame
from ui.theme import TOPOLOGY_LABELS, VENDOR_LABELS, vendor_label
from ui.training_figures import (
    ScalingLine,
    scaling_figure,
    scaling_frame,
    step_breakdown_figure,
    tail_scaling_figure,
)
from ui.versus_best import (
    METRIC_LABELS,
    model_title,
    scaling_gap_rows,
    scaling_gap_sentence,
    scaling_styles,
    versus_best_figure,
)
from ui.widgets import chart, csv_download, current_preset

scenario = current_scenario()
require_buildable(scenario)
st.title("Scaling")
m, par = scenario.model, scenario.parallel
model_name = model_title(m.name)
st.caption(
    f"{m.name if m.name != 'custom' else 'custom model'} "
    f"({'MoE' if m.kind == 'moe' else 'dense'}), TP{par.tp} PP{par.pp}"
    + (f" CP{par.cp}" if par.cp > 1 else "")
    + (f" EP{par.ep}" if par.ep > 1 else "")
    + f", data parallel fills the rest; {scenario.training.global_batch_tokens:,} tokens per "
    f"step at {scenario.cluster.n_gpus:,} GPUs. Every point is a full step model on that "
    f"size's fabric (sidebar: model and plan)."
)

topologies = list(field_spec("fabric.topology").choices)
vendors = list(field_spec("fabric.vendor").choices)


@st.fragment
def scaling_view() -> None:
    """The page's own controls and the sweep they drive (reruns without the sidebar)."""
    c1, c2, c3, c4 = st.columns([1.6, 1.4, 1.6, 1.0], gap="medium")
    picked_topos = c1.multiselect(
        "Topologies",
        topologies,
        default=["fat-tree", "rail-only", "dragonfly-plus"],
        format_func=lambda t: TOPOLOGY_LABELS.get(t, t),
        key="scal_topos",
        help="each topology family is a line (colour); the sidebar's other settings stay",
    )
    picked_vendors = c2.multiselect(
        "Vendors",
        vendors,
        default=["infiniband", "spectrum-x"],
        key="scal_vendors",
        format_func=lambda v: VENDOR_LABELS.get(v, v),
        help="each vendor is a dash style; its default routing applies",
    )
    lo, hi = c3.select_slider(
        "GPU range",
        options=list(facade.SCALING_SIZES),
        value=(64, 131072),
        key="scal_range",
        format_func=lambda n: f"{n:,}",
        help="powers of two; every size is a separate design",
    )
    scaling = c4.radio(
        "Scaling",
        ["strong", "weak"],
        key="scal_mode",
        horizontal=False,
        help="weak: tokens per data-parallel replica fixed, the global batch grows "
        "with the cluster; strong: the global batch stays fixed, so replicas "
        "get fewer micro-batches (the batch-size wall)",
    )
    gpus = tuple(n for n in facade.SCALING_SIZES if lo <= n <= hi)

    designs = [(scenario.fabric.topology, scenario.fabric.vendor)]
    designs += [(t, v) for t in picked_topos for v in picked_vendors if (t, v) != designs[0]]
    lines = []
    progress = st.progress(0.0, text="Modelling each design at each size ...")
    deadline = time.monotonic() + facade.COMPUTE_BUDGET_S  # one budget for the whole page

    def tick(done: int, total: int, i: int, label: str) -> None:
        progress.progress(
            min(1.0, (i + done / max(total, 1)) / len(designs)),
            text=f"Modelling {label}: {done} of {total} sizes (design {i + 1} of {len(designs)})",
        )

    for i, (topo, vendor) in enumerate(designs):
        label = f"{TOPOLOGY_LABELS.get(topo, topo)}, {vendor_label(vendor)}"
        points = facade.scaling_line(
            scenario,
            topo,
            vendor,
            gpus,
            scaling,
            deadline=deadline,
            progress=lambda done, total, i=i, label=label: tick(done, total, i, label),
        )
        lines.append(ScalingLine(topo, vendor, points, current=(i == 0)))
    progress.empty()
    cut = [line for line in lines if any(p.skipped for p in line.points)]
    if cut:
        skipped = sum(p.skipped for line in cut for p in line.points)
        first = cut[0]
        command = cli_command(
            "sweep",
            current_preset() or DEFAULT_PRESET,
            facade.scaling_variant(scenario, first.topology, first.vendor),
            "--gpus",
            ",".join(map(str, gpus)),
            "--scaling",
            scaling,
        )
        st.warning(
            f"Cut short after the page's {facade.COMPUTE_BUDGET_S:.0f} s budget: {skipped} "
            f"point(s) of {len(cut)} design(s) are not modelled yet (gaps in the charts). "
            "Rerun the page (press R) to go on from the sizes already modelled, narrow the GPU "
            f"range or the designs, or run the rest on the command line: `{command}`"
        )

    left, right = st.columns(2, gap="medium")
    with left:
        chart(
            scaling_figure(lines, "scaling_efficiency", scaling),
            key="scaling_eff",
            name="scaling efficiency",
        )
    with right:
        chart(scaling_figure(lines, "mfu", scaling), key="scaling_mfu", name="scaling mfu")
    st.caption(
        "These curves put every rank at its mean speed: an upper bound. A synchronous step "
        "waits for its slowest rank, and the slowest of N ranks is later the larger N (order "
        "statistics: about sigma x sqrt(2 ln N) for a normal spread), so with stragglers and "
        "jitter (tails.*) the weak-scaling curve bends; below, this design's curve with the "
        "step at its p50 (GPU spread, software jitter and a slow rank from the scenario's "
        "tails.* values; ECMP hash draws are on the Overview and What-if pages)."
    )
    current_line = lines[0]
    chart(
        tail_scaling_figure(
            current_line,
            tail_scaling_efficiency(
                current_line.points,
                dataclasses.replace(scenario.tails, enabled=True),
            ),
            scaling,
        ),
        key="scaling_tail",
        name="scaling with stragglers",
    )

    st.subheader("Versus the best fabric")
    st.markdown(f"**{scaling_gap_sentence(lines, model_name)}**")
    vs_metric = st.radio(
        "Compare by",
        list(METRIC_LABELS),
        format_func=METRIC_LABELS.__getitem__,
        key="scal_vs_metric",
        horizontal=True,
        help="each design against the best design at the same size: step time and network "
        "capex in percent above the best, MFU in points below it",
    )
    chart(
        versus_best_figure(
            scaling_gap_rows(lines, vs_metric), vs_metric, styles=scaling_styles(lines)
        ),
        key="scaling_vs_best",
        name="scaling versus best",
    )

    current = lines[0]
    feasible = [p for p in current.points if p.feasible]
    head = step_headline(feasible[-1].step) if feasible else None
    if feasible and head is not None:
        last = feasible[-1]
        terms = last.step
        st.markdown(
            f"**This design:** {feasible[0].n_gpus:,} to {last.n_gpus:,} GPUs; scaling "
            f"efficiency {last.scaling_efficiency:.0%} and MFU {terms.mfu:.0%} at "
            f"{last.n_gpus:,} GPUs, where compute is {head.compute_share:.0%} "
            f"of the step, the pipeline bubble {head.bubble_share:.0%} and exposed "
            f"communication {head.exposed_comm_share:.0%} (data-parallel "
            f"{terms.exposed_s.get('dp', 0.0) / terms.step_time_s:.0%})."
            + (
                " With a fixed global batch each replica gets fewer micro-batches as the "
                "cluster grows: the bubble and the un-hidden gradient reduction take over (the "
                "batch-size wall)."
                if scaling == "strong"
                else ""
            )
        )
    chart(
        step_breakdown_figure(current.points, f"Where the step goes: {current.label}"),
        key="scaling_breakdown",
        name="scaling breakdown",
    )

    infeasible = [p for p in current.points if not p.feasible and not p.skipped]
    if infeasible:
        with st.expander(f"{len(infeasible)} size(s) this design cannot run"):
            for p in infeasible:
                st.markdown(f"- **{p.n_gpus:,} GPUs**: {p.reason}")

    frame = scaling_frame(lines)
    with st.expander("All points (table)"):
        st.dataframe(display_frame(frame), hide_index=True, width="stretch")
    csv_download(frame, label="Download scaling table (CSV)", name="scaling", key="dl_scaling")


scaling_view()
