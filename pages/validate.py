"""Validate: an nccl-tests log against the model of the sidebar's design, and the design's
acceptance thresholds to run on the real cluster."""

from __future__ import annotations

import streamlit as st

from fabric_model.errors import FabricModelError, NcclLogError
from fabric_model.validate.compare import DEFAULT_TOLERANCE
from fabric_model.validate.nccl_log import MAX_LOG_FILE_BYTES, NCCL_TESTS_OPS
from ui import facade
from ui.figure_base import size_label
from ui.page_common import current_scenario, show_model_error
from ui.theme import OP_LABELS
from ui.validation_figures import (
    catches_frame,
    has_percentiles,
    validation_busbw_figure,
    validation_frame,
    validation_ratio_figure,
)
from ui.widgets import chart

_FROM_LOG = "from the log"
_OP_CHOICES = [_FROM_LOG, *(op for op in NCCL_TESTS_OPS if op != "unknown")]
ACCEPTANCE_OPEN = "validate_acceptance_open"  # the acceptance section's expander


def _op_label(op: str) -> str:
    return OP_LABELS.get(op, op)


def _read_log() -> tuple[str, str] | None:
    """Return ``(text, source)`` from the uploader or the text area, or None (nothing given)."""
    left, right = st.columns(2, gap="medium")
    uploaded = left.file_uploader(
        "Upload an nccl-tests log",
        type=["log", "txt", "out", "json"],
        key="validate_upload",
        max_upload_size=MAX_LOG_FILE_BYTES // 2**20,  # the server's cap is for scenario files
        help=f"stdout of all_reduce_perf, all_gather_perf, ..., or the JSON file of its "
        f"-J option (nccl-tests 2.17.3+; with -I 1 it has per-iteration p50/p99), at most "
        f"{MAX_LOG_FILE_BYTES // 2**20} MiB; NCCL INFO lines and srun/mpirun labels "
        f"may be mixed in",
    )
    pasted = right.text_area(
        "... or paste one",
        key="validate_paste",
        height=150,
        placeholder="#       size         count      type   redop    root     time   algbw ...",
    )
    if uploaded is not None:
        if uploaded.size > MAX_LOG_FILE_BYTES:
            st.error(
                f"{uploaded.name} is {uploaded.size / 2**20:,.1f} MiB, over the "
                f"{MAX_LOG_FILE_BYTES // 2**20} MiB limit for a log; upload the run's "
                f"stdout only (a full sweep is a few hundred KiB)."
            )
            return None
        text = uploaded.getvalue().decode("utf-8", errors="replace")
        if pasted.strip():
            st.caption("Using the uploaded file; remove it to compare the pasted text.")
        return text, uploaded.name
    if pasted.strip():
        return pasted, "pasted log"
    return None


scenario = current_scenario()
st.title("Validate")
st.caption(
    "The sidebar's scenario describes the cluster the log was measured on (GPU, NVLink "
    "domain, NICs, fabric); the log says which collective ran and on how many ranks: a rank "
    "count of 2 or more from the log overrides cluster.n_gpus (a header with one Rank line "
    "keeps it), and the log's NCCL release sets nccl.version. Advice names NCCL's settings "
    "(NCCL_ALGO, NCCL_PROTO, NCCL_NVLS_ENABLE). The model is NCCL-like auto (its best "
    "algorithm and protocol per size); measured values are nccl-tests' out-of-place columns."
)

log_input = _read_log()
c1, c2 = st.columns(2, gap="medium")
op_choice = c1.selectbox(
    "Operation",
    _OP_CHOICES,
    key="validate_op",
    format_func=lambda o: o if o == _FROM_LOG else _op_label(o),
    help="only for logs that do not name their binary (all_reduce_perf, ...); a binary "
    "named in the log wins",
)
tolerance = c2.slider(
    "Tolerance band",
    min_value=0.05,
    max_value=0.50,
    value=DEFAULT_TOLERANCE,
    step=0.05,
    key="validate_tolerance",
    format="±%.2f",
    help="a size whose measured / model ratio is within 1 ± this counts as expected; also "
    "the acceptance thresholds' band below",
)
op = None if op_choice == _FROM_LOG else op_choice

