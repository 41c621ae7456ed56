"""fabric_model: flow-level model of GPU-cluster network fabrics for LLM training.

Never imports streamlit or plotly; the dashboard sits on top of it.
"""

from __future__ import annotations

__version__ = "0.1.0"
