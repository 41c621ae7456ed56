"""What-if page state: changes to the sidebar's scenario, their controls and their URL form.

The sidebar's scenario is *before*. The page keeps the user's changes as scenario overrides
(``{dotted_key: value}``: only the keys moved away from the sidebar's value) in the session;
*after* is the sidebar's scenario with all of them. They travel in the URL as
``wi.<name>=<value>`` (``wi.degraded_link_factor=0.5``, ``wi.link_gbps=800``), written after
the sidebar's own parameters (``ui.state.write_page_params``) and read on the page's first
run in a session; a bad one gets one ``st.error`` naming it and what is allowed, and is
ignored. Every bound comes from the scenario's own table (``fabric_model.scenario.field_spec``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import streamlit as st

from fabric_model.errors import FabricModelError, shown_value
from fabric_model.scenario import Scenario, apply_overrides, coerce_value, field_spec
from ui import facade
from ui.compare_figures import ScenarioMetrics, WhatIfRow
from ui.state import page_params, shown_name, write_page_params

__all__ = [
    "CHANGES",
    "PARAMS",
    "PREFIX",
    "Change",
    "WhatIf",
    "controls",
    "evaluate",
    "overrides",
    "parse_params",
    "read_url_once",
    "url_params",
    "write_url",
]

PREFIX = "wi."
_OVERRIDES = "wi_overrides"  # plain session key: survives page switches
_URL_READ = "wi_url_read"
_W = "wi:"  # widget key prefix


@dataclass(frozen=True)
class Change:
    """One what-if: a name and the scenario keys it sets."""

    label: str
    keys: tuple[str, ...]


_FACTOR, _LINK = "what_if.degraded_link_factor", "what_if.degraded_link"
CHANGES: tuple[Change, ...] = (
    Change("degraded link", (_FACTOR, _LINK)),
    Change("placement", ("what_if.placement",)),
    Change("leaf oversubscription", ("fabric.oversubscription",)),
    Change("link speed", ("fabric.link_gbps",)),
    Change("NICs per GPU", ("cluster.nics_per_gpu",)),
    Change("failed planes", ("what_if.failed_planes",)),
    Change("degraded plane", ("what_if.degraded_plane_factor",)),
    Change("failed switch", ("what_if.failed_switch",)),
    Change("GPUDirect RDMA", ("what_if.gdr",)),
    Change("PFC", ("what_if.pfc",)),
    Change("RDMA MTU", ("what_if.mtu",)),
    Change("NIC affinity", ("what_if.nic_affinity",)),
    Change("PCIe ACS", ("what_if.acs",)),
    Change("flapping link", ("what_if.flapping_link",)),
    Change("NCCL channels", ("nccl.max_channels",)),
    Change("QPs per connection", ("fabric.qps_per_connection",)),
)
_KEYS = tuple(k for c in CHANGES for k in c.keys)
#: URL parameter -> scenario key (``wi.link_gbps`` -> ``fabric.link_gbps``).
PARAMS: dict[str, str] = {PREFIX + k.split(".", 1)[1]: k for k in _KEYS}

_LINK_LABELS = {
    "nic": "a GPU's NIC-to-leaf link",
    "leaf-spine": "a leaf-spine cable",
    "spine-core": "a spine-core cable",
}
_LINK_SHORT = {
    "nic": "a NIC link",
    "leaf-spine": "a leaf-spine link",
    "spine-core": "a spine-core link",
}


# ---------------------------------------------------------------------- pure helpers


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def parse_params(params: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """Read ``wi.`` URL parameters into overrides; return them and one message per bad one."""
    out: dict[str, Any] = {}
    errors = []
    for name, raw in params.items():
        if not name.startswith(PREFIX):
            continue
        key = PARAMS.get(name)
        if key is None:
            errors.append(
                f"URL parameter {shown_name(name)}: not a what-if setting (known: "
                f"{', '.join(PARAMS)}) - ignored"
            )
            continue
        try:
            out[key] = coerce_value(key, raw)
        except FabricModelError as exc:
            allowed = getattr(exc, "allowed", str(exc))
            errors.append(
                f"URL parameter {name} = {shown_value(raw)} ({key}): {allowed} - ignored, "
                f"the sidebar's value is used"
            )
    return out, errors


def url_params(changes: Mapping[str, Any]) -> dict[str, str]:
    """Return the overrides as ``wi.`` URL parameters, in the page's order."""
    return {PREFIX + k.split(".", 1)[1]: _text(changes[k]) for k in _KEYS if k in changes}


