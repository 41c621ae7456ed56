"""The result of a training step: :class:`StepResult`, its totals and its assembly.

:func:`step_totals` adds the step's terms (compute, imbalance, bubble, the host-side terms,
each dimension's exposed communication, a flapping link's stall) and :func:`assemble` builds
the :class:`StepResult` the dashboard, the report and the command line show (its
:meth:`~StepResult.to_dict` is the ``step`` JSON contract).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from fabric_model.training.comm import Communication
from fabric_model.training.compute import ComputeTimes
from fabric_model.training.memory import MemoryBreakdown
from fabric_model.training.offload import OffloadPath
from fabric_model.training.plan import Plan, Problem, StepInputs

__all__ = ["DIMS", "HostTerms", "StepResult", "StepTotals", "assemble", "step_totals"]

#: Communication dimensions, in the order the breakdown shows them.
DIMS = ("dp", "tp", "pp", "ep", "cp")


@dataclass(frozen=True)
class StepResult:
    """One training step of a scenario (see the module docstring for every term).

    ``feasible`` is False when the plan cannot run (``problems`` says why, with the key to
    change); the memory figures are still filled in where the plan could be resolved.
    """

    n_gpus: int
    feasible: bool
    problems: tuple[Problem, ...]
    plan: Plan | None = None
    step_time_s: float = math.nan
    compute_s: float = math.nan
    imbalance_s: float = 0.0
    #: p50 and p99 over iterations (``tails.*``: stragglers, jitter, ECMP draws); both
    #: ``step_time_s`` with ``tails.enabled = false``
    step_time_p50_s: float = math.nan
    step_time_p99_s: float = math.nan
    bubble_s: float = math.nan
    exposed_comm_s: float = math.nan
    comm_s: dict[str, float] = field(default_factory=dict)
    exposed_s: dict[str, float] = field(default_factory=dict)
    comm_detail: dict[str, str] = field(default_factory=dict)
    mfu: float = math.nan
    tokens_per_s: float = math.nan
    tokens_per_step: float = math.nan
    model_flops_per_step: float = math.nan
    memory: MemoryBreakdown | None = None
    mfu_precision_peak: float = math.nan
    warnings: tuple[str, ...] = ()
    #: Activation offload to host memory not hidden behind compute (``training.offload_layers``).
    offload_s: float = 0.0
    #: The optimizer step (memory-bound, exposed; with ``training.dp_overlap = auto``).
    optimizer_s: float = 0.0
    #: Seconds per step each dimension's congested ports hold PFC pause (an incast on a PFC
    #: transport, :meth:`~fabric_model.collectives.model.AlgoModel.pause_s`): the time the
    #: links feeding them stop every flow of the priority, other jobs' too (the shared
    #: cluster charges it to them, :mod:`fabric_model.run.interference`). Positive only.
    pfc_pause_s: dict[str, float] = field(default_factory=dict)
    #: Time a flapping NIC link stalls the rest of the step (``what_if.
    #: flapping_link``): every rank waits while the link retrains and the QPs
    #: time out, ``(step - exposed network) x f / (1 - f)`` for a stall share ``f`` (the
    #: network collectives already take ``1 / (1 - f)`` as long).
    stall_s: float = 0.0
    scale_out_dims: tuple[str, ...] = ()
    precision: str = "bf16"
    #: OCS reconfiguration per step (``ocs.reconfigure = phase``), in ``exposed_s["dp"]``.
    ocs_reconfig_s: float = 0.0
    #: The MoE router, permutation and small kernels (inside ``compute_s``; :mod:`.moe`).
    moe_overhead_s: float = 0.0
    #: Where offloaded activations go (``training.offload_target``) and the path's rate per
    #: GPU and direction, GB/s ('' and 0 without offload).
    offload_via: str = ""
    offload_GBps: float = 0.0

    @property
    def exposed_scale_out_s(self) -> float:
        """Exposed time of the dimensions whose groups cross NVLink domains (the network)."""
        if not self.feasible:
            return math.nan
        return sum(self.exposed_s.get(d, 0.0) for d in self.scale_out_dims)

    @property
    def exposed_scale_up_s(self) -> float:
        """Exposed time of the dimensions whose groups stay inside an NVLink domain."""
        if not self.feasible:
            return math.nan
        return self.exposed_comm_s - self.exposed_scale_out_s

    @property
    def ideal_scale_out_step_s(self) -> float:
        """The same step with an infinitely fast scale-out network (NVLink as modelled).

        What a better InfiniBand or Ethernet design can recover at most is
        ``step_time_s - ideal_scale_out_step_s``.
        """
        return self.step_time_s - self.exposed_scale_out_s if self.feasible else math.nan

    @property
    def scale_out_share_of_step(self) -> float:
        """Share of the step the scale-out fabric exposes (DP, PP, EP/CP across domains)."""
        return self.exposed_scale_out_s / self.step_time_s if self.feasible else math.nan

    @property
    def scale_up_share_of_step(self) -> float:
        """Share of the step NVLink exposes (TP, and whatever stays inside a domain)."""
        return self.exposed_scale_up_s / self.step_time_s if self.feasible else math.nan

    @property
    def reason(self) -> str:
        """The problems as one line ('' when feasible)."""
        return "; ".join(str(p) for p in self.problems)

    @property
    def ideal_network_step_s(self) -> float:
        """The same step with an infinitely fast network: compute, imbalance and bubble only.

        What the fabric costs this plan is ``step_time_s - ideal_network_step_s``, the
        exposed communication of every dimension (pipeline sends included).
        """
        if not self.feasible:
            return math.nan
        return self.compute_s + self.imbalance_s + self.bubble_s + self.offload_s + self.optimizer_s

    @property
    def bubble_fraction(self) -> float:
        """Share of the step the pipeline idles."""
        return self.bubble_s / self.step_time_s if self.feasible else math.nan

    def to_dict(self) -> dict[str, Any]:
        """Return the ``step`` JSON contract, plus plan, breakdown and feasibility."""
        mem = self.memory
        out: dict[str, Any] = {
            "n_gpus": self.n_gpus,
            "feasible": self.feasible,
            "reason": self.reason,
            "step_time_s": self.step_time_s,
            "step_time_p50_s": self.step_time_p50_s,
            "step_time_p99_s": self.step_time_p99_s,
            "compute_s": self.compute_s,
            "imbalance_s": self.imbalance_s,
            "bubble_s": self.bubble_s,
            "offload_s": self.offload_s,
            "optimizer_s": self.optimizer_s,
            "stall_s": self.stall_s,
            "ocs_reconfig_s": self.ocs_reconfig_s,
            "moe_overhead_s": self.moe_overhead_s,
            "offload_via": self.offload_via,
            "offload_GBps": self.offload_GBps,
            "exposed_comm_s": self.exposed_comm_s,
            "step_time_ideal_network_s": self.ideal_network_step_s,
            "network_share_of_step": (
                self.exposed_comm_s / self.step_time_s if self.feasible else math.nan
            ),
            "scale_out_share_of_step": self.scale_out_share_of_step,
            "scale_up_share_of_step": self.scale_up_share_of_step,
            "exposed_scale_out_s": self.exposed_scale_out_s,
            "exposed_scale_up_s": self.exposed_scale_up_s,
            "step_time_ideal_scale_out_s": self.ideal_scale_out_step_s,
            "scale_out_dims": list(self.scale_out_dims),
            "schedule": self.plan.schedule if self.plan else "",
            "comm_s": {d: self.comm_s.get(d, 0.0) for d in DIMS},
            "exposed_s": {d: self.exposed_s.get(d, 0.0) for d in DIMS},
            "comm_detail": dict(self.comm_detail),
            "mfu": self.mfu,
            "mfu_precision_peak": self.mfu_precision_peak,
            "precision": self.precision,
            "warnings": list(self.warnings),
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_step": self.tokens_per_step,
            "model_flops_per_step": self.model_flops_per_step,
            "memory_gib_per_gpu": mem.total_gib if mem else math.nan,
            "memory_status": mem.status if mem else "",
            "memory": _memory_dict(mem) if mem else None,
            "plan": asdict(self.plan) if self.plan else None,
        }
        return out


def _memory_dict(mem: MemoryBreakdown) -> dict[str, Any]:
    """Return the breakdown's fields, each pipeline rank with its total."""
    out = asdict(mem)
    for stage, st in zip(out["stages"], mem.stages, strict=True):
        stage["total_gib"] = st.total_gib
    return out


