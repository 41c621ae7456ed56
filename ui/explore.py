"""Explore page: the design set, its URL form, the cached evaluations, the Pareto chart.

The design set is a value list per dimension (:data:`DIMENSIONS`) plus the plan-search switch;
every combination, on top of the sidebar's scenario, is a design
(:func:`fabric_model.run.explore.design_grid`). In the URL each dimension is one parameter,
``ex.<key>=<v1>~<v2>`` (``ex.fabric.vendor=infiniband~roce``), and ``ex.plan_search=true``;
they are read on the page's first run in a session, a bad one gets one ``st.error`` naming
it and is ignored. Each design is evaluated once per process
(:func:`fabric_model.run.explore.evaluate_design`, cached here at the UI edge).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from fabric_model.catalog import load_catalog
from fabric_model.errors import FabricModelError, shown_value
from fabric_model.families import FAMILIES
from fabric_model.run.explore import (
    EXTRAS,
    NUMBERS,
    DesignTask,
    Dimension,
    Sensitivity,
    design_grid,
    design_scenario,
    evaluate_design,
    pareto_flags,
    parse_vary,
    sensitivity,
)
from fabric_model.scenario import Scenario, field_spec
from ui import facade
from ui.cache_keys import scenario_cache
from ui.state import (
    apply_scenario,
    cli_command,
    page_params,
    shown_name,
    url_value,
    write_page_params,
)
from ui.theme import BASE_LAYOUT, OKABE_ITO, TOPOLOGY_LABELS, VENDOR_COLORS, VENDOR_LABELS

__all__ = [
    "DIMENSIONS",
    "MAX_PAGE_DESIGNS",
    "PREFIX",
    "SKIPPED_REASON",
    "TOPOLOGY_SYMBOLS",
    "controls",
    "current_run",
    "cut_short_command",
    "design_label",
    "designs_frame",
    "dimensions",
    "evaluate",
    "fmt",
    "load_buttons",
    "mark_pareto",
    "n_designs",
    "options",
    "pareto_figure",
    "parse_params",
    "plan_search_on",
    "read_url_once",
    "sensitivity_cached",
    "tornado_figure",
    "url_params",
    "write_url",
]

PREFIX = "ex."
_PLAN = "plan_search"
#: The dimensions the page offers, with their labels, in display order.
DIMENSIONS = {
    "fabric.topology": "Topology",
    "fabric.vendor": "Vendor",
    "fabric.link_gbps": "Link speed",
    "fabric.oversubscription": "Leaf oversubscription",
    "cluster.nics_per_gpu": "NICs per GPU",
    "fabric.switch": "Switch",
    "cluster.gpu": "GPU",
}
#: The most designs the page evaluates (the command line goes to 10,000, on Dask).
MAX_PAGE_DESIGNS = 200
#: One marker symbol per topology (colour is the vendor's).
TOPOLOGY_SYMBOLS = {n: f.marker for n, f in FAMILIES.items()}
_SEL = "ex_selection"  # plain session keys: they survive page switches
_PLAN_ON = "ex_plan_search"
_URL_READ = "ex_url_read"
_W = "ex:"  # widget key prefix
_SEP = "~"
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def options(key: str) -> list[Any]:
    """Return the values offered for a dimension (the key table's, or the catalog's)."""
    if key == "fabric.switch":
        return ["auto", *load_catalog().switches]
    if key == "cluster.gpu":
        return list(load_catalog().gpus)
    if key == "fabric.oversubscription":
        return [1.0, 1.5, 2.0, 3.0, 4.0]
    if key == "cluster.nics_per_gpu":
        return [1, 2]
    return list(field_spec(key).choices)


def _format(key: str, value: Any) -> str:
    if key == "fabric.vendor":
        return VENDOR_LABELS.get(value, value)
    if key == "fabric.topology":
        return TOPOLOGY_LABELS.get(value, value)
    if key == "fabric.link_gbps":
        return f"{value}G"
    if key == "fabric.oversubscription":
        return f"{value:g}:1"
    if key == "cluster.nics_per_gpu":
        return f"{value} NIC{'s' * (value != 1)}/GPU"
    if key == "cluster.gpu":
        return str(value).upper()
    return str(value)


def design_label(keys: Mapping[str, Any]) -> str:
    """Return a short label of a design's varied values, e.g. ``RoCE (ECMP) · 400G``."""
    return " · ".join(_format(k, v) for k, v in keys.items()) or "the sidebar's design"