def _value_text(change: Change, values: Mapping[str, Any]) -> str:
    """Short text of a change's keys in one scenario (``values``: key -> value)."""
    key = change.keys[0]
    v = values[key]
    if key == _FACTOR:
        return "healthy" if v >= 1 else f"{_LINK_SHORT[values[_LINK]]} at {v:.0%}"
    if key == "fabric.oversubscription":
        return f"{v:g}:1"
    if key == "fabric.link_gbps":
        return f"{v}G"
    if key == "cluster.nics_per_gpu":
        return f"{v} per GPU"
    if key == "what_if.failed_planes":
        return "every plane up" if v == 0 else f"{v} plane{'s' if v > 1 else ''} down"
    if key == "what_if.degraded_plane_factor":
        return "every plane healthy" if v >= 1 else f"one plane at {v:.0%}"
    if key == "what_if.failed_switch":
        return "every switch up" if v == "none" else f"one {v} of one plane down"
    if key == "what_if.gdr":
        return "GPUDirect RDMA on" if v == "on" else "host-staged (GDR off)"
    if key == "what_if.pfc":
        return f"PFC {v}"
    if key == "what_if.mtu":
        return f"MTU {v} B"
    if key == "what_if.nic_affinity":
        return "local NIC" if v == "local" else "NIC across the CPU socket"
    if key == "what_if.acs":
        return f"ACS {v}"
    if key == "what_if.flapping_link":
        return "no flapping" if v <= 0 else f"a NIC link retrains every {v:g} s"
    if key == "nccl.max_channels":
        return "NCCL's channels" if v == "auto" else f"at most {v} channels"
    if key == "fabric.qps_per_connection":
        return f"{v} QP{'s' if v > 1 else ''} per connection"
    return str(v)


def _active(baseline: Scenario, changes: Mapping[str, Any]) -> list[tuple[Change, dict[str, Any]]]:
    """Return the changes that differ from the sidebar, each with its overrides."""
    out = []
    for change in CHANGES:
        sub = {k: changes[k] for k in change.keys if k in changes and changes[k] != baseline.get(k)}
        if (
            _FACTOR in change.keys
            and sub.get(_FACTOR, baseline.get(_FACTOR)) >= 1
            and baseline.get(_FACTOR) >= 1
        ):
            continue  # which link is degraded matters only when one is
        if sub:
            out.append((change, sub))
    return out


@dataclass(frozen=True)
class WhatIf:
    """What the page shows: before, each change alone, and after (all changes combined).

    ``singles`` has one row per active change; ``combined`` is the after state (the single
    row itself when only one change is active, None when none is).
    """

    before: ScenarioMetrics
    singles: tuple[WhatIfRow, ...]
    combined: WhatIfRow | None

    @property
    def rows(self) -> tuple[WhatIfRow, ...]:
        """Table rows: each change, then the combination when there are several."""
        if self.combined is None or len(self.singles) < 2:
            return self.singles
        return (*self.singles, self.combined)

    @property
    def after(self) -> ScenarioMetrics | None:
        """The after state's results (None: no change, or not a valid scenario)."""
        return self.combined.metrics if self.combined is not None else None