@dataclass(frozen=True)
class HostTerms:
    """The step's terms off the network: activation offload and the optimizer step, seconds.

    ``offload_path`` is where offloaded activations go (None without offload).
    """

    offload_s: float = 0.0
    optimizer_s: float = 0.0
    offload_path: OffloadPath | None = None


@dataclass(frozen=True)
class StepTotals:
    """The step's time and what it adds up from, seconds.

    ``step_s`` with the flapping link's ``stall_s``; ``exposed_comm_s`` every dimension's
    exposed communication.
    """

    step_s: float
    stall_s: float
    exposed_comm_s: float


def step_totals(ct: ComputeTimes, comm: Communication, host: HostTerms) -> StepTotals:
    """Add the step: compute, imbalance, bubble, host terms, exposed communication, stall.

    A flapping link (``what_if.flapping_link``) stalls every rank: the network collectives
    already stretch by ``1 / (1 - f)``; the rest of the step waits as long in proportion,
    ``(step - exposed network) x f / (1 - f)`` for the attention grid's fabric's stall share
    ``f`` (0 when no dimension runs on the scale-out network).
    """
    exposed = comm.exposed_s
    exposed_total = comm.exposed_total_s
    busy = ct.compute_s + ct.imbalance_s + ct.bubble_s
    step = busy + host.offload_s + host.optimizer_s + exposed_total
    scale_out = comm.scale_out_dims
    f = comm.fabrics.dims.facts.stall_fraction if scale_out else 0.0
    stall = (step - sum(exposed[d] for d in scale_out)) * f / (1.0 - f)
    return StepTotals(step + stall, stall, exposed_total)


