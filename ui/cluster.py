"""Cluster page: the shared-cluster runs (cached at the UI edge), its URL state, its figures.

Every policy of the design's fabric runs the same generated job mix and failure draws
(:func:`fabric_model.run.cluster_sim.run_schedule`, the runs ``schedule --compare-policies``
makes: Slurm and Kueue placements on a switched fabric, slices of blocks on an OCS design);
the design's cluster (topology, Slurm grouping, bill) is built once per design. A second
fabric (pinned here or on the Compare page, an OCS design or a switched one) runs the same
trace: the jobs drawn for the sidebar's cluster. Figures are pure functions of the runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from fabric_model.run.cluster_sim import Cluster, generated_jobs, run_schedule
from fabric_model.run.placement import PLACEMENTS, policies_for
from fabric_model.scenario import Scenario
from ui import compare
from ui.cache_keys import scenario_cache
from ui.state import page_params, write_page_params
from ui.theme import BASE_LAYOUT, OKABE_ITO

__all__ = [
    "CONTROLS",
    "POLICY_LABELS",
    "PREFIX",
    "RUN_OPEN",
    "VIEW",
    "VS",
    "PolicyRun",
    "comparison_frame",
    "cost_figure",
    "default_view",
    "fabric_cost_figure",
    "occupancy_grid",
    "over_time_figure",
    "pin_fabric",
    "pinned_fabric",
    "policy_label",
    "read_url_once",
    "results_of",
    "run_policies",
    "second_fabric_runs",
    "server_timeline_figure",
    "slices_caption",
    "slowdown_cdf_figure",
    "summary_frame",
    "unpin_fabric",
    "view_options",
    "write_url",
]

#: URL parameters of the page: ``schedule.jobs``, ``schedule.days``, ``schedule.seed``,
#: ``schedule.view`` (the policy whose servers the timeline shows) and ``schedule.vs`` (the
#: second fabric, a pin as the Compare page writes one: ``<preset>~key=value~...``). The
#: results' section opens on demand: a shared link shows the controls, not a run.
PREFIX = "schedule."
RUN_OPEN = "cluster_run_open"
#: URL name -> (widget key, default, lowest, highest, step)
CONTROLS = {
    "jobs": ("cluster_jobs", 300, 50, 2000, 50),
    "days": ("cluster_days", 7, 1, 30, 1),
    "seed": ("cluster_seed", 0, 0, 10_000, 1),
}
#: Widget key of the timeline's policy (URL ``schedule.view``).
VIEW = "cluster_view"
#: Session key of the second fabric: (label, preset, scenario) or None (URL ``schedule.vs``).
VS = "cluster_vs"
_URL_READ = "cluster_url_read"
#: Time bins of the server timeline.
TIMELINE_BINS = 240
#: Rows of the server timeline at most: a larger cluster shows every k-th server.
TIMELINE_ROWS = 256

_COLORS = list(OKABE_ITO.values())
POLICY_LABELS = {
    "first-fit": "first-fit",
    "tree": "Slurm tree",
    "block": "Slurm block",
    "tas": "Kueue TAS",
    "ocs-slice": "OCS slice (the circuits' shape)",
    "ocs-any": "OCS slice (any blocks)",
    "ocs-box": "OCS slice (a box of blocks)",
}


def policy_label(policy: str) -> str:
    """Return a policy's display name (its registry name for one without a label)."""
    return POLICY_LABELS.get(policy, policy)


# ---------------------------------------------------------------------- URL and session


