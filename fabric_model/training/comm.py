"""A step's communication, one term per parallel dimension, on the scenario's fabric.

Each term of :data:`TERMS` reads the step's inputs (:class:`~.plan.StepInputs`), its compute
(:class:`~.compute.ComputeTimes`, for what the collectives hide behind) and the fabrics its
collectives run on (:class:`StepFabrics`), and returns its seconds per step, the part
compute does not hide and what it is (:class:`DimComm`), or None where the plan has no such
communication. The formulas, with their sources, are the step's
(:mod:`fabric_model.training.step`): ``tp`` Megatron sequence parallelism and the expert-TP
gather/scatter, ``cp`` ring attention, ``ep`` the MoE dispatch and combine all-to-alls,
``pp`` the pipeline sends, ``dp`` the gradient reduction and parameter gather in
Megatron-Core's DDP buckets, dense (``dp x cp``) and expert (``edp``) groups, with an OCS
fabric's reconfiguration per phase (:func:`step_fabrics`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fabric_model.scenario import Scenario
from fabric_model.scenario.ocs import reconfig_ms, reduction_scenario
from fabric_model.scenario.shapes import ShapeCounts
from fabric_model.topology.ocs import OCS_DATA
from fabric_model.training.compute import ComputeTimes, layer_flops_per_token
from fabric_model.training.constants import training_constant
from fabric_model.training.fabric import CommTime, DimensionFabric
from fabric_model.training.layout import Layout
from fabric_model.training.memory import model_state_bytes
from fabric_model.training.moe import dispatch_copies, dispatch_padding, fanout_copies
from fabric_model.training.plan import Plan, StepInputs

__all__ = [
    "BF16",
    "BUCKET_MIN_PARAMS",
    "BUCKET_PARAMS_PER_DP",
    "TERMS",
    "Buckets",
    "Communication",
    "DimComm",
    "StepFabrics",
    "communication",
    "step_fabrics",
    "tensor_parallel_s",
]

#: Bytes per gradient / activation element (bf16).
BF16 = 2
#: Megatron-core DDP bucket: max(40M, 1M x data-parallel size) parameters
#: (assets/training_constants.yaml, with the source).
BUCKET_MIN_PARAMS = int(training_constant("bucket_min_params"))
BUCKET_PARAMS_PER_DP = int(training_constant("bucket_params_per_dp"))


@dataclass(frozen=True)
class StepFabrics:
    """The fabrics a step's collectives run on.

    ``dims`` holds the attention grid's communicators (``tp``, ``cp``, ``pp``, ``dp``),
    ``experts`` the expert grid's (``ep``, expert TP, ``edp``; ``dims`` itself without MoE
    parallel folding). The data-parallel reduction runs on ``reduce`` and
    ``reduce_experts``: the same two, except on an OCS fabric that reconfigures per phase,
    whose reduction runs on ring circuits and pays ``reconfig_s`` per step (``note`` says so).
    """

    dims: DimensionFabric
    experts: DimensionFabric
    reduce: DimensionFabric
    reduce_experts: DimensionFabric
    reconfig_s: float = 0.0
    note: str = ""


@dataclass(frozen=True)
class DimComm:
    """One dimension's communication per step.

    ``total_s`` all its collectives one after the other, ``exposed_s`` what compute does not
    hide, ``detail`` the calls (count, algorithm, size, bus bandwidth, bottleneck);
    ``scale_out`` whether its slowest group crosses NVLink domains (pipeline sends: whether
    the slowest boundary leaves NVLink); ``pause_s`` how long its collectives' congested
    ports hold PFC pause per step (an incast on a PFC transport; 0 elsewhere).
    """

    total_s: float
    exposed_s: float
    detail: str
    scale_out: bool
    pause_s: float = 0.0


@dataclass(frozen=True)
class Communication:
    """Every dimension's communication of a step, in :data:`TERMS` order, and its fabrics."""

    fabrics: StepFabrics
    terms: dict[str, DimComm] = field(default_factory=dict)

    @property
    def comm_s(self) -> dict[str, float]:
        """Seconds per step of each dimension's collectives."""
        return {d: c.total_s for d, c in self.terms.items()}

    @property
    def exposed_s(self) -> dict[str, float]:
        """Seconds per step each dimension exposes."""
        return {d: c.exposed_s for d, c in self.terms.items()}

    @property
    def pause_s(self) -> dict[str, float]:
        """Seconds per step each dimension's congested ports hold PFC pause (positive only)."""
        return {d: c.pause_s for d, c in self.terms.items() if c.pause_s > 0}

    @property
    def detail(self) -> dict[str, str]:
        """What each dimension's collectives are."""
        return {d: c.detail for d, c in self.terms.items()}

    @property
    def scale_out_dims(self) -> tuple[str, ...]:
        """The dimensions on the scale-out network."""
        return tuple(d for d, c in self.terms.items() if c.scale_out)

    @property
    def exposed_total_s(self) -> float:
        """Seconds of communication the step exposes, every dimension."""
        return sum(self.exposed_s.values())


