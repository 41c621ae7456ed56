"""Hardware catalog: typed, validated access to ``assets/catalog.yaml``.

The data file lists GPUs, servers, NICs, switches, optics, cables and fabric vendors, with a
source note on every number. This module turns it into frozen dataclasses and answers the
questions the topology and cost layers ask: which switch and NIC a vendor uses at a link speed,
how many ports a switch has at that speed, which transceiver or copper cable serves a link of a
given length.

Validation is strict and happens once, at load time: unknown or missing fields, wrong types,
non-positive numbers, a numeric field without a source note, a note citing an unknown source
key, or a cross reference to a missing entry all raise :class:`~fabric_model.errors.CatalogError`
naming the section, the entry and the field.

Examples
--------
>>> cat = load_catalog()
>>> cat.switch("qm9700").radix(400)
64
>>> cat.switch_for("spectrum-x", 400).radix(400)
128
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import yaml

from fabric_model.errors import CatalogError, InfeasibleDesignError, UnknownCatalogKeyError
from fabric_model.resources import asset
from fabric_model.transports import transports

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped,unused-ignore]

__all__ = [
    "DEFAULT_CATALOG_PATH",
    "SECTIONS",
    "Cable",
    "Catalog",
    "FrozenMap",
    "Gpu",
    "Nic",
    "Optic",
    "Server",
    "Source",
    "Switch",
    "Vendor",
    "compatibility",
    "load_catalog",
    "vendor_colors",
]

#: The shipped catalog, found relative to the package.
DEFAULT_CATALOG_PATH: Final[Path] = asset("catalog.yaml")

#: Entry sections of the catalog, in file order.
SECTIONS: Final[tuple[str, ...]] = (
    "gpus",
    "servers",
    "nics",
    "switches",
    "optics",
    "cables",
    "vendors",
)

_K = TypeVar("_K")
_V = TypeVar("_V")
_E = TypeVar("_E", bound="_Entry")

_SOURCE_REF = re.compile(r"\[(S[A-Za-z0-9]+)\]")
_NOTE_FORM = re.compile(r"^(?:\[S[A-Za-z0-9]+\]\s*)+|^estimate:\s*\S")
_SOURCE_KEY = re.compile(r"^S[A-Za-z0-9]+$")
_ENTRY_KEY = re.compile(r"^[a-z0-9][a-z0-9_\-]*$")


class FrozenMap(Mapping[_K, _V]):
    """Read-only, hashable and picklable mapping (unlike ``types.MappingProxyType``).

    Catalog entries travel inside frozen result dataclasses that the UI caches and pickles, so
    their mappings must survive both hashing and pickling.

    Parameters
    ----------
    data
        Items to copy, as a mapping or an iterable of pairs.
    """

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[_K, _V] | Iterable[tuple[_K, _V]] = ()) -> None:
        self._data: dict[_K, _V] = dict(data)

    def __getitem__(self, key: _K) -> _V:
        """Return the value of ``key``."""
        return self._data[key]

    def __iter__(self) -> Iterator[_K]:
        """Iterate over the keys in insertion order."""
        return iter(self._data)

    def __len__(self) -> int:
        """Return the number of items."""
        return len(self._data)

    def __hash__(self) -> int:
        """Hash the items (values must be hashable)."""
        return hash(frozenset(self._data.items()))

    def __repr__(self) -> str:
        """Show the items."""
        return f"FrozenMap({self._data!r})"

    def __reduce__(self) -> tuple[type[FrozenMap[_K, _V]], tuple[dict[_K, _V]]]:
        """Pickle as the class and a plain dict of the items."""
        return (type(self), (self._data,))


# ---------------------------------------------------------------------------------------------
# Entry dataclasses
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Source:
    """One citable source of the catalog.

    Parameters
    ----------
    key
        Source key as cited in notes, e.g. ``"S40"`` (without brackets).
    title
        Short human-readable title.
    url
        Where to read it.
    date
        Publication date or range as known, free text (may be empty).
    """

    key: str
    title: str
    url: str
    date: str = ""


@dataclass(frozen=True, kw_only=True)
class _Entry:
    """Fields every catalog entry has.

    Parameters
    ----------
    key
        Catalog key, e.g. ``"qm9700"``.
    name
        Display name.
    sources
        Field name -> source note (``"[S40] ..."`` or ``"estimate: ..."``).
    remark
        Free-text caveat shown with the entry (empty if none).
    """

    key: str
    name: str
    sources: FrozenMap[str, str] = field(default_factory=FrozenMap, repr=False, compare=True)
    remark: str = ""


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


@dataclass(frozen=True, kw_only=True)
class Nic(_Entry):
    """One scale-out NIC (one per rail).

    Parameters
    ----------
    port_gbps
        Maximum line rate per port, Gb/s.
    n_ports
        Network ports on the card, count.
    speeds_gbps
        Supported port speeds, Gb/s, ascending.
    protocols
        ``"infiniband"`` and/or ``"ethernet"``.
    power_w
        Card power without its pluggable module, W.
    price_usd
        Card price, USD.
    latency_ns
        One NIC pipeline (TX or RX), ns; a transfer pays it at both ends.
    spectrum_x_endpoint
        Whether NVIDIA supports the card as a Spectrum-X endpoint.
    host_link_GBps
        Payload bandwidth per direction of the card's own PCIe host interface, 10^9 bytes/s
        (``None`` where not published; the server's host link then decides).
    lane_gbps
        Fastest SerDes lane of its ports, Gb/s (100 for 100G-PAM4, 200 for 200G-PAM4); a
        switch whose cages run faster lanes (``Switch.lane_gbps``) cannot take its links.
        ``None``: not known, so the automatic switch choice keeps the vendor's default.
    announced
        Announced, not shipping (see :attr:`Gpu.announced`).
    """

    port_gbps: int
    n_ports: int
    speeds_gbps: tuple[int, ...]
    protocols: tuple[str, ...]
    power_w: float
    price_usd: float
    latency_ns: float
    spectrum_x_endpoint: bool
    host_link_GBps: float | None = None
    lane_gbps: int | None = None
    announced: bool = False

    def supports(self, link_gbps: int) -> bool:
        """Return whether a port can run at ``link_gbps`` (Gb/s)."""
        return link_gbps in self.speeds_gbps


@dataclass(frozen=True, kw_only=True)
class Switch(_Entry):
    """One scale-out switch box.

    Parameters
    ----------
    protocol
        ``"infiniband"`` or ``"ethernet"``.
    capacity_one_way_gbps
        Sum of port speeds in ONE direction, Gb/s (Quantum-2's "51.2 Tb/s" is 25,600 one way).
    port_speeds_gbps
        Logical port speeds the box supports, Gb/s, ascending.
    max_ports
        Largest logical port count (at the lowest speed), count.
    n_cages, cage_gbps
        Front-panel cages and the line rate of one cage, Gb/s (800 for 100G-SerDes OSFP,
        1600 for 200G-SerDes); ``n_cages x cage_gbps = capacity_one_way_gbps``.
    hop_latency_ns
        Port-to-port latency (planning default), ns.
    power_w
        Box power EXCLUDING pluggable optics, W.
    price_usd
        Box price without optics, USD.
    sharp
        In-network reduction (SHARP) available.
    adaptive_routing
        Hardware capability; the vendor's ``default_routing`` is what the model uses.
    rack_units
        Height, U.
    co_packaged_optics
        Optics are co-packaged; the cages are pluggable equivalents for the optics count.
    announced
        Announced, not shipping (see :attr:`Gpu.announced`).
    cpo_port_w, cpo_port_usd
        The co-packaged-optics variant of the box (``fabric.optics = cpo``): power and price
        of the optics of one ``cpo_port_gbps`` port (optical engine and its share of the
        external laser sources), W and USD; ``None`` = no CPO variant.
    cpo_port_gbps
        Port speed the two figures above refer to, Gb/s; a slower link takes its share
        (``link_gbps / cpo_port_gbps`` of a port), a faster one several ports.
    cpo_lasers_per_port
        External laser source modules per ``cpo_port_gbps`` port of the CPO variant, count.
    cpo_variant
        Name of the CPO variant (e.g. ``"Q3450-LD"``); empty when none.
    buffer_mb
        Packet buffer of the whole box, shared by its ports, 10^6 bytes; ``None`` where no
        figure is given (management switches). An incast's congested port holds at most its
        share (:meth:`buffer_per_port_bytes`) before the transport's flow control or drops
        act (``fabric_model.collectives.transport``).
    """

    protocol: str
    capacity_one_way_gbps: int
    port_speeds_gbps: tuple[int, ...]
    max_ports: int
    n_cages: int
    cage_gbps: int
    hop_latency_ns: float
    power_w: float
    price_usd: float
    sharp: bool
    adaptive_routing: bool
    rack_units: int
    co_packaged_optics: bool = False
    announced: bool = False
    cpo_port_w: float | None = None
    cpo_port_usd: float | None = None
    cpo_port_gbps: int = 800
    cpo_lasers_per_port: float | None = None
    cpo_variant: str = ""
    buffer_mb: float | None = None

    def buffer_per_port_bytes(self, port_gbps: float) -> float | None:
        """Return one port's share of the shared packet buffer at ``port_gbps``, bytes.

        ``buffer_mb x 10^6 / (capacity_one_way_gbps / port_gbps)``: in an all-to-all every
        port of a leaf congests at once, so each holds its share of the shared buffer (a
        lone hot port could borrow more; the share is the conservative figure). ``None``
        when the catalog gives no buffer.

        >>> round(load_catalog().switch("sn5600").buffer_per_port_bytes(400) / 1e6, 2)
        1.0
        """
        if self.buffer_mb is None:
            return None
        ports = max(1.0, self.capacity_one_way_gbps / float(port_gbps))
        return self.buffer_mb * 1e6 / ports

    @property
    def lane_gbps(self) -> int:
        """SerDes lane rate of its cages, Gb/s: an OSFP cage has 8 lanes (``cage_gbps // 8``)."""
        return self.cage_gbps // 8

    @property
    def has_cpo(self) -> bool:
        """Whether a co-packaged-optics variant is in the catalog (``fabric.optics = cpo``)."""
        return self.cpo_port_w is not None and self.cpo_port_usd is not None

    def radix(self, link_gbps: int) -> int:
        """Return the number of ports at ``link_gbps``.

        Parameters
        ----------
        link_gbps
            Port speed, Gb/s.

        Returns
        -------
        int
            ``min(capacity_one_way_gbps // link_gbps, max_ports)``, count.

        Raises
        ------
        InfeasibleDesignError
            If the switch does not support that port speed (key ``fabric.link_gbps``).

        Notes
        -----
        Radix at the speed actually used: a 51.2T (one-way) chip is k = 128 at 400G and
        k = 64 at 800G; Quantum-2 (25.6T one way) is k = 64 at 400G (facts file, section 1.1).
        """
        if link_gbps not in self.port_speeds_gbps:
            raise InfeasibleDesignError(
                "fabric.link_gbps",
                f"switch {self.key} ({self.name}) supports "
                f"{_speeds_text(self.port_speeds_gbps)} Gb/s ports; got {link_gbps}",
            )
        return min(self.capacity_one_way_gbps // link_gbps, self.max_ports)


@dataclass(frozen=True, kw_only=True)
class Optic(_Entry):
    """One pluggable transceiver.

    Parameters
    ----------
    side
        ``"switch"`` or ``"nic"``.
    form
        ``"twin"`` (two logical ports per module, or more with splitters) or ``"single"``.
    protocols
        ``"infiniband"`` and/or ``"ethernet"``.
    port_speeds_gbps
        Logical link speeds a module port can run, Gb/s.
    module_gbps
        Total module line rate, Gb/s; ports per module = ``module_gbps // link_gbps``.
    reach_m
        Maximum link length, m.
    media
        ``"mmf"`` (multimode) or ``"smf"`` (single-mode) fiber.
    power_w
        Module power, W.
    price_usd
        "Compatible" (validated third-party) planning price, USD.
    price_oem_usd
        NVIDIA/OEM-branded price, USD.
    """

    side: str
    form: str
    protocols: tuple[str, ...]
    port_speeds_gbps: tuple[int, ...]
    module_gbps: int
    reach_m: float
    media: str
    power_w: float
    price_usd: float
    price_oem_usd: float

    def ports_per_module(self, link_gbps: int) -> int:
        """Return the links of ``link_gbps`` one module serves (``module_gbps // link_gbps``).

        Raises
        ------
        InfeasibleDesignError
            If the module cannot run at ``link_gbps``.
        """
        if link_gbps not in self.port_speeds_gbps:
            raise InfeasibleDesignError(
                "fabric.link_gbps",
                f"transceiver {self.key} runs {_speeds_text(self.port_speeds_gbps)} Gb/s "
                f"ports; got {link_gbps}",
            )
        return max(1, self.module_gbps // link_gbps)


@dataclass(frozen=True, kw_only=True)
class Cable(_Entry):
    """One cable type: copper (``dac``, ``acc``, ``lacc``) or the fiber of an optical link.

    Parameters
    ----------
    kind
        ``"dac"`` (passive copper), ``"acc"`` (active copper), ``"lacc"`` (linear active
        copper) or ``"fiber"``.
    port_speeds_gbps
        Link speeds the cable carries, Gb/s.
    lane_gbps
        Electrical lane rate, Gb/s (``None`` for fiber).
    reach_m
        Maximum length, m.
    split
        Plugs at the far end: 1 straight, 2 for a 1:2 splitter.
    links_per_cable
        Logical links one cable carries, count.
    price_usd
        Price per cable, USD.
    power_w
        Power per cable, both ends, W.
    """

    kind: str
    port_speeds_gbps: tuple[int, ...]
    lane_gbps: int | None
    reach_m: float
    split: int
    links_per_cable: int
    price_usd: float
    power_w: float

    @property
    def max_port_gbps(self) -> int:
        """Fastest link speed the cable carries, Gb/s."""
        return self.port_speeds_gbps[-1]

    @property
    def is_copper(self) -> bool:
        """Whether the cable is copper (replaces the transceivers of its link)."""
        return self.kind != "fiber"

    def carries(self, link_gbps: int, length_m: float) -> bool:
        """Return whether the cable carries ``link_gbps`` (Gb/s) over ``length_m`` (m)."""
        return link_gbps in self.port_speeds_gbps and length_m <= self.reach_m


@dataclass(frozen=True, kw_only=True)
class Vendor(_Entry):
    """One fabric family (InfiniBand, Spectrum-X, plain RoCE).

    Parameters
    ----------
    protocol
        ``"infiniband"`` or ``"ethernet"``.
    switch_by_gbps, nic_by_gbps
        Link speed (Gb/s) -> default switch / NIC key; both have the same speeds.
    default_routing
        ``"adaptive"`` or ``"ecmp"``.
    sharp_available
        In-network reduction on the scale-out fabric.
    requires_spectrum_x_nic
        Endpoints must be Spectrum-X SuperNICs.
    lossless
        Whether the fabric runs lossless (PFC / credit flow control) or lossy with packet
        trimming and endpoint retransmission (UEC 1.0, OCP MRC 1.0); a lossy fabric's
        goodput fraction is ``nccl_constants.yaml`` ``net_efficiency_lossy``.
    label, short_label
        Display names on the pages (legends, captions) and in compact labels (pinned
        scenarios); empty = ``name`` (and ``label`` for the short one).
    color
        ``#rrggbb`` of its lines and bars on every page; empty = the next Okabe-Ito colour no
        other vendor takes, in catalog order (:func:`vendor_colors`).
    compared
        Whether the side-by-side vendor comparisons (Cost, Overview, fabric effects) include it.
    switches
        Every switch the family builds with (``fabric.switch = auto`` chooses among them the
        one that needs the fewest tiers, then the lowest capex); empty = the values of
        ``switch_by_gbps``.
    transport
        Its transport and congestion control, a key of ``assets/transports.yaml``
        (``fabric.transport = auto`` takes it): flow control, congestion control and loss
        recovery, which set how an incast runs (``fabric_model.collectives.transport``).

    The vendors of the catalog are the vendor registry: a new vendor is a data entry.
    """

    protocol: str
    switch_by_gbps: FrozenMap[int, str]
    nic_by_gbps: FrozenMap[int, str]
    default_routing: str
    sharp_available: bool
    requires_spectrum_x_nic: bool
    lossless: bool = True
    label: str = ""
    short_label: str = ""
    color: str = ""
    compared: bool = True
    switches: tuple[str, ...] = ()
    transport: str = "ib-credit"

    @property
    def switch_keys(self) -> tuple[str, ...]:
        """The family's switches (``switches``, else the defaults of ``switch_by_gbps``)."""
        return self.switches or tuple(dict.fromkeys(self.switch_by_gbps.values()))

    @property
    def display_label(self) -> str:
        """Return the label pages show (``label``, else ``name``)."""
        return self.label or self.name

    @property
    def display_short_label(self) -> str:
        """Return the compact label (``short_label``, else :attr:`display_label`)."""
        return self.short_label or self.display_label

    @property
    def link_speeds_gbps(self) -> tuple[int, ...]:
        """Link speeds the vendor offers in this catalog, Gb/s, ascending."""
        return tuple(sorted(set(self.switch_by_gbps) & set(self.nic_by_gbps)))


# ---------------------------------------------------------------------------------------------
# The catalog
# ---------------------------------------------------------------------------------------------

_KIND_LABEL: Final[dict[str, str]] = {
    "gpus": "GPU",
    "servers": "server",
    "nics": "NIC",
    "switches": "switch",
    "optics": "optic",
    "cables": "cable",
    "vendors": "vendor",
}


@dataclass(frozen=True, kw_only=True)
class Catalog:
    """The validated hardware catalog (build it with :func:`load_catalog`).

    Parameters
    ----------
    version
        Catalog data version, e.g. ``"2026.11"``.
    path
        File it was read from.
    sources
        Source key (``"S40"``) -> :class:`Source`.
    gpus, servers, nics, switches, optics, cables, vendors
        Entry key -> entry, in file order.
    """

    version: str
    path: str
    sources: FrozenMap[str, Source]
    gpus: FrozenMap[str, Gpu]
    servers: FrozenMap[str, Server]
    nics: FrozenMap[str, Nic]
    switches: FrozenMap[str, Switch]
    optics: FrozenMap[str, Optic]
    cables: FrozenMap[str, Cable]
    vendors: FrozenMap[str, Vendor]

    # --- lookups ------------------------------------------------------------------------

    def section(self, name: str) -> FrozenMap[str, Any]:
        """Return the entries of one section (``"gpus"``, ..., ``"vendors"``) by key.

        Raises
        ------
        UnknownCatalogKeyError
            If ``name`` is not a section.
        """
        if name not in SECTIONS:
            raise UnknownCatalogKeyError("catalog section", name, SECTIONS)
        entries: FrozenMap[str, Any] = getattr(self, name)
        return entries

    def gpu(self, key: str) -> Gpu:
        """Return the GPU ``key``; raise :class:`UnknownCatalogKeyError` listing known keys."""
        return _lookup(self.gpus, "gpus", key)

    def server(self, key: str) -> Server:
        """Return the server ``key``; raise :class:`UnknownCatalogKeyError` if unknown."""
        return _lookup(self.servers, "servers", key)

    def nic(self, key: str) -> Nic:
        """Return the NIC ``key``; raise :class:`UnknownCatalogKeyError` if unknown."""
        return _lookup(self.nics, "nics", key)

    def switch(self, key: str) -> Switch:
        """Return the switch ``key``; raise :class:`UnknownCatalogKeyError` if unknown."""
        return _lookup(self.switches, "switches", key)

    def optic(self, key: str) -> Optic:
        """Return the transceiver ``key``; raise :class:`UnknownCatalogKeyError` if unknown."""
        return _lookup(self.optics, "optics", key)

    def cable(self, key: str) -> Cable:
        """Return the cable ``key``; raise :class:`UnknownCatalogKeyError` if unknown."""
        return _lookup(self.cables, "cables", key)

    def vendor(self, key: str) -> Vendor:
        """Return the vendor ``key``; raise :class:`UnknownCatalogKeyError` if unknown."""
        return _lookup(self.vendors, "vendors", key)

    # --- selection ------------------------------------------------------------------------

    def switch_for(self, vendor: str | Vendor, link_gbps: int) -> Switch:
        """Return the vendor's default switch for links of ``link_gbps``.

        Parameters
        ----------
        vendor
            Vendor key (``"infiniband"``, ``"spectrum-x"``, ``"roce"``) or entry.
        link_gbps
            Link speed, Gb/s.

        Raises
        ------
        UnknownCatalogKeyError
            If the vendor is unknown.
        InfeasibleDesignError
            If the vendor offers no such link speed (key ``fabric.link_gbps``).
        """
        v = self._offered(vendor, link_gbps)
        return self.switch(v.switch_by_gbps[link_gbps])

    def nic_for(self, vendor: str | Vendor, link_gbps: int) -> Nic:
        """Return the vendor's default NIC for links of ``link_gbps``.

        Parameters
        ----------
        vendor
            Vendor key or entry.
        link_gbps
            Link speed, Gb/s.

        Raises
        ------
        UnknownCatalogKeyError
            If the vendor is unknown.
        InfeasibleDesignError
            If the vendor offers no such link speed (key ``fabric.link_gbps``).
        """
        v = self._offered(vendor, link_gbps)
        return self.nic(v.nic_by_gbps[link_gbps])

    def optic_for(
        self,
        side: str,
        link_gbps: int,
        length_m: float,
        *,
        cage_gbps: int | None = None,
        protocol: str | None = None,
        key: str = "fabric.link_gbps",
        form: str | None = None,
    ) -> Optic:
        """Return the cheapest transceiver for one end of an optical link.

        Parameters
        ----------
        side
            ``"switch"`` or ``"nic"``.
        link_gbps
            Link speed, Gb/s.
        length_m
            Link length, m.
        cage_gbps
            Line rate of the switch cage the module plugs into, Gb/s (``Switch.cage_gbps``).
            Pass it on the switch side: at 800G an 800G cage (Spectrum-4, Tomahawk 5) takes
            an 800G module and a 1.6T cage (Quantum-X800, Tomahawk 6) a 1.6T twin-port one.
            ``None`` accepts any module size.
        protocol
            ``"infiniband"`` or ``"ethernet"`` (``Vendor.protocol``); ``None`` accepts both.
        key
            Scenario key named in the error.
        form
            ``"single"`` or ``"twin"`` (a multi-port module: on the NIC side, one NIC port
            broken out into several links, one per plane); ``None`` accepts both.

        Returns
        -------
        Optic
            Among modules of that side that run ``link_gbps``, fit the cage and reach
            ``length_m``, the one with the lowest price per link served
            (``price_usd / ports_per_module``); ties go to the lower power, then the shorter
            reach.

        Raises
        ------
        InfeasibleDesignError
            If no module runs that speed, or none reaches that far (the message names both).
        ValueError
            If ``side`` is not ``"switch"`` or ``"nic"`` or ``length_m`` is negative.
        """
        if side not in ("switch", "nic"):
            raise ValueError(f"side must be 'switch' or 'nic'; got {side!r}")
        if not length_m >= 0:
            raise ValueError(f"length_m must be >= 0; got {length_m!r}")
        at_speed = [
            o
            for o in self.optics.values()
            if o.side == side
            and link_gbps in o.port_speeds_gbps
            and (cage_gbps is None or o.module_gbps == cage_gbps)
            and (protocol is None or protocol in o.protocols)
            and (form is None or o.form == form)
        ]
        cage_text = "" if cage_gbps is None else f" in a {cage_gbps} Gb/s cage"
        if protocol is not None:
            cage_text += f" ({protocol})"
        if not at_speed:
            raise InfeasibleDesignError(
                key,
                f"no {side}-side transceiver in this catalog runs {link_gbps} Gb/s "
                f"links{cage_text}",
            )
        fits = [o for o in at_speed if o.reach_m >= length_m]
        if not fits:
            longest = max(at_speed, key=lambda o: o.reach_m)
            raise InfeasibleDesignError(
                key,
                f"no {side}-side transceiver in this catalog carries {link_gbps} Gb/s over "
                f"{length_m:g} m{cage_text}; the longest reach at that speed is "
                f"{longest.reach_m:g} m ({longest.key})",
            )
        return min(fits, key=lambda o: _per_port(o, link_gbps))

    def cable_for(
        self,
        link_gbps: int,
        length_m: float,
        *,
        split: int | None = None,
        lane_gbps: int | None = None,
    ) -> Cable | None:
        """Return the cheapest copper cable for a link, or ``None`` if the link must be optical.

        Parameters
        ----------
        link_gbps
            Link speed, Gb/s.
        length_m
            Link length, m.
        split
            Only cables with this many far-end plugs (1 straight, 2 for a 1:2 splitter);
            ``None`` accepts both.
        lane_gbps
            Only cables with this electrical lane rate, Gb/s (an OSFP cage has 8 lanes, so
            ``Switch.cage_gbps // 8``); ``None`` accepts any.

        Returns
        -------
        Cable or None
            The copper cable (``dac``, ``acc``, ``lacc``) with the lowest price per link
            (``price_usd / links_per_cable``) that carries ``link_gbps`` over ``length_m``;
            ``None`` when none does (e.g. 20 m, or no passive DAC at 200G/lane).
        """
        fits = [
            c
            for c in self.cables.values()
            if c.is_copper
            and c.carries(link_gbps, length_m)
            and split in (None, c.split)
            and lane_gbps in (None, c.lane_gbps)
        ]
        if not fits:
            return None
        return min(fits, key=lambda c: (c.price_usd / c.links_per_cable, c.reach_m, c.key))

    @property
    def fiber(self) -> Cable:
        """The fiber patch/trunk entry counted once per optical link."""
        return next(c for c in self.cables.values() if c.kind == "fiber")

    # --- provenance ------------------------------------------------------------------------

    def expand_note(self, note: str) -> str:
        """Replace each ``[Sn]`` in a note by ``"title (url)"``."""

        def repl(m: re.Match[str]) -> str:
            src = self.sources[m.group(1)]
            return f"{src.title} ({src.url})"

        return _SOURCE_REF.sub(repl, note)

    def source_note(self, section: str, key: str, field_name: str) -> str:
        """Return the source note of one field with its source keys expanded.

        Parameters
        ----------
        section
            Section name, e.g. ``"switches"``.
        key
            Entry key, e.g. ``"qm9700"``.
        field_name
            Field name, e.g. ``"price_usd"``.

        Returns
        -------
        str
            The note, each ``[Sn]`` replaced by ``"title (url)"``.

        Raises
        ------
        UnknownCatalogKeyError
            If the section, the entry or a note for that field does not exist.
        """
        entry = _lookup(self.section(section), section, key)
        note = entry.sources.get(field_name)
        if note is None:
            raise UnknownCatalogKeyError(
                f"source note of {section}.{key}", field_name, tuple(entry.sources)
            )
        return self.expand_note(note)

    def to_frame(self, section: str) -> pd.DataFrame:
        """Return one section as a table, for the UI's "where the numbers come from" view.

        Parameters
        ----------
        section
            An entry section (``"gpus"``, ..., ``"vendors"``) or ``"sources"``.

        Returns
        -------
        pandas.DataFrame
            One row per entry: ``key``, ``name``, the typed fields (lists joined as text),
            ``remark`` and ``source`` (``"field: note"`` for every noted field, joined by
            ``"; "``). For ``"sources"``: ``key``, ``title``, ``url``, ``date``.
        """
        import pandas as pd  # type: ignore[import-untyped,unused-ignore]

        if section == "sources":
            return pd.DataFrame(
                [
                    {"key": s.key, "title": s.title, "url": s.url, "date": s.date}
                    for s in self.sources.values()
                ],
                columns=["key", "title", "url", "date"],
            )
        rows = []
        for entry in self.section(section).values():
            row: dict[str, Any] = {}
            for f in fields(entry):
                if f.name in ("sources", "remark"):
                    continue
                row[f.name] = _cell(getattr(entry, f.name))
            row["remark"] = entry.remark
            row["source"] = "; ".join(f"{k}: {v}" for k, v in entry.sources.items())
            rows.append(row)
        return pd.DataFrame(rows)

    # --- helpers ---------------------------------------------------------------------------

    def _offered(self, vendor: str | Vendor, link_gbps: int) -> Vendor:
        v = vendor if isinstance(vendor, Vendor) else self.vendor(vendor)
        speeds = v.link_speeds_gbps
        if link_gbps not in speeds:
            raise InfeasibleDesignError(
                "fabric.link_gbps",
                f"{v.key} offers {_speeds_text(speeds)} Gb/s links in this catalog; "
                f"got {link_gbps}",
            )
        return v


def _lookup(entries: Mapping[str, _E], section: str, key: str) -> _E:
    try:
        return entries[key]
    except (KeyError, TypeError):
        raise UnknownCatalogKeyError(_KIND_LABEL[section], key, tuple(entries)) from None


def _per_port(optic: Optic, link_gbps: int) -> tuple[float, float, float, str]:
    """Sort key of :meth:`Catalog.optic_for`: price, then power, per link served; reach; key."""
    n = optic.ports_per_module(link_gbps)
    return (optic.price_usd / n, optic.power_w / n, optic.reach_m, optic.key)


def _speeds_text(speeds: Iterable[int]) -> str:
    return ", ".join(str(s) for s in speeds)


def _cell(value: object) -> object:
    """Flatten tuples and maps to text so a table column holds one type."""
    if isinstance(value, tuple):
        return ", ".join(str(v) for v in value)
    if isinstance(value, FrozenMap):
        return ", ".join(f"{k}: {v}" for k, v in value.items())
    return value


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
}

_COMMON_FIELDS: Final = ("name", "sources", "remark")


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------


def load_catalog(path: str | Path | None = None) -> Catalog:
    """Load and validate a hardware catalog.

    Parameters
    ----------
    path
        YAML file; ``None`` (or the default path) reads the shipped ``assets/catalog.yaml``,
        cached after the first call.

    Returns
    -------
    Catalog
        The validated catalog.

    Raises
    ------
    CatalogError
        If the file cannot be read or breaks a rule; the message names the section, the entry
        and the field.
    """
    if path is None or Path(path).resolve() == DEFAULT_CATALOG_PATH:
        return _load_default()
    return _load(Path(path))


@functools.lru_cache(maxsize=1)
def _load_default() -> Catalog:
    return _load(DEFAULT_CATALOG_PATH)


try:  # libyaml's parser is ~10x faster; the constructors (and so the safety) are the same
    from yaml import CSafeLoader as _SafeLoaderBase
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml import SafeLoader as _SafeLoaderBase  # type: ignore[assignment]


class _StrictLoader(_SafeLoaderBase):
    """Safe YAML loader that rejects duplicate mapping keys (PyYAML keeps the last one)."""


def _construct_unique_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if not isinstance(key, str | int | float | bool | None):
            continue  # construct_mapping reports unhashable keys itself
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_unique_mapping,
)


def _load(path: Path) -> Catalog:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"cannot read catalog {path}: {exc}") from exc
    try:
        doc = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: safe
    except yaml.YAMLError as exc:
        raise CatalogError(f"{path.name}: not valid YAML: {exc}") from exc
    return _build(doc, path)


def _build(doc: object, path: Path) -> Catalog:
    where = path.name
    if not isinstance(doc, dict):
        raise CatalogError(f"{where}: the top level must be a mapping of sections")
    expected = {"version", "sources", *SECTIONS}
    unknown = sorted(str(k) for k in doc if k not in expected)
    if unknown:
        raise CatalogError(f"{where}: unknown top-level section(s) {', '.join(unknown)}")
    missing = sorted(k for k in expected if k not in doc)
    if missing:
        raise CatalogError(f"{where}: missing top-level section(s) {', '.join(missing)}")
    version = doc["version"]
    if not isinstance(version, str) or not version:
        raise CatalogError(f'{where}: version must be a non-empty string, e.g. "2026.11"')

    sources = _parse_sources(doc["sources"], where)
    parsed: dict[str, FrozenMap[str, Any]] = {}
    for section in SECTIONS:
        raw = doc[section]
        if not isinstance(raw, dict) or not raw:
            raise CatalogError(f"{where}: {section} must be a non-empty mapping of key -> entry")
        entries = {}
        for key, entry in raw.items():
            entries[key] = _parse_entry(section, key, entry, sources, where)
        parsed[section] = FrozenMap(entries)

    catalog = Catalog(
        version=version,
        path=str(path),
        sources=sources,
        gpus=parsed["gpus"],
        servers=parsed["servers"],
        nics=parsed["nics"],
        switches=parsed["switches"],
        optics=parsed["optics"],
        cables=parsed["cables"],
        vendors=parsed["vendors"],
    )
    for check in _CROSS_CHECKS:
        check(catalog, where)
    return catalog


def _parse_sources(raw: object, where: str) -> FrozenMap[str, Source]:
    if not isinstance(raw, dict) or not raw:
        raise CatalogError(f"{where}: sources must be a non-empty mapping of key -> source")
    out: dict[str, Source] = {}
    for key, item in raw.items():
        here = f"{where}: sources.{key}"
        if not isinstance(key, str) or not _SOURCE_KEY.match(key):
            raise CatalogError(f"{here}: a source key is S followed by letters/digits, e.g. S40")
        if not isinstance(item, dict):
            raise CatalogError(f"{here}: must be a mapping with title and url")
        extra = sorted(str(k) for k in item if k not in ("title", "url", "date"))
        if extra:
            raise CatalogError(f"{here}: unknown field(s) {', '.join(extra)}")
        title, url, date = item.get("title"), item.get("url"), item.get("date", "")
        if not isinstance(title, str) or not title.strip():
            raise CatalogError(f"{here}.title: missing or not a non-empty string")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise CatalogError(f"{here}.url: missing or not an http(s) URL")
        if not isinstance(date, str):
            raise CatalogError(f"{here}.date: must be a string")
        out[key] = Source(key=key, title=title.strip(), url=url, date=date)
    return FrozenMap(out)


def _parse_entry(
    section: str, key: object, raw: object, sources: Mapping[str, Source], where: str
) -> _Entry:
    here = f"{where}: {section}.{key}"
    if not isinstance(key, str) or not _ENTRY_KEY.match(key):
        raise CatalogError(f"{here}: entry keys are lower-case letters, digits, '_' and '-'")
    if not isinstance(raw, dict):
        raise CatalogError(f"{here}: an entry must be a mapping of field -> value")
    cls, specs = _SCHEMA[section]
    unknown = sorted(str(f) for f in raw if f not in specs and f not in _COMMON_FIELDS)
    if unknown:
        raise CatalogError(f"{here}: unknown field(s) {', '.join(unknown)}")

    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise CatalogError(f"{here}.name: missing or not a non-empty string")
    remark = raw.get("remark", "")
    if not isinstance(remark, str):
        raise CatalogError(f"{here}.remark: must be a string")

    values: dict[str, Any] = {}
    for fname, spec in specs.items():
        if fname not in raw:
            if spec.default is _REQUIRED:
                raise CatalogError(f"{here}.{fname}: required field is missing")
            values[fname] = spec.default
            continue
        values[fname] = _parse_value(raw[fname], spec, f"{here}.{fname}")

    notes = _parse_notes(raw.get("sources"), raw, specs, sources, here)
    return cls(key=key, name=name.strip(), sources=notes, remark=remark.strip(), **values)


def _parse_notes(
    raw: object,
    entry: Mapping[str, object],
    specs: Mapping[str, _FieldSpec],
    sources: Mapping[str, Source],
    here: str,
) -> FrozenMap[str, str]:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise CatalogError(f"{here}.sources: must be a mapping of field -> source note")
    for fname, spec in specs.items():
        if spec.numeric and fname in entry and fname not in raw:
            raise CatalogError(
                f"{here}.{fname}: numeric field has no source note; add "
                f'sources.{fname}: "[Sn] ..." or "estimate: <reasoning>"'
            )
    notes: dict[str, str] = {}
    for fname, note in raw.items():
        if fname not in specs or fname not in entry:
            raise CatalogError(f"{here}.sources.{fname}: note for a field the entry lacks")
        if not isinstance(note, str) or not _NOTE_FORM.match(note.strip()):
            raise CatalogError(
                f'{here}.{fname}: source note must start with source keys like "[S40]" or '
                f'with "estimate: <reasoning>"; got {note!r}'
            )
        for ref in _SOURCE_REF.findall(note):
            if ref not in sources:
                raise CatalogError(
                    f"{here}.{fname}: source note cites [{ref}], which is not in the "
                    f"top-level sources"
                )
        notes[fname] = " ".join(note.split())
    return FrozenMap(notes)


def _parse_value(value: object, spec: _FieldSpec, here: str) -> object:
    if value is None:
        if spec.nullable:
            return None
        raise CatalogError(f"{here}: must not be null")
    kind = spec.kind
    if kind in ("int", "float"):
        return _number(value, spec, here)
    if kind == "bool":
        if not isinstance(value, bool):
            raise CatalogError(f"{here}: must be true or false; got {value!r}")
        return value
    if kind == "str":
        if not isinstance(value, str) or not value.strip():
            raise CatalogError(f"{here}: must be a non-empty string; got {value!r}")
        return value.strip()
    if kind == "choice":
        if value not in spec.choices:
            raise CatalogError(f"{here}: must be one of {', '.join(spec.choices)}; got {value!r}")
        return value
    if kind == "ints":
        if not isinstance(value, list) or not value:
            raise CatalogError(f"{here}: must be a non-empty list of numbers; got {value!r}")
        items = [_number(v, _FieldSpec("int"), f"{here}[{i}]") for i, v in enumerate(value)]
        if any(b <= a for a, b in itertools.pairwise(items)):
            raise CatalogError(f"{here}: must be strictly ascending; got {value!r}")
        return tuple(items)
    if kind == "choices":
        if not isinstance(value, list) or not value or len(set(value)) != len(value):
            raise CatalogError(f"{here}: must be a non-empty list without repeats; got {value!r}")
        for v in value:
            if v not in spec.choices:
                raise CatalogError(f"{here}: items must be in {', '.join(spec.choices)}; got {v!r}")
        return tuple(value)
    if kind == "keys":
        if not isinstance(value, list) or not value or len(set(value)) != len(value):
            raise CatalogError(f"{here}: must be a non-empty list of keys without repeats")
        if not all(isinstance(v, str) and _ENTRY_KEY.match(v) for v in value):
            raise CatalogError(f"{here}: items must be catalog keys; got {value!r}")
        return tuple(value)
    if kind == "speed_map":
        if not isinstance(value, dict) or not value:
            raise CatalogError(f"{here}: must be a non-empty mapping of Gb/s -> key")
        for k, v in value.items():
            _number(k, _FieldSpec("int"), f"{here}[{k!r}]")
            if not isinstance(v, str) or not v:
                raise CatalogError(f"{here}[{k}]: must be a catalog key; got {v!r}")
        return FrozenMap(sorted(value.items()))
    raise AssertionError(f"unhandled field kind {kind}")  # pragma: no cover - schema bug


def _number(value: object, spec: _FieldSpec, here: str) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CatalogError(f"{here}: must be a number; got {value!r}")
    if spec.kind == "int" and not isinstance(value, int):
        raise CatalogError(f"{here}: must be a whole number; got {value!r}")
    if not math.isfinite(value):
        raise CatalogError(f"{here}: must be finite; got {value!r}")
    if value < 0 or (value == 0 and not spec.zero_ok):
        bound = ">= 0" if spec.zero_ok else "> 0"
        raise CatalogError(f"{here}: must be {bound}; got {value!r}")
    return value if spec.kind == "int" else float(value)


# ---------------------------------------------------------------------------------------------
# Cross-entry checks (run after every entry parsed)
# ---------------------------------------------------------------------------------------------


def _check_gpus(cat: Catalog, where: str) -> None:
    for g in cat.gpus.values():
        here = f"{where}: gpus.{g.key}"
        if g.server not in cat.servers:
            raise CatalogError(
                f"{here}.server: {g.server!r} is not a server; known: {', '.join(cat.servers)}"
            )
        low = g.hbm_gb * 1e9 / 2**30  # what the GB figure means in decimal units
        if not low - 0.051 <= g.hbm_gib <= g.hbm_gb:  # HBM stacks are binary-sized
            raise CatalogError(
                f"{here}.hbm_gib: {g.hbm_gib:g} GiB visible to CUDA must lie "
                f"between {low:.1f} and {g.hbm_gb:g} for {g.hbm_gb:g} GB"
            )


def _check_servers(cat: Catalog, where: str) -> None:
    for s in cat.servers.values():
        if s.nvlink_domain % s.gpus_per_server:
            raise CatalogError(
                f"{where}: servers.{s.key}.nvlink_domain: must be a multiple of gpus_per_server"
            )


def _check_nics(cat: Catalog, where: str) -> None:
    for n in cat.nics.values():
        if n.port_gbps != n.speeds_gbps[-1]:
            raise CatalogError(
                f"{where}: nics.{n.key}.port_gbps: must equal the fastest of speeds_gbps"
            )


def _check_switches(cat: Catalog, where: str) -> None:
    for s in cat.switches.values():
        here = f"{where}: switches.{s.key}"
        if s.n_cages * s.cage_gbps != s.capacity_one_way_gbps:
            raise CatalogError(f"{here}.n_cages: n_cages x cage_gbps != capacity_one_way_gbps")
        for speed in s.port_speeds_gbps:
            if s.cage_gbps % speed:
                raise CatalogError(f"{here}.port_speeds_gbps: {speed} does not divide a cage")
        if s.max_ports * s.port_speeds_gbps[0] > s.capacity_one_way_gbps:
            raise CatalogError(f"{here}.max_ports: exceeds the capacity at the lowest speed")
        if (s.cpo_port_w is None) != (s.cpo_port_usd is None) or s.has_cpo != bool(s.cpo_variant):
            raise CatalogError(
                f"{here}.cpo_port_w: a CPO variant needs cpo_port_w, cpo_port_usd and cpo_variant"
            )
        if s.co_packaged_optics and not s.has_cpo:
            raise CatalogError(f"{here}.co_packaged_optics: a CPO-only switch needs cpo_port_w")


def _check_optics(cat: Catalog, where: str) -> None:
    for o in cat.optics.values():
        here = f"{where}: optics.{o.key}"
        for speed in o.port_speeds_gbps:
            if speed > o.module_gbps or o.module_gbps % speed:
                raise CatalogError(f"{here}.port_speeds_gbps: {speed} does not divide a module")
        if o.form == "single" and o.port_speeds_gbps[-1] != o.module_gbps:
            raise CatalogError(f"{here}.module_gbps: a single-port module runs one port")
        if o.form == "twin" and o.module_gbps // o.port_speeds_gbps[0] < 2:
            raise CatalogError(f"{here}.module_gbps: a twin-port module runs >= 2 ports")


def _check_cables(cat: Catalog, where: str) -> None:
    fibers = [c.key for c in cat.cables.values() if c.kind == "fiber"]
    if len(fibers) != 1:
        raise CatalogError(f"{where}: cables: need exactly one entry of kind fiber; got {fibers}")
    for c in cat.cables.values():
        if c.is_copper and c.lane_gbps is None:
            raise CatalogError(f"{where}: cables.{c.key}.lane_gbps: copper needs a lane rate")


def _check_vendors(cat: Catalog, where: str) -> None:
    known = transports()
    for v in cat.vendors.values():
        here = f"{where}: vendors.{v.key}"
        tr = known.get(v.transport)
        if tr is None:
            raise CatalogError(
                f"{here}.transport: {v.transport!r} is not a transport of transports.yaml; "
                f"known: {', '.join(known)}"
            )
        if tr.protocol != v.protocol or tr.lossless != v.lossless:
            raise CatalogError(
                f"{here}.transport: {v.transport} runs {tr.protocol}, "
                f"{'lossless' if tr.lossless else 'lossy'}; the vendor is {v.protocol}, "
                f"{'lossless' if v.lossless else 'lossy'}"
            )
        if v.color and not _HEX_COLOR.fullmatch(v.color):
            raise CatalogError(f'{here}.color: must be "#rrggbb" (hex); got {v.color!r}')
        if set(v.switch_by_gbps) != set(v.nic_by_gbps):
            raise CatalogError(
                f"{here}.nic_by_gbps: must offer the same speeds as switch_by_gbps "
                f"({_speeds_text(v.switch_by_gbps)})"
            )
        for speed, skey in v.switch_by_gbps.items():
            if skey not in cat.switches:
                raise CatalogError(
                    f"{here}.switch_by_gbps: {skey!r} is not a switch; known: "
                    f"{', '.join(cat.switches)}"
                )
            sw = cat.switches[skey]
            if sw.protocol != v.protocol or speed not in sw.port_speeds_gbps:
                raise CatalogError(
                    f"{here}.switch_by_gbps: {skey} does not run {v.protocol} at {speed} Gb/s"
                )
            if v.sharp_available and not sw.sharp:
                raise CatalogError(f"{here}.sharp_available: switch {skey} has no SHARP")
            for side, cage in (("switch", sw.cage_gbps), ("nic", None)):
                try:
                    cat.optic_for(side, speed, 0.0, cage_gbps=cage, protocol=v.protocol)
                except InfeasibleDesignError as exc:
                    raise CatalogError(f"{here}.switch_by_gbps: {speed} Gb/s: {exc}") from None
        for skey in v.switches:
            if skey not in cat.switches or cat.switches[skey].protocol != v.protocol:
                raise CatalogError(
                    f"{here}.switches: {skey!r} is not a {v.protocol} switch of this catalog"
                )
        missing = [k for k in v.switch_by_gbps.values() if v.switches and k not in v.switches]
        if missing:
            raise CatalogError(f"{here}.switches: must list the defaults {', '.join(missing)}")
        for speed, nkey in v.nic_by_gbps.items():
            if nkey not in cat.nics:
                raise CatalogError(
                    f"{here}.nic_by_gbps: {nkey!r} is not a NIC; known: {', '.join(cat.nics)}"
                )
            nic = cat.nics[nkey]
            if v.protocol not in nic.protocols or speed not in nic.speeds_gbps:
                raise CatalogError(
                    f"{here}.nic_by_gbps: {nkey} does not run {v.protocol} at {speed} Gb/s"
                )
            if v.requires_spectrum_x_nic and not nic.spectrum_x_endpoint:
                raise CatalogError(f"{here}.nic_by_gbps: {nkey} is not a Spectrum-X endpoint")


_HEX_COLOR: Final = re.compile(r"#[0-9A-Fa-f]{6}")


def compatibility(cat: Catalog) -> list[dict[str, Any]]:
    """Which NVLink domains, NICs and link speeds each GPU can have (``compat`` verb).

    Per GPU: its default server (GPUs per server), the NVLink domain sizes allowed
    (``cluster.nvlink_domain``: multiples of the server's GPUs up to
    ``Gpu.max_nvlink_domain``), the host link to its NICs, and the NICs with the port
    speeds that host link can feed (``link_gbps / 8 <= min(server host link, NIC host
    link)``, the refusal of :func:`fabric_model.plant.design.resolve_hardware`); ``link_gbps``
    are the speeds of those that some vendor offers. A scenario outside these is refused
    with exit 2, naming the key.
    """
    offered = {g for v in cat.vendors.values() for g in v.link_speeds_gbps}
    rows = []
    for g in cat.gpus.values():
        srv = cat.servers[g.server]
        most = g.max_nvlink_domain or srv.nvlink_domain
        step = srv.gpus_per_server
        nics: dict[str, tuple[int, ...]] = {}
        for n in cat.nics.values():
            feed = min(srv.host_link_GBps, n.host_link_GBps or math.inf)
            ok = tuple(s for s in n.speeds_gbps if s / 8.0 <= feed + 1e-9)
            if ok:
                nics[n.key] = ok
        speeds = sorted({s for ok in nics.values() for s in ok} & offered)
        rows.append(
            {
                "gpu": g.key,
                "announced": g.announced,
                "server": srv.key,
                "gpus_per_server": step,
                "nvlink_domain_max": most,
                "nvlink_domains": (
                    str(most) if most == step else f"{step} to {most} in steps of {step}"
                ),
                "host_link_GBps": srv.host_link_GBps,
                "link_gbps": speeds,
                "nics": {k: list(v) for k, v in nics.items()},
            }
        )
    return rows


def vendor_colors(cat: Catalog, palette: Iterable[str]) -> dict[str, str]:
    """Return one colour per vendor: its ``color``, else the next unused one of ``palette``.

    Vendors without a colour take, in catalog order, the colours of ``palette`` that no
    vendor names (cycling when they run out).

    >>> cols = vendor_colors(load_catalog(), ["#000000"])
    >>> cols["infiniband"]
    '#0072B2'
    """
    named = {v.color.upper() for v in cat.vendors.values() if v.color}
    free = [c for c in palette if c.upper() not in named] or list(palette)
    out, i = {}, 0
    for v in cat.vendors.values():
        if v.color:
            out[v.key] = v.color
        else:
            out[v.key] = free[i % len(free)]
            i += 1
    return out


_CROSS_CHECKS: Final[tuple[Callable[[Catalog, str], None], ...]] = (
    _check_gpus,
    _check_servers,
    _check_nics,
    _check_switches,
    _check_optics,
    _check_cables,
    _check_vendors,
)
