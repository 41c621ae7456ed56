"""Collectives on the modelled fabric: one front door, NCCL-like ``auto`` selection.

>>> from fabric_model.scenario import Scenario
>>> rows = collective(Scenario(), "allreduce", "auto", [8, 2**30])
>>> [r.algo for r in rows]  # doctest: +SKIP
['tree', 'ring']
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from fabric_model.catalog import Catalog
from fabric_model.collectives.algorithms import ModelLimitError
from fabric_model.collectives.context import FabricContext, nccl_constants
from fabric_model.collectives.model import (
    OPS,
    AlgoModel,
    AlgorithmUnavailableError,
    CollectiveTime,
    bus_factor,
)
from fabric_model.collectives.registry import (
    ALGORITHMS,
    ALGOS,
    AUTO_CANDIDATES,
    MODELS,
    NCCL_ALGO_MODELS,
    Algorithm,
    auto_candidates,
    check_op,
    check_version,
    forced_models,
)
from fabric_model.collectives.tails import with_tails
from fabric_model.errors import ScenarioError
from fabric_model.scenario import NcclSpec, Scenario

__all__ = [
    "ALGORITHMS",
    "ALGOS",
    "AUTO_CANDIDATES",
    "OPS",
    "AlgoModel",
    "Algorithm",
    "AlgorithmUnavailableError",
    "CollectiveTime",
    "FabricContext",
    "ModelLimitError",
    "algo_models",
    "auto_candidates",
    "collective",
    "nccl_constants",
    "times_from_models",
    "unavailable_message",
    "with_tails",
]


def algo_models(ctx: FabricContext, op: str, algo: str) -> list[AlgoModel]:
    """Return the models ``algo`` stands for: itself, or every available ``auto`` candidate.

    Raises
    ------
    ScenarioError
        Unknown ``op`` or ``algo``.
    AlgorithmUnavailableError
        An explicitly requested algorithm that cannot run here (the message says why), or
        ``auto`` with no candidate that can: one message with each candidate's reason, a
        limit of the model (:class:`ModelLimitError`) told apart from what the design cannot
        run.
    """
    if op not in OPS:
        raise ScenarioError("op", op, "must be one of " + ", ".join(OPS))
    if algo not in ALGOS:
        raise ScenarioError("algo", algo, "must be one of " + ", ".join(ALGOS))
    if algo == "nvls" and not ctx.scenario.fabric.nvls:
        raise AlgorithmUnavailableError(
            "nvls is disabled (fabric.nvls = false, as NCCL_NVLS_ENABLE=0); use ring or tree"
        )
    nccl = ctx.scenario.nccl
    forced = nccl.algo != "auto" and op != "alltoall"  # NCCL_ALGO: collectives only
    if forced and nccl.algo not in NCCL_ALGO_MODELS:
        raise AlgorithmUnavailableError(
            f"nccl.algo = {nccl.algo} (NCCL_ALGO={nccl.algo}) has no model: the model's SHARP "
            f"is CollNet Direct (nccl.algo = collnetdirect)"
        )
    if algo != "auto":
        check_op(algo, op)
        check_version(algo, nccl)
        if forced and algo not in forced_models(nccl.algo, op):
            raise AlgorithmUnavailableError(
                f"{algo} is not what nccl.algo = {nccl.algo} forces (NCCL_ALGO="
                f"{nccl.algo}); use --algo auto or {NCCL_ALGO_MODELS[nccl.algo]}"
            )
        return [_nccl_knobs(_with_pattern(ctx, MODELS[algo], op), nccl, op)]
    out, reasons = [], []
    # the registry's switches: SHARP only with fabric.sharp, NVLS only with fabric.nvls; the
    # NCCL release's algorithms, registered buffers and NCCL_ALGO (nccl.*)
    for name in auto_candidates(ctx.scenario.fabric, op, nccl):
        try:
            out.append(_nccl_knobs(_with_pattern(ctx, MODELS[name], op), nccl, op))
        except AlgorithmUnavailableError as exc:
            reasons.append((name, exc))
    if not out:
        if forced and not reasons:
            raise AlgorithmUnavailableError(
                f"nccl.algo = {nccl.algo} (NCCL_ALGO={nccl.algo}) does not run {op} here "
                f"(nccl.version = {nccl.version}, fabric.sharp / fabric.nvls switches)"
            )
        raise AlgorithmUnavailableError(unavailable_message(op, reasons))
    return out


def _with_pattern(ctx: FabricContext, fn: object, op: str) -> AlgoModel:
    """Run one algorithm's model and attach the network pattern it solved (if any)."""
    ctx.take_last_pattern()
    model: AlgoModel = fn(ctx, op)  # type: ignore[operator]
    pattern = ctx.take_last_pattern()
    if pattern is None or model.inter_Bps == math.inf:
        return model
    return replace(model, pattern=pattern)


