"""Speed of the max-min flow solver: numba kernel vs the readable reference twin.

Synthetic instances: a random permutation (one flow per host, a single cycle so nobody
sends to itself) on a two-level leaf/spine fabric with 32 hosts per leaf, 64 spines and 4:1
oversubscription at the leaf uplinks. Each inter-leaf flow is either sprayed evenly over 31
randomly chosen spines (``spray``: 64 links per flow) or hashed onto one spine (``ecmp``).
Link capacities carry a +-5 % jitter so links saturate at many distinct levels, the hard
case for progressive filling (many rounds).

Run ``python benchmarks/bench_flow_solver.py`` (``--help`` for options). Timings are the
minimum of several warm runs of :func:`fabric_model.flows.solve_maxmin`; the reference runs
on growing sizes while its projected time stays within the budget.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabric_model.flows import FlowSet, solve_maxmin

HOSTS_PER_LEAF = 32
N_SPINES = 64
SPRAY_PATHS = 31
OVERSUBSCRIPTION = 4.0
HOST_LINK_Bps = 50e9  # 400 Gb/s
CAPACITY_JITTER = 0.05


def leaf_spine_permutation(
    n_hosts: int, routing: str, rng: np.random.Generator
) -> tuple[FlowSet, np.ndarray]:
    """Build a permutation flow set on a leaf/spine fabric and its link capacities (bytes/s).

    Link ids: host uplinks ``[0, H)``, host downlinks ``[H, 2H)``, then leaf->spine
    ``2H + leaf * S + spine`` and spine->leaf ``2H + n_leaves * S + leaf * S + spine``.
    """
    n_leaves = n_hosts // HOSTS_PER_LEAF
    n_links = 2 * n_hosts + 2 * n_leaves * N_SPINES
    cycle = rng.permutation(n_hosts)
    dst = np.empty(n_hosts, dtype=np.int64)
    dst[cycle] = np.roll(cycle, -1)
    src = np.arange(n_hosts)
    src_leaf, dst_leaf = src // HOSTS_PER_LEAF, dst // HOSTS_PER_LEAF

    n_paths = SPRAY_PATHS if routing == "spray" else 1
    spines = np.argsort(rng.random((n_hosts, N_SPINES)), axis=1)[:, :n_paths]
    up_spine = 2 * n_hosts + src_leaf[:, None] * N_SPINES + spines
    down_spine = 2 * n_hosts + n_leaves * N_SPINES + dst_leaf[:, None] * N_SPINES + spines
    link_ids = np.concatenate([src[:, None], up_spine, down_spine, n_hosts + dst[:, None]], axis=1)
    weights = np.concatenate(
        [
            np.ones((n_hosts, 1)),
            np.full((n_hosts, 2 * n_paths), 1.0 / n_paths),
            np.ones((n_hosts, 1)),
        ],
        axis=1,
    )
    valid = np.ones_like(link_ids, dtype=bool)
    valid[src_leaf == dst_leaf, 1:-1] = False  # same leaf: NIC up and down only
    indptr = np.concatenate([[0], np.cumsum(valid.sum(axis=1))])

    spine_link_Bps = HOST_LINK_Bps * HOSTS_PER_LEAF / (N_SPINES * OVERSUBSCRIPTION)
    capacity_Bps = np.full(n_links, spine_link_Bps)
    capacity_Bps[: 2 * n_hosts] = HOST_LINK_Bps
    capacity_Bps *= 1.0 + CAPACITY_JITTER * rng.uniform(-1.0, 1.0, n_links)
    flows = FlowSet(indptr, link_ids[valid], weights[valid], n_links)
    return flows, capacity_Bps


def best_time_s(run: Callable[[], object], repeats: int) -> float:
    """Minimum wall time of ``repeats`` calls, seconds."""
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return float(best)


def main(argv: list[str] | None = None) -> None:
    """Print one table per routing: flows, links, nnz, rounds, kernel and reference times."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-flows", type=int, default=65_536)
    parser.add_argument("--repeats", type=int, default=5, help="kernel runs per size")
    parser.add_argument(
        "--reference-budget-s", type=float, default=10.0, help="reference time budget per routing"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    sizes = [n for n in (1 << k for k in range(10, 20)) if n <= args.max_flows]
    for routing in ("spray", "ecmp"):
        rng = np.random.default_rng(args.seed)
        print(f"\nrouting = {routing} (leaf/spine, {HOSTS_PER_LEAF} hosts/leaf, {N_SPINES} spines)")
        header = (
            f"{'flows':>7} {'links':>8} {'nnz':>9} {'rounds':>7} "
            f"{'kernel ms':>10} {'reference ms':>13} {'speedup':>8} {'max rel diff':>13}"
        )
        print(header)
        print("-" * len(header))
        budget_left_s = args.reference_budget_s
        last_reference_s = 0.0
        for n_flows in sizes:
            flows, capacity_Bps = leaf_spine_permutation(n_flows, routing, rng)
            solution = solve_maxmin(flows, capacity_Bps)  # compiled/loaded from cache
            kernel_s = best_time_s(
                functools.partial(solve_maxmin, flows, capacity_Bps), args.repeats
            )

            # The reference is O(nnz) per round and rounds grow with size: expect ~4-5x.
            reference_txt, speedup_txt, diff_txt = "-", "-", "-"
            if budget_left_s > 0 and 4.5 * last_reference_s < budget_left_s:
                start = time.perf_counter()
                twin = solve_maxmin(flows, capacity_Bps, reference=True)
                last_reference_s = time.perf_counter() - start
                budget_left_s -= last_reference_s
                diff = np.abs(twin.rate_Bps - solution.rate_Bps) / solution.rate_Bps
                reference_txt = f"{1e3 * last_reference_s:.1f}"
                speedup_txt = f"{last_reference_s / kernel_s:.0f}x"
                diff_txt = f"{diff.max():.1e}"
            else:
                budget_left_s = 0.0
            print(
                f"{n_flows:>7} {flows.n_links:>8} {flows.nnz:>9} {solution.n_rounds:>7} "
                f"{1e3 * kernel_s:>10.2f} {reference_txt:>13} {speedup_txt:>8} {diff_txt:>13}"
            )


if __name__ == "__main__":
    main()
