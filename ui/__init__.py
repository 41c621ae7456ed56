"""Dashboard support: theme, pure plotly figure builders, cached facades, sidebar/URL state.

Pure (no streamlit, testable alone, reused by the HTML report and the CLI's ``report``):
``theme``, ``figures``, ``training_figures``, ``compare_figures``, ``exports``, ``report``.
Streamlit-bound: ``state`` (sidebar and URL), ``facade`` (the only caching), ``widgets``
(charts with exports, CSV), ``page_common``, ``whatif`` and ``compare`` (page state and
URL parameters), ``report_button``.
"""