# ----------------------------------------------------------------------- URL and state


def parse_params(params: Mapping[str, str]) -> tuple[dict[str, list[Any]], bool, list[str]]:
    """Read ``ex.*`` URL parameters: the selection, plan search, and one error per bad one."""
    selection: dict[str, list[Any]] = {}
    errors: list[str] = []
    plan = False
    for name, raw in params.items():
        key = name.removeprefix(PREFIX)
        if key == _PLAN:
            word = raw.strip().lower()
            if word not in _TRUE + _FALSE:
                errors.append(
                    f"URL parameter {name} = {shown_value(raw)}: must be true or false - "
                    "ignored, plan search stays off"
                )
            plan = word in _TRUE
            continue
        if key not in DIMENSIONS:
            errors.append(
                f"URL parameter {shown_name(name)}: not a dimension of this page (allowed: "
                + ", ".join(PREFIX + k for k in DIMENSIONS)
                + ") - ignored"
            )
            continue
        try:
            dim = parse_vary(f"{key}={','.join(raw.split(_SEP))}")
        except FabricModelError as exc:
            errors.append(f"URL parameter {PREFIX}{exc} - ignored")
            continue
        allowed = options(key)
        bad = [v for v in dim.values if v not in allowed]
        if bad:
            errors.append(
                f"URL parameter {name} = {shown_value(raw)}: {shown_value(bad[0])} is not "
                "offered (allowed: " + ", ".join(url_value(v) for v in allowed) + ") - ignored"
            )
            continue
        selection[key] = list(dim.values)
    return selection, plan, errors


def url_params(selection: Mapping[str, Sequence[Any]], plan: bool) -> dict[str, str]:
    """Return the ``ex.*`` parameters of a design set (none for an empty one)."""
    out = {
        PREFIX + k: _SEP.join(url_value(v) for v in selection[k])
        for k in DIMENSIONS
        if selection.get(k)
    }
    if plan:
        out[PREFIX + _PLAN] = "true"
    return out


def read_url_once() -> None:
    """On the page's first run in a session, take the design set from the URL."""
    if st.session_state.get(_URL_READ):
        return
    st.session_state[_URL_READ] = True
    selection, plan, errors = parse_params(page_params(PREFIX))
    st.session_state[_SEL] = selection
    st.session_state[_PLAN_ON] = plan
    for message in errors:
        st.error(message)


def write_url() -> None:
    """Make the URL's ``ex.*`` parameters the current design set."""
    write_page_params(PREFIX, url_params(st.session_state[_SEL], st.session_state[_PLAN_ON]))


def _on_change(key: str) -> None:
    st.session_state[_SEL][key] = list(st.session_state[_W + key])


def _on_plan() -> None:
    st.session_state[_PLAN_ON] = bool(st.session_state[_W + _PLAN])


def controls() -> None:
    """One multiselect per dimension and the plan-search toggle."""
    selection = st.session_state[_SEL]
    cols = st.columns(4)
    for i, (key, label) in enumerate(DIMENSIONS.items()):
        st.session_state[_W + key] = list(selection.get(key, []))
        cols[i % 4].multiselect(
            label,
            options(key),
            key=_W + key,
            on_change=_on_change,
            args=(key,),
            format_func=lambda v, k=key: _format(k, v),
            placeholder="the sidebar's",
            help=f"{field_spec(key).help}; no value = the sidebar's",
        )
    st.session_state[_W + _PLAN] = st.session_state[_PLAN_ON]
    cols[len(DIMENSIONS) % 4].toggle(
        "Best plan per design",
        key=_W + _PLAN,
        on_change=_on_plan,
        help="search TP/PP/CP/EP, interleaving, recomputation and micro-batch for each design's "
        "fastest plan that fits (slower); off = the sidebar's plan for every design",
    )


