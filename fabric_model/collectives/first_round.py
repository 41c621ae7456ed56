"""A pattern's slowest connection from the max-min solve's first round, without the rest.

The collective layer reads three things from a solved pattern: the slowest connection's rate
(per ECMP seed), the link class that froze it (first seed) and the switch hops (from the
routing). Progressive filling (:func:`fabric_model.flows.solve_maxmin`) raises every flow's
rate together until the first link saturates, at

``t1 = min_l c_l / W_l``, ``W_l`` = the summed weight of the flows crossing link ``l``;

every flow on a link saturated in that round (fill level within ``REL_TOL`` of ``t1``)
freezes at exactly ``t1``, and every later round's level is higher (freezing flows at the
current level never lowers a link's fill level, and the links within ``REL_TOL`` of it
saturated in round one). So the slowest rate is ``t1``, and the flow ``argmin`` of the solved
rates picks is the lowest-numbered flow crossing a round-one link; the link that froze it is
the first round-one link the kernel pops among those it crosses. :func:`first_round` computes
``t1`` with the kernel's own arithmetic (each link's weights summed in entry order, as the
kernel sums them; then ``c / W``), so the rate is bit for bit the full solve's. The kernel
takes round one's links from a heap keyed by fill level, so the worst flow's bottleneck is
the one of smallest fill level among its round-one links; a tie there (links of different
classes at exactly one level, as on a non-blocking fat-tree) is resolved by building the
solver's heap and popping it until one of them comes up (:mod:`._heap_order`). The mean
connection rate needs every round: :class:`DeferredMean` solves it in full only if it is
read (no figure of the model reads it).
``tests/test_speed_paths.py`` holds all of this equal to the full solve; the shortcut is
off with ``fast_paths(first_round=False)`` (:mod:`fabric_model._fastpaths`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from fabric_model._fastpaths import shortcuts
from fabric_model.collectives._reference import first_popped_py
from fabric_model.collectives.model import PatternResult
from fabric_model.flows import FlowSet
from fabric_model.flows._tolerance import REL_TOL
from fabric_model.routing.base import ColumnRouted

__all__ = [
    "PY_HEAP_MAX_LINKS",
    "DeferredMean",
    "FirstRound",
    "class_flows",
    "first_round",
    "slowest",
    "slowest_routed",
    "weighted_flows",
]


def _kernels() -> ModuleType:
    """Return the first round's numba kernels, imported on first use (no compiler until then)."""
    from fabric_model.collectives import _kernels as kernels

    return kernels


@dataclass(frozen=True)
class FirstRound:
    """The first filling round of a max-min solve.

    Attributes
    ----------
    level_Bps : float
        Rate at which the first links saturate: the smallest rate of the solve, bytes/s.
    worst_flow : int
        The flow ``argmin`` of the solved rates returns (lowest index at that rate).
    worst_links : np.ndarray
        The links saturated in round one that the worst flow crosses (one froze it).
    worst_fill_Bps : np.ndarray
        Their fill levels ``c / W``: the kernel takes round one's links from its heap in
        this order, so the first of the smallest froze the worst flow.
    used_links : np.ndarray
        Every link a flow crosses, ascending (the solver's heap holds these).
    used_fill_Bps : np.ndarray
        Their fill levels; :attr:`fill_Bps` spreads them over all ``n_links``.
    n_links : int
        Links of the capacity vector.
    """

    level_Bps: float
    worst_flow: int
    worst_links: np.ndarray
    worst_fill_Bps: np.ndarray
    used_links: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0, np.int64))
    used_fill_Bps: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    n_links: int = 0

    @property
    def fill_Bps(self) -> np.ndarray:
        """Every link's fill level ``c / W`` (``inf`` where no flow crosses)."""
        fill = np.full(self.n_links, np.inf)
        fill[self.used_links] = self.used_fill_Bps
        return fill

    def bottleneck_candidates(self) -> np.ndarray:
        """Return the links that may have frozen the worst flow (smallest fill level).

        The kernel collects round one's links from a heap keyed by fill level before it
        freezes anything, then freezes each one's flows in that order; only links tied at
        the smallest level leave the order to the heap's layout.
        """
        fill = self.worst_fill_Bps
        return self.worst_links[fill == fill.min()]

    def bottleneck_link(self) -> int:
        """Return the link that froze the worst flow, as the solver's heap orders a tie."""
        cands = self.bottleneck_candidates()
        if cands.size == 1:
            return int(cands[0])
        mark = np.zeros(self.n_links, dtype=bool)
        mark[cands] = True
        fill = self.fill_Bps
        if self.used_links.size <= PY_HEAP_MAX_LINKS:  # no compiler for a small fabric
            return first_popped_py(fill, mark)
        from fabric_model.collectives._heap_order import first_popped

        return int(first_popped(fill, mark))


