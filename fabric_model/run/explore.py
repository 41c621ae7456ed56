"""Design-space exploration: every combination of some keys' values, and its Pareto front.

A design is the base scenario with one value of each varied key (any scenario key, parsed
and checked by the scenario's own coercion, so a bad key or value is the scenario's one-line
error). Each design gets its training step (the scenario's plan, or with ``plan_search`` the
fastest plan :func:`~fabric_model.training.sweep.plan_search` finds), its bill of materials,
and its run (:func:`~fabric_model.run.reliability.estimate_run`: failures, goodput, days, cost).
The Pareto front is the feasible designs that no other feasible design beats on both
objectives, time to train and cost per run (:data:`OBJECTIVES`), lower being better.

Designs are independent, so the grid is a ``map``: in this process (``engine="local"``, or a
process pool's ``map``), or on a ``dask.distributed`` cluster (``engine="dask"``: an
embedded ``LocalCluster``, or a running scheduler's address). The results are the same
either way; the front is computed here, after the map.
"""

from __future__ import annotations

import csv
import itertools
import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from fabric_model.errors import FabricModelError, ScenarioError
from fabric_model.scenario import (
    Scenario,
    apply_overrides,
    coerce_value,
    parse_assignment,
    with_dependents,
)

__all__ = [
    "DEFAULT_MAX_DESIGNS",
    "ENGINES",
    "OBJECTIVES",
    "PLAN_SEARCH_CUT_SHORT",
    "DesignTask",
    "Dimension",
    "ExploreResult",
    "Sensitivity",
    "design_grid",
    "design_scenario",
    "evaluate_batch",
    "evaluate_design",
    "explore",
    "pareto_flags",
    "parse_vary",
    "sensitivity",
    "sensitivity_ranges",
    "write_csv",
]

OBJECTIVES = ("time_to_train_days", "cost_per_run_usd")
ENGINES = ("local", "dask")
DEFAULT_MAX_DESIGNS = 10_000
#: Numbers of a design, in the contract's order (then the extras).
NUMBERS = (
    "step_time_s",
    "mfu",
    "tokens_per_s",
    "goodput",
    "time_to_train_days",
    "network_capex_usd",
    "cluster_capex_usd",
    "tco_usd",
    "cost_per_run_usd",
)
EXTRAS = ("usd_per_million_tokens", "interruptions_per_day", "checkpoint_interval_s")
#: What shapes a design's fabric (``cost.fabric_shape``): a vendor or speed change that
#: swaps the switch, its radix or the pod size says so in every row.
SHAPE = ("switch", "switch_radix", "pod_nics", "limit")

MapFn = Callable[[Callable[[Any], Any], Iterable[Any]], Iterator[Any]]
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Dimension:
    """One varied key and its values (coerced, in the order given, duplicates dropped)."""

    key: str
    values: tuple[Any, ...]


def parse_vary(text: str) -> Dimension:
    """Parse ``KEY=V1,V2,...`` with the scenario's key table.

    Raises
    ------
    ScenarioError
        For an unknown key, a missing ``=``, no value, or a value the key does not allow.
    """
    key, raw = parse_assignment(text)
    items = [v.strip() for v in raw.split(",")]
    if not any(items) or not all(items):
        raise ScenarioError(key, raw, "--vary needs KEY=V1,V2,... with no empty value")
    values: list[Any] = []
    for item in items:
        value = coerce_value(key, item)
        if value not in values:
            values.append(value)
    return Dimension(key, tuple(values))


def design_grid(
    dimensions: Sequence[Dimension], max_designs: int = DEFAULT_MAX_DESIGNS
) -> list[dict[str, Any]]:
    """Return every combination of the dimensions' values as overrides, in grid order.

    Raises
    ------
    FabricModelError
        When a key is varied twice or the grid holds more than ``max_designs`` designs.
    """
    keys = [d.key for d in dimensions]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise ScenarioError(twice[0], ScenarioError.NO_VALUE, "--vary names this key twice")
    n = math.prod(len(d.values) for d in dimensions)
    if n > max_designs:
        sizes = " x ".join(str(len(d.values)) for d in dimensions)
        raise FabricModelError(
            f"--max-designs: the grid has {sizes} = {n:,} designs, more than "
            f"--max-designs {max_designs:,}; vary fewer values or raise --max-designs"
        )
    return [
        dict(zip(keys, combo, strict=True))
        for combo in itertools.product(*(d.values for d in dimensions))
    ]


