"""Max-min fair flow solver: flows on directed links, rates by progressive filling."""

from __future__ import annotations

from fabric_model.flows.solver import FlowSet, FlowSolution, flowset_from_paths, solve_maxmin

__all__ = ["FlowSet", "FlowSolution", "flowset_from_paths", "solve_maxmin"]
