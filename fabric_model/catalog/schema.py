"""The catalog's field table: each section's fields, their kinds, bounds and defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from fabric_model.catalog.compute import Gpu, Server
from fabric_model.catalog.entries import _Entry
from fabric_model.catalog.network import Cable, Nic, OcsSwitch, Optic, Switch
from fabric_model.catalog.vendors import Vendor

# ---------------------------------------------------------------------------------------------
# Schema: one declarative table of field kinds per section
# ---------------------------------------------------------------------------------------------

_REQUIRED: Final = object()


@dataclass(frozen=True)
class _FieldSpec:
    """Kind and bounds of one entry field.

    ``kind``: ``int``, ``float``, ``bool``, ``str``, ``choice``, ``ints`` (ascending list of
    positive ints), ``choices`` (list of choices), ``keys`` (list of catalog keys) or
    ``speed_map`` (Gb/s -> key).
    Numbers must be > 0, or >= 0 with ``zero_ok``. ``nullable`` accepts ``null``.
    """

    kind: str
    choices: tuple[str, ...] = ()
    nullable: bool = False
    zero_ok: bool = False
    default: object = _REQUIRED

    @property
    def numeric(self) -> bool:
        return self.kind in ("int", "float", "ints")


_PROTOCOLS = ("infiniband", "ethernet")

_SCHEMA: Final[dict[str, tuple[type[_Entry], dict[str, _FieldSpec]]]] = {
    "gpus": (
        Gpu,
        {
            "arch": _FieldSpec("choice", ("ampere", "hopper", "blackwell")),
            "bf16_dense_tflops": _FieldSpec("float"),
            "fp8_dense_tflops": _FieldSpec("float", nullable=True),
            "hbm_gb": _FieldSpec("float"),
            "hbm_gib": _FieldSpec("float"),
            "hbm_GBps": _FieldSpec("float"),
            "nvlink_GBps": _FieldSpec("float"),
            "tdp_w": _FieldSpec("float"),
            "price_usd": _FieldSpec("float"),
            "server": _FieldSpec("str"),
            "n_sms": _FieldSpec("int"),
            "fp4_tflops": _FieldSpec("float", nullable=True, default=None),
            "announced": _FieldSpec("bool", default=False),
            "max_nvlink_domain": _FieldSpec("int", nullable=True, default=None),
        },
    ),
    "servers": (
        Server,
        {
            "gpus_per_server": _FieldSpec("int"),
            "nvlink_domain": _FieldSpec("int"),
            "price_usd": _FieldSpec("float"),
            "power_w": _FieldSpec("float"),
            "host_link_GBps": _FieldSpec("float"),
            "host_memory_gb": _FieldSpec("float", nullable=True, default=None),
            "cpu_gpu_GBps": _FieldSpec("float", nullable=True, default=None),
            "host_memory_GBps": _FieldSpec("float", nullable=True, default=None),
            "socket_link_GBps": _FieldSpec("float", nullable=True, default=None),
            "gpu_nic_shared_uplink": _FieldSpec("bool", default=True),
            "cpu_gpu_link": _FieldSpec("choice", ("pcie", "nvlink-c2c"), default="pcie"),
        },
    ),
    "nics": (
        Nic,
        {
            "port_gbps": _FieldSpec("int"),
            "n_ports": _FieldSpec("int"),
            "speeds_gbps": _FieldSpec("ints"),
            "protocols": _FieldSpec("choices", _PROTOCOLS),
            "power_w": _FieldSpec("float", zero_ok=True),
            "price_usd": _FieldSpec("float"),
            "latency_ns": _FieldSpec("float"),
            "spectrum_x_endpoint": _FieldSpec("bool"),
            "host_link_GBps": _FieldSpec("float", nullable=True),
            "lane_gbps": _FieldSpec("int", nullable=True, default=None),
            "announced": _FieldSpec("bool", default=False),
        },
    ),
    "switches": (
        Switch,
        {
            "protocol": _FieldSpec("choice", _PROTOCOLS),
            "capacity_one_way_gbps": _FieldSpec("int"),
            "port_speeds_gbps": _FieldSpec("ints"),
            "max_ports": _FieldSpec("int"),
            "n_cages": _FieldSpec("int"),
            "cage_gbps": _FieldSpec("int"),
            "hop_latency_ns": _FieldSpec("float"),
            "power_w": _FieldSpec("float", zero_ok=True),
            "price_usd": _FieldSpec("float"),
            "sharp": _FieldSpec("bool"),
            "adaptive_routing": _FieldSpec("bool"),
            "rack_units": _FieldSpec("int"),
            "co_packaged_optics": _FieldSpec("bool", default=False),
            "announced": _FieldSpec("bool", default=False),
            "cpo_port_w": _FieldSpec("float", nullable=True, default=None),
            "cpo_port_usd": _FieldSpec("float", nullable=True, default=None),
            "cpo_port_gbps": _FieldSpec("int", default=800),
            "cpo_lasers_per_port": _FieldSpec("float", nullable=True, default=None),
            "cpo_variant": _FieldSpec("str", default=""),
            "buffer_mb": _FieldSpec("float", nullable=True, default=None),
        },
    ),
    "optics": (
        Optic,
        {
            "side": _FieldSpec("choice", ("switch", "nic")),
            "form": _FieldSpec("choice", ("twin", "single")),
            "protocols": _FieldSpec("choices", _PROTOCOLS),
            "port_speeds_gbps": _FieldSpec("ints"),
            "module_gbps": _FieldSpec("int"),
            "reach_m": _FieldSpec("float"),
            "media": _FieldSpec("choice", ("mmf", "smf")),
            "power_w": _FieldSpec("float", zero_ok=True),
            "price_usd": _FieldSpec("float"),
            "price_oem_usd": _FieldSpec("float"),
            "n_fibers": _FieldSpec("int", nullable=True, default=None),
            "channel_loss_db": _FieldSpec("float", nullable=True, default=None),
            "ocs_only": _FieldSpec("bool", default=False),
        },
    ),
    "cables": (
        Cable,
        {
            "kind": _FieldSpec("choice", ("dac", "acc", "lacc", "fiber")),
            "port_speeds_gbps": _FieldSpec("ints"),
            "lane_gbps": _FieldSpec("int", nullable=True),
            "reach_m": _FieldSpec("float"),
            "split": _FieldSpec("int"),
            "links_per_cable": _FieldSpec("int"),
            "price_usd": _FieldSpec("float"),
            "power_w": _FieldSpec("float", zero_ok=True),
        },
    ),
    "vendors": (
        Vendor,
        {
            "protocol": _FieldSpec("choice", _PROTOCOLS),
            "switch_by_gbps": _FieldSpec("speed_map"),
            "nic_by_gbps": _FieldSpec("speed_map"),
            "default_routing": _FieldSpec("choice", ("adaptive", "ecmp")),
            "sharp_available": _FieldSpec("bool"),
            "requires_spectrum_x_nic": _FieldSpec("bool"),
            "lossless": _FieldSpec("bool", default=True),
            "label": _FieldSpec("str", default=""),
            "short_label": _FieldSpec("str", default=""),
            "color": _FieldSpec("str", default=""),
            "compared": _FieldSpec("bool", default=True),
            "switches": _FieldSpec("keys", default=()),
            "transport": _FieldSpec("str"),
        },
    ),
    "ocs": (
        OcsSwitch,
        {
            "technology": _FieldSpec("choice", ("mems", "piezo")),
            "n_ports": _FieldSpec("int"),
            "insertion_loss_db": _FieldSpec("float"),
            "reconfig_ms": _FieldSpec("float"),
            "power_w": _FieldSpec("float"),
            "price_usd": _FieldSpec("float"),
            "rack_units": _FieldSpec("int"),
            "in_house": _FieldSpec("bool", default=False),
        },
    ),
}

_COMMON_FIELDS: Final = ("name", "sources", "remark")
