"""AppTest tests of the sidebar's scenario files: "Download scenario (YAML)" writes the full
scenario, "Load scenario (YAML/JSON)" applies a file as the current state (widgets, other
keys, preset, URL), and a bad file is one ``st.error`` that changes nothing.

Expected values come from ``fabric_model`` (the presets, ``scenario_from_text``), never from
the page.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from streamlit.testing.v1 import AppTest

from fabric_model.presets import DEFAULT_PRESET, load_preset
from fabric_model.scenario import (
    MAX_SCENARIO_BYTES,
    apply_overrides,
    dump_scenario,
    scenario_from_text,
)
from tests.apptest_helpers import (
    assert_no_exception,
    capture_downloads,
    messages,
    open_page,
    url,
)

pytestmark = pytest.mark.app

TOPOLOGY = "pages/topology.py"
COST = "pages/cost.py"
UPLOAD_LABEL = "Load scenario (YAML/JSON)"
YAML_MIME = "application/x-yaml"


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def open_app(page: str = TOPOLOGY, **query: str) -> AppTest:
    return open_page(page, query)


def upload(at: AppTest, name: str, content: bytes | str, mime: str = YAML_MIME) -> AppTest:
    data = content.encode() if isinstance(content, str) else content
    uploaders = [u for u in at.file_uploader if u.label == UPLOAD_LABEL]
    assert len(uploaders) == 1, [u.label for u in at.file_uploader]
    uploaders[0].set_value((name, data, mime)).run()
    assert_no_exception(at)
    return at


def sidebar_state(at: AppTest) -> dict[str, Any]:
    """What the sidebar shows, key by key."""
    return {
        "preset": at.selectbox(key="w:preset").value,
        "cluster.n_gpus": at.select_slider(key="w:cluster.n_gpus").value,
        "cluster.gpu": at.selectbox(key="w:cluster.gpu").value,
        "fabric.vendor": at.radio(key="w:fabric.vendor").value,
        "fabric.link_gbps": at.select_slider(key="w:fabric.link_gbps").value,
        "fabric.topology": at.selectbox(key="w:fabric.topology").value,
        "fabric.tiers": at.segmented_control(key="w:fabric.tiers").value,
        "fabric.oversubscription": at.slider(key="w:fabric.oversubscription").value,
        "fabric.rail_optimized": at.toggle(key="w:fabric.rail_optimized").value,
        "cluster.nics_per_gpu": at.number_input(key="w:cluster.nics_per_gpu").value,
        "cluster.gpus_per_node": at.number_input(key="w:cluster.gpus_per_node").value,
        "cluster.nvlink_domain": at.number_input(key="w:cluster.nvlink_domain").value,
    }


def expected_url(preset: str, overrides: dict[str, Any]) -> dict[str, str]:
    """The URL of ``preset`` with ``overrides`` applied: the preset plus the changed keys."""
    scenario = apply_overrides(load_preset(preset), overrides)
    out = {"preset": preset}
    for key, value in scenario.diff(load_preset(preset)).items():
        out[key] = (
            str(value).lower()
            if isinstance(value, bool)
            else str(int(value))
            if isinstance(value, float) and value.is_integer()
            else str(value)
        )
    return out


@pytest.fixture
def captured_downloads(monkeypatch: pytest.MonkeyPatch) -> dict[str, tuple[str, bytes]]:
    """Bytes of every eager download button, by file name (AppTest's proto has no bytes)."""
    return capture_downloads(monkeypatch)


# --------------------------------------------------------------------------------------
# loading a file
# --------------------------------------------------------------------------------------


def test_upload_sets_sidebar_widgets_and_url() -> None:
    at = open_app(TOPOLOGY)
    before = sidebar_state(at)
    assert before["cluster.n_gpus"] == 1024
    text = (
        "name: my-cluster\n"
        "cluster: {n_gpus: 4096}\n"
        "fabric:\n"
        "  link_gbps: 200\n"
        "  tiers: 3\n"
        "  oversubscription: 2\n"
        "  routing: ecmp          # no sidebar widget: kept as an extra key\n"
    )
    upload(at, "my.yaml", text)
    assert not messages(at.error), messages(at.error)
    overrides = {
        "cluster.n_gpus": 4096,
        "fabric.link_gbps": 200,
        "fabric.tiers": 3,
        "fabric.oversubscription": 2.0,
        "fabric.routing": "ecmp",
    }
    after = sidebar_state(at)
    assert after == {
        **before,
        "cluster.n_gpus": 4096,
        "fabric.link_gbps": 200,
        "fabric.tiers": 3,
        "fabric.oversubscription": 2.0,
    }
    # the default preset is the one the file differs from least: the URL shows it plus the
    # keys that differ, as for slider moves
    assert url(at) == expected_url(DEFAULT_PRESET, overrides)
    assert url(at)["fabric.routing"] == "ecmp"
    assert any("Loaded my.yaml" in c.value for c in at.sidebar.caption)
    # the diagram follows the loaded scenario
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert "4,096 GPUs" in spec["layout"]["title"]["text"]

    # later slider moves start from the loaded state (the file is not applied again)
    at.select_slider(key="w:cluster.n_gpus").set_value(2048).run()
    assert url(at) == expected_url(DEFAULT_PRESET, {**overrides, "cluster.n_gpus": 2048})
    assert not messages(at.error)


def test_a_file_naming_a_preset_switches_to_it() -> None:
    at = open_app(COST)
    base = load_preset("meta-24k-roce")
    text = dump_scenario(apply_overrides(base, {"costs.switch_usd": 20000}))
    upload(at, "meta.yaml", text)
    assert not messages(at.error), messages(at.error)
    assert at.selectbox(key="w:preset").value == "meta-24k-roce"
    assert at.select_slider(key="w:cluster.n_gpus").value == base.cluster.n_gpus
    assert at.radio(key="w:fabric.vendor").value == base.fabric.vendor
    assert at.number_input(key="cost:costs.switch_usd").value == 20000  # a cost widget
    assert url(at) == {"preset": "meta-24k-roce", "costs.switch_usd": "20000"}


def test_json_file_and_the_same_file_twice() -> None:
    at = open_app(TOPOLOGY)
    content = json.dumps({"cluster": {"n_gpus": 2048}, "fabric": {"vendor": "spectrum-x"}})
    upload(at, "s.json", content, "application/json")
    # closest preset: the same 1,024 H100 design on Spectrum-X, so only the size differs
    assert at.selectbox(key="w:preset").value == "dgx-h100-spectrum-x"
    assert url(at) == {"preset": "dgx-h100-spectrum-x", "cluster.n_gpus": "2048"}
    # the uploader empties after each load, so the same file can be loaded again later
    at.select_slider(key="w:cluster.n_gpus").set_value(8192).run()
    assert at.select_slider(key="w:cluster.n_gpus").value == 8192
    upload(at, "s.json", content, "application/json")
    assert at.select_slider(key="w:cluster.n_gpus").value == 2048
    assert not messages(at.error)


# --------------------------------------------------------------------------------------
# downloading, and the round trip
# --------------------------------------------------------------------------------------


def test_download_writes_the_full_scenario_and_reloads_to_the_same_state(
    captured_downloads: dict[str, tuple[str, bytes]],
) -> None:
    at = open_app(COST, **{"fabric.routing": "ecmp"})
    at.select_slider(key="w:cluster.n_gpus").set_value(4096).run()
    at.radio(key="w:fabric.vendor").set_value("spectrum-x").run()
    at.number_input(key="cost:costs.switch_usd").set_value(30000.0).run()
    assert_no_exception(at)
    shown, shown_url = sidebar_state(at), url(at)
    assert [b.label for b in at.sidebar.get("download_button")] == [
        "Download scenario (YAML)",
        "Download report (HTML)",
        "Download slides (PPTX)",
    ]

    name = f"scenario_{DEFAULT_PRESET}.yaml"
    assert name in captured_downloads, sorted(captured_downloads)
    mime, data = captured_downloads[name]
    assert mime == YAML_MIME
    written = yaml.safe_load(data)
    # full: every section and key, not only the changed ones
    assert set(written) >= {
        "cluster",
        "fabric",
        "model",
        "parallel",
        "training",
        "what_if",
        "costs",
    }
    assert written["cluster"]["n_gpus"] == 4096
    assert written["fabric"]["vendor"] == "spectrum-x"
    assert written["fabric"]["routing"] == "ecmp"
    assert written["costs"]["switch_usd"] == 30000
    expected = apply_overrides(
        load_preset(DEFAULT_PRESET),
        {
            "cluster.n_gpus": 4096,
            "fabric.vendor": "spectrum-x",
            "fabric.routing": "ecmp",
            "costs.switch_usd": 30000,
        },
    )
    assert scenario_from_text(data.decode()) == expected

    # a new session loads the file and lands on the same sidebar, URL and numbers
    other = open_app(COST)
    upload(other, name, data)
    assert not messages(other.error), messages(other.error)
    assert sidebar_state(other) == shown
    assert url(other) == shown_url
    assert other.number_input(key="cost:costs.switch_usd").value == 30000
    capex = [m.value for m in at.metric if m.label == "Network capex"]
    assert capex and capex == [m.value for m in other.metric if m.label == "Network capex"]


# --------------------------------------------------------------------------------------
# bad files: one error naming the problem, nothing changes
# --------------------------------------------------------------------------------------


BAD_FILES = [
    pytest.param("fabric: [1, 2\n", ["malformed YAML/JSON", "line"], id="malformed-yaml"),
    pytest.param('{"cluster": {"n_gpus": 4096,}', ["malformed YAML/JSON"], id="malformed-json"),
    pytest.param("- 1\n- 2\n", ["must be a mapping", "list"], id="not-a-mapping"),
    pytest.param(
        "fabric: {link_gbps: 300}\n",
        ["fabric.link_gbps", "one of 100, 200, 400, 800, 1600"],
        id="bad-choice",
    ),
    pytest.param(
        "cluster: {n_gpus: 99999999}\n", ["cluster.n_gpus", "2 to 1,048,576"], id="out-of-range"
    ),
    pytest.param(
        "costs: {switch_usd: -5}\n", ["costs.switch_usd", "0 to 10,000,000"], id="negative-price"
    ),
    pytest.param("fabric: {bogus: 1}\n", ["fabric.bogus", "unknown key"], id="unknown-key"),
    pytest.param("clusterz: {n_gpus: 8}\n", ["clusterz", "unknown key"], id="unknown-section"),
    pytest.param(
        "cluster: {n_gpus: 1004, gpus_per_node: 8}\n",
        ["cluster.n_gpus", "multiple of cluster.gpus_per_node"],
        id="cross-field",
    ),
    # yaml.safe_load: tags that would build Python objects are refused, never run
    pytest.param(
        'cluster: !!python/object/apply:os.system ["echo pwned"]\n',
        ["malformed YAML/JSON", "constructor"],
        id="python-tag",
    ),
    pytest.param(b"cluster: {n_gpus: \xff\xfe}\n", ["not UTF-8"], id="not-utf8"),
    pytest.param(
        "#" * (MAX_SCENARIO_BYTES + 10) + "\n", ["larger than", "256 KiB"], id="too-large"
    ),
]


@pytest.mark.parametrize(("content", "named"), BAD_FILES)
def test_bad_file_is_one_error_and_changes_nothing(content: str | bytes, named: list[str]) -> None:
    at = open_app(TOPOLOGY)
    at.select_slider(key="w:cluster.n_gpus").set_value(2048).run()
    before, before_url = sidebar_state(at), url(at)
    n_charts = len(at.get("plotly_chart"))

    upload(at, "bad.yaml", content)
    shown = messages(at.error)
    assert len(shown) == 1, shown
    assert shown[0].startswith("Could not load bad.yaml: "), shown[0]
    assert shown[0].count("bad.yaml") == 1, shown[0]
    for text in named:
        assert text in shown[0], (text, shown[0])
    assert "unchanged" in shown[0]
    assert sidebar_state(at) == before
    assert url(at) == before_url
    assert len(at.get("plotly_chart")) == n_charts  # the page still draws

    # the message is about that upload; the app keeps working and it does not stick
    at.select_slider(key="w:cluster.n_gpus").set_value(4096).run()
    assert not messages(at.error), messages(at.error)
    assert url(at) == {"preset": DEFAULT_PRESET, "cluster.n_gpus": "4096"}


def test_nothing_in_a_file_is_evaluated(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    at = open_app(TOPOLOGY)
    upload(at, "evil.yaml", f'cluster: !!python/object/apply:os.system ["touch {marker}"]\n')
    assert len(messages(at.error)) == 1
    assert not marker.exists()