# ------------------------------------------------------------------------------ fabrics


def step_fabrics(inputs: StepInputs, ecmp_seed: int | None = None) -> StepFabrics:
    """Return the fabrics the step's dimensions run on, and an OCS fabric's phases.

    ``ocs.reconfigure = phase`` on an OCS fabric: the forward and backward (expert
    all-to-all, pipeline sends, any TP or CP group that leaves a block) run on
    ``ocs.circuits`` and the data-parallel reduction on ring circuits
    (:func:`~fabric_model.scenario.ocs.reduction_scenario`). When both need circuits
    between blocks and the two sets differ, each step switches twice (to the ring before
    the reduction, back before the next forward: ``assets/ocs.yaml``
    ``switches_per_step``), ``2 x ocs.reconfig_ms``; when only one of them crosses blocks,
    its circuits stay up (0 s). Every other scenario reduces on the step's own fabrics.
    With ``ecmp_seed`` every collective is timed at that one of the solver's ECMP seeds.
    """
    s, plan = inputs.scenario, inputs.plan
    fab = DimensionFabric(s, plan.layout, ecmp_seed)
    efab = DimensionFabric(s, plan.expert_layout, ecmp_seed) if plan.folded else fab
    red = reduction_scenario(s)
    if red is s:
        return StepFabrics(fab, efab, fab, efab)
    rfab = DimensionFabric(red, plan.layout, ecmp_seed)
    refab = DimensionFabric(red, plan.expert_layout, ecmp_seed) if plan.folded else rfab
    block = int(fab.base.topology.params["block_gpus"])

    def crosses(layout: Layout, dim: str) -> bool:
        if layout.size(dim) <= 1:
            return False
        ranks = layout.offsets(dim)[:, None] + layout.members(dim)[None, :]
        blocks = ranks // block
        return bool((blocks.min(axis=1) != blocks.max(axis=1)).any())

    forward = any(crosses(plan.layout, d) for d in ("tp", "cp", "pp")) or crosses(
        plan.expert_layout, "ep"
    )
    reduce = crosses(plan.layout, "dp") or (plan.ep > 1 and crosses(plan.expert_layout, "edp"))
    if not reduce:  # the reduction stays inside blocks: the forward's circuits stay up
        return StepFabrics(fab, efab, fab, efab)
    if not forward:  # nothing but the reduction leaves a block: the ring stays up
        return StepFabrics(fab, efab, rfab, refab)
    switches = int(OCS_DATA["reconfiguration"]["switches_per_step"]["value"])
    ms = reconfig_ms(s)
    note = (
        f"per phase: {s.ocs.circuits} circuits for the forward and backward, ring circuits for "
        f"the reduction, {switches} reconfigurations of {ms:g} ms per step (the reduction "
        f"cannot overlap the backward)"
    )
    return StepFabrics(fab, efab, rfab, refab, switches * ms / 1000.0, note)