st.header("Measured vs model", divider="gray")
if log_input is None:
    st.markdown(
        "Upload or paste the output of an nccl-tests run, e.g. "
        "`all_reduce_perf -b 8 -e 8G -f 2 -g 8`, or its JSON file "
        "(`... -I 1 -J run.json`, nccl-tests 2.17.3+), to compare it size by size with the "
        "model of the design in the sidebar. all-reduce, all-gather, reduce-scatter and "
        "all-to-all are modelled."
    )
else:
    text, source = log_input
    log = None
    try:
        log = facade.nccl_log(text, op)
    except NcclLogError as exc:
        st.error(f"Could not read {source} as an nccl-tests log or JSON file: {exc}")
    comparison = None
    if log is not None:
        try:
            with st.spinner("Timing the log's sizes on the model ..."):
                comparison = facade.log_comparison(text, op, scenario, tolerance)
        except FabricModelError as exc:
            st.warning(f"This log cannot be compared with the model: {exc}")
    if log is not None and comparison is not None:
        rows = comparison.rows
        within = sum(abs(r.ratio - 1) <= tolerance for r in rows)
        m = st.columns(4)
        m[0].metric("Collective", _op_label(comparison.op))
        m[1].metric("Ranks", f"{comparison.n_ranks:,}", help=f"from {comparison.n_ranks_source}")
        m[2].metric(
            "Median measured / model",
            f"{comparison.median_ratio:.2f}",
            help="over the bandwidth-bound sizes (all sizes if none is)",
        )
        m[3].metric("Sizes within the band", f"{within} / {len(rows)}")
        for note in comparison.notes:
            st.caption(f"Note: {note}.")
        for advice in comparison.advice:
            st.info(f"Advice: {advice}.")
        for line in comparison.diagnosis:
            st.warning(f"Diagnosis: {line}.")
        title = (
            f"{_op_label(comparison.op)} on {comparison.n_ranks:,} ranks "
            f"({source}): measured vs model"
        )
        chart(
            validation_busbw_figure(rows, tolerance, title),
            key="validate_busbw",
            name=f"validate {comparison.op} busbw",
        )
        chart(
            validation_ratio_figure(rows, tolerance, "measured / model per size"),
            key="validate_ratio",
            name=f"validate {comparison.op} ratio",
        )
        st.caption(
            f"Shaded: the model ±{tolerance:.0%}. A ratio above 1 is faster than the model. "
            "Sizes nccl-tests printed as 0.00 GB/s have no marker on the log axis; their "
            "ratio is the model's time over the measured time."
        )
        frame = validation_frame(rows)
        if has_percentiles(rows):
            st.caption(
                "p50 / p99: the median and 99th-percentile iteration of nccl-tests' "
                "per-iteration timing (-I 1), as bus bandwidth (busbw x time / p) and time; "
                "a p99 well below the mean points at a slow tail (a flapping link, a "
                "straggler) that the average hides."
            )
        st.dataframe(
            frame.drop(columns=["bytes"]),
            hide_index=True,
            width="stretch",
            key="validate_table",
            column_config={
                "measured_busbw_GBps": st.column_config.NumberColumn(
                    "measured busbw (GB/s)", format="%.2f"
                ),
                "model_busbw_GBps": st.column_config.NumberColumn(
                    "model busbw (GB/s)", format="%.2f"
                ),
                "ratio": st.column_config.NumberColumn("measured / model", format="%.2f"),
                "measured_time_us": st.column_config.NumberColumn(
                    "measured time (us)", format="%.1f"
                ),
                "model_time_us": st.column_config.NumberColumn("model time (us)", format="%.1f"),
                "model_algo": st.column_config.TextColumn("model algo/proto"),
                "measured_p50_busbw_GBps": st.column_config.NumberColumn(
                    "p50 busbw (GB/s)", format="%.2f"
                ),
                "measured_p99_busbw_GBps": st.column_config.NumberColumn(
                    "p99 busbw (GB/s)", format="%.2f"
                ),
                "measured_p50_time_us": st.column_config.NumberColumn(
                    "p50 time (us)", format="%.1f"
                ),
                "measured_p99_time_us": st.column_config.NumberColumn(
                    "p99 time (us)", format="%.1f"
                ),
            },
        )
        st.download_button(
            "Download comparison (CSV)",
            frame.to_csv(index=False).encode(),
            file_name=f"{scenario.name}-{comparison.op}-validation.csv",
            mime="text/csv",
            key="dl_validation",
        )
    if log is not None:
        with st.expander(f"Parser warnings ({len(log.warnings)})"):
            if log.warnings:
                st.markdown("\n".join(f"- {w}" for w in log.warnings))
            else:
                st.caption("None: every row of the table was read.")

