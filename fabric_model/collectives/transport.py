"""Congestion control by transport: how an incast runs on each fabric's transport.

The flow solver gives every pattern its max-min fair rates: a port shared by ``N``
connections gives each ``1 / N`` of its rate, busy all the time. Real senders start at
their NIC's line rate, shared over the destinations they send to at once (the NIC
round-robins its queue pairs), so a port receives at first ``overload = sum over its
senders of 1 / (destinations of that sender)`` times its rate (:func:`overload`). A ring or
a uniform all-to-all has overload 1 (every sender's NIC spreads its rate evenly, every
receiver gets exactly its rate): no incast, and the max-min answer stands. An overload
above 1 - a tree's interior node fed by two leaves at line rate, the hot receivers of a
skewed all-to-all once the cold ones are done - is an *incast*: the port's queue fills at
``(overload - 1) x`` its rate until the congestion control reacts, and what happens then
differs by transport (``assets/transports.yaml`` describes each, with its sources):

- **credit** (InfiniBand; and RoCE with PFC and collective-level admission, ``roce-pfc``):
  the port never drops and never idles while data waits: the max-min answer
  (IBTA Vol. 1, 7.9).
- **DCQCN** (RoCE): rate cuts by ``alpha / 2`` per CNP and recovery by timer and byte
  counter (Zhu et al., SIGCOMM 2015, section 3.1), PFC pausing the senders at Xoff; with
  PFC off the overflow is dropped and go-back-N resends. A symmetric fluid model of the
  ``N`` senders (``_kernels.dcqcn_incast``, with its readable twin in ``_reference.py``)
  gives the phase's time at each size.
- **telemetry** (Spectrum-X): one rate update per round trip toward a target utilization
  ``eta`` (HPCC, Li et al., SIGCOMM 2019): the first round trip's queue drains at
  ``(1 - eta) x`` the rate, then the port runs at ``eta``.
- **RCCC / NSCC with trimming** (UEC, lossy spraying): lossy, no PFC; the receiver's credits
  (RCCC) bound the burst to one round trip, a sender-side control (NSCC) halving per round
  trip to ``ceil(log2 N)`` round trips; bytes beyond the buffer are trimmed and resent, so
  the senders' links carry them twice: ``time = (X + overflow) / rate``.

An :class:`Incast` holds the slowdown ``s(X) = time(X) x rate / X >= 1`` of one (transport,
fan-in, port rate, buffer per port, round trip) on a log grid of phase sizes ``X`` (bytes
into the port) and interpolates; beyond the grid the phase runs at the simulated steady
rate. :func:`incast` builds it (cached). A fan-in of 1 has no incast: no model is built and
the max-min answer stands (the tests hold it).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from fabric_model.caching import lru_cached
from fabric_model.errors import FabricModelError
from fabric_model.transports import transport_params, transports

__all__ = ["Incast", "incast", "keeps_max_min", "overload", "pfc_headroom_bytes"]


def _kernels() -> ModuleType:
    """Return the DCQCN kernel's module, imported on first use (no compiler until then)."""
    from fabric_model.collectives import _kernels as kernels

    return kernels


def _dcqcn_vector() -> np.ndarray:
    """Return the DCQCN parameters in SI units, in :data:`_kernels.DCQCN_FIELDS` order."""
    d = transport_params("dcqcn")
    si = {
        "g": d["g"],
        "cnp_interval_s": d["cnp_interval_us"] * 1e-6,
        "alpha_timer_s": d["alpha_timer_us"] * 1e-6,
        "rate_timer_s": d["rate_timer_us"] * 1e-6,
        "byte_counter_bytes": d["byte_counter_bytes"],
        "fast_recovery_steps": d["fast_recovery_steps"],
        "rate_ai_Bps": d["rate_ai_gbps"] * 1e9 / 8,
        "rate_hai_Bps": d["rate_hai_gbps"] * 1e9 / 8,
        "kmin_bytes": d["kmin_bytes"],
        "kmax_bytes": d["kmax_bytes"],
        "pmax": d["pmax"],
    }
    return np.array([si[f] for f in _kernels().DCQCN_FIELDS], dtype=np.float64)


