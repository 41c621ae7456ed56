"""The one jit decorator every numba kernel uses, so all compile the same way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba

#: ``cache=True`` writes compiled kernels next to the module (``__pycache__``), so the app's
#: cold start pays the compile once per machine; ``nogil`` lets Streamlit threads overlap.
JIT_OPTIONS: dict[str, Any] = {
    "cache": True,
    "nogil": True,
    "fastmath": False,
    "error_model": "numpy",
}


def jit(signature_or_function: Any = None) -> Any:
    """Compile with the package's fixed options: ``@jit`` or ``@jit("void(float64[:])")``."""
    if callable(signature_or_function):
        return numba.njit(**JIT_OPTIONS)(signature_or_function)

    def wrap(func: Callable[..., Any]) -> Any:
        if signature_or_function is None:
            return numba.njit(**JIT_OPTIONS)(func)
        return numba.njit(signature_or_function, **JIT_OPTIONS)(func)

    return wrap
