"""Time the training model: one step (cold and warm), a full sweep, and the plan search.

Usage: ``python benchmarks/bench_training.py [--workers N] [--search-only]``

- one step of the default scenario and of the 98K-GPU Colossus-like preset, first call
  (builds the fabric and solves each dimension's patterns) and repeated (cached);
- a cold point on a built fabric: new plans (new rank layouts, so new communicators and
  solves) on the default scenario's already-built fabric, first call each;
- the full sweep of the issue's target: 8 to 131,072 GPUs in powers of two x 3 topologies
  (fat-tree, rail-only, dragonfly+) x 2 vendors (InfiniBand, Spectrum-X), cold (fresh
  process caches) and warm (the same sweep again, e.g. after changing only the model);
- the plan search (branch and bound over every TP/CP/EP/PP/VPP, micro-batch, recomputation
  and ZeRO stage) for Llama 3 70B on 1,024 and 16,384 GPUs and DeepSeek-V3 on the 4,608-GPU
  NVL72 presets: cold (fresh fabric caches) and repeated, with how many plans the bound
  ranked, how many it screened (plan rules, memory), how many it modelled in full and on
  how many distinct rank layouts (each solves its fabric patterns once). The search's
  target is under 2 s for a 16K-GPU case. ``--search-only`` skips the step and the sweep.

Wall times on this machine; the README's performance section quotes the latest run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabric_model.collectives.context import clear_route_cache
from fabric_model.presets import load_preset
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.training import sweep, training_step
from fabric_model.training.fabric import clear_caches as _clear_fabric_caches
from fabric_model.training.sweep import plan_search

GPUS = [2**i for i in range(3, 18)]
DESIGNS = [
    (t, v)
    for t in ("fat-tree", "rail-only", "dragonfly-plus")
    for v in ("infiniband", "spectrum-x")
]


def clear_caches() -> None:
    """Forget every fabric, model and kept routed pattern (a cold start)."""
    _clear_fabric_caches()
    clear_route_cache()


def _time(fn, repeat: int = 1) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


#: Plan-search cases: (label, preset or None for the default scenario, overrides).
SEARCHES = [
    ("Llama 3 70B, 1,024 H100 (default)", None, {}),
    ("Llama 3 70B, 16,384 H100", None, {"cluster.n_gpus": 16384}),
    (
        "DeepSeek-V3, gb300-nvl72-xdr (4,608 GB300)",
        "gb300-nvl72-xdr",
        {"model.name": "deepseek-v3"},
    ),
    (
        "DeepSeek-V3, gb200-nvl72-ndr (4,608 GB200)",
        "gb200-nvl72-ndr",
        {"model.name": "deepseek-v3"},
    ),
    ("Llama 3 405B, meta-24k-roce (RoCE, ECMP x 5 seeds)", "meta-24k-roce", {}),
    ("Llama 3 70B, torus-3d-4k (4,096 H100)", "torus-3d-4k", {}),
]


def plan_searches() -> None:
    """Print each search of :data:`SEARCHES`, cold and repeated, with its counts."""
    print("plan search (top 5; cold = fresh fabric caches)")
    for label, preset, over in SEARCHES:
        s = apply_overrides(load_preset(preset) if preset else Scenario(), over)
        clear_caches()
        cold = plan_search(s)
        warm = _time(lambda s=s: plan_search(s), repeat=2)
        best = cold.plans[0]
        print(
            f"  {label:<44} cold {cold.time_s:5.2f} s  repeated {warm:5.2f} s; "
            f"{cold.n_space:,} plans bounded, {cold.n_screened:,} screened, "
            f"{cold.n_evaluated:,} modelled in full on {cold.n_layouts} layouts"
            f"{'' if cold.exact else ' (capped)'}"
        )
        print(
            f"  {'':<44} best {best.label}: {best.step.step_time_s:.3f} s per step, "
            f"MFU {best.step.mfu:.1%} (bound {best.bound_s:.3f} s)"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--workers", type=int, default=1, help="processes for the sweep")
    ap.add_argument("--search-only", action="store_true", help="only the plan searches")
    args = ap.parse_args()
    from fabric_model import kernels

    # model time, not process start: the kernels load from numba's cache first, as the
    # dashboard loads them at its start (the command line loads them where one first runs)
    print(f"numba kernels loaded in {kernels.preload():.2f} s (once per process)")
    training_step(Scenario())
    if args.search_only:
        plan_searches()
        return

    print("one step")
    for label, s in (
        ("default (1,024 H100, Llama 3 70B)", Scenario()),
        (
            "colossus-100k-spectrum-x (98,304 H100, 405B)",
            apply_overrides(
                load_preset("colossus-100k-spectrum-x"), {"training.recompute": "full"}
            ),
        ),
    ):
        clear_caches()
        cold = _time(lambda s=s: training_step(s))
        warm = _time(lambda s=s: training_step(s), repeat=20)
        print(f"  {label:<48} cold {cold * 1e3:8.1f} ms   warm {warm * 1e3:6.2f} ms")
    clear_caches()
    training_step(Scenario())  # the fabric is built
    plans = [
        {"parallel.tp": 4, "parallel.pp": 8},
        {"parallel.tp": 8, "parallel.pp": 2, "parallel.cp": 2},
        {"parallel.tp": 2, "parallel.pp": 8, "training.micro_batch": 2},
        {"model.name": "llama3-8b", "parallel.tp": 2, "parallel.pp": 1},
    ]
    times = [
        _time(lambda p=p: training_step(apply_overrides(Scenario(), {**p, "parallel.dp": "auto"})))
        for p in plans
    ]
    print(
        f"  new plan on the built default fabric (first call each, {len(plans)} plans): "
        f"{min(times) * 1e3:.1f}-{max(times) * 1e3:.1f} ms"
    )

    base = apply_overrides(Scenario(), {"training.recompute": "full"})
    scenarios = [
        apply_overrides(base, {"fabric.topology": t, "fabric.vendor": v}) for t, v in DESIGNS
    ]
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
    print(
        f"full sweep ({len(GPUS)} sizes x {len(DESIGNS)} designs = "
        f"{len(GPUS) * len(DESIGNS)} points, {sum(counts)} feasible; workers "
        f"{args.workers}): cold {cold:.2f} s, repeated {warm:.3f} s, "
        f"another model on the same fabrics {warm_model:.2f} s"
    )
    if pool:
        pool.shutdown()
    plan_searches()


if __name__ == "__main__":
    main()