def pfc_headroom_bytes(port_Bps: float, cable_m: float, mtu_bytes: float) -> float:
    """Bytes a paused port still receives: the cable's round trip, the reaction, two frames.

    IEEE 802.1Qbb: after the port sends PAUSE, the frames on the wire both ways and those the
    upstream port sends before it reacts still arrive: ``rate x (2 x cable x 5 ns/m +
    response) + 2 x MTU``.

    >>> round(pfc_headroom_bytes(50e9, 20.0, 4096))
    68192
    """
    response_s = transport_params("pfc")["response_us"] * 1e-6
    return port_Bps * (2.0 * cable_m * 5e-9 + response_s) + 2.0 * mtu_bytes


@dataclass(frozen=True)
class Incast:
    """An incast's slowdown over the max-min answer, by phase size.

    Attributes
    ----------
    transport : str
        The transport's key.
    pfc : bool
        Whether PFC was on (lossless) for a PFC transport.
    fan_in : int
        Connections into the port.
    overload : float
        Their start rates summed over the port's rate (> 1: :func:`overload`).
    port_Bps, buffer_bytes, rtt_s : float
        The port's rate (bytes/s), its share of the switch buffer (bytes) and the base round
        trip (s).
    x_bytes, slowdown : tuple[float, ...]
        Phase sizes (bytes into the port, ascending) and ``time x port_Bps / X`` at each.
    steady_slowdown : float
        The slowdown of the steady state beyond the grid (``1 / utilisation``).
    pause_fraction : tuple[float, ...]
        Share of each phase the port held PFC pause (the time victim flows behind the paused
        links wait: head-of-line blocking); zeros where nothing pauses.
    congestion_control : str
        The transport's (``dcqcn``: the grid above is the fluid model's; else a closed form
        evaluated exactly at each size).
    closed_params : tuple[float, float]
        The closed forms' parameters: the telemetry control's target utilisation and NSCC's
        decrease per round trip (``assets/transports.yaml``).
    log_x : tuple[float, ...]
        ``log(x_bytes)``, for the interpolation.
    """

    transport: str
    pfc: bool
    fan_in: int
    overload: float
    port_Bps: float
    buffer_bytes: float
    rtt_s: float
    x_bytes: tuple[float, ...]
    slowdown: tuple[float, ...]
    steady_slowdown: float
    pause_fraction: tuple[float, ...]
    congestion_control: str = "dcqcn"
    closed_params: tuple[float, float] = (0.95, 0.5)
    log_x: tuple[float, ...] = ()

    def at(self, x_bytes: float) -> float:
        """Return the slowdown of a phase moving ``x_bytes`` into the port (>= 1).

        The closed forms exactly; DCQCN's fluid model log-linearly between its grid points,
        the first value below the grid, and beyond it the last point's time plus the rest
        at the steady rate.
        """
        if self.congestion_control != "dcqcn":  # a closed form: exact at every size
            return _closed_form(
                self.congestion_control,
                self.pfc,
                self.overload,
                self.port_Bps,
                self.buffer_bytes,
                self.rtt_s,
                max(float(x_bytes), 1.0),
                self.closed_params,
            )
        xs = self.x_bytes
        if x_bytes <= xs[0]:
            return self.slowdown[0]
        if x_bytes >= xs[-1]:
            t_last = self.slowdown[-1] * xs[-1] / self.port_Bps
            t = t_last + (x_bytes - xs[-1]) * self.steady_slowdown / self.port_Bps
            return max(1.0, t * self.port_Bps / x_bytes)
        lx = math.log(x_bytes)  # log-linear between the two grid points around it
        i = bisect.bisect_right(self.log_x, lx)
        x0, x1 = self.log_x[i - 1], self.log_x[i]
        s0, s1 = self.slowdown[i - 1], self.slowdown[i]
        return s0 + (s1 - s0) * (lx - x0) / (x1 - x0)

    def at_many(self, x_bytes: np.ndarray) -> np.ndarray:
        """Return :meth:`at` at each of ``x_bytes`` (one array pass for a whole curve)."""
        x = np.maximum(np.asarray(x_bytes, dtype=np.float64), 1.0)
        if self.congestion_control != "dcqcn":
            return _closed_form_array(
                self.congestion_control,
                self.pfc,
                self.overload,
                self.port_Bps,
                self.buffer_bytes,
                self.rtt_s,
                x,
                self.closed_params,
            )
        xs, slow = np.asarray(self.x_bytes), np.asarray(self.slowdown)
        out = np.interp(np.log(x), np.asarray(self.log_x), slow)
        beyond = x > xs[-1]
        if beyond.any():
            t = (slow[-1] * xs[-1] + (x - xs[-1]) * self.steady_slowdown) / self.port_Bps
            out = np.where(beyond, np.maximum(1.0, t * self.port_Bps / x), out)
        return out

    def pause_at(self, x_bytes: float) -> float:
        """Share of a phase of ``x_bytes`` the port held PFC pause (0 where none)."""
        xs = self.x_bytes
        x = min(max(x_bytes, xs[0]), xs[-1])
        return float(np.interp(math.log(x), np.log(xs), self.pause_fraction))

    def describe(self, x_bytes: float) -> str:
        """One line: the transport, the fan-in, the buffer, and the slowdown at ``x_bytes``."""
        tr = transports()[self.transport]
        pause = self.pause_at(x_bytes)
        held = (
            f"; PFC paused the senders' links {pause:.0%} of the phase (victim flows on them "
            f"wait as long: head-of-line blocking)"
            if pause > 0.005
            else ""
        )
        return (
            f"{tr.name}{'' if self.pfc or not tr.has_pfc else ' with PFC off'}: incast of "
            f"{self.fan_in} connections at {self.overload:.2f}x the rate of a "
            f"{self.port_Bps / 1e9:.1f} GB/s port with "
            f"{self.buffer_bytes / 1e6:.2f} MB of buffer, {self.rtt_s * 1e6:.1f} us round trip: "
            f"{1 / self.at(x_bytes):.1%} of the max-min rate at {x_bytes / 1e6:,.1f} MB "
            f"({1 / self.steady_slowdown:.1%} in steady state){held}"
        )