def _nccl_knobs(model: AlgoModel, nccl: NcclSpec, op: str) -> AlgoModel:
    """Apply ``nccl.algo``'s NVLS / NVLSTree distinction and ``nccl.proto`` to one model.

    NCCL's NVLS across nodes needs CollNet (NVLS + SHARP) and its NVLS-Tree does not run on
    one node (``tuning.cc``); NCCL_PROTO leaves the algorithm only that protocol.

    Raises
    ------
    AlgorithmUnavailableError
        Naming ``nccl.algo`` or ``nccl.proto``.
    """
    if op == "alltoall":  # point-to-point in NCCL: NCCL_ALGO / NCCL_PROTO do not choose it
        return model
    if nccl.algo == "nvls" and model.algo == "nvls-tree":
        raise AlgorithmUnavailableError(
            "nccl.algo = nvls: across NVLink domains NCCL runs NVLS only with CollNet (NVLS + "
            "SHARP: nccl.algo = collnetdirect with fabric.sharp); NVLS-Tree is nccl.algo = "
            "nvlstree"
        )
    if nccl.algo == "collnetdirect" and model.algo == "nvls-sharp":
        raise AlgorithmUnavailableError(
            "nccl.algo = collnetdirect: across NVLink domains the model's SHARP all-gather and "
            "reduce-scatter is NCCL's NVLS + IB SHARP (nccl.algo = nvls); CollNet Direct's "
            "all-gather / reduce-scatter is not modelled"
        )
    if nccl.algo == "nvlstree" and model.algo == "nvls":
        raise AlgorithmUnavailableError(
            "nccl.algo = nvlstree runs across NVLink domains (NCCL has no NVLS-Tree on one "
            "node); this job fits in one domain: nccl.algo = nvls"
        )
    if nccl.proto == "auto":
        return model
    if nccl.proto not in model.latency_us:
        raise AlgorithmUnavailableError(
            f"nccl.proto = {nccl.proto}: {model.algo} runs {', '.join(model.protocols)} only"
        )
    return replace(model, latency_us={nccl.proto: model.latency_us[nccl.proto]})


def unavailable_message(op: str, reasons: Sequence[tuple[str, Exception]]) -> str:
    """One line saying why no ``auto`` candidate runs ``op``: each candidate and its reason.

    A :class:`ModelLimitError` is called a limit of the model (the collective runs on the
    design; this model version cannot solve it), any other reason what the design cannot run.
    """
    if not reasons:
        return f"no algorithm can run {op} on this design"
    limits = [isinstance(exc, ModelLimitError) for _, exc in reasons]
    why = (
        "a limit of the model, not of the design"
        if all(limits)
        else "the design cannot run it"
        if not any(limits)
        else "limits of the model and of the design"
    )
    parts = [
        f"{name} ({'model limit' if limit else 'cannot run here'}: {exc})"
        for (name, exc), limit in zip(reasons, limits, strict=True)
    ]
    return f"no algorithm of auto can run {op} ({why}): " + "; ".join(parts)


