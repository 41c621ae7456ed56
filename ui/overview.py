"""The Overview page's figures and table, cached per scenario.

A slider move mostly goes back to a size some session has drawn before; rebuilding its
plotly figures (``update_layout`` validation, ~20 ms each) was a quarter of the rerun. The
figures are built once per scenario and shared across sessions (``st.cache_resource``: no
pickled copies); nothing mutates them after they are built (``st.plotly_chart`` and the
export buttons only read them).
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from fabric_model.report.summaries import step_headline
from fabric_model.scenario import Scenario
from ui import facade
from ui.cache_keys import scenario_cache
from ui.collective_figures import busbw_curve_figure
from ui.cost_figures import vendor_summary_frame
from ui.training_figures import step_share_figure

__all__ = ["allreduce_curve_chart", "step_share_chart", "vendor_frame"]


@scenario_cache(64)
def step_share_chart(scenario: Scenario) -> go.Figure:
    """Draw where the training step goes, as one bar (needs a feasible step)."""
    step = facade.training_step(scenario)
    head = step_headline(step)
    split = f": {head.fabric_split}" if head is not None else ""
    return step_share_figure(step, f"Where the {step.step_time_s:,.2f} s step goes{split}")


@scenario_cache(64)
def allreduce_curve_chart(scenario: Scenario) -> go.Figure:
    """Draw the all-reduce bus bandwidth against message size."""
    summary = facade.collective_summary(scenario)
    return busbw_curve_figure(
        summary.allreduce_curve,
        f"All-reduce across {scenario.cluster.n_gpus:,} GPUs (NCCL-like algorithm choice)",
    )


@scenario_cache(64)
def vendor_frame(scenario: Scenario) -> pd.DataFrame:
    """Price the design on each vendor, one row each (shared: read it, do not edit it)."""
    return vendor_summary_frame(facade.vendor_comparison(scenario))
