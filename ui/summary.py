"""Cached headline numbers for the Overview page (one call, one cache entry per scenario)."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from fabric_model.collectives import CollectiveTime, collective
from fabric_model.errors import FabricModelError
from fabric_model.scenario import Scenario

__all__ = ["CollectiveSummary", "collective_summary", "SUMMARY_SIZES"]

#: Message sizes the Overview quotes: a latency-bound and a bandwidth-bound call.
SUMMARY_SIZES = (2**20, 2**30)
#: The Overview's curve: 8 B to 16 GiB, powers of four.
CURVE_SIZES = tuple(2**i for i in range(3, 35, 2))


@dataclass(frozen=True)
class CollectiveSummary:
    """All-reduce and all-to-all at the summary sizes, or why they could not be computed."""

    allreduce: tuple[CollectiveTime, ...]
    alltoall: tuple[CollectiveTime, ...]
    alltoall_error: str | None
    allreduce_curve: tuple[CollectiveTime, ...]


@st.cache_resource(max_entries=64, show_spinner=False)
def collective_summary(scenario: Scenario) -> CollectiveSummary:
    """NCCL-like ``auto`` all-reduce and all-to-all at 1 MiB and 1 GiB."""
    allreduce = tuple(collective(scenario, "allreduce", "auto", SUMMARY_SIZES))
    try:
        a2a: tuple[CollectiveTime, ...] = tuple(
            collective(scenario, "alltoall", "auto", SUMMARY_SIZES))
        error = None
    except FabricModelError as exc:
        a2a, error = (), str(exc)
    curve = tuple(collective(scenario, "allreduce", "auto", CURVE_SIZES))
    return CollectiveSummary(allreduce, a2a, error, curve)
