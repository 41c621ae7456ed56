"""Numba kernels of fabric graphs: the outgoing-link CSR sort and all-pairs hop counts.

:func:`stable_order_by_key` returns what ``np.argsort(keys, kind="stable")`` returns for
non-negative integer keys below ``n_keys`` (ties keep their input order), in two passes over
the keys instead of a comparison sort: a 131,072-GPU fat-tree has millions of directed
links. ``tests/test_speed_paths.py`` holds it equal to the NumPy sort. :func:`bfs_all_pairs`
gives the hops between the blocks of an OCS fabric (:mod:`fabric_model.topology.ocs`, whose
``block_hops_reference`` is its readable twin, tested equal).
"""

from __future__ import annotations

import numpy as np

from fabric_model._jit import jit

__all__ = ["bfs_all_pairs", "stable_order_by_key"]


@jit
def stable_order_by_key(keys: np.ndarray, n_keys: int) -> np.ndarray:  # pragma: no cover
    """Return the stable ascending order of ``keys`` (each in ``0 .. n_keys - 1``), int32."""
    start = np.zeros(n_keys + 1, dtype=np.int64)
    for i in range(keys.size):
        start[keys[i] + 1] += 1
    for k in range(n_keys):
        start[k + 1] += start[k]
    order = np.empty(keys.size, dtype=np.int32)
    for i in range(keys.size):
        k = keys[i]
        order[start[k]] = i
        start[k] += 1
    return order


@jit
def bfs_all_pairs(
    indptr: np.ndarray, neighbours: np.ndarray, alive: np.ndarray, out: np.ndarray
) -> None:  # pragma: no cover
    """Fill ``out[s, t]`` with the hops from ``s`` to ``t`` (``-1``: unreachable or dead).

    ``indptr``/``neighbours``: CSR adjacency of ``n`` nodes (parallel edges allowed);
    ``alive``: bool per node (a dead node is neither reached nor left); ``out``: ``(n, n)``
    int32, the caller fills it with ``-1``. One breadth-first search per live source.
    """
    n = indptr.size - 1
    queue = np.empty(n, dtype=np.int64)
    for s in range(n):
        if not alive[s]:
            continue
        out[s, s] = 0
        head = 0
        tail = 1
        queue[0] = s
        while head < tail:
            u = queue[head]
            head += 1
            du = out[s, u]
            for k in range(indptr[u], indptr[u + 1]):
                v = neighbours[k]
                if alive[v] and out[s, v] < 0:
                    out[s, v] = du + 1
                    queue[tail] = v
                    tail += 1
