"""The Topology page's deployment downloads and the Validate page's nccl-tests JSON input.

Expected values come from ``fabric_model.report.export`` and ``fabric_model.validate``, never from
the pages.
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from fabric_model.presets import load_preset
from fabric_model.report.export import EXPORT_FORMATS, export_design
from fabric_model.validate.compare import compare_log
from fabric_model.validate.nccl_log import parse_nccl_tests
from tests.apptest_helpers import ROOT, open_page, paste_log
from ui.deployment import DEPLOYMENT_BUTTONS, export_bytes
from ui.validation_figures import PERCENTILE_COLUMNS, validation_frame

JSON_LOG = ROOT / "tests" / "data" / "nccl" / "all_reduce_perf_8xH100.json"
TEXT_LOG = ROOT / "tests" / "data" / "nccl" / "all_reduce_perf_8xH100.log"


def export_buttons(at: AppTest) -> dict[str, object]:
    return {
        b.key.removeprefix("dl_export_"): b
        for b in at.get("download_button")
        if b.key and b.key.startswith("dl_export_")
    }


# ------------------------------------------------------------------------------------------
# Topology page


def test_topology_page_offers_every_deployment_file() -> None:
    at = open_page("pages/topology.py")
    buttons = export_buttons(at)
    assert list(buttons) == list(EXPORT_FORMATS)
    for fmt, button in buttons.items():
        assert button.label == DEPLOYMENT_BUTTONS[fmt][0]  # type: ignore[attr-defined]
        assert not button.proto.disabled  # type: ignore[attr-defined]
    assert any(s.value == "Deployment files" for s in at.subheader)


@pytest.mark.parametrize(
    ("preset", "disabled"),
    [
        ("torus-3d-4k", {"slurm-topology", "slurm-topology-yaml", "kueue-topology"}),
        ("gb200-nvl72-ndr", set()),
    ],
)
def test_a_format_the_design_lacks_is_greyed_out_with_the_reason(
    preset: str, disabled: set[str]
) -> None:
    at = open_page("pages/topology.py", preset=preset)
    buttons = export_buttons(at)
    assert {f for f, b in buttons.items() if b.proto.disabled} == disabled  # type: ignore[attr-defined]
    for fmt in disabled:
        assert buttons[fmt].proto.help.startswith("Not available")  # type: ignore[attr-defined]


def test_a_design_with_no_cables_greys_out_every_download() -> None:
    at = open_page("pages/topology.py", preset="torus-3d-4k", **{"cluster.n_gpus": "8"})
    buttons = export_buttons(at)
    # the NCCL tuner config holds collectives, which one NVLink domain has too
    tuner = buttons.pop("nccl-tuner-csv")
    assert not tuner.proto.disabled  # type: ignore[attr-defined]
    assert buttons and all(b.proto.disabled for b in buttons.values())  # type: ignore[attr-defined]


def test_download_payload_is_the_models_file() -> None:
    scenario = load_preset("dgx-h100-ib-ndr")
    for fmt in EXPORT_FORMATS:
        assert export_bytes(scenario, fmt) == export_design(scenario, fmt).text.encode()


# ------------------------------------------------------------------------------------------
# Validate page


def test_validate_page_accepts_the_json_file_and_shows_p50_p99() -> None:
    at = open_page("pages/validate.py")
    uploader = next(u for u in at.get("file_uploader") if u.key == "validate_upload")
    assert ".json" in uploader.proto.type
    at = paste_log(at, JSON_LOG.read_text(encoding="utf-8"))
    assert not at.error
    table = at.dataframe[0].value
    log = parse_nccl_tests(JSON_LOG.read_text(encoding="utf-8"))
    expected = compare_log(log, load_preset("dgx-h100-ib-ndr"))
    assert len(table) == len(expected.rows) == 31
    for name in PERCENTILE_COLUMNS:
        assert name in table.columns
    assert table["measured_p99_busbw_GBps"].iloc[-1] == pytest.approx(
        expected.rows[-1].measured_p99_busbw_GBps
    )
    assert any("p50 / p99" in c.value for c in at.caption)


def test_text_log_has_no_percentile_columns() -> None:
    rows = compare_log(
        parse_nccl_tests(TEXT_LOG.read_text(encoding="utf-8")), load_preset("dgx-h100-ib-ndr")
    ).rows
    assert not set(PERCENTILE_COLUMNS) & set(validation_frame(rows).columns)


def test_malformed_json_is_one_error_and_the_page_keeps_working() -> None:
    at = open_page("pages/validate.py")
    text = JSON_LOG.read_text(encoding="utf-8")
    at = paste_log(at, text[: len(text) // 3])
    assert len(at.error) == 1 and "not valid JSON" in at.error[0].value
    assert not at.get("plotly_chart")
    at = paste_log(at, text)
    assert not at.error and at.get("plotly_chart")
