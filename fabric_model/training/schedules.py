"""Pipeline schedules: which plans a framework runs, their bubble and their memory.

``training.schedule`` picks the schedule (``auto`` = ``interleaved`` when ``parallel.vpp > 1``,
else ``1f1b``). Per micro-batch and pipeline rank, ``F`` is the forward time, ``B`` the
whole backward (input and weight gradients, recomputation included) and ``W`` its
weight-gradient GEMMs; ``t_mb = F + B``, ``p`` stages, ``v`` chunks per rank, ``m``
micro-batches. The bubble is the idle time of the slowest rank (the heaviest stage paces the
pipeline: an uneven layer split pays its steady state and its fill and drain at the heaviest
rank's ``t_mb``, an upper bound on the flow-shop makespan ``sum t_i + (m - 1) max t_i``):

============  =====================================  =========================================
schedule      bubble                                 memory
============  =====================================  =========================================
1f1b          ``(p - 1)(F + B)``                     rank ``i`` holds ``min(p - i, m)``
                                                     micro-batches (Narayanan et al. 2021)
interleaved   ``[(p - 1) + (v - 1) max(0, p - m)]    ``1 + (p - 1)/(p v)`` x 1F1B's on rank 0
              / v x (F + B)``                        (Korthikanti et al. 2022, 4.2.3)
dualpipe      ``(p/2 - 1)(F&B + B - 3W)``,           2 x parameters, ``p + 1`` micro-batches
              ``F&B = F + B``                        (DeepSeek-V3 report, Table 2); the two
                                                     copies of a stage are data-parallel
                                                     replicas, ZeRO shards over both
zb            ZB-H1: ``(p - 1)(F + B - 2W)``         as 1F1B (Qi et al., ICLR 2024, 3.1)
zb-h2         ZB-H2: ``max(0, (p - 1)(F + B - 3W))`` ``2 p`` micro-batches on rank 0 (3.1)
============  =====================================  =========================================

The interleaved bubble for ``m < p`` (the pipeline never fills) follows from the schedule's
dependencies: a rank runs chunk ``j`` of its ``m`` micro-batches (``m F / v``), then waits
for the first of them to come back round the ``p`` ranks (``p F / v`` after it started), so
each of the ``v - 1`` chunk changes idles ``(p - m) F / v``, on top of the ``(p - 1) F / v``
fill; the backward mirrors it. At ``m = p`` it is Narayanan et al.'s ``(p - 1)/v``, at
``m = 1`` it is ``p - 1``: a single micro-batch crosses the ``p v`` chunks one after the
other.

Rules the frameworks enforce (a plan that breaks one is refused, naming the key):

- Megatron-core's interleaved schedule runs micro-batches in groups of
  ``microbatch_group_size_per_vp_stage`` (default ``p``): ``m >= p`` and ``m % p == 0``
  (``megatron/core/pipeline_parallel/schedules.py``,
  ``forward_backward_pipelining_with_interleaving``: "The number of contiguous micro-batches
  in a virtual pipeline stage should range in [PP, M]" and "The remainder of M ... divided by
  N ... should be 0, or larger than or equal to the pipeline-parallel size"; older releases:
  "number of microbatches is not divisible by pipeline-model-parallel-size when using
  interleaved schedule"). PyTorch's ``ScheduleInterleaved1F1B`` (torchtitan) runs
  ``max(1, m // p)`` rounds and needs ``m`` to be a multiple of them (so ``m < p`` runs, with
  the bubble above).
- Both frameworks assert that the global batch is a multiple of ``micro_batch x dp``
  (Megatron-core ``num_microbatches_calculator.py``, ``ConstantNumMicroBatchesCalculator``;
  torchtitan ``train.py``: "global batch size must be multiple of local batch size times
  data-parallel degree").
- DualPipe needs an even ``p`` and an even ``m`` (DeepSeek-V3 report, section 3.2.1: "DualPipe
  only requires that the pipeline stages and micro-batches be divisible by 2"), and its
  reference implementation at least ``2 p`` micro-batches (deepseek-ai/DualPipe,
  ``dualpipe.py``, ``DualPipe.step``: ``num_chunks >= num_ranks * 2``).
- Only ``interleaved`` runs ``v > 1`` chunks per rank; ``interleaved`` needs ``v > 1``.

Sources: Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters
Using Megatron-LM" (SC 2021); DeepSeek-AI, "DeepSeek-V3 Technical Report" (arXiv
2412.19437), section 3.2.1 and Table 2; Qi, Wan, Huang, Lin, "Zero Bubble Pipeline
Parallelism" (ICLR 2024, arXiv 2401.10241), section 3 and Table 2.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "SCHEDULES",
    "bubble_s",
    "in_flight_micro_batches",
    "nearest_batches",
    "parameter_copies",
    "resolve_schedule",
    "schedule_problems",
]

#: Schedules the step models (``training.schedule`` without ``auto``).
SCHEDULES = ("1f1b", "interleaved", "dualpipe", "zb", "zb-h2")


def resolve_schedule(schedule: str, vpp: int) -> str:
    """Return the schedule ``training.schedule`` names (``auto``: interleaved iff vpp > 1)."""
    if schedule == "auto":
        return "interleaved" if vpp > 1 else "1f1b"
    return schedule


def schedule_problems(
    schedule: str, framework: str, pp: int, vpp: int, micro_batches: int
) -> list[tuple[str, str]]:
    """Return ``(key, message)`` for every rule of the module docstring the plan breaks.

    >>> schedule_problems("interleaved", "megatron", 2, 63, 1)[0][0]
    'parallel.vpp'
    >>> schedule_problems("interleaved", "torchtitan", 2, 63, 1)
    []
    """
    out: list[tuple[str, str]] = []
    m = micro_batches
    if pp <= 1:  # no pipeline: every schedule is the same (parallel.vpp > 1 is refused apart)
        return out
    if schedule != "interleaved" and vpp > 1:
        out.append(
            (
                "training.schedule",
                f"{schedule} runs one model chunk per rank but parallel.vpp = {vpp}: set "
                f"training.schedule = interleaved (or auto), or parallel.vpp = 1",
            )
        )
    if schedule == "interleaved" and vpp == 1:
        out.append(
            (
                "parallel.vpp",
                "training.schedule = interleaved needs parallel.vpp > 1 model chunks per rank",
            )
        )
    if schedule == "interleaved" and vpp > 1:
        if framework == "megatron" and (m < pp or m % pp):
            out.append(
                (
                    "parallel.vpp",
                    f"Megatron's interleaved schedule needs the micro-batches per step "
                    f"({m:,} = global batch / (dp x micro_batch)) to be a multiple of "
                    f"parallel.pp = {pp} (megatron/core/pipeline_parallel/schedules.py); "
                    f"set parallel.vpp = 1, or change training.global_batch_tokens, "
                    f"training.micro_batch or the parallel degrees",
                )
            )
        elif framework != "megatron" and m % max(1, m // pp):
            out.append(
                (
                    "parallel.vpp",
                    f"PyTorch's ScheduleInterleaved1F1B needs the micro-batches ({m:,}) to be "
                    f"a multiple of its rounds max(1, m // pp) = {max(1, m // pp)}; set "
                    f"parallel.vpp = 1 or change the batch",
                )
            )
    if schedule == "dualpipe" and (pp % 2 or m % 2):
        out.append(
            (
                "parallel.pp" if pp % 2 else "training.micro_batch",
                f"DualPipe needs an even number of pipeline stages and of micro-batches "
                f"(DeepSeek-V3 report 3.2.1); parallel.pp = {pp}, {m:,} micro-batches",
            )
        )
    elif schedule == "dualpipe" and m < 2 * pp:
        out.append(
            (
                "training.micro_batch",
                f"DualPipe runs at least 2 x parallel.pp = {2 * pp} micro-batches, half each "
                f"way (deepseek-ai/DualPipe dualpipe.py, DualPipe.step); this plan has {m:,} "
                f"= global batch / (dp x micro_batch): lower training.micro_batch or raise "
                f"training.global_batch_tokens",
            )
        )
    return out


def bubble_s(
    schedule: str,
    pp: Any,
    vpp: Any,
    micro_batches: Any,
    f_s: Any,
    b_s: Any,
    w_s: Any,
) -> Any:
    """Return the pipeline bubble of the slowest rank, s (see the module docstring).

    Works on scalars and, element-wise, on numpy arrays (the plan search's bound).
    ``f_s``, ``b_s``, ``w_s``: forward, whole backward and weight-gradient time of one
    micro-batch on the heaviest rank.

    >>> round(bubble_s("interleaved", 2, 63, 1, 1.0, 2.0, 1.0), 6)  # m = 1: p - 1
    3.0
    >>> round(bubble_s("interleaved", 8, 4, 8, 1.0, 2.0, 1.0), 6)  # m = p: (p - 1)/v
    5.25
    >>> bubble_s("1f1b", 8, 1, 1, 1.0, 2.0, 1.0), bubble_s("zb", 8, 1, 16, 1.0, 2.0, 1.0)
    (21.0, 7.0)
    """
    p = np.asarray(pp, dtype=float)
    v = np.asarray(vpp, dtype=float)
    m = np.asarray(micro_batches, dtype=float)
    t_mb = np.asarray(f_s, dtype=float) + np.asarray(b_s, dtype=float)
    w = np.asarray(w_s, dtype=float)
    if schedule == "interleaved":
        out = ((p - 1) + (v - 1) * np.maximum(0.0, p - m)) / v * t_mb
    elif schedule == "dualpipe":
        out = np.maximum(0.0, (p / 2 - 1) * (t_mb + np.asarray(b_s, dtype=float) - 3 * w))
    elif schedule == "zb":
        out = (p - 1) * (t_mb - 2 * w)
    elif schedule == "zb-h2":
        out = np.maximum(0.0, (p - 1) * (t_mb - 3 * w))
    else:  # 1f1b
        out = (p - 1) * t_mb
    out = np.where(p > 1, out, 0.0)
    return float(out) if out.ndim == 0 else out


def in_flight_micro_batches(schedule: str, pp: int, rank: int, micro_batches: int) -> float:
    """Return the micro-batches rank ``rank`` holds at its peak under a non-interleaved schedule.

    1F1B and ZB-H1: ``min(p - i, m)``; ZB-H2: ``min(2 (p - i), m)`` (Qi et al. 3.1: a peak
    of ``2 p M_B``); DualPipe: every rank
    holds ``p + 1`` (DeepSeek-V3 Table 2: the bidirectional schedule keeps the ranks even;
    ``DualPipe.step`` runs ``p`` forwards before its first backward, whatever the rank, and
    one more forward overlaps each backward of its main loop), capped by ``m``.

    >>> in_flight_micro_batches("zb-h2", 8, 0, 64), in_flight_micro_batches("dualpipe", 8, 5, 64)
    (16.0, 9.0)
    """
    if schedule == "dualpipe":
        return float(min(pp + 1, micro_batches))
    if schedule == "zb-h2":
        return float(min(2 * (pp - rank), micro_batches))
    return float(min(pp - rank, micro_batches))


def parameter_copies(schedule: str) -> int:
    """Return the stages a rank holds (DualPipe: 2, Table 2 "2x" parameters).

    DualPipe rank ``i`` holds stage ``i`` for the micro-batches that go one way and stage
    ``p - 1 - i`` for those that go the other (deepseek-ai/DualPipe ``examples/
    example_dualpipe.py``: ``nn.Sequential(full_modules[rank], full_modules[pp_size - 1 -
    rank])``, whose gradients it sums with the mirror rank's).
    """
    return 2 if schedule == "dualpipe" else 1


def nearest_batches(seqs: float, per_step: int, seq_len: int) -> tuple[int, int]:
    """Return the global batches in tokens just below and above ``seqs`` that divide evenly.

    >>> nearest_batches(2048, 192, 8192)
    (15728640, 17301504)
    """
    lo = max(1, math.floor(seqs / per_step)) * per_step
    hi = math.ceil(seqs / per_step) * per_step
    if hi == lo:
        hi = lo + per_step
    return lo * seq_len, hi * seq_len