def design_scenario(base: Scenario, overrides: dict[str, Any]) -> Scenario:
    """Return ``base`` with ``overrides``; a changed GPU or vendor brings what follows it.

    As the sidebar does (:func:`~fabric_model.scenario.with_dependents`): a varied
    ``cluster.gpu`` sets its catalog server's ``cluster.gpus_per_node`` and
    ``cluster.nvlink_domain``, a varied ``fabric.vendor`` its own transport, unless those
    keys are varied too.

    Raises
    ------
    FabricModelError
        When the combination is not a valid scenario (the message names the key).
    """
    return apply_overrides(base, with_dependents(base, overrides))


@dataclass(frozen=True)
class DesignTask:
    """One design to evaluate: the base scenario, its overrides, whether to search plans."""

    base: Scenario
    overrides: dict[str, Any]
    plan_search: bool = False


def _blank(overrides: dict[str, Any], reason: str) -> dict[str, Any]:
    out: dict[str, Any] = {"keys": dict(overrides), "feasible": False, "reason": reason}
    out.update(dict.fromkeys((*NUMBERS, *EXTRAS, *SHAPE)))
    out["plan"] = None
    out["pareto"] = False
    return out


def _num(x: float) -> float | None:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None


#: The reason of a design whose plan search the deadline stopped before any plan was found.
PLAN_SEARCH_CUT_SHORT = "parallel: the plan search ran out of time before finding a plan"


def evaluate_design(task: DesignTask, *, deadline: float | None = None) -> dict[str, Any]:
    """Evaluate one design: step, bill of materials and run (a pure function of ``task``).

    Returns the design's entry of the ``explore`` JSON (``pareto`` False until
    :func:`explore` marks the front). A design that cannot be built, whose plan cannot run or
    whose failures leave no time to train is infeasible, with the reason. ``deadline``
    (``time.monotonic()``) bounds the plan search: a search it stopped gives the best plan
    found so far and the entry carries ``"cut_short": True`` (the key is absent otherwise).
    """
    from fabric_model.plant.cost import bill_of_materials, fabric_shape
    from fabric_model.run.reliability import estimate_run
    from fabric_model.training import training_step
    from fabric_model.training.sweep import plan_search

    over = task.overrides
    try:
        scenario = design_scenario(task.base, over)
        cut_short = False
        if task.plan_search:
            found = plan_search(scenario, top=1, deadline=deadline)
            cut_short = found.timed_out
            if not found.plans:
                if cut_short:
                    return {**_blank(over, PLAN_SEARCH_CUT_SHORT), "cut_short": True}
                return _blank(
                    over,
                    "parallel: no plan fits this model on this design (memory or batch)",
                )
            best = found.plans[0]
            scenario = apply_overrides(scenario, {**best.overrides, "parallel.dp": "auto"})
            step = best.step
        else:
            step = training_step(scenario)
        bom = bill_of_materials(scenario)
    except FabricModelError as exc:
        return _blank(over, str(exc))
    out = _blank(over, step.reason)
    if cut_short:
        out["cut_short"] = True
    out["network_capex_usd"] = bom.capex_usd
    out["cluster_capex_usd"] = bom.cluster_capex_usd
    shape = fabric_shape(bom.topology, bom.hardware)
    out.update({k: shape[k] for k in SHAPE})
    if step.plan is not None:
        out["plan"] = step.plan.label()
    if not step.feasible:
        return out
    run = estimate_run(scenario, step.tokens_per_s, bom)
    out.update(
        feasible=run.feasible,
        reason=run.reason or None,
        step_time_s=_num(step.step_time_s),
        mfu=_num(step.mfu),
        tokens_per_s=_num(step.tokens_per_s),
        goodput=_num(run.goodput),
        time_to_train_days=_num(run.time_to_train_days),
        tco_usd=_num(run.tco_usd),
        cost_per_run_usd=_num(run.cost_per_run_usd),
        usd_per_million_tokens=_num(run.usd_per_million_tokens),
        interruptions_per_day=_num(run.interruptions_per_day),
        checkpoint_interval_s=_num(run.checkpoint_interval_s),
    )
    return out


