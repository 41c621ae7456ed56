"""Slow, readable twins of the kernels in :mod:`._kernels`, written for clarity.

Same arguments, same outputs, same rules; no incremental bookkeeping. Every round recomputes
the per-link quantities from scratch, which costs O(nnz) per round but leaves little room
for a bug. Tests hold each kernel equal to its twin on many seeded instances.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fabric_model.flows._tolerance import REL_TOL

__all__ = ["first_flow_with_duplicate_link", "maxmin_fill"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.integer]
BoolArray = npt.NDArray[np.bool_]


def first_flow_with_duplicate_link(
    flow_link_indptr: IntArray, flow_link_indices: IntArray, n_links: int
) -> int:
    """Return the first flow that lists some link twice, or -1 if none does."""
    del n_links  # the kernel needs it to size a marker array; a set does not
    for f in range(len(flow_link_indptr) - 1):
        links = flow_link_indices[flow_link_indptr[f] : flow_link_indptr[f + 1]].tolist()
        if len(set(links)) != len(links):
            return f
    return -1


def _link_fill_levels(
    entry_flow: IntArray,
    flow_link_indices: IntArray,
    flow_link_weights: FloatArray,
    link_capacity_Bps: FloatArray,
    rate_Bps: FloatArray,
    frozen: BoolArray,
) -> FloatArray:
    """Level at which each link would saturate if all unfrozen flows grew together, bytes/s.

    ``(c_l - load of frozen flows on l) / (summed weight of unfrozen flows on l)``; ``inf``
    for links that carry no unfrozen flow.
    """
    n_links = len(link_capacity_Bps)
    entry_frozen = frozen[entry_flow]
    frozen_load_Bps = np.bincount(
        flow_link_indices[entry_frozen],
        weights=flow_link_weights[entry_frozen] * rate_Bps[entry_flow[entry_frozen]],
        minlength=n_links,
    )
    unfrozen_weight = np.bincount(
        flow_link_indices[~entry_frozen],
        weights=flow_link_weights[~entry_frozen],
        minlength=n_links,
    )
    fill_level_Bps = np.full(n_links, np.inf)
    carries_unfrozen = np.bincount(flow_link_indices[~entry_frozen], minlength=n_links) > 0
    fill_level_Bps[carries_unfrozen] = (
        link_capacity_Bps[carries_unfrozen] - frozen_load_Bps[carries_unfrozen]
    ) / unfrozen_weight[carries_unfrozen]
    return fill_level_Bps


def maxmin_fill(
    flow_link_indptr: IntArray,
    flow_link_indices: IntArray,
    flow_link_weights: FloatArray,
    link_capacity_Bps: FloatArray,
    flow_demand_Bps: FloatArray,
    out_rate_Bps: FloatArray,
    out_link_load_Bps: FloatArray,
    out_bottleneck_link: IntArray,
) -> int:
    """Weighted max-min fair rates by progressive filling; return the number of rounds.

    Arguments and outputs are those of :func:`fabric_model.flows._kernels.maxmin_fill`.

    Notes
    -----
    Every unfrozen flow runs at the common ``level``. A round:

    1. raises ``level`` to the next event: the lowest link fill level or the lowest demand
       of an unfrozen flow;
    2. freezes the unfrozen flows whose demand is reached (rate = demand, bottleneck -1);
    3. saturates every link whose fill level is within ``REL_TOL`` of ``level`` and freezes
       the unfrozen flows crossing it at ``level`` (bottleneck: the saturated link with the
       lowest fill level on the flow's path).

    It stops when every flow is frozen. A flow that crosses no link gets its demand.
    """
    n_flows = len(flow_link_indptr) - 1
    n_links = len(link_capacity_Bps)
    path_length = np.diff(flow_link_indptr)
    entry_flow = np.repeat(np.arange(n_flows), path_length)  # flow owning each CSR entry
    by_link = np.argsort(flow_link_indices, kind="stable")
    flows_on_link = np.split(
        entry_flow[by_link], np.cumsum(np.bincount(flow_link_indices, minlength=n_links))[:-1]
    )

    rate_Bps = np.zeros(n_flows)
    bottleneck_link = np.full(n_flows, -1, dtype=np.int64)
    frozen = path_length == 0
    rate_Bps[frozen] = flow_demand_Bps[frozen]

    level_Bps = 0.0
    n_rounds = 0
    while not frozen.all():
        n_frozen_before = np.count_nonzero(frozen)
        fill_level_Bps = _link_fill_levels(
            entry_flow, flow_link_indices, flow_link_weights, link_capacity_Bps, rate_Bps, frozen
        )
        next_level_Bps = min(fill_level_Bps.min(), flow_demand_Bps[~frozen].min())
        level_Bps = max(level_Bps, next_level_Bps)  # rounding must not move the level back
        n_rounds += 1
        rate_Bps[~frozen] = level_Bps

        demand_reached = ~frozen & (flow_demand_Bps <= level_Bps)
        rate_Bps[demand_reached] = flow_demand_Bps[demand_reached]
        frozen |= demand_reached

        fill_level_Bps = _link_fill_levels(
            entry_flow, flow_link_indices, flow_link_weights, link_capacity_Bps, rate_Bps, frozen
        )
        saturated_links = np.flatnonzero(fill_level_Bps <= level_Bps * (1.0 + REL_TOL))
        for link in saturated_links[np.argsort(fill_level_Bps[saturated_links], kind="stable")]:
            flows = flows_on_link[link]
            newly_frozen = flows[~frozen[flows]]
            bottleneck_link[newly_frozen] = link
            frozen[newly_frozen] = True

        if np.count_nonzero(frozen) == n_frozen_before:
            rate_Bps[~frozen] = np.nan  # only NaN input gets here; stop instead of spinning
            break

    out_rate_Bps[:] = rate_Bps
    out_bottleneck_link[:] = bottleneck_link
    out_link_load_Bps[:] = np.bincount(
        flow_link_indices,
        weights=flow_link_weights * rate_Bps[entry_flow],
        minlength=n_links,
    )
    return n_rounds
