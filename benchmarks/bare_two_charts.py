"""The floor a first visit cannot go below: a bare Streamlit page with two plotly charts.

``page_speed.py --browser`` times this page's first render in a fresh browser beside the
dashboard's default Overview, on the same machine in the same run. It has what every page of
the dashboard has at its least: a title, a sidebar with one slider, a caption and two plotly
charts (a horizontal stacked bar and a log-log line chart of 30 points, the Overview's two
chart kinds), and nothing of the model.
"""

import plotly.graph_objects as go
import streamlit as st

st.set_page_config(page_title="Bare two charts", layout="wide")
n = st.sidebar.select_slider("GPUs", options=[2**i for i in range(3, 18)], value=1024)
st.title("Overview")
st.caption(f"{n:,} GPUs: the floor of a first render")
bar = go.Figure(
    [
        go.Bar(y=["step"], x=[x], name=name, orientation="h")
        for name, x in (("compute", 10.0), ("bubble", 1.5), ("exposed", 0.8))
    ]
)
bar.update_layout(barmode="stack", height=220, title="Where the step goes")
st.plotly_chart(bar, width="stretch")
sizes = [2.0**k for k in range(3, 33)]
line = go.Figure([go.Scatter(x=sizes, y=[min(400.0, s / 1e6) for s in sizes], name="busbw")])
line.update_layout(xaxis_type="log", yaxis_type="log", height=420, title="All-reduce busbw")
st.plotly_chart(line, width="stretch")
