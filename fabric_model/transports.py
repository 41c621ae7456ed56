"""The transport registry and the wire-level constants of the misconfiguration what-ifs.

``assets/transports.yaml`` lists the transports (InfiniBand credits, RoCE with PFC and
DCQCN, Spectrum-X, UEC, lossy spraying): each vendor of the catalog names one, and
``fabric.transport`` overrides it. ``assets/misconfigurations.yaml`` holds the per-packet
headers (``what_if.mtu``), the host-memory figures of host staging (``what_if.gdr``) and the
link-retrain and retransmission timers (``what_if.flapping_link``), each with its
source. This module sits below every model package (as ``families`` and ``presets`` do):
the scenario lists its keys, the plant checks a design against it, the collectives model
incasts with its parameters (:mod:`fabric_model.collectives.transport`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from fabric_model.errors import FabricModelError
from fabric_model.resources import asset, load_yaml

__all__ = [
    "MISCONFIG_PATH",
    "TRANSPORTS_PATH",
    "Transport",
    "flap_stall_s",
    "misconfig_params",
    "mtu_goodput_factor",
    "transport_names",
    "transport_params",
    "transports",
]

TRANSPORTS_PATH = asset("transports.yaml")
_FLOW_CONTROLS = ("credit", "pfc", "none")
_CONGESTION_CONTROLS = ("none", "dcqcn", "telemetry", "rccc", "nscc")
_RECOVERIES = ("none", "go-back-n", "trim")


@dataclass(frozen=True)
class Transport:
    """One transport of ``assets/transports.yaml``.

    Attributes
    ----------
    key, name : str
        Its key (``fabric.transport``, the vendor's ``transport``) and display name.
    flow_control : str
        ``credit`` (InfiniBand), ``pfc`` (lossless Ethernet) or ``none`` (lossy).
    congestion_control : str
        ``none``, ``dcqcn``, ``telemetry``, ``rccc`` or ``nscc``.
    loss_recovery : str
        What a lost packet costs: ``go-back-n`` (RoCE: everything after it is resent),
        ``trim`` (the switch trims the payload, the receiver NACKs, only it is resent) or
        ``none`` (nothing is ever lost).
    lossless : bool
        Whether it runs without drops by design (its goodput fraction is
        ``net_efficiency``, else ``net_efficiency_lossy``).
    description, source : str
        The mechanism in words and its sources (keys of the file's ``sources``).
    """

    key: str
    name: str
    flow_control: str
    congestion_control: str
    loss_recovery: str
    lossless: bool
    description: str
    source: str

    @property
    def protocol(self) -> str:
        """``infiniband`` for credit flow control, else ``ethernet`` (a vendor must match)."""
        return "infiniband" if self.flow_control == "credit" else "ethernet"

    @property
    def has_pfc(self) -> bool:
        """Whether it relies on PFC (``what_if.pfc = off`` applies)."""
        return self.flow_control == "pfc"


@lru_cache(maxsize=1)
def _document() -> dict[str, Any]:
    data: dict[str, Any] = load_yaml(TRANSPORTS_PATH)
    _check(data)
    return data


def _check(data: dict[str, Any]) -> None:
    """Refuse a malformed file: unknown mechanisms, numbers without a source note."""
    where = TRANSPORTS_PATH.name
    for key, entry in data["transports"].items():
        for field, allowed in (
            ("flow_control", _FLOW_CONTROLS),
            ("congestion_control", _CONGESTION_CONTROLS),
            ("loss_recovery", _RECOVERIES),
        ):
            if entry.get(field) not in allowed:
                raise FabricModelError(
                    f"{where}: transports.{key}.{field} must be one of {', '.join(allowed)}"
                )
    for group, values in data["parameters"].items():
        notes = values.get("notes", {})
        for name, value in values.items():
            if name == "notes":
                continue
            note = str(notes.get(name, ""))
            if not isinstance(value, int | float) or not (
                note.startswith("[T") or note.startswith("estimate:")
            ):
                raise FabricModelError(
                    f"{where}: parameters.{group}.{name} needs a number and a note starting "
                    f'with "[Tn]" or "estimate:"'
                )


@lru_cache(maxsize=1)
def transports() -> dict[str, Transport]:
    """Return every transport of ``assets/transports.yaml`` by key (the transport registry)."""
    out = {}
    for key, e in _document()["transports"].items():
        out[key] = Transport(
            key=key,
            name=str(e["name"]),
            flow_control=str(e["flow_control"]),
            congestion_control=str(e["congestion_control"]),
            loss_recovery=str(e["loss_recovery"]),
            lossless=bool(e["lossless"]),
            description=" ".join(str(e["description"]).split()),
            source=str(e["source"]),
        )
    return out


def transport_params(group: str) -> dict[str, float]:
    """Return one parameter group of the file (``dcqcn``, ``telemetry``, ...), without notes."""
    values = _document()["parameters"][group]
    return {k: float(v) for k, v in values.items() if k != "notes"}


def transport_names() -> tuple[str, ...]:
    """Return the transport keys (``fabric.transport`` values besides ``auto``)."""
    return tuple(_document()["transports"])


# ------------------------------------------------------------------------ misconfigurations

MISCONFIG_PATH = asset("misconfigurations.yaml")


@lru_cache(maxsize=1)
def _misconfig() -> dict[str, Any]:
    data: dict[str, Any] = load_yaml(MISCONFIG_PATH)
    for group, values in data.items():
        if group in ("version", "sources"):
            continue
        notes = values.get("notes", {})
        for name, value in values.items():
            note = str(notes.get(name, ""))
            if name != "notes" and not (
                isinstance(value, int | float)
                and (note.startswith("[M") or note.startswith("estimate:"))
            ):
                raise FabricModelError(
                    f"{MISCONFIG_PATH.name}: {group}.{name} needs a number and a note "
                    f'starting with "[Mn]" or "estimate:"'
                )
    return data


def misconfig_params(group: str) -> dict[str, float]:
    """Return one group of ``assets/misconfigurations.yaml`` (``headers``, ``host``, ...)."""
    return {k: float(v) for k, v in _misconfig()[group].items() if k != "notes"}


def mtu_goodput_factor(protocol: str, mtu_bytes: int) -> float:
    """Goodput at ``mtu_bytes`` of RDMA payload per packet, relative to NCCL's 4096 B.

    Each packet carries the protocol's headers (InfiniBand 26 B; RoCEv2 on Ethernet 82 B
    with preamble and gap): goodput ``= MTU / (MTU + headers)``. The measured
    ``net_efficiency`` already holds the 4096 B figure, so a smaller MTU scales it by the
    ratio. Per-packet processing does not bind at these sizes: 400G at 1024 B is 48 M
    packets/s per direction, well inside a ConnectX's message rate.

    >>> round(mtu_goodput_factor("ethernet", 1024), 4)
    0.9444
    >>> mtu_goodput_factor("infiniband", 4096)
    1.0
    """
    h = misconfig_params("headers")
    head = h["infiniband_bytes"] if protocol == "infiniband" else h["ethernet_rocev2_bytes"]
    ref = h["reference_mtu_bytes"]
    return (mtu_bytes / (mtu_bytes + head)) / (ref / (ref + head))


def flap_stall_s() -> tuple[float, float, float]:
    """Return the job's stall per link retrain, the link's down time and the retry budget, s.

    A reliable connection resends only when its local ACK timer fires (4.096 us x
    2^NCCL_IB_TIMEOUT, 4.3 s at NCCL's default 20), and each retry that finds the link
    still down waits another timeout: the stall is ``timeout x ceil(down / timeout)``.
    Past ``NCCL_IB_RETRY_CNT`` retries the connection fails and the job with it (the retry
    budget, ``timeout x retry count``).

    >>> [round(x, 2) for x in flap_stall_s()]
    [4.29, 1.0, 30.06]
    """
    f = misconfig_params("flapping")
    timeout = f["ack_timeout_base_us"] * 1e-6 * 2.0 ** f["ib_timeout_exponent"]
    down = f["link_down_s"]
    stall = timeout * max(1, math.ceil(down / timeout))
    return stall, down, timeout * f["ib_retry_count"]