def _grid(port_Bps: float) -> np.ndarray:
    """Phase sizes simulated: 64 KiB to the fluid horizon at line rate, log-spaced."""
    f = transport_params("fluid")
    top = port_Bps * f["horizon_us"] * 1e-6
    lo = 65536.0
    n = max(2, math.ceil(math.log10(top / lo) * f["points_per_decade"]) + 1)
    return np.geomspace(lo, top, n)


def _closed_form(
    cc: str, pfc: bool, load: float, c: float, buf: float, rtt: float, x: float, k: tuple
) -> float:
    """Slowdown at ``x`` bytes of a transport with a closed form (the module docstring).

    ``cc`` is its congestion control; ``k = (eta, halving)``: the telemetry control's target
    utilisation and NSCC's decrease per round trip. Plain floats: the collective layer asks
    for it at every size of every curve.
    """
    eta, half = k
    burst = min(x, load * c * rtt) - c * rtt  # what the first round trip leaves queued
    if cc == "telemetry":
        total = x
        if not pfc:  # the first round trip's overflow is dropped; go-back-N resends
            over = max(0.0, burst - buf)
            total += over + (eta * (c * rtt + buf) if over > 0 else 0.0)
        queue = min(max(0.0, min(total, load * c * rtt) - c * rtt), buf)
        busy = c * rtt + queue / (1.0 - eta)  # bytes delivered before the port falls to eta
        t = total / c if total <= busy else busy / c + (total - busy) / (eta * c)
        return max(1.0, t * c / x)
    if cc in ("rccc", "nscc"):
        if cc == "rccc":
            rtts, arrived = 1, min(x, load * c * rtt)
        else:
            rtts = max(1, math.ceil(math.log(load) / -math.log(half)))
            arrived = min(x, sum(load * c * rtt * half**i for i in range(rtts)))
        return 1.0 + max(0.0, arrived - c * rtts * rtt - buf) / x
    # PFC without a rate control and PFC turned off: drops, and go-back-N resends
    over = max(0.0, burst - buf)
    return 1.0 + (over + (c * rtt + buf if over > 0 else 0.0)) / x


