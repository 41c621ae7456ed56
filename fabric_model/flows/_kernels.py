"""Numba kernels of the weighted max-min fair flow solver (progressive filling).

Kernels take contiguous arrays, write into outputs the caller allocated, never print, never
raise on user input and draw no random numbers. Validation lives in :mod:`.solver`; on
invalid input (NaN, negative capacities) the kernels still terminate, but their results are
meaningless. :mod:`._reference` holds the slow, readable twin of every kernel here.

Data layout (CSR over flows, as in :class:`fabric_model.flows.FlowSet`):
``flow_link_indices[flow_link_indptr[f]:flow_link_indptr[f + 1]]`` are the links flow ``f``
crosses and ``flow_link_weights`` (same slice) the fraction of its rate on each of them.
"""

from __future__ import annotations

import numpy as np
from numba import types

from fabric_model._jit import jit
from fabric_model.flows._tolerance import REL_TOL

__all__ = ["REL_TOL", "first_flow_with_duplicate_link", "maxmin_fill"]


_NOT_IN_HEAP = -1


def _in(dtype: types.Type) -> types.Array:
    """1-D C-contiguous input array type; read-only, so frozen arrays bind without a copy."""
    return types.Array(dtype, 1, "C", readonly=True)


def _out(dtype: types.Type) -> types.Array:
    return types.Array(dtype, 1, "C")


@jit(types.int64(_in(types.int64), _in(types.int32), types.int64))
def first_flow_with_duplicate_link(
    flow_link_indptr: np.ndarray, flow_link_indices: np.ndarray, n_links: int
) -> int:
    """Return the first flow that lists some link twice, or -1 if none does.

    Parameters
    ----------
    flow_link_indptr : int64 array, shape (n_flows + 1,)
        CSR row pointer over flows.
    flow_link_indices : int32 array, shape (nnz,)
        Link ids, each in ``[0, n_links)`` (the caller checks the range first).
    n_links : int
        Number of links.

    Returns
    -------
    int
        Index of the first flow with a repeated link id, -1 if there is none.

    Notes
    -----
    One "last flow that touched this link" marker per link: O(nnz + n_links), no sorting.
    """
    last_flow = np.full(n_links, -1, dtype=np.int64)
    n_flows = flow_link_indptr.shape[0] - 1
    for f in range(n_flows):
        for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
            link = flow_link_indices[k]
            if last_flow[link] == f:
                return f
            last_flow[link] = f
    return -1


# --- indexed binary min-heap of links keyed by fill level ------------------------------------
# heap[i] is a link id; heap_pos[link] its slot (or _NOT_IN_HEAP); heap_key[link] the key the
# heap is ordered by. Keys may be stale *low* (see maxmin_fill): never above the true level.


@jit
def _sift_up(heap: np.ndarray, heap_pos: np.ndarray, heap_key: np.ndarray, i: int) -> None:
    link = heap[i]
    key = heap_key[link]
    while i > 0:
        parent = (i - 1) >> 1
        if heap_key[heap[parent]] <= key:
            break
        heap[i] = heap[parent]
        heap_pos[heap[i]] = i
        i = parent
    heap[i] = link
    heap_pos[link] = i


@jit
def _sift_down(
    heap: np.ndarray, heap_pos: np.ndarray, heap_key: np.ndarray, n_heap: int, i: int
) -> None:
    link = heap[i]
    key = heap_key[link]
    while True:
        child = 2 * i + 1
        if child >= n_heap:
            break
        right = child + 1
        if right < n_heap and heap_key[heap[right]] < heap_key[heap[child]]:
            child = right
        if heap_key[heap[child]] >= key:
            break
        heap[i] = heap[child]
        heap_pos[heap[i]] = i
        i = child
    heap[i] = link
    heap_pos[link] = i


