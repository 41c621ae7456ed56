"""Scenario loading, overrides and bad input: one clear error naming the key, never a clamp."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_model.errors import ScenarioError, ScenarioFileError
from fabric_model.presets import DEFAULT_PRESET, list_presets, load_preset
from fabric_model.scenario import (
    Scenario,
    apply_overrides,
    dump_scenario,
    field_spec,
    iter_field_specs,
    load_scenario,
    scenario_from_text,
)


def test_empty_scenario_is_the_default_preset():
    assert scenario_from_text("{}").flat() == load_preset(DEFAULT_PRESET).flat()
    assert Scenario.from_dict({}).fabric.link_gbps == 400


def test_every_key_has_a_default_that_validates():
    base = Scenario()
    for key, spec, default in iter_field_specs():
        assert spec.help, key
        if default is not None:
            assert apply_overrides(base, {key: default}).get(key) == default


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("cluster.n_gpus", "abc", "integer from 2 to 1,048,576"),
        ("cluster.n_gpus", 1, "integer from 2"),
        ("cluster.n_gpus", 10**8, "1,048,576"),
        ("cluster.n_gpus", True, "integer"),
        ("fabric.link_gbps", "300", "one of 100, 200, 400, 800, 1600"),
        ("fabric.vendor", "cisco", "one of infiniband, spectrum-x, roce"),
        ("fabric.tiers", 5, "one of auto, 1, 2, 3, 4"),
        ("fabric.oversubscription", 0.5, "from 1 to 16"),
        ("fabric.rail_optimized", "maybe", "true or false"),
        ("what_if.degraded_link_factor", 0, "greater than 0"),
        ("training.compute_efficiency", 1.5, "at most 1"),
        ("costs.switch_usd", "x", "or null"),
        ("costs.pue", float("nan"), "from 1 to 3"),
    ],
)
def test_bad_values_name_key_and_allowed(key, value, words):
    with pytest.raises(ScenarioError) as err:
        apply_overrides(Scenario(), {key: value})
    assert err.value.key == key
    assert key in str(err.value) and words in str(err.value)


def test_unknown_key_suggests_the_close_one():
    with pytest.raises(ScenarioError, match=r"fabric\.linkgbps: unknown key.*fabric\.link_gbps"):
        apply_overrides(Scenario(), {"fabric.linkgbps": 800})
    with pytest.raises(ScenarioError, match="unknown key"):
        Scenario.from_dict({"fabric": {"colour": "red"}})
    with pytest.raises(ScenarioError, match="unknown key"):
        Scenario.from_dict({"network": {}})


def test_cross_field_rules():
    with pytest.raises(ScenarioError, match=r"cluster\.n_gpus = 12: must be a multiple"):
        apply_overrides(Scenario(), {"cluster.n_gpus": 12})
    with pytest.raises(ScenarioError, match=r"cluster\.nvlink_domain"):
        apply_overrides(Scenario(), {"cluster.gpus_per_node": 4, "cluster.nvlink_domain": 6})
    with pytest.raises(ScenarioError, match=r"model\.top_k"):
        apply_overrides(Scenario(), {"model.n_experts": 2, "model.top_k": 4})
    # fewer GPUs than one server holds is fine
    assert apply_overrides(Scenario(), {"cluster.n_gpus": 2}).cluster.n_gpus == 2


def test_strings_from_urls_and_cli_are_coerced():
    s = apply_overrides(
        Scenario(),
        {
            "cluster.n_gpus": "4096",
            "fabric.link_gbps": "800",
            "fabric.rail_optimized": "false",
            "fabric.tiers": "3",
            "parallel.dp": "auto",
            "costs.switch_usd": "null",
            "fabric.oversubscription": "2.5",
        },
    )
    assert (s.cluster.n_gpus, s.fabric.link_gbps, s.fabric.rail_optimized) == (4096, 800, False)
    assert (s.fabric.tiers, s.parallel.dp, s.costs.switch_usd) == (3, "auto", None)
    assert s.fabric.oversubscription == 2.5


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("cluster: [", "malformed YAML/JSON at line 1"),
        ("- 1\n- 2\n", "must be a mapping"),
        ("just text", "must be a mapping"),
        ('{"cluster": {"n_gpus": 8', "malformed"),
        ("x" * 300_000, "larger than"),
    ],
)
def test_malformed_files(text, words):
    with pytest.raises(ScenarioFileError, match=words):
        scenario_from_text(text)


def test_section_must_be_a_mapping():
    with pytest.raises(ScenarioError, match="cluster = 5: must be a mapping"):
        scenario_from_text("cluster: 5")


def test_load_missing_file(tmp_path):
    with pytest.raises(ScenarioFileError, match="cannot read"):
        load_scenario(tmp_path / "nope.yaml")


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_dump_load_round_trip(tmp_path, fmt):
    s = apply_overrides(
        load_preset("gb300-nvl72-xdr"), {"fabric.oversubscription": 2, "costs.pue": 1.4}
    )
    path = tmp_path / f"s.{fmt}"
    path.write_text(dump_scenario(s, fmt))
    assert load_scenario(path) == s
    sparse = dump_scenario(s, fmt, base=Scenario())
    assert scenario_from_text(sparse).flat() == s.flat()
    if fmt == "json":
        json.loads(sparse)


def test_presets_load_and_describe_themselves():
    presets = list_presets()
    assert presets[0].name == DEFAULT_PRESET
    assert len(presets) >= 7
    for p in presets:
        assert p.description and "\n" not in p.description
        assert load_preset(p.name).name == p.name
    with pytest.raises(ScenarioError, match="preset = 'nope': must be one of"):
        load_preset("nope")


@settings(max_examples=60, deadline=None)
@given(
    key=st.sampled_from([k for k, s, _ in iter_field_specs() if s.kind in ("int", "float")]),
    value=st.one_of(st.integers(-(10**12), 10**12), st.floats(allow_nan=True)),
)
def test_numeric_keys_accept_exactly_their_range(key, value):
    spec = field_spec(key)
    try:
        s = apply_overrides(Scenario(), {key: value})
    except ScenarioError as exc:
        assert exc.key.split(".")[0] in key  # a cross-field rule may name its partner
        return
    got = s.get(key)
    assert got == value  # never clamped
    assert spec.min is None or got >= spec.min
    assert spec.max is None or got <= spec.max
