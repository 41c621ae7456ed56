"""The model's numba kernels: loaded where one first runs, or all at once by :func:`preload`.

No module of the model imports numba when it is imported; a kernel's module is imported
where the kernel first runs, so a command that runs none (the default ``step`` and
``collective``) never loads the compiler (about 0.5 s of start on the project's machine).
A long-running process, the dashboard, calls :func:`preload` at its start instead, so no
user's first large fabric waits for the compiler. ``tests/test_cost_and_cli.py`` holds
:data:`KERNEL_MODULES` to every module that compiles a kernel.
"""

from __future__ import annotations

import importlib
import time

__all__ = ["KERNEL_MODULES", "preload"]

#: Every module of the model that compiles numba kernels (``fabric_model._jit.jit``).
KERNEL_MODULES = (
    "fabric_model.flows._kernels",
    "fabric_model.collectives._kernels",
    "fabric_model.collectives._heap_order",
    "fabric_model.routing._kernels",
    "fabric_model.routing.hypercube",
    "fabric_model.routing.ocs",
    "fabric_model.routing.torus3d",
    "fabric_model.topology._kernels",
    "fabric_model.training._kernels",
)


def preload() -> float:
    """Import every kernel module (their kernels load from numba's cache); return seconds.

    Cheap once done: later calls find the modules imported.
    """
    t0 = time.perf_counter()
    for name in KERNEL_MODULES:
        importlib.import_module(name)
    return time.perf_counter() - t0