def _crosses_domains(fabs: StepFabrics, dim: str, plan: Plan) -> bool:
    """Whether the slowest group of ``dim`` spans more than one NVLink domain.

    Data parallelism counts its dense (``dp``) and expert (``edp``) groups, tensor
    parallelism its expert-TP groups; the expert groups are those of the expert grid.
    """
    fab, efab = fabs.dims, fabs.experts
    groups = {"dp": [(fab, "dp")], "ep": [(efab, "ep")], "tp": [(fab, "tp")]}.get(dim, [(fab, dim)])
    if dim == "dp" and plan.ep > 1:
        groups.append((efab, "edp"))
    if dim == "tp" and plan.expert_tp > 1:
        groups.append((efab, "tp"))
    for f, d in groups:
        g = f.group(d)
        if g.n_ranks > 1 and (g.n_domains > 1 or g.straddling_groups):
            return True
    return False


def _describe(call: CommTime | None, count: float, size: float) -> str:
    """``count x algo/proto of size MiB at busbw GB/s (bottleneck)`` ('' for no call)."""
    if call is None:
        return ""
    return (
        f"{count:,.0f} x {call.algo}/{call.proto} of {size / 2**20:,.1f} MiB at "
        f"{call.busbw_GBps:,.1f} GB/s busbw ({call.bottleneck})"
    )


def _straddling(fab: DimensionFabric, dim: str) -> str:
    """Return the note for a degree that does not tile the NVLink domain ('' when it does)."""
    g = fab.group(dim)
    if not g.straddling_groups:
        return ""
    return (
        f"; {g.straddling_groups:,} of {g.concurrent_groups:,} groups "
        f"straddle NVLink domains (timed: the slowest)"
    )


def _activation_bytes(s: Scenario, plan: Plan) -> float:
    """Bytes of one micro-batch's ``b s h`` activation on a context-parallel rank."""
    return plan.micro_batch * (s.model.seq_len / plan.cp) * s.model.hidden * BF16


# ------------------------------------------------------------------------ the dimensions


def tensor_parallel_s(
    s: Scenario, plan: Plan, counts: ShapeCounts, fab: DimensionFabric, efab: DimensionFabric
) -> tuple[float, str]:
    """Seconds per step of tensor parallelism's collectives, and what they are.

    Megatron sequence parallelism: an all-gather before and a reduce-scatter after each
    tensor-parallel block (attention, a dense MLP, an MoE layer's shared experts) of the
    ``b s h`` activation, forward and backward (and the forward again under full
    recomputation). An MoE layer's routed experts are not a TP block: Megatron-Core's
    all-to-all dispatcher all-gathers the routed tokens each GPU received over the expert
    tensor-parallel group, ``etp x b s / (cp tp) x top_k`` rows, and reduce-scatters the
    experts' output back (``token_dispatcher.py``, ``dispatch_postprocess`` and
    ``combine_preprocess``), forward and backward, on the expert grid's ``etp`` GPUs:
    nothing at ``etp = 1``.
    """
    m = s.model
    mb = plan.micro_batches
    act = _activation_bytes(s, plan)
    rounds = 3 if plan.recompute == "full" else 2
    moe_stage = plan.layers_per_stage * counts.moe_layers / m.layers
    blocks = 2 * plan.layers_per_stage - moe_stage * (0 if m.shared_experts else 1)
    total, parts = 0.0, []
    if plan.tp > 1:
        n_each = rounds * blocks * mb
        ag = fab.collective("tp", "allgather", act)
        rs = fab.collective("tp", "reducescatter", act)
        total += n_each * (ag.time_s + rs.time_s)
        parts += [_describe(ag, n_each, act), _describe(rs, n_each, act)]
    if plan.expert_tp > 1 and moe_stage > 0:
        routed = act * m.top_k * dispatch_padding(s) * plan.expert_tp / plan.tp
        n_each = rounds * moe_stage * mb
        ag = efab.collective("tp", "allgather", routed)
        rs = efab.collective("tp", "reducescatter", routed)
        total += n_each * (ag.time_s + rs.time_s)
        parts.append("expert TP " + _describe(ag, n_each, routed))
        parts.append("expert TP " + _describe(rs, n_each, routed))
    return total, "; ".join(parts)


