"""What a running job sends on the scale-out network: its parallel dimensions on its nodes.

A job's ranks sit on its nodes in order (rank ``r`` on node ``nodes[r // gpus_per_node]``,
GPU ``r % gpus_per_node``) and are grouped as the training step groups them, by Megatron-LM's
layout (:class:`fabric_model.training.layout.Layout`: ``tp`` innermost, then ``cp``, ``ep``,
``pp``, data parallel outermost), so a dimension's groups here are the communicators the
step timed. Each dimension contributes the connections of its dominant pattern that leave an
NVLink domain (a connection between two GPUs of one domain runs on NVLink):

- ``dp``, ``cp``, ``tp`` (all-reduce, reduce-scatter, all-gather): NCCL's rail-matched ring
  over the group's NVLink domains: the ``j``-th member of each domain (in group order) sends
  to the ``j``-th member of the next domain, each of its NICs to the same NIC (the ring the
  collectives model times, :mod:`fabric_model.collectives.algorithms`). A ``tp`` group inside
  a domain (the usual plan) sends nothing on the network.
- ``pp`` (the 1F1B sends): each stage's GPU to the same group's next stage, each NIC to the
  same NIC, as :meth:`fabric_model.training.fabric.DimensionFabric.p2p` times them.
- ``ep`` (all-to-all, in the expert layout when EP folds over CP x DP): rail-matched with
  PXN (NCCL's default on rail-optimized fabrics: data for a GPU of another domain first moves
  over NVLink to the local GPU on that GPU's rail): the ``j``-th member of each domain sends
  to the ``j``-th member of every other domain.

On a rail-only fabric a connection between different rails first moves over NVLink to the
GPU on the destination's rail, as :meth:`fabric_model.training.layout.GroupContext.solve`
does.

**Weights.** A job moves its dimensions' bytes in turn (a layer's TP or EP exchange, then the
pipeline send, the data-parallel buckets behind the backward pass), so on a link its
dimensions add up to one connection's worth at most: dimension ``d``'s connections carry the
share ``w_d = comm_d / sum(comm)`` of the job's network time, ``comm_d`` its communication
seconds per step in the training model (:attr:`fabric_model.training.result.StepResult.comm_s`)
over the dimensions that leave an NVLink domain on this placement. In the max-min solve a
connection at rate ``r`` loads each link it crosses by ``w_d x r``. Each connection's rate is
capped at its NIC's share: the capacity of its source's up link and destination's down link
over the most connections of its dimension either NIC sends or receives (1 for a ring or a
send; ``k - 1`` in an all-to-all over ``k`` domains). So a NIC link carries at most
``sum_d w_d x capacity <= capacity`` and never binds: the links a job can share with others
(switch-to-switch) are the only ones its rates depend on, and a connection between two NICs
of one switch runs at its cap.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fabric_model.collectives.algorithms import receive_weights
from fabric_model.training.layout import Layout
from fabric_model.training.step import StepResult

__all__ = ["KINDS", "JobPattern", "TrafficShape", "job_pattern"]

#: The pattern each dimension's communication takes on the network.
KINDS = {"tp": "ring", "cp": "ring", "dp": "ring", "pp": "send", "ep": "alltoall"}


@dataclass(frozen=True)
class TrafficShape:
    """A job's rank layout and its communication seconds per dimension (hashable: a cache key).

    Attributes
    ----------
    layout : Layout
        The ranks' layout (``dp = ep x edp``).
    expert_layout : Layout
        The layout the expert all-to-all sees (EP folded over CP x DP when EP does not divide
        DP; else ``layout``).
    comm_s : tuple of (dimension, seconds)
        Each dimension's communication seconds per step (positive only), as the training
        model times it on the job's own contiguous fabric.
    pause_share : float
        Share of the job's step its expert all-to-all's hot receivers' ports hold PFC pause
        (:attr:`~fabric_model.training.result.StepResult.pfc_pause_s` over the step time; 0
        without an incast on a PFC transport).
    hot : tuple of int
        Positions, in each expert-parallel group, of the hot receivers (the GPUs hosting hot
        experts, :func:`~fabric_model.collectives.algorithms.receive_weights`): the ports
        that pause.
    """

    layout: Layout
    expert_layout: Layout
    comm_s: tuple[tuple[str, float], ...]
    pause_share: float = 0.0
    hot: tuple[int, ...] = ()

    @property
    def n_gpus(self) -> int:
        """GPUs of the job."""
        return self.layout.n_gpus

    @classmethod
    def from_step(
        cls, step: StepResult, routing_skew: float = 1.0, hot_fraction: float = 0.0
    ) -> TrafficShape:
        """Return the shape of a feasible training step (its plan's layouts and ``comm_s``).

        ``routing_skew`` and ``hot_fraction``: the step's ``model.*`` hot-expert skew, which
        places the pausing ports (:attr:`hot`) when its expert all-to-all paused some.
        """
        if step.plan is None:
            raise ValueError("an infeasible step has no traffic")
        comm = tuple((d, float(s)) for d, s in sorted(step.comm_s.items()) if d in KINDS and s > 0)
        pause = step.pfc_pause_s.get("ep", 0.0) / step.step_time_s
        if pause <= 0 or "ep" not in dict(comm):
            return cls(step.plan.layout, step.plan.expert_layout, comm)
        w = receive_weights(step.plan.expert_layout.size("ep"), routing_skew, hot_fraction)
        hot = tuple(int(i) for i in np.flatnonzero(w >= w.max() * (1 - 1e-9)))
        return cls(step.plan.layout, step.plan.expert_layout, comm, float(pause), hot)

    @classmethod
    def data_parallel(cls, gpus: int, tp: int = 1) -> TrafficShape:
        """Return a data-parallel job of ``gpus`` GPUs (TP ``tp`` inside each node): one ring."""
        return cls(
            Layout(tp=tp, cp=1, ep=1, pp=1, edp=gpus // tp),
            Layout(tp=tp, cp=1, ep=1, pp=1, edp=gpus // tp),
            (("dp", 1.0),),
        )


@dataclass(frozen=True, eq=False)
class JobPattern:
    """The connections a job sends on the network on one placement (see the module docstring).

    ``src``, ``dst``: NIC endpoints (``gpu x nics + nic``); ``dim``: each connection's index
    into ``dims``; ``split``: its share of its NICs (the rate cap over the NIC's capacity);
    ``share``: each dimension's weight ``w_d`` (they add up to 1); ``hot``: whether the
    connection ends at a port that holds PFC pause (:attr:`TrafficShape.hot`; empty: none),
    ``pause_share`` the share of the time it does (:attr:`TrafficShape.pause_share`).
    """

    dims: tuple[str, ...]
    share: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    dim: np.ndarray
    split: np.ndarray
    hot: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    pause_share: float = 0.0

    @property
    def n_connections(self) -> int:
        """Connections of the pattern."""
        return int(self.src.size)


def _domains_in_rows(dom: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return each member's domain rank in its row, its position in that domain, domains per row.

    A row's domains are ranked by first appearance; a member's position counts the row's
    earlier members in the same domain.
    """
    g, s = dom.shape
    row = np.repeat(np.arange(g, dtype=np.int64), s)
    span = int(dom.max()) + 1
    key = row * span + dom.ravel()
    uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
    urow = uniq // span
    order = np.lexsort((first, urow))
    rank_u = np.empty(order.size, dtype=np.int64)
    rank_u[order] = np.arange(order.size)
    n_dom = np.bincount(urow, minlength=g)
    row_start = np.cumsum(n_dom) - n_dom
    drank = rank_u[inv] - row_start[row]
    cnt = np.bincount(inv, minlength=uniq.size)
    o = np.argsort(inv, kind="stable")
    pos = np.empty(g * s, dtype=np.int64)
    pos[o] = np.arange(g * s) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    return drank, pos, n_dom


def _ring_or_alltoall(gpus: np.ndarray, dom: np.ndarray, alltoall: bool) -> np.ndarray:
    """GPU pairs (2, n) of the rail-matched ring (or all-to-all) over each row's domains."""
    g, s = gpus.shape
    drank, pos, n_dom = _domains_in_rows(dom)
    row = np.repeat(np.arange(g, dtype=np.int64), s)
    d_max, p_max = int(n_dom.max()), int(pos.max()) + 1
    if d_max < 2:
        return np.zeros((2, 0), dtype=np.int64)
    table = np.full((g, d_max, p_max), -1, dtype=np.int64)
    flat = gpus.ravel()
    table[row, drank, pos] = flat
    nd = n_dom[row]
    steps = range(1, d_max) if alltoall else (1,)
    src, dst = [], []
    for k in steps:
        ok = nd > k if alltoall else nd >= 2
        target = table[row[ok], (drank[ok] + k) % nd[ok], pos[ok]]
        hit = target >= 0
        src.append(flat[ok][hit])
        dst.append(target[hit])
    return np.stack([np.concatenate(src), np.concatenate(dst)])


def _groups(layout: Layout, dim: str) -> np.ndarray:
    """Ranks of every group of ``dim`` (rows), in group order."""
    return layout.offsets(dim)[:, None] + layout.members(dim)[None, :]


def job_pattern(
    shape: TrafficShape,
    nodes: np.ndarray,
    gpus_per_node: int,
    nics: int,
    servers_per_domain: int,
    rail_only: bool = False,
) -> JobPattern:
    """Return the job's network connections on ``nodes`` (see the module docstring)."""
    nodes = np.asarray(nodes, dtype=np.int64)
    gpn = gpus_per_node
    rank = np.arange(shape.n_gpus, dtype=np.int64)
    gpu_of = nodes[rank // gpn] * gpn + rank % gpn
    comm = dict(shape.comm_s)
    dims, pairs, hot_l = [], [], []
    for d, kind in KINDS.items():
        if comm.get(d, 0.0) <= 0:
            continue
        lay = shape.expert_layout if d == "ep" else shape.layout
        if lay.size(d) < 2:
            continue
        ranks = _groups(lay, d)
        gpus = gpu_of[ranks]
        dom = gpus // gpn // servers_per_domain
        if kind == "send":
            a, b = gpus[:, :-1].ravel(), gpus[:, 1:].ravel()
            da, db = dom[:, :-1].ravel(), dom[:, 1:].ravel()
            pair = np.stack([a[da != db], b[da != db]])
        else:
            pair = _ring_or_alltoall(gpus, dom, kind == "alltoall")
        if pair.shape[1]:
            dims.append(d)
            pairs.append(pair)
            at_hot = np.zeros(pair.shape[1], dtype=bool)
            if d == "ep" and shape.hot:  # the destination's position in its group is hot
                pos = np.full(int(gpus.max()) + 1, -1, dtype=np.int64)
                pos[gpus] = np.arange(gpus.shape[1])[None, :]
                at_hot = np.isin(pos[pair[1]], shape.hot)
            hot_l.append(at_hot)
    if not dims:
        empty_i = np.zeros(0, dtype=np.int64)
        return JobPattern((), np.zeros(0), empty_i, empty_i, empty_i, np.zeros(0))
    nic = np.arange(nics, dtype=np.int64)
    src_l, dst_l, dim_l, split_l, hot_c = [], [], [], [], []
    dom_e = servers_per_domain * gpn * nics
    for i, pair in enumerate(pairs):
        s = (pair[0][:, None] * nics + nic).ravel()
        t = (pair[1][:, None] * nics + nic).ravel()
        if rail_only:  # first over NVLink to the source domain's GPU on the destination's rail
            s = s // dom_e * dom_e + t % dom_e
        keep = s != t
        s, t = s[keep], t[keep]
        hot_c.append(np.repeat(hot_l[i], nics)[keep])
        _, out_inv, out_n = np.unique(s, return_inverse=True, return_counts=True)
        _, in_inv, in_n = np.unique(t, return_inverse=True, return_counts=True)
        split_l.append(1.0 / np.maximum(out_n[out_inv], in_n[in_inv]))
        src_l.append(s)
        dst_l.append(t)
        dim_l.append(np.full(s.size, i, dtype=np.int64))
    w = np.array([comm[d] for d in dims])
    return JobPattern(
        tuple(dims),
        w / w.sum(),
        np.concatenate(src_l),
        np.concatenate(dst_l),
        np.concatenate(dim_l),
        np.concatenate(split_l),
        np.concatenate(hot_c),
        shape.pause_share if shape.hot else 0.0,
    )
