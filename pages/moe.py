"""MoE: the expert all-to-all vs EP size, topology and routing skew; dense vs MoE scaling."""

from __future__ import annotations

import streamlit as st

from fabric_model.scenario import MODEL_SHAPES, apply_overrides, field_spec
from fabric_model.training.sweep import expert_degrees
from ui import facade
from ui.page_common import current_scenario, require_buildable
from ui.theme import TOPOLOGY_LABELS
from ui.training_figures import (
    dense_vs_moe_figure,
    moe_ep_figure,
    moe_frame,
    moe_skew_figure,
)
from ui.widgets import chart, csv_download

scenario = current_scenario()
require_buildable(scenario)
st.title("MoE")

moe_names = [n for n, e in MODEL_SHAPES.items() if e["shape"]["kind"] == "moe"]
if scenario.model.kind != "moe":
    st.caption(f"The sidebar's model ({scenario.model.name}) is dense, so this page shows an "
               f"MoE model on the same cluster: pick it here or in the sidebar's model "
               f"section.")
    default_moe = "deepseek-v3"
else:
    default_moe = scenario.model.name if scenario.model.name in moe_names else "custom"

c1, c2, c3 = st.columns([1.2, 1.8, 1.4], gap="medium")
options = moe_names + (["custom"] if scenario.model.kind == "moe" else [])
name = c1.selectbox("MoE model", options, index=options.index(default_moe), key="moe_model",
                    format_func=lambda n: MODEL_SHAPES[n]["description"] if n in MODEL_SHAPES
                    else "the sidebar's custom MoE",
                    help="published shape (assets/models.yaml); custom = the sidebar's shape")
topologies = c2.multiselect(
    "Topologies", list(field_spec("fabric.topology").choices),
    default=[scenario.fabric.topology, *[t for t in ("rail-only", "fat-tree")
                                         if t != scenario.fabric.topology]][:2],
    format_func=lambda t: TOPOLOGY_LABELS.get(t, t), key="moe_topos",
    help="rail-only has no path between rails: its all-to-all goes through NVLink first")
skews = c3.multiselect("Routing skews", [1.0, 1.5, 2.0, 4.0, 8.0], default=[1.0, 2.0, 4.0],
                       key="moe_skews", format_func=lambda s: f"{s:g}x",
                       help="hot-expert skew: the GPUs hosting hot experts receive this many "
                            "times the mean traffic (model.hot_fraction of the GPUs)")

moe = scenario if name == "custom" else apply_overrides(scenario, {"model.name": name})
tp, pp, cp = moe.parallel.tp, moe.parallel.pp, moe.parallel.cp
dp = moe.cluster.n_gpus // (tp * pp * cp) if moe.cluster.n_gpus % (tp * pp * cp) == 0 else 0
eps = tuple(e for e in expert_degrees(moe, dp) if e <= 256) if dp else ()
if not eps:
    st.warning(f"parallel.tp x pp x cp = {tp * pp * cp} does not divide cluster.n_gpus = "
               f"{moe.cluster.n_gpus:,}; change the plan in the sidebar.")
    st.stop()
st.caption(f"{moe.model.name}: {moe.model.n_experts} experts, top-{moe.model.top_k}, on "
           f"{moe.cluster.n_gpus:,} GPUs with TP{tp} PP{pp}; expert parallelism spreads the "
           f"experts over data-parallel ranks (EP divides DP = {dp:,}).")

points = []
with st.spinner("Modelling the all-to-all on each topology ..."):
    for topo in topologies or [scenario.fabric.topology]:
        points += facade.moe_points(moe, topo, eps, (moe.model.routing_skew,))
    # the skew chart uses the sidebar's EP degree, or the fastest one that fits
    here = [p for p in points if p.topology == moe.fabric.topology and p.step.feasible]
    if moe.parallel.ep > 1 and moe.parallel.ep in eps:
        ep_now = moe.parallel.ep
    elif here:
        ep_now = min(here, key=lambda p: p.step.step_time_s).ep
    else:
        ep_now = max(eps)
    skew_points = facade.moe_points(
        apply_overrides(moe, {"parallel.ep": ep_now}), moe.fabric.topology, (ep_now,),
        tuple(sorted(skews or [1.0])))

left, right = st.columns(2, gap="medium")
with left:
    chart(moe_ep_figure(points), key="moe_ep", name="moe alltoall share")
with right:
    chart(moe_skew_figure(skew_points), key="moe_skew", name="moe skew")
bad = [p for p in points + list(skew_points) if not p.step.feasible]
if bad:
    with st.expander(f"{len(bad)} point(s) cannot run"):
        for p in bad:
            st.markdown(f"- **{TOPOLOGY_LABELS.get(p.topology, p.topology)}, EP {p.ep}, "
                        f"skew {p.skew:g}x**: {p.step.reason}")

st.subheader("Dense vs MoE as the cluster grows")
dense = apply_overrides(scenario, {"model.name": "llama3-70b"}) \
    if scenario.model.kind == "moe" else scenario
gpus = tuple(n for n in facade.SCALING_SIZES if n >= 64)
with st.spinner("Sweeping both models over cluster sizes ..."):
    dense_pts = facade.scaling_line(dense, dense.fabric.topology, dense.fabric.vendor, gpus,
                                    "weak")
    moe_pts = facade.scaling_line(apply_overrides(moe, {"parallel.ep": ep_now}),
                                  moe.fabric.topology, moe.fabric.vendor, gpus, "weak")
chart(dense_vs_moe_figure({f"dense: {dense.model.name}": dense_pts,
                           f"MoE: {moe.model.name} (EP{ep_now})": moe_pts}),
      key="moe_dense", name="dense vs moe")

frame = moe_frame(points + list(skew_points))
with st.expander("All points (table)"):
    st.dataframe(frame, hide_index=True, width="stretch")
csv_download(frame, label="Download MoE table (CSV)", name="moe", key="dl_moe")
