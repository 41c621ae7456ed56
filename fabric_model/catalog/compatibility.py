"""What the catalog allows together (the ``compat`` verb) and vendor colours."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from fabric_model.catalog.store import Catalog

__all__ = ["compatibility", "vendor_colors"]


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

    >>> from fabric_model.catalog import load_catalog
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
