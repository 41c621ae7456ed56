"""p50 and p99 of a training step over iterations: the slowest rank and the ECMP draws.

Every iteration the step waits for the slowest of its ``N`` ranks: each rank's compute
(``c = compute_s + imbalance_s``, the heaviest stage's micro-batches) runs
``c G`` late, ``G ~ Normal(0, tails.gpu_spread^2)``, and its software ``E`` late,
``E ~ Exponential(mean tails.os_jitter x c)``; one rank may compute at
``tails.slow_rank_factor`` of its speed (``c (1 / f - 1)`` late, its spread stretched by
``1 / f``). The step's end (the gradient reduction and the optimizer's global norm) is a
synchronisation of every rank, so the delay is the max over ranks, whose quantiles
:class:`~fabric_model.collectives.order_stats.RankDelays` gives in closed form. The pipeline
bubble is not stretched: a slow stage paces the ``m`` micro-batches of the steady state, the
fill and drain run through the healthy stages (``m t_slow + (p - 1) t``). Finer
synchronisations (tensor-parallel collectives every layer) can only add to this: the figure
is the step's own end, a lower bound of the slowest-rank cost.

Under static ECMP hashing (``tails.ecmp_redraw``) each parallel dimension's collectives take,
every iteration, the exposed time of one of the flow solver's hashed seeds (each dimension
draws its own); ``tails.iterations`` iterations are then drawn from a seeded
``numpy.random.Generator`` and the p50/p99 read off them. Without such draws the quantiles are
the closed form's.
"""

from __future__ import annotations

import numpy as np

from fabric_model.caching import lru_cached
from fabric_model.collectives.order_stats import RankDelays
from fabric_model.collectives.tails import QUANTILES
from fabric_model.scenario.tails import TailsSpec

__all__ = ["rank_delays", "step_quantiles_s"]


def rank_delays(tails: TailsSpec, n_ranks: int, compute_s: float) -> RankDelays:
    """Return the per-rank delay model of a step whose compute is ``compute_s`` on ``n_ranks``."""
    f = tails.slow_rank_factor
    slow = f < 1.0
    return RankDelays(
        n=max(int(n_ranks), 1),
        sigma_s=compute_s * tails.gpu_spread,
        mean_s=compute_s * tails.os_jitter,
        slow_shift_s=compute_s * (1.0 / f - 1.0) if slow else 0.0,
        slow_scale=1.0 / f if slow else 1.0,
    )


@lru_cached(
    "training.tails.step_quantiles_s",
    1024,
    key="(step_time_s, compute_s, n_ranks, each dimension's exposed time per ECMP seed, "
    "the tails section)",
)
def step_quantiles_s(
    step_time_s: float,
    compute_s: float,
    n_ranks: int,
    exposed_seeds_s: tuple[tuple[float, tuple[float, ...]], ...],
    tails: TailsSpec,
) -> tuple[float, float]:
    """p50 and p99 of the step time over iterations, seconds.

    Parameters
    ----------
    step_time_s : float
        The deterministic step (every rank at its mean, the expected hash).
    compute_s : float
        The compute the ranks' speed spread acts on (``compute_s + imbalance_s``).
    n_ranks : int
        Ranks the step waits for.
    exposed_seeds_s : tuple
        Per dimension under static hashing: its deterministic exposed time and its exposed
        time at each ECMP seed (empty: no hash draws).
    tails : TailsSpec
        The variability.
    """
    delays = rank_delays(tails, n_ranks, compute_s)
    draws = [
        (det, np.asarray(seeds, dtype=np.float64))
        for det, seeds in exposed_seeds_s
        if tails.ecmp_redraw and len(seeds) > 1 and float(np.ptp(seeds)) > 0.0
    ]
    if not draws:
        p50, p99 = (step_time_s + delays.quantile(q) for q in QUANTILES)
        return p50, max(p50, p99)
    rng = np.random.default_rng(tails.seed)
    total = np.full(tails.iterations, step_time_s)
    for det, seeds in draws:  # each dimension hashes its own connections every iteration
        total += seeds[rng.integers(seeds.size, size=tails.iterations)] - det
    total += delays.sample(rng.random(tails.iterations))
    p50, p99 = (float(v) for v in np.quantile(total, QUANTILES))
    return p50, max(p50, p99)
