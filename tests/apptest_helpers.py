"""Helpers shared by the Streamlit AppTest page tests: open a page, read what it drew.

A plain module rather than fixtures in ``conftest.py``: the helpers take arguments (a page,
URL parameters) and are called several times in one test, and ``tests/page_fuzz_cases.py``
(imported by ``benchmarks/page_fuzz.py`` too, outside pytest) uses them, which a fixture or
an import of ``conftest`` would not allow. Import it as ``from tests.apptest_helpers import
...`` (``pythonpath = ["."]`` in ``pyproject.toml``), like ``tests.page_fuzz_cases``.

Every helper asserts what it needs (one metric with that label, no exception) with the
elements it saw in the message, so a failing test says what the page showed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
#: A budget, not an assertion: a fresh clone compiles every numba kernel on first use and
#: two xdist workers share two cores, so the first run of a big preset can take a while.
APPTEST_TIMEOUT_S = 300

Query = Mapping[str, Any] | Iterable[tuple[str, Any]]


def new_session(
    query: Query | None = None,
    *,
    timeout_s: float = APPTEST_TIMEOUT_S,
    session_state: Mapping[str, Any] | None = None,
) -> AppTest:
    """Return a new, not yet run, AppTest session of ``app.py`` with these URL parameters.

    ``query`` is a mapping or ``(key, value)`` pairs (a later pair overrides an earlier one);
    a value may be a list (a repeated URL parameter). ``session_state`` is set before the
    first run (an expander key opened, for instance).
    """
    at = AppTest.from_file(APP, default_timeout=timeout_s)
    pairs = query.items() if isinstance(query, Mapping) else (query or ())
    for key, value in pairs:
        at.query_params[key] = value
    for key, value in (session_state or {}).items():
        at.session_state[key] = value
    return at


def open_page(
    page: str,
    query: Query | None = None,
    /,
    *,
    warm: bool = False,
    title: str | None = None,
    timeout_s: float = APPTEST_TIMEOUT_S,
    session_state: Mapping[str, Any] | None = None,
    **params: Any,
) -> AppTest:
    """Open ``page`` (``"pages/cost.py"``) in a new session and run it once.

    URL parameters come from ``query`` and ``params`` (``**{"cluster.n_gpus": "16"}``).
    ``warm`` runs ``app.py``'s default page first, as a visitor who lands on ``/`` and then
    follows a link. Asserts the run raised nothing and, with ``title``, that the page's
    only ``st.title`` is this one.
    """
    pairs = [*((query.items() if isinstance(query, Mapping) else query) or ()), *params.items()]
    at = new_session(pairs, timeout_s=timeout_s, session_state=session_state)
    if warm:
        at.run()
    at.switch_page(page).run()
    assert_no_exception(at)
    if title is not None:
        assert [t.value for t in at.title] == [title]
    return at


def assert_no_exception(at: AppTest) -> None:
    """Assert the last run raised nothing (the exception messages otherwise)."""
    assert not at.exception, [e.value for e in at.exception]


def messages(elements: Any) -> list[str]:
    """Return the texts of a sequence of elements (``at.error``, ``at.warning``, ...)."""
    return [e.value for e in elements]


def alerts(at: AppTest) -> list[str]:
    """Return the page's error messages, then its warnings."""
    return messages([*at.error, *at.warning])


def url(at: AppTest) -> dict[str, str]:
    """Return the session's URL query parameters."""
    return {k: at.query_params[k] for k in at.query_params}


def figures(at: AppTest) -> list[dict[str, Any]]:
    """Return the plotly figure (as JSON data) of every chart, in page order."""
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def array(value: Any) -> Any:
    """Return a figure's data field as a NumPy array (plotly writes arrays as typed base64).

    ``{"dtype": "f8", "bdata": ..., "shape": "3, 4"}`` or a plain list; ``None`` in a list
    (a gap) becomes nan.
    """
    import base64

    import numpy as np

    if isinstance(value, dict) and "bdata" in value:
        out = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        if shape:
            out = out.reshape([int(n) for n in str(shape).split(",")])
        return out
    return np.array(value, dtype=float)


def figure(at: AppTest, index: int = 0) -> dict[str, Any]:
    """Return the plotly figure of the page's ``index``-th chart."""
    return json.loads(at.get("plotly_chart")[index].proto.spec)


def figure_titled(at: AppTest, title_part: str) -> dict[str, Any]:
    """Return the only chart whose title contains ``title_part``."""
    found = [f for f in figures(at) if title_part in f["layout"]["title"]["text"]]
    assert len(found) == 1, chart_titles(at)
    return found[0]


def chart_titles(at: AppTest) -> list[str]:
    """Return the title of every chart, in page order."""
    return [f["layout"]["title"]["text"] for f in figures(at)]


def find_metric(at: AppTest, label: str, *, prefix: bool = False) -> Any:
    """Return the only ``st.metric`` labelled ``label`` (or starting with it, ``prefix``)."""
    found = [m for m in at.metric if (m.label.startswith(label) if prefix else m.label == label)]
    assert len(found) == 1, [m.label for m in at.metric]
    return found[0]


def metric_value(at: AppTest, label: str, *, prefix: bool = False) -> str:
    """Return the value shown by the only ``st.metric`` labelled ``label``."""
    return str(find_metric(at, label, prefix=prefix).value)


#: The Validate page's text area for a pasted nccl-tests log.
VALIDATE_PASTE_KEY = "validate_paste"


def paste_log(at: AppTest, text: str) -> AppTest:
    """Paste an nccl-tests log into the Validate page, rerun, and check nothing raised."""
    at.text_area(key=VALIDATE_PASTE_KEY).input(text).run()
    assert_no_exception(at)
    return at


def capture_downloads(monkeypatch: Any) -> dict[str, tuple[str, bytes]]:
    """Record every file a download button stores: file name -> (MIME type, bytes).

    AppTest's download-button proto carries no bytes, so this spies on Streamlit's in-memory
    media storage, as the testing recipes describe (private API, checked to work with
    Streamlit 1.67). Pass pytest's ``monkeypatch``; the dict fills as pages run.
    """
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage as Storage

    captured: dict[str, tuple[str, bytes]] = {}
    original = Storage.load_and_get_id

    def spy(self: Any, data: Any, mimetype: str, kind: Any, filename: str | None = None) -> str:
        payload = data if isinstance(data, bytes) else Path(data).read_bytes()
        captured[filename or ""] = (mimetype, payload)
        return original(self, data, mimetype, kind, filename)

    monkeypatch.setattr(Storage, "load_and_get_id", spy)
    return captured
