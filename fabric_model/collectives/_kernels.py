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


#: Order of the DCQCN parameters :func:`dcqcn_incast` takes (``transport.DCQCN_PARAMS``).
DCQCN_FIELDS = (
    "g",
    "cnp_interval_s",
    "alpha_timer_s",
    "rate_timer_s",
    "byte_counter_bytes",
    "fast_recovery_steps",
    "rate_ai_Bps",
    "rate_hai_Bps",
    "kmin_bytes",
    "kmax_bytes",
    "pmax",
)


@jit(
    types.UniTuple(types.float64, 2)(
        types.float64,
        types.float64,
        types.float64,
        types.float64,
        types.float64,
        types.float64,
        types.float64,
        types.float64,
        types.boolean,
        _F64,
        types.float64,
        types.int64,
    )
)
def dcqcn_incast(
    x_bytes: float,
    n_flows: float,
    start_Bps: float,
    port_Bps: float,
    buffer_bytes: float,
    xoff_bytes: float,
    rtt_s: float,
    mtu_bytes: float,
    lossless: bool,
    params: np.ndarray,
    dt_s: float,
    max_steps: int,
) -> tuple[float, float]:
    """Time for ``n_flows`` DCQCN senders, each starting at ``start_Bps``, to deliver ``x_bytes``.

    The symmetric fluid model of ``fabric_model.collectives._reference.dcqcn_incast`` (its
    readable twin, with the algorithm in words). Returns ``(time_s, paused_s)``, the
    phase's time and how long the port held PFC pause; ``(-1, paused_s)`` when
    ``max_steps`` steps do not finish it.
    """
    g = params[0]
    t_cnp = params[1]
    t_alpha = params[2]
    t_rate = params[3]
    byte_counter = params[4]
    f_steps = params[5]
    r_ai = params[6]
    r_hai = params[7]
    kmin = params[8]
    kmax = params[9]
    pmax = params[10]
    delay = max(1, int(rtt_s / dt_s + 0.5))
    marks = np.zeros(delay)
    rate = start_Bps
    target = start_Bps
    alpha = 1.0
    q_use = 0.0
    q_waste = 0.0
    unsent = x_bytes
    delivered = 0.0
    paused = False
    xon = max(0.0, xoff_bytes - 2.0 * mtu_bytes)
    since_cnp = t_cnp
    log_clear = 0.0
    alpha_clock = 0.0
    timer = 0.0
    counted = 0.0
    t_events = 0
    b_events = 0
    recovering = 0.0
    paused_s = 0.0
    for step in range(max_steps):
        # ---- senders: line-rate start, the DCQCN rate, PFC pause, go-back-N windows
        sent = 0.0
        if not paused:
            if recovering > 0.0:
                sent = n_flows * rate * dt_s  # discarded at the receiver: resent later
            else:
                sent = min(n_flows * rate * dt_s, unsent)
                unsent -= sent
        else:
            paused_s += dt_s
        if recovering > 0.0:
            q_waste += sent
        else:
            q_use += sent
        # ---- the port: serve in arrival order (mixed), then drop or pause above the buffer
        q = q_use + q_waste
        served = min(port_Bps * dt_s, q)
        use = 0.0
        if q > 0.0:
            use = served * q_use / q
            q_use -= use
            q_waste -= served - use
            delivered += use
        q = q_use + q_waste
        if lossless:
            if q >= xoff_bytes:
                paused = True
            elif paused and q <= xon:
                paused = False
        elif q > buffer_bytes:
            over = q - buffer_bytes
            lost = over * q_use / q
            q_use -= lost
            q_waste -= over - lost
            unsent += lost
            q = buffer_bytes
            if recovering <= 0.0:
                recovering = rtt_s + q / port_Bps  # the NAK follows the queue ahead of it
        if recovering > 0.0:
            recovering -= dt_s
        if delivered >= x_bytes * (1.0 - 1e-12):
            # the last step's service finished part-way through it
            rest = (x_bytes - (delivered - use)) / port_Bps
            return step * dt_s + min(dt_s, rest), paused_s
        # ---- the switch marks ECN (RED on the egress queue); the mark reaches the sender's
        # NP and returns as a CNP one round trip later
        if q <= kmin:
            p = 0.0
        elif q >= kmax:
            p = 1.0
        else:
            p = pmax * (q - kmin) / (kmax - kmin)
        slot = step % delay
        p_late = marks[slot]
        marks[slot] = p
        packets = (0.0 if paused else rate * dt_s) / mtu_bytes
        if since_cnp >= t_cnp and p_late > 0.0:
            log_clear += -1e300 if p_late >= 1.0 else packets * np.log1p(-p_late)
        since_cnp += dt_s
        if since_cnp >= t_cnp and log_clear <= -0.6931471805599453:  # P(a mark) >= 1/2
            # ---- reaction point: cut by alpha / 2, remember the target, reset the clocks
            target = rate
            rate = rate * (1.0 - alpha / 2.0)
            alpha = (1.0 - g) * alpha + g
            since_cnp = 0.0
            log_clear = 0.0
            alpha_clock = 0.0
            timer = 0.0
            counted = 0.0
            t_events = 0
            b_events = 0
            continue
        alpha_clock += dt_s
        if alpha_clock >= t_alpha:
            alpha = (1.0 - g) * alpha
            alpha_clock = 0.0
        timer += dt_s
        counted += 0.0 if paused else rate * dt_s
        n_events = 0
        if timer >= t_rate:
            timer = 0.0
            t_events += 1
            n_events += 1
        if counted >= byte_counter:
            counted = 0.0
            b_events += 1
            n_events += 1
        for _ in range(n_events):
            if max(t_events, b_events) < f_steps:
                pass  # fast recovery: halfway back to the target
            elif min(t_events, b_events) > f_steps:
                target += (min(t_events, b_events) - f_steps) * r_hai
            else:
                target += r_ai
            target = min(target, start_Bps)
            rate = (target + rate) / 2.0
    return -1.0, paused_s
