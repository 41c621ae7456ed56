"""NCCL's device memory per GPU: the buffers of every communicator a training job uses.

nvidia-smi sees them (PyTorch's allocator does not: they count in ``nvidia-smi`` readings,
not in max allocated or reserved). Per communicator, from NCCL's source (constants and their
file and line in ``assets/training_constants.yaml``):

- **Connections.** One connection (one peer, one channel) holds the three protocols'
  buffers, LL ``DEFAULT_LL_BUFFSIZE`` 512 KiB, LL128 ``DEFAULT_LL128_BUFFSIZE`` 4.69 MiB and
  Simple ``DEFAULT_BUFFSIZE`` 4 MiB (:data:`CONNECTION_BYTES`, 9.19 MiB); over NVLink the
  receiver holds them (the Simple one on the sender when it reads), so a GPU holds one
  connection per peer it receives from on each channel.
- **Ring**: one connection per channel; the channels are the collective model's
  (:func:`~fabric_model.collectives.terms.ring_channel_count`: 16 inside an NVLink
  domain, two per NIC across, at most ``nccl.max_channels``).
- **Tree** (NCCL 2.21 and older, connected with the ring at ``ncclCommInitRank``): a chain
  of three or more ranks receives from the peer the ring sends to as well, one more
  connection per channel (a two-rank chain reuses the ring's).
- **NVLS** (Hopper and newer in an NVSwitch domain, ``fabric.nvls``, more than two of the
  communicator's GPUs in the domain, two from 2.28): ``channels x 2 x (8 steps x
  NCCL_NVLS_CHUNKSIZE) x heads`` on every GPU (``ncclNvlsBufferSetup``), heads the
  communicator's GPUs in the domain; up to 2.21 with a 2 MiB sync area beside each buffer and
  the communicator's collective channels (at least the 16 NVLS ones).
- **Point-to-point** (pipeline sends, context-parallel ring attention, the MoE
  all-to-all): a connection per peer and per channel of the peer
  (``p2pnChannelsPerPeer``: the ring's channels to an NVLink peer, two to a peer across
  the network).

Which algorithms connect: up to NCCL 2.21 ring and tree (and NVLS) at the communicator's
creation; from 2.22 (``NCCL_RUNTIME_CONNECT``, feature ``runtime_connect``) only those
a collective runs, here the ring (small all-reduces and the bulk without NVLS) and NVLS
where NCCL can run it. PyTorch creates a process group's communicator at its first
collective, so only groups that carry traffic count (:func:`communicators`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from fabric_model.caching import lru_cached
from fabric_model.catalog import load_catalog
from fabric_model.collectives.context import nccl_constants
from fabric_model.collectives.terms import ring_channel_count
from fabric_model.collectives.versions import has
from fabric_model.scenario import Scenario
from fabric_model.training.constants import training_constant
from fabric_model.training.layout import Layout

if TYPE_CHECKING:
    from fabric_model.training.plan import Plan

__all__ = [
    "CONNECTION_BYTES",
    "Communicator",
    "communicator_bytes",
    "communicators",
    "nccl_bytes_per_gpu",
    "nvls_bytes",
]

#: One connection's buffers: LL + LL128 + Simple, bytes.
CONNECTION_BYTES = (
    training_constant("nccl_ll_buffer_bytes")
    + training_constant("nccl_ll128_buffer_bytes")
    + training_constant("nccl_simple_buffer_bytes")
)
NVLS_STEP_BYTES = training_constant("nccl_nvls_chunk_bytes")
STEPS = training_constant("nccl_steps")
NVLS_SYNC_BYTES = training_constant("nccl_nvls_sync_bytes")
NVLS_CHANNELS = {
    "hopper": training_constant("nccl_nvls_channels"),
    "blackwell": training_constant("nccl_nvls_channels_blackwell"),
}
NET_PEER_CHANNELS = training_constant("nccl_net_peer_channels")


@dataclass(frozen=True)
class Communicator:
    """One process group's NCCL communicator as one of its GPUs sees it.

    ``ranks`` its size, ``local`` its GPUs in this GPU's NVLink domain, ``domains`` the
    NVLink domains it spans; ``kind`` ``collective`` (ring / tree / NVLS) or ``p2p`` with
    ``peers`` distinct peers it sends to and receives from.
    """

    name: str
    ranks: int
    local: int
    domains: int
    kind: str = "collective"
    peers: int = 0


def _geometry(members: np.ndarray, domain: int) -> tuple[int, int, int]:
    """``(ranks, local, domains)`` of a group whose members (group 0, from rank 0) are given."""
    dom = (np.asarray(members, dtype=np.int64) // max(1, domain)).tolist()
    return len(dom), dom.count(dom[0]), len(set(dom))


@dataclass(frozen=True)
class _Job:
    """What NCCL's buffers depend on, as plain frozen values (the cache key)."""

    arch: str
    n_gpus: int
    domain: int
    nics_per_gpu: int
    nvls: bool
    version: str
    max_channels: int | None
    megatron: bool
    low_precision: bool
    tied_embeddings: bool
    layout: Layout
    expert_layout: Layout
    tp: int
    pp: int
    cp: int
    ep: int
    expert_tp: int


