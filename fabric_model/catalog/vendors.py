"""Fabric vendors (catalog section ``vendors``): the parts each uses per link speed."""

from __future__ import annotations

from dataclasses import dataclass

from fabric_model.catalog.entries import FrozenMap, _Entry

__all__ = ["Vendor"]


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