@jit
def _pop_top(heap: np.ndarray, heap_pos: np.ndarray, heap_key: np.ndarray, n_heap: int) -> int:
    """Remove ``heap[0]``; return the new heap size."""
    heap_pos[heap[0]] = _NOT_IN_HEAP
    n_heap -= 1
    if n_heap > 0:
        heap[0] = heap[n_heap]
        heap_pos[heap[0]] = 0
        _sift_down(heap, heap_pos, heap_key, n_heap, 0)
    return n_heap


@jit
def _settle_top(
    heap: np.ndarray,
    heap_pos: np.ndarray,
    heap_key: np.ndarray,
    n_heap: int,
    fill_level: np.ndarray,
    n_unfrozen_on_link: np.ndarray,
) -> int:
    """Make ``heap[0]`` carry its true fill level, dropping links with no unfrozen flow.

    Returns the new heap size. Afterwards ``heap_key[heap[0]]`` is the minimum fill level over
    all links still in the heap, because every other key is a lower bound of its true level.
    """
    while n_heap > 0:
        link = heap[0]
        if n_unfrozen_on_link[link] == 0:
            n_heap = _pop_top(heap, heap_pos, heap_key, n_heap)
        elif heap_key[link] < fill_level[link]:
            heap_key[link] = fill_level[link]
            _sift_down(heap, heap_pos, heap_key, n_heap, 0)
        else:
            break
    return n_heap


@jit
def _freeze_flow(
    f: int,
    rate_Bps: float,
    bottleneck_link: int,
    flow_link_indptr: np.ndarray,
    flow_link_indices: np.ndarray,
    flow_link_weights: np.ndarray,
    link_capacity_Bps: np.ndarray,
    frozen: np.ndarray,
    out_rate_Bps: np.ndarray,
    out_bottleneck_link: np.ndarray,
    frozen_load_Bps: np.ndarray,
    unfrozen_weight: np.ndarray,
    n_unfrozen_on_link: np.ndarray,
    fill_level: np.ndarray,
    heap: np.ndarray,
    heap_pos: np.ndarray,
    heap_key: np.ndarray,
) -> None:
    """Freeze flow ``f`` at ``rate_Bps`` and update the fill level of every link it crosses."""
    frozen[f] = True
    out_rate_Bps[f] = rate_Bps
    out_bottleneck_link[f] = bottleneck_link
    for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
        link = flow_link_indices[k]
        w = flow_link_weights[k]
        frozen_load_Bps[link] += w * rate_Bps
        unfrozen_weight[link] -= w
        n_unfrozen_on_link[link] -= 1
        if n_unfrozen_on_link[link] == 0 or heap_pos[link] == _NOT_IN_HEAP:
            continue  # saturated already, or idle: _settle_top drops idle links lazily
        level = (link_capacity_Bps[link] - frozen_load_Bps[link]) / unfrozen_weight[link]
        fill_level[link] = level
        # Removing a flow frozen at the current level cannot lower a link's fill level in
        # exact arithmetic, so its heap key is usually left stale-low (fixed when it surfaces);
        # rounding can lower it a hair, and then the key must follow at once.
        if level < heap_key[link]:
            heap_key[link] = level
            _sift_up(heap, heap_pos, heap_key, heap_pos[link])


