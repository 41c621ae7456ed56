"""Section ``what_if``: degraded and failed links, planes and switches, and job placement."""

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
