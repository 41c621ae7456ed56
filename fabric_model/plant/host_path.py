"""The host side of a GPU's network path under the misconfiguration what-ifs.

Healthy, GPUDirect RDMA moves every byte between the GPU and its NIC over their PCIe
switch (``Server.host_link_GBps``, already a cap on the NICs). Three misconfigurations
put something slower in that path; each gives a payload cap per GPU per direction,
10^9 bytes/s, from the server's catalog figures (``assets/catalog.yaml``) and
``assets/misconfigurations.yaml``:

- ``what_if.gdr = off`` (host staging: NCCL_NET_GDR_LEVEL below the GPU-NIC distance, or
  nvidia-peermem not loaded): the GPU copies to host memory and the NIC reads it from there
  (and the reverse on receive). Where GPU and NIC share one PCIe switch uplink to the CPU
  (HGX x86 boards) each direction of it carries every byte twice, ``cpu_gpu_GBps / 2``;
  else (Grace trays) the GPU's and the NIC's host links each once,
  ``min(cpu_gpu_GBps, host_link_GBps)``. Host DRAM is written and read for each byte sent
  and each byte received: ``host_memory_GBps x efficiency / (4 x GPUs per server)``.
- ``what_if.acs = on`` (PCIe Access Control Services redirect peer-to-peer to the root
  complex, NCCL troubleshooting guide): GPU-NIC traffic goes up the shared uplink and back
  down, ``cpu_gpu_GBps / 2`` on boards where they share one; on a Grace tray the path
  already crosses the CPU and nothing changes.
- ``what_if.nic_affinity = cross-socket`` (each GPU drives a NIC behind the other CPU, as a
  wrong NCCL_IB_HCA does): every GPU's traffic crosses the inter-socket link, which carries
  half the GPUs' sends and the other half's receives each way:
  ``socket_link_GBps / GPUs per server``.

:func:`host_path` returns the binding cap with its name and a sentence;
:func:`check_host_path` refuses a what-if the server's data cannot model (naming the key).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fabric_model.catalog import Server
from fabric_model.errors import InfeasibleDesignError
from fabric_model.scenario import Scenario
from fabric_model.transports import misconfig_params

__all__ = ["HostPath", "check_host_path", "host_path"]


@dataclass(frozen=True)
class HostPath:
    """The slowest host-side stage the misconfigurations add, per GPU and direction.

    Attributes
    ----------
    feed_GBps : float
        Payload a GPU can move each way through it, 10^9 bytes/s (``inf`` when no
        misconfiguration is set).
    label : str
        The resource (``host link (PCIe, GDR off: host-staged)``, ``host memory (GDR off:
        host-staged)``, ``root complex (PCIe, ACS on)``, ``inter-socket link (UPI/xGMI)``).
    notes : tuple[str, ...]
        One sentence per active misconfiguration, with its figure.
    """

    feed_GBps: float = math.inf
    label: str = ""
    notes: tuple[str, ...] = ()


def check_host_path(scenario: Scenario, server: Server) -> None:
    """Refuse a host-side what-if the server's catalog figures cannot model.

    Raises
    ------
    InfeasibleDesignError
        ``what_if.gdr`` without the server's host-memory or CPU-GPU bandwidth,
        ``what_if.nic_affinity`` on a server with no inter-socket NIC path.
    """
    w = scenario.what_if
    if w.gdr == "off" and (server.host_memory_GBps is None or server.cpu_gpu_GBps is None):
        raise InfeasibleDesignError(
            "what_if.gdr",
            f"off (host staging) needs the host memory and CPU-GPU bandwidth of "
            f"{server.name}, which the catalog does not have (allowed here: on)",
        )
    if w.nic_affinity == "cross-socket" and server.socket_link_GBps is None:
        raise InfeasibleDesignError(
            "what_if.nic_affinity",
            f"cross-socket: {server.name} has no NIC across a CPU socket from its GPU "
            f"(each CPU serves its own GPUs and NICs, or the figure is not published); "
            f"allowed here: local",
        )


def host_path(scenario: Scenario, server: Server) -> HostPath:
    """Return the binding host-side cap of the scenario's misconfigurations (module docstring)."""
    check_host_path(scenario, server)
    w = scenario.what_if
    g = server.gpus_per_server
    caps: list[tuple[float, str, str]] = []
    shared = server.gpu_nic_shared_uplink
    if w.gdr == "off":
        cpu_gpu = float(server.cpu_gpu_GBps or 0.0)
        host = misconfig_params("host")
        dram = (
            float(server.host_memory_GBps or 0.0)
            * host["dram_efficiency"]
            / (host["dram_touches_per_byte"] * g)
        )
        if shared:
            pcie = cpu_gpu / 2.0
            how = f"its PCIe switch uplink ({cpu_gpu:g} GB/s) carries each byte twice each way"
        else:
            pcie = min(cpu_gpu, float(server.host_link_GBps))
            how = "the GPU's and the NIC's host links carry each byte once"
        caps.append((pcie, "host link (PCIe, GDR off: host-staged)", how))
        caps.append(
            (
                dram,
                "host memory (GDR off: host-staged)",
                f"host DRAM ({float(server.host_memory_GBps or 0.0):g} GB/s peak x "
                f"{host['dram_efficiency']:g}) is written and read for every byte sent and "
                f"received by {g} GPUs",
            )
        )
    if w.acs == "on" and shared:
        cpu_gpu = float(server.cpu_gpu_GBps or server.host_link_GBps)
        caps.append(
            (
                cpu_gpu / 2.0,
                "root complex (PCIe, ACS on)",
                f"GPU-NIC peer-to-peer goes up the PCIe switch's uplink ({cpu_gpu:g} GB/s) to "
                f"the root complex and back down",
            )
        )
    if w.nic_affinity == "cross-socket":
        link = float(server.socket_link_GBps or 0.0)
        caps.append(
            (
                link / g,
                "inter-socket link (UPI/xGMI, cross-socket NIC)",
                f"the inter-socket link ({link:g} GB/s each way) carries the traffic of all "
                f"{g} GPUs",
            )
        )
    if not caps:
        return HostPath()
    notes = []
    if w.gdr == "off":
        notes.append(
            "GPUDirect RDMA off (what_if.gdr): host-staged through host memory; "
            + "; ".join(f"{how}: {cap:.1f} GB/s per GPU" for cap, lab, how in caps[:2])
        )
    for cap, lab, how in caps[2:] if w.gdr == "off" else caps:
        key = "what_if.acs" if "ACS" in lab else "what_if.nic_affinity"
        notes.append(f"{lab} ({key}): {how}: {cap:.1f} GB/s per GPU")
    if w.acs == "on" and not shared:
        notes.append(
            f"ACS on (what_if.acs): {server.name}'s GPU-NIC path already crosses the CPU, "
            f"so redirecting peer-to-peer changes nothing here"
        )
    feed, label, _ = min(caps, key=lambda c: c[0])
    return HostPath(feed, label, tuple(notes))
