"""The Validate page: pure figure builders and AppTest runs with pasted nccl-tests logs.

Expected numbers come from ``fabric_model.validate`` (parser, comparison, acceptance),
never from the page, so a page that draws or tabulates the wrong thing fails.
"""

from __future__ import annotations

from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from fabric_model.presets import DEFAULT_PRESET, load_preset
from fabric_model.validate.compare import compare_log
from fabric_model.validate.nccl_log import parse_nccl_tests
from tests.apptest_helpers import ROOT, assert_no_exception, figures, open_page, paste_log
from ui.validation_figures import validation_busbw_figure, validation_frame, validation_ratio_figure

PAGE = "pages/validate.py"
LOGS = ROOT / "tests" / "data" / "nccl"
ALL_REDUCE = LOGS / "all_reduce_perf_8xH100.log"


def log_text(name: str) -> str:
    return (LOGS / name).read_text(encoding="utf-8")


def comparison() -> Any:
    return compare_log(
        parse_nccl_tests(ALL_REDUCE.read_text(encoding="utf-8")), load_preset(DEFAULT_PRESET)
    )


#: The acceptance section's expander key: closed, the thresholds are not computed.
ACCEPTANCE_OPEN = "validate_acceptance_open"


def open_validate(**query: str) -> AppTest:
    """Open the Validate page after a first run of the default page."""
    return open_page(PAGE, query, warm=True)


def download_keys(at: AppTest) -> set[str]:
    return {b.key for b in at.get("download_button")}


# --------------------------------------------------------------------------------------
# pure figure builders
# --------------------------------------------------------------------------------------


def test_busbw_figure_measured_markers_model_line_and_band() -> None:
    comp = comparison()
    rows = comp.rows
    fig = validation_busbw_figure(rows, 0.15, title="t")
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert "GB/s" in fig.layout.yaxis.title.text
    by_name = {t.name: t for t in fig.data}
    model, measured = by_name["model (auto)"], by_name["measured (out-of-place)"]
    assert model.mode == "lines" and measured.mode == "markers"
    assert list(model.x) == [r.size_bytes for r in rows]
    assert list(model.y) == pytest.approx([r.model_busbw_GBps for r in rows])
    # printed 0.00 GB/s cannot sit on a log axis: left out, the others as printed
    assert [y for y in measured.y if y is not None] == pytest.approx(
        [r.measured_busbw_GBps for r in rows if r.measured_busbw_GBps > 0]
    )
    assert measured.y[0] is None and rows[0].measured_busbw_GBps == 0
    band = next(t for t in fig.data if t.fill == "tonexty")
    upper = fig.data[fig.data.index(band) - 1]
    assert list(band.y) == pytest.approx([0.85 * r.model_busbw_GBps for r in rows])
    assert list(upper.y) == pytest.approx([1.15 * r.model_busbw_GBps for r in rows])
    # binary-suffix ticks spanning the sizes
    assert "8 B" in fig.layout.xaxis.ticktext and "1 GiB" in fig.layout.xaxis.ticktext
    assert all(v >= 8 for v in fig.layout.xaxis.tickvals)


def test_ratio_figure_has_the_band_and_one_point_per_size() -> None:
    rows = comparison().rows
    fig = validation_ratio_figure(rows, 0.2)
    assert fig.layout.xaxis.type == "log"
    (points,) = fig.data
    assert list(points.y) == pytest.approx([r.ratio for r in rows])
    bands = [s for s in fig.layout.shapes if s.type == "rect"]
    assert len(bands) == 1 and (bands[0].y0, bands[0].y1) == pytest.approx((0.8, 1.2))


def test_validation_frame_one_row_per_size() -> None:
    rows = comparison().rows
    frame = validation_frame(rows)
    assert len(frame) == len(rows)
    assert {
        "size",
        "measured_busbw_GBps",
        "model_busbw_GBps",
        "ratio",
        "regime",
        "model_algo",
        "verdict",
    } <= set(frame)
    assert frame["size"].iloc[0] == "8 B" and frame["size"].iloc[-1] == "8 GiB"
    assert frame["ratio"].tolist() == pytest.approx([r.ratio for r in rows])


# --------------------------------------------------------------------------------------
# AppTest
# --------------------------------------------------------------------------------------


