"""Sidebar controls and the URL: the scenario every page reads.

The URL holds ``preset=<name>`` plus only the dotted keys that differ from that preset
(``?preset=dgx-h100-ib-ndr&cluster.n_gpus=4096``). On a session's first run the URL is read
once: each bad parameter gets one ``st.error`` naming the key and what is allowed and is
ignored (the preset's value stands; nothing is clamped). After that the widgets are the
source of truth and the URL follows them on every run.

Pages may own query parameters of their own, named with a prefix from
:data:`PAGE_PARAM_PREFIXES` (What-if ``wi.``, Compare ``cmp.``, Explore ``ex.``, Cluster
``schedule.``, and presentation mode's ``present`` and ``slide``, ``ui.present``): the sidebar
neither reads them as scenario keys nor drops them when it rewrites the URL, and the page writes
them with :func:`write_page_params` after the sidebar ran.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import streamlit as st

from fabric_model.catalog import load_catalog
from fabric_model.errors import (
    SHOWN_VALUE_CHARS,
    FabricModelError,
    ScenarioError,
    ScenarioFileError,
    shown_value,
)
from fabric_model.families import family_names
from fabric_model.presets import DEFAULT_PRESET, list_presets, load_preset
from fabric_model.scenario import (
    MAX_SCENARIO_BYTES,
    MODEL_SHAPES,
    SHAPE_KEYS,
    Scenario,
    apply_overrides,
    coerce_value,
    dump_scenario,
    field_spec,
    scenario_from_text,
    with_dependents,
)
from ui.cache_keys import scenario_cache
from ui.exports import export_file_name
from ui.report_button import report_download_button
from ui.theme import TOPOLOGY_LABELS, VENDOR_LABELS

__all__ = [
    "GPU_COUNT_STEPS",
    "PAGE_PARAM_PREFIXES",
    "SIDEBAR_KEYS",
    "ScenarioState",
    "UrlScenario",
    "apply_scenario",
    "cli_command",
    "one_value_each",
    "page_params",
    "read_scenario_file",
    "read_url",
    "shown_name",
    "sidebar_scenario",
    "url_value",
    "write_page_params",
]

#: Keys that have a sidebar widget, in display order.
SIDEBAR_KEYS = (
    "cluster.n_gpus",
    "cluster.gpu",
    "fabric.vendor",
    "fabric.link_gbps",
    "fabric.topology",
    "fabric.tiers",
    "fabric.oversubscription",
    "fabric.rail_optimized",
    "cluster.nics_per_gpu",
    "cluster.gpus_per_node",
    "cluster.nvlink_domain",
    "fabric.planes",
    # model and parallelism (their own expander)
    "model.name",
    "parallel.tp",
    "parallel.pp",
    "parallel.cp",
    "parallel.ep",
    "training.recompute",
    "model.routing_skew",
    # an OCS fabric's blocks and circuits (their own expander, shown for fabric.topology = ocs)
    "ocs.block",
    "ocs.switch",
    "ocs.circuits",
    "ocs.reconfigure",
)
#: How many of SIDEBAR_KEYS are drawn at the top, where the model section starts, and
#: where the OCS section starts.
_N_TOP, _N_FABRIC, _N_OCS = 8, 12, 20
#: Parallel degrees offered (the current value is always added).
_DEGREES = (1, 2, 4, 8, 16, 32, 64, 128, 256)

#: Cluster sizes offered by the GPU slider: powers of two from 8 to 131,072 plus every
#: preset's size (read from the presets, so a new preset's size appears by itself).
GPU_COUNT_STEPS = sorted(
    {2**i for i in range(3, 18)} | {load_preset(p.name).cluster.n_gpus for p in list_presets()}
)

_W = "w:"  # widget key prefix
_VALUES = "sidebar_values"  # canonical values: plain session keys survive page switches
_EXTRA = "url_extra_overrides"
_PRESET = "w:preset"
_PRESET_VALUE = "preset_value"
_UPLOAD = "scenario_upload"  # + a counter: a new key empties the uploader after each load
_UPLOAD_N = "scenario_upload_n"
_FILE_MESSAGE = "scenario_file_message"
#: Query-parameter prefixes owned by pages, not scenario keys (see the module docstring).
PAGE_PARAM_PREFIXES = ("wi.", "cmp.", "ex.", "schedule.", "present", "slide")


@dataclass(frozen=True)
class ScenarioState:
    """The result of the sidebar: the scenario (or why there is none) and the preset."""

    preset: str
    scenario: Scenario | None
    error: str | None


def _set_widgets(scenario: Scenario) -> None:
    st.session_state[_VALUES] = {key: scenario.get(key) for key in SIDEBAR_KEYS}


def _on_widget_change(key: str) -> None:
    st.session_state[_VALUES][key] = st.session_state[_W + key]
    if key == "cluster.gpu":
        _on_gpu_change()
    if key == "model.name":  # a picked model brings its whole shape: drop edited shape keys
        st.session_state[_EXTRA] = {
            k: v for k, v in st.session_state.get(_EXTRA, {}).items() if not _is_shape_key(k)
        }


def _is_shape_key(key: str) -> bool:
    """Whether ``key`` is one of a model's shape keys, which a named model implies."""
    return key.startswith("model.") and key.split(".", 1)[1] in (*SHAPE_KEYS, "params_b")


