"""Compare page state: pinned scenarios, their labels and their URL form.

A pin is the sidebar's scenario at the moment the user pinned it (its preset plus the keys
that differ from that preset) with a short label the user can edit. Pins live in the
session; in the URL each is one parameter,
``cmp.<n>=<preset>~key=value~...[~label=<text>]``: only the keys that differ from the preset,
as the sidebar writes its own URL (``~label=`` only when the label is not the default one).
On the page's first run in a session the URL's pins are read back; a malformed entry gets
one ``st.error`` and is skipped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import streamlit as st

from fabric_model.errors import FabricModelError, shown_value
from fabric_model.presets import list_presets, load_preset
from fabric_model.scenario import Scenario, apply_overrides, dump_scenario
from ui import facade
from ui.compare_figures import ScenarioMetrics, unique_labels
from ui.state import page_params, scenario_diff, shown_name, write_page_params
from ui.theme import TOPOLOGY_LABELS, VENDOR_SHORT_LABELS

__all__ = [
    "CURRENT",
    "MAX_PINS",
    "PREFIX",
    "Pin",
    "columns",
    "comparison_yaml",
    "decode_pin",
    "default_label",
    "encode_pin",
    "parse_params",
    "pin_controls",
    "pinned_list",
    "pins",
    "read_url_once",
    "scenario_diff",
    "write_url",
]

PREFIX = "cmp."
#: Pinned scenarios at most; with the current one the page compares up to four.
MAX_PINS = 3
#: The last column's label: the sidebar's scenario as it is now.
CURRENT = "current"
_SEP = "~"
_LABEL = "label"
_PINS = "cmp_pins"  # plain session keys: they survive page switches
_NEXT_ID = "cmp_next_id"
_URL_READ = "cmp_url_read"
_NEW_LABEL = "cmp_new_label"
_NEW_LABEL_AUTO = "cmp_new_label_auto"
_MAX_LABEL_CHARS = 40


@dataclass(frozen=True)
class Pin:
    """A pinned scenario: its label, the preset it is written against, the scenario."""

    pin_id: int
    label: str
    preset: str
    scenario: Scenario


# ---------------------------------------------------------------------- pure helpers


def default_label(scenario: Scenario) -> str:
    """Return a short label such as ``1024 H100 IB fat-tree`` (plus what sets it apart)."""
    c, f = scenario.cluster, scenario.fabric
    text = (
        f"{c.n_gpus} {c.gpu.upper()} {VENDOR_SHORT_LABELS.get(f.vendor, f.vendor)} "
        f"{TOPOLOGY_LABELS.get(f.topology, f.topology).lower()}"
    )
    extras = []
    if f.link_gbps != 400:
        extras.append(f"{f.link_gbps}G")
    if f.oversubscription > 1:
        extras.append(f"{f.oversubscription:g}:1")
    if c.nics_per_gpu > 1:
        extras.append(f"{c.nics_per_gpu} NICs")
    if scenario.what_if.placement == "scattered":
        extras.append("scattered")
    if scenario.what_if.degraded_link_factor < 1:
        extras.append("degraded")
    return text + (", " + ", ".join(extras) if extras else "")


def _clean_label(label: str) -> str:
    return " ".join(label.replace(_SEP, "-").split())[:_MAX_LABEL_CHARS]


def encode_pin(pin: Pin) -> str:
    """Return the URL value of a pin: ``<preset>~key=value~...[~label=<text>]``."""
    parts = [pin.preset, *(f"{k}={v}" for k, v in scenario_diff(pin.scenario, pin.preset).items())]
    if pin.label != default_label(pin.scenario):
        parts.append(f"{_LABEL}={_clean_label(pin.label)}")
    return _SEP.join(parts)


def decode_pin(raw: str) -> tuple[str, str, Scenario]:
    """Read one pin's URL value; return (label, preset, scenario).

    Raises
    ------
    ValueError
        With a message saying what is wrong (preset, token or key and what is allowed).
    """
    preset, *tokens = raw.strip().split(_SEP)
    names = [p.name for p in list_presets()]
    if preset not in names:
        raise ValueError(
            f"starts with {shown_value(preset)}, which is not a preset (presets: "
            f"{', '.join(names)})"
        )
    overrides: dict[str, str] = {}
    label = None
    for token in tokens:
        key, eq, value = token.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"{shown_value(token)} is not KEY=VALUE (e.g. cluster.n_gpus=2048)")
        if key.strip() == _LABEL:
            label = _clean_label(value)
        else:
            overrides[key.strip()] = value
    try:
        scenario = apply_overrides(load_preset(preset), overrides)
    except FabricModelError as exc:
        raise ValueError(str(exc)) from None
    return label or default_label(scenario), preset, scenario


def _pin_number(name: str) -> int | None:
    number = name[len(PREFIX) :]
    return int(number) if number.isdigit() and int(number) > 0 else None


def parse_params(params: Mapping[str, str]) -> tuple[list[tuple[str, str, Scenario]], list[str]]:
    """Read ``cmp.<n>`` URL parameters in number order.

    Return at most :data:`MAX_PINS` pins as (label, preset, scenario), and one message per
    malformed entry (those are skipped).
    """
    errors = []
    numbered = []
    for name, raw in params.items():
        if not name.startswith(PREFIX):
            continue
        n = _pin_number(name)
        if n is None:
            errors.append(
                f"URL parameter {shown_name(name)}: a pinned scenario is cmp.1, cmp.2, ... - "
                "skipped"
            )
        else:
            numbered.append((n, name, raw))
    found = []
    for _, name, raw in sorted(numbered):
        try:
            pin = decode_pin(raw)
        except ValueError as exc:
            errors.append(
                f"URL parameter {shown_name(name)} = {shown_value(raw)}: {exc} - skipped (a pin is "
                f"<preset>~key=value~..., e.g. dgx-h100-ib-ndr~cluster.n_gpus=2048)"
            )
            continue
        if len(found) == MAX_PINS:
            errors.append(f"URL parameter {name}: at most {MAX_PINS} pinned scenarios - skipped")
            continue
        found.append(pin)
    return found, errors


def comparison_yaml(columns: list[tuple[str, Scenario]]) -> str:
    """Every compared scenario as one YAML document (a complete scenario file each)."""
    docs = [
        dump_scenario(
            dataclasses.replace(
                s, name=label, description=(f"{label}: compared on the Compare page")
            )
        )
        for label, s in columns
    ]
    return "---\n".join(docs)


# ---------------------------------------------------------------------- session and URL


def pins() -> list[Pin]:
    """Return the session's pinned scenarios, in pinning order."""
    return list(st.session_state.get(_PINS, []))