def test_page_without_a_log_shows_instructions() -> None:
    at = open_validate()
    assert any("Upload or paste the output of an nccl-tests run" in m.value for m in at.markdown)
    assert not at.info  # instructions are text, not an alert
    assert not at.error and not at.get("plotly_chart")
    assert any("overrides cluster.n_gpus" in c.value for c in at.caption)
    assert any("NCCL_ALGO, NCCL_PROTO, NCCL_NVLS_ENABLE" in c.value for c in at.caption)


def test_acceptance_table_and_downloads_without_a_log() -> None:
    from fabric_model.validate.acceptance import acceptance_expectations

    at = open_validate()
    # solved only once its section is opened
    assert [e for e in at.expander if e.label.startswith("Expected nccl-tests results")]
    assert not at.dataframe and not at.metric
    at.session_state[ACCEPTANCE_OPEN] = True
    at.run()
    assert_no_exception(at)
    expected = acceptance_expectations(load_preset(DEFAULT_PRESET), tolerance=0.15).to_frame()
    table, catches = at.dataframe  # the thresholds, then the floors that catch each failure
    assert len(table.value) == len(expected)
    assert "GPUDirect RDMA off" in " ".join(catches.value["failure mode"])
    assert table.value["min_busbw_GBps"].tolist() == pytest.approx(
        expected["min_busbw_GBps"].tolist()
    )
    assert {"dl_acceptance_csv", "dl_acceptance_script"} <= download_keys(at)
    assert any(m.label.startswith("All-reduce, whole cluster") for m in at.metric)


def test_pasted_log_draws_charts_and_a_row_per_size() -> None:
    at = paste_log(open_validate(), ALL_REDUCE.read_text(encoding="utf-8"))
    log = parse_nccl_tests(ALL_REDUCE.read_text(encoding="utf-8"))
    assert not at.error and not at.warning
    figs = figures(at)
    assert len(figs) == 2
    busbw = next(f for f in figs if "measured vs model" in f["layout"]["title"]["text"])
    assert busbw["layout"]["xaxis"]["type"] == "log"
    assert {t["name"] for t in busbw["data"]} >= {"model (auto)", "measured (out-of-place)"}
    table = at.dataframe[0].value
    assert len(table) == len(log.rows) == 31
    assert table["model_algo"].iloc[-1] == comparison().rows[-1].model_algo
    assert any("8 ranks" in c.value for c in at.caption)  # the comparison's note
    assert "dl_validation" in download_keys(at)
    assert any(e.label.startswith("Parser warnings") for e in at.expander)


def test_garbage_shows_one_error_and_the_page_keeps_working() -> None:
    at = paste_log(open_validate(), log_text("garbage.log"))
    assert len(at.error) == 1 and "nccl-tests" in at.error[0].value
    assert not at.get("plotly_chart")
    paste_log(at, "")  # emptied: back to the instructions
    assert not at.error
    assert any("Upload or paste the output" in m.value for m in at.markdown)
    at.switch_page("pages/cost.py").run()  # the rest of the app is unaffected
    assert_no_exception(at)


def test_uncovered_collective_shows_the_models_warning() -> None:
    at = paste_log(open_validate(), log_text("sendrecv_perf_2gpu.log"))
    assert not at.error
    assert len(at.warning) == 1 and "sendrecv" in at.warning[0].value
    assert not at.get("plotly_chart")


def test_operation_select_for_logs_without_a_binary_name() -> None:
    text = "\n".join(
        line
        for line in log_text("all_reduce_perf_8xH100.log").splitlines()
        if "all_reduce_perf" not in line
    )
    at = open_validate()
    at.selectbox(key="validate_op").set_value("allreduce").run()
    paste_log(at, text)
    assert not at.error and len(figures(at)) == 2


def test_the_page_shows_the_ring_only_advice():
    # a log at the ring's rate where NCCL's choice on 16 H100 is NVLS-Tree (the advice's
    # wording and mechanism are tested in tests/test_check_nccl_advice.py)
    from tests.test_check_nccl_advice import synthetic_log

    at = open_validate(**{"cluster.n_gpus": "16"})
    paste_log(at, synthetic_log("ring", 0.98))
    infos = [i.value for i in at.info]
    assert any("match a run with NCCL_ALGO=Ring" in i for i in infos), infos