def _on_preset_change() -> None:
    st.session_state[_PRESET_VALUE] = st.session_state[_PRESET]
    _set_widgets(load_preset(st.session_state[_PRESET]))
    st.session_state[_EXTRA] = {}


def _on_gpu_change() -> None:
    """Set the picked GPU's server's GPUs per node and NVLink domain (editable after)."""
    values = st.session_state[_VALUES]
    try:
        server = load_catalog().server(load_catalog().gpu(values["cluster.gpu"]).server)
    except FabricModelError:
        return
    values["cluster.gpus_per_node"] = server.gpus_per_server
    values["cluster.nvlink_domain"] = server.nvlink_domain


def shown_name(name: str) -> str:
    """Return a URL parameter's name for a message (a very long one cut to its start)."""
    return name if len(name) <= SHOWN_VALUE_CHARS else shown_value(name)


def one_value_each(params: Mapping[str, Sequence[str]]) -> tuple[dict[str, str], list[str]]:
    """Return one value per URL parameter (``name -> values`` as given) and messages.

    A parameter given more than once with different values is ambiguous: it gets one message
    and is left out (the app never guesses which one was meant).
    """
    out, errors = {}, []
    for name, values in params.items():
        if len(set(values)) > 1:
            shown = ", ".join(shown_value(v) for v in values[:4]) + ", ..." * (len(values) > 4)
            errors.append(
                f"URL parameter {shown_name(name)} is given {len(values)} times ({shown}): "
                "give it once - ignored"
            )
        elif values:
            out[name] = values[-1]
    return out, errors


def _url_params(keep: Callable[[str], bool]) -> tuple[dict[str, str], list[str]]:
    """:func:`one_value_each` of the URL parameters whose name passes ``keep``."""
    return one_value_each(
        {k: st.query_params.get_all(k) for k in st.query_params.keys() if keep(k)}
    )


def _apply_in_any_order(
    scenario: Scenario, values: dict[str, Any]
) -> tuple[Scenario, dict[str, FabricModelError]]:
    """Apply URL values together, else one at a time until none more applies.

    Keys checked against each other (``cluster.n_gpus`` a multiple of
    ``cluster.gpus_per_node``) may come in any order in a URL, and each intermediate scenario
    is validated; the keys that never apply come back with their error.
    """
    try:
        return apply_overrides(scenario, values), {}
    except FabricModelError:
        pass
    pending, refused = dict(values), {}
    while pending:
        refused = {}
        for key, raw in list(pending.items()):
            try:
                scenario = apply_overrides(scenario, {key: raw})
            except FabricModelError as exc:
                refused[key] = exc
                continue
            del pending[key]
        if len(refused) == len(pending):  # nothing more applies
            break
    return scenario, refused


