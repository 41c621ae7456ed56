"""NICs, switches, optics and cables (catalog sections ``nics`` to ``cables``)."""

from __future__ import annotations

from dataclasses import dataclass

from fabric_model.catalog.entries import _Entry, _speeds_text
from fabric_model.errors import InfeasibleDesignError

__all__ = ["Cable", "Nic", "OcsSwitch", "Optic", "Switch"]


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

        >>> from fabric_model.catalog import load_catalog
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
    n_fibers
        Fibers the whole module lands on (a duplex-LC module 2 per port, a circulator module
        1 per port, parallel MPO optics 8 per port), count; ``None`` when not given. Through
        an optical circuit switch every fiber takes one OCS port.
    channel_loss_db
        Largest channel insertion loss the module's link budget allows between its two ends
        (fiber, connectors and anything in between, such as an OCS), dB; ``None`` when not
        given: such a module is not offered for OCS links.
    ocs_only
        Offered for links through an optical circuit switch only (a circulator module);
        :meth:`Catalog.optic_for` skips it, so other designs keep their media.
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
    n_fibers: int | None = None
    channel_loss_db: float | None = None
    ocs_only: bool = False

    @property
    def ocs_capable(self) -> bool:
        """Whether the module can run through an OCS: single-mode, at most 2 fibers a port."""
        return (
            self.media == "smf"
            and self.channel_loss_db is not None
            and self.n_fibers is not None
            and self.n_fibers <= 2 * (self.module_gbps // self.port_speeds_gbps[0])
        )

    def fibers_per_link(self, link_gbps: int) -> int:
        """Return the fibers (OCS ports) one link of ``link_gbps`` takes, count.

        ``n_fibers / ports_per_module``: a twin 2 x FR4 module runs two 400G links on a duplex
        pair each (2 fibers per link) or one 800G link on both pairs (4).
        """
        if self.n_fibers is None:
            raise InfeasibleDesignError(
                "ocs.switch", f"transceiver {self.key} has no fiber count in the catalog"
            )
        return max(1, self.n_fibers // self.ports_per_module(link_gbps))

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
class OcsSwitch(_Entry):
    """One optical circuit switch (OCS): a passive, reconfigurable fiber cross-connect.

    Parameters
    ----------
    technology
        ``"mems"`` (tilting micro-mirrors) or ``"piezo"`` (piezo-steered collimators).
    n_ports
        Fiber ports; a circuit joins two of them (light in either direction), count.
    insertion_loss_db
        Largest port-to-port insertion loss, its two connectors included, dB.
    reconfig_ms
        Time to set up a new set of circuits (all ports), ms.
    power_w
        Power of the box (mirror drive, control, monitoring), W.
    price_usd
        Price of the box, USD.
    rack_units
        Height, U.
    in_house
        Built by its operator for its own use (not sold): the price is an estimate of cost.
    """

    technology: str
    n_ports: int
    insertion_loss_db: float
    reconfig_ms: float
    power_w: float
    price_usd: float
    rack_units: int
    in_house: bool = False

    @property
    def port_price_usd(self) -> float:
        """Price per port, USD."""
        return self.price_usd / self.n_ports