def _job(s: Scenario, plan: Plan) -> _Job:
    mc = s.nccl.max_channels
    return _Job(
        arch=load_catalog().gpu(s.cluster.gpu).arch,
        n_gpus=s.cluster.n_gpus,
        domain=s.cluster.nvlink_domain,
        nics_per_gpu=s.cluster.nics_per_gpu,
        nvls=s.fabric.nvls,
        version=s.nccl.version,
        max_channels=None if mc == "auto" else int(mc),
        megatron=s.training.framework == "megatron",
        low_precision=s.training.precision in ("fp8", "fp4"),
        tied_embeddings=s.model.tied_embeddings,
        layout=plan.layout,
        expert_layout=plan.expert_layout,
        tp=plan.tp,
        pp=plan.pp,
        cp=plan.cp,
        ep=plan.ep,
        expert_tp=plan.expert_tp,
    )


def communicators(s: Scenario, plan: Plan) -> tuple[Communicator, ...]:
    """Return the communicators that carry traffic, as Megatron-Core or torchtitan make them.

    Every framework: the default process group (``world``: barriers, the loss's all-reduce)
    and one per parallel dimension larger than 1 (pipeline, context parallel and the expert
    all-to-all point-to-point). Megatron-Core (core_v0.6.0 ``parallel_state.py``,
    ``initialize_model_parallel``) adds the model-parallel group (tp x pp: the gradient
    norm and the found-inf all-reduces), the data-parallel group without context
    parallelism beside the one with it (``average_losses_across_data_parallel_group``; the
    distributed optimizer reduces over the one with it), the embedding group of the first
    and last stages (the tied embedding's gradient all-reduce) and, with FP8, the
    tensor-and-data-parallel group (Transformer Engine's amax reduction).
    """
    return _communicators(_job(s, plan))