#: Up to this many links in the heap :func:`first_popped_py` answers (a few ms in Python), so a
#: small design's step (the default's pipeline sends) starts without loading numba.
PY_HEAP_MAX_LINKS = 20_000


@dataclass(frozen=True)
class Appended:
    """Capacities ``base`` then ``extra`` as one vector, without copying ``base``.

    A class solve's capacity: the fabric's links (millions) and each class's aggregate NIC
    links (thousands). :func:`first_round` reads the entries its sparse sums need;
    ``np.asarray`` gives the whole vector.
    """

    base: np.ndarray
    extra: np.ndarray

    @property
    def size(self) -> int:
        """Entries of the whole vector."""
        return int(self.base.size + self.extra.size)

    def __getitem__(self, idx: np.ndarray) -> np.ndarray:
        """Return the entries at the (integer) indices ``idx``."""
        idx = np.asarray(idx, dtype=np.int64)
        n = self.base.size
        low = idx < n
        out = np.empty(idx.size)
        out[low] = self.base[idx[low]]
        out[~low] = self.extra[idx[~low] - n]
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """Return the whole vector (a copy)."""
        return np.concatenate([self.base, self.extra]).astype(dtype or np.float64)

    def all_positive_finite(self) -> bool:
        """Whether every entry is finite and > 0 (the solver refuses any other)."""
        return _positive_finite(self.base) and _positive_finite(self.extra)


def _positive_finite(cap: np.ndarray) -> bool:
    """All finite and > 0, in two reductions (a NaN fails both comparisons)."""
    return not cap.size or (float(cap.min()) > 0.0 and float(cap.max()) < np.inf)


#: A pattern with fewer path entries than ``SPARSE_FRACTION`` x the links (a class solve: a
#: few thousand flows on a million links) sums its loads over the links it crosses only; the
#: same sums in the same order (``tests/test_speed_paths.py``). 0: always dense.
SPARSE_FRACTION = 0.25


def _first_of(
    level_links: np.ndarray,
    weight: np.ndarray,
    cap: np.ndarray | Appended,
) -> tuple[float, np.ndarray, np.ndarray, np.ndarray] | None:
    """Fill levels of the links ``level_links`` with summed ``weight``: (t1, used, fill, sat)."""
    keep = weight > 0.0  # every weight is > 0: a link carries weight iff a flow crosses it
    if not keep.any():
        return None
    used = level_links[keep]
    fill = cap[used] / weight[keep]
    level = max(0.0, float(fill.min()))
    return level, used, fill, fill <= level * (1.0 + REL_TOL)