@dataclass(frozen=True)
class UrlScenario:
    """What the sidebar reads from a URL: the preset, the scenario, keys without a widget."""

    preset: str
    scenario: Scenario
    extra: dict[str, Any]
    errors: tuple[str, ...]


def read_url(params: Mapping[str, Sequence[str]]) -> UrlScenario:
    """Read the sidebar's URL parameters (``name -> values``; page parameters left out).

    Each bad parameter gets one message naming it and what is allowed, and is ignored: the
    preset's value stands, nothing is clamped.
    """
    one, errors = one_value_each(params)
    preset = one.pop("preset", DEFAULT_PRESET)
    try:
        scenario = load_preset(preset)
    except ScenarioError as exc:  # unknown, or renamed (the message says why)
        errors.append(f"URL parameter {exc}; showing {DEFAULT_PRESET}")
        preset = DEFAULT_PRESET
        scenario = load_preset(preset)
    values: dict[str, Any] = {}
    for key, raw in one.items():
        try:
            coerce_value(key, raw)
        except FabricModelError as exc:
            errors.append(f"URL parameter {exc} - ignored, the preset's value is used")
            continue
        values[key] = raw
    scenario, refused = _apply_in_any_order(scenario, values)
    errors += [
        f"URL parameter {exc} - ignored, the preset's value is used" for exc in refused.values()
    ]
    extra = {k: v for k, v in values.items() if k not in refused and k not in SIDEBAR_KEYS}
    return UrlScenario(preset, scenario, extra, tuple(errors))


def _read_url_once() -> None:
    """First run of a session: seed the widgets from the URL, reporting bad parameters."""
    if st.session_state.get("url_read"):
        return
    st.session_state["url_read"] = True
    read = read_url(  # the pages read their own parameters
        {
            k: st.query_params.get_all(k)
            for k in st.query_params.keys()
            if not k.startswith(PAGE_PARAM_PREFIXES)
        }
    )
    st.session_state.setdefault("url_errors", []).extend(read.errors)
    st.session_state[_PRESET_VALUE] = read.preset
    st.session_state[_EXTRA] = read.extra
    _set_widgets(read.scenario)


def _write_url(preset: str, scenario: Scenario) -> None:
    wanted = {"preset": preset, **scenario_diff(scenario, preset)}
    current = {k: st.query_params.get_all(k)[-1] for k in st.query_params.keys()}
    # a page's own parameters stay; that page rewrites them after the sidebar ran
    wanted.update({k: v for k, v in current.items() if k.startswith(PAGE_PARAM_PREFIXES)})
    if current != wanted:
        st.query_params.from_dict(wanted)


def write_page_params(prefix: str, params: dict[str, str]) -> None:
    """Make ``params`` the URL's parameters under ``prefix`` (one of PAGE_PARAM_PREFIXES).

    Call after the sidebar ran (``current_scenario``): the sidebar's parameters stay first,
    the other pages' parameters are dropped, and the URL is rewritten only when it changes.
    """
    current = {k: st.query_params.get_all(k)[-1] for k in st.query_params.keys()}
    wanted = {k: v for k, v in current.items() if not k.startswith(PAGE_PARAM_PREFIXES)}
    wanted.update({k: v for k, v in params.items() if k.startswith(prefix)})
    if current != wanted:
        st.query_params.from_dict(wanted)


def page_params(prefix: str) -> dict[str, str]:
    """Return the URL parameters that start with a page's ``prefix``.

    A parameter given more than once with different values gets one ``st.error`` and is left
    out.
    """
    params, errors = _url_params(lambda k: k.startswith(prefix))
    for message in errors:
        st.error(message)
    return params


