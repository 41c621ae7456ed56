"""An MoE layer's work beyond its experts' FLOPs: grouped GEMMs, router, permutation, capacity.

Per MoE layer and micro-batch on one GPU, forward and backward (:func:`moe_layer_time`):

- **Expert GEMMs**: one grouped GEMM per local expert set, each expert with the ``M`` tokens
  routed to it (``b s / cp x top_k x ep / n_experts x etp / tp`` balanced: the expert-TP
  group gathers its ranks' tokens) and ``ffn_hidden / etp`` wide, at the utilisation of
  :func:`~fabric_model.training.gemm.expert_gemm_utilisation`: tile and wave quantization
  at small ``M`` (fine-grained experts see few tokens each) and the roofline of reading
  each expert's weights whatever ``M`` is.
- **Router** (Megatron-Core ``TopKRouter``): the gate GEMM ``[T, h] x [h, E]`` on the
  rank's sequence-parallel tokens ``T = b s / (cp tp)``, forward, data and weight
  gradient, as a roofline (its ``E`` columns leave it memory-bound: ``3 x T h`` BF16
  bytes against ``6 T h E`` FLOPs), plus :data:`ROUTER_SCORE_PASSES` passes of the
  softmax, top-k and auxiliary-loss kernels over the ``T x E`` FP32 scores.
- **Permutation**: the tokens' copies are gathered into expert order and back, memory-bound
  (bytes over :data:`~fabric_model.training.gemm.HBM_EFFICIENCY` of the HBM bandwidth).
  Megatron-Core's all-to-all dispatcher (``training.ep_dispatch = per_expert``,
  ``token_dispatcher.py``, ``MoEAlltoAllTokenDispatcher``) runs, forward: permutation 1
  (``permute``: ``T k`` rows read and written before the all-to-all), permutation 2
  (``sort_chunks_by_idxs``: the ``R = etp T k`` rows received and gathered over the
  expert-TP group sorted by local expert, only with more than one local expert), its
  inverse after the experts, and ``unpermute``
  (``T k`` rows read, ``T`` rows written, weighted by the routing probabilities); the
  backward pass moves the same bytes. DeepEP / HybridEP (``per_node``) send each token once
  per destination rank and permute the received rows once each way: ``4 R`` rows.
- **Small kernels**: the router and the dispatcher launch :data:`MOE_SMALL_KERNELS`
  kernels per layer, forward and backward, each lasting at least :data:`KERNEL_FLOOR_S`
  (launch and dependency gap): the router and permutation take
  ``max(their bytes' time, kernels x floor)``, which matters where the tensors are small
  (Mixtral's 8-expert scores).
- **Dispatch copies** (:func:`dispatch_copies`): the copies of a token's hidden state the
  expert all-to-all sends, one per routed expert, or with DeepEP's node-limited dispatch one
  per destination node and an NVLink fan-out inside it (:func:`fanout_copies`).
- **Capacity** (``training.moe_capacity_factor = c``): dropless (``c = 0``) computes every
  token and the GPU hosting the hottest experts sets the layer (:func:`hottest_load`, the
  ``model.routing_skew`` load); with a capacity, tokens beyond ``c`` times the balanced
  load are dropped, so the hottest expert computes at most ``c``; padded to capacity
  (``training.moe_pad_to_capacity``: GShard, Lepikhin et al. 2020; Megatron-Core
  ``moe_pad_expert_input_to_capacity``) every expert computes and exchanges ``c`` times the
  balanced load in fixed shapes and no expert is hotter than another.

The MoE layer never runs faster than the dense layer of the same active parameters: its
expert GEMMs are the same FLOPs at a utilisation at most 1, and the router and the
permutation only add (``tests/test_moe_compute.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fabric_model.catalog import Gpu
from fabric_model.collectives.algorithms import receive_weights
from fabric_model.scenario import Scenario
from fabric_model.training.constants import training_constant
from fabric_model.training.gemm import (
    expert_gemm_utilisation,
    expert_tokens,
    gemm_rates,
)

if TYPE_CHECKING:
    from fabric_model.training.plan import Plan

__all__ = [
    "KERNEL_FLOOR_S",
    "MOE_SMALL_KERNELS",
    "ROUTER_SCORE_PASSES",
    "MoeLayerTime",
    "dispatch_copies",
    "dispatch_padding",
    "fanout_copies",
    "hottest_load",
    "moe_layer_time",
]

#: Shortest time one small dependent kernel takes, launch gap included (training constants).
KERNEL_FLOOR_S = training_constant("kernel_floor_us") * 1e-6
#: Router and dispatcher kernels per MoE layer and micro-batch, forward and backward.
MOE_SMALL_KERNELS = training_constant("moe_small_kernels_per_layer")
#: Passes of the softmax, top-k and auxiliary-loss kernels over the FP32 scores.
ROUTER_SCORE_PASSES = training_constant("moe_router_score_passes")
BF16 = 2.0
FP32 = 4.0


@dataclass(frozen=True)
class MoeLayerTime:
    """One MoE layer of one micro-batch on one GPU, forward and backward, seconds.

    ``expert_gemm_s`` is the routed experts' GEMMs at the balanced load (padding
    included); ``hottest`` the slowest GPU's expert load over the balanced one; the router,
    permutation and small-kernel terms are ``overhead_s``, of which ``forward_s`` runs in
    the forward pass. ``dense_equivalent_s`` is the same active expert FLOPs as one dense
    GEMM at the full math rate: the floor the layer never beats.
    """

    tokens_per_expert: float
    local_experts: int
    utilisation: float
    expert_gemm_s: float
    hottest: float
    router_s: float
    permute_s: float
    overhead_s: float
    forward_s: float
    dense_equivalent_s: float

    @property
    def layer_s(self) -> float:
        """The routed-expert part of the layer on the slowest GPU: GEMMs and overhead."""
        return self.expert_gemm_s * self.hottest + self.overhead_s


def hottest_load(s: Scenario, ep: int) -> float:
    """Return the expert load of the GPU hosting the hottest experts, over the balanced one.

    Dropless: ``model.routing_skew`` (:func:`~fabric_model.collectives.algorithms.
    receive_weights`, the same load the all-to-all sees); with a capacity factor ``c`` at
    most ``c`` (the rest is dropped); padded to capacity every GPU computes the same.
    """
    m, tr = s.model, s.training
    if m.kind != "moe":
        return 1.0
    if tr.moe_pad_to_capacity and tr.moe_capacity_factor > 0:
        return 1.0
    load = (
        float(receive_weights(ep, m.routing_skew, m.hot_fraction).max())
        if ep > 1 and m.routing_skew > 1.0
        else 1.0
    )
    if tr.moe_capacity_factor > 0:
        load = min(load, tr.moe_capacity_factor)
    return max(1.0, load)


def dispatch_padding(s: Scenario) -> float:
    """Return how many times the balanced tokens the dispatch moves (``c`` when padded)."""
    tr = s.training
    if tr.moe_pad_to_capacity and tr.moe_capacity_factor > 0:
        return tr.moe_capacity_factor
    return 1.0


def moe_layer_time(s: Scenario, plan: Plan, gpu: Gpu) -> MoeLayerTime:
    """Time one MoE layer's routed part for one micro-batch (see the module docstring)."""
    m, tr = s.model, s.training
    h, n_exp, k = float(m.hidden), max(1, m.n_experts), m.top_k
    rates = gemm_rates(s, gpu)
    hbm = rates.hbm_Bps
    etp = plan.expert_tp
    m_e, exact = expert_tokens(s, plan.cp, plan.ep, plan.micro_batch, etp / plan.tp)
    pad = dispatch_padding(s)
    local = max(1, n_exp // plan.ep)
    f = m.ffn_hidden / etp
    mats = 2.0 if m.gated_mlp else 1.0
    util = expert_gemm_utilisation(m_e, f, h, m.gated_mlp, local, gpu, rates, exact=exact)
    expert_flops = 6.0 * m_e * local * f * h * (mats + 1.0)  # forward + backward, padded
    expert_gemm_s = expert_flops / (rates.flops * util)
    dense_s = expert_flops / pad / rates.flops

    # router: the gate GEMM (a roofline at the BF16 rate) and the FP32 score kernels
    t_r = plan.micro_batch * m.seq_len / plan.cp / plan.tp
    bf16_flops = gpu.bf16_dense_tflops * 1e12 * tr.compute_efficiency
    gate_flops = 3 * 2.0 * t_r * h * n_exp
    gate_bytes = 3 * (t_r * h * BF16 + t_r * n_exp * FP32) + 4 * h * n_exp * FP32
    router_s = max(gate_flops / bf16_flops, gate_bytes / hbm)
    router_s += ROUTER_SCORE_PASSES * t_r * n_exp * FP32 / hbm

    # permutation: rows of h BF16 elements moved, forward; the backward moves the same
    # R: the rows received, gathered over the expert-TP group
    rows_received = plan.micro_batch * m.seq_len / plan.cp * k * pad * etp / plan.tp
    if tr.ep_dispatch == "per_node":
        rows = 4.0 * rows_received
    else:
        rows = 2 * t_r * k + (t_r * k + t_r)
        if local > 1:
            rows += 4.0 * rows_received
    permute_s = 2.0 * rows * h * BF16 / hbm

    busy = router_s + permute_s
    overhead = max(busy, MOE_SMALL_KERNELS * KERNEL_FLOOR_S)
    forward_share = (router_s / 3.0 + permute_s / 2.0) / busy if busy > 0 else 0.5
    return MoeLayerTime(
        tokens_per_expert=m_e,
        local_experts=local,
        utilisation=util,
        expert_gemm_s=expert_gemm_s,
        hottest=hottest_load(s, plan.ep),
        router_s=router_s,
        permute_s=permute_s,
        overhead_s=overhead,
        forward_s=overhead * forward_share,
        dense_equivalent_s=dense_s,
    )


def _distinct(slots: int, per_slot: float, k: int) -> float:
    """Return the expected distinct slots among ``k`` of ``slots x per_slot`` items (no repeats)."""
    pool = round(per_slot * slots)
    if k > pool:
        return float(slots)
    return slots * (1.0 - math.comb(round(per_slot * (slots - 1)), k) / math.comb(pool, k))


def dispatch_copies(s: Scenario, ep: int) -> float:
    """Return the copies of a token's hidden state the MoE dispatch sends (and combine returns).

    ``per_expert``: one per routed expert (``top_k``). ``per_node`` (DeepEP): over the
    scale-out network one copy per destination node, the expected number of distinct nodes
    among the token's ``top_k`` experts when the ``n_experts`` are spread evenly over the
    ``G`` NVLink domains the expert-parallel group spans and routing is limited to
    ``M = model.max_nodes_per_token`` of them (all ``G`` when 0):
    ``M (1 - C(n (M - 1), k) / C(n M, k))`` with ``n`` experts per node. Inside a node the
    copy fans out over NVLink to every destination GPU (:func:`fanout_copies`): a group
    inside one NVLink domain sends those (review N7: DeepEP dedups the RDMA leg only).

    >>> from fabric_model.scenario import Scenario, apply_overrides
    >>> s = apply_overrides(Scenario(), {"model.name": "deepseek-v3",
    ...                                  "training.ep_dispatch": "per_node"})
    >>> round(dispatch_copies(s, 64), 2)  # 8 nodes, at most 4 per token
    3.63
    >>> round(dispatch_copies(s, 8), 2)  # one node: 8 (1 - C(224, 8) / C(256, 8)) GPUs
    5.29
    """
    m = s.model
    if s.training.ep_dispatch != "per_node":
        return float(m.top_k)
    nodes = max(1, math.ceil(ep / s.cluster.nvlink_domain))
    if nodes == 1:
        return fanout_copies(s, ep)
    limit = min(nodes, m.max_nodes_per_token or nodes)
    return _distinct(limit, m.n_experts / nodes, m.top_k)


def fanout_copies(s: Scenario, ep: int) -> float:
    """Return the distinct GPUs a token's ``top_k`` experts sit on (the NVLink fan-out).

    The experts spread evenly over the ``ep`` GPUs; with node-limited routing the token's
    experts are drawn from ``M`` nodes' GPUs: ``M g (1 - C(e (M g - 1), k) / C(e M g, k))``
    with ``g`` GPUs per node and ``e`` experts per GPU.
    """
    m = s.model
    nodes = max(1, math.ceil(ep / s.cluster.nvlink_domain))
    per_node = ep / nodes
    limit = min(nodes, m.max_nodes_per_token or nodes)
    return _distinct(round(per_node * limit), m.n_experts / ep, m.top_k)