def first_round(
    flows: Any, link_capacity_Bps: np.ndarray | Appended, flow_weight: np.ndarray | None = None
) -> FirstRound | None:
    """Return the first round of ``solve_maxmin(flows, link_capacity_Bps)``, or None.

    ``flows`` is a :class:`~fabric_model.flows.FlowSet`, or a routed pattern that sums its
    own link loads in the solver's order (``link_loads(flow_weight)`` and
    ``first_flow_on(marked)``, as :class:`~fabric_model.routing.fat_tree.EcmpWalk`), then
    with each flow's weights scaled by ``flow_weight``. None where the shortcut does not
    apply and the caller must solve in full: flows with demands, no flow crossing a link,
    or a capacity the solver would refuse (it then raises as it always has).

    A flow set or a :class:`~fabric_model.routing.base.ColumnRouted` pattern with few
    entries for its links (:data:`SPARSE_FRACTION`) is summed over the links it crosses
    only: each link's weights in the same order, so the same sums bit for bit.
    """
    if isinstance(link_capacity_Bps, Appended):
        cap: Any = link_capacity_Bps
        if not cap.all_positive_finite():
            return None
    else:
        cap = np.asarray(link_capacity_Bps, dtype=np.float64)
        if not _positive_finite(cap):
            return None
    if isinstance(flows, ColumnRouted) and flows.n_space == cap.size:
        if flows.n_flows * len(flows.columns) < SPARSE_FRACTION * cap.size:
            links, weight = flows.used_link_loads(flow_weight)
            got = _first_of(links, weight, cap)
            if got is None:
                return None
            level, used, fill, sat = got
            mark = np.zeros(cap.size, dtype=bool)
            mark[used[sat]] = True
            worst, wl = flows.first_flow_on(mark)
            return _result(level, worst, wl.astype(np.int64), used, fill, cap.size)
    walked = hasattr(flows, "link_loads")
    if not walked:
        idx = flows.flow_link_indices
        if flows.flow_demand_Bps is not None or idx.size == 0 or flows.n_links > cap.size:
            return None
        fw = np.zeros(0) if flow_weight is None else np.ascontiguousarray(flow_weight, float)
        if idx.size < SPARSE_FRACTION * cap.size:
            # the kernel's sums over the crossed links only, renumbered in link order
            links, inverse = np.unique(idx, return_inverse=True)
            compact = np.ascontiguousarray(inverse.ravel(), np.int32)
            compact.flags.writeable = False
            weight = np.zeros(links.size)
            _kernels().link_weights(
                flows.flow_link_indptr, compact, flows.flow_link_weights, fw, weight
            )
            got = _first_of(links.astype(np.int64), weight, cap)
            if got is None:
                return None
            level, used, fill, sat = got
            on = np.zeros(links.size, dtype=bool)
            on[np.searchsorted(links, used[sat])] = True
            on.flags.writeable = False
            entry = int(_kernels().first_entry_on(compact, on))
            return _entry_result(flows, entry, level, used, fill, cap.size)
    cap = np.asarray(cap, dtype=np.float64)  # every link's: the whole vector
    if walked:
        weight = flows.link_loads(flow_weight)
    else:
        # the kernel's unfrozen weight per link: a sequential sum in entry order, as
        # bincount's, each entry times its flow's weight (weighted_flows' entries, unbuilt)
        weight = np.zeros(max(cap.size, flows.n_links))
        _kernels().link_weights(flows.flow_link_indptr, idx, flows.flow_link_weights, fw, weight)
        weight = weight[: cap.size]
    if weight.size != cap.size:
        return None
    got = _first_of(np.arange(cap.size), weight, cap)
    if got is None:
        return None
    level, used, fill, sat = got
    saturated = np.zeros(cap.size, dtype=bool)
    saturated[used[sat]] = True
    if walked:
        worst, links = flows.first_flow_on(saturated)
        return _result(level, worst, links.astype(np.int64), used, fill, cap.size)
    entry = int(_kernels().first_entry_on(idx, saturated))  # first on a saturated link
    return _entry_result(flows, entry, level, used, fill, cap.size)


def _entry_result(
    flows: FlowSet,
    entry: int,
    level: float,
    used: np.ndarray,
    fill: np.ndarray,
    n_links: int,
) -> FirstRound:
    """Return the first round whose worst flow holds flow-set entry ``entry``."""
    worst = int(np.searchsorted(flows.flow_link_indptr, entry, side="right")) - 1
    indptr = flows.flow_link_indptr
    links = flows.flow_link_indices[indptr[worst] : indptr[worst + 1]].astype(np.int64)
    return _result(level, worst, links, used, fill, n_links)


