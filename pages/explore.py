"""Explore: every combination of a few design choices, time to train against cost per run."""

from __future__ import annotations

import streamlit as st

from ui import explore, facade
from ui.family_compare import family_compare_section
from ui.page_common import current_scenario, require_buildable
from ui.widgets import chart, csv_download

scenario = current_scenario()
st.title("Explore")
require_buildable(scenario)
explore.read_url_once()
st.caption(
    "The sidebar's design as a training run of "
    f"{scenario.training.total_tokens / 1e12:,.1f} T tokens (training.total_tokens): "
    "interruptions from every GPU, server, NIC, switch, transceiver and cable of its bill of "
    "materials (rates from Llama 3's 54-day log and public fleet data: "
    "assets/reliability.yaml), goodput with Young/Daly checkpoints, days to train, and the "
    "cluster's TCO per day (capex over costs.years plus energy) times those days."
)

current = explore.current_run(scenario)
cols = st.columns(5)
cols[0].metric("Time to train", explore.fmt(current["time_to_train_days"], "{:,.1f} days"))
cols[1].metric("Cost per run", explore.fmt(current["cost_per_run_usd"], "${:,.2f} M", 1e-6))
cols[2].metric("Per million tokens", explore.fmt(current["usd_per_million_tokens"], "${:,.3f}"))
cols[3].metric("Goodput", explore.fmt(current["goodput"], "{:.1%}"))
cols[4].metric("Interruptions per day", explore.fmt(current["interruptions_per_day"], "{:,.2f}"))
if not current["feasible"]:
    st.warning(f"The sidebar's design cannot train: {current['reason']}")
else:
    if st.toggle(
        "Sensitivity: what moves the cost per run",
        key="ex_tornado_on",
        help="prices, failure rates, compute efficiency, link speed and oversubscription, each "
        "alone at the ends of a stated range (18 more runs of the model)",
    ):
        rows = explore.sensitivity_cached(scenario)
        chart(
            explore.tornado_figure(rows, current["cost_per_run_usd"]),
            key="explore_tornado",
            name="explore sensitivity",
        )
        notes = [f"{r.label}: {r.note}" for r in rows if r.note]
        st.caption(
            "Each assumption alone at each end of its stated range, the rest as the sidebar "
            "says." + "".join(f" {n}." for n in notes)
        )

st.subheader("Fat-tree, rail-only and OCS")
family_compare_section(scenario, key="explore")

st.subheader("Design space")
st.caption(
    "Pick values to vary; every combination, on top of the sidebar's design, is a design "
    f"(at most {explore.MAX_PAGE_DESIGNS} here; `python -m fabric_model explore` goes to "
    "10,000 and runs on Dask). The selection is kept in the URL."
)
explore.controls()
explore.write_url()
dims = explore.dimensions()
n = explore.n_designs(dims)
if not dims:
    st.caption("Nothing varied yet: pick, say, two vendors and two link speeds.")
    st.stop()
if n > explore.MAX_PAGE_DESIGNS:
    st.warning(
        f"{n:,} designs: more than the {explore.MAX_PAGE_DESIGNS} this page models; "
        "drop some values, or use the explore command line verb"
    )
    st.stop()

designs = explore.evaluate(scenario, dims, explore.plan_search_on())
cut = [d for d in designs if d.get("cut_short")]
if cut:
    st.warning(
        f"Cut short after the page's {facade.COMPUTE_BUDGET_S:.0f} s budget: {len(cut)} of "
        f"{len(designs)} designs are not modelled or their plan search (parallel.*) stopped "
        "early. Rerun the page (press R) to go on from the designs already modelled, pick "
        "fewer values, or run the whole set on the command line: "
        f"`{explore.cut_short_command(scenario, dims, explore.plan_search_on())}`"
    )
infeasible = [d for d in designs if not d["feasible"]]
if infeasible:
    st.caption(
        f"{len(infeasible)} of {len(designs)} designs cannot train (not drawn; the table says why)."
    )
chart(explore.pareto_figure(designs, scenario), key="explore_pareto", name="explore pareto")
frame = explore.designs_frame(designs)
st.dataframe(frame, hide_index=True, width="stretch")
csv_download(frame, label="Download designs (CSV)", name="explore designs", key="dl_explore_csv")
st.caption("Load a design into the sidebar (★ = on the Pareto front):")
explore.load_buttons(designs, scenario)
