"""The max-min solver's saturation tolerance, in a module that loads no compiler.

Shared by the numba kernel (:mod:`._kernels`), its readable twin (:mod:`._reference`) and the
first-round shortcut (:mod:`fabric_model.collectives.first_round`), so a process that never
runs a kernel never imports numba (the command line's ``step`` and ``collective`` on small
fabrics).
"""

from __future__ import annotations

__all__ = ["REL_TOL"]

#: Relative tolerance of the filling: a link whose fill level is within ``REL_TOL`` of the
#: current level saturates in the same round (its residual is then <= REL_TOL * capacity).
#: It groups links that tie in exact arithmetic but differ by rounding.
REL_TOL = 1e-9
