"""Time the training model: one step (cold and warm), a full sweep, and the plan search.

Usage: ``python benchmarks/bench_training.py [--workers N]``

- one step of the default scenario and of the 98K-GPU Colossus-like preset, first call
  (builds the fabric and solves each dimension's patterns) and repeated (cached);
- the full sweep of the issue's target: 8 to 131,072 GPUs in powers of two x 3 topologies
  (fat-tree, rail-only, dragonfly+) x 2 vendors (InfiniBand, Spectrum-X), cold (fresh
  process caches) and warm (the same sweep again, e.g. after changing only the model);
- the plan search for Llama 3 70B on 1,024 and 16,384 GPUs.

Wall times on this machine; the README's performance section quotes the latest run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabric_model.presets import load_preset
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.training import search_plans, sweep, training_step
from fabric_model.training.fabric import clear_caches

GPUS = [2**i for i in range(3, 18)]
DESIGNS = [(t, v) for t in ("fat-tree", "rail-only", "dragonfly-plus")
           for v in ("infiniband", "spectrum-x")]


def _time(fn, repeat: int = 1) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--workers", type=int, default=1, help="processes for the sweep")
    args = ap.parse_args()
    training_step(Scenario())  # numba kernels load from cache

    print("one step")
    for label, s in (("default (1,024 H100, Llama 3 70B)", Scenario()),
                     ("colossus-100k-spectrum-x (98,304 H100, 405B)",
                      apply_overrides(load_preset("colossus-100k-spectrum-x"),
                                      {"training.recompute": "full"}))):
        clear_caches()
        cold = _time(lambda s=s: training_step(s))
        warm = _time(lambda s=s: training_step(s), repeat=20)
        print(f"  {label:<48} cold {cold * 1e3:8.1f} ms   warm {warm * 1e3:6.2f} ms")

    base = apply_overrides(Scenario(), {"training.recompute": "full"})
    scenarios = [apply_overrides(base, {"fabric.topology": t, "fabric.vendor": v})
                 for t, v in DESIGNS]
    if args.workers > 1:
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(args.workers)
        map_fn = pool.map
    else:
        pool, map_fn = None, map
    clear_caches()
    counts = []

    def full_sweep() -> None:
        counts.clear()
        for s in scenarios:
            pts = sweep(s, GPUS, map_fn=map_fn)
            counts.append(sum(p.feasible for p in pts))
    cold = _time(full_sweep)
    other_model = [apply_overrides(s, {"model.name": "llama3-8b"}) for s in scenarios]
    warm = _time(full_sweep)
    scenarios[:] = other_model
    warm_model = _time(full_sweep)
    print(f"full sweep ({len(GPUS)} sizes x {len(DESIGNS)} designs = "
          f"{len(GPUS) * len(DESIGNS)} points, {sum(counts)} feasible; workers "
          f"{args.workers}): cold {cold:.2f} s, repeated {warm:.3f} s, "
          f"another model on the same fabrics {warm_model:.2f} s")
    if pool:
        pool.shutdown()

    for n in (1024, 16384):
        s = apply_overrides(Scenario(), {"cluster.n_gpus": n})
        clear_caches()
        found: list = []
        t = _time(lambda s=s, found=found: found.extend(search_plans(s)))
        best = found[0]
        print(f"plan search, Llama 3 70B on {n:,} GPUs: {t:.2f} s; best {best.label} "
              f"({best.step.step_time_s:.2f} s per step, MFU {best.step.mfu:.1%})")


if __name__ == "__main__":
    main()
