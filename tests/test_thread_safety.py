"""The model's caches under concurrent sessions: threads at once give the serial results.

Every Streamlit session runs in its own thread and they share the module-level caches of
``fabric_model.training.fabric``; these tests start many evaluations at once on cold caches
and compare with the same evaluations run one after another.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from fabric_model.errors import FabricModelError
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.training import resolve_plan, training_step
from fabric_model.training.fabric import DimensionFabric, _Lru, clear_caches

THREADS = 8

#: Small, distinct scenarios: families, vendors, placements, a degraded link, MoE.
SCENARIOS = [
    apply_overrides(Scenario(), over)
    for over in (
        {"cluster.n_gpus": 64, "model.name": "llama3-8b", "parallel.tp": 8, "parallel.pp": 1},
        {
            "cluster.n_gpus": 128,
            "model.name": "llama3-8b",
            "parallel.tp": 4,
            "parallel.pp": 2,
            "fabric.vendor": "roce",
        },
        {
            "cluster.n_gpus": 256,
            "model.name": "llama3-8b",
            "parallel.tp": 8,
            "parallel.pp": 2,
            "fabric.oversubscription": 2.0,
            "what_if.placement": "scattered",
        },
        {
            "cluster.n_gpus": 128,
            "model.name": "mixtral-8x7b",
            "parallel.tp": 4,
            "parallel.pp": 2,
            "parallel.ep": 8,
            "fabric.vendor": "spectrum-x",
        },
        {
            "cluster.n_gpus": 256,
            "model.name": "llama3-8b",
            "parallel.tp": 8,
            "parallel.pp": 1,
            "fabric.topology": "dragonfly-plus",
            "what_if.degraded_link_factor": 0.5,
        },
        {
            "cluster.n_gpus": 512,
            "model.name": "llama3-8b",
            "parallel.tp": 8,
            "parallel.pp": 2,
            "fabric.topology": "torus-3d",
            "fabric.routing": "dor",
        },
    )
]


def _step_json(scenario: Scenario) -> str:
    """One training step as canonical JSON (NaN-safe comparison)."""
    return json.dumps(training_step(scenario).to_dict(), sort_keys=True, default=str)


def _collectives_json(scenario: Scenario) -> str:
    """The data-parallel and expert all-reduce/all-to-all times of one scenario's layout."""
    plan, _ = resolve_plan(scenario)
    assert plan is not None
    fab = DimensionFabric(scenario, plan.layout)
    rows = [
        fab.collective("dp", "allreduce", 2**28),
        fab.collective("tp", "allgather", 2**24),
        fab.collective("ep", "alltoall", 2**26),
        fab.p2p(2**24),
    ]
    return json.dumps([r.__dict__ for r in rows], sort_keys=True)


def _concurrently(fn: Any, items: list[Any]) -> list[Any]:
    """``[fn(x) for x in items]`` from :data:`THREADS` threads, the first wave started at once."""
    wave = min(THREADS, len(items))
    start = threading.Barrier(wave)

    def run(indexed: tuple[int, Any]) -> Any:
        if indexed[0] < wave:
            start.wait(timeout=30)
        return fn(indexed[1])

    with ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(run, enumerate(items)))


@pytest.mark.parametrize("evaluate", [_step_json, _collectives_json])
def test_concurrent_evaluations_equal_serial(evaluate: Any) -> None:
    clear_caches()
    expected = [evaluate(s) for s in SCENARIOS]
    for _ in range(2):  # cold caches, then warm ones
        clear_caches()
        items = SCENARIOS * 4  # every scenario asked for by several threads at once
        assert _concurrently(evaluate, items) == expected * 4
    assert _concurrently(evaluate, SCENARIOS * 2) == expected * 2


def test_one_build_per_key_under_contention() -> None:
    cache: _Lru = _Lru(4)
    builds = []

    def make() -> object:
        builds.append(1)
        time.sleep(0.05)  # every other thread arrives while this one builds
        return object()

    values = _concurrently(lambda _: cache.get("key", make), list(range(THREADS)))
    assert len(builds) == 1
    assert all(v is values[0] for v in values)


def test_a_failed_build_raises_in_every_waiting_thread_and_is_not_cached() -> None:
    cache: _Lru = _Lru(4)

    def make() -> object:
        time.sleep(0.05)
        raise FabricModelError("cluster.n_gpus: no such design")

    def get(_: int) -> str:
        try:
            cache.get("bad", make)
        except FabricModelError as exc:
            return str(exc)
        return "no error"

    assert _concurrently(get, list(range(THREADS))) == ["cluster.n_gpus: no such design"] * 8
    assert cache.get("bad", lambda: "built") == "built"


def test_eviction_keeps_the_size_bound_under_threads() -> None:
    cache: _Lru = _Lru(16)
    _concurrently(lambda i: cache.get(i % 64, lambda: i % 64), list(range(512)))
    assert len(cache.data) <= 16
    assert all(k == v for k, v in cache.data.items())