def evaluate_batch(tasks: Sequence[DesignTask]) -> list[dict[str, Any]]:
    """Evaluate several designs in order (one task of a cluster: fewer round trips)."""
    return [evaluate_design(t) for t in tasks]


def pareto_flags(points: Sequence[tuple[float, float] | None]) -> list[bool]:
    """Mark the points no other point beats on both coordinates (lower is better).

    A point is on the front when no other point is at most as large on both coordinates and
    smaller on one. ``None`` (an infeasible design) is never on the front and beats nothing.
    Equal points are all on the front. ``O(n log n)``: sorted by the first coordinate, a
    point is beaten exactly when an earlier one (smaller first coordinate) has a second
    coordinate at most its own, or one with the same first coordinate has a smaller second.
    """
    flags = [False] * len(points)
    order = sorted((p[0], p[1], i) for i, p in enumerate(points) if p is not None)
    best_before = math.inf  # smallest second coordinate among strictly smaller first ones
    for _, group in itertools.groupby(order, key=lambda t: t[0]):
        members = list(group)
        lowest = min(m[1] for m in members)
        for _, second, i in members:
            flags[i] = second == lowest and second < best_before
        best_before = min(best_before, lowest)
    return flags


@dataclass(frozen=True)
class ExploreResult:
    """The evaluated designs (grid order), the engine that ran them, and the objectives."""

    designs: tuple[dict[str, Any], ...]
    engine: str

    def to_dict(self) -> dict[str, Any]:
        """Return the ``explore`` JSON contract."""
        return {
            "designs": [dict(d) for d in self.designs],
            "n_designs": len(self.designs),
            "engine": self.engine,
            "objectives": list(OBJECTIVES),
        }


def _batches(tasks: list[DesignTask], n_parts: int) -> list[list[DesignTask]]:
    size = max(1, math.ceil(len(tasks) / max(1, n_parts)))
    return [tasks[i : i + size] for i in range(0, len(tasks), size)]


def _run_dask(
    tasks: list[DesignTask],
    scheduler: str | None,
    workers: int | None,
    progress: Progress | None,
) -> list[dict[str, Any]]:
    """Evaluate the tasks on a dask.distributed cluster (embedded unless ``scheduler``)."""
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise FabricModelError(
            f"--engine dask needs dask.distributed ({exc}); pip install 'dask[distributed]'"
        ) from None
    import logging

    cluster = None
    try:
        if scheduler:
            client = Client(scheduler, timeout="10s")
        else:
            n = workers or os.cpu_count() or 1
            cluster = LocalCluster(
                n_workers=n,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.ERROR,
            )
            client = Client(cluster)
    except (OSError, TimeoutError, ValueError) as exc:
        where = f"--scheduler {scheduler}" if scheduler else "--engine dask"
        raise FabricModelError(f"{where}: cannot start or reach the cluster: {exc}") from None
    try:
        n_workers = max(1, len(client.scheduler_info().get("workers", {})))
        # a few batches per worker: the per-task round trip dominates one design's time
        batches = _batches(tasks, 4 * n_workers)
        futures = client.map(evaluate_batch, batches, pure=False)
        sizes = {f.key: len(b) for f, b in zip(futures, batches, strict=True)}
        done = 0
        for future in as_completed(futures):
            done += sizes[future.key]
            if progress:
                progress(done, len(tasks))
        results = client.gather(futures)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    return [d for batch in results for d in batch]


