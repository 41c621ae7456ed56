"""Fabric what-if dashboard: routing and the shared sidebar; the pages draw.

Run with ``streamlit run app.py``.
"""

from __future__ import annotations

import streamlit as st

from fabric_model import kernels

# a long-running server loads the model's numba kernels once, at its first run, so no
# user's first large fabric waits for the compiler (the command line loads them lazily)
kernels.preload()

st.set_page_config(page_title="Fabric what-if", page_icon="assets/icon.svg", layout="wide")

pages = [
    st.Page("pages/overview.py", title="Overview", default=True),
    st.Page("pages/topology.py", title="Topology", url_path="topology"),
    st.Page("pages/collectives.py", title="Collectives", url_path="collectives"),
    st.Page("pages/scaling.py", title="Scaling", url_path="scaling"),
    st.Page("pages/moe.py", title="MoE", url_path="moe"),
    st.Page("pages/whatif.py", title="What-if", url_path="whatif"),
    st.Page("pages/compare.py", title="Compare", url_path="compare"),
    st.Page("pages/explore.py", title="Explore", url_path="explore"),
    st.Page("pages/cluster.py", title="Cluster", url_path="cluster"),
    st.Page("pages/cost.py", title="Cost", url_path="cost"),
    st.Page("pages/validate.py", title="Validate", url_path="validate"),
]
# Each page draws the shared sidebar itself (ui.page_common.current_scenario), so the
# scenario is rebuilt on every rerun of the page, in the browser and in AppTest alike.
st.navigation(pages).run()
