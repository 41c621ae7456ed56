"""Sections ``cluster`` and ``fabric``: what the job runs on."""

from __future__ import annotations

from dataclasses import dataclass

from fabric_model.catalog import load_catalog
from fabric_model.families import FAMILIES
from fabric_model.scenario.fields import FieldSpec, _f
from fabric_model.transports import transport_names

__all__ = ["GPU_COUNT_MAX", "VENDORS", "ClusterSpec", "FabricSpec"]


#: ``fabric.vendor`` values: the shipped catalog's vendors (the vendor registry: a new vendor
#: is a data entry in ``assets/catalog.yaml``).
VENDORS: tuple[str, ...] = tuple(load_catalog().vendors)


GPU_COUNT_MAX = 1_048_576


@dataclass(frozen=True)
class ClusterSpec:
    """What the job runs on: GPUs, servers and the scale-up (NVLink) domain."""

    n_gpus: int = _f(
        1024,
        FieldSpec("int", "GPUs in the job/cluster modelled", "GPUs", min=2, max=GPU_COUNT_MAX),
    )
    gpu: str = _f("h100", FieldSpec("text", "GPU model (catalog key, e.g. h100, b200, gb200)"))
    gpus_per_node: int = _f(
        8, FieldSpec("int", "GPUs per server (per compute tray for GB200)", "GPUs", min=1, max=16)
    )
    nvlink_domain: int = _f(
        8,
        FieldSpec(
            "int",
            "GPUs sharing one NVLink switch domain (8 for HGX, 72 for GB200 NVL72)",
            "GPUs",
            min=1,
            max=576,
        ),
    )
    nics_per_gpu: int = _f(
        1, FieldSpec("int", "scale-out NICs (rails) per GPU", "NICs", min=1, max=4)
    )


@dataclass(frozen=True)
class FabricSpec:
    """The scale-out network: vendor, speed, topology, routing and cabling."""

    vendor: str = _f(
        "infiniband",
        FieldSpec(
            "choice",
            "scale-out fabric: InfiniBand, NVIDIA Spectrum-X Ethernet, or plain RoCE Ethernet",
            choices=VENDORS,
        ),
    )
    link_gbps: int = _f(
        400,
        FieldSpec("choice", "per-NIC line rate", "Gb/s", choices=(100, 200, 400, 800, 1600)),
    )
    planes: int = _f(
        1,
        FieldSpec(
            "choice",
            "independent network planes: each NIC's line rate splits into this many links of "
            "fabric.link_gbps / planes, one per plane (a fabric of the chosen family each); "
            "traffic sprays over all planes",
            "planes",
            choices=(1, 2, 4, 8),
        ),
    )
    topology: str = _f(
        "fat-tree",
        FieldSpec(
            "choice",
            "topology family",
            choices=tuple(FAMILIES),  # the family registry (fabric_model.families)
        ),
    )
    rail_optimized: bool = _f(
        True,
        FieldSpec(
            "bool",
            "rail-optimized leaf wiring: NIC i of every server goes to the leaf of rail i",
        ),
    )
    tiers: int | str = _f(
        "auto",
        FieldSpec(
            "choice",
            "switch tiers of a fat-tree; auto picks the fewest that fit",
            choices=(1, 2, 3, 4),
            auto=True,
        ),
    )
    oversubscription: float = _f(
        1.0,
        FieldSpec(
            "float",
            "leaf downlink:uplink bandwidth ratio (1 = non-blocking)",
            ":1",
            min=1.0,
            max=16.0,
            step=0.5,
        ),
    )
    spine_oversubscription: float = _f(
        1.0,
        FieldSpec(
            "float",
            "spine (aggregation) downlink:uplink ratio toward the core of a 3-tier fat-tree",
            ":1",
            min=1.0,
            max=16.0,
            step=0.5,
        ),
    )
    routing: str = _f(
        "auto",
        FieldSpec(
            "choice",
            "routing policy; auto = the vendor's default (adaptive for InfiniBand and "
            "Spectrum-X, static per-flow ECMP hashing for RoCE)",
            choices=("adaptive", "spray", "ecmp", "dmodk", "minimal", "valiant", "ugal", "dor"),
            auto=True,
        ),
    )
    qps_per_connection: int = _f(
        1,
        FieldSpec(
            "int",
            "flows (queue pairs) per peer connection, hashed independently under ECMP",
            "QPs",
            min=1,
            max=64,
        ),
    )
    transport: str = _f(
        "auto",
        FieldSpec(
            "choice",
            "transport and congestion control (assets/transports.yaml): ib-credit "
            "(InfiniBand credits), roce-dcqcn (PFC + DCQCN), roce-pfc (PFC, collective-level "
            "admission, no DCQCN), spectrum-x (PFC + telemetry CC), uec (lossy, receiver "
            "credits, trimming), lossy-spray (lossy, sender CC, trimming); auto = the "
            "vendor's. Sets how an incast (a port receiving faster than its rate) runs",
            choices=transport_names(),
            auto=True,
        ),
    )
    sharp: bool = _f(
        False,
        FieldSpec("bool", "in-network reduction (SHARP) on the scale-out fabric (InfiniBand)"),
    )
    nvls: bool = _f(
        True,
        FieldSpec(
            "bool",
            "NVLink SHARP (NVLS, NVLS-Tree) available to NCCL; false = "
            "NCCL_NVLS_ENABLE=0, as many published multi-rack NVL72 runs set it",
        ),
    )
    switch: str = _f(
        "auto", FieldSpec("text", "switch model (catalog key); auto = the vendor's default")
    )
    nic: str = _f("auto", FieldSpec("text", "NIC model (catalog key); auto = the vendor's default"))
    nic_leaf_m: float = _f(
        20.0,
        FieldSpec(
            "float",
            "cable length NIC to leaf (<= 3 m allows copper at up to 400G); with "
            "facility.cable_lengths = floorplan the floor plan's run unless set away from 20",
            "m",
            min=0.5,
            max=2000.0,
        ),
    )
    leaf_spine_m: float = _f(
        50.0,
        FieldSpec(
            "float",
            "cable length leaf to spine (the floor plan's run unless set away from 50)",
            "m",
            min=0.5,
            max=2000.0,
        ),
    )
    spine_core_m: float = _f(
        150.0,
        FieldSpec(
            "float",
            "cable length spine to core, or of a dragonfly+ global link (the floor plan's run "
            "unless set away from 150)",
            "m",
            min=0.5,
            max=2000.0,
        ),
    )
    direct_link_m: float = _f(
        10.0,
        FieldSpec(
            "float",
            "cable length between neighbouring nodes of a torus or hypercube (the floor plan "
            "leaves switchless families at this key)",
            "m",
            min=0.5,
            max=2000.0,
        ),
    )
    optics: str = _f(
        "auto",
        FieldSpec(
            "choice",
            "switch-port optics: pluggable transceivers, or the switch's co-packaged-optics "
            "variant (cpo: optical engines and external lasers per port, catalog cpo_port_w / "
            "cpo_port_usd); auto = cpo for a switch sold only with CPO, else pluggable",
            choices=("pluggable", "cpo"),
            auto=True,
        ),
    )
