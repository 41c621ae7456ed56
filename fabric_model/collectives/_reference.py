"""Readable twins of the collectives' numba kernels (``_kernels.py``); the tests hold them equal.

:func:`dcqcn_incast` is the DCQCN incast of ``_kernels.dcqcn_incast`` written flow by flow:
every sender keeps its own reaction-point state, where the kernel keeps one for all of them
(the senders of an incast start together and see the same marks, so their states stay
equal; the test holds the two equal). :func:`first_popped_py` is ``_heap_order.first_popped``
in Python: the first-round heap of the solver, which a small fabric's bottleneck label asks
without loading the compiler.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["dcqcn_incast", "first_popped_py"]


@dataclass
class _Sender:
    """One DCQCN reaction point (Zhu et al., SIGCOMM 2015, section 3.1)."""

    rate: float
    target: float
    alpha: float = 1.0
    alpha_clock: float = 0.0
    timer: float = 0.0
    counted: float = 0.0
    t_events: int = 0
    b_events: int = 0

    def cut(self, g: float) -> None:
        """React to a CNP: remember the rate as the target, cut by alpha / 2, raise alpha."""
        self.target = self.rate
        self.rate *= 1.0 - self.alpha / 2.0
        self.alpha = (1.0 - g) * self.alpha + g
        self.alpha_clock = self.timer = self.counted = 0.0
        self.t_events = self.b_events = 0

    def tick(self, dt: float, sent: float, p: dict[str, float], line_Bps: float) -> None:
        """Advance the alpha timer, the rate timer and the byte counter; increase the rate."""
        self.alpha_clock += dt
        if self.alpha_clock >= p["alpha_timer_s"]:  # no CNP for K: alpha decays
            self.alpha *= 1.0 - p["g"]
            self.alpha_clock = 0.0
        self.timer += dt
        self.counted += sent
        events = 0
        if self.timer >= p["rate_timer_s"]:
            self.timer = 0.0
            self.t_events += 1
            events += 1
        if self.counted >= p["byte_counter_bytes"]:
            self.counted = 0.0
            self.b_events += 1
            events += 1
        for _ in range(events):
            if max(self.t_events, self.b_events) < p["fast_recovery_steps"]:
                pass  # fast recovery: only halve the gap to the target
            elif min(self.t_events, self.b_events) > p["fast_recovery_steps"]:
                hyper = min(self.t_events, self.b_events) - p["fast_recovery_steps"]
                self.target += hyper * p["rate_hai_Bps"]
            else:
                self.target += p["rate_ai_Bps"]
            self.target = min(self.target, line_Bps)
            self.rate = (self.target + self.rate) / 2.0


def _mark_probability(queue: float, p: dict[str, float]) -> float:
    """RED-style ECN marking of the congested port: 0 below Kmin, Pmax at Kmax, 1 above."""
    if queue <= p["kmin_bytes"]:
        return 0.0
    if queue >= p["kmax_bytes"]:
        return 1.0
    return p["pmax"] * (queue - p["kmin_bytes"]) / (p["kmax_bytes"] - p["kmin_bytes"])


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
    """Time for ``n_flows`` DCQCN senders to deliver ``x_bytes`` through one port.

    Every sender holds ``x_bytes / n_flows`` and starts at ``start_Bps``, its NIC's line rate
    shared over the destinations it sends to at once (RDMA NICs start at line rate); its
    rate never rises above that. Each time step ``dt_s``:

    - the senders inject at their rates unless the port holds PFC pause; during a go-back-N
      window (the round trip after a drop) what they send is discarded at the receiver and
      must be sent again;
    - the port serves ``port_Bps`` from its queue (useful and discarded bytes mixed in
      arrival order);
    - lossless (PFC): the queue pauses the senders at ``xoff_bytes`` and releases them two
      packets below; lossy: bytes beyond ``buffer_bytes`` are dropped and resent;
    - the port marks ECN by its queue (RED: Kmin, Kmax, Pmax); a mark reaches the sender as
      a CNP one round trip later, at most one per ``cnp_interval_s``, when a flow has at least
      an even chance of a marked packet since its last CNP;
    - a CNP cuts the rate by ``alpha / 2`` and sets the target; without CNPs the timer
      (``rate_timer_s``) and byte counter (``byte_counter_bytes``) raise the rate: fast
      recovery halves the gap to the target for ``fast_recovery_steps`` events, then additive
      (``rate_ai_Bps``) and hyper (``rate_hai_Bps``) increases move the target up; alpha decays
      by ``(1 - g)`` each ``alpha_timer_s`` without a CNP.

    ``params`` holds ``_kernels.DCQCN_FIELDS`` in order. Returns ``(time_s, paused_s)``:
    when every byte has been delivered, and how long the port held pause;
    ``(-1, paused_s)`` when ``max_steps`` steps do not finish.
    """
    from fabric_model.collectives._kernels import DCQCN_FIELDS

    p = dict(zip(DCQCN_FIELDS, (float(v) for v in params), strict=True))
    n = int(n_flows)
    senders = [_Sender(start_Bps, start_Bps) for _ in range(n)]
    unsent = [x_bytes / n] * n
    delay = max(1, int(rtt_s / dt_s + 0.5))
    marks_in_flight = [0.0] * delay  # marks on their way back as CNPs
    q_use = q_waste = delivered = paused_s = 0.0
    paused = False
    xon = max(0.0, xoff_bytes - 2.0 * mtu_bytes)
    since_cnp = p["cnp_interval_s"]
    log_clear = 0.0
    recovering = 0.0
    for step in range(max_steps):
        sent_each = []
        for i, s in enumerate(senders):
            sent = 0.0
            if not paused:
                if recovering > 0.0:
                    sent = s.rate * dt_s
                else:
                    sent = min(s.rate * dt_s, unsent[i])
                    unsent[i] -= sent
            sent_each.append(sent)
        if paused:
            paused_s += dt_s
        if recovering > 0.0:
            q_waste += sum(sent_each)
        else:
            q_use += sum(sent_each)
        queue = q_use + q_waste
        served = min(port_Bps * dt_s, queue)
        useful = 0.0
        if queue > 0.0:
            useful = served * q_use / queue
            q_use -= useful
            q_waste -= served - useful
            delivered += useful
        queue = q_use + q_waste
        if lossless:
            if queue >= xoff_bytes:
                paused = True
            elif paused and queue <= xon:
                paused = False
        elif queue > buffer_bytes:
            over = queue - buffer_bytes
            lost = over * q_use / queue
            q_use -= lost
            q_waste -= over - lost
            for i in range(n):
                unsent[i] += lost / n
            queue = buffer_bytes
            if recovering <= 0.0:
                recovering = rtt_s + queue / port_Bps
        if recovering > 0.0:
            recovering -= dt_s
        if delivered >= x_bytes * (1.0 - 1e-12):
            # the last step's service finished part-way through it
            rest = (x_bytes - (delivered - useful)) / port_Bps  # served at the port's rate
            return step * dt_s + min(dt_s, rest), paused_s
        p_now = _mark_probability(queue, p)
        p_late = marks_in_flight[step % delay]
        marks_in_flight[step % delay] = p_now
        rate = senders[0].rate
        packets = (0.0 if paused else rate * dt_s) / mtu_bytes
        if since_cnp >= p["cnp_interval_s"] and p_late > 0.0:
            log_clear += -1e300 if p_late >= 1.0 else packets * math.log1p(-p_late)
        since_cnp += dt_s
        if since_cnp >= p["cnp_interval_s"] and log_clear <= math.log(0.5):
            for s in senders:
                s.cut(p["g"])
            since_cnp = log_clear = 0.0
            continue
        for s in senders:
            s.tick(dt_s, 0.0 if paused else s.rate * dt_s, p, start_Bps)
    return -1.0, paused_s


def first_popped_py(fill_level: np.ndarray, candidate: np.ndarray) -> int:
    """Return the first ``candidate`` link the solver's heap pops in round one (-1: none).

    The pure-Python twin of :func:`fabric_model.collectives._heap_order.first_popped`: the
    same heap (links in link order, heapified, popped) with the same sift-down as the solver
    (:func:`fabric_model.flows._kernels._sift_down`), so ties come out in the same order.
    """
    links = np.flatnonzero(fill_level < np.inf)
    key = fill_level[links].tolist()
    heap = list(range(len(key)))  # positions into ``links`` / ``key``
    n = len(heap)

    def sift_down(i: int) -> None:
        item = heap[i]
        k = key[item]
        while True:
            child = 2 * i + 1
            if child >= n:
                break
            right = child + 1
            if right < n and key[heap[right]] < key[heap[child]]:
                child = right
            if key[heap[child]] >= k:
                break
            heap[i] = heap[child]
            i = child
        heap[i] = item

    for i in range(n // 2 - 1, -1, -1):
        sift_down(i)
    while n > 0:
        link = int(links[heap[0]])
        if candidate[link]:
            return link
        n -= 1
        if n > 0:
            heap[0] = heap[n]
            sift_down(0)
    return -1