def scenario_diff(scenario: Scenario, preset: str) -> dict[str, str]:
    """Return the keys of ``scenario`` that differ from ``preset``, as URL text.

    As the sidebar writes them: a named model implies its shape, so its shape keys are left
    out.
    """
    diff = scenario.diff(load_preset(preset))
    if scenario.model.name != "custom":
        diff = {k: v for k, v in diff.items() if not _is_shape_key(k)}
    return {k: url_value(v) for k, v in diff.items()}


def cli_command(verb: str, preset: str, scenario: Scenario, *args: str) -> str:
    """Return the command line that runs ``verb`` on ``scenario``: the preset and what differs.

    As the URL carries it (a named model implies its shape keys), so the line stays short.
    """
    sets = [i for k, v in scenario_diff(scenario, preset).items() for i in ("--set", f"{k}={v}")]
    return "python -m fabric_model " + shlex.join([verb, *args, "--preset", preset, *sets])


def url_value(value: Any) -> str:
    """Spell a scenario value as the URL carries it (``true``, ``800``, ``null``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _widget(key: str, label: str, catalog_gpus: list[str]) -> None:
    spec = field_spec(key)
    wkey = _W + key
    st.session_state[wkey] = st.session_state[_VALUES][key]
    common = {"key": wkey, "on_change": _on_widget_change, "args": (key,)}
    help_text = spec.help + (f" ({spec.unit})" if spec.unit and spec.unit != ":1" else "")
    if key == "cluster.n_gpus":
        options = sorted(set(GPU_COUNT_STEPS) | {int(st.session_state[wkey])})
        st.select_slider(
            label, options=options, **common, help=help_text, format_func=lambda n: f"{n:,}"
        )
    elif key == "cluster.gpu":
        options = sorted(set(catalog_gpus) | {st.session_state[wkey]})
        st.selectbox(label, options, help=help_text, **common, format_func=str.upper)
    elif key == "fabric.vendor":
        st.radio(
            label,
            list(spec.choices),
            **common,
            help=help_text,
            horizontal=True,
            format_func=lambda v: VENDOR_LABELS.get(v, v),
        )
    elif key == "fabric.link_gbps":
        st.select_slider(
            label,
            options=list(spec.choices),
            **common,
            help=help_text,
            format_func=lambda v: f"{v}G",
        )
    elif key == "fabric.topology":
        st.selectbox(
            label,
            list(spec.choices),
            **common,
            help=help_text,
            format_func=lambda v: TOPOLOGY_LABELS.get(v, v),
        )
    elif key == "fabric.tiers":
        st.segmented_control(
            label, ["auto", 1, 2, 3], **common, help=help_text, selection_mode="single"
        )
    elif key == "fabric.rail_optimized":
        st.toggle(label, **common, help=help_text)
    elif key == "model.name":
        st.selectbox(
            label,
            list(spec.choices),
            **common,
            help=help_text,
            format_func=lambda n: (
                MODEL_SHAPES[n]["description"]
                if n in MODEL_SHAPES
                else "custom (shape keys as set)"
            ),
        )
    elif key.startswith("parallel."):
        options = sorted(set(_DEGREES) | {int(st.session_state[wkey])})
        st.select_slider(label, options=options, **common, help=help_text)
    elif spec.kind == "choice":
        st.selectbox(label, list(spec.choices), **common, help=help_text)
    elif spec.kind == "float":
        st.slider(
            label,
            min_value=float(spec.min or 0),
            max_value=float(spec.max or 1),
            step=float(spec.step or 0.1),
            **common,
            help=help_text,
        )
    else:
        st.number_input(
            label,
            min_value=int(spec.min or 0),
            max_value=int(spec.max or 10**9),
            step=1,
            **common,
            help=help_text,
        )


_LABELS = {
    "cluster.n_gpus": "GPUs",
    "cluster.gpu": "GPU",
    "fabric.vendor": "Fabric vendor",
    "fabric.link_gbps": "Link speed per NIC",
    "fabric.topology": "Topology",
    # the families whose builder reads the key (the family registry's Family.keys)
    "fabric.tiers": f"Switch tiers ({', '.join(family_names(lambda f: 'fabric.tiers' in f.keys))})",
    "fabric.oversubscription": "Leaf oversubscription (down:up)",
    "fabric.rail_optimized": "Rail-optimized wiring",
    "cluster.nics_per_gpu": "NICs (rails) per GPU",
    "cluster.gpus_per_node": "GPUs per server",
    "cluster.nvlink_domain": "NVLink domain (GPUs)",
    "fabric.planes": "Network planes per NIC",
    "model.name": "Model",
    "parallel.tp": "Tensor parallel (TP)",
    "parallel.pp": "Pipeline stages (PP)",
    "parallel.cp": "Context parallel (CP)",
    "parallel.ep": "Expert parallel (EP)",
    "training.recompute": "Activation recomputation",
    "model.routing_skew": "MoE routing skew (hot experts)",
    "ocs.block": "Block",
    "ocs.switch": "Optical circuit switch",
    "ocs.circuits": "Circuits",
    "ocs.reconfigure": "Reconfigure",
}


def sidebar_scenario() -> ScenarioState:
    """Draw the sidebar and return the scenario it describes (validated)."""
    _read_url_once()
    presets = list_presets()
    by_name = {p.name: p.description for p in presets}
    catalog_gpus = list(load_catalog().gpus)
    with st.sidebar:
        st.session_state[_PRESET] = st.session_state[_PRESET_VALUE]
        st.selectbox(
            "Preset",
            list(by_name),
            key=_PRESET,
            on_change=_on_preset_change,
            help="a named design; the controls below start from it",
        )
        st.caption(by_name[st.session_state[_PRESET_VALUE]])
        for key in SIDEBAR_KEYS[:_N_TOP]:
            _widget(key, _LABELS[key], catalog_gpus)
        # popovers, not expanders: a closed popover's widgets are not drawn in the browser
        # (a collapsed expander's are, hidden), so a first visit draws 11 widgets fewer
        with st.popover("Servers and rails", width="stretch"):
            for key in SIDEBAR_KEYS[_N_TOP:_N_FABRIC]:
                _widget(key, _LABELS[key], catalog_gpus)
        with st.popover("Model and parallelism", width="stretch"):
            for key in SIDEBAR_KEYS[_N_FABRIC:_N_OCS]:
                _widget(key, _LABELS[key], catalog_gpus)
        if st.session_state[_VALUES]["fabric.topology"] == "ocs":
            with st.popover("Optical circuit switches", width="stretch"):
                for key in SIDEBAR_KEYS[_N_OCS:]:
                    _widget(key, _LABELS[key], catalog_gpus)
    for message in st.session_state.pop("url_errors", []):
        st.error(message)
    preset = st.session_state[_PRESET_VALUE]
    overrides = dict(st.session_state.get(_EXTRA, {}))
    for key in SIDEBAR_KEYS:
        value = st.session_state[_VALUES][key]
        if value is None and key == "fabric.tiers":  # a segmented control can be cleared
            value = st.session_state[_VALUES][key] = "auto"
        overrides[key] = value
    base = load_preset(preset)
    try:
        # another vendor than the preset's runs its own transport unless the URL or a file
        # sets one (meta-24k-roce: PFC-only RoCE)
        scenario = apply_overrides(base, with_dependents(base, overrides))
    except FabricModelError as exc:
        _scenario_file_controls(preset, None)
        return ScenarioState(preset, None, str(exc))
    _scenario_file_controls(preset, scenario)
    _write_url(preset, scenario)
    return ScenarioState(preset, scenario, None)


# --------------------------------------------------------------------------------------
# Scenario files: download the current scenario, load one (YAML or JSON)
# --------------------------------------------------------------------------------------


def read_scenario_file(data: bytes, source: str) -> Scenario:
    """Parse an uploaded scenario file (YAML or JSON, ``yaml.safe_load``: data only).

    Raises
    ------
    FabricModelError
        ``ScenarioFileError`` for a file over ``MAX_SCENARIO_BYTES``, not UTF-8, or not a
        YAML/JSON mapping; ``ScenarioError`` naming the key and what is allowed.
    """
    if len(data) > MAX_SCENARIO_BYTES:
        raise ScenarioFileError(
            f"{source}: {len(data) / 1024:,.0f} KiB, larger than the "
            f"{MAX_SCENARIO_BYTES // 1024} KiB limit; a scenario is a few "
            f"lines"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioFileError(
            f"{source}: not UTF-8 text (byte {exc.start}); a scenario is a YAML or JSON file"
        ) from None
    return scenario_from_text(text, source=source)


def _base_preset(scenario: Scenario, current: str) -> str:
    """Return the preset to show a loaded scenario against.

    Its own name if that is a preset, else the preset it differs from in the fewest keys
    (the current preset on a tie), so the URL stays short.
    """
    names = [p.name for p in list_presets()]
    if scenario.name in names:
        return scenario.name
    return min(names, key=lambda n: (len(scenario.diff(load_preset(n))), n != current))


def apply_scenario(scenario: Scenario) -> str:
    """Make ``scenario`` the session's state (sidebar widgets, other keys, preset).

    The URL follows on the next run: the preset plus the keys that differ from it.
    Returns the preset chosen as the base. The file's name and description are not kept:
    the state is exactly what the URL can carry.
    """
    preset = _base_preset(scenario, st.session_state.get(_PRESET_VALUE, DEFAULT_PRESET))
    diff = scenario.diff(load_preset(preset))
    st.session_state[_PRESET_VALUE] = preset
    st.session_state[_EXTRA] = {k: v for k, v in diff.items() if k not in SIDEBAR_KEYS}
    _set_widgets(scenario)
    return preset


def _on_scenario_upload(key: str) -> None:
    uploaded = st.session_state.get(key)
    # a new uploader key on the next run: the uploader empties, so the same file can be
    # loaded again later, and a stale file never re-applies itself
    st.session_state[_UPLOAD_N] = st.session_state.get(_UPLOAD_N, 0) + 1
    if uploaded is None:
        return
    try:
        scenario = read_scenario_file(uploaded.getvalue(), uploaded.name)
        preset = apply_scenario(scenario)
    except FabricModelError as exc:
        problem = str(exc).rstrip(".")  # file-level errors start with the file's name
        where = "" if problem.startswith(f"{uploaded.name}:") else f"{uploaded.name}: "
        st.session_state[_FILE_MESSAGE] = (
            "error",
            f"Could not load {where}{problem}. The scenario is unchanged.",
        )
        return
    n = len(scenario.diff(load_preset(preset)))
    st.session_state[_FILE_MESSAGE] = (
        "info",
        f"Loaded {uploaded.name}: preset {preset}"
        + (f" with {n} changed key{'s' * (n != 1)}" if n else "")
        + ".",
    )


@scenario_cache(64)
def _scenario_yaml(scenario: Scenario) -> bytes:
    """Return the scenario file's bytes (cached: YAML dumping is ~10 ms of every rerun)."""
    return dump_scenario(scenario).encode()


