"""Numba kernel of the fabric graph's outgoing-link CSR: a stable counting sort by source node.

:func:`stable_order_by_key` returns what ``np.argsort(keys, kind="stable")`` returns for
non-negative integer keys below ``n_keys`` (ties keep their input order), in two passes over
the keys instead of a comparison sort: a 131,072-GPU fat-tree has millions of directed
links. ``tests/test_speed_paths.py`` holds it equal to the NumPy sort.
"""

from __future__ import annotations

import numpy as np

from fabric_model._jit import jit

__all__ = ["stable_order_by_key"]


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
