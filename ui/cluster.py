"""Cluster page: the shared-cluster runs (cached at the UI edge) and their figures.

Every policy runs the same generated job mix and failure draws
(:func:`fabric_model.run.cluster_sim.schedule`); the design's cluster (topology, Slurm
grouping, bill) is built once per design. Figures are pure functions of the results.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from fabric_model.run.cluster_sim import Cluster, schedule
from fabric_model.run.placement import POLICIES
from fabric_model.scenario import Scenario
from ui.cache_keys import scenario_cache
from ui.state import page_params, write_page_params
from ui.theme import BASE_LAYOUT, OKABE_ITO

__all__ = [
    "CONTROLS",
    "POLICY_LABELS",
    "PREFIX",
    "RUN_OPEN",
    "cost_figure",
    "read_url_once",
    "run_policies",
    "slowdown_cdf_figure",
    "summary_frame",
    "write_url",
]

#: URL parameters of the page: ``schedule.jobs``, ``schedule.days``, ``schedule.seed`` (the
#: results' section opens on demand: a shared link shows the controls, not a run).
PREFIX = "schedule."
RUN_OPEN = "cluster_run_open"
#: URL name -> (widget key, default, lowest, highest, step)
CONTROLS = {
    "jobs": ("cluster_jobs", 300, 50, 2000, 50),
    "days": ("cluster_days", 7, 1, 30, 1),
    "seed": ("cluster_seed", 0, 0, 10_000, 1),
}
_URL_READ = "cluster_url_read"


def read_url_once() -> None:
    """Give the controls their defaults, and on the first run in a session the URL's values.

    A bad value gets one ``st.error`` naming the parameter and its range, and is ignored.
    """
    for key, default, *_ in CONTROLS.values():
        st.session_state.setdefault(key, default)
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


def write_url() -> None:
    """Make the URL's ``schedule.*`` parameters the controls that differ from the defaults."""
    out = {}
    for name, (key, default, *_) in CONTROLS.items():
        value = int(st.session_state.get(key, default))
        if value != default:
            out[PREFIX + name] = str(value)
    write_page_params(PREFIX, out)


_COLORS = list(OKABE_ITO.values())
POLICY_LABELS = {
    "first-fit": "first-fit",
    "tree": "Slurm tree",
    "block": "Slurm block",
    "tas": "Kueue TAS",
}


@scenario_cache(4)
def _cluster(scenario: Scenario) -> Cluster:
    return Cluster.build(scenario)


@scenario_cache(16)
def run_policies(
    scenario: Scenario, n_jobs: int, days: float, seed: int
) -> dict[str, dict[str, Any]]:
    """Return each policy's ``schedule`` result on the same generated jobs and failures."""
    cl = _cluster(scenario)
    return {
        p: schedule(scenario, generate=n_jobs, policy=p, days=days, seed=seed, cluster=cl)
        for p in POLICIES
    }


def summary_frame(results: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """One row per policy: the run's headline numbers."""
    rows = []
    for p, r in results.items():
        rows.append(
            {
                "policy": POLICY_LABELS[p],
                "utilization": r["utilization"],
                "goodput": r["goodput"],
                "mean wait (h)": r["mean_wait_h"],
                "p95 wait (h)": r["p95_wait_h"],
                "slowdown p95": r["slowdown_p95"],
                "fragmentation": r["fragmentation"],
                "interrupted jobs": r["interrupted_jobs"],
                "useful GPU-h": r["useful_gpu_hours"],
                "$ per useful GPU-h": r["cost_per_useful_gpu_hour_usd"],
            }
        )
    return pd.DataFrame(rows)


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
                name=POLICY_LABELS[p],
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
    names = [POLICY_LABELS[p] for p in results]
    cost = [r["cost_per_useful_gpu_hour_usd"] for r in results.values()]
    fig = go.Figure(go.Bar(x=names, y=cost, marker_color=_COLORS[0]))
    fig.update_layout(
        BASE_LAYOUT,
        title={"text": "Cost per useful GPU-hour (the cluster's TCO over the horizon)"},
        yaxis_title="USD per useful GPU-hour",
    )
    return fig
