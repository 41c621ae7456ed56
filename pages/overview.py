"""Overview: the scenario in one screen."""

from __future__ import annotations

import streamlit as st

from fabric_model.errors import FabricModelError
from fabric_model.report.summaries import step_headline
from ui import facade
from ui.overview import allreduce_curve_chart, step_share_chart, vendor_frame
from ui.page_common import current_scenario, show_model_error
from ui.tables import display_frame
from ui.theme import sentence_start, topology_label, vendor_label
from ui.widgets import chart, csv_download

scenario = current_scenario()
f, c = scenario.fabric, scenario.cluster
st.title("Overview")
st.caption(
    f"{c.n_gpus:,} {c.gpu.upper()} GPUs ({c.nvlink_domain}-GPU NVLink domains, "
    f"{c.nics_per_gpu} x {f.link_gbps}G NIC per GPU), {vendor_label(f.vendor)} "
    f"{topology_label(f.topology).lower()}"
    + (f", {f.oversubscription:g}:1 at the leaf" if f.oversubscription > 1 else "")
    + (", scattered placement" if scenario.what_if.placement == "scattered" else "")
)
try:
    topo = facade.topology(scenario)
    bom = facade.bom(scenario)
    summary = facade.collective_summary(scenario)
except FabricModelError as exc:
    show_model_error(exc)
    st.stop()

m, par = scenario.model, scenario.parallel
st.subheader(
    f"Training {m.name if m.name != 'custom' else 'a custom model'}"
    f" ({'MoE' if m.kind == 'moe' else 'dense'})"
)
step = facade.training_step(scenario)
if step.feasible and step.plan is not None:
    eff = facade.replica_scaling_efficiency(scenario)
    row0 = st.columns(4)
    row0[0].metric(
        "Step time",
        f"{step.step_time_s:,.2f} s",
        help=f"{step.plan.label()}: compute {step.compute_s:,.2f} s + bubble "
        f"{step.bubble_s:,.2f} s + exposed communication "
        f"{step.exposed_comm_s:,.2f} s"
        + (f" + MoE imbalance {step.imbalance_s:,.2f} s" if step.imbalance_s else ""),
    )
    row0[1].metric(
        "MFU",
        f"{step.mfu:.1%}",
        help="model FLOPs (6N per token + attention, Megatron-LM formula) / "
        "(GPUs x dense BF16 peak x step time)",
    )
    row0[2].metric(
        "Tokens per second",
        f"{step.tokens_per_s:,.0f}",
        help=f"{step.tokens_per_step:,.0f} tokens per step",
    )
    row0[3].metric(
        "Scaling efficiency",
        "n/a" if eff is None else f"{eff[0]:.0%}",
        help="tokens/s per GPU at this size vs the smallest size this plan runs "
        + ("at" if eff is None else f"at ({eff[1]:,} GPUs)")
        + ", same tokens per data-parallel replica (weak scaling); the "
        "Scaling page sweeps every size",
    )
    chart(
        step_share_chart(scenario),
        key="overview_step",
        name="overview step breakdown",
    )
    if step.bubble_fraction > 0.25:
        st.warning(
            f"The pipeline bubble is {step.bubble_fraction:.0%} of the step: each "
            f"data-parallel replica gets only {step.plan.micro_batches} micro-batch"
            f"{'es' * (step.plan.micro_batches != 1)} for {step.plan.pp} stages. Raise "
            f"training.global_batch_tokens, lower parallel.pp or interleave "
            f"(parallel.vpp) - the batch-size wall of large clusters."
        )
    head = step_headline(step)
    if head is not None and head.exposed_comm_share > 0.25:
        st.warning(
            f"Exposed communication is {head.exposed_comm_share:.0%} "
            f"of the step: see the Scaling page and the plan in the sidebar."
        )
    if head is not None and head.tail_sentence:  # tails.enabled (URL or scenario file)
        st.caption(
            "Stragglers and jitter (tails.*): step "
            + head.tail_sentence
            + "; the What-if page's health section names the failure modes that cost most."
        )
    for warning in step.warnings:  # e.g. memory within the estimate's error of the HBM
        st.warning(sentence_start(warning))
    if step.memory is not None:
        st.caption(
            "Memory per GPU by pipeline rank: "
            + "; ".join(f"rank {s.rank} {s.total_gib:,.1f} GiB" for s in step.memory.stages)
            + f" of {step.memory.capacity_gib:,.1f} GiB ({step.memory.status}); "
            f"MFU against the precision's peak {step.mfu_precision_peak:.1%}."
        )
