"""Weighted max-min fair rates of flows sharing directed links (progressive filling).

The typed layer over :mod:`._kernels`: :class:`FlowSet` holds validated paths in CSR form,
:func:`solve_maxmin` runs the kernel (or its readable twin) and returns a
:class:`FlowSolution`.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, SupportsFloat, SupportsIndex

import numpy as np
import numpy.typing as npt

from fabric_model.errors import FabricModelError
from fabric_model.flows import _reference

__all__ = ["FlowSet", "FlowSolution", "flowset_from_paths", "solve_maxmin"]

#: On: :meth:`FlowSet.built` checks its arrays as the constructor does. The test suite turns
#: it on for every test and every process it starts (``FABRIC_MODEL_CHECK_FLOWS=1``, set in
#: ``tests/conftest.py``), so every router's output is checked wherever the tests route.
CHECK_BUILT = os.environ.get("FABRIC_MODEL_CHECK_FLOWS") == "1"

#: Weights may exceed 1 by this much, so fractions such as 3 x (1/3) that round past 1 pass.
WEIGHT_SLACK = 1e-9

_INT32_MAX = np.iinfo(np.int32).max

#: One hop of a path: a link id (weight 1.0) or a ``(link_id, weight)`` pair.
PathEntry = SupportsIndex | tuple[SupportsIndex, SupportsFloat]


def _readonly(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view


def _as_int_array(name: str, value: object, dtype: type[np.integer]) -> np.ndarray:
    array = np.asarray(value)
    if array.ndim != 1:
        raise FabricModelError(f"{name} must be 1-D, got shape {array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise FabricModelError(f"{name} must hold integers, got dtype {array.dtype}")
    if array.size and np.issubdtype(dtype, np.int32):
        low, high = int(array.min()), int(array.max())
        if low < 0 or high > _INT32_MAX:
            raise FabricModelError(f"{name} must lie in [0, {_INT32_MAX}], got [{low}, {high}]")
    return np.ascontiguousarray(array, dtype=dtype)


def _as_float_array(name: str, value: object) -> np.ndarray:
    array = np.asarray(value)
    if array.ndim != 1:
        raise FabricModelError(f"{name} must be 1-D, got shape {array.shape}")
    if array.size and not (
        np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)
    ):
        raise FabricModelError(f"{name} must hold real numbers, got dtype {array.dtype}")
    return np.ascontiguousarray(array, dtype=np.float64)


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


@dataclass(frozen=True, eq=False)
class FlowSet:
    """Flows and the links they cross, in CSR form over flows.

    Arrays are converted to the dtypes below and stored as read-only views (no copy when the
    dtype already matches): do not modify the arrays passed in afterwards. Instances compare
    and hash by identity.

    Parameters
    ----------
    flow_link_indptr : array of int, shape (n_flows + 1,)
        CSR row pointer: flow ``f`` crosses entries ``indptr[f]:indptr[f + 1]``. Stored as
        int64; starts at 0, non-decreasing, ends at ``nnz``.
    flow_link_indices : array of int, shape (nnz,)
        Link id of each entry, in ``[0, n_links)``; a link appears at most once per flow
        (:func:`flowset_from_paths` merges repeats). Stored as int32.
    flow_link_weights : array of float, shape (nnz,)
        Fraction of the flow's rate that crosses the link, dimensionless, in
        ``(0, 1 + WEIGHT_SLACK]``. A flow sprayed evenly over 4 spine paths has weight 0.25 on
        each uplink and 1.0 on its NIC link. Stored as float64.
    n_links : int
        Number of directed links, >= 0.
    flow_demand_Bps : array of float, shape (n_flows,), optional
        Rate cap of each flow, bytes/s, >= 0; ``inf`` means uncapped. ``None`` means no flow
        is capped. A flow that crosses no link must have a finite demand (its max-min rate
        would otherwise be unbounded); it then gets exactly its demand.

    Raises
    ------
    FabricModelError
        If a shape, dtype or value is outside what is described above.
    """

    flow_link_indptr: np.ndarray
    flow_link_indices: np.ndarray
    flow_link_weights: np.ndarray
    n_links: int
    flow_demand_Bps: np.ndarray | None = None
    #: Largest weight allowed. 1 for plain flows (a weight is the fraction of the flow's
    #: rate on the link). A *class* of ``m`` identical flows may be solved as one entry whose
    #: rate is the per-member rate and whose weights are ``m`` times a member's: pass
    #: ``max_weight=np.inf`` for such class-aggregated flow sets.
    max_weight: float = 1.0

    def __post_init__(self) -> None:
        """Check every field and store the arrays with canonical dtypes, read-only."""
        if isinstance(self.n_links, bool) or not isinstance(self.n_links, numbers.Integral):
            raise FabricModelError(f"n_links must be an integer, got {self.n_links!r}")
        n_links = int(self.n_links)
        if not 0 <= n_links <= _INT32_MAX + 1:
            raise FabricModelError(f"n_links must lie in [0, 2**31], got {n_links}")

        indptr = _as_int_array("flow_link_indptr", self.flow_link_indptr, np.int64)
        indices = _as_int_array("flow_link_indices", self.flow_link_indices, np.int32)
        weights = _as_float_array("flow_link_weights", self.flow_link_weights)
        if not 1 <= indptr.size <= _INT32_MAX + 1:
            raise FabricModelError(
                f"flow_link_indptr must have n_flows + 1 entries with 0 <= n_flows <= "
                f"{_INT32_MAX} (flow ids are int32), got {indptr.size}"
            )
        nnz = indices.size
        if indptr[0] != 0 or indptr[-1] != nnz:
            raise FabricModelError(
                "flow_link_indptr must start at 0 and end at len(flow_link_indices) = "
                f"{nnz}, got {int(indptr[0])} ... {int(indptr[-1])}"
            )
        path_length = np.diff(indptr)
        if np.any(path_length < 0):
            f = _first(path_length < 0)
            raise FabricModelError(
                f"flow_link_indptr must be non-decreasing; it drops at flow {f} "
                f"({int(indptr[f])} -> {int(indptr[f + 1])})"
            )
        if weights.size != nnz:
            raise FabricModelError(
                f"flow_link_weights has {weights.size} entries, flow_link_indices has {nnz}"
            )
        if nnz and int(indices.max()) >= n_links:
            k = _first(indices >= n_links)
            raise FabricModelError(
                f"link id {int(indices[k])} (entry {k}, flow {self._flow_of_entry(indptr, k)}) is "
                f"out of range: n_links = {n_links}, so ids must lie in [0, {n_links - 1}]"
            )
        bad_weight = ~(
            (weights > 0.0) & (weights <= self.max_weight + WEIGHT_SLACK) & np.isfinite(weights)
        )  # catches NaN too
        if np.any(bad_weight):
            k = _first(bad_weight)
            raise FabricModelError(
                f"weight {float(weights[k])!r} (entry {k}, flow {self._flow_of_entry(indptr, k)}, "
                f"link {int(indices[k])}) must lie in (0, {self.max_weight:g}]: it is the "
                "fraction of the flow's rate that crosses the link"
            )
        from fabric_model.flows import _kernels  # numba, loaded on first use

        f = int(_kernels.first_flow_with_duplicate_link(indptr, indices, n_links))
        if f >= 0:
            raise FabricModelError(
                f"flow {f} lists a link more than once; merge repeats by adding their "
                "weights (flowset_from_paths does this)"
            )

        demand: np.ndarray | None = None
        if self.flow_demand_Bps is not None:
            demand = _as_float_array("flow_demand_Bps", self.flow_demand_Bps)
            if demand.size != path_length.size:
                raise FabricModelError(
                    f"flow_demand_Bps has {demand.size} entries, there are {path_length.size} flows"
                )
            bad_demand = ~(demand >= 0.0)  # catches NaN too
            if np.any(bad_demand):
                f = _first(bad_demand)
                raise FabricModelError(
                    f"flow_demand_Bps[{f}] = {float(demand[f])!r} must be >= 0 bytes/s "
                    "(inf = uncapped)"
                )
        unbounded = (path_length == 0) & (
            np.ones(path_length.size, dtype=bool) if demand is None else np.isinf(demand)
        )
        if np.any(unbounded):
            f = _first(unbounded)
            raise FabricModelError(
                f"flow {f} crosses no link and has no finite demand, so its rate would be "
                "unbounded; give it a path or a finite flow_demand_Bps"
            )

        object.__setattr__(self, "n_links", n_links)
        object.__setattr__(self, "flow_link_indptr", _readonly(indptr))
        object.__setattr__(self, "flow_link_indices", _readonly(indices))
        object.__setattr__(self, "flow_link_weights", _readonly(weights))
        object.__setattr__(self, "flow_demand_Bps", None if demand is None else _readonly(demand))

    @classmethod
    def built(
        cls,
        flow_link_indptr: np.ndarray,
        flow_link_indices: np.ndarray,
        flow_link_weights: np.ndarray,
        n_links: int,
        max_weight: float = 1.0,
        flow_demand_Bps: np.ndarray | None = None,
    ) -> FlowSet:
        """Return a flow set a router built in the stored dtypes, without the field checks.

        For arrays made by construction (link ids from the router's own numbering, weights
        from fixed fractions), where the checks cost as much as routing (a dragonfly+
        all-to-all: 5M entries). The arrays must already be int64, int32 and float64;
        with :data:`CHECK_BUILT` (the tests) every check runs as for a new flow set.
        """
        if CHECK_BUILT:
            return cls(
                flow_link_indptr,
                flow_link_indices,
                flow_link_weights,
                n_links,
                flow_demand_Bps,
                max_weight=max_weight,
            )
        fs = object.__new__(cls)
        for name, value in (
            ("n_links", int(n_links)),
            ("flow_link_indptr", _readonly(np.ascontiguousarray(flow_link_indptr, np.int64))),
            ("flow_link_indices", _readonly(np.ascontiguousarray(flow_link_indices, np.int32))),
            ("flow_link_weights", _readonly(np.ascontiguousarray(flow_link_weights, np.float64))),
            (
                "flow_demand_Bps",
                None
                if flow_demand_Bps is None
                else _readonly(np.ascontiguousarray(flow_demand_Bps, np.float64)),
            ),
            ("max_weight", max_weight),
        ):
            object.__setattr__(fs, name, value)
        return fs

    @staticmethod
    def _flow_of_entry(indptr: np.ndarray, entry: int) -> int:
        return int(np.searchsorted(indptr, entry, side="right")) - 1

    @property
    def n_flows(self) -> int:
        """Number of flows."""
        return int(self.flow_link_indptr.size - 1)

    @property
    def nnz(self) -> int:
        """Number of (flow, link) entries."""
        return int(self.flow_link_indices.size)


def flowset_from_paths(
    paths: Sequence[Sequence[PathEntry]],
    n_links: int,
    demand_Bps: Sequence[float] | npt.ArrayLike | None = None,
) -> FlowSet:
    """Build a :class:`FlowSet` from one sequence of hops per flow.

    Parameters
    ----------
    paths : sequence of sequences
        One entry per flow; each is a sequence of hops, a hop being a link id (weight 1.0) or
        a ``(link_id, weight)`` pair with the weight dimensionless in (0, 1]. Repeats of a link
        within a flow are merged by adding their weights (the merged weight must still be
        <= 1). An empty sequence is a flow that crosses no link.
    n_links : int
        Number of directed links; ids must lie in ``[0, n_links)``.
    demand_Bps : sequence of float, optional
        Rate cap of each flow, bytes/s (``inf`` = uncapped).

    Returns
    -------
    FlowSet
        The flows, with links kept in order of first appearance.

    Raises
    ------
    FabricModelError
        If a hop is malformed or the result fails :class:`FlowSet` validation.

    Examples
    --------
    A flow sprayed over two spine uplinks (links 1 and 2) after its NIC link 0:

    >>> fs = flowset_from_paths([[0, (1, 0.5), (2, 0.5)]], n_links=3)
    >>> fs.flow_link_weights.tolist()
    [1.0, 0.5, 0.5]
    """
    indptr = [0]
    indices: list[int] = []
    weights: list[float] = []
    for f, path in enumerate(paths):
        merged: dict[int, float] = {}  # insertion-ordered
        for hop in path:
            link, weight = _parse_hop(f, hop)
            merged[link] = merged.get(link, 0.0) + weight
        indices.extend(merged)
        weights.extend(merged.values())
        indptr.append(len(indices))
    demand = None if demand_Bps is None else np.asarray(demand_Bps, dtype=np.float64)
    return FlowSet(
        flow_link_indptr=np.asarray(indptr, dtype=np.int64),
        flow_link_indices=np.asarray(indices, dtype=np.int64),
        flow_link_weights=np.asarray(weights, dtype=np.float64),
        n_links=n_links,
        flow_demand_Bps=demand,
    )


def _parse_hop(flow: int, hop: object) -> tuple[int, float]:
    if isinstance(hop, numbers.Integral) and not isinstance(hop, bool):
        return int(hop), 1.0
    if isinstance(hop, Sequence) and not isinstance(hop, str) and len(hop) == 2:
        link, weight = hop
        if (
            isinstance(link, numbers.Integral)
            and not isinstance(link, bool)
            and isinstance(weight, numbers.Real)
            and not isinstance(weight, bool)
        ):
            return int(link), float(weight)
    raise FabricModelError(
        f"flow {flow}: hop {hop!r} must be a link id or a (link_id, weight) pair"
    )


@dataclass(frozen=True, eq=False)
class FlowSolution:
    """Max-min fair rates of a :class:`FlowSet` on given link capacities.

    Parameters
    ----------
    rate_Bps : float64 array, shape (n_flows,)
        Rate granted to each flow, bytes/s.
    link_load_Bps : float64 array, shape (n_links,)
        Traffic on each link, ``sum_f w[f, l] * rate_Bps[f]``, bytes/s.
    link_capacity_Bps : float64 array, shape (n_links,)
        The capacities solved for, bytes/s.
    bottleneck_link : int32 array, shape (n_flows,)
        The saturated link that froze each flow; -1 if the flow is demand-limited (its rate
        equals its demand) or crosses no link.
    n_rounds : int
        Number of filling rounds (distinct levels at which flows froze).
    """

    rate_Bps: np.ndarray
    link_load_Bps: np.ndarray
    link_capacity_Bps: np.ndarray
    bottleneck_link: np.ndarray
    n_rounds: int

    @property
    def n_flows(self) -> int:
        """Number of flows."""
        return int(self.rate_Bps.size)

    @property
    def n_links(self) -> int:
        """Number of links."""
        return int(self.link_load_Bps.size)

    @property
    def utilization(self) -> np.ndarray:
        """Load over capacity per link, dimensionless, in [0, 1] up to rounding."""
        return np.asarray(self.link_load_Bps / self.link_capacity_Bps)

    @property
    def demand_limited(self) -> np.ndarray:
        """Boolean mask of the flows limited by their demand rather than by a link."""
        return np.asarray(self.bottleneck_link < 0)

    @property
    def min_rate_Bps(self) -> float:
        """Lowest flow rate, bytes/s (``inf`` when there are no flows)."""
        return float(self.rate_Bps.min()) if self.rate_Bps.size else math.inf

    def to_dict(self) -> dict[str, Any]:
        """Return plain Python values (lists, floats, ints), ready for JSON.

        Returns
        -------
        dict
            Keys ``rate_Bps``, ``link_load_Bps``, ``link_capacity_Bps``, ``utilization``,
            ``bottleneck_link``, ``n_rounds``, ``min_rate_Bps``.
        """
        return {
            "rate_Bps": self.rate_Bps.tolist(),
            "link_load_Bps": self.link_load_Bps.tolist(),
            "link_capacity_Bps": self.link_capacity_Bps.tolist(),
            "utilization": self.utilization.tolist(),
            "bottleneck_link": self.bottleneck_link.tolist(),
            "n_rounds": self.n_rounds,
            "min_rate_Bps": self.min_rate_Bps,
        }


def solve_maxmin(
    flows: FlowSet,
    link_capacity_Bps: npt.ArrayLike,
    *,
    reference: bool = False,
) -> FlowSolution:
    """Compute weighted max-min fair flow rates by progressive filling.

    Parameters
    ----------
    flows : FlowSet
        The flows, their links and weights, and optional demands.
    link_capacity_Bps : array_like of float, shape (n_links,)
        Capacity of each directed link, bytes/s, finite and > 0.
    reference : bool, default False
        Run the slow, readable pure-NumPy twin instead of the numba kernel (for tests and
        benchmarks; the results agree to about 1e-9 relative).

    Returns
    -------
    FlowSolution
        Rates, link loads, bottleneck links and the number of filling rounds.

    Raises
    ------
    FabricModelError
        If ``link_capacity_Bps`` has the wrong shape or a value that is not finite and > 0.

    Notes
    -----
    Flow ``f`` puts a fraction ``w[f, l]`` of its rate ``r_f`` on link ``l``; the rates must
    satisfy ``sum_f w[f, l] r_f <= c_l`` and ``r_f <= d_f`` (demand). The weighted max-min
    fair allocation is found by progressive filling [1]_: all unfrozen flows grow at the
    same rate from zero; a flow freezes when it reaches its demand, and when a link
    saturates every unfrozen flow crossing it freezes; repeat until every flow is frozen.
    At the end every flow that is not demand-limited crosses a saturated link on which no
    other flow has a higher rate (its bottleneck), which characterises max-min fairness.

    A link counts as saturated once the level at which it would saturate is within
    ``REL_TOL = 1e-9`` (relative) of the current level, so its residual capacity is at most
    1e-9 of its capacity; this groups links that tie in exact arithmetic but not in floating
    point. The kernel keeps links in a heap keyed by the level at which each would saturate,
    so a solve costs O(nnz log n_links + n_flows log n_flows) whatever the number of rounds.

    References
    ----------
    .. [1] D. Bertsekas and R. Gallager, *Data Networks*, 2nd ed., Prentice Hall, 1992,
       section 6.5.2, "Max-min fairness" (progressive filling).

    Examples
    --------
    Two flows share link 0 (capacity 10 bytes/s); the second also crosses link 1 (4 bytes/s):

    >>> fs = flowset_from_paths([[0], [0, 1]], n_links=2)
    >>> solve_maxmin(fs, [10.0, 4.0]).rate_Bps.tolist()
    [6.0, 4.0]
    """
    capacity = _as_float_array("link_capacity_Bps", link_capacity_Bps).copy()  # a value
    if capacity.size != flows.n_links:
        raise FabricModelError(
            f"link_capacity_Bps has {capacity.size} entries, the flow set has "
            f"n_links = {flows.n_links}"
        )
    bad = ~(np.isfinite(capacity) & (capacity > 0.0))
    if np.any(bad):
        link = _first(bad)
        raise FabricModelError(
            f"link_capacity_Bps[{link}] = {float(capacity[link])!r} must be finite and > 0 bytes/s"
        )

    demand = (
        np.full(flows.n_flows, np.inf)
        if flows.flow_demand_Bps is None
        else np.ascontiguousarray(flows.flow_demand_Bps)
    )
    rate_Bps = np.empty(flows.n_flows)
    link_load_Bps = np.empty(flows.n_links)
    bottleneck_link = np.empty(flows.n_flows, dtype=np.int32)
    from fabric_model.flows import _kernels  # numba, loaded on first use

    fill = _reference.maxmin_fill if reference else _kernels.maxmin_fill
    n_rounds = fill(
        flows.flow_link_indptr,
        flows.flow_link_indices,
        flows.flow_link_weights,
        capacity,
        demand,
        rate_Bps,
        link_load_Bps,
        bottleneck_link,
    )
    return FlowSolution(
        rate_Bps=_readonly(rate_Bps),
        link_load_Bps=_readonly(link_load_Bps),
        link_capacity_Bps=_readonly(capacity),
        bottleneck_link=_readonly(bottleneck_link),
        n_rounds=int(n_rounds),
    )