def _row(baseline: Scenario, label: str, setting: str, over: Mapping[str, Any]) -> WhatIfRow:
    try:
        scenario = apply_overrides(baseline, over)
    except FabricModelError as exc:
        return WhatIfRow(label, setting, None, error=f"not a valid scenario: {exc}")
    return WhatIfRow(label, setting, facade.scenario_metrics(scenario))


def evaluate(baseline: Scenario, changes: Mapping[str, Any]) -> WhatIf:
    """Model the baseline, each active change alone and all of them together (cached)."""
    before = facade.scenario_metrics(baseline)
    base_values = {k: baseline.get(k) for k in _KEYS}
    singles = []
    combined: dict[str, Any] = {}
    settings = []
    for change, sub in _active(baseline, changes):
        after_values = {**base_values, **sub}
        setting = f"{_value_text(change, base_values)} → {_value_text(change, after_values)}"
        singles.append(_row(baseline, change.label, setting, sub))
        combined.update(sub)
        settings.append(f"{change.label}: {_value_text(change, after_values)}")
    if not singles:
        return WhatIf(before, (), None)
    if len(singles) == 1:
        return WhatIf(before, tuple(singles), singles[0])
    return WhatIf(
        before,
        tuple(singles),
        _row(baseline, "all changes combined", "; ".join(settings), combined),
    )


# ---------------------------------------------------------------------- session and URL


def overrides() -> dict[str, Any]:
    """Return the session's what-if overrides (``{dotted_key: value}``)."""
    return dict(st.session_state.get(_OVERRIDES, {}))


def read_url_once() -> None:
    """First run of the page in a session: take the ``wi.`` URL parameters, report bad ones."""
    if st.session_state.get(_URL_READ):
        return
    st.session_state[_URL_READ] = True
    params = page_params(PREFIX)
    found, errors = parse_params(params)
    st.session_state[_OVERRIDES] = found
    for message in errors:
        st.error(message)


def write_url() -> None:
    """Put the overrides into the URL (after the sidebar wrote its parameters)."""
    write_page_params(PREFIX, url_params(overrides()))


def _on_change(key: str, sidebar_value: Any) -> None:
    value = st.session_state[_W + key]
    changes = overrides()
    if value == sidebar_value:
        changes.pop(key, None)
    else:
        changes[key] = value
    st.session_state[_OVERRIDES] = changes


def _reset() -> None:
    st.session_state[_OVERRIDES] = {}


def _radio(col: Any, label: str, key: str, meaning: str, baseline: Scenario, common: Any) -> None:
    """Draw a horizontal radio over ``key``'s choices, its help from :func:`_help`."""
    col.radio(
        label,
        list(field_spec(key).choices),
        **common(key),
        horizontal=True,
        help=_help(key, meaning, baseline),
    )


def _help(key: str, meaning: str, baseline: Scenario) -> str:
    spec = field_spec(key)
    unit = f" ({spec.unit})" if spec.unit and spec.unit != ":1" else ""
    return (
        f"{meaning}. Scenario key {key}{unit}: {spec.help}; allowed: {spec.allowed()}. "
        f"The sidebar's value is {_text(baseline.get(key))}."
    )