else:
    st.warning("This parallel plan cannot run: " + step.reason)

st.subheader("Fabric")
small, large = summary.allreduce
row1 = st.columns(3)
row1[0].metric(
    "All-reduce busbw, 1 GiB",
    f"{large.busbw_GBps:,.0f} GB/s",
    help=f"NCCL-like choice: {large.algo}/{large.proto}; bottleneck {large.bottleneck}. "
    "Compare with nccl-tests all_reduce_perf.",
)
row1[1].metric(
    "All-reduce time, 1 MiB",
    f"{small.time_us:,.0f} us",
    help=f"{small.algo}/{small.proto}: latency {small.latency_us:,.1f} us + "
    f"bandwidth {small.bandwidth_us:,.1f} us",
)
if summary.alltoall:
    a2a = summary.alltoall[1]
    row1[2].metric(
        "All-to-all busbw, 1 GiB",
        f"{a2a.busbw_GBps:,.0f} GB/s",
        help=f"{a2a.algo}; bottleneck {a2a.bottleneck}",
    )
else:
    row1[2].metric("All-to-all busbw, 1 GiB", "n/a", help=summary.alltoall_error)
row2 = st.columns(3)
row2[0].metric(
    "Switches / cables",
    f"{topo.n_switches:,} / {topo.n_links:,}",
    help=f"{topo.tiers} switch tiers" if topo.tiers else "switchless",
)
row2[1].metric("Hops max / mean", f"{topo.max_switch_hops} / {topo.mean_switch_hops:.2f}")
row2[2].metric(
    "Bisection per GPU",
    f"{topo.bisection_per_gpu_GBps:,.1f} GB/s",
    help=f"line rate {f.link_gbps / 8 * c.nics_per_gpu:g} GB/s per GPU",
)
row3 = st.columns(3)
row3[0].metric(
    "Network capex per GPU",
    f"${bom.capex_per_gpu_usd:,.0f}",
    help=f"total ${bom.capex_usd / 1e6:,.2f} M",
)
row3[1].metric("Network power per GPU", f"{bom.power_per_gpu_w:,.0f} W")
row3[2].metric("Network share of cluster capex", f"{bom.network_share:.1%}")

if topo.hop_histogram and topo.oversubscription > 1:
    st.warning(
        f"The leaf is {topo.oversubscription:g}:1 oversubscribed: traffic that leaves a "
        "leaf (scattered jobs, all-to-all, cross-rail) gets at most "
        f"{1 / topo.oversubscription:.0%} of line rate."
    )
if large.busbw_min_GBps < 0.95 * large.busbw_GBps:
    st.warning(
        f"Static ECMP hashing: across seeds the 1 GiB all-reduce ranges "
        f"{large.busbw_min_GBps:,.0f}-{large.busbw_max_GBps:,.0f} GB/s (flow collisions)."
    )
if f.sharp and f.vendor != "infiniband":
    st.info(
        "fabric.sharp is on, but only InfiniBand switches reduce in the network; "
        "SHARP is left out of the all-reduce choice."
    )

chart(
    allreduce_curve_chart(scenario),
    key="overview_busbw",
    name="overview allreduce busbw",
)

st.subheader("The same design on each vendor")
vendors = vendor_frame(scenario)
st.dataframe(display_frame(vendors), hide_index=True, width="stretch")
csv_download(
    vendors,
    label="Download comparison (CSV)",
    name="overview vendor comparison",
    key="dl_overview_vendors",
)
st.caption("Details: Topology (diagram, counts, hops), Cost (bill of materials, power, TCO).")