def _scenario_file_controls(preset: str, scenario: Scenario | None) -> None:
    """Draw the sidebar's scenario file section: download the scenario, load one."""
    key = f"{_UPLOAD}_{st.session_state.get(_UPLOAD_N, 0)}"
    with st.sidebar:
        st.divider()
        st.download_button(
            "Download scenario (YAML)",
            _scenario_yaml(scenario) if scenario is not None else b"",
            file_name=export_file_name("scenario", preset, "yaml"),
            mime="application/x-yaml",
            key="dl_scenario",
            on_click="ignore",
            disabled=scenario is None,
            width="stretch",
            help="every key of the current scenario (what the URL says, spelled out); "
            "python -m fabric_model bom --scenario FILE reads it",
        )
        report_download_button(preset, scenario)
        st.file_uploader(
            "Load scenario (YAML/JSON)",
            type=["yaml", "yml", "json"],
            key=key,
            on_change=_on_scenario_upload,
            args=(key,),
            help=f"a scenario file (at most {MAX_SCENARIO_BYTES // 1024} KiB); keys it leaves "
            "out take their defaults. It replaces the sidebar's scenario",
        )
        message = st.session_state.pop(_FILE_MESSAGE, None)
        if message is not None:
            kind, text = message
            if kind == "error":
                st.error(text)
            else:
                st.caption(text)