def dimensions() -> list[Dimension]:
    """Return the selected dimensions (in display order)."""
    selection = st.session_state[_SEL]
    return [Dimension(k, tuple(selection[k])) for k in DIMENSIONS if selection.get(k)]


def plan_search_on() -> bool:
    """Whether each design gets its best plan."""
    return bool(st.session_state[_PLAN_ON])


def n_designs(dims: Sequence[Dimension]) -> int:
    """Return how many designs the selection makes."""
    return math.prod(len(d.values) for d in dims)


# ------------------------------------------------------------------------- evaluation


class _CutShortError(Exception):
    """Carries a design whose plan search ran out of time out of the cache (never cached)."""

    def __init__(self, design: dict[str, Any]) -> None:
        super().__init__("plan search cut short")
        self.design = design


@scenario_cache(4096)
def _evaluate_cached_full(
    base: Scenario,
    overrides: tuple[tuple[str, Any], ...],
    plan: bool,
    _deadline: float | None = None,
) -> dict[str, Any]:
    design = evaluate_design(DesignTask(base, dict(overrides), plan), deadline=_deadline)
    if design.get("cut_short"):
        raise _CutShortError(design)
    return design


def _evaluate_cached(
    base: Scenario,
    overrides: tuple[tuple[str, Any], ...],
    plan: bool,
    deadline: float | None = None,
) -> dict[str, Any]:
    try:
        return _evaluate_cached_full(base, overrides, plan, deadline)
    except _CutShortError as cut:
        return cut.design


#: The reason of a design the page's time budget left unmodelled.
SKIPPED_REASON = "not modelled: the page's time budget ran out before this design"


def _skipped(overrides: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"keys": dict(overrides), "feasible": False, "reason": SKIPPED_REASON}
    out.update(dict.fromkeys((*NUMBERS, *EXTRAS)))
    return {**out, "plan": None, "pareto": False, "cut_short": True}


def current_run(base: Scenario) -> dict[str, Any]:
    """Return the sidebar's design as a run (its own plan)."""
    return dict(_evaluate_cached(base, (), False))


def fmt(value: float | None, pattern: str, scale: float = 1.0) -> str:
    """Format a design's number for a metric (a dash when the design has none)."""
    return "—" if value is None else pattern.format(value * scale)


def evaluate(
    base: Scenario, dims: Sequence[Dimension], plan: bool, budget_s: float | None = None
) -> list[dict[str, Any]]:
    """Evaluate every design of the grid with a progress bar; Pareto flags marked.

    Within ``budget_s`` seconds (default: the facade's ``COMPUTE_BUDGET_S``): no design
    starts, and no plan search goes on, after it; those designs come back with
    ``cut_short`` (:data:`SKIPPED_REASON`, or the best plan found so far).
    """
    grid = design_grid(dims, MAX_PAGE_DESIGNS)
    what = "designs, each with a plan search" if plan else "designs"
    bar = st.progress(0.0, text=f"Modelling {len(grid)} {what} ...")
    deadline = time.monotonic() + (facade.COMPUTE_BUDGET_S if budget_s is None else budget_s)
    designs = []
    for i, over in enumerate(grid):
        if time.monotonic() >= deadline:
            designs.append(_skipped(over))
            continue
        designs.append(dict(_evaluate_cached(base, tuple(over.items()), plan, deadline)))
        bar.progress((i + 1) / len(grid), text=f"Modelled {i + 1} of {len(grid)} {what}")
    bar.empty()
    return mark_pareto(designs)


def cut_short_command(base: Scenario, dims: Sequence[Dimension], plan: bool) -> str:
    """Return the ``explore`` command line of the whole design set (for a cut-short page)."""
    args = [i for d in dims for i in ("--vary", f"{d.key}={','.join(map(url_value, d.values))}")]
    preset = st.session_state["scenario_state"].preset
    return cli_command("explore", preset, base, *args, *(["--plan-search"] if plan else []))


