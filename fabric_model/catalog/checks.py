"""Checks across entries, run once at load time (cross references, speeds, vendors' parts)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from fabric_model.catalog.entries import _speeds_text
from fabric_model.catalog.store import Catalog
from fabric_model.errors import CatalogError, InfeasibleDesignError
from fabric_model.transports import transports

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


def _check_ocs(cat: Catalog, where: str) -> None:
    for o in cat.ocs.values():
        if o.n_ports < 2:
            raise CatalogError(f"{where}: ocs.{o.key}.n_ports: a circuit needs two ports")
    for opt in cat.optics.values():
        if (opt.n_fibers is None) != (opt.channel_loss_db is None):
            raise CatalogError(
                f"{where}: optics.{opt.key}.n_fibers: give n_fibers and channel_loss_db together"
            )


_HEX_COLOR: Final = re.compile(r"#[0-9A-Fa-f]{6}")


_CROSS_CHECKS: Final[tuple[Callable[[Catalog, str], None], ...]] = (
    _check_gpus,
    _check_servers,
    _check_nics,
    _check_switches,
    _check_optics,
    _check_cables,
    _check_vendors,
    _check_ocs,
)