def read_url_once() -> None:
    """Give the controls their defaults, and on the first run in a session the URL's values.

    A bad value gets one ``st.error`` naming the parameter and what is allowed, and is
    ignored.
    """
    for key, default, *_ in CONTROLS.values():
        st.session_state.setdefault(key, default)
    st.session_state.setdefault(VIEW, None)
    st.session_state.setdefault(VS, None)
    if st.session_state.get(_URL_READ):
        return
    st.session_state[_URL_READ] = True
    params = page_params(PREFIX)
    for name, (key, _, lo, hi, step) in CONTROLS.items():
        raw = params.get(PREFIX + name)
        if raw is None:
            continue
        try:
            value = int(raw)
        except ValueError:
            value = None
        if value is None or not lo <= value <= hi or (value - lo) % step:
            st.error(
                f"{PREFIX}{name} = {raw!r}: must be an integer from {lo:,} to {hi:,}"
                + (f" in steps of {step}" if step > 1 else "")
                + "; ignored"
            )
            continue
        st.session_state[key] = value
    view = params.get(PREFIX + "view")
    if view is not None:
        if view in PLACEMENTS:
            st.session_state[VIEW] = view
        else:
            st.error(f"{PREFIX}view = {view!r}: one of {', '.join(PLACEMENTS)}; ignored")
    vs = params.get(PREFIX + "vs")
    if vs is not None:
        try:
            st.session_state[VS] = compare.decode_pin(vs)
        except ValueError as exc:
            st.error(
                f"{PREFIX}vs = {vs!r}: {exc}; ignored (e.g. dgx-h100-ib-ndr~cluster.n_gpus=2048)"
            )


def default_view(scenario: Scenario) -> str:
    """Return the timeline's default policy: ``ocs-slice`` on an OCS design, else ``tree``."""
    return "ocs-slice" if scenario.fabric.topology == "ocs" else "tree"


def view_options(runs: dict[str, PolicyRun], scenario: Scenario) -> list[str]:
    """Return the timeline's policies (the design's); a view it lacks becomes its default."""
    options = list(runs)
    if st.session_state.get(VIEW) not in options:
        default = default_view(scenario)
        st.session_state[VIEW] = default if default in options else options[0]
    return options


def write_url(scenario: Scenario) -> None:
    """Make the URL's ``schedule.*`` parameters the controls that differ from the defaults."""
    out = {}
    for name, (key, default, *_) in CONTROLS.items():
        value = int(st.session_state.get(key, default))
        if value != default:
            out[PREFIX + name] = str(value)
    view = st.session_state.get(VIEW)
    if view is not None and view != default_view(scenario):
        out[PREFIX + "view"] = str(view)
    pinned = pinned_fabric()
    if pinned is not None:
        label, preset, scenario = pinned
        out[PREFIX + "vs"] = compare.encode_pin(compare.Pin(0, label, preset, scenario))
    write_page_params(PREFIX, out)


def pinned_fabric() -> tuple[str, str, Scenario] | None:
    """Return the second fabric (label, preset, scenario), or None."""
    value = st.session_state.get(VS)
    return value if value else None


def pin_fabric(preset: str, scenario: Scenario) -> None:
    """Keep ``scenario`` as the second fabric (a button's callback)."""
    st.session_state[VS] = (compare.default_label(scenario), preset, scenario)


def unpin_fabric() -> None:
    """Drop the second fabric (a button's callback)."""
    st.session_state[VS] = None


# ---------------------------------------------------------------------- runs


@dataclass(frozen=True, eq=False)
class PolicyRun:
    """One policy's run: the ``schedule`` JSON object, its allocations and its timeline."""

    result: dict[str, Any]
    #: every allocation: [job index, start_h, end_h (nan while running), ((node, gpus), ...)]
    segments: list[list[Any]]
    #: rows (time_h, busy GPUs, queued jobs, free GPUs while the head waits, parts down)
    timeline: np.ndarray
    n_gpus: int
    n_nodes: int
    #: node -> Slurm block, or OCS block on an OCS design (the timeline's row groups)
    block_of: np.ndarray
    #: what :attr:`block_of` names
    block_label: str = "Slurm block"


@scenario_cache(4)
def _cluster(scenario: Scenario) -> Cluster:
    return Cluster.build(scenario)


