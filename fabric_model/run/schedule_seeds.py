"""Several seeds of a shared-cluster schedule on a dask ``LocalCluster``, and the per-job CSV."""

from __future__ import annotations

import csv
import logging
from typing import Any

from fabric_model.errors import FabricModelError
from fabric_model.run.cluster_sim import schedule
from fabric_model.run.jobs import Job
from fabric_model.scenario import Scenario

__all__ = ["schedule_seeds", "write_jobs_csv"]


def write_jobs_csv(result: dict[str, Any], path: str) -> None:
    """Write the per-job rows of a ``schedule`` result as CSV (nodes joined by spaces)."""
    cols = [
        "id",
        "gpus",
        "submit_h",
        "start_h",
        "end_h",
        "status",
        "slowdown",
        "placement_slowdown",
        "interference_slowdown",
        "interruptions",
        "preemptions",
        "nodes",
    ]
    try:
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(cols)
            for j in result["jobs"]:
                w.writerow(
                    [
                        " ".join(map(str, j["nodes"]))
                        if c == "nodes"
                        else ("" if j[c] is None else j[c])
                        for c in cols
                    ]
                )
    except OSError as exc:
        raise FabricModelError(f"--out {path}: {exc.strerror or exc}") from None


def _seed_task(
    args: tuple[Scenario, list[Job] | None, int | None, str | None, bool, float, int, bool],
) -> dict[str, Any]:
    scenario, jobs, generate, policy, compare, days, seed, preempt = args
    return schedule(
        scenario,
        jobs,
        generate=generate,
        policy=policy,
        compare=compare,
        days=days,
        seed=seed,
        preempt=preempt,
    )


def schedule_seeds(
    scenario: Scenario,
    jobs: list[Job] | None,
    seeds: list[int],
    *,
    generate: int | None = None,
    policy: str | None = None,
    compare: bool = False,
    days: float = 30.0,
    workers: int = 2,
    preempt: bool = False,
) -> list[dict[str, Any]]:
    """Run :func:`schedule` for several seeds on an embedded dask ``LocalCluster``.

    Each seed is one task (its own job draws, when generated, and failure draws); the results
    are those of the local engine, in the seeds' order. ``workers`` processes (default 2: the
    CI's cores), one thread each, as :mod:`fabric_model.run.explore` runs its designs.
    """
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise FabricModelError(
            f"--engine dask needs dask.distributed ({exc}); pip install 'dask[distributed]'"
        ) from None
    try:
        cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
    except (OSError, TimeoutError, ValueError) as exc:
        raise FabricModelError(f"--engine dask: cannot start the cluster: {exc}") from None
    try:
        client = Client(cluster)
        try:
            tasks = [(scenario, jobs, generate, policy, compare, days, s, preempt) for s in seeds]
            futures = client.map(_seed_task, tasks, pure=False)
            results: list[dict[str, Any]] = client.gather(futures)
        finally:
            client.close()
    finally:
        cluster.close()
    return results
