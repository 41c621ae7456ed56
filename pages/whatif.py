"""What-if: the sidebar's scenario before and after a degraded link, a scattered placement,
more oversubscription, another link speed or more NICs per GPU."""

from __future__ import annotations

import streamlit as st

from fabric_model.errors import FabricModelError
from ui import facade, whatif
from ui.compare_figures import (
    WHATIF_COLUMNS,
    whatif_busbw_figure,
    whatif_display_frame,
    whatif_frame,
    whatif_step_figure,
)
from ui.health_figures import health_figure, health_frame, skipped_frame
from ui.page_common import current_scenario, require_buildable
from ui.tables import display_frame
from ui.widgets import chart, csv_download, number_or_text_column

scenario = current_scenario()
st.title("What-if")
require_buildable(scenario)
whatif.read_url_once()
st.caption(
    "Before: the sidebar's scenario. After: the same scenario with the changes below. Each "
    "change is also modelled alone (table). Every number comes from the flow solver on the "
    "changed fabric and the training-step model on top; the changes are kept in the URL."
)


@st.fragment
def whatif_view() -> None:
    """The what-if controls and everything they drive (reruns without the sidebar)."""
    whatif.controls(scenario)
    whatif.write_url()
    with st.spinner("Modelling each change on the fabric ..."):
        result = whatif.evaluate(scenario, whatif.overrides())
    if result.combined is None:
        st.caption(
            "No change yet: move a control above. Until then there is only before, the "
            "sidebar's scenario."
        )
    for row in result.rows:
        if row.problem:
            st.warning(f"{row.label} ({row.setting}): {row.problem}")
    if result.before.problem:
        st.warning(f"Before: {result.before.problem}")

    st.subheader("Training step")
    whatif.before_after_cards(result, "step")
    st.subheader("Collectives")
    whatif.before_after_cards(result, "collectives")

    st.subheader("Each change alone")
    table = whatif_frame(result.before, result.rows)
    shown = whatif_display_frame(table)
    st.dataframe(
        shown,
        hide_index=True,
        width="stretch",
        column_config={
            "what_if": st.column_config.TextColumn("what-if"),
            **{
                key: number_or_text_column(shown, key, header, fmt)
                for key, (header, fmt) in WHATIF_COLUMNS.items()
            },
            "note": st.column_config.TextColumn("why not", help="why a row has no numbers"),
        },
    )
    st.caption(
        "Each row is the sidebar's scenario with that change alone"
        + (", the last one with all of them" if len(result.singles) > 1 else "")
        + ". Δ: after - before (seconds, percentage points of MFU, or percent); busbw at "
        "1 GiB per GPU with the NCCL-like algorithm choice."
    )
    csv_download(table, label="Download what-if table (CSV)", name="whatif", key="dl_whatif_table")

    log_y = st.toggle(
        "Logarithmic seconds axis",
        value=True,
        key="wi_log_y",
        help="on: communication terms (milliseconds) stay readable next to compute "
        "(seconds); off: a linear axis in seconds per step",
    )
    left, right = st.columns(2, gap="medium")
    with left:
        chart(
            whatif_step_figure(result.before, result.after, log_y=log_y),
            key="whatif_step",
            name="whatif step terms",
        )
    with right:
        chart(
            whatif_busbw_figure(result.before, result.after),
            key="whatif_busbw",
            name="whatif busbw",
        )


whatif_view()


def health_view() -> None:
    """The sidebar's design: its step's p50/p99 and the failure modes that cost it most."""
    st.subheader("Health: the step's tail and what would cost it most")
    try:
        with st.spinner("Modelling each failure mode ..."):
            health = facade.health(scenario)
    except FabricModelError as exc:  # the design itself: the page's other sections say so too
        st.warning(f"No health view: {exc}")
        return
    if health is None:
        st.warning(
            "No step to put a tail on: this parallel plan cannot run: "
            + facade.training_step(scenario).reason
        )
        return
    c1, c2, c3 = st.columns(3)
    c1.metric(
        "Step p50",
        f"{health.step_time_p50_s:,.3g} s",
        help="median step over iterations: every rank's compute spread, software jitter and "
        "(under static ECMP) the hash draws; the step waits for its slowest rank (tails.*)",
    )
    c2.metric("Step p99", f"{health.step_time_p99_s:,.3g} s", help="99th percentile step")
    c3.metric(
        "Every rank at its mean",
        f"{health.step_time_s:,.3g} s",
        help="the deterministic step the other pages show (tails.enabled = false)",
    )
    top = health.top(3)
    if top:
        st.markdown(
            "**Costliest failure modes:** "
            + "; ".join(
                f"{c.mode.label}: p50 {c.step_time_p50_s:,.3g} s "
                f"({c.delta_s:+,.3g} s, {health.delta_pct(c):+.1%})"
                for c in top
            )
        )
    chart(health_figure(health), key="health_modes", name="health failure modes")
    frame = health_frame(health)
    st.dataframe(display_frame(frame), hide_index=True, width="stretch")
    skipped = skipped_frame(health)
    if len(skipped):
        with st.expander(f"{len(skipped)} failure mode(s) that do not apply to this design"):
            st.dataframe(display_frame(skipped), hide_index=True, width="stretch")
    st.caption(
        "Each failure mode is the sidebar's design with its overrides "
        "(assets/failure_modes.yaml) modelled with tails on; Δ is its step p50 minus the "
        "healthy p50."
    )
    csv_download(frame, label="Download health table (CSV)", name="health", key="dl_health")


health_view()