def slices_caption(results: dict[str, dict[str, Any]]) -> str | None:
    """Describe an OCS design's slices for the page (None on a switched fabric)."""
    first = next(iter(results.values()))
    sl = first.get("slices")
    if not sl:
        return None
    how = "once (installed)" if sl["reconfigure"] == "never" else f"per {sl['reconfigure']}"
    return (
        f"Slices of {sl['blocks']} {sl['block']} blocks of {sl['block_gpus']:,} GPUs on a "
        f"{' x '.join(map(str, sl['grid_blocks']))} grid: a job larger than a block holds "
        f"whole blocks joined by circuits of its own ({sl['circuits']}, set {how}, "
        f"{sl['reconfig_ms']:g} ms), so no job slows another; its slowdown is its slice's "
        f"circuits against the same job on a non-blocking fabric. {sl['spare_blocks']} spare "
        "block(s) take failed blocks' places. Fragmentation by shape: the free GPUs while the "
        "head of the queue waits although as many are free as it asks for (no slice of a "
        "shape it can take)."
    )


@scenario_cache(16)
def run_policies(
    scenario: Scenario, n_jobs: int, days: float, seed: int, trace_gpus: int = 0
) -> dict[str, PolicyRun]:
    """Return each policy's run on the same generated jobs and failure draws.

    ``trace_gpus``: draw the jobs for a cluster of that many GPUs (the sidebar's, when this is
    the second fabric) instead of this design's own.

    Raises
    ------
    FabricModelError
        If the design cannot be built or a job of the trace cannot run on it.
    """
    cl = _cluster(scenario)
    lay = cl.layout
    jobs = generated_jobs(n_jobs, trace_gpus or lay.n_gpus, seed)
    out = {}
    if lay.ocs is not None:
        block_of = np.arange(lay.n_nodes) // lay.ocs.nodes_per_block
        label = "OCS block"
    else:
        block_of, label = lay.block_of, "Slurm block"
    for p in policies_for(lay):
        res = run_schedule(cl, jobs, p, days, seed)
        result = {**res.to_dict(), "seed": seed, "preempt": False, "policies": {p: res.summary}}
        out[p] = PolicyRun(
            result, res.segments, res.timeline, lay.n_gpus, lay.n_nodes, block_of, label
        )
    return out


def results_of(runs: dict[str, PolicyRun]) -> dict[str, dict[str, Any]]:
    """Each policy's ``schedule`` JSON object."""
    return {p: r.result for p, r in runs.items()}


def second_fabric_runs(
    pinned: tuple[str, str, Scenario], scenario: Scenario, n_jobs: int, days: float, seed: int
) -> dict[str, PolicyRun]:
    """Return the second fabric's runs of the sidebar's trace (see :func:`run_policies`)."""
    trace_gpus = scenario.cluster.n_gpus
    if pinned[2].cluster.n_gpus == trace_gpus:
        trace_gpus = 0  # its own draw is the same trace
    return run_policies(pinned[2], n_jobs, days, seed, trace_gpus)


# ---------------------------------------------------------------------- tables