def _add(label: str, preset: str, scenario: Scenario) -> None:
    pin_id = st.session_state.get(_NEXT_ID, 1)
    st.session_state[_NEXT_ID] = pin_id + 1
    st.session_state[_PINS] = [
        *pins(),
        Pin(pin_id, _clean_label(label) or default_label(scenario), preset, scenario),
    ]


def read_url_once() -> None:
    """First run of the page in a session: take the pins from the URL, report bad entries."""
    if st.session_state.get(_URL_READ):
        return
    st.session_state[_URL_READ] = True
    params = page_params(PREFIX)
    found, errors = parse_params(params)
    if found:
        st.session_state[_PINS] = []
    for label, preset, scenario in found:
        _add(label, preset, scenario)
    for message in errors:
        st.error(message)


def write_url() -> None:
    """Put the pins into the URL (after the sidebar wrote its parameters)."""
    write_page_params(
        PREFIX, {f"{PREFIX}{i}": encode_pin(p) for i, p in enumerate(pins(), start=1)}
    )


def _on_pin(preset: str, scenario: Scenario) -> None:
    if len(pins()) < MAX_PINS:
        _add(st.session_state.get(_NEW_LABEL, ""), preset, scenario)


def _on_remove(pin_id: int) -> None:
    st.session_state[_PINS] = [p for p in pins() if p.pin_id != pin_id]


def _on_relabel(pin_id: int) -> None:
    text = _clean_label(st.session_state[f"cmp_label:{pin_id}"])
    st.session_state[_PINS] = [
        dataclasses.replace(p, label=text or default_label(p.scenario)) if p.pin_id == pin_id else p
        for p in pins()
    ]


def pin_controls(scenario: Scenario, preset: str) -> None:
    """Draw the label field and the "Pin current scenario" button."""
    auto = default_label(scenario)
    if st.session_state.get(_NEW_LABEL_AUTO) != auto:  # the label follows the sidebar ...
        if st.session_state.get(_NEW_LABEL) in (None, "", st.session_state.get(_NEW_LABEL_AUTO)):
            st.session_state[_NEW_LABEL] = auto  # ... until the user edits it
        st.session_state[_NEW_LABEL_AUTO] = auto
    elif _NEW_LABEL not in st.session_state:  # widget state is dropped on page switches
        st.session_state[_NEW_LABEL] = auto
    full = len(pins()) >= MAX_PINS
    left, right = st.columns([3, 1], gap="medium", vertical_alignment="bottom")
    left.text_input(
        "Label for the pin",
        key=_NEW_LABEL,
        max_chars=_MAX_LABEL_CHARS,
        help="a short name for the sidebar's current scenario in the table and the charts "
        f"(at most {_MAX_LABEL_CHARS} characters); it follows the sidebar until edited",
    )
    right.button(
        "Pin current scenario",
        key="cmp_pin",
        on_click=_on_pin,
        args=(preset, scenario),
        disabled=full,
        type="primary",
        width="stretch",
        help=(
            f"at most {MAX_PINS} pins: remove one first"
            if full
            else "keep the sidebar's scenario as a column of the comparison; then change the "
            "sidebar and pin again, or compare with the current column"
        ),
    )


def pinned_list() -> None:
    """Draw each pin: its editable label, what differs from its preset, a remove button."""
    for i, pin in enumerate(pins(), start=1):
        key = f"cmp_label:{pin.pin_id}"
        st.session_state[key] = pin.label
        diff = scenario_diff(pin.scenario, pin.preset)
        a, b, c = st.columns([2, 4, 1], gap="small", vertical_alignment="center")
        a.text_input(
            f"Pin {i}",
            key=key,
            on_change=_on_relabel,
            args=(pin.pin_id,),
            max_chars=_MAX_LABEL_CHARS,
            label_visibility="collapsed",
            help=f"label of pin {i}: the table's and the charts' name for it",
        )
        b.caption(
            f"preset {pin.preset}"
            + (": " + ", ".join(f"{k} = {v}" for k, v in diff.items()) if diff else ", unchanged")
        )
        c.button(
            "Remove",
            key=f"cmp_remove:{pin.pin_id}",
            on_click=_on_remove,
            args=(pin.pin_id,),
            type="tertiary",
            help=f"drop pin {i} from the comparison (and from the URL)",
        )


def columns(current: Scenario) -> list[tuple[str, ScenarioMetrics]]:
    """Return the columns to compare: every pin, then the sidebar's scenario (unique labels)."""
    pinned = pins()
    labels = [
        *unique_labels([p.label if p.label != CURRENT else f"{CURRENT} (pinned)" for p in pinned]),
        CURRENT,
    ]
    scenarios = [*(p.scenario for p in pinned), current]
    return [(label, facade.scenario_metrics(s)) for label, s in zip(labels, scenarios, strict=True)]