def mark_pareto(designs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Set each design's ``pareto`` flag (time to train vs cost per run)."""
    points = [
        (d["time_to_train_days"], d["cost_per_run_usd"]) if d["feasible"] else None for d in designs
    ]
    for d, flag in zip(designs, pareto_flags(points), strict=True):
        d["pareto"] = flag
    return designs


# ---------------------------------------------------------------------------- figures


def _value(design: Mapping[str, Any], base: Scenario, key: str) -> Any:
    return design["keys"].get(key, base.get(key))


def pareto_figure(designs: Sequence[Mapping[str, Any]], base: Scenario) -> go.Figure:
    """Time to train against cost per run: colour = vendor, symbol = topology, the front joined.

    Infeasible designs are not drawn (the table lists them with the reason).
    """
    fig = go.Figure()
    feasible = [(i, d) for i, d in enumerate(designs) if d["feasible"]]
    groups: dict[tuple[str, str], list[tuple[int, Mapping[str, Any]]]] = {}
    for i, d in feasible:
        vendor = _value(d, base, "fabric.vendor")
        topo = _value(d, base, "fabric.topology")
        groups.setdefault((vendor, topo), []).append((i, d))
    front = sorted(
        (d for _, d in feasible if d["pareto"]),
        key=lambda d: (d["time_to_train_days"], d["cost_per_run_usd"]),
    )
    if front:
        fig.add_trace(
            go.Scatter(
                x=[d["time_to_train_days"] for d in front],
                y=[d["cost_per_run_usd"] / 1e6 for d in front],
                mode="lines",
                line={"color": OKABE_ITO["grey"], "width": 2, "dash": "dot", "shape": "hv"},
                name="Pareto front",
                hoverinfo="skip",
            )
        )
    for (vendor, topo), members in groups.items():
        fig.add_trace(
            go.Scatter(
                x=[d["time_to_train_days"] for _, d in members],
                y=[d["cost_per_run_usd"] / 1e6 for _, d in members],
                mode="markers",
                name=f"{VENDOR_LABELS.get(vendor, vendor)} · {TOPOLOGY_LABELS.get(topo, topo)}",
                marker={
                    "color": VENDOR_COLORS.get(vendor, OKABE_ITO["grey"]),
                    "symbol": TOPOLOGY_SYMBOLS.get(topo, "circle"),
                    "size": [15 if d["pareto"] else 10 for _, d in members],
                    "line": {
                        "width": [2 if d["pareto"] else 0 for _, d in members],
                        "color": "#333333",
                    },
                },
                customdata=[
                    [
                        f"#{i + 1} {design_label(d['keys'])}",
                        d["goodput"],
                        d["mfu"],
                        d["interruptions_per_day"],
                        d["usd_per_million_tokens"],
                        d["plan"] or "",
                        "on the Pareto front" if d["pareto"] else "",
                    ]
                    for i, d in members
                ],
                hovertemplate=(
                    "%{customdata[0]}<br>time to train %{x:,.1f} days<br>cost per run "
                    "$%{y:,.2f} M (%{customdata[4]:$.3f} per M tokens)<br>goodput "
                    "%{customdata[1]:.1%}, MFU %{customdata[2]:.1%}, %{customdata[3]:.2f} "
                    "interruptions/day<br>plan %{customdata[5]}<br>%{customdata[6]}"
                    "<extra></extra>"
                ),
            )
        )
    tokens = base.training.total_tokens
    fig.update_layout(
        **BASE_LAYOUT,
        title=(
            f"Time to train vs cost per run: {len(front)} of {len(designs)} designs on the "
            f"Pareto front ({tokens / 1e12:,.1f} T tokens)"
        ),
        xaxis_title="time to train (days, with failures and checkpoints)",
        yaxis_title="cost per run (USD millions)",
        legend_title_text="vendor · topology",
        height=520,
    )
    return fig


@scenario_cache(64)
def sensitivity_cached(base: Scenario) -> list[Sensitivity]:
    """Return the cost-per-run sensitivity of the sidebar's design (cached)."""
    return sensitivity(base)


def _fmt_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}"
    return str(value)


