"""GPUs and servers (catalog sections ``gpus`` and ``servers``)."""

from __future__ import annotations

from dataclasses import dataclass

from fabric_model.catalog.entries import _Entry

__all__ = ["Gpu", "Server"]


@dataclass(frozen=True, kw_only=True)
class Gpu(_Entry):
    """One GPU model (per-GPU figures; dense = without 2:4 sparsity).

    Parameters
    ----------
    arch
        ``"ampere"``, ``"hopper"`` or ``"blackwell"`` (selects NCCL-like constants).
    bf16_dense_tflops, fp8_dense_tflops
        Dense tensor throughput, 10^12 FLOP/s; ``fp8_dense_tflops`` is ``None`` when the GPU
        has no FP8 tensor cores.
    hbm_gb, hbm_gib
        HBM capacity: the datasheet figure (10^9 bytes) and the device memory CUDA reports
        (2^30 bytes; binary-sized stacks make it larger than ``hbm_gb x 10^9 / 2^30``).
    hbm_GBps
        HBM bandwidth, 10^9 bytes/s.
    nvlink_GBps
        NVLink bandwidth per GPU and per direction, 10^9 bytes/s (half the marketing figure).
    tdp_w
        Board power, W.
    price_usd
        The GPU alone, USD, for reference; the server price already contains its GPUs.
    server
        Key of the default server entry.
    n_sms
        Streaming multiprocessors: GEMM tiles run in waves of this many (wave quantization).
    fp4_tflops
        Dense NVFP4 tensor throughput, 10^12 FLOP/s; ``None`` (the default) when the GPU has
        no FP4 tensor cores (``training.precision = fp4`` is refused there).
    announced
        Announced, not shipping: its figures are the vendor's announcement (``remark`` says
        so); the automatic switch choice only offers announced switches to announced GPUs.
    max_nvlink_domain
        Largest NVLink domain any system built on this GPU has, GPUs (``cluster.nvlink_domain``
        above it is refused); ``None`` = the default server's domain.
    """

    arch: str
    bf16_dense_tflops: float
    fp8_dense_tflops: float | None
    hbm_gb: float
    hbm_gib: float
    hbm_GBps: float
    nvlink_GBps: float
    tdp_w: float
    price_usd: float
    server: str
    n_sms: int
    fp4_tflops: float | None = None
    announced: bool = False
    max_nvlink_domain: int | None = None


@dataclass(frozen=True, kw_only=True)
class Server(_Entry):
    """One GPU server (for GB200 NVL72: one 4-GPU compute tray and its share of the rack).

    Parameters
    ----------
    gpus_per_server
        GPUs in the server (tray), count.
    nvlink_domain
        GPUs sharing one NVLink switch domain, count.
    price_usd
        Server price including its GPUs, EXCLUDING the scale-out NICs (the network bill of
        materials counts them), USD.
    power_w
        Maximum server power excluding the scale-out NIC cards, W.
    host_link_GBps
        Payload bandwidth per direction of the PCIe path between one GPU and its scale-out
        NIC(s), 10^9 bytes/s: every byte a GPU sends to or receives from the network
        crosses it, whatever the NIC count or speed.
    host_memory_gb
        CPU (host) memory of the whole server, 10^9 bytes: where activations offloaded from
        HBM go (``training.offload_layers``); ``None`` when not published.
    cpu_gpu_GBps
        Payload bandwidth per direction between one GPU and host memory, 10^9 bytes/s
        (PCIe on x86 servers, NVLink-C2C on Grace); ``None`` when not published.
    host_memory_GBps
        Peak DRAM bandwidth of the whole server's CPUs (channels x transfer rate x 8 B),
        10^9 bytes/s; ``None`` when not published. A host-staged transfer
        (``what_if.gdr = off``) writes and reads every byte through it.
    socket_link_GBps
        Payload bandwidth per direction of the link between the two CPU sockets (UPI,
        xGMI), 10^9 bytes/s; ``None`` where no NIC sits across a socket from its GPU
        (Grace trays) or the figure is not published (``what_if.nic_affinity`` is refused).
    gpu_nic_shared_uplink
        Whether a GPU and its NIC sit behind one PCIe switch whose single uplink also
        carries the GPU's traffic to host memory (HGX x86 boards): host-staged and
        ACS-redirected transfers then cross that uplink twice per direction.
    cpu_gpu_link
        What joins a GPU to host memory: ``pcie`` (an x86 host behind PCIe) or
        ``nvlink-c2c`` (a Grace CPU's LPDDR5X over NVLink-C2C).
    """

    gpus_per_server: int
    nvlink_domain: int
    price_usd: float
    power_w: float
    host_link_GBps: float
    host_memory_gb: float | None = None
    cpu_gpu_GBps: float | None = None
    host_memory_GBps: float | None = None
    socket_link_GBps: float | None = None
    gpu_nic_shared_uplink: bool = True
    cpu_gpu_link: str = "pcie"
