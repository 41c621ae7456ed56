"""One colour per vendor, topology and cost category, the same on every page.

Okabe-Ito palette (Okabe & Ito, "Color Universal Design", 2008): distinguishable with the
common colour-vision deficiencies, and readable on light and dark backgrounds.
"""

from __future__ import annotations

import plotly.io as pio

#: The plotly template of every figure. Set as plotly's default once here rather than per
#: figure: ``update_layout(template=...)`` validates and deep-copies the whole template,
#: 20-50 ms per figure on every rerun, while the default is attached to a new figure as a
#: ready-made dict (the figure's JSON is the same either way).
FIGURE_TEMPLATE = "plotly_white"
pio.templates.default = FIGURE_TEMPLATE

OKABE_ITO = {
    "orange": "#E69F00",
    "sky": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
    "grey": "#999999",
}

VENDOR_COLORS = {
    "infiniband": OKABE_ITO["blue"],
    "spectrum-x": OKABE_ITO["green"],
    "roce": OKABE_ITO["vermillion"],
    "lossy-ethernet": OKABE_ITO["purple"],
}
VENDOR_LABELS = {
    "infiniband": "InfiniBand",
    "spectrum-x": "Spectrum-X",
    "roce": "RoCE (ECMP)",
    "lossy-ethernet": "Lossy spraying Ethernet (UEC/MRC)",
}

TOPOLOGY_COLORS = {
    "fat-tree": OKABE_ITO["blue"],
    "rail-only": OKABE_ITO["orange"],
    "dragonfly-plus": OKABE_ITO["purple"],
    "torus-3d": OKABE_ITO["sky"],
    "hypercube": OKABE_ITO["yellow"],
}
TOPOLOGY_LABELS = {
    "fat-tree": "Fat-tree",
    "rail-only": "Rail-only",
    "dragonfly-plus": "Dragonfly+",
    "torus-3d": "3D torus",
    "hypercube": "Hypercube",
}

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
ALGO_COLORS = {
    "ring": OKABE_ITO["blue"],
    "tree": OKABE_ITO["orange"],
    "nvls": OKABE_ITO["green"],
    "nvls-tree": OKABE_ITO["green"],
    "sharp": OKABE_ITO["purple"],
    "hierarchical": OKABE_ITO["sky"],
    "direct": OKABE_ITO["vermillion"],
}
ALGO_LABELS = {
    "ring": "ring",
    "tree": "tree (double binary)",
    "nvls": "NVLS",
    "nvls-tree": "NVLS-Tree (NVLS in the domain, tree across)",
    "sharp": "SHARP",
    "hierarchical": "hierarchical",
    "direct": "direct",
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
    "dp": "data-parallel comm (exposed)",
    "tp": "tensor-parallel comm (exposed)",
    "pp": "pipeline sends (exposed)",
    "ep": "expert all-to-all (exposed)",
    "cp": "context-parallel comm (exposed)",
}
#: Line dash per vendor where colour already encodes the topology.
VENDOR_DASHES = {
    "infiniband": "solid",
    "spectrum-x": "dash",
    "roce": "dot",
    "lossy-ethernet": "dashdot",
}
