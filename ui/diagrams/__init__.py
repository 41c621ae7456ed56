"""Topology diagrams a person can read at any scale: one drawing style per topology family.

Every family is drawn from its :class:`~fabric_model.topology.Topology`'s cable graph: each
graph node is assigned to a drawn *unit* (a scalable unit or pod of a fat-tree, a rail of a
rail-only fabric, a dragonfly+ group, a block of torus or hypercube nodes), and the cables
between two units of one link class become one *bundle*: one line, its width and its label
the cable count, its hover the count, media and length. Large designs merge contiguous units
(at most :data:`MAX_UNITS` per row, "x N" on a merged one), so the number of drawn lines and
traces stays bounded whatever the size, and the cables of the bundles always add up to the
topology's cables (of one plane, with ``fabric.planes > 1``: the planes are identical).

Styles (:data:`STYLES`; each family names its style in the family registry,
``fabric_model.families``, and :data:`DIAGRAMS` is the view keyed by family):

- ``fat-tree``: scalable units (2 tiers) or pods (3 tiers) as frames holding their servers,
  leaves (coloured by rail on rail-optimized designs) and, in a pod, its spines; spines
  (2 tiers) or cores (3 tiers) as a row above. NVL72-style domains are racks of trays.
- ``rail-only``: the rails as separate trees side by side, the NVLink domains (racks or
  servers) below joining them.
- ``dragonfly-plus``: groups around a circle, each a compact leaf/spine unit, the global
  links between two groups as one chord.
- ``torus-3d``: the lattice as z slices (x across, y down), wraparound cables as stubs at the
  slice edges, the z cables between consecutive slices as one bundle per slice pair.
- ``hypercube``: sub-cubes aggregated to at most 16 units drawn as a projected 4-cube, one
  colour per dimension.
- ``ocs``: blocks around a circle, their fibers into the OCS tier at the centre, the
  circuits between blocks as dashed chords (counted as circuits, not cables).

Modules: :mod:`~ui.diagrams.base` (units, boxes, bundles, media hover text), one per family
style (:mod:`~ui.diagrams.fat_tree`, ``rail_only``, ``dragonfly_plus``, ``torus``,
``hypercube``, ``ocs``), :mod:`~ui.diagrams.styles` (the styles by family, and the hybrid
drawn from its partitions' styles) and :mod:`~ui.diagrams.figure` (the plotly figure). A
new family's style is one module here and one entry in ``styles.STYLES``.

The media and lengths come from the bill of materials (:func:`cable_info`, which calls the
BOM's own :func:`fabric_model.plant.cost.link_media` on the BOM's link classes).
"""

from ui.diagrams.base import MAX_UNITS, Bundle, CableInfo, Sketch, cable_info
from ui.diagrams.figure import topology_diagram
from ui.diagrams.styles import DIAGRAMS, STYLES, diagram_bundles, sketch

__all__ = [
    "DIAGRAMS",
    "MAX_UNITS",
    "STYLES",
    "Bundle",
    "CableInfo",
    "Sketch",
    "cable_info",
    "diagram_bundles",
    "sketch",
    "topology_diagram",
]