def explore(
    base: Scenario,
    dimensions: Sequence[Dimension],
    *,
    plan_search: bool = False,
    engine: str = "local",
    scheduler: str | None = None,
    workers: int | None = None,
    max_designs: int = DEFAULT_MAX_DESIGNS,
    map_fn: MapFn = map,
    progress: Progress | None = None,
) -> ExploreResult:
    """Evaluate every design of the grid and mark the Pareto front.

    Parameters
    ----------
    base
        The scenario every design starts from.
    dimensions
        The varied keys (:func:`parse_vary`); none = the base design alone.
    plan_search
        Give each design the fastest parallel plan that fits, instead of the base's plan.
    engine
        ``local`` (through ``map_fn``) or ``dask`` (a ``dask.distributed`` cluster).
    scheduler
        With ``dask``: a running scheduler's address (``tcp://host:8786``); else an
        embedded ``LocalCluster`` of ``workers`` processes (default: the CPU count).
    max_designs
        The most designs a grid may hold.
    map_fn
        ``map``-like function of the local engine (e.g. a process pool's ``map``).
    progress
        Called as ``progress(done, total)`` as designs finish.

    Raises
    ------
    FabricModelError
        For an unknown engine, a grid over ``max_designs`` or a cluster that cannot be
        reached (one line each).
    """
    if engine not in ENGINES:
        raise FabricModelError(f"--engine {engine}: must be one of {', '.join(ENGINES)}")
    if scheduler and engine != "dask":
        raise FabricModelError("--scheduler: needs --engine dask")
    if max_designs < 1:
        raise FabricModelError(f"--max-designs {max_designs}: must be at least 1")
    if workers is not None and workers < 1:
        raise FabricModelError(f"--workers {workers}: must be at least 1")
    grid = design_grid(dimensions, max_designs)
    tasks = [DesignTask(base, over, plan_search) for over in grid]
    if engine == "dask":
        designs = _run_dask(tasks, scheduler, workers, progress)
    else:
        designs = []
        for d in map_fn(evaluate_design, tasks):
            designs.append(d)
            if progress:
                progress(len(designs), len(tasks))
    points = [
        (d["time_to_train_days"], d["cost_per_run_usd"]) if d["feasible"] else None for d in designs
    ]
    for d, flag in zip(designs, pareto_flags(points), strict=True):
        d["pareto"] = flag
    return ExploreResult(tuple(designs), engine)