def _closed_form_array(
    cc: str, pfc: bool, load: float, c: float, buf: float, rtt: float, x: np.ndarray, k: tuple
) -> np.ndarray:
    """:func:`_closed_form` over an array of sizes (the same formulas, element-wise)."""
    eta, half = k
    burst = np.minimum(x, load * c * rtt) - c * rtt
    if cc == "telemetry":
        total = x
        if not pfc:
            over = np.maximum(0.0, burst - buf)
            total = x + over + np.where(over > 0, eta * (c * rtt + buf), 0.0)
        queue = np.minimum(np.maximum(0.0, np.minimum(total, load * c * rtt) - c * rtt), buf)
        busy = c * rtt + queue / (1.0 - eta)
        t = np.where(total <= busy, total / c, busy / c + (total - busy) / (eta * c))
        return np.maximum(1.0, t * c / x)
    if cc in ("rccc", "nscc"):
        if cc == "rccc":
            rtts, arrived = 1, np.minimum(x, load * c * rtt)
        else:
            rtts = max(1, math.ceil(math.log(load) / -math.log(half)))
            arrived = np.minimum(x, sum(load * c * rtt * half**i for i in range(rtts)))
        return 1.0 + np.maximum(0.0, arrived - c * rtts * rtt - buf) / x
    over = np.maximum(0.0, burst - buf)
    return 1.0 + (over + np.where(over > 0, c * rtt + buf, 0.0)) / x


def _closed_steady(cc: str, k: tuple) -> float:
    """Return the closed forms' steady slowdown: telemetry holds ``eta``, the others 1."""
    return 1.0 / k[0] if cc == "telemetry" else 1.0


def _dcqcn(
    pfc: bool,
    n: int,
    load: float,
    c: float,
    buf: float,
    xoff: float,
    rtt: float,
    mtu: float,
    xs: np.ndarray,
) -> tuple[np.ndarray, float, np.ndarray]:
    """Slowdowns from the DCQCN fluid model at each size, the steady one, pause shares."""
    f = transport_params("fluid")
    dt = rtt / f["steps_per_rtt"]
    params = _dcqcn_vector()
    out, pause = np.empty_like(xs), np.zeros_like(xs)
    times = np.empty_like(xs)
    for i, x in enumerate(xs):
        # a phase lasts at most a few times its ideal time plus the recovery; allow 50x
        steps = int(50.0 * (x / c + 1e-3) / dt) + 1000
        t, paused = _kernels().dcqcn_incast(
            float(x), float(n), c * load / n, c, buf, xoff, rtt, mtu, pfc, params, dt, steps
        )
        if t <= 0.0:
            raise FabricModelError(
                f"the DCQCN incast model did not finish {x / 1e6:,.1f} MB through one port "
                f"(fan-in {n}); a limit of the model"
            )
        times[i] = t
        out[i] = max(1.0, t * c / x)
        pause[i] = paused / t
    half = len(xs) // 2
    steady = (times[-1] - times[half]) * c / (xs[-1] - xs[half])
    return out, max(1.0, steady), pause


@lru_cached(
    "collectives.transport.incast",
    256,
    key="transport, PFC, fan-in, overload, port rate, buffer, Xoff, round trip, MTU",
)
def _incast_cached(
    transport: str,
    pfc: bool,
    fan_in: int,
    load: float,
    port_Bps: float,
    buffer_bytes: float,
    xoff_bytes: float,
    rtt_s: float,
    mtu_bytes: float,
) -> Incast:
    tr = transports()[transport]
    cc = tr.congestion_control
    closed = (
        transport_params("telemetry")["target_utilization"],
        transport_params("nscc")["decrease_per_rtt"],
    )
    xs = _grid(port_Bps)
    pause = np.zeros_like(xs)
    if cc == "dcqcn":
        slow, steady, pause = _dcqcn(
            pfc, fan_in, load, port_Bps, buffer_bytes, xoff_bytes, rtt_s, mtu_bytes, xs
        )
        if not pfc:
            # drops and go-back-N come on top of the same rate control: a lossless port never
            # idles while data waits, so the lossy phase is never the faster (the fluid
            # model's sawtooths can fall in different phases; the slower one stands)
            lossless = _incast_cached(
                transport, True, fan_in, load, port_Bps, buffer_bytes, xoff_bytes, rtt_s, mtu_bytes
            )
            slow = np.maximum(slow, lossless.slowdown)
            steady = max(steady, lossless.steady_slowdown)
    else:
        slow = np.array(
            [
                _closed_form(cc, pfc, load, port_Bps, buffer_bytes, rtt_s, float(x), closed)
                for x in xs
            ]
        )
        steady = _closed_steady(cc, closed)
    return Incast(
        transport=transport,
        pfc=pfc,
        fan_in=fan_in,
        overload=load,
        port_Bps=port_Bps,
        buffer_bytes=buffer_bytes,
        rtt_s=rtt_s,
        x_bytes=tuple(float(x) for x in xs),
        slowdown=tuple(float(s) for s in slow),
        steady_slowdown=float(steady),
        pause_fraction=tuple(float(p) for p in pause),
        congestion_control=cc,
        closed_params=closed,
        log_x=tuple(math.log(float(x)) for x in xs),
    )


