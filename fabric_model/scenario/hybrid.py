"""Section ``hybrid``: two partitions joined by a shared tier (``fabric.topology = hybrid``)."""

from __future__ import annotations

from dataclasses import dataclass

from fabric_model.scenario.fields import FieldSpec, _f
from fabric_model.scenario.hardware import GPU_COUNT_MAX, VENDORS

__all__ = ["HYBRID_PARTITION_FAMILIES", "HybridSpec"]


#: Families a hybrid partition may take: switched fabrics with a top tier to uplink.
HYBRID_PARTITION_FAMILIES = ("fat-tree", "rail-only", "dragonfly-plus")


@dataclass(frozen=True)
class HybridSpec:
    """Two partitions joined by a shared core tier (``fabric.topology = hybrid``).

    Partition A holds GPUs ``0 .. a_gpus - 1``, partition B the rest; each is a fabric of its
    own family and vendor, and the top-tier switches of both uplink into one tier of shared
    core switches (:mod:`fabric_model.topology.hybrid`).
    """

    a_topology: str = _f(
        "fat-tree",
        FieldSpec(
            "choice",
            "hybrid: topology family of partition A (GPUs 0 .. hybrid.a_gpus - 1)",
            choices=HYBRID_PARTITION_FAMILIES,
        ),
    )
    a_gpus: int | str = _f(
        "auto",
        FieldSpec(
            "int",
            "hybrid: GPUs in partition A; auto = half of cluster.n_gpus (rounded to whole "
            "NVLink domains); with hybrid.b_gpus they must add up to cluster.n_gpus",
            "GPUs",
            min=1,
            max=GPU_COUNT_MAX,
            auto=True,
        ),
    )
    a_vendor: str = _f(
        "auto",
        FieldSpec(
            "choice",
            "hybrid: vendor of partition A; auto = fabric.vendor (every vendor of a hybrid "
            "must share one link layer: InfiniBand or Ethernet)",
            choices=VENDORS,
            auto=True,
        ),
    )
    b_topology: str = _f(
        "dragonfly-plus",
        FieldSpec(
            "choice",
            "hybrid: topology family of partition B (the GPUs after partition A's)",
            choices=HYBRID_PARTITION_FAMILIES,
        ),
    )
    b_gpus: int | str = _f(
        "auto",
        FieldSpec(
            "int",
            "hybrid: GPUs in partition B; auto = cluster.n_gpus - partition A's GPUs",
            "GPUs",
            min=1,
            max=GPU_COUNT_MAX,
            auto=True,
        ),
    )
    b_vendor: str = _f(
        "auto",
        FieldSpec(
            "choice",
            "hybrid: vendor of partition B; auto = fabric.vendor",
            choices=VENDORS,
            auto=True,
        ),
    )
    shared_oversubscription: float = _f(
        7.0,
        FieldSpec(
            "float",
            "hybrid: a partition's injection bandwidth (its NIC ports at line rate) : its "
            "uplink bandwidth into the shared core tier; 1 = full bandwidth between the "
            "partitions; default 7, the cross-zone aggregation layer of Meta's RoCE training "
            "clusters (Gangidi et al., SIGCOMM 2024; Llama 3 paper sec. 3.3.1)",
            ":1",
            min=1.0,
            max=64.0,
        ),
    )
    job: str = _f(
        "a",
        FieldSpec(
            "choice",
            "hybrid: where the modelled job runs: a = partition A's GPUs only, b = partition "
            "B's only, both = every GPU (its traffic between the partitions crosses the "
            "shared core tier)",
            choices=("a", "b", "both"),
        ),
    )
