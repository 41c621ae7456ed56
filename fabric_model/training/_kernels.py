"""Numba kernel of a communicator's physical endpoints (``layout.GroupContext._physical``).

:func:`physical_endpoints` maps a group's logical NIC endpoints to every concurrent group's
physical ones in one pass: shift the GPU by the group's offset (mod the cluster), look up
where placement puts that GPU (``gpu_place``: its NVLink domain by the cluster's domain
order, kept per communicator), keep the NIC index. The NumPy form builds five temporaries of
``groups x endpoints`` and divides five times per entry for one integer expression;
``tests/test_speed_paths.py`` holds the two equal.
"""

from __future__ import annotations

import numpy as np
from numba import types

from fabric_model._jit import jit

__all__ = ["physical_endpoints"]

_I64 = types.Array(types.int64, 1, "C", readonly=True)


@jit(types.void(_I64, _I64, _I64, types.int64, types.int64[::1]))
def physical_endpoints(
    logical: np.ndarray,
    offsets: np.ndarray,
    gpu_place: np.ndarray,
    nics: int,
    out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Fill ``out`` (row-major, groups x endpoints) with each group's physical endpoints.

    ``gpu_place[g]`` is the physical GPU of cluster GPU ``g`` (``n_total`` entries).
    """
    n = logical.size
    n_total = gpu_place.size
    gpu_of = np.empty(n, dtype=np.int64)
    nic_of = np.empty(n, dtype=np.int64)
    for j in range(n):
        gpu_of[j] = logical[j] // nics
        nic_of[j] = logical[j] % nics
    for g in range(offsets.size):
        shift = offsets[g] % n_total
        row = g * n
        for j in range(n):
            gpu = gpu_of[j] + shift
            if gpu >= n_total or gpu < 0:  # mod n_total, without a division in range
                gpu = gpu - n_total if gpu < 2 * n_total and gpu >= n_total else gpu % n_total
            out[row + j] = gpu_place[gpu] * nics + nic_of[j]
