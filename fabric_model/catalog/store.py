"""The validated catalog (:class:`Catalog`): lookups by key, part selection, sources, tables."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Final, TypeVar

from fabric_model.catalog.compute import Gpu, Server
from fabric_model.catalog.entries import (
    _SOURCE_REF,
    SECTIONS,
    FrozenMap,
    Source,
    _Entry,
    _speeds_text,
)
from fabric_model.catalog.network import Cable, Nic, OcsSwitch, Optic, Switch
from fabric_model.catalog.vendors import Vendor
from fabric_model.errors import InfeasibleDesignError, UnknownCatalogKeyError

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped,unused-ignore]

__all__ = ["Catalog"]


_E = TypeVar("_E", bound="_Entry")


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
    "ocs": "optical circuit switch",
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
    gpus, servers, nics, switches, optics, cables, vendors, ocs
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
    ocs: FrozenMap[str, OcsSwitch]

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

    def ocs_switch(self, key: str) -> OcsSwitch:
        """Return the optical circuit switch ``key``; raise if unknown."""
        return _lookup(self.ocs, "ocs", key)

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
            and not o.ocs_only
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

    def ocs_optic_for(
        self,
        side: str,
        link_gbps: int,
        length_m: float,
        loss_db: float,
        *,
        cage_gbps: int | None = None,
        protocol: str | None = None,
        port_usd: float = 0.0,
        loss_text: str = "",
    ) -> Optic:
        """Return the cheapest transceiver that closes a link through an optical circuit switch.

        Parameters
        ----------
        side, link_gbps, cage_gbps, protocol
            As :meth:`optic_for`.
        length_m
            Fiber from one end to the other, through the OCS, m.
        loss_db
            The channel's insertion loss: the OCS, the fiber and the connectors, dB.
        port_usd
            Price of one OCS port, USD: a module with more fibers per link takes more ports,
            so the choice minimises ``module price per link + fibers per link x port_usd``.
        loss_text
            How ``loss_db`` is made up, for the refusal.

        Returns
        -------
        Optic
            Among single-mode modules with a channel loss budget (:attr:`Optic.ocs_capable`)
            of that side and speed that reach ``length_m``, the cheapest whose
            ``channel_loss_db >= loss_db``.

        Raises
        ------
        InfeasibleDesignError
            On ``fabric.link_gbps`` when no OCS-capable module runs the speed; on
            ``ocs.switch`` when none closes the budget through this OCS's insertion loss
            (naming the loss and the best budget).
        """
        at_speed = [
            o
            for o in self.optics.values()
            if o.side == side
            and o.ocs_capable
            and link_gbps in o.port_speeds_gbps
            and (cage_gbps is None or o.module_gbps == cage_gbps)
            and (protocol is None or protocol in o.protocols)
        ]
        cage_text = "" if cage_gbps is None else f" in a {cage_gbps} Gb/s cage"
        if not at_speed:
            speeds = sorted(
                {
                    s
                    for o in self.optics.values()
                    if o.side == side and o.ocs_capable
                    for s in o.port_speeds_gbps
                    if cage_gbps is None or o.module_gbps == cage_gbps
                }
            )
            raise InfeasibleDesignError(
                "fabric.link_gbps",
                f"no {side}-side transceiver in this catalog runs {link_gbps} Gb/s through an "
                f"optical circuit switch{cage_text} (single-mode, duplex or circulator fiber); "
                f"allowed: {_speeds_text(speeds) or 'none'} Gb/s",
            )
        fits = [o for o in at_speed if o.reach_m >= length_m]
        if not fits:
            longest = max(at_speed, key=lambda o: o.reach_m)
            raise InfeasibleDesignError(
                "fabric.direct_link_m",
                f"no OCS-capable {side}-side transceiver carries {link_gbps} Gb/s over "
                f"{length_m:g} m; the longest reach is {longest.reach_m:g} m ({longest.key})",
            )
        closes = [o for o in fits if float(o.channel_loss_db or 0.0) >= loss_db - 1e-9]
        if not closes:
            best = max(fits, key=lambda o: float(o.channel_loss_db or 0.0))
            raise InfeasibleDesignError(
                "ocs.switch",
                f"the link budget does not close: the channel through the OCS loses "
                f"{loss_db:.2f} dB{loss_text}, and the best {link_gbps} Gb/s {side}-side "
                f"transceiver ({best.key}) allows {best.channel_loss_db:g} dB; choose an OCS "
                f"with a lower insertion loss or shorter runs",
            )

        def cost(o: Optic) -> tuple[float, float, str]:
            per = o.ports_per_module(link_gbps)
            return (
                o.price_usd / per + o.fibers_per_link(link_gbps) * port_usd,
                o.power_w / per,
                o.key,
            )

        return min(closes, key=cost)

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


def _cell(value: object) -> object:
    """Flatten tuples and maps to text so a table column holds one type."""
    if isinstance(value, tuple):
        return ", ".join(str(v) for v in value)
    if isinstance(value, FrozenMap):
        return ", ".join(f"{k}: {v}" for k, v in value.items())
    return value
