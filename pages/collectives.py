"""Collectives: bus bandwidth per message size, one size's breakdown, and fabric effects."""

from __future__ import annotations

import streamlit as st

from fabric_model.collectives import OPS
from fabric_model.collectives.context import ECMP_SEEDS
from fabric_model.errors import FabricModelError
from ui import facade
from ui.collective_figures import (
    auto_pick_text,
    auto_summary_text,
    collective_breakdown_figure,
    collective_breakdown_frame,
    collective_busbw_figure,
    collective_curve_frame,
    fabric_effects_figure,
    fabric_effects_notes,
    unavailable_text,
)
from ui.figure_base import size_label
from ui.page_common import current_scenario, show_model_error
from ui.theme import OP_LABELS, TOPOLOGY_LABELS, vendor_label
from ui.widgets import chart, csv_download

_CHOSEN = "coll_algos"  # the user's algorithm picks per operation (None = the defaults)
_PLACEMENT_KEY = "what_if.placement"
_PLACEMENT_WIDGET = "coll:" + _PLACEMENT_KEY
_EXTRA = "url_extra_overrides"  # ui.state: scenario keys without a sidebar widget
EFFECTS_OPEN = "coll_effects_open"  # the fabric effects section's expander (open = solved)


def _remember_algos(op: str) -> None:
    st.session_state[_CHOSEN][op] = list(st.session_state[f"coll_algos:{op}"])


def _on_placement_change() -> None:
    """The toggle is a scenario key: it goes into the extra overrides and so into the URL."""
    extra = dict(st.session_state.get(_EXTRA, {}))
    extra[_PLACEMENT_KEY] = "scattered" if st.session_state[_PLACEMENT_WIDGET] else "contiguous"
    st.session_state[_EXTRA] = extra


scenario = current_scenario()
st.title("Collectives")
n_gpus = scenario.cluster.n_gpus
fabric = (
    f"{vendor_label(scenario.fabric.vendor)} "
    f"{TOPOLOGY_LABELS.get(scenario.fabric.topology, scenario.fabric.topology)}, "
    f"{scenario.fabric.link_gbps}G"
)
try:
    with st.spinner("Building the fabric ..."):
        facade.check_fabric(scenario)
except FabricModelError as exc:
    show_model_error(exc)
    st.stop()