_COST_KEYS = (
    ("costs.switch_usd", "Switch price (USD)"),
    ("costs.nic_usd", "NIC price (USD)"),
    ("costs.optic_switch_usd", "Switch-side transceiver (USD)"),
    ("costs.optic_nic_usd", "NIC-side transceiver (USD)"),
    ("costs.copper_cable_usd", "Copper cable (USD)"),
    ("costs.fiber_usd", "Fiber per optical link (USD)"),
    ("costs.server_usd", "GPU server without NICs (USD)"),
)
_TCO_KEYS = (
    ("costs.electricity_usd_per_kwh", "Electricity (USD/kWh)"),
    ("costs.pue", "PUE"),
    ("costs.years", "TCO horizon (years)"),
)


def _on_cost_change(key: str) -> None:
    extra = dict(st.session_state.get(_EXTRA, {}))
    value = st.session_state["cost:" + key]
    if value is None:
        extra.pop(key, None)
    else:
        extra[key] = value
    st.session_state[_EXTRA] = extra


def _catalog_price(bom: Any, key: str) -> float | None:
    """Return the catalog's unit price of the part a cost key overrides (the placeholder)."""
    hw = bom.hardware
    direct = {
        "costs.switch_usd": hw.switch.price_usd,
        "costs.nic_usd": hw.nic.price_usd,
        "costs.server_usd": hw.server.price_usd,
    }
    if key in direct:
        return float(direct[key])
    where = {
        "costs.optic_switch_usd": ("optics", "side"),
        "costs.optic_nic_usd": ("optics", "NIC"),
        "costs.copper_cable_usd": ("cables", None),
        "costs.fiber_usd": ("cables", None),
    }
    category, _hint = where[key]
    for line in bom.lines:
        if line.category != category:
            continue
        if key == "costs.optic_nic_usd" and "NIC side" not in line.where:
            continue
        if key == "costs.optic_switch_usd" and "NIC side" in line.where:
            continue
        if key == "costs.fiber_usd" and line.key != "fiber":
            continue
        if key == "costs.copper_cable_usd" and line.key == "fiber":
            continue
        return float(line.unit_price_usd)
    return None


def cost_controls(bom: Any) -> None:
    """Price overrides and TCO assumptions; they go into the scenario and the URL."""
    scenario = st.session_state["scenario_state"].scenario
    cols = st.columns(2)
    for i, (key, label) in enumerate(_COST_KEYS):
        wkey = "cost:" + key
        st.session_state[wkey] = scenario.get(key)
        price = _catalog_price(bom, key)
        # value=None makes the field clearable: without it an emptied field falls back to
        # min_value (a price of 0) instead of "no override".
        cols[i % 2].number_input(
            label,
            value=None,
            min_value=0.0,
            max_value=float(field_spec(key).max or 1e9),
            step=100.0,
            key=wkey,
            placeholder=f"catalog: {price:,.0f}" if price is not None else "not used",
            on_change=_on_cost_change,
            args=(key,),
            help=field_spec(key).help,
        )
    for key, label in _TCO_KEYS:
        spec = field_spec(key)
        wkey = "cost:" + key
        st.session_state[wkey] = float(scenario.get(key))
        st.slider(
            label,
            min_value=float(spec.min or 0),
            max_value=float(spec.max or 1),
            step=float(spec.step or 0.01),
            key=wkey,
            on_change=_on_cost_change,
            args=(key,),
            help=spec.help,
        )
