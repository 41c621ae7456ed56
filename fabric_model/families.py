"""The registry of topology families: one :class:`Family` entry per ``fabric.topology`` value.

Everything that varies by family and is not the family's own code lives here: its label and
colour on every page, the builder and router it runs (named ``"module:function"`` and
imported on first use, so the scenario layer and the CLI's ``presets`` and ``keys`` read the
registry without numpy), the routing policies its router understands, whether it is built in
planes, solved by flow classes or by symmetry, whether it is switchless, the drawing style of
its diagram and the scenario keys that apply to it. The pages, the CLI's choices, ``keys``,
the report and the tests that iterate families read this table; the old per-module tables
(``topology.BUILDERS``, ``routing.POLICIES``, ``topology.PLANE_FAMILIES``, ``design.SWITCHLESS``,
``ui.theme.TOPOLOGY_LABELS`` ...) are views of it.

A new family is its module(s) (``topology/<family>.py``, ``routing/<family>.py``) plus one
entry in :data:`FAMILIES`.

>>> FAMILIES["fat-tree"].label
'Fat-tree'
>>> [f.name for f in FAMILIES.values() if f.plane_capable]
['fat-tree', 'rail-only']
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from fabric_model.errors import ScenarioError

if TYPE_CHECKING:  # the builders and routers import numpy: resolved on first use only
    from fabric_model.routing.base import Router
    from fabric_model.topology.base import Topology, TopologyRequest

__all__ = [
    "FAMILIES",
    "FAMILY_KEYS",
    "OKABE_ITO",
    "Family",
    "FamilyView",
    "family",
    "family_label",
    "family_names",
    "resolve",
]

#: The Okabe-Ito palette (Okabe & Ito, "Color Universal Design", 2008), as plain data so the
#: model's registries can carry a colour without importing plotly; ``ui.theme`` re-exports it.
OKABE_ITO = {
    "orange": "#E69F00",
    "sky": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
    "grey": "#999999",
    "black": "#000000",
}


@cache
def resolve(ref: str) -> Any:
    """Import ``"package.module:attribute"`` and return the attribute (cached)."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True)
class Family:
    """One topology family: what the model, the pages and the CLI need to know of it.

    Attributes
    ----------
    name : str
        The ``fabric.topology`` value (and ``Topology.family``).
    label : str
        Display name on every page, the report and the diagram titles.
    builder_ref, router_ref : str
        ``"module:function"`` of the builder (``TopologyRequest -> Topology``) and of the
        router (the :class:`~fabric_model.routing.base.Router` interface).
    policies : tuple[str, ...]
        ``fabric.routing`` values its router understands (``auto`` resolves to the vendor's
        default first); the first is not a default, the vendor's is.
    plane_capable : bool
        Built as ``fabric.planes`` independent planes (:mod:`fabric_model.topology.planes`);
        the others take ``fabric.planes = 1`` only.
    switchless : bool
        Direct-connect (NIC to NIC, no switches): torus and hypercube; their collectives run
        on neighbour links (:mod:`fabric_model.collectives.switchless`).
    class_solve : bool
        Adaptive routes depend only on the two ends' first-hop switches, so patterns solve
        by flow classes (``FabricContext.solve_classes``).
    symmetry : bool
        :mod:`fabric_model.collectives.symmetry` has an orbit solve for it.
    color : str
        Hex colour (Okabe-Ito), the same on every page.
    marker : str
        Plotly marker symbol where colour encodes the vendor (Explore).
    diagram : str
        Drawing style of ``ui.diagrams`` (a family may reuse another's).
    keys : tuple[str, ...]
        Scenario keys that apply to this family only among the family-specific ones
        (:data:`FAMILY_KEYS`); the others are ignored by its builder.
    floor_row_tiers : tuple[str, ...]
        Switch tiers placed in the rows with the servers on the floor plan.
    """

    name: str
    label: str
    builder_ref: str
    router_ref: str
    policies: tuple[str, ...]
    plane_capable: bool = False
    switchless: bool = False
    class_solve: bool = False
    symmetry: bool = False
    color: str = OKABE_ITO["grey"]
    marker: str = "circle"
    diagram: str = ""
    keys: tuple[str, ...] = ()
    floor_row_tiers: tuple[str, ...] = ("leaf",)

    @property
    def builder(self) -> Callable[[TopologyRequest], Topology]:
        """Return the builder function (imported on first use)."""
        return resolve(self.builder_ref)  # type: ignore[no-any-return]

    @property
    def router(self) -> Router:
        """Return the router function (imported on first use)."""
        return resolve(self.router_ref)  # type: ignore[no-any-return]


#: Scenario keys some families read and others ignore (``Family.keys`` picks among them).
FAMILY_KEYS = (
    "fabric.tiers",
    "fabric.oversubscription",
    "fabric.spine_oversubscription",
    "fabric.rail_optimized",
)

