"""Garbage in any URL parameter or uploaded file: one message naming what and what is allowed.

Never a traceback, a hang or a silent clamp. The URL readers are pure functions the pages call
once per session (``ui.state.read_url`` for the sidebar's scenario keys and ``preset``,
``ui.whatif/compare/explore.parse_params`` for ``wi.``/``cmp.``/``ex.``), so the sweep over
every key x every garbage value runs on them directly; a handful of AppTest runs check that
the pages show exactly those messages and still draw. The uploads: scenario files
(``ui.state.read_scenario_file``) and nccl-tests logs (``parse_nccl_tests``), including a YAML
alias bomb and thousands of nested brackets.
"""

from __future__ import annotations

import math

import pytest

from fabric_model.errors import FabricModelError, NcclLogError
from fabric_model.presets import DEFAULT_PRESET, list_presets, load_preset
from fabric_model.scenario import MAX_SCENARIO_BYTES, coerce_value, field_spec, iter_field_specs
from fabric_model.validate.nccl_log import parse_nccl_tests
from tests.apptest_helpers import assert_no_exception, open_page
from ui import compare, explore, whatif
from ui.state import one_value_each, read_scenario_file, read_url

#: Longest message a bad value may produce (the allowed values of a long choice list fit).
MAX_MESSAGE_CHARS = 600
KEYS = [key for key, _, _ in iter_field_specs()]
PRESETS = [p.name for p in list_presets()]
LONG = "a" * 10_000
GARBAGE = {
    "empty": "",
    "blank": "   ",
    "word": "banana",
    "overflow": "1e999",
    "neg-overflow": "-1e999",
    "nan": "nan",
    "inf": "inf",
    "neg-inf": "-inf",
    "huge-int": str(10**40),
    "many-digits": "9" * 5000,
    "unicode": "日本語",
    "nul": "\x00",
    "long": LONG,
    "negative": "-1",
    "hex": "0x10",
}
BASE = load_preset(DEFAULT_PRESET)


def _one_line(message: str) -> None:
    assert "\n" not in message and "Traceback" not in message, message
    assert len(message) <= MAX_MESSAGE_CHARS, (len(message), message[:200])


# ------------------------------------------------------------------ scenario keys


@pytest.mark.parametrize("key", KEYS)
def test_every_scenario_key_takes_a_value_exactly_or_refuses_it_once(key: str) -> None:
    spec = field_spec(key)
    for label, raw in GARBAGE.items():
        got = read_url({key: [raw]})
        if not got.errors:  # a value the key allows: taken exactly as given, finite
            value = got.scenario.get(key)
            assert value == coerce_value(key, raw), (label, value)
            assert not (isinstance(value, float) and not math.isfinite(value)), (label, value)
            continue
        assert len(got.errors) == 1, (label, got.errors)
        message = got.errors[0]
        _one_line(message)
        assert key in message, (label, message)
        try:
            coerce_value(key, raw)
        except FabricModelError:  # the key's own rule: its allowed values are named
            assert spec.allowed() in message, (label, message)
        assert got.scenario.get(key) == BASE.get(key), label  # ignored, never clamped


@pytest.mark.parametrize(
    "name", ["bogus.key", "cluster", "cluster.", ".n_gpus", "日本.語", "x" * 10_000, ""]
)
def test_an_unknown_key_is_one_short_message(name: str) -> None:
    got = read_url({name: ["1"]})
    assert len(got.errors) == 1, got.errors
    _one_line(got.errors[0])
    assert "unknown key" in got.errors[0] or "must" in got.errors[0], got.errors[0]
    assert got.scenario == BASE


@pytest.mark.parametrize("preset", ["", "nope", LONG, "日本", "\x00", "dgx-h100-ib-ndr~x"])
def test_a_bad_preset_names_the_presets_and_shows_the_default(preset: str) -> None:
    got = read_url({"preset": [preset], "cluster.n_gpus": ["2048"]})
    assert len(got.errors) == 1, got.errors
    _one_line(got.errors[0])
    assert got.errors[0].startswith("URL parameter preset"), got.errors[0]
    assert all(name in got.errors[0] for name in PRESETS), got.errors[0]
    assert got.preset == DEFAULT_PRESET
    assert got.scenario.cluster.n_gpus == 2048  # the other keys still apply