def summary_frame(results: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """One row per policy: the run's headline numbers."""
    rows = []
    for p, r in results.items():
        rows.append(
            {
                "policy": policy_label(p),
                "utilization": r["utilization"],
                "goodput": r["goodput"],
                "mean wait (h)": r["mean_wait_h"],
                "p95 wait (h)": r["p95_wait_h"],
                "slowdown p95": r["slowdown_p95"],
                "fragmentation": r["fragmentation"],
                "fragmentation by shape": r["shape_fragmentation"],
                "interrupted jobs": r["interrupted_jobs"],
                "spare swaps": r["spare_swaps"],
                "useful GPU-h": r["useful_gpu_hours"],
                "$ per useful GPU-h": r["cost_per_useful_gpu_hour_usd"],
            }
        )
    return pd.DataFrame(rows)


def comparison_frame(fabrics: dict[str, dict[str, dict[str, Any]]]) -> pd.DataFrame:
    """One row per fabric and policy under the same trace: the numbers a buyer compares."""
    rows = []
    for label, results in fabrics.items():
        for p, r in results.items():
            rows.append(
                {
                    "fabric": label,
                    "policy": policy_label(p),
                    "utilization": r["utilization"],
                    "goodput": r["goodput"],
                    "p95 wait (h)": r["p95_wait_h"],
                    "slowdown p95": r["slowdown_p95"],
                    "fragmentation": r["fragmentation"],
                    "fragmentation by shape": r["shape_fragmentation"],
                    "useful GPU-h": r["useful_gpu_hours"],
                    "$ per useful GPU-h": r["cost_per_useful_gpu_hour_usd"],
                }
            )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------- figures


def slowdown_cdf_figure(results: dict[str, dict[str, Any]]) -> go.Figure:
    """Per policy, the CDF of the jobs' slowdown (step with neighbours / alone, contiguous)."""
    fig = go.Figure()
    for i, (p, r) in enumerate(results.items()):
        sd = np.sort([j["slowdown"] for j in r["jobs"] if j["slowdown"] is not None])
        if not sd.size:
            continue
        fig.add_trace(
            go.Scatter(
                x=sd,
                y=np.arange(1, sd.size + 1) / sd.size,
                mode="lines",
                line={"shape": "hv", "color": _COLORS[i % len(_COLORS)]},
                name=policy_label(p),
            )
        )
    fig.update_layout(
        BASE_LAYOUT,
        title={"text": "Job slowdown against the same job alone on contiguous nodes"},
        xaxis_title="slowdown (x)",
        yaxis_title="share of jobs",
    )
    return fig


def cost_figure(results: dict[str, dict[str, Any]]) -> go.Figure:
    """Per policy, the cost per useful GPU-hour."""
    names = [policy_label(p) for p in results]
    cost = [r["cost_per_useful_gpu_hour_usd"] for r in results.values()]
    fig = go.Figure(go.Bar(x=names, y=cost, marker_color=_COLORS[0]))
    fig.update_layout(
        BASE_LAYOUT,
        title={"text": "Cost per useful GPU-hour (the cluster's TCO over the horizon)"},
        yaxis_title="USD per useful GPU-hour",
    )
    return fig


def fabric_cost_figure(fabrics: dict[str, dict[str, dict[str, Any]]]) -> go.Figure:
    """Per policy, the cost per useful GPU-hour of each fabric under the same trace."""
    fig = go.Figure()
    for i, (label, results) in enumerate(fabrics.items()):
        fig.add_trace(
            go.Bar(
                x=[policy_label(p) for p in results],
                y=[r["cost_per_useful_gpu_hour_usd"] for r in results.values()],
                name=label,
                marker_color=_COLORS[i % len(_COLORS)],
            )
        )
    fig.update_layout(
        BASE_LAYOUT,
        barmode="group",
        title={"text": "Cost per useful GPU-hour, the same jobs on each fabric"},
        yaxis_title="USD per useful GPU-hour",
        legend={"orientation": "h", "y": -0.15},
    )
    return fig


def over_time_figure(runs: dict[str, PolicyRun], days: float) -> go.Figure:
    """Per policy over the horizon: utilisation, queued jobs, and fragmentation.

    Fragmentation: the free GPUs while the head of the queue waits, as a share of the GPUs
    (the summary's figure is its average over time).
    """
    fig = make_subplots(
        rows=3,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.06,
        subplot_titles=("GPUs busy", "jobs waiting", "GPUs free while the head job waits"),
    )
    horizon = days * 24.0
    for i, (p, run) in enumerate(runs.items()):
        tl = run.timeline
        t = np.r_[0.0, tl[:, 0], horizon]
        color = _COLORS[i % len(_COLORS)]
        for row, col, scale in ((1, 1, run.n_gpus), (2, 2, 1.0), (3, 3, run.n_gpus)):
            y = np.r_[0.0, tl[:, col], tl[-1, col] if tl.size else 0.0] / scale
            fig.add_trace(
                go.Scatter(
                    x=t,
                    y=y,
                    mode="lines",
                    line={"shape": "hv", "color": color, "width": 1.5},
                    name=policy_label(p),
                    legendgroup=p,
                    showlegend=row == 1,
                ),
                row=row,
                col=1,
            )
    fig.update_layout(
        BASE_LAYOUT,
        height=620,
        title={"text": "Utilisation, queue and fragmentation over time"},
        legend={"orientation": "h", "y": -0.08},
    )
    fig.update_yaxes(tickformat=".0%", row=1, col=1)
    fig.update_yaxes(tickformat=".0%", row=3, col=1)
    fig.update_xaxes(title_text="hours", row=3, col=1)
    return fig


def timeline_step(n_nodes: int) -> int:
    """Return k: the server timeline shows every k-th server (all up to TIMELINE_ROWS)."""
    return -(-n_nodes // TIMELINE_ROWS)


def occupancy_grid(run: PolicyRun, days: float, bins: int = TIMELINE_BINS) -> np.ndarray:
    """Which job holds each shown server in each time bin: (rows, bins) job indices, nan idle.

    Rows are every :func:`timeline_step`-th server. A server shared by several small jobs
    shows the one placed last.
    """
    horizon = days * 24.0
    step = timeline_step(run.n_nodes)
    grid = np.full((run.n_nodes, bins), np.nan)
    width = horizon / bins
    for job, start, end, slots in run.segments:
        stop = horizon if np.isnan(end) else end
        b0 = int(start // width)
        b1 = max(b0 + 1, int(np.ceil(stop / width)))
        nodes = [n for n, _ in slots]
        grid[nodes, b0 : min(b1, bins)] = job
    return grid[::step]


def server_timeline_figure(run: PolicyRun, days: float, policy: str) -> go.Figure:
    """Each server over time coloured by the job that holds it, rows grouped by block."""
    grid = occupancy_grid(run, days)
    step = timeline_step(run.n_nodes)
    rows = np.arange(0, run.n_nodes, step)
    n_jobs = max(1, len(run.result["jobs"]))
    # a stepped scale: job i gets colour i mod the palette (neighbours differ)
    scale = []
    for i in range(n_jobs):
        c = _COLORS[i % len(_COLORS)]
        scale += [[i / n_jobs, c], [(i + 1) / n_jobs, c]]
    width = days * 24.0 / grid.shape[1]
    fig = go.Figure(
        go.Heatmap(
            z=grid.astype(np.float32),  # job indices, exact; half the page's bytes
            x=(np.arange(grid.shape[1]) + 0.5) * width,
            y=rows,
            zmin=-0.5,
            zmax=n_jobs - 0.5,
            colorscale=scale,
            showscale=False,
            hovertemplate="server %{y}<br>%{x:.1f} h<br>job index %{z}<extra></extra>",
        )
    )
    # block boundaries as lines, at most 64 of them, and at most 32 labelled blocks
    blocks = np.unique(run.block_of)
    edges = np.flatnonzero(np.diff(run.block_of)) + 0.5
    edges = edges[:: -(-edges.size // 64)] if edges.size else edges
    labelled = blocks[:: -(-blocks.size // 32)]
    mids = [float(np.flatnonzero(run.block_of == b).mean()) for b in labelled.tolist()]
    line = {"color": "rgba(0,0,0,0.35)", "width": 1}
    shapes = [
        {"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": e, "y1": e, "line": line}
        for e in edges.tolist()
    ]
    fig.update_layout(
        BASE_LAYOUT,
        shapes=shapes,
        height=min(900, 260 + 2 * rows.size),
        title={
            "text": f"Which job holds each server over time ({policy_label(policy)})"
            + (f", one server in {step}" if step > 1 else "")
        },
        xaxis_title="hours",
        yaxis={
            "title": f"server, by {run.block_label}",
            "tickvals": mids,
            "ticktext": [f"block {b}" for b in labelled.tolist()],
            "autorange": "reversed",
        },
    )
    return fig