def controls(baseline: Scenario) -> None:
    """Draw one control per what-if key, starting from the sidebar's values."""
    changes = overrides()

    def common(key: str) -> dict[str, Any]:
        st.session_state[_W + key] = changes.get(key, baseline.get(key))
        return {"key": _W + key, "on_change": _on_change, "args": (key, baseline.get(key))}

    row1 = st.columns([1.3, 1.2, 1.0], gap="medium")
    spec = field_spec(_FACTOR)
    step = float(spec.step or 0.05)
    # the slider starts one step above an exclusive bound, but the key table (the sidebar's
    # URL, a scenario file) allows any factor above it: the slider reaches down to that one
    lowest = float(spec.min or 0) + (step if spec.min_exclusive else 0.0)
    now = float(changes.get(_FACTOR, baseline.get(_FACTOR)))
    row1[0].slider(
        "Degraded link rate (fraction of line rate)",
        min_value=min(lowest, now),
        max_value=float(spec.max or 1),
        step=step,
        format="%.2f",
        **common(_FACTOR),
        help=_help(
            _FACTOR,
            "One link runs at this fraction of its rate, as a NIC or cable "
            "that trained down or drops packets does; 1 = healthy, 0.5 = half rate",
            baseline,
        ),
    )
    row1[1].selectbox(
        "Which link is degraded",
        list(field_spec(_LINK).choices),
        **common(_LINK),
        format_func=lambda v: _LINK_LABELS.get(v, v),
        help=_help(
            _LINK,
            "Where the degraded link sits: one GPU's NIC-to-leaf link, a "
            "leaf-spine cable or a spine-core cable (a design without that tier "
            "says so)",
            baseline,
        ),
    )
    _radio(
        row1[2],
        "Job placement",
        "what_if.placement",
        "contiguous: the job fills consecutive leaves; "
        "scattered: its servers are spread over the cluster in random order, so "
        "rings cross the spines",
        baseline,
        common,
    )
    row2 = st.columns([1.3, 1.2, 1.0], gap="medium")
    spec = field_spec("fabric.oversubscription")
    row2[0].slider(
        "Leaf oversubscription (down:up)",
        min_value=float(spec.min or 1),
        max_value=float(spec.max or 16),
        step=float(spec.step or 0.5),
        format="%.1f:1",
        **common("fabric.oversubscription"),
        help=_help(
            "fabric.oversubscription",
            "Leaf downlink to uplink bandwidth ratio; "
            "1:1 is non-blocking, 4:1 leaves a quarter of line rate for traffic "
            "that leaves the leaf",
            baseline,
        ),
    )
    row2[1].select_slider(
        "Link speed per NIC",
        options=list(field_spec("fabric.link_gbps").choices),
        **common("fabric.link_gbps"),
        format_func=lambda v: f"{v}G",
        help=_help(
            "fabric.link_gbps",
            "Line rate of every scale-out NIC and cable in Gb/s "
            "(the vendor's catalog decides which exist)",
            baseline,
        ),
    )
    spec = field_spec("cluster.nics_per_gpu")
    row2[2].select_slider(
        "NICs (rails) per GPU",
        options=list(range(int(spec.min or 1), int(spec.max or 4) + 1)),
        **common("cluster.nics_per_gpu"),
        help=_help(
            "cluster.nics_per_gpu",
            "Scale-out NICs per GPU, each on its own rail: "
            "more NICs multiply the GPU's network bandwidth and the fabric's ports",
            baseline,
        ),
    )
    _plane_controls(baseline, common)
    _misconfiguration_controls(baseline, common)
    st.button(
        "Reset all changes",
        key="wi_reset",
        on_click=_reset,
        disabled=not changes,
        type="tertiary",
        help="back to the sidebar's scenario (after = before)",
    )


#: ``nccl.max_channels`` values the page offers (NCCL_MAX_NCHANNELS), ``auto`` first.
_CHANNELS = ("auto", 1, 2, 4, 8, 16, 32)


