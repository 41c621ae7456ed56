"""What every figure builder shares: the house layout, colours with alpha, message-size labels.

Pure helpers (no streamlit); the subject modules (``ui.topology_figures``,
``ui.cost_figures``, ``ui.collective_figures``, ``ui.validation_figures``) build on them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from ui.theme import BASE_LAYOUT

__all__ = [
    "figure_layout",
    "rgba",
    "size_label",
    "size_ticks",
]


def figure_layout(fig: go.Figure, title: str, **kw: Any) -> go.Figure:
    """Apply the house layout and a left-aligned title to ``fig``; return it."""
    fig.update_layout(**BASE_LAYOUT, title={"text": title, "x": 0.0, "xanchor": "left"}, **kw)
    return fig


_BINARY_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def size_label(n_bytes: int) -> str:
    """Format a message size with a binary suffix: ``8 B``, ``1 KiB``, ``16 GiB``."""
    for unit, mult in _BINARY_UNITS:
        if n_bytes >= mult:
            value = n_bytes / mult
            return f"{value:g} {unit}" if value == int(value) else f"{value:.3g} {unit}"
    return f"{n_bytes:g} B"


def rgba(hex_color: str, alpha: float) -> str:
    """Return ``#rrggbb`` as a CSS ``rgba(...)`` colour with opacity ``alpha``."""
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def size_ticks(sizes: Sequence[int], max_ticks: int = 12) -> dict[str, Any]:
    """Tick values at powers of two spanning ``sizes``, labelled with binary suffixes."""
    positive = [s for s in sizes if s > 0] or [1]
    lo = math.floor(math.log2(min(positive)))
    hi = math.ceil(math.log2(max(positive)))
    step = max(1, math.ceil((hi - lo + 1) / max_ticks))
    vals = [2**i for i in range(lo, hi + 1, step)]
    return {"tickvals": vals, "ticktext": [size_label(v) for v in vals]}
