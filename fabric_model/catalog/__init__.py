"""Hardware catalog: typed, validated access to ``assets/catalog.yaml``.

The data file lists GPUs, servers, NICs, switches, optics, cables, fabric vendors and optical
circuit switches, with a source note on every number. This package turns it into frozen
dataclasses and answers the questions the topology and cost layers ask: which switch and NIC a
vendor uses at a link speed, how many ports a switch has at that speed, which transceiver or
copper cable serves a link of a given length (or through an optical circuit switch).

Validation is strict and happens once, at load time: unknown or missing fields, wrong types,
non-positive numbers, a numeric field without a source note, a note citing an unknown source
key, or a cross reference to a missing entry all raise :class:`~fabric_model.errors.CatalogError`
naming the section, the entry and the field.

Where things live (import every name from ``fabric_model.catalog``): ``entries``
(:class:`FrozenMap`, :class:`Source`, the entry base class), ``compute`` (GPUs, servers),
``network`` (NICs, switches, optics, cables), ``vendors``, ``store`` (:class:`Catalog`: lookups
and part selection), ``schema`` (the field table), ``load`` (:func:`load_catalog`: the strict
reader and the source-note rules), ``checks`` (checks across entries) and ``compatibility``
(the ``compat`` table, vendor colours). A new kind of part is a dataclass in the module of
its kind, its fields in ``schema``, its checks in ``checks``, its section in ``SECTIONS`` and
its field of :class:`Catalog`.

Examples
--------
>>> cat = load_catalog()
>>> cat.switch("qm9700").radix(400)
64
>>> cat.switch_for("spectrum-x", 400).radix(400)
128
"""

from __future__ import annotations

from fabric_model.catalog.compatibility import compatibility, vendor_colors
from fabric_model.catalog.compute import Gpu, Server
from fabric_model.catalog.entries import SECTIONS, FrozenMap, Source
from fabric_model.catalog.load import DEFAULT_CATALOG_PATH, load_catalog
from fabric_model.catalog.network import Cable, Nic, OcsSwitch, Optic, Switch
from fabric_model.catalog.store import Catalog
from fabric_model.catalog.vendors import Vendor

__all__ = [
    "DEFAULT_CATALOG_PATH",
    "SECTIONS",
    "Cable",
    "Catalog",
    "FrozenMap",
    "Gpu",
    "Nic",
    "OcsSwitch",
    "Optic",
    "Server",
    "Source",
    "Switch",
    "Vendor",
    "compatibility",
    "load_catalog",
    "vendor_colors",
]