def test_a_repeated_parameter_is_ambiguous_and_ignored() -> None:
    one, errors = one_value_each({"a": ["1", "2"], "b": ["3", "3"], "c": ["4"]})
    assert one == {"b": "3", "c": "4"}
    assert len(errors) == 1 and "a is given 2 times ('1', '2')" in errors[0], errors
    got = read_url({"cluster.n_gpus": ["2048", "4096"], "fabric.vendor": ["roce"]})
    assert len(got.errors) == 1 and "cluster.n_gpus" in got.errors[0], got.errors
    assert got.scenario.cluster.n_gpus == BASE.cluster.n_gpus
    assert got.scenario.fabric.vendor == "roce"


def test_keys_checked_against_each_other_apply_in_any_order() -> None:
    keys = [
        ("cluster.n_gpus", "12"),
        ("cluster.gpus_per_node", "4"),
        ("cluster.nvlink_domain", "4"),
    ]
    for order in (keys, keys[::-1]):
        got = read_url({k: [v] for k, v in order})
        assert not got.errors, got.errors
        assert (got.scenario.cluster.n_gpus, got.scenario.cluster.gpus_per_node) == (12, 4)
    # a pair that never fits together: the key that cannot apply is named, the other applies
    got = read_url({"cluster.n_gpus": ["12"], "cluster.nvlink_domain": ["16"]})
    assert len(got.errors) == 1 and "cluster.n_gpus" in got.errors[0], got.errors
    assert got.scenario.cluster.nvlink_domain == 16


# ----------------------------------------------------------------- page parameters


@pytest.mark.parametrize("name", list(whatif.PARAMS))
def test_whatif_parameters(name: str) -> None:
    key = whatif.PARAMS[name]
    for label, raw in GARBAGE.items():
        found, errors = whatif.parse_params({name: raw})
        if not errors:
            assert found == {key: coerce_value(key, raw)}, label
            continue
        assert len(errors) == 1 and not found, (label, errors)
        _one_line(errors[0])
        assert name in errors[0] and field_spec(key).allowed() in errors[0], errors[0]


@pytest.mark.parametrize("name", ["wi.bogus", "wi.", "wi." + LONG, "wi.日本"])
def test_unknown_whatif_parameters(name: str) -> None:
    found, errors = whatif.parse_params({name: "1"})
    assert not found and len(errors) == 1, errors
    _one_line(errors[0])
    assert "not a what-if setting" in errors[0] and "wi.link_gbps" in errors[0], errors[0]


@pytest.mark.parametrize(
    "raw",
    [
        *GARBAGE.values(),
        "dgx-h100-ib-ndr~",
        "dgx-h100-ib-ndr~~~",
        "dgx-h100-ib-ndr~=1",
        "dgx-h100-ib-ndr~cluster.n_gpus",
        "dgx-h100-ib-ndr~cluster.n_gpus=nan",
        "dgx-h100-ib-ndr~cluster.n_gpus=" + LONG,
        "dgx-h100-ib-ndr~bogus.key=1",
        LONG + "~cluster.n_gpus=8",
    ],
)
def test_compare_pins(raw: str) -> None:
    found, errors = compare.parse_params({"cmp.1": raw})
    assert not found and len(errors) == 1, errors
    _one_line(errors[0])
    assert errors[0].startswith("URL parameter cmp.1 = "), errors[0]
    assert "a pin is <preset>~key=value" in errors[0], errors[0]


@pytest.mark.parametrize("name", ["cmp.0", "cmp.-1", "cmp.x", "cmp.", "cmp." + LONG])
def test_compare_pin_names(name: str) -> None:
    found, errors = compare.parse_params({name: "dgx-h100-ib-ndr"})
    assert not found and len(errors) == 1, errors
    _one_line(errors[0])
    assert "cmp.1, cmp.2" in errors[0], errors[0]


def test_compare_keeps_at_most_the_pins_it_shows() -> None:
    found, errors = compare.parse_params({f"cmp.{i}": "dgx-h100-ib-ndr" for i in range(1, 6)})
    assert len(found) == compare.MAX_PINS and len(errors) == 5 - compare.MAX_PINS, errors


@pytest.mark.parametrize("key", list(explore.DIMENSIONS))
def test_explore_dimensions(key: str) -> None:
    name = explore.PREFIX + key
    for label, raw in {**GARBAGE, "empty-item": "~", "trailing": "x~"}.items():
        selection, _, errors = explore.parse_params({name: raw})
        if not errors:
            assert all(v in explore.options(key) for v in selection[key]), label
            continue
        assert not selection and len(errors) == 1, (label, errors)
        _one_line(errors[0])
        assert key in errors[0], (label, errors[0])


