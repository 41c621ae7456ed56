"""One colour per vendor, topology and cost category, the same on every page.

The vendor, topology and algorithm tables are views of the registries (the catalog's
vendors, ``fabric_model.families``, ``fabric_model.collectives.registry``); look a name up
with :func:`vendor_label` / :func:`topology_label` (or ``.get``) so an unregistered one shows
as itself instead of raising.

Okabe-Ito palette (Okabe & Ito, "Color Universal Design", 2008): distinguishable with the
common colour-vision deficiencies, and readable on light and dark backgrounds.
"""

from __future__ import annotations

import plotly.io as pio

from fabric_model.catalog import Catalog, load_catalog, vendor_colors
from fabric_model.collectives.registry import ALGORITHMS
from fabric_model.families import FAMILIES, OKABE_ITO

#: The plotly template of every figure. Set as plotly's default once here rather than per
#: figure: ``update_layout(template=...)`` validates and deep-copies the whole template,
#: 20-50 ms per figure on every rerun, while the default is attached to a new figure as a
#: ready-made dict (the figure's JSON is the same either way).
FIGURE_TEMPLATE = "plotly_white"
pio.templates.default = FIGURE_TEMPLATE

#: Line dashes given to the vendors in catalog order (where colour encodes the topology).
_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


def vendor_styles(catalog: Catalog) -> dict[str, dict[str, str]]:
    """Return per vendor of ``catalog`` its ``label``, ``short_label``, ``color`` and ``dash``.

    The catalog's vendors are the vendor registry: labels are their data (else their
    name), a vendor without a ``color`` takes the next Okabe-Ito colour no other vendor
    names, dashes go in catalog order.
    """
    colors = vendor_colors(catalog, OKABE_ITO.values())
    return {
        k: {
            "label": v.display_label,
            "short_label": v.display_short_label,
            "color": colors[k],
            "dash": _DASHES[i % len(_DASHES)],
        }
        for i, (k, v) in enumerate(catalog.vendors.items())
    }


_VENDOR_STYLES = vendor_styles(load_catalog())
#: Views of the vendor registry (the shipped catalog's ``vendors``, ``assets/catalog.yaml``).
VENDOR_COLORS = {k: s["color"] for k, s in _VENDOR_STYLES.items()}
VENDOR_LABELS = {k: s["label"] for k, s in _VENDOR_STYLES.items()}
#: Compact vendor labels (pinned scenarios' default names).
VENDOR_SHORT_LABELS = {k: s["short_label"] for k, s in _VENDOR_STYLES.items()}

#: Views of the family registry (``fabric_model.families``): label and colour per family.
TOPOLOGY_COLORS = {n: f.color for n, f in FAMILIES.items()}
TOPOLOGY_LABELS = {n: f.label for n, f in FAMILIES.items()}

CATEGORY_COLORS = {
    "switches": OKABE_ITO["blue"],
    "nics": OKABE_ITO["orange"],
    "optics": OKABE_ITO["green"],
    "cables": OKABE_ITO["grey"],
}

TIER_COLORS = {
    "servers": OKABE_ITO["grey"],
    "leaf": OKABE_ITO["sky"],
    "spine": OKABE_ITO["blue"],
    "core": OKABE_ITO["purple"],
    "node": OKABE_ITO["orange"],
}

#: Layout shared by every figure (with :data:`FIGURE_TEMPLATE`): transparent background so
#: Streamlit's light and dark themes both show through, a readable font and room for titles.
BASE_LAYOUT = {
    "paper_bgcolor": "rgba(0,0,0,0)",
    "font": {"size": 14},
    "margin": {"l": 60, "r": 20, "t": 60, "b": 50},
    "hoverlabel": {"font_size": 13},
}