def write_csv(result: ExploreResult, path: str) -> None:
    """Write one row per design: the varied keys, then the numbers, feasibility and reason.

    Raises
    ------
    FabricModelError
        When the file cannot be written.
    """
    keys: list[str] = []
    for d in result.designs:
        keys += [k for k in d["keys"] if k not in keys]
    columns = [*keys, "feasible", "pareto", *NUMBERS, *EXTRAS, *SHAPE, "plan", "reason"]
    try:
        with open(path, "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(columns)
            for d in result.designs:
                row = [d["keys"].get(k) for k in keys]
                row += [d.get(c) for c in columns[len(keys) :]]
                writer.writerow(["" if v is None else v for v in row])
    except OSError as exc:
        raise FabricModelError(f"--out {path}: {exc.strerror or exc}") from None


# -------------------------------------------------------------------------- sensitivity


@dataclass(frozen=True)
class Sensitivity:
    """One assumption varied over a stated range, and the cost per run at each end.

    ``low_usd`` / ``high_usd`` are None where that end cannot train (``note`` says why).
    """

    label: str
    key: str
    range_text: str
    low_value: Any
    high_value: Any
    low_usd: float | None
    high_usd: float | None
    note: str = ""

    @property
    def swing_usd(self) -> float:
        """Spread of the cost per run over the range, USD (0 when an end is missing)."""
        if self.low_usd is None or self.high_usd is None:
            return 0.0
        return abs(self.high_usd - self.low_usd)


def _neighbours(choices: Sequence[Any], value: Any) -> tuple[Any, Any]:
    i = list(choices).index(value)
    return choices[max(0, i - 1)], choices[min(len(choices) - 1, i + 1)]


def sensitivity_ranges(base: Scenario) -> list[tuple[str, str, str, Any, Any]]:
    """Return the assumptions varied for the tornado: ``(label, key, range, low, high)``.

    Prices +-30 % of the design's own (catalog or override), failure rates halved and doubled
    (the network's, thin data, from a third to three times), compute efficiency +-15 % (at
    most 1), the restart 5 to 30 minutes, the link speed one step down and up the allowed
    speeds, the leaf oversubscription from non-blocking to twice the design's.
    """
    from fabric_model.plant.cost import bill_of_materials
    from fabric_model.scenario import field_spec

    bom = bill_of_materials(base)
    server = bom.server_unit_price_usd
    switch = base.costs.switch_usd or bom.hardware.switch.price_usd
    r, tr, f = base.reliability, base.training, base.fabric
    slow, fast = _neighbours(field_spec("fabric.link_gbps").choices, f.link_gbps)
    eff = tr.compute_efficiency
    return [
        ("GPU server price", "costs.server_usd", "+-30 %", 0.7 * server, 1.3 * server),
        ("switch price", "costs.switch_usd", "+-30 %", 0.7 * switch, 1.3 * switch),
        (
            "electricity price",
            "costs.electricity_usd_per_kwh",
            "+-50 %",
            0.5 * base.costs.electricity_usd_per_kwh,
            1.5 * base.costs.electricity_usd_per_kwh,
        ),
        (
            "GPU failure rate",
            "reliability.gpu_failures_per_year",
            "x0.5 to x2",
            0.5 * r.gpu_failures_per_year,
            2 * r.gpu_failures_per_year,
        ),
        (
            "optic and cable failure rate",
            "reliability.optic_failures_per_year",
            "x1/3 to x3 (thin data)",
            r.optic_failures_per_year / 3,
            3 * r.optic_failures_per_year,
        ),
        ("restart time", "reliability.restart_s", "5 to 30 min", 300.0, 1800.0),
        (
            "compute efficiency",
            "training.compute_efficiency",
            "+-15 %",
            0.85 * eff,
            min(1.0, 1.15 * eff),
        ),
        ("link speed", "fabric.link_gbps", "one speed down and up", slow, fast),
        (
            "leaf oversubscription",
            "fabric.oversubscription",
            "1:1 to twice the design's",
            1.0,
            min(16.0, 2 * f.oversubscription),
        ),
    ]


def sensitivity(base: Scenario, map_fn: MapFn = map) -> list[Sensitivity]:
    """Cost per run of ``base`` with each assumption at each end of its range.

    Ranges from :func:`sensitivity_ranges`; sorted by swing, largest first (a tornado).
    The optic range moves the cable rate with it (one calibration, assets/reliability.yaml).
    """
    ranges = sensitivity_ranges(base)
    r = base.reliability
    tasks = []
    for _, key, _, low, high in ranges:
        for value in (low, high):
            over = {key: value}
            if key == "reliability.optic_failures_per_year" and r.optic_failures_per_year > 0:
                # the cable rate moves by the same factor as the optic rate
                factor = value / r.optic_failures_per_year
                over["reliability.cable_failures_per_year"] = factor * r.cable_failures_per_year
            tasks.append(DesignTask(base, over))
    results = list(map_fn(evaluate_design, tasks))
    out = []
    for i, (label, key, text, low, high) in enumerate(ranges):
        lo, hi = results[2 * i], results[2 * i + 1]
        notes = [f"{v}: {d['reason']}" for v, d in ((low, lo), (high, hi)) if not d["feasible"]]
        out.append(
            Sensitivity(
                label,
                key,
                text,
                low,
                high,
                lo["cost_per_run_usd"],
                hi["cost_per_run_usd"],
                "; ".join(notes),
            )
        )
    return sorted(out, key=lambda s: -s.swing_usd)
