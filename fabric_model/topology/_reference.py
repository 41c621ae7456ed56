"""Slow, readable twins of the kernels in :mod:`._kernels`, as in :mod:`fabric_model.flows`.

Same arguments, same outputs. They run where a shortcut is switched off
(:mod:`fabric_model._fastpaths`); ``tests/test_speed_paths.py`` holds each kernel equal to
its twin.
"""

from __future__ import annotations

import numpy as np

__all__ = ["stable_order_by_key"]


def stable_order_by_key(keys: np.ndarray, n_keys: int) -> np.ndarray:
    """Return the stable ascending order of ``keys`` (each in ``0 .. n_keys - 1``), int32.

    >>> stable_order_by_key(np.array([2, 0, 2, 1]), 3).tolist()
    [1, 3, 0, 2]
    """
    del n_keys  # the kernel sizes its counters with it; a comparison sort does not need it
    return np.argsort(keys, kind="stable").astype(np.int32)