def tornado_figure(rows: Sequence[Sensitivity], base_cost_usd: float) -> go.Figure:
    """Cost per run with each assumption at the low and the high end of its range.

    Bars start at the design's own cost; the widest swing is on top.
    """
    shown = list(reversed(rows))  # plotly draws the first category at the bottom
    labels = [f"{r.label} ({r.range_text})" for r in shown]
    fig = go.Figure()
    for end, color in (("low", OKABE_ITO["sky"]), ("high", OKABE_ITO["vermillion"])):
        values = [getattr(r, f"{end}_usd") for r in shown]
        fig.add_trace(
            go.Bar(
                y=labels,
                x=[(v - base_cost_usd) / 1e6 if v is not None else None for v in values],
                base=base_cost_usd / 1e6,
                orientation="h",
                name=f"{end} end of the range",
                marker_color=color,
                customdata=[
                    [
                        _fmt_value(getattr(r, f"{end}_value")),
                        "cannot train" if v is None else f"${v / 1e6:,.2f} M",
                    ]
                    for r, v in zip(shown, values, strict=True)
                ],
                hovertemplate=(
                    "%{y}<br>value %{customdata[0]}: cost per run %{customdata[1]}<extra></extra>"
                ),
            )
        )
    fig.update_layout(
        **BASE_LAYOUT,
        barmode="overlay",
        title=f"What moves the cost per run (${base_cost_usd / 1e6:,.2f} M for this design)",
        xaxis_title="cost per run (USD millions)",
        height=110 + 42 * len(rows),
        legend={"orientation": "h", "y": -0.2},
    )
    fig.update_yaxes(automargin=True)
    return fig


def designs_frame(designs: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Return one row per design: its values, numbers, fabric shape, feasibility and reason.

    The shape (switch, radix, pod size, limit) shows a vendor change that swaps the radix.
    """
    keys: list[str] = []
    for d in designs:
        keys += [k for k in d["keys"] if k not in keys]
    rows = []
    for i, d in enumerate(designs):
        row: dict[str, Any] = {"#": i + 1}
        row.update({k: d["keys"].get(k) for k in keys})
        row.update(
            pareto=d["pareto"],
            feasible=d["feasible"],
            time_to_train_days=d["time_to_train_days"],
            cost_per_run_usd=d["cost_per_run_usd"],
            usd_per_million_tokens=d["usd_per_million_tokens"],
            goodput=d["goodput"],
            mfu=d["mfu"],
            interruptions_per_day=d["interruptions_per_day"],
            step_time_s=d["step_time_s"],
            tokens_per_s=d["tokens_per_s"],
            network_capex_usd=d["network_capex_usd"],
            cluster_capex_usd=d["cluster_capex_usd"],
            tco_usd=d["tco_usd"],
            switch=d.get("switch"),
            switch_radix=d.get("switch_radix"),
            pod_nics=d.get("pod_nics"),
            limit=d.get("limit"),
            plan=d["plan"],
            reason=d["reason"] or "",
        )
        rows.append(row)
    return pd.DataFrame(rows)


_LOAD_ERROR = "ex_load_error"


def _on_load(base: Scenario, overrides: tuple[tuple[str, Any], ...]) -> None:
    try:
        apply_scenario(design_scenario(base, dict(overrides)))
    except FabricModelError as exc:
        st.session_state[_LOAD_ERROR] = f"This design cannot be loaded: {exc}"


def load_buttons(designs: Sequence[Mapping[str, Any]], base: Scenario) -> None:
    """Draw a button per design that makes it the sidebar's scenario (and so the URL's)."""
    message = st.session_state.pop(_LOAD_ERROR, None)
    if message:
        st.warning(message)
    cols = st.columns(4)
    for i, d in enumerate(designs):
        cols[i % 4].button(
            f"Load #{i + 1}" + (" ★" if d["pareto"] else ""),
            key=f"ex_load_{i}",
            on_click=_on_load,
            args=(base, tuple(d["keys"].items())),
            help=f"{design_label(d['keys'])}: make it the sidebar's design",
            disabled=not d["keys"],
            width="stretch",
        )
