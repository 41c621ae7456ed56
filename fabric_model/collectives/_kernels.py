"""Numba loops of the max-min solve's first round over a flow set (``first_round.py``).

The NumPy form they replace, ``np.bincount(indices, weights=w, minlength=n)`` (a sequential
sum in entry order) and ``argmax(saturated[indices])``, builds temporaries as large as the
flow set (tens of MB for a 300K-connection all-to-all), whose fresh pages cost more on this
VM than the sums. The loops add in the same order, so the sums are bincount's bit for bit
(``tests/test_speed_paths.py`` holds both equal).
"""

from __future__ import annotations

import numpy as np
from numba import types

from fabric_model._jit import jit

__all__ = ["first_entry_on", "link_weights"]

_I32 = types.Array(types.int32, 1, "C", readonly=True)
_I64 = types.Array(types.int64, 1, "C", readonly=True)
_F64 = types.Array(types.float64, 1, "C", readonly=True)
_B1 = types.Array(types.boolean, 1, "C", readonly=True)


@jit(types.void(_I64, _I32, _F64, _F64, types.Array(types.float64, 1, "C")))
def link_weights(
    indptr: np.ndarray,
    indices: np.ndarray,
    weights: np.ndarray,
    flow_weight: np.ndarray,
    out: np.ndarray,
) -> None:
    """Add each entry's weight (times its flow's ``flow_weight``, if not empty) to ``out``."""
    scaled = flow_weight.size > 0
    for f in range(indptr.size - 1):
        fw = flow_weight[f] if scaled else 1.0
        for e in range(indptr[f], indptr[f + 1]):
            if scaled:
                out[indices[e]] += weights[e] * fw
            else:
                out[indices[e]] += weights[e]


@jit(types.int64(_I32, _B1))
def first_entry_on(indices: np.ndarray, marked: np.ndarray) -> int:
    """Return the first entry whose link is ``marked`` (-1: none)."""
    for e in range(indices.size):
        if marked[indices[e]]:
            return e
    return -1
