"""The concrete parts a scenario resolves to (:func:`fabric_model.plant.design.resolve_hardware`).

Every bill line, the floor plan and the storage and management networks price and place
these parts; this module sits below them and below the design step that chooses them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fabric_model.catalog import Gpu, Nic, Server, Switch, Vendor
from fabric_model.transports import Transport

__all__ = ["Hardware"]


@dataclass(frozen=True)
class Hardware:
    """The concrete parts a scenario resolves to."""

    gpu: Gpu
    server: Server
    vendor: Vendor
    switch: Switch
    nic: Nic
    radix: int
    routing: str
    #: Independent network planes (``fabric.planes``); ``radix`` counts ports at the
    #: per-plane speed ``fabric.link_gbps / planes``.
    planes: int = 1
    #: Why ``fabric.switch = auto`` chose this switch over the vendor's others (empty when
    #: there was one candidate or the switch was given).
    switch_choice: str = ""
    #: Switch-port optics, ``"pluggable"`` or ``"cpo"`` (``fabric.optics`` resolved).
    optics: str = "pluggable"
    #: The transport (``fabric.transport`` resolved: the vendor's unless set).
    transport: Transport | None = None
    #: Whether PFC is on (a PFC transport with ``what_if.pfc`` on; False where it has none).
    pfc: bool = True

    @property
    def host_link_GBps(self) -> float:
        """Payload bandwidth per direction of one GPU's PCIe path to its NICs, 10^9 bytes/s."""
        return float(self.server.host_link_GBps)

    @property
    def nic_host_link_GBps(self) -> float:
        """Payload bandwidth per direction of one NIC's own PCIe interface, 10^9 bytes/s."""
        nic = self.nic.host_link_GBps
        return float(nic) if nic is not None else math.inf

    def nic_feed_GBps(self, nics_per_gpu: int) -> float:
        """Most payload one NIC can move each way when a GPU drives ``nics_per_gpu`` of them.

        The NIC's own host interface, and the GPU's host link shared evenly by its NICs
        (NCCL spreads a GPU's channels evenly over its NICs).
        """
        return min(self.nic_host_link_GBps, self.host_link_GBps / nics_per_gpu)
