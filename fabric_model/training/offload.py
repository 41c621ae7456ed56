"""Where offloaded activations go: host memory, Grace memory or a CXL memory pool.

``training.offload_layers`` moves that many layers' saved activations out of HBM in the
forward pass and back for the backward pass (Megatron-Core CPU offloading). The target
(``training.offload_target``) sets the path's bandwidth, latency and capacity
(:func:`offload_path`):

- ``host``: the server's CPU memory over its CPU-GPU link (catalog ``cpu_gpu_GBps``,
  ``host_memory_gb``): PCIe 5.0 x16 on x86 servers (57.2 GB/s per direction), NVLink-C2C
  on Grace (900 GB/s per Grace shared by its two GPUs: 225 GB/s each);
- ``grace``: the same path named for what it is, refused where the server has no Grace;
- ``cxl``: a pool of ``training.cxl_memory_gb`` of CXL 2.0 memory expanders per server
  behind the host CPU (:data:`CXL_DEVICE_GB` each, x16 at :data:`CXL_DEVICE_GBPS`): each
  GPU reaches it at ``min(cpu_gpu_GBps, devices x CXL_DEVICE_GBPS / gpus_per_server)``,
  with the CXL.mem latency (:data:`CXL_LATENCY_S`) on top of the PCIe path. Grace servers
  have no CXL path in the catalog (their host memory is LPDDR5X over NVLink-C2C).

Each transfer pays the path's start-up latency once per offloaded layer and direction,
and ``bytes / GBps``; the step exposes what the pass's compute does not cover
(:func:`offload_time_s`). Memory pooling is thus a what-if with
numbers: the HBM it frees (the offloaded GiB the memory line reports) and the transfer
time it costs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fabric_model.catalog import Server
from fabric_model.scenario import Scenario
from fabric_model.training.compute import ComputeTimes
from fabric_model.training.constants import training_constant
from fabric_model.training.memory import GIB, MemoryBreakdown
from fabric_model.training.plan import Plan

__all__ = [
    "CXL_DEVICE_GB",
    "CXL_DEVICE_GBPS",
    "CXL_LATENCY_S",
    "OffloadPath",
    "host_memory_problem",
    "offload_path",
    "offload_time_s",
]

CXL_DEVICE_GB = training_constant("cxl_device_gb")
CXL_DEVICE_GBPS = training_constant("cxl_device_GBps")
CXL_LATENCY_S = training_constant("cxl_latency_ns") * 1e-9
PCIE_LATENCY_S = training_constant("pcie_dma_latency_us") * 1e-6
C2C_LATENCY_S = training_constant("c2c_dma_latency_us") * 1e-6


@dataclass(frozen=True)
class OffloadPath:
    """One GPU's path to the offload target.

    ``GBps`` per direction per GPU (10^9 bytes/s), ``latency_s`` per transfer,
    ``capacity_gb`` of the target per server (10^9 bytes).
    """

    target: str
    GBps: float
    latency_s: float
    capacity_gb: float
    via: str

    def transfer_s(self, n_bytes: float, transfers: int) -> float:
        """Seconds to move ``n_bytes`` in ``transfers`` copies one way."""
        return n_bytes / (self.GBps * 1e9) + transfers * self.latency_s


def offload_path(s: Scenario, server: Server) -> tuple[OffloadPath | None, str]:
    """Return ``(path, problem)`` for ``training.offload_target`` on ``server``.

    ``problem`` names why the target does not exist there ('' when it does).

    >>> from fabric_model.catalog import load_catalog
    >>> from fabric_model.scenario import Scenario, apply_overrides
    >>> cat = load_catalog()
    >>> s = apply_overrides(Scenario(), {"training.offload_target": "cxl"})
    >>> path, _ = offload_path(s, cat.server("hgx_h100"))  # 4 x 57.2 GB/s over 8 GPUs
    >>> round(path.GBps, 1), path.capacity_gb
    (28.6, 1024.0)
    """
    target = s.training.offload_target
    grace = server.cpu_gpu_link == "nvlink-c2c"
    if server.cpu_gpu_GBps is None or server.host_memory_gb is None:
        return None, (
            f"the catalog has no host memory or CPU-GPU bandwidth for {server.name}; "
            f"set training.offload_layers = 0"
        )
    host_latency = C2C_LATENCY_S if grace else PCIE_LATENCY_S
    if target == "grace" and not grace:
        return None, (
            f"{server.name} has no Grace CPU (its host memory is behind PCIe): "
            f"training.offload_target allowed: host, cxl"
        )
    if target in ("host", "grace"):
        via = "NVLink-C2C to Grace LPDDR5X" if grace else "PCIe to host DRAM"
        path = OffloadPath(target, server.cpu_gpu_GBps, host_latency, server.host_memory_gb, via)
        return path, ""
    if grace:
        return None, (
            f"the catalog has no CXL memory path for {server.name} (its host memory is Grace "
            f"LPDDR5X over NVLink-C2C): training.offload_target allowed: host, grace"
        )
    devices = math.ceil(s.training.cxl_memory_gb / CXL_DEVICE_GB)
    per_gpu = min(server.cpu_gpu_GBps, devices * CXL_DEVICE_GBPS / server.gpus_per_server)
    return (
        OffloadPath(
            "cxl",
            per_gpu,
            host_latency + CXL_LATENCY_S,
            s.training.cxl_memory_gb,
            f"PCIe to the host, then {devices} x16 CXL 2.0 expander(s)",
        ),
        "",
    )


def host_memory_problem(s: Scenario, mem: MemoryBreakdown, server: Server) -> str:
    """Why the offload target cannot hold the offloaded activations ('' when it can)."""
    path, problem = offload_path(s, server)
    if path is None:
        return problem
    need_gb = mem.offloaded_gib * GIB / 1e9 * s.cluster.gpus_per_node
    if need_gb > path.capacity_gb:
        return (
            f"{s.cluster.gpus_per_node} GPUs x {mem.offloaded_gib:,.1f} GiB of offloaded "
            f"activations = {need_gb:,.0f} GB, more than the {path.capacity_gb:,.0f} GB "
            f"of {path.target} memory of {server.name}; offload fewer layers"
            + (" or raise training.cxl_memory_gb" if path.target == "cxl" else "")
        )
    return ""


def offload_time_s(
    s: Scenario, plan: Plan, mem: MemoryBreakdown, server: Server, ct: ComputeTimes
) -> float:
    """Seconds per step the activation offload adds: the transfer not hidden by compute.

    Per micro-batch the offloaded layers' activations go to the offload target during the
    forward pass and come back during the backward pass, each way over the target's path
    (:func:`offload_path`: PCIe or NVLink-C2C to host
    memory, or on to a CXL pool; its bandwidth per GPU and its start-up latency per layer)
    on its own copy stream, overlapping the compute of the rest of that pass (Transformer
    Engine's CPU-offload context overlaps the copy of one layer with the next layer's
    compute). What the pass's compute does not cover is exposed: ``max(0, transfer - pass
    time)`` forward and backward.
    """
    path, _ = offload_path(s, server)
    if path is None or mem.offloaded_gib <= 0:
        return 0.0
    # offload runs without pipelining, so one micro-batch's layers are offloaded at a time
    layers = min(s.training.offload_layers, plan.layers_per_stage)
    transfer = path.transfer_s(mem.offloaded_gib * GIB, layers)
    exposed = max(0.0, transfer - ct.forward_s) + max(0.0, transfer - ct.backward_s)
    return exposed * plan.micro_batches