def incast(
    transport: str,
    *,
    pfc: bool,
    fan_in: int,
    load: float,
    port_Bps: float,
    buffer_bytes: float,
    rtt_s: float,
    mtu_bytes: float,
    cable_m: float,
) -> Incast | None:
    """Return the incast model of a pattern, or None where the max-min answer stands.

    None without an incast (an overload of at most 1), and for a transport whose congested
    port never idles nor resends (credit flow control; PFC without rate cuts), whose
    slowdown is 1 at every size. The rates and sizes are rounded (to 0.1 %) so that
    patterns of one fabric share a model.

    Parameters
    ----------
    transport
        Key of ``assets/transports.yaml``.
    pfc
        PFC on (a PFC transport's default) or off (``what_if.pfc = off``).
    fan_in
        Connections into the congested port, count.
    load
        Their start rates summed over the port's rate (:func:`overload`).
    port_Bps
        The port's rate, bytes/s.
    buffer_bytes
        The switch buffer's share per port, bytes.
    rtt_s
        Base round trip of the path, s.
    mtu_bytes
        Payload per packet, bytes.
    cable_m
        NIC-to-leaf cable length (PFC headroom), m.
    """
    if fan_in <= 1 or load <= 1.0 + 1e-9 or keeps_max_min(transport, pfc):
        return None

    def r(v: float) -> float:
        return float(f"{v:.4g}")

    xoff = max(0.0, buffer_bytes - pfc_headroom_bytes(port_Bps, cable_m, mtu_bytes))
    return _incast_cached(
        transport,
        pfc,
        int(fan_in),
        round(float(load), 3),
        r(port_Bps),
        r(buffer_bytes),
        r(xoff),
        r(rtt_s),
        float(mtu_bytes),
    )


def keeps_max_min(transport: str, pfc: bool) -> bool:
    """Whether the transport runs every incast at the max-min answer (no model needed).

    Credit flow control, and PFC without rate cuts while PFC is on: the congested port never
    idles while data waits and nothing is resent.
    """
    tr = transports()[transport]
    return tr.congestion_control == "none" and (tr.flow_control == "credit" or pfc)


def overload(
    src: np.ndarray, dst: np.ndarray, weight: np.ndarray | None = None
) -> tuple[int, float]:
    """Return the incast of a pattern: connections into its worst port, and their overload.

    A sender's NIC starts at line rate shared over the destinations it sends to at once,
    so destination ``d`` receives at first ``sum over its senders s of 1 / outdeg(s)``
    times the line rate. With ``weight`` (bytes per connection, relative), the connections
    to the heaviest destinations are the ones still running when the others are done: only
    those count (a skewed all-to-all's hot receivers). Returns ``(fan_in, overload)`` of the
    destination with the largest overload.

    >>> overload(np.array([0, 1, 2]), np.array([1, 2, 0]))  # a ring
    (1, 1.0)
    >>> overload(np.array([1, 2, 3, 0, 0]), np.array([0, 0, 0, 1, 2]))  # tree-like fan-in
    (3, 3.0)
    """
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    if src.size == 0:
        return 0, 0.0
    if weight is not None:
        weight = np.asarray(weight, np.float64)
        keep = weight >= weight.max() * (1 - 1e-9)
        src, dst = src[keep], dst[keep]
    outdeg = np.bincount(src).astype(np.float64)  # endpoint ids: small non-negative integers
    load = np.bincount(dst, weights=1.0 / outdeg[src])
    fan = np.bincount(dst)
    worst = int(np.argmax(load))
    return int(fan[worst]), float(load[worst])