@pytest.mark.parametrize("raw", ["", "maybe", "2", LONG, "nan"])
def test_explore_plan_search_is_true_or_false(raw: str) -> None:
    _, plan, errors = explore.parse_params({"ex.plan_search": raw})
    assert not plan and len(errors) == 1, errors
    assert "ex.plan_search" in errors[0] and "true or false" in errors[0], errors[0]
    for word, on in (("true", True), ("off", False)):
        assert explore.parse_params({"ex.plan_search": word}) == ({}, on, [])


def test_unknown_explore_parameters() -> None:
    for name in ("ex.bogus", "ex.cluster.n_gpus", "ex." + LONG):
        _, _, errors = explore.parse_params({name: "1"})
        assert len(errors) == 1 and "not a dimension" in errors[0], errors
        _one_line(errors[0])


# ------------------------------------------------------------------------ uploads

_LEVELS = ", ".join(
    f"&l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" if i else "&l0 [x, x, x, x, x, x, x, x, x]"
    for i in range(9)
)
#: Nine levels of nine aliases each: a few hundred bytes that expand to 387 million strings.
YAML_BOMB = f"cluster: {{n_gpus: [{_LEVELS}]}}\n"

BAD_SCENARIO_FILES = {
    "malformed-yaml": (b"fabric: [1, 2\n", "malformed YAML/JSON"),
    "malformed-json": (b'{"cluster": {"n_gpus": 8,}', "malformed YAML/JSON"),
    "json-trailing": (b'{"cluster": {}} x', "malformed YAML/JSON"),
    "tabs": (b"cluster:\n\tn_gpus: 8\n", "malformed YAML/JSON"),
    "a-list": (b"- 1\n- 2\n", "must be a mapping"),
    "a-number": (b"42\n", "must be a mapping"),
    "section-not-mapping": (b"cluster: 5\n", "cluster = 5: must be a mapping"),
    "list-value": (b"cluster: {n_gpus: [1, 2]}\n", "cluster.n_gpus"),
    "map-value": (b"cluster: {n_gpus: {a: 1}}\n", "cluster.n_gpus"),
    "bool-value": (b"cluster: {n_gpus: true}\n", "cluster.n_gpus"),
    "date-value": (b"cluster: {n_gpus: 2024-01-01}\n", "cluster.n_gpus"),
    "nan-json": (b'{"cluster": {"n_gpus": NaN}}', "cluster.n_gpus"),
    "inf-yaml": (b"fabric: {oversubscription: .inf}\n", "fabric.oversubscription"),
    "set-tag": (b"cluster: !!set {a, b}\n", "cluster"),
    "binary-tag": (b"name: !!binary aGVsbG8=\n", "name"),
    "python-tag": (b"!!python/object/apply:os.system ['ls']\n", "constructor"),
    "duplicate-section": (b"cluster: {n_gpus: 8}\ncluster: {n_gpus: 16}\n", "appears twice"),
    "duplicate-key": (b"cluster: {n_gpus: 8, n_gpus: 16}\n", "'n_gpus' appears twice"),
    "many-digits": (b"cluster: {n_gpus: " + b"9" * 5000 + b"}\n", "too many digits"),
    "deeply-nested": (b"cluster: " + b"[" * 50_000 + b"]" * 50_000, "nested too deeply"),
    "yaml-bomb": (YAML_BOMB.encode(), "cluster.n_gpus"),
    "binary": (bytes(range(256)) * 4, "not UTF-8"),
    "utf16": ("cluster: {n_gpus: 8}".encode("utf-16"), "not UTF-8"),
    "nul": (b"\x00" * 100, "malformed YAML/JSON"),
    "oversize": (b"#" * (MAX_SCENARIO_BYTES + 1), "larger than"),
    "long-key": (b"cluster: {" + b"k" * 200 + b": 1}\n", "unknown key"),
}


@pytest.mark.parametrize(("data", "named"), BAD_SCENARIO_FILES.values(), ids=BAD_SCENARIO_FILES)
def test_a_bad_scenario_file_is_one_message(data: bytes, named: str) -> None:
    with pytest.raises(FabricModelError) as caught:
        read_scenario_file(data, "bad.yaml")
    message = str(caught.value)
    _one_line(message)
    assert named in message, message