def _result(
    level: float,
    worst: int,
    links: np.ndarray,
    used: np.ndarray,
    fill: np.ndarray,
    n_links: int,
) -> FirstRound:
    """Keep the worst flow's round-one links (those of smallest fill in ``used``)."""
    pos = np.searchsorted(used, links)
    pos = np.minimum(pos, used.size - 1)
    crossed = used[pos] == links
    on = np.zeros(links.size, dtype=bool)
    on[crossed] = fill[pos[crossed]] <= level * (1.0 + REL_TOL)
    return FirstRound(level, int(worst), links[on], fill[pos[on]], used, fill, n_links)


def slowest(
    flows: Any,
    link_capacity_Bps: np.ndarray | Appended,
    flow_fraction: np.ndarray | float,
    name: Callable[[int], str],
    need_name: bool = True,
    flow_weight: np.ndarray | None = None,
) -> tuple[float, str] | None:
    """Return the slowest connection's rate and its bottleneck's name, or None.

    The rate is ``min`` over connections of ``min`` over their flows of ``rate /
    flow_fraction``: with one fraction for every flow (queue pairs of ECMP, one flow per
    class), the first round's level over that fraction. ``name`` labels a link id; with
    ``need_name`` the label is that of the worst flow's bottleneck
    (:meth:`FirstRound.bottleneck_link`). None where :func:`first_round` is, and with the
    shortcut off (``FastPaths.first_round``).
    """
    if not shortcuts().first_round:
        return None
    frac = np.asarray(flow_fraction, dtype=np.float64).ravel()
    if frac.size == 0 or not np.all(frac == frac[0]):
        return None
    first = first_round(flows, link_capacity_Bps, flow_weight)
    if first is None:
        return None
    label = ""
    if need_name:
        names = {name(int(link)) for link in first.bottleneck_candidates()}
        # links of different classes tied at the smallest level: the heap's order decides
        label = names.pop() if len(names) == 1 else name(first.bottleneck_link())
    return float(first.level_Bps / frac[0]), label


def weighted_flows(rf: Any, demand: np.ndarray | None) -> FlowSet:
    """Return a routed pattern's flow set, each flow's weights times its connection's demand.

    The progress-fair form :meth:`~fabric_model.collectives.context.FabricContext.solve`
    solves (``demand`` None: the plain flows).
    """
    flows: FlowSet = rf.flows
    if demand is None:
        return flows
    lengths = np.diff(flows.flow_link_indptr)
    per_flow = demand[rf.flow_of_connection]
    return FlowSet.built(
        flows.flow_link_indptr,
        flows.flow_link_indices,
        flows.flow_link_weights * np.repeat(per_flow, lengths),
        flows.n_links,
        max_weight=np.inf,
    )


