"""Sections ``facility``, ``storage`` and ``management``: the hall and the other two networks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from fabric_model.resources import asset
from fabric_model.scenario.fields import FieldSpec, _f

__all__ = ["FACILITY_DATA", "FacilitySpec", "ManagementSpec", "StorageSpec"]


#: Rack, floor and cooling data with their sources (``assets/facility.yaml``).
FACILITY_DATA: dict[str, Any] = yaml.safe_load(asset("facility.yaml").read_text(encoding="utf-8"))


@dataclass(frozen=True)
class FacilitySpec:
    """Racks, rows and cooling: the floor plan the cable lengths and power density come from."""

    cable_lengths: str = _f(
        "floorplan",
        FieldSpec(
            "choice",
            "where the BOM's cable lengths come from: floorplan = each link class's longest run "
            "on the floor plan (a fabric.*_m key set away from its default still wins for its "
            "class), keys = the fabric.nic_leaf_m, leaf_spine_m, spine_core_m and direct_link_m "
            "keys as given",
            choices=("floorplan", "keys"),
        ),
    )
    servers_per_rack: int | str = _f(
        "auto",
        FieldSpec(
            "int",
            "GPU servers (compute trays) per rack; auto = the server type's usual rack "
            "(4 DGX H100 at 40.8 kW, 18 trays of an NVL72 rack: assets/facility.yaml)",
            "servers",
            min=1,
            max=72,
            auto=True,
        ),
    )
    racks_per_row: int | str = _f(
        "auto",
        FieldSpec(
            "int",
            "compute racks per row; auto = whole leaf groups per row in a roughly square hall, "
            "at most 24 racks per row",
            "racks",
            min=1,
            max=200,
            auto=True,
        ),
    )
    hall_max_m2: float = _f(
        float(FACILITY_DATA["hall"]["max_m2"]["value"]),
        FieldSpec(
            "float",
            "largest floor of one data hall; a layout past it takes several halls side by side, "
            "and the fabric's top link class crosses between them (85,000 sq ft: the upper end "
            "of large data halls, assets/facility.yaml)",
            "m2",
            min=100.0,
            max=100000.0,
            step=100.0,
        ),
    )
    cooling: str = _f(
        "auto",
        FieldSpec(
            "choice",
            "how the racks are cooled; auto = the server type's own (air for HGX/DGX, "
            "direct-to-chip liquid for NVL72 racks)",
            choices=("air", "liquid"),
            auto=True,
        ),
    )
    air_limit_kw_per_rack: float = _f(
        float(FACILITY_DATA["cooling"]["air_limit_kw_per_rack"]["value"]),
        FieldSpec(
            "float",
            "most power an air-cooled rack takes (with containment and rear-door heat "
            "exchangers, ~40-60 kW; typical colocation air is ~10-15 kW: assets/facility.yaml); "
            "racks above it on air get a warning",
            "kW",
            min=1.0,
            max=1000.0,
            step=1.0,
        ),
    )


@dataclass(frozen=True)
class StorageSpec:
    """The storage (North/South) Ethernet network to a parallel filesystem."""

    enabled: bool = _f(
        True,
        FieldSpec(
            "bool",
            "price a storage network (each server's storage ports into a Spectrum-4 Ethernet "
            "leaf-spine, as DGX SuperPOD and the HGX reference architectures do); shown apart "
            "from the compute fabric",
        ),
    )
    link_gbps: int = _f(
        int(FACILITY_DATA["storage"]["link_gbps"]["value"]),
        FieldSpec(
            "choice",
            "line rate of one storage port (the reference architectures: 2 x 200 GbE per node)",
            "Gb/s",
            choices=(100, 200, 400),
        ),
    )
    nics_per_node: int = _f(
        int(FACILITY_DATA["storage"]["ports_per_server"]["value"]),
        FieldSpec(
            "int", "storage ports per server (each to a different leaf)", "ports", min=1, max=8
        ),
    )


@dataclass(frozen=True)
class ManagementSpec:
    """The out-of-band management network (BMCs and switch management ports)."""

    enabled: bool = _f(
        True,
        FieldSpec(
            "bool",
            "price the out-of-band management network (one BMC port per server and one per "
            "switch into 48-port access switches, uplinked to an aggregation pair)",
        ),
    )
    link_gbps: int = _f(
        1,
        FieldSpec(
            "choice",
            "management port speed (1 GbE BMC ports as in DGX SuperPOD; 25 GbE access)",
            "Gb/s",
            choices=(1, 25),
        ),
    )
