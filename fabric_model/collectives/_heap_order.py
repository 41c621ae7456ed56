"""Numba kernel: which of a max-min solve's first-round links the solver's heap yields first.

The solver (:func:`fabric_model.flows._kernels.maxmin_fill`) puts every link that carries a
flow into a binary min-heap keyed by its fill level, in link order, heapifies it, and in the
first round pops every link within the tolerance of the smallest level before freezing any
flow; each flow is then frozen by the first popped link it crosses. :func:`first_popped`
builds the same heap with the solver's own sift and pop helpers and pops until a
candidate link comes up, so a tie between first-round links of different classes (a
non-blocking fat-tree saturates its NIC links and bundles at one level) is resolved as the
solver resolves it. Its readable twin is the solver itself: ``tests/test_speed_paths.py``
holds the two equal.
"""

from __future__ import annotations

import numpy as np
from numba import types

from fabric_model._jit import jit
from fabric_model.flows._kernels import _pop_top, _sift_down

__all__ = ["first_popped"]


@jit(
    types.int64(
        types.Array(types.float64, 1, "C", readonly=True),
        types.Array(types.boolean, 1, "C", readonly=True),
    )
)
def first_popped(fill_level: np.ndarray, candidate: np.ndarray) -> int:
    """Return the first ``candidate`` link the solver's heap pops in round one (-1: none).

    Parameters
    ----------
    fill_level : float64 array, shape (n_links,)
        Each link's first-round fill level ``c / W`` (``inf`` for a link no flow crosses:
        not in the heap).
    candidate : bool array, shape (n_links,)
        The links asked about (first-round links, so popped before any other).
    """
    n_links = fill_level.shape[0]
    heap = np.empty(n_links, dtype=np.int32)
    heap_pos = np.full(n_links, -1, dtype=np.int64)
    heap_key = np.full(n_links, np.inf)
    n_heap = 0
    for link in range(n_links):
        if fill_level[link] < np.inf:
            heap_key[link] = fill_level[link]
            heap[n_heap] = link
            heap_pos[link] = n_heap
            n_heap += 1
    for i in range(n_heap // 2 - 1, -1, -1):
        _sift_down(heap, heap_pos, heap_key, n_heap, i)
    while n_heap > 0:
        link = heap[0]
        if candidate[link]:
            return int(link)
        n_heap = _pop_top(heap, heap_pos, heap_key, n_heap)
    return -1
