"""The load test's protocol client (``benchmarks/protocol_client.py``) against a live server.

It plays the browser's part of Streamlit's websocket protocol: a first run of the default
page draws the sidebar with the GPUs slider, and a rerun with the slider's new value is a
slider move (the page writes it into its URL, as in a browser).
"""

from __future__ import annotations

import asyncio
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from protocol_client import ProtocolSession

pytestmark = pytest.mark.e2e


def test_a_protocol_session_opens_the_page_and_moves_the_slider(streamlit_server: str) -> None:
    async def go() -> tuple[object, object, str]:
        s = ProtocolSession(streamlit_server, "/")
        await s.connect()
        try:
            first = await s.rerun(timeout_s=300)
            gpus = s.widgets["GPUs"]
            assert "2,048" in gpus.options
            moved = await s.rerun({gpus.id: ["2,048"]}, timeout_s=300)
            return first, moved, s.query
        finally:
            await s.close()

    first, moved, query = asyncio.run(go())
    for run in (first, moved):
        assert run.status == "FINISHED_SUCCESSFULLY"  # type: ignore[attr-defined]
        assert run.exceptions == [] and run.errors == []  # type: ignore[attr-defined]
        assert run.n_messages > 10  # type: ignore[attr-defined]
    assert "cluster.n_gpus=2048" in query