@st.fragment
def curves_view() -> None:
    """Operation, algorithms, size: the curves and the breakdown (reruns on its own)."""
    controls = st.columns([1.1, 2.2, 1.6], gap="medium")
    op = controls[0].radio(
        "Operation",
        OPS,
        key="coll_op",
        format_func=OP_LABELS.get,
        help="the collective, across all cluster.n_gpus GPUs",
    )
    with st.spinner("Solving the collectives' traffic on the fabric ..."):
        defaults = facade.default_algorithms(scenario, op)
    algo_key = f"coll_algos:{op}"
    chosen = st.session_state.setdefault(_CHOSEN, {}).get(op)
    st.session_state[algo_key] = list(defaults) if chosen is None else chosen
    controls[1].multiselect(
        "Algorithms to plot",
        list(facade.OP_ALGORITHMS[op]),
        key=algo_key,
        on_change=_remember_algos,
        args=(op,),
        help="each line is one algorithm with its fastest protocol per size; auto (NCCL-like) "
        "is drawn whatever is picked here",
    )
    size = controls[2].select_slider(
        "Size for the breakdown",
        options=list(facade.COLLECTIVE_SIZES),
        value=2**30,
        key="coll_size",
        format_func=size_label,
        help="message size per GPU (nccl-tests' size)",
    )

    with st.spinner("Solving the collectives' traffic on the fabric ..."):
        curves = facade.collective_curves(scenario, op, tuple(st.session_state[algo_key]))
    if curves.unavailable:
        st.info(unavailable_text(curves.unavailable, op))

    if not curves.curves and not curves.auto:
        st.info(f"No {OP_LABELS[op]} algorithm can run on this design; nothing to plot.")
        return
    st.caption(
        f"{OP_LABELS[op]} across {n_gpus:,} GPUs on {fabric}, {curves.routing} routing. "
        f"Bus bandwidth as nccl-tests prints it (algorithm bandwidth x the bus factor). "
        f"The grey halo is auto; its markers take the colour of the algorithm it picks "
        f"(circle LL, diamond LL128, square Simple)."
        + (f" Shaded: slowest to fastest of {ECMP_SEEDS} ECMP hash seeds." if curves.ecmp else "")
    )
    log_y = st.toggle(
        "Logarithmic bus bandwidth axis",
        value=True,
        key="coll_log_y",
        help="off: a linear axis, which shows the large-message plateau",
    )
    chart(
        collective_busbw_figure(
            curves.curves,
            curves.auto,
            ecmp=curves.ecmp,
            log_y=log_y,
            title=f"{OP_LABELS[op]} bus bandwidth vs message size ({n_gpus:,} GPUs)",
        ),
        key="collective_curves",
        name=f"collectives {op} busbw",
    )
    st.caption(
        auto_summary_text(curves.auto)
        + (
            " SHARP is drawn but not in auto's choice: auto considers it only with fabric.sharp on."
            if "sharp" in curves.curves and not scenario.fabric.sharp
            else ""
        )
    )

    st.subheader(f"Breakdown at {size_label(size)}")
    st.markdown(auto_pick_text(curves.auto, size))
    if curves.curves:
        chart(
            collective_breakdown_figure(curves.curves, size),
            key="collective_breakdown",
            name=f"collectives {op} breakdown {size_label(size)}",
        )
        breakdown = collective_breakdown_frame(curves.curves, curves.models, size, curves.auto)
        st.dataframe(
            breakdown,
            hide_index=True,
            width="stretch",
            column_config={
                "auto_pick": st.column_config.CheckboxColumn("auto's pick"),
                "busbw_range_GBps": st.column_config.TextColumn(
                    "busbw range (GB/s)", help="slowest to fastest ECMP seed"
                ),
                "time_us": st.column_config.NumberColumn(format="%.1f"),
                "time_us_p50": st.column_config.NumberColumn(
                    "p50 (us)",
                    format="%.1f",
                    help="median over iterations (tails.*): ECMP hash draws and the "
                    "slowest rank's launch",
                ),
                "time_us_p99": st.column_config.NumberColumn("p99 (us)", format="%.1f"),
                "latency_us": st.column_config.NumberColumn(format="%.1f"),
                "bandwidth_us": st.column_config.NumberColumn(format="%.1f"),
                "busbw_GBps": st.column_config.NumberColumn(format="%.2f"),
                "regime": st.column_config.TextColumn(
                    help="latency when the latency term exceeds the bandwidth term"
                ),
                "ceiling": st.column_config.TextColumn(
                    help="the resource whose bound is the algorithm's bandwidth ceiling "
                    "(nic, nvlink, nvls, pcie, sharp, a switch tier, nccl-channels = "
                    "NCCL's per-channel software cap)"
                ),
                "pct_of_ceiling": st.column_config.NumberColumn(
                    "% of ceiling", format="%.1f", help="busbw / the ceiling's bus bandwidth"
                ),
                "nvlink_busbw_GBps": st.column_config.NumberColumn(
                    "NVLink side (GB/s)",
                    format="%.0f",
                    help="NVLink-side bus bandwidth, large messages",
                ),
                "network_busbw_GBps": st.column_config.NumberColumn(
                    "network side (GB/s)",
                    format="%.0f",
                    help="network-side bus bandwidth from the flow solver, large messages "
                    "(empty: one NVLink domain)",
                ),
            },
        )
        st.caption(
            "time = latency term + bandwidth term; the busbw range spans the "
            "ECMP seeds (equal under deterministic routing); the two last columns "
            "are the model's large-message bandwidths on each side of the minimum."
        )
        csv_download(
            breakdown,
            label="Download breakdown (CSV)",
            name=f"collectives {op} breakdown {size_label(size)}",
            key="dl_collective_breakdown",
        )
    curve_frame = collective_curve_frame(curves.curves, curves.auto)
    st.download_button(
        "Download curves (CSV)",
        curve_frame.to_csv(index=False).encode(),
        file_name=f"{scenario.name}-{op}-curves.csv",
        mime="text/csv",
        key="dl_collective_curves",
    )


curves_view()

st.subheader("Fabric effects")
st.session_state[_PLACEMENT_WIDGET] = scenario.what_if.placement == "scattered"
st.toggle(
    "Scattered placement",
    key=_PLACEMENT_WIDGET,
    on_change=_on_placement_change,
    help="what_if.placement: the job's servers are spread over the cluster instead of "
    "filling consecutive leaves. A scenario key: it also applies to the curves "
    "above and is kept in the URL.",
)
# Solved only when opened: three vendors' fabrics, each with its own ring and all-to-all.
with st.expander(
    f"The same design on InfiniBand, Spectrum-X and RoCE: ring all-reduce and "
    f"all-to-all at {size_label(facade.EFFECT_SIZE_BYTES)}",
    key=EFFECTS_OPEN,
    on_change="rerun",
) as effects_section:
    if effects_section.open:
        with st.spinner("Solving on InfiniBand, Spectrum-X and RoCE ..."):
            effects = facade.fabric_effects(scenario)
        chart(
            fabric_effects_figure(effects), key="fabric_effects", name="collectives fabric effects"
        )
        st.caption(
            "The same design on each vendor's parts with its default routing. InfiniBand and "
            "Spectrum-X route adaptively, spreading every flow's packets over the free uplinks; "
            "plain RoCE hashes each flow onto one ECMP path for its lifetime. A contiguous "
            "job's rail-aligned ring stays under its leaves, so hashing has nothing to collide "
            "on; a scattered job's ring hops cross the spines, several hashed flows land on one "
            "uplink while others idle, and the slowest flow sets the ring's pace. All-to-all "
            "crosses the spines either way. Error bars: slowest to fastest hash seed."
        )
        notes = fabric_effects_notes(effects)
        if notes:
            st.info(notes)
