"""p50 and p99 of one collective over iterations (``tails.*``).

An iteration of a collective across ``N`` ranks takes the time of the ECMP hash it draws (one
of the flow solver's hashed seeds, :attr:`CollectiveTime.time_us_seeds`, equally likely, when
``tails.ecmp_redraw``; the expected time otherwise) plus the launch delay of its slowest rank:
each rank starts ``E_i`` late, ``E_i`` exponential with mean ``tails.call_jitter_us``, and a
synchronous collective finishes with its last rank, so the delay is the max of ``N`` draws,
``call_jitter_us x (-ln(1 - U^(1/N)))`` for a uniform ``U`` (:mod:`order_stats`). Without a
spread of hashes the quantiles are that closed form; with one, ``tails.iterations`` iterations
are drawn from a seeded ``numpy.random.Generator``.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from fabric_model.caching import lru_cached
from fabric_model.collectives.model import CollectiveTime
from fabric_model.collectives.order_stats import exponential_max_quantile
from fabric_model.scenario.tails import TailsSpec

__all__ = ["QUANTILES", "collective_quantiles_us", "with_tails"]

#: The quantiles reported (p50, p99).
QUANTILES = (0.5, 0.99)


def with_tails(row: CollectiveTime, tails: TailsSpec) -> CollectiveTime:
    """``row`` with its p50 and p99 over iterations (the deterministic time when disabled)."""
    if not tails.enabled:
        return replace(row, time_us_p50=row.time_us, time_us_p99=row.time_us)
    p50, p99 = collective_quantiles_us(row.time_us, row.time_us_seeds, row.n_ranks, tails)
    return replace(row, time_us_p50=p50, time_us_p99=p99)


@lru_cached(
    "collectives.tails.collective_quantiles_us",
    4096,
    key="(time_us, time_us_seeds, n_ranks, the tails section)",
)
def collective_quantiles_us(
    time_us: float, seeds_us: tuple[float, ...], n_ranks: int, tails: TailsSpec
) -> tuple[float, float]:
    """p50 and p99 of one collective's time over iterations, microseconds.

    Parameters
    ----------
    time_us : float
        The deterministic (expected-hash) time.
    seeds_us : tuple[float, ...]
        The time at each ECMP seed the solver hashed.
    n_ranks : int
        Ranks the call waits for.
    tails : TailsSpec
        The variability (``call_jitter_us``, ``ecmp_redraw``, ``iterations``, ``seed``).
    """
    mu = tails.call_jitter_us
    n = max(int(n_ranks), 1)
    draws = np.asarray(seeds_us, dtype=np.float64)
    spread = tails.ecmp_redraw and draws.size > 1 and float(np.ptp(draws)) > 0.0
    if not spread:
        return tuple(  # type: ignore[return-value]
            time_us + (mu * exponential_max_quantile(n, q) if mu > 0 else 0.0) for q in QUANTILES
        )
    rng = np.random.default_rng(tails.seed)
    k = rng.integers(draws.size, size=tails.iterations)
    u = rng.random(tails.iterations)
    times = draws[k]
    if mu > 0:  # the slowest of n exponential launch delays, by the inverse CDF of the max
        times = times - mu * np.log(-np.expm1(np.log(np.maximum(u, 1e-300)) / n))
    p50, p99 = (float(v) for v in np.quantile(times, QUANTILES))
    return p50, max(p99, p50) if not math.isnan(p50) else p99