st.header("Acceptance expectations for this design", divider="gray")
st.caption(
    "What nccl-tests should show on the cluster in the sidebar once it is built: per scope "
    "(one node, one rail group, the whole cluster), the model's bus bandwidth with the "
    "tolerance band as pass thresholds."
)
# Solved only when opened: the model at one node, one rail group and the whole cluster.
with st.expander(
    "Expected nccl-tests results and pass thresholds per scope",
    key=ACCEPTANCE_OPEN,
    on_change="rerun",
) as acceptance_section:
    if acceptance_section.open:
        try:
            table = facade.acceptance_table(scenario, tolerance)
        except FabricModelError as exc:
            show_model_error(exc)
        else:
            accept = table.to_frame()
            headline = (
                accept[accept["op"] == "allreduce"]
                .sort_values("size_bytes", kind="stable")
                .groupby("scope", sort=False)
                .tail(1)
            )
            for col, (_, row) in zip(
                st.columns(max(len(headline), 1)), headline.iterrows(), strict=False
            ):
                col.metric(
                    f"All-reduce, {row['scope']} ({row['n_gpus']:,} GPUs)",
                    f"{row['expected_busbw_GBps']:,.0f} GB/s",
                    help=f"expected bus bandwidth at {size_label(int(row['size_bytes']))} "
                    f"({row['algo']}); pass above {row['min_busbw_GBps']:,.0f} GB/s",
                )
            st.dataframe(
                accept,
                hide_index=True,
                width="stretch",
                key="acceptance_table",
                column_config={
                    "expected_busbw_GBps": st.column_config.NumberColumn(format="%.2f"),
                    "min_busbw_GBps": st.column_config.NumberColumn(format="%.2f"),
                    "max_busbw_GBps": st.column_config.NumberColumn(format="%.2f"),
                    "expected_time_us": st.column_config.NumberColumn(format="%.1f"),
                },
            )
            d1, d2 = st.columns(2)
            d1.download_button(
                "Download thresholds (CSV)",
                table.to_csv().encode(),
                file_name=f"{scenario.name}-acceptance.csv",
                mime="text/csv",
                key="dl_acceptance_csv",
            )
            d2.download_button(
                "Download test script (bash)",
                table.to_shell_script().encode(),
                file_name=f"{scenario.name}-acceptance.sh",
                mime="text/x-shellscript",
                key="dl_acceptance_script",
            )
            if table.catches:
                st.subheader("Which floors catch each misconfiguration")
                st.dataframe(
                    catches_frame(table.catches),
                    hide_index=True,
                    width="stretch",
                    key="acceptance_catches",
                    column_config={
                        "worst share of expected": st.column_config.NumberColumn(format="percent"),
                    },
                )
                st.caption(
                    "Each failure mode of assets/failure_modes.yaml that applies to this "
                    "design, modelled at the same scopes, collectives and sizes: the floors "
                    "its bus bandwidth falls below, and the setting to check when one fails."
                )
            st.caption(
                "Run it from a node with MPI and nccl-tests built: "
                "`NCCL_TESTS=/path/to/nccl-tests/build MPIRUN='mpirun --hostfile hosts' bash "
                f"{scenario.name}-acceptance.sh`; it exits non-zero if any row's bus bandwidth "
                "is below its minimum. The CSV holds the same thresholds."
            )
