"""Section ``what_if``: degraded links, planes, switches, placement and misconfigurations.

The misconfigurations: GPUDirect RDMA, PFC, the RDMA MTU, NIC affinity, ACS, a flapping link.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabric_model.scenario.fields import FieldSpec, _f

__all__ = ["WhatIfSpec"]


@dataclass(frozen=True)
class WhatIfSpec:
    """Degradations and placements applied to the fabric."""

    degraded_link_factor: float = _f(
        1.0,
        FieldSpec(
            "float",
            "one link runs at this fraction of its rate (1 = healthy)",
            "",
            min=0.0,
            max=1.0,
            min_exclusive=True,
            step=0.05,
        ),
    )
    degraded_link: str = _f(
        "nic",
        FieldSpec(
            "choice",
            "which link is degraded",
            choices=("nic", "leaf-spine", "spine-core"),
        ),
    )
    degraded_position: str = _f(
        "interior",
        FieldSpec(
            "choice",
            "where the degraded NIC sits: interior = GPU 0 of the middle NVLink domain (an "
            "interior node of NCCL's first tree: the typical and the worst position), root = "
            "rank 0 (root of NCCL's first tree, the least loaded NIC)",
            choices=("interior", "root"),
        ),
    )
    failed_planes: int = _f(
        0,
        FieldSpec(
            "int",
            "network planes that are down (fabric.planes >= 2); the job's traffic sprays over "
            "the others",
            "planes",
            min=0,
            max=7,
        ),
    )
    degraded_plane_factor: float = _f(
        1.0,
        FieldSpec(
            "float",
            "one healthy plane runs at this fraction of its rate (1 = healthy; needs "
            "fabric.planes >= 2)",
            "",
            min=0.0,
            max=1.0,
            min_exclusive=True,
            step=0.05,
        ),
    )
    failed_switch: str = _f(
        "none",
        FieldSpec(
            "choice",
            "one switch of one plane is down (needs fabric.planes >= 2): the leaf of the "
            "degraded position's NIC, or the first spine",
            choices=("none", "leaf", "spine"),
        ),
    )
    placement: str = _f(
        "contiguous",
        FieldSpec("choice", "where the job's GPUs sit", choices=("contiguous", "scattered")),
    )
    gdr: str = _f(
        "on",
        FieldSpec(
            "choice",
            "GPUDirect RDMA: off = host-staged (NCCL_NET_GDR_LEVEL below the path, or "
            "nvidia-peermem not loaded): every byte crosses PCIe to host memory and back, "
            "and host DRAM carries it four times",
            choices=("on", "off"),
        ),
    )
    pfc: str = _f(
        "on",
        FieldSpec(
            "choice",
            "priority flow control on a PFC transport (RoCE, Spectrum-X): off = a congested "
            "port drops and RoCE's go-back-N resends; refused on InfiniBand and lossy "
            "transports",
            choices=("on", "off"),
        ),
    )
    mtu: int = _f(
        4096,
        FieldSpec(
            "choice",
            "RDMA path MTU (payload per packet): 1024 is what RoCE gets when the interface "
            "MTU is left at 1500; per-packet headers cost more at smaller MTUs (RoCE's "
            "largest is 4096, whatever the Ethernet MTU)",
            "bytes",
            choices=(1024, 2048, 4096),
        ),
    )
    nic_affinity: str = _f(
        "local",
        FieldSpec(
            "choice",
            "which NIC each GPU uses: local = its own PCIe switch's; cross-socket = a NIC "
            "behind the other CPU (a wrong NCCL_IB_HCA or topology file), so every byte "
            "crosses the inter-socket link (UPI, xGMI)",
            choices=("local", "cross-socket"),
        ),
    )
    acs: str = _f(
        "off",
        FieldSpec(
            "choice",
            "PCIe Access Control Services on the GPU's PCIe switch: on = GPU-NIC "
            "peer-to-peer goes up to the root complex and back down the switch's uplink",
            choices=("off", "on"),
        ),
    )
    flapping_link: float = _f(
        0.0,
        FieldSpec(
            "float",
            "seconds between retrains of one flapping NIC link (0 = never): the job stalls "
            "each time until NCCL's QPs retransmit (4.096 us x 2^NCCL_IB_TIMEOUT)",
            "s",
            min=0.0,
            max=86400.0,
            step=10.0,
        ),
    )