def test_what_a_scenario_file_may_be() -> None:
    assert read_scenario_file(b"", "empty.yaml") == read_scenario_file(b"{}", "e.json")
    assert (
        read_scenario_file("\ufeffcluster: {n_gpus: 8}\n".encode(), "bom.yaml").cluster.n_gpus == 8
    )
    merged = b"cluster: {<<: {n_gpus: 8}, n_gpus: 16}\n"  # a merge key may be overridden
    assert read_scenario_file(merged, "merge.yaml").cluster.n_gpus == 16


BAD_LOGS = {
    "empty": "",
    "blank": "\n\n  \n",
    "binary": "\x00\x01\x02" * 100,
    "prose": "hello world\n" * 50,
    "json-list": "[1, 2, 3]",
    "json-no-results": '{"runs": [{"results": "x"}]}',
    "json-nested": '{"a":' * 50_000 + "1" + "}" * 50_000,
    "json-cut": '{"results": [',
    "header-only": "#       size         count      type   redop    root     time   algbw\n",
}


@pytest.mark.parametrize("text", BAD_LOGS.values(), ids=BAD_LOGS)
def test_a_bad_nccl_log_is_one_message(text: str) -> None:
    with pytest.raises(NcclLogError) as caught:
        parse_nccl_tests(text)
    _one_line(str(caught.value))


# ------------------------------------------------------------- a few pages, end to end


@pytest.mark.app
def test_overview_with_garbage_everywhere_names_each_key_once_and_draws() -> None:
    query = {
        "cluster.n_gpus": "1e999",
        "fabric.vendor": ["roce", "infiniband"],
        "fabric.link_gbps": LONG,
        "bogus.key": "1",
        "model.name": "日本",
        "fabric.oversubscription": "2",  # a good one, kept
        "cmp.1": "junk",  # another page's parameter: not this page's business
    }
    at = open_page("pages/overview.py", query)
    errors = [e.value for e in at.error]
    named = ["cluster.n_gpus", "fabric.vendor", "fabric.link_gbps", "bogus.key", "model.name"]
    assert len(errors) == len(named), errors
    for key in named:
        assert sum(key in message for message in errors) == 1, (key, errors)
    for message in errors:
        _one_line(message)
    assert at.slider(key="w:fabric.oversubscription").value == 2.0
    assert at.metric and at.get("plotly_chart")


@pytest.mark.app
@pytest.mark.parametrize(
    ("page", "query", "named"),
    [
        ("pages/whatif.py", {"wi.link_gbps": "nan", "wi.bogus": "1"}, ["wi.link_gbps", "wi.bogus"]),
        ("pages/compare.py", {"cmp.1": "nope~x=1", "cmp.x": "a"}, ["cmp.x", "cmp.1"]),
        ("pages/explore.py", {"ex.plan_search": "maybe", "ex.fabric.vendor": "x"}, ["ex."]),
    ],
)
def test_page_parameters_are_named_once_and_the_page_draws(
    page: str, query: dict[str, str], named: list[str]
) -> None:
    at = open_page(page, query)
    errors = [e.value for e in at.error]
    assert len(errors) == len(query), errors
    assert all(any(n in e for e in errors) for n in named), errors
    assert at.get("plotly_chart") or at.metric


@pytest.mark.app
def test_a_yaml_bomb_upload_is_one_error_and_the_page_keeps_working() -> None:
    at = open_page("pages/overview.py", {})
    uploader = next(u for u in at.file_uploader if u.label.startswith("Load scenario"))
    uploader.set_value(("bomb.yaml", YAML_BOMB.encode(), "application/x-yaml")).run()
    assert_no_exception(at)
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "cluster.n_gpus" in errors[0], errors
    _one_line(errors[0])
    assert at.metric and at.get("plotly_chart")


@pytest.mark.app
def test_a_binary_log_upload_is_one_error_on_validate() -> None:
    at = open_page("pages/validate.py", {})
    uploader = next(u for u in at.file_uploader if u.label.startswith("Upload an nccl-tests"))
    uploader.set_value(("run.log", bytes(range(256)) * 8, "text/plain")).run()
    assert_no_exception(at)
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "run.log" in errors[0], errors
    _one_line(errors[0])