def class_flows(
    rf: Any, up: np.ndarray, down: np.ndarray, members: np.ndarray, n_links: int
) -> Any:
    """Return a class-aggregated solve's flows: NIC links renumbered, weights x members.

    ``rf`` routes one representative connection per class; its entries on the
    representative's NIC up link ``up[c]`` (down link ``down[c]``) move to link
    ``n_base + c`` (``n_base + n_classes + c``), the class's aggregate NIC links, and every
    weight is multiplied by the class's ``members``
    (:meth:`~fabric_model.collectives.context.FabricContext._solve_by_class`). A
    :class:`~fabric_model.routing.base.ColumnRouted` stays one (slot by slot, the same
    renumbering), so the first round never builds its flow set; else a flow set.
    """
    n_base = rf.link_capacity_Bps.size
    n_cls = up.size
    if isinstance(rf, ColumnRouted):
        cls = np.arange(n_cls, dtype=np.int64)
        cols = [
            np.where(col == up, n_base + cls, np.where(col == down, n_base + n_cls + cls, col))
            for col in rf.columns
        ]
        return ColumnRouted(
            cols,
            n_links,
            link_capacity_Bps=rf.link_capacity_Bps,
            link_class=rf.link_class,
            class_names=rf.class_names,
            switch_hops=rf.switch_hops,
            policy=rf.policy,
            flow_weight=members.astype(np.float64),
        )
    fl = rf.flows
    lengths = np.diff(fl.flow_link_indptr)
    row = np.repeat(np.arange(lengths.size), lengths)
    conn = rf.flow_of_connection[row]
    idx = fl.flow_link_indices.astype(np.int64).copy()
    is_up = idx == up[conn]
    is_dn = idx == down[conn]
    idx[is_up] = n_base + conn[is_up]
    idx[is_dn] = n_base + n_cls + conn[is_dn]
    return FlowSet.built(
        fl.flow_link_indptr,
        idx,
        fl.flow_link_weights * members[conn],
        n_links,
        max_weight=np.inf,
    )


def slowest_routed(
    rf: Any, demand: np.ndarray | None, name: Callable[[int], str], need_name: bool
) -> tuple[float, str] | None:
    """:func:`slowest` of a routed pattern solved progress-fair on ``demand`` (or plain).

    A pattern that sums its own loads (:func:`first_round`) is never turned into a flow
    set here.
    """
    if not shortcuts().first_round:
        return None
    per_flow = None if demand is None else demand[rf.flow_of_connection]
    if hasattr(rf, "link_loads"):
        return slowest(rf, rf.link_capacity_Bps, rf.uniform_fraction, name, need_name, per_flow)
    # weighted_flows(rf, demand)'s entries, summed without building (and checking) its flow set
    return slowest(rf.flows, rf.link_capacity_Bps, rf.flow_fraction, name, need_name, per_flow)


class DeferredMean(PatternResult):
    """A :class:`PatternResult` whose mean connection rate is solved in full when read.

    Every other field is the full solve's (see the module docstring); ``full()`` returns the
    fully solved result, called at most once.
    """

    def __init__(
        self,
        min_rate_Bps: np.ndarray,
        bottleneck: str,
        mean_switch_hops: float,
        max_switch_hops: int,
        full: Callable[[], PatternResult | None],
    ) -> None:
        object.__setattr__(self, "min_rate_Bps", min_rate_Bps)
        object.__setattr__(self, "bottleneck", bottleneck)
        object.__setattr__(self, "mean_switch_hops", mean_switch_hops)
        object.__setattr__(self, "max_switch_hops", max_switch_hops)
        object.__setattr__(self, "_full", full)

    @property  # type: ignore[override]
    def mean_rate_Bps(self) -> float:
        """Mean connection rate, averaged over seeds (solved in full on first read)."""
        state: dict[str, Any] = self.__dict__
        if "_mean" not in state:
            full = state["_full"]()
            object.__setattr__(self, "_mean", math.nan if full is None else full.mean_rate_Bps)
        return float(state["_mean"])

    def __eq__(self, other: object) -> bool:
        """Equal to a result (deferred or not) with the same fields."""
        if not isinstance(other, PatternResult):
            return NotImplemented
        return (
            np.array_equal(self.min_rate_Bps, other.min_rate_Bps)
            and self.bottleneck == other.bottleneck
            and self.mean_switch_hops == other.mean_switch_hops
            and self.max_switch_hops == other.max_switch_hops
            and self.mean_rate_Bps == other.mean_rate_Bps
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        """Show the fields without solving the mean for it."""
        mean = self.__dict__.get("_mean", "deferred")
        return (
            f"DeferredMean(min_rate_Bps={self.min_rate_Bps!r}, mean_rate_Bps={mean}, "
            f"bottleneck={self.bottleneck!r}, mean_switch_hops={self.mean_switch_hops!r}, "
            f"max_switch_hops={self.max_switch_hops!r})"
        )