def _tensor(inputs: StepInputs, ct: ComputeTimes, fabs: StepFabrics) -> DimComm | None:
    """``tp``: :func:`tensor_parallel_s`, hidden by ``training.tp_overlap``."""
    s, plan = inputs.scenario, inputs.plan
    if plan.tp <= 1 and plan.expert_tp <= 1:
        return None
    total, detail = tensor_parallel_s(s, plan, inputs.counts, fabs.dims, fabs.experts)
    exposed = total * (1.0 - s.training.tp_overlap)
    detail += _straddling(fabs.dims, "tp")
    return DimComm(total, exposed, detail, _crosses_domains(fabs, "tp", plan))


def _context(inputs: StepInputs, ct: ComputeTimes, fabs: StepFabrics) -> DimComm | None:
    """``cp``: ring attention's key/value all-gathers and gradient reduce-scatter per layer.

    Forward an all-gather of the keys and values (again under full recomputation), backward
    an all-gather and a reduce-scatter of their gradients; hidden behind the attention math
    of the layer, only the excess is exposed.
    """
    s, plan, gpu = inputs.scenario, inputs.plan, inputs.gpu
    if plan.cp <= 1:
        return None
    m, fab = s.model, fabs.dims
    seq, h, mb = m.seq_len, m.hidden, plan.micro_batches
    full_rc = plan.recompute == "full"
    d_head = m.head_dim or h // m.heads
    kv_width = (
        m.heads * (2 * d_head + m.rope_head_dim) if m.kv_lora_rank else 2 * m.kv_heads * d_head
    )
    kv = plan.micro_batch * seq * kv_width * BF16 / plan.tp
    ag = fab.collective("cp", "allgather", kv)
    rs = fab.collective("cp", "reducescatter", kv)
    per_layer = (2 + (1 if full_rc else 0)) * ag.time_s + rs.time_s
    peak = gpu.bf16_dense_tflops * 1e12 * s.training.compute_efficiency
    layer_attn = layer_flops_per_token(inputs.counts, seq)[1]
    attn_time = (
        layer_attn
        * (1 + (1 / 3 if plan.recompute != "none" else 0))
        * (plan.micro_batch * seq)
        / (plan.tp * plan.cp)
        / peak
    )
    total = per_layer * plan.layers_per_stage * mb
    exposed = max(0.0, per_layer - attn_time) * plan.layers_per_stage * mb
    detail = _describe(ag, plan.layers_per_stage * mb * (2 + full_rc), kv)
    detail += _straddling(fab, "cp")
    return DimComm(total, exposed, detail, _crosses_domains(fabs, "cp", plan))