def _misconfiguration_controls(baseline: Scenario, common: Any) -> None:
    """Draw the misconfiguration levers, one scenario key each.

    GPUDirect RDMA, PFC, the RDMA MTU, NIC affinity, ACS, a flapping link, NCCL's channels
    and QPs per connection.
    """
    st.markdown("**Misconfigurations**")
    row4 = st.columns(4, gap="medium")
    _radio(
        row4[0],
        "GPUDirect RDMA",
        "what_if.gdr",
        "off: NCCL stages every byte through host memory (NCCL_NET_GDR_LEVEL, "
        "nvidia-peermem not loaded): PCIe twice and host DRAM four times",
        baseline,
        common,
    )
    _radio(
        row4[1],
        "PFC (RoCE)",
        "what_if.pfc",
        "off: a RoCE port receiving faster than its rate drops, and go-back-N resends; "
        "InfiniBand and lossy fabrics refuse it (the table says why)",
        baseline,
        common,
    )
    row4[2].select_slider(
        "RDMA MTU (bytes)",
        options=list(field_spec("what_if.mtu").choices),
        **common("what_if.mtu"),
        help=_help(
            "what_if.mtu",
            "payload per packet; 1024 is what RoCE gets with the interface MTU at 1500",
            baseline,
        ),
    )
    _radio(
        row4[3],
        "NIC per GPU",
        "what_if.nic_affinity",
        "cross-socket: each GPU drives a NIC behind the other CPU (a wrong "
        "NCCL_IB_HCA), so its traffic crosses the inter-socket link",
        baseline,
        common,
    )
    row5 = st.columns(4, gap="medium")
    _radio(
        row5[0],
        "PCIe ACS",
        "what_if.acs",
        "on: GPU-NIC peer-to-peer is redirected to the root complex and back",
        baseline,
        common,
    )
    spec = field_spec("what_if.flapping_link")
    row5[1].number_input(
        "Flapping NIC link: retrain every (s)",
        min_value=float(spec.min or 0),
        max_value=float(spec.max or 86400),
        step=float(spec.step or 10),
        **common("what_if.flapping_link"),
        help=_help(
            "what_if.flapping_link",
            "0 = no flapping; each retrain stalls the whole job until NCCL's QPs time out "
            "and resend",
            baseline,
        ),
    )
    now = overrides().get("nccl.max_channels", baseline.nccl.max_channels)
    channels = [c for c in _CHANNELS if c == "auto"] + sorted(
        {c for c in _CHANNELS if c != "auto"} | ({now} if isinstance(now, int) else set())
    )
    row5[2].select_slider(
        "NCCL channels (NCCL_MAX_NCHANNELS)",
        options=channels,
        **common("nccl.max_channels"),
        help=_help(
            "nccl.max_channels",
            "fewer channels leave each NVLink domain on fewer NICs and lower NCCL's "
            "per-channel caps",
            baseline,
        ),
    )
    spec = field_spec("fabric.qps_per_connection")
    row5[3].number_input(
        "QPs per connection",
        min_value=int(spec.min or 1),
        max_value=int(spec.max or 64),
        step=1,
        **common("fabric.qps_per_connection"),
        help=_help(
            "fabric.qps_per_connection",
            "NCCL_IB_QPS_PER_CONNECTION: each QP is hashed on its own under static ECMP",
            baseline,
        ),
    )


_SWITCH_LABELS = {
    "none": "none",
    "leaf": "the degraded NIC's leaf",
    "spine": "the first spine",
}


def _plane_controls(baseline: Scenario, common: Any) -> None:
    """Draw the multi-plane levers: a plane down, a plane degraded, a switch of one down."""
    planes = baseline.fabric.planes
    if planes < 2:
        st.caption(
            "Plane what-ifs (a plane down, a degraded plane, a switch of one plane down) need "
            "a multi-plane fabric: set fabric.planes to 2, 4 or 8 in the sidebar."
        )
        return
    row3 = st.columns([1.3, 1.2, 1.0], gap="medium")
    row3[0].select_slider(
        f"Planes down (of {planes})",
        options=list(range(planes)),
        **common("what_if.failed_planes"),
        help=_help(
            "what_if.failed_planes",
            "Whole network planes out of service; the NICs spray over the others, so the "
            "job runs slower instead of stopping",
            baseline,
        ),
    )
    spec = field_spec("what_if.degraded_plane_factor")
    step = float(spec.step or 0.05)
    now = float(
        overrides().get("what_if.degraded_plane_factor", baseline.what_if.degraded_plane_factor)
    )
    row3[1].slider(
        "Degraded plane rate (fraction)",
        min_value=min(step, now),
        max_value=1.0,
        step=step,
        format="%.2f",
        **common("what_if.degraded_plane_factor"),
        help=_help(
            "what_if.degraded_plane_factor",
            "One healthy plane runs at this fraction of its rate (1 = healthy)",
            baseline,
        ),
    )
    row3[2].selectbox(
        "Switch down in one plane",
        list(field_spec("what_if.failed_switch").choices),
        **common("what_if.failed_switch"),
        format_func=lambda v: _SWITCH_LABELS.get(v, v),
        help=_help(
            "what_if.failed_switch",
            "One switch of one plane fails: its links leave that plane's bundles",
            baseline,
        ),
    )