def times_from_models(
    models: Sequence[AlgoModel], sizes: Sequence[int], requested: str
) -> list[CollectiveTime]:
    """Evaluate, at each size, the (algorithm, protocol) of ``models`` NCCL's tuner picks.

    NCCL chooses by its own cost table (``tuning.cc``: channels x graph bandwidth with its
    refinements, and its latencies), not by what the fabric delivers; the row gives the
    delivered time of that choice and, in ``fastest_*``, the candidate the fabric would run
    fastest (NCCL's miss when they differ, e.g. NVIDIA/nccl issue 1801).
    """
    rows = []
    # the candidates change only where a size passes a bypassing model's threshold
    bypassing = [m for m in models if m.bypasses_tuner]
    pools: dict[tuple[bool, ...], list[tuple[AlgoModel, str]]] = {}
    # each model's transport slowdown at every size, in one pass (none without an incast)
    slowdowns = {id(m): m.transport_slowdowns(sizes) for m in models if m.incast is not None}
    for i, size in enumerate(sizes):
        key = tuple(size >= m.bypass_from_bytes for m in bypassing)
        candidates = pools.get(key)
        if candidates is None:
            candidates = pools[key] = _candidates(models, size, requested)
        # NCCL picks by its tuner's table (tuning.cc); the fabric then delivers what it does
        m, proto = min(candidates, key=lambda mp: mp[0].tuner_time_us(size, mp[1]))
        if slowdowns:
            slow = {k: v[i] for k, v in slowdowns.items()}
            fast_m, fast_p = min(
                candidates, key=lambda mp: mp[0].time_us(size, mp[1], slow.get(id(mp[0])))
            )
        else:
            slow = {}
            fast_m, fast_p = min(candidates, key=lambda mp: mp[0].time_us(size, mp[1]))
        t = m.time_us(size, proto, slow.get(id(m)))
        lat = m.latency_term_us(size, proto)
        factor = bus_factor(m.op, m.n_ranks)
        algbw = size / t / 1e3 if t > 0 else 0.0  # bytes/us -> GB/s
        busbw = algbw * factor
        # the ECMP seed range: the same latency, the bandwidth term at each seed's bandwidth
        band = []
        for seed_bw in m.busbw_range_Bps:
            t_seed = _seed_time_us(m, t, lat, seed_bw)
            band.append(size / t_seed / 1e3 * factor if t_seed > 0 else 0.0)
        rows.append(
            CollectiveTime(
                op=m.op,
                algo=m.algo,
                proto=proto,
                size_bytes=int(size),
                n_ranks=m.n_ranks,
                time_us=t,
                latency_us=lat,
                bandwidth_us=t - lat,
                algbw_GBps=algbw,
                busbw_GBps=busbw,
                busbw_min_GBps=min(band[0], busbw),
                busbw_max_GBps=max(band[1], busbw),
                bottleneck=m.bottleneck,
                requested_algo=requested,
                fastest_algo=fast_m.algo,
                fastest_proto=fast_p,
                fastest_time_us=fast_m.time_us(size, fast_p, slow.get(id(fast_m))),
                ceiling=m.ceiling,
                ceiling_GBps=m.ceiling_Bps / 1e9,
                transport_efficiency=1.0 / slow.get(id(m), 1.0),
                seed_scales=m.seed_time_scales,
                time_us_p50=t,
                time_us_p99=t,
            )
        )
    return rows


def _candidates(
    models: Sequence[AlgoModel], size: float, requested: str
) -> list[tuple[AlgoModel, str]]:
    """Return the (model, protocol) pairs NCCL chooses among for a call of ``size`` bytes.

    NCCL runs what bypasses its tuner whenever it can (the symmetric kernels on registered
    buffers; the copy engines under NCCL_CTA_POLICY_ZERO, or above their size threshold on
    Blackwell from 2.29), the highest ``bypass_priority`` first; otherwise its tuner's
    table decides among the rest. An algorithm asked for by name runs at every size.
    """
    bypass = [m for m in models if m.bypasses_tuner and size >= m.bypass_from_bytes]
    if bypass:
        top = max(m.bypass_priority for m in bypass)
        pool = [m for m in bypass if m.bypass_priority == top]
    else:
        pool = [m for m in models if not m.bypasses_tuner]
        if not pool or requested != "auto":
            pool = list(models)
    return [(m, p) for m in pool for p in m.protocols]


def _seed_time_us(m: AlgoModel, t: float, lat: float, seed_bw: float) -> float:
    """Return a call's time at one ECMP seed's bus bandwidth, microseconds.

    The same latency, the bandwidth term scaled by ``busbw / seed busbw`` (``inf`` for a seed
    that delivers nothing).
    """
    scale = seed_bw / m.busbw_Bps if m.busbw_Bps else 1.0
    return lat + (t - lat) / scale if scale > 0 else math.inf


def collective(
    scenario: Scenario, op: str, algo: str, sizes: Sequence[int], catalog: Catalog | None = None
) -> list[CollectiveTime]:
    """Time of one collective across ``cluster.n_gpus`` ranks for each size (bytes).

    ``algo = "auto"`` picks, per size, the (algorithm, protocol) NCCL's tuner would pick from
    the available ones; an explicit algorithm still has its protocol picked that way.
    """
    ctx = FabricContext.from_scenario(scenario, catalog)
    models = algo_models(ctx, op, algo)
    if not models:
        raise AlgorithmUnavailableError(f"no algorithm can run {op} on this design")
    rows = times_from_models(models, sizes, algo)
    if not scenario.tails.enabled:
        return rows
    return [with_tails(row, scenario.tails) for row in rows]