def _expert(inputs: StepInputs, ct: ComputeTimes, fabs: StepFabrics) -> DimComm | None:
    """``ep``: per MoE layer a dispatch and a combine all-to-all, forward and backward.

    Each token's hidden state travels as :func:`~.moe.dispatch_copies` copies (FP8 forward
    dispatch with FP8 training, DeepSeek-V3 3.3.2); DeepEP's node-limited dispatch also fans
    each node's copy out over NVLink, and the call takes the longer of the two legs. Hidden
    by ``training.ep_overlap``.
    """
    s, plan, gpu = inputs.scenario, inputs.plan, inputs.gpu
    if plan.ep <= 1:
        return None
    m, tr, efab = s.model, s.training, fabs.experts
    seq, h, mb = m.seq_len, m.hidden, plan.micro_batches
    moe_stage = plan.layers_per_stage * inputs.counts.moe_layers / m.layers
    tokens_local = plan.micro_batch * seq / plan.cp / plan.tp
    copies = dispatch_copies(s, plan.ep)
    # forward dispatch in FP8 with fp8 training (DeepSeek-V3 3.3.2), the rest in BF16
    elem = (1.0 + 3 * BF16) / 4 if tr.precision == "fp8" else BF16
    a2a_bytes = tokens_local * copies * h * elem * dispatch_padding(s)
    a2a = efab.collective("ep", "alltoall", a2a_bytes)
    n_a2a = (4 + (2 if plan.recompute == "full" else 0)) * moe_stage * mb
    per_call = a2a.time_s
    fanout = ""
    if tr.ep_dispatch == "per_node" and plan.ep > s.cluster.nvlink_domain:
        # DeepEP forwards each node's copy over NVLink to its destination GPUs while the
        # RDMA leg runs: the call takes the longer of the two
        fan_bytes = tokens_local * fanout_copies(s, plan.ep) * h * elem * dispatch_padding(s)
        fan_s = fan_bytes / (gpu.nvlink_GBps * 1e9)
        per_call = max(per_call, fan_s)
        fanout = f"; NVLink fan-out {fan_bytes / 2**20:,.1f} MiB in {fan_s * 1e3:,.2f} ms"
    total = n_a2a * per_call
    exposed = total * (1.0 - tr.ep_overlap)
    detail = _describe(a2a, n_a2a, a2a_bytes) + fanout + _straddling(efab, "ep")
    pause = n_a2a * a2a.pause_s  # the hot receivers' ports (collectives.transport)
    return DimComm(total, exposed, detail, _crosses_domains(fabs, "ep", plan), pause)


def _pipeline(inputs: StepInputs, ct: ComputeTimes, fabs: StepFabrics) -> DimComm | None:
    """``pp``: the pipeline's sends of the ``b s h / tp`` activation, all exposed.

    One per micro-batch, virtual stage and direction, plus the fill and drain:
    ``2 (v m + p - 1)`` sends.
    """
    plan = inputs.plan
    if plan.pp <= 1:
        return None
    p2p_bytes = _activation_bytes(inputs.scenario, plan) / plan.tp
    p2p = fabs.dims.p2p(p2p_bytes)
    n_p2p = 2 * (plan.vpp * plan.micro_batches + plan.pp - 1)
    total = n_p2p * p2p.time_s
    return DimComm(total, total, _describe(p2p, n_p2p, p2p_bytes), p2p.bottleneck != "nvlink")


@dataclass(frozen=True)
class Buckets:
    """One data-parallel collective over a rank's gradients or weights, in DDP buckets.

    Megatron-Core keeps one buffer per model chunk (``vpp`` of them), each cut into
    buckets of ``bucket_params``: ``n_full`` full ones and a remainder per chunk.
    """

    n_full: int
    full_s: float  # one full bucket
    rest_s: float  # a chunk's remainder bucket, 0 if none
    bucket_params: float
    call: CommTime | None
    rest_params: float = 0.0
    chunks: int = 1

    @property
    def total_s(self) -> float:
        """All buckets of every chunk, one after the other."""
        return self.chunks * (self.n_full * self.full_s + self.rest_s)

    @property
    def last_s(self) -> float:
        """The bucket reduced last (a remainder, if any)."""
        return self.rest_s or self.full_s

    def exposed_s(self, window_s: float, pp: int = 1) -> float:
        """Seconds the collective runs past the compute it overlaps.

        Megatron-Core's ``overlap_grad_reduce`` launches a bucket's collective as soon as
        the backward pass has produced all its gradients, one bucket after another on the
        data-parallel stream (``distributed/param_and_grad_buffer.py``). A chunk produces
        its gradients in its last micro-batch's backward (``window_s / chunks``), evenly,
        the remainder bucket last. With interleaving the chunks' last backwards come in
        groups of ``pp`` micro-batches (``pipeline_parallel/schedules.py`` launches each
        chunk's grad sync after its last backward), so chunk ``i`` finishes ``pp`` chunk
        times after chunk ``i - 1`` and the step's backward ends with chunk 0. A serial
        queue: each bucket starts when it is ready and the one before it is done; what
        runs past the end of the backward pass is exposed. The parameter all-gather the
        forward pass waits on (``overlap_param_gather``, each chunk's before its first
        forward) is the same queue reversed in time.
        """
        n, v = self.n_full, self.chunks
        slot = window_s / v  # one chunk's share of a micro-batch's backward
        chunk_params = n * self.bucket_params + self.rest_params
        stride = pp * slot if v > 1 else slot
        clock = 0.0
        for i in range(v):
            done = slot + i * stride  # chunk i's last backward ends
            start = done - slot
            for j in range(1, n + 1):
                ready = start + slot * j * self.bucket_params / chunk_params
                clock = max(clock, ready) + self.full_s
            if self.rest_s > 0:
                clock = max(clock, done) + self.rest_s
        end = slot + (v - 1) * stride
        return max(0.0, clock - end)