#: One colour per collective algorithm (the Collectives page's lines, bars and table).
#: (Views of the algorithm registry, ``fabric_model.collectives.registry``; an alias such as
#: ``nvls-tree`` takes its algorithm's colour.)
ALGO_COLORS = {name: a.color for a in ALGORITHMS.values() for name in (a.name, *dict(a.aliases))}
ALGO_LABELS = {
    **{name: label for a in ALGORITHMS.values() for name, label in ((a.name, a.label), *a.aliases)},
    "auto": "auto (NCCL-like choice)",
}
#: ``auto`` is drawn as a wide neutral halo under the algorithm it picks, so it reads on
#: light and dark themes and its markers can take the chosen algorithm's colour.
AUTO_HALO_COLOR = "rgba(120,120,120,0.35)"
OP_LABELS = {
    "allreduce": "all-reduce",
    "allgather": "all-gather",
    "reducescatter": "reduce-scatter",
    "alltoall": "all-to-all",
}

#: Step-time terms (Scaling, MoE and Overview breakdowns): compute in neutral tones,
#: each communication dimension in its own colour.
STEP_TERM_COLORS = {
    "compute": "#7f7f7f",
    "imbalance": OKABE_ITO["yellow"],
    "bubble": "#bdbdbd",
    "optimizer": "#5a5a5a",
    "offload": OKABE_ITO["sky"],
    "stall": "#000000",
    "dp": OKABE_ITO["blue"],
    "tp": OKABE_ITO["green"],
    "pp": OKABE_ITO["orange"],
    "ep": OKABE_ITO["vermillion"],
    "cp": OKABE_ITO["purple"],
}
STEP_TERM_LABELS = {
    "compute": "compute",
    "imbalance": "MoE load imbalance",
    "bubble": "pipeline bubble",
    "optimizer": "optimizer step",
    "offload": "activation offload (exposed)",
    "stall": "flapping-link stall",
    "dp": "data-parallel comm (exposed)",
    "tp": "tensor-parallel comm (exposed)",
    "pp": "pipeline sends (exposed)",
    "ep": "expert all-to-all (exposed)",
    "cp": "context-parallel comm (exposed)",
}
#: Fill pattern per term where two neutral tones would read alike: the optimizer step is
#: hatched so it never passes for compute beside it (plotly bar ``marker.pattern.shape``).
STEP_TERM_PATTERNS = {"optimizer": "/", "stall": "x"}
#: Line dash per vendor where colour already encodes the topology (catalog order).
VENDOR_DASHES = {k: s["dash"] for k, s in _VENDOR_STYLES.items()}


def vendor_label(key: str) -> str:
    """Return the display label of vendor ``key`` (``key`` itself for one not in the catalog)."""
    return VENDOR_LABELS.get(key, key)


def topology_label(family: str) -> str:
    """Return the display label of topology ``family`` (itself for one not registered)."""
    return TOPOLOGY_LABELS.get(family, family)


def tiers_label(tiers: int, switches_by_tier: dict[str, int]) -> str:
    """Return the switch tiers as a page shows them: electrical tiers, then an optical one.

    An OCS design counts its electrical tiers (0 for NVLink blocks, 2 for fat-tree pods) and
    its optical circuit switches apart: ``"OCS only"``, ``"2 + OCS"``; a design with no
    switch at all (torus, hypercube) is ``"switchless"``.
    """
    if switches_by_tier.get("ocs"):
        return f"{tiers} + OCS" if tiers else "OCS only"
    return str(tiers) if tiers else "switchless"


def sentence_start(message: str) -> str:
    """Return ``message`` with a capital first letter, unless it opens with a scenario key.

    A key is spelt as the scenario spells it, so a user can search for it:

    >>> sentence_start("memory is within the estimate's error")
    "Memory is within the estimate's error"
    >>> sentence_start("training.global_batch_tokens = 3 is not a multiple")
    'training.global_batch_tokens = 3 is not a multiple'
    """
    first = message.split(" ", 1)[0]
    if not message or "." in first.rstrip(".:,;"):
        return message
    return message[0].upper() + message[1:]
