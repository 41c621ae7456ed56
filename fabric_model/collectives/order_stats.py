"""Order statistics of "wait for the slowest rank": the max of N ranks' delays, in closed form.

A synchronous step (or collective) over ``N`` ranks finishes when its slowest rank does. If
each rank's delay has CDF ``F``, the finish has CDF ``F^N`` (the ranks independent), so its
``q`` quantile is ``F^-1(q^(1/N))``: exact, no sampling. The delay of one rank is
``X = sigma Z + E`` with ``Z`` standard normal (a GPU's speed deviation times the compute
time) and ``E`` exponential with mean ``mu`` (software delays): an exponentially modified
Gaussian, whose CDF has a closed form (Grushka 1972):

``F(x) = Phi(x / sigma) - exp(-x / mu + sigma^2 / (2 mu^2)) Phi(x / sigma - sigma / mu)``.

One rank may be slow: its delay is ``shift + scale sigma Z + E``, and the max's CDF is
``F^(N-1) F_slow``. Limits used as test oracles: the max of ``N`` standard normals has
quantile ``Phi^-1(q^(1/N))`` and mean ~ ``sqrt(2 ln N)`` (Gumbel domain); the max of ``N``
unit exponentials has quantile ``-ln(1 - q^(1/N))`` and mean ``H_N = 1 + 1/2 + ... + 1/N``.

Draws, where a sum with other random terms needs them (ECMP hash draws), come from a seeded
``numpy.random.Generator`` outside this module, as uniforms ``U`` turned into the max by the
inverse CDF (:meth:`RankDelays.sample`): one draw per iteration, not ``N``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from fabric_model.caching import lru_cached

__all__ = [
    "RankDelays",
    "exponential_max_quantile",
    "harmonic",
    "normal_max_quantile",
]

_SQRT2 = math.sqrt(2.0)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_ERFC = np.frompyfunc(math.erfc, 1, 1)
#: Probability range the sampling grid spans (draws beyond it are clamped to its ends).
_GRID_TAIL = 1e-9
_GRID_POINTS = 2049


def harmonic(n: int) -> float:
    """``H_n = 1 + 1/2 + ... + 1/n``: the mean of the max of ``n`` unit exponentials."""
    return float(np.sum(1.0 / np.arange(1, n + 1)))


def normal_max_quantile(n: int, q: float) -> float:
    """Quantile ``q`` of the max of ``n`` iid standard normals: ``Phi^-1(q^(1/n))``.

    >>> abs(round(normal_max_quantile(1, 0.5), 12))
    0.0
    >>> round(normal_max_quantile(1024, 0.5), 3)
    3.204
    """
    tail = -math.expm1(math.log(q) / n)  # 1 - q^(1/n), without cancellation
    return -NormalDist().inv_cdf(tail)


def exponential_max_quantile(n: int, q: float) -> float:
    """Quantile ``q`` of the max of ``n`` iid unit exponentials: ``-ln(1 - q^(1/n))``.

    >>> round(exponential_max_quantile(1, 0.5), 6) == round(math.log(2), 6)
    True
    """
    return -math.log(-math.expm1(math.log(q) / n))


def _log_ndtr(z: np.ndarray) -> np.ndarray:
    """``log Phi(z)``, elementwise, accurate far into both tails."""
    z = np.asarray(z, dtype=np.float64)
    out = np.empty_like(z)
    mid = z > -30.0
    if mid.any():
        p = 0.5 * np.asarray(_ERFC(-z[mid] / _SQRT2), dtype=np.float64)
        with np.errstate(divide="ignore"):
            out[mid] = np.log(p)
    low = ~mid
    if low.any():  # Mills ratio asymptotics: Phi(z) ~ phi(z) / |z| (1 - 1/z^2 + 3/z^4)
        zl = z[low]
        with np.errstate(over="ignore"):  # z beyond -1e154: log Phi is -inf
            out[low] = (
                -0.5 * zl * zl - np.log(-zl) - _LOG_SQRT_2PI + np.log1p(-1 / zl**2 + 3 / zl**4)
            )
    return out


def _log_sf(x: np.ndarray, sigma: float, mu: float) -> np.ndarray:
    """``log P(sigma Z + E > x)`` (``E`` exponential with mean ``mu``), elementwise."""
    x = np.asarray(x, dtype=np.float64)
    # a part below 1e-9 of the other is below the float's resolution of the sum: drop it
    if mu < 1e-9 * sigma:
        mu = 0.0
    if sigma < 1e-9 * mu:
        sigma = 0.0
    if sigma <= 0.0 and mu <= 0.0:
        return np.where(x < 0.0, 0.0, -np.inf)
    if mu <= 0.0:
        return _log_ndtr(-x / sigma)
    if sigma <= 0.0:
        return np.where(x < 0.0, 0.0, -x / mu)
    a = _log_ndtr(-x / sigma)
    b = -x / mu + 0.5 * (sigma / mu) ** 2 + _log_ndtr(x / sigma - sigma / mu)
    return np.logaddexp(a, b)


def _log_cdf(x: np.ndarray, sigma: float, mu: float) -> np.ndarray:
    """``log P(sigma Z + E <= x)``, elementwise (``log1p(-sf)``, exact in the upper tail)."""
    log_sf = _log_sf(x, sigma, mu)
    sf = np.exp(log_sf)
    with np.errstate(divide="ignore"):
        return np.where(sf < 0.5, np.log1p(-np.minimum(sf, 0.5)), np.log(np.maximum(1.0 - sf, 0.0)))


@dataclass(frozen=True)
class RankDelays:
    """The delays of a synchronous job's ranks, and the max the job waits for.

    Attributes
    ----------
    n : int
        Ranks the job waits for (``>= 1``).
    sigma_s : float
        Standard deviation of one rank's normal delay, seconds (compute x GPU spread).
    mean_s : float
        Mean of one rank's exponential delay, seconds (software jitter).
    slow_shift_s, slow_scale : float
        One slow rank's extra delay (``compute x (1 / factor - 1)``) and the factor its normal
        part is stretched by (``1 / factor``); ``0`` and ``1`` without a slow rank.
    """

    n: int
    sigma_s: float = 0.0
    mean_s: float = 0.0
    slow_shift_s: float = 0.0
    slow_scale: float = 1.0

    def __post_init__(self) -> None:
        # a spread below 1e-12 of the largest term (or subnormal) is below the float's
        # resolution of the sum and overflows x / sigma: it is none
        size = max(self.sigma_s * self.slow_scale, self.mean_s, abs(self.slow_shift_s))
        for name in ("sigma_s", "mean_s"):
            value = getattr(self, name)
            if value < max(1e-12 * size, 1e-250):
                object.__setattr__(self, name, 0.0)

    @property
    def _slow(self) -> bool:
        return self.slow_shift_s != 0.0 or self.slow_scale != 1.0

    @property
    def deterministic(self) -> bool:
        """Whether the max is one number (no spread at all)."""
        return self.sigma_s <= 0.0 and self.mean_s <= 0.0

    def log_cdf(self, x: np.ndarray) -> np.ndarray:
        """``log P(max <= x)``: ``(N - 1) log F(x) + log F_slow(x)`` (``N log F`` if none)."""
        x = np.asarray(x, dtype=np.float64)
        if not self._slow:
            return self.n * _log_cdf(x, self.sigma_s, self.mean_s)
        rest = (self.n - 1) * _log_cdf(x, self.sigma_s, self.mean_s) if self.n > 1 else 0.0
        slow = _log_cdf(x - self.slow_shift_s, self.sigma_s * self.slow_scale, self.mean_s)
        return rest + slow

    def quantile(self, q: float) -> float:
        """Return the ``q`` quantile of the max, seconds (bisection on the exact CDF)."""
        return _quantile(self, q)

    def mean_without_slow(self) -> float:
        """Mean of the max without a slow rank, where a closed form exists, else NaN.

        Normal only: no closed form for ``N > 5`` (``sqrt(2 ln N)`` is the Gumbel limit);
        exponential only: ``mean x H_N``.
        """
        if self.sigma_s <= 0.0:
            return self.mean_s * harmonic(self.n)
        return math.nan

    def sample(self, u: np.ndarray) -> np.ndarray:
        """Return the max for each uniform draw ``u`` (inverse CDF on a fine grid), seconds."""
        u = np.asarray(u, dtype=np.float64)
        if self.deterministic:
            return np.full(u.shape, max(0.0, self.slow_shift_s) if self._slow else 0.0)
        xs, log_f = _grid(self)
        with np.errstate(divide="ignore"):
            return np.interp(np.log(u), log_f, xs)


def _bracket(d: RankDelays) -> float:
    return max(d.sigma_s * max(d.slow_scale, 1.0), d.mean_s, abs(d.slow_shift_s), 1e-300)


@lru_cached("collectives.order_stats._quantile", 4096, key="(RankDelays, q)")
def _quantile(d: RankDelays, q: float) -> float:
    if d.deterministic:
        return max(0.0, d.slow_shift_s) if d._slow else 0.0
    target = math.log(q)
    scale = _bracket(d)
    lo, hi = -scale, scale
    while d.log_cdf(np.array([lo]))[0] > target:
        lo *= 2.0
    while d.log_cdf(np.array([hi]))[0] < target:
        hi *= 2.0
    for _ in range(200):  # to the float's resolution
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if d.log_cdf(np.array([mid]))[0] < target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@lru_cached("collectives.order_stats._grid", 64, key="RankDelays")
def _grid(d: RankDelays) -> tuple[np.ndarray, np.ndarray]:
    """``(x, log CDF of the max at x)`` over ``[q(1e-9), q(1 - 1e-9)]``, increasing."""
    xs = np.linspace(_quantile(d, _GRID_TAIL), _quantile(d, 1.0 - _GRID_TAIL), _GRID_POINTS)
    log_f = np.maximum.accumulate(d.log_cdf(xs))  # monotone for np.interp
    xs.setflags(write=False)
    log_f.setflags(write=False)
    return xs, log_f