def buckets(
    fab: DimensionFabric,
    dim: str,
    op: str,
    params: float,
    group_size: int,
    elem_bytes: float,
    chunks: int = 1,
) -> Buckets:
    """Time ``op`` over ``params`` elements of ``elem_bytes`` in Megatron-Core's DDP buckets.

    The bucket size is Megatron-Core's default ``max(40M, 1M x dp)`` parameters
    (``distributed_data_parallel.py``: "larger DP sizes need larger buckets to ensure
    collectives do not become latency-bound"), per model chunk's buffer.
    """
    if params <= 0 or group_size <= 1:
        return Buckets(0, 0.0, 0.0, 1.0, None)
    bucket = max(BUCKET_MIN_PARAMS, BUCKET_PARAMS_PER_DP * group_size)
    full, rest = divmod(params / chunks, bucket)
    t_full = fab.collective(dim, op, bucket * elem_bytes) if full else None
    t_rest = fab.collective(dim, op, rest * elem_bytes) if rest > 0 else None
    return Buckets(
        n_full=int(full),
        full_s=t_full.time_s if t_full else 0.0,
        rest_s=t_rest.time_s if t_rest else 0.0,
        bucket_params=float(bucket),
        call=t_full or t_rest,
        rest_params=float(rest),
        chunks=chunks,
    )


def _reduction(
    inputs: StepInputs, ct: ComputeTimes, fab: DimensionFabric, dim: str, params: float, group: int
) -> tuple[float, float, str]:
    """One data-parallel group's collectives per step: (total, exposed, what they are).

    All-reduce (ZeRO-0), reduce-scatter plus the parameter all-gather (ZeRO-1/2), or per
    micro-batch two all-gathers and a reduce-scatter (ZeRO-3/FSDP); gradients in their
    reduction dtype, weights gathered in theirs (FP8 with ``fp8_param_gather``). Exposure by
    the bucket mechanism (:meth:`Buckets.exposed_s`), or the ``training.dp_overlap``
    override: that share of the last micro-batch's backward (the all-gather behind the next
    forward) hides it, except the last bucket.
    """
    s, plan = inputs.scenario, inputs.plan
    tr, mb = s.training, plan.micro_batches
    t_fwd, t_bwd = ct.forward_s, ct.backward_s
    w_b, g_b, _, _ = model_state_bytes(s)
    ag_b = w_b if tr.fp8_param_gather else BF16
    auto = tr.dp_overlap == "auto"
    ov = 0.0 if auto else float(tr.dp_overlap)
    if plan.zero_stage == 0:
        allr = buckets(fab, dim, "allreduce", params, group, g_b, plan.vpp)
        exposed = (
            allr.exposed_s(t_bwd, plan.pp) if auto else max(allr.last_s, allr.total_s - ov * t_bwd)
        )
        detail = _describe(allr.call, allr.n_full + (allr.rest_s > 0), allr.bucket_params * g_b)
        return allr.total_s, exposed, detail
    if plan.zero_stage in (1, 2):
        red = buckets(fab, dim, "reducescatter", params, group, g_b, plan.vpp)
        gat = buckets(fab, dim, "allgather", params, group, ag_b, plan.vpp)
        if auto:
            exposed = red.exposed_s(t_bwd, plan.pp) + gat.exposed_s(t_fwd, plan.pp)
        else:
            exposed = max(red.last_s, red.total_s - ov * t_bwd) + max(
                gat.last_s, gat.total_s - ov * t_fwd
            )
        detail = "reduce-scatter + all-gather: " + _describe(red.call, 1, params * g_b)
        return red.total_s + gat.total_s, exposed, detail
    # ZeRO-3 / FSDP: gather weights twice and scatter gradients per micro-batch
    red = buckets(fab, dim, "reducescatter", params, group, g_b)
    gat = buckets(fab, dim, "allgather", params, group, ag_b)
    t = mb * (2 * gat.total_s + red.total_s)
    if auto:  # per micro-batch: gathers behind the forward, gather + scatter backward
        both = Buckets(
            gat.n_full,
            gat.full_s + red.full_s,
            gat.rest_s + red.rest_s,
            gat.bucket_params,
            gat.call,
            gat.rest_params,
        )
        exposed = mb * (gat.exposed_s(t_fwd) + both.exposed_s(t_bwd))
    else:
        exposed = max(red.last_s, t - ov * ct.compute_s)
    detail = "per micro-batch 2 all-gathers + reduce-scatter: " + _describe(
        red.call, 1, params * g_b
    )
    return t, exposed, detail