# ---------------------------------------------------------------------- headline metrics

#: (label, metric key, format, lower is better) of the before/after cards.
_STEP_CARDS = (
    ("Step time", "step_time_s", "{:,.2f} s", True),
    ("MFU", "mfu", "{:.1%}", False),
    ("Tokens per second", "tokens_per_s", "{:,.0f}", False),
    ("Exposed communication", "exposed_comm_share", "{:.1%}", True),
)
_COLLECTIVE_CARDS = (
    ("All-reduce busbw, 1 GiB", "allreduce_busbw_GBps", "{:,.1f} GB/s", False),
    ("All-reduce time, 1 GiB", "allreduce_time_us", "{:,.0f} us", True),
    ("All-to-all busbw, 1 GiB", "alltoall_busbw_GBps", "{:,.1f} GB/s", False),
    ("All-to-all time, 1 GiB", "alltoall_time_us", "{:,.0f} us", True),
)
_CARD_HELP = {
    "step_time_s": "compute + pipeline bubble + exposed communication per optimizer step",
    "mfu": "model FLOPs (6N per token + attention) / (GPUs x dense BF16 peak x step time)",
    "tokens_per_s": "tokens per step / step time",
    "exposed_comm_share": "communication not hidden behind compute, as a share of the step",
    "allreduce_busbw_GBps": "NCCL-like algorithm choice, 1 GiB per GPU, as nccl-tests prints",
    "allreduce_time_us": "NCCL-like algorithm choice, 1 GiB per GPU",
    "alltoall_busbw_GBps": "NCCL-like algorithm choice, 1 GiB per GPU, as nccl-tests prints",
    "alltoall_time_us": "NCCL-like algorithm choice, 1 GiB per GPU",
}


def _fmt(fmt: str, value: float) -> str:
    return "n/a" if value != value else fmt.format(value)


def before_after_cards(result: WhatIf, which: str) -> None:
    """Draw one row of metrics (``which``: ``step`` or ``collectives``): after, delta, before.

    Without a change the value is the sidebar's; with an after state that cannot be modelled
    it reads n/a (the page's warning says why).
    """
    cards = _STEP_CARDS if which == "step" else _COLLECTIVE_CARDS
    before = result.before.values()
    after = result.after.values() if result.after is not None else None
    for col, (label, key, fmt, lower_better) in zip(st.columns(len(cards)), cards, strict=True):
        b = before[key]
        help_text = _CARD_HELP[key] + f". Before (sidebar): {_fmt(fmt, b)}."
        if result.combined is None:
            col.metric(label, _fmt(fmt, b), help=help_text)
            continue
        a = after[key] if after is not None else float("nan")
        delta = None
        if a == a and b == b:
            diff = a - b
            rel = f" ({diff / b:+.1%})" if b else ""
            delta = (
                f"{diff * 100:+.1f} pts" if "%" in fmt else fmt.replace("{:", "{:+").format(diff)
            ) + rel
        col.metric(
            label,
            _fmt(fmt, a),
            delta=delta,
            delta_color="inverse" if lower_better else "normal",
            help=help_text + " Shown: after all changes; the delta is after - before.",
        )
