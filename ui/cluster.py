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
from ui.cache_keys import SCENARIO_HASH
from ui.theme import BASE_LAYOUT, OKABE_ITO

__all__ = ["POLICY_LABELS", "cost_figure", "run_policies", "slowdown_cdf_figure", "summary_frame"]

_COLORS = list(OKABE_ITO.values())
POLICY_LABELS = {
    "first-fit": "first-fit",
    "tree": "Slurm tree",
    "block": "Slurm block",
    "tas": "Kueue TAS",
}


@st.cache_resource(max_entries=4, show_spinner=False, hash_funcs=SCENARIO_HASH)
def _cluster(scenario: Scenario) -> Cluster:
    return Cluster.build(scenario)


@st.cache_resource(
    max_entries=16, show_spinner="Simulating the job mix ...", hash_funcs=SCENARIO_HASH
)
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
