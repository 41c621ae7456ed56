"""A Streamlit session over the server's own websocket protocol, with no browser.

The browser and the server speak protobuf over one websocket (``/_stcore/stream``): the
browser sends a ``BackMsg`` whose ``rerun_script`` carries the page, its query string and the
widgets' values (``ClientState``); the server answers with ``ForwardMsg`` s (``new_session``,
the page's ``delta`` s, ``page_info_changed`` when the script writes the URL) and closes the
run with ``script_finished``. :class:`ProtocolSession` plays the browser's part: it opens the
page, finds a widget by its label in the deltas, and moves it by sending a rerun with that
widget's new value, timing each move from the send to ``script_finished``. The server does
all the work it does for a browser (the script runs, every element is serialised and sent);
only the drawing is left out, so N of these sessions measure the server's capacity.

What a browser sends that this does not: the values of the widgets it was not told to move
(keyed widgets keep theirs in the session's state, as every widget of this app is), cached
message hashes (so the server sends every message in full, the browser's first visit) and
heartbeats (the runs here are minutes long).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

__all__ = ["ProtocolSession", "RunResult", "Widget"]

_FINISHED = ForwardMsg.ScriptFinishedStatus


@dataclass
class Widget:
    """A widget the page drew: its id, label, proto type and (for sliders) its options."""

    id: str
    label: str
    kind: str
    options: list[str] = field(default_factory=list)
    value: list[str] = field(default_factory=list)


@dataclass
class RunResult:
    """One script run as the server sent it."""

    elapsed_ms: float
    status: str
    n_messages: int
    n_bytes: int
    exceptions: list[str]
    errors: list[str]
    widgets: dict[str, Widget]


def _widget_of(element) -> Widget | None:  # type: ignore[no-untyped-def]
    kind = element.WhichOneof("type")
    if kind is None:
        return None
    proto = getattr(element, kind)
    wid = getattr(proto, "id", "")
    label = getattr(proto, "label", "")
    if not wid or not isinstance(wid, str):
        return None
    options = [str(o) for o in getattr(proto, "options", [])]
    value: list[str] = []
    if kind == "slider" and options:
        picked = [int(i) for i in getattr(proto, "value", None) or getattr(proto, "default", [])]
        value = [options[i] for i in picked if 0 <= i < len(options)]
    return Widget(wid, label, kind, options, value)


class ProtocolSession:
    """One Streamlit session driven over the websocket protocol (see the module docstring)."""

    def __init__(self, base_url: str, page: str = "/") -> None:
        parts = urlsplit(base_url)
        self.ws_url = f"ws://{parts.netloc}/_stcore/stream"
        self.origin = f"{parts.scheme}://{parts.netloc}"
        path, _, query = page.partition("?")
        self.page_name = path.strip("/")
        self.query = query
        self.widgets: dict[str, Widget] = {}
        self._ws: websockets.ClientConnection | None = None

    async def connect(self) -> None:
        """Open the websocket (subprotocol ``streamlit``, the page's origin)."""
        self._ws = await websockets.connect(
            self.ws_url,
            subprotocols=[websockets.Subprotocol("streamlit")],
            origin=websockets.Origin(self.origin),
            max_size=None,
            open_timeout=30,
        )

    async def close(self) -> None:
        """Close the websocket (the server drops the session)."""
        if self._ws is not None:
            await self._ws.close()

    async def rerun(
        self, values: dict[str, list[str]] | None = None, timeout_s: float = 60
    ) -> RunResult:
        """Send a rerun with ``values`` (widget id -> its string-array value); wait for the end.

        Raises
        ------
        TimeoutError
            When the server sends no ``script_finished`` within ``timeout_s``.
        """
        assert self._ws is not None, "connect() first"
        msg = BackMsg()
        state = msg.rerun_script
        state.query_string = self.query
        state.page_name = self.page_name
        for wid, value in (values or {}).items():
            w = state.widget_states.widgets.add()
            w.id = wid
            w.string_array_value.data.extend(value)
        t0 = time.perf_counter()
        await self._ws.send(msg.SerializeToString())
        n_messages = n_bytes = 0
        exceptions: list[str] = []
        errors: list[str] = []
        widgets: dict[str, Widget] = {}
        deadline = t0 + timeout_s
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"no script_finished within {timeout_s:g} s")
            raw = await asyncio.wait_for(self._ws.recv(), timeout=left)
            data = raw if isinstance(raw, bytes) else raw.encode()
            n_messages += 1
            n_bytes += len(data)
            fwd = ForwardMsg()
            fwd.ParseFromString(data)
            kind = fwd.WhichOneof("type")
            if kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                el = fwd.delta.new_element
                which = el.WhichOneof("type")
                if which == "exception":
                    exceptions.append(f"{el.exception.type}: {el.exception.message}"[:300])
                elif which == "alert" and el.alert.format == el.alert.ERROR:
                    errors.append(el.alert.body[:300])
                w = _widget_of(el)
                if w is not None:
                    widgets[w.label] = w
            elif kind == "page_info_changed":
                self.query = fwd.page_info_changed.query_string
            elif kind == "script_finished":
                status = _FINISHED.Name(fwd.script_finished)
                if fwd.script_finished == _FINISHED.FINISHED_EARLY_FOR_RERUN:
                    continue  # a rerun the script asked for itself follows
                elapsed = (time.perf_counter() - t0) * 1000
                self.widgets.update(widgets)
                return RunResult(elapsed, status, n_messages, n_bytes, exceptions, errors, widgets)