_TREE_KEYS = ("fabric.tiers", "fabric.oversubscription", "fabric.spine_oversubscription")

#: Every topology family, in the order pages and choices list them.
FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "fat-tree",
            "Fat-tree",
            "fabric_model.topology.fat_tree:build_fat_tree",
            "fabric_model.routing.fat_tree:route_fat_tree",
            ("adaptive", "ecmp", "dmodk"),
            plane_capable=True,
            class_solve=True,
            symmetry=True,
            color=OKABE_ITO["blue"],
            marker="circle",
            diagram="fat-tree",
            keys=(*_TREE_KEYS, "fabric.rail_optimized"),
        ),
        Family(
            "rail-only",
            "Rail-only",
            "fabric_model.topology.rail_only:build_rail_only",
            "fabric_model.routing.rail_only:route_rail_only",
            ("adaptive", "ecmp", "dmodk"),
            plane_capable=True,
            class_solve=True,
            symmetry=True,
            color=OKABE_ITO["orange"],
            marker="square",
            diagram="rail-only",
            keys=_TREE_KEYS,
        ),
        Family(
            "dragonfly-plus",
            "Dragonfly+",
            "fabric_model.topology.dragonfly_plus:build_dragonfly_plus",
            "fabric_model.routing.dragonfly_plus:route_dragonfly_plus",
            ("minimal", "valiant", "ugal", "adaptive", "ecmp"),
            class_solve=True,
            symmetry=True,
            color=OKABE_ITO["purple"],
            marker="diamond",
            diagram="dragonfly-plus",
            keys=("fabric.oversubscription", "fabric.rail_optimized"),
            floor_row_tiers=("leaf", "spine"),
        ),
        Family(
            "torus-3d",
            "3D torus",
            "fabric_model.topology.torus3d:build_torus3d",
            "fabric_model.routing.torus3d:route_torus3d",
            ("dor", "adaptive", "ecmp"),
            switchless=True,
            symmetry=True,
            color=OKABE_ITO["sky"],
            marker="triangle-up",
            diagram="torus-3d",
        ),
        Family(
            "hypercube",
            "Hypercube",
            "fabric_model.topology.hypercube:build_hypercube",
            "fabric_model.routing.hypercube:route_hypercube",
            ("dor", "adaptive", "ecmp"),
            switchless=True,
            symmetry=True,
            color=OKABE_ITO["yellow"],
            marker="x",
            diagram="hypercube",
        ),
        Family(
            "ocs",
            "OCS (optical circuit switches)",
            "fabric_model.topology.ocs:build_ocs",
            "fabric_model.routing.ocs:route_ocs",
            ("adaptive", "ecmp"),
            color=OKABE_ITO["green"],
            marker="hexagon",
            diagram="ocs",
            floor_row_tiers=("leaf", "spine"),
        ),
        Family(
            "hybrid",
            "Hybrid (two partitions, shared core)",
            "fabric_model.topology.hybrid:build_hybrid",
            "fabric_model.routing.hybrid:route_hybrid",
            ("adaptive", "ecmp"),
            color=OKABE_ITO["vermillion"],
            marker="star",
            diagram="hybrid",
            floor_row_tiers=("A leaf", "B leaf"),
        ),
    )
}


def family(name: str) -> Family:
    """Return the registry entry of ``name``.

    Raises
    ------
    ScenarioError
        On ``fabric.topology``, naming the families there are.
    """
    got = FAMILIES.get(name)
    if got is None:
        raise ScenarioError("fabric.topology", name, "one of " + ", ".join(FAMILIES))
    return got


def family_label(name: str) -> str:
    """Return the display label of ``name`` (the name itself for one not registered)."""
    got = FAMILIES.get(name)
    return got.label if got is not None else name


class FamilyView(Mapping[str, Any]):
    """A read-only ``{family: value}`` view of one attribute of the registered families.

    ``where`` keeps only the families it accepts. Values are read on access, so a view of
    the builders or routers imports a family's module only when that family is used.
    Derived tables (``topology.BUILDERS``, ``routing.POLICIES``) are such views.
    """

    def __init__(self, attribute: str, where: Callable[[Family], bool] | None = None) -> None:
        self._attribute = attribute
        self._where = where

    def _names(self) -> list[str]:
        return [n for n, f in FAMILIES.items() if self._where is None or self._where(f)]

    def __getitem__(self, name: str) -> Any:
        got = FAMILIES.get(name)
        if got is None or (self._where is not None and not self._where(got)):
            raise KeyError(name)
        return getattr(got, self._attribute)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def __repr__(self) -> str:
        return f"FamilyView({self._attribute!r}: {', '.join(self._names())})"


def family_names(where: Callable[[Family], bool]) -> tuple[str, ...]:
    """Return the registered families ``where`` accepts, in registry order."""
    return tuple(n for n, f in FAMILIES.items() if where(f))