def _data(inputs: StepInputs, ct: ComputeTimes, fabs: StepFabrics) -> DimComm | None:
    """``dp``: the non-expert weights' reduction over ``dp x cp``, the experts' over ``edp``.

    Each group's collectives by :func:`_reduction`, on the reduction's fabrics; an OCS that
    reconfigures per phase adds its reconfigurations, and nothing of the reduction hides.
    """
    plan, mem = inputs.plan, inputs.memory
    total = exposed = 0.0
    details = []
    for dim, fab, params, group in (
        ("dp", fabs.reduce, mem.params_dense, plan.dp * plan.cp),
        ("edp", fabs.reduce_experts, mem.params_expert, plan.edp),
    ):
        if params <= 0 or group <= 1:
            continue
        t, e, d = _reduction(inputs, ct, fab, dim, params, group)
        total += t
        exposed += e
        details.append(d)
    if total > 0 and fabs.reconfig_s > 0:
        # the ring circuits are up only after the backward's last cross-block transfer and
        # go before the next forward: nothing of the reduction hides, and the two
        # reconfigurations add their time
        total += fabs.reconfig_s
        exposed = total
        details.append(fabs.note)
    if total > 0:
        return DimComm(total, exposed, "; ".join(details), _crosses_domains(fabs, "dp", plan))
    return None


#: A dimension's term: its communication per step, or None where the plan has none.
Term = Callable[[StepInputs, ComputeTimes, StepFabrics], DimComm | None]
#: Every dimension's term, in the order the step times them (and ``comm_detail`` lists them).
TERMS: tuple[tuple[str, Term], ...] = (
    ("tp", _tensor),
    ("cp", _context),
    ("ep", _expert),
    ("pp", _pipeline),
    ("dp", _data),
)


def communication(
    inputs: StepInputs, ct: ComputeTimes, ecmp_seed: int | None = None
) -> Communication:
    """Time every dimension's communication of a step (:data:`TERMS`) on its fabrics.

    Reads the step's inputs and compute (what the collectives hide behind); with
    ``ecmp_seed`` every collective is timed at that one of the solver's ECMP hash seeds.
    """
    fabs = step_fabrics(inputs, ecmp_seed)
    terms = {}
    for dim, term in TERMS:
        c = term(inputs, ct, fabs)
        if c is not None:
            terms[dim] = c
    return Communication(fabs, terms)