@jit(
    types.int64(
        _in(types.int64),
        _in(types.int32),
        _in(types.float64),
        _in(types.float64),
        _in(types.float64),
        _out(types.float64),
        _out(types.float64),
        _out(types.int32),
    )
)
def maxmin_fill(
    flow_link_indptr: np.ndarray,
    flow_link_indices: np.ndarray,
    flow_link_weights: np.ndarray,
    link_capacity_Bps: np.ndarray,
    flow_demand_Bps: np.ndarray,
    out_rate_Bps: np.ndarray,
    out_link_load_Bps: np.ndarray,
    out_bottleneck_link: np.ndarray,
) -> int:
    """Weighted max-min fair rates by progressive filling; return the number of rounds.

    Parameters
    ----------
    flow_link_indptr : int64 array, shape (n_flows + 1,)
        CSR row pointer over flows; monotone, starts at 0.
    flow_link_indices : int32 array, shape (nnz,)
        Link crossed, in ``[0, n_links)``; at most once per flow.
    flow_link_weights : float64 array, shape (nnz,)
        Fraction of the flow's rate that crosses that link, in (0, 1].
    link_capacity_Bps : float64 array, shape (n_links,)
        Link capacities, bytes/s, > 0.
    flow_demand_Bps : float64 array, shape (n_flows,)
        Rate cap per flow, bytes/s, >= 0; ``inf`` for none.
    out_rate_Bps : float64 array, shape (n_flows,)
        Output: max-min fair rate of each flow, bytes/s.
    out_link_load_Bps : float64 array, shape (n_links,)
        Output: ``sum_f w[f, l] * rate[f]`` per link, bytes/s.
    out_bottleneck_link : int32 array, shape (n_flows,)
        Output: link whose saturation froze the flow, -1 if its demand (or an empty path)
        did.

    Returns
    -------
    int
        Number of filling rounds (distinct levels at which flows froze).

    Notes
    -----
    All unfrozen flows share one level ``t``. With ``F_l`` the load of frozen flows on link
    ``l`` and ``W_l`` the summed weight of its unfrozen flows, the link saturates when ``t``
    reaches its fill level ``s_l = (c_l - F_l) / W_l``. Each round raises ``t`` to the next
    event, ``min(min_l s_l, min unfrozen demand)``, freezes the flows whose demand is
    reached (rate = demand, bottleneck -1), then every link with ``s_l <= t (1 + REL_TOL)``
    saturates and freezes its remaining flows at ``t``.

    Instead of sweeping the active links every round, the links sit in a binary min-heap
    keyed by ``s_l``, and the flows in demand order. Freezing a flow at the current level
    only raises the fill levels of its links (exactly: ``s_l' - s_l = w (s_l - t) / W_l'
    >= 0``), so heap keys are left stale-low and refreshed when a link reaches the top.
    Total cost O(nnz log n_links + n_flows log n_flows), independent of the number of
    rounds; an O(active links) sweep per round degrades to O(n_links^2) when capacities or
    loads are heterogeneous and nearly every link saturates at its own level.

    A flow that crosses no link gets its demand (``inf`` if it has none) and bottleneck -1.
    """
    n_flows = flow_link_indptr.shape[0] - 1
    n_links = link_capacity_Bps.shape[0]
    nnz = flow_link_indptr[n_flows]

    # Link -> flow transpose (counting sort), so a saturated link finds its flows.
    link_flow_indptr = np.zeros(n_links + 1, dtype=np.int64)
    for k in range(nnz):
        link_flow_indptr[flow_link_indices[k] + 1] += 1
    for link in range(n_links):
        link_flow_indptr[link + 1] += link_flow_indptr[link]
    link_flow_flows = np.empty(nnz, dtype=np.int32)
    cursor = link_flow_indptr[:-1].copy()
    for f in range(n_flows):
        for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
            link = flow_link_indices[k]
            link_flow_flows[cursor[link]] = f
            cursor[link] += 1

    frozen_load_Bps = np.zeros(n_links)
    unfrozen_weight = np.zeros(n_links)
    n_unfrozen_on_link = np.zeros(n_links, dtype=np.int64)
    for k in range(nnz):
        link = flow_link_indices[k]
        unfrozen_weight[link] += flow_link_weights[k]
        n_unfrozen_on_link[link] += 1

    fill_level = np.full(n_links, np.inf)
    heap = np.empty(n_links, dtype=np.int32)
    heap_pos = np.full(n_links, _NOT_IN_HEAP, dtype=np.int64)
    heap_key = np.full(n_links, np.inf)
    n_heap = 0
    for link in range(n_links):
        if n_unfrozen_on_link[link] > 0:
            fill_level[link] = link_capacity_Bps[link] / unfrozen_weight[link]
            heap_key[link] = fill_level[link]
            heap[n_heap] = link
            heap_pos[link] = n_heap
            n_heap += 1
    for i in range(n_heap // 2 - 1, -1, -1):
        _sift_down(heap, heap_pos, heap_key, n_heap, i)

    saturated = np.empty(n_links, dtype=np.int32)  # links saturating in the current round
    frozen = np.zeros(n_flows, dtype=np.bool_)
    n_frozen = 0
    for f in range(n_flows):
        out_bottleneck_link[f] = -1
        if flow_link_indptr[f + 1] == flow_link_indptr[f]:
            frozen[f] = True
            out_rate_Bps[f] = flow_demand_Bps[f]
            n_frozen += 1

    demand_order = np.argsort(flow_demand_Bps, kind="mergesort")
    next_in_demand_order = 0
    level_Bps = 0.0
    n_rounds = 0
    while n_frozen < n_flows:
        n_heap = _settle_top(heap, heap_pos, heap_key, n_heap, fill_level, n_unfrozen_on_link)
        while next_in_demand_order < n_flows and frozen[demand_order[next_in_demand_order]]:
            next_in_demand_order += 1
        next_link_level = heap_key[heap[0]] if n_heap > 0 else np.inf
        next_demand = (
            flow_demand_Bps[demand_order[next_in_demand_order]]
            if next_in_demand_order < n_flows
            else np.inf
        )
        # Rounding can leave a fill level a hair below the current level; never go back.
        level_Bps = max(level_Bps, min(next_link_level, next_demand))
        n_rounds += 1
        n_frozen_before = n_frozen

        while next_in_demand_order < n_flows:
            f = demand_order[next_in_demand_order]
            if not frozen[f]:
                if not flow_demand_Bps[f] <= level_Bps:
                    break
                _freeze_flow(
                    f,
                    flow_demand_Bps[f],
                    -1,
                    flow_link_indptr,
                    flow_link_indices,
                    flow_link_weights,
                    link_capacity_Bps,
                    frozen,
                    out_rate_Bps,
                    out_bottleneck_link,
                    frozen_load_Bps,
                    unfrozen_weight,
                    n_unfrozen_on_link,
                    fill_level,
                    heap,
                    heap_pos,
                    heap_key,
                )
                n_frozen += 1
            next_in_demand_order += 1

        # Collect the whole saturated set before freezing anything, so the set does not
        # depend on the order in which tied links leave the heap.
        threshold_Bps = level_Bps * (1.0 + REL_TOL)
        n_saturated = 0
        while True:
            n_heap = _settle_top(heap, heap_pos, heap_key, n_heap, fill_level, n_unfrozen_on_link)
            if n_heap == 0 or not heap_key[heap[0]] <= threshold_Bps:
                break
            link = heap[0]
            n_heap = _pop_top(heap, heap_pos, heap_key, n_heap)
            saturated[n_saturated] = link
            n_saturated += 1
        for i in range(n_saturated):
            link = saturated[i]
            for k in range(link_flow_indptr[link], link_flow_indptr[link + 1]):
                f = link_flow_flows[k]
                if not frozen[f]:
                    _freeze_flow(
                        f,
                        level_Bps,
                        link,
                        flow_link_indptr,
                        flow_link_indices,
                        flow_link_weights,
                        link_capacity_Bps,
                        frozen,
                        out_rate_Bps,
                        out_bottleneck_link,
                        frozen_load_Bps,
                        unfrozen_weight,
                        n_unfrozen_on_link,
                        fill_level,
                        heap,
                        heap_pos,
                        heap_key,
                    )
                    n_frozen += 1

        if n_frozen == n_frozen_before:
            # Only NaN input gets here (no level compares); give up rather than spin.
            for f in range(n_flows):
                if not frozen[f]:
                    frozen[f] = True
                    out_rate_Bps[f] = np.nan
            break

    for link in range(n_links):
        out_link_load_Bps[link] = 0.0
    for f in range(n_flows):
        for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
            out_link_load_Bps[flow_link_indices[k]] += flow_link_weights[k] * out_rate_Bps[f]
    return n_rounds