def _communicators(j: _Job) -> tuple[Communicator, ...]:
    lay, dom, n = j.layout, j.domain, j.n_gpus
    out = [Communicator("world", n, min(n, dom), -(-n // dom))]

    def add(name: str, members: np.ndarray, kind: str = "collective", peers: int = 0) -> None:
        if members.size > 1:
            out.append(Communicator(name, *_geometry(members, dom), kind=kind, peers=peers))

    tp = lay.members("tp")
    pp = lay.members("pp")
    dp = lay.members("dp")
    add("tp", tp)
    add("cp", lay.members("cp"), "p2p", min(2, j.cp - 1))
    add("dp", dp)
    add("pp", pp, "p2p", min(2, j.pp - 1))
    if j.ep > 1:
        add("ep", j.expert_layout.members("ep"), "p2p", j.ep - 1)
    if j.expert_tp > 1 and j.expert_tp != j.tp:
        add("etp", j.expert_layout.members("tp"))
    if j.megatron:
        add("model-parallel", (tp[None, :] + pp[:, None]).ravel())
        # the same ranks as dp without context parallelism, but a process group of its own
        add("dp-without-cp", dp[:: j.cp])
        if j.pp > 1 and j.tied_embeddings:
            add("embedding", pp[[0, -1]])
        if j.low_precision:
            add("tp-dp (amax)", (tp[None, :] + dp[:, None]).ravel())
    return tuple(out)


def nvls_bytes(s: Scenario, c: Communicator, channels: int) -> float:
    """NVLS buffers one GPU of ``c`` holds, or 0 where NCCL does not run NVLS."""
    arch = load_catalog().gpu(s.cluster.gpu).arch
    return _nvls_bytes(arch, s.fabric.nvls, s.nccl.version, c, channels)


def _nvls_bytes(arch: str, nvls: bool, version: str, c: Communicator, channels: int) -> float:
    min_local = 2 if has(version, "nvls_two_ranks") else 3
    if (
        c.kind != "collective"
        or not nvls
        or arch not in nccl_constants()["nvls_algbw_fraction"]
        or c.local < min_local
    ):
        return 0.0
    nvls_channels = NVLS_CHANNELS.get(arch, NVLS_CHANNELS["hopper"])
    heads = min(c.local, int(nccl_constants()["nvls_max_heads"]))
    if has(version, "runtime_connect"):
        return nvls_channels * 2 * STEPS * NVLS_STEP_BYTES * heads
    # up to 2.21 the communicator's collective channels (copied up to the NVLS count)
    coll = max(channels, nvls_channels)
    return coll * 2 * (STEPS * NVLS_STEP_BYTES + NVLS_SYNC_BYTES) * heads


def communicator_bytes(s: Scenario, c: Communicator) -> float:
    """Device memory one GPU of ``c`` gives NCCL's buffers (see the module docstring)."""
    mc = s.nccl.max_channels
    return _communicator_bytes(
        load_catalog().gpu(s.cluster.gpu).arch,
        s.fabric.nvls,
        s.nccl.version,
        None if mc == "auto" else int(mc),
        s.cluster.nics_per_gpu,
        c,
    )


def _communicator_bytes(
    arch: str,
    nvls: bool,
    version: str,
    max_channels: int | None,
    nics_per_gpu: int,
    c: Communicator,
) -> float:
    if c.ranks < 2:
        return 0.0
    channels = ring_channel_count(nccl_constants(), c.domains, c.local * nics_per_gpu, max_channels)
    if c.kind == "p2p":
        per_peer = NET_PEER_CHANNELS if c.domains > 1 else channels
        return c.peers * per_peer * CONNECTION_BYTES
    connections = channels  # the ring
    if not has(version, "runtime_connect") and c.ranks > 2:
        connections += channels  # the tree, connected with the ring at init
    return connections * CONNECTION_BYTES + _nvls_bytes(arch, nvls, version, c, channels)


@lru_cached(
    "training.nccl_memory._job_bytes",
    1024,
    key="a _Job: GPU architecture, cluster size, NVLink domain, NICs per GPU, fabric.nvls, "
    "nccl.version, nccl.max_channels, framework, FP8/FP4, tied embeddings, the plan's layouts "
    "and degrees",
)
def _job_bytes(j: _Job) -> float:
    return sum(
        _communicator_bytes(j.arch, j.nvls, j.version, j.max_channels, j.nics_per_gpu, c)
        for c in _communicators(j)
    )


def nccl_bytes_per_gpu(s: Scenario, plan: Plan) -> float:
    """NCCL's buffers on one GPU over every communicator that carries traffic."""
    return _job_bytes(_job(s, plan))
