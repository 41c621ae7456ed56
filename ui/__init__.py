"""Dashboard support: theme, pure plotly figure builders, cached facades, sidebar/URL state.

Figures are pure functions of model results (testable without streamlit); only
``ui.state`` and ``ui.facade`` import streamlit.
"""