def assemble(
    inputs: StepInputs,
    ct: ComputeTimes,
    comm: Communication,
    host: HostTerms,
    totals: StepTotals,
    quantiles_s: tuple[float, float],
) -> StepResult:
    """Build the feasible step's :class:`StepResult` from its stages' values.

    Adds the MFU (model FLOPs of the tokens computed over the GPUs' dense BF16 peak and the
    step time, and against the precision's peak), the tokens per second and the fabric's
    misconfiguration notes to the stages' warnings; ``quantiles_s`` is the step's (p50, p99).
    """
    s, plan, gpu = inputs.scenario, inputs.plan, inputs.gpu
    n, seq, step = s.cluster.n_gpus, s.model.seq_len, totals.step_s
    notes = list(comm.fabrics.dims.facts.misconfiguration_notes)
    tokens = float(plan.sequences_per_step * seq)  # the batch computed (warned when rounded)
    flops = inputs.counts.model_flops_per_token(seq) * tokens
    mfu = flops / (n * gpu.bf16_dense_tflops * 1e12 * step)
    path = host.offload_path
    return StepResult(
        n_gpus=n,
        feasible=True,
        problems=(),
        plan=plan,
        step_time_s=step,
        step_time_p50_s=quantiles_s[0],
        step_time_p99_s=quantiles_s[1],
        compute_s=ct.compute_s,
        imbalance_s=ct.imbalance_s,
        bubble_s=ct.bubble_s,
        exposed_comm_s=totals.exposed_comm_s,
        comm_s=comm.comm_s,
        exposed_s=comm.exposed_s,
        comm_detail=comm.detail,
        pfc_pause_s=comm.pause_s,
        mfu=mfu,
        tokens_per_s=tokens / step,
        tokens_per_step=tokens,
        model_flops_per_step=flops,
        memory=inputs.memory,
        mfu_precision_peak=mfu / ct.gemm_speedup,
        warnings=(*inputs.warnings, *notes),
        scale_out_dims=comm.scale_out_dims,
        precision=s.training.precision,
        offload_s=host.offload_s,
        optimizer_s=host.optimizer_s,
        stall_s=totals.stall_s,
        ocs_reconfig_s=comm.fabrics.reconfig_s if "dp" in comm.terms else 0.0,
        moe_overhead_s=ct.moe_overhead_s,
        offload_via=f"{path.target}: {path.via}" if path else "",
        offload_GBps=path.GBps if path else 0.0,
    )
