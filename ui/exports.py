"""Chart exports as bytes: PNG, SVG and standalone HTML.

PNG and SVG render on the server (kaleido driving a system Chromium); HTML inlines plotly.js
and works offline. Pure functions of a figure; no streamlit here (``ui.widgets`` draws the
buttons). Static images need a Chromium-based browser: ``CHROME_PATH`` or ``BROWSER_PATH``
if set, else whatever choreographer (kaleido's browser driver) finds on ``PATH`` (Debian's
``/usr/bin/chromium``, ``google-chrome``, ...). Nothing is downloaded.

One headless Chromium is kept per process and reused: starting it costs seconds, a render in
a running one a fraction of a second (see :func:`figure_png`). It runs on its own event-loop
thread, serves one render at a time (exports come from Streamlit's worker threads, possibly
several at once) and is stopped at interpreter exit.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import re
import threading
from functools import lru_cache
from typing import Any

import plotly.graph_objects as go

__all__ = [
    "DEFAULT_EXPORT_WIDTH_PX",
    "PNG_SCALE",
    "StaticExportError",
    "chrome_path",
    "export_file_name",
    "export_size",
    "figure_html",
    "figure_png",
    "figure_svg",
    "shutdown_renderer",
    "static_export_available",
]

#: Width of an exported image when the figure does not set one (pages stretch charts to the
#: browser's width, so most figures only set a height): a slide-friendly size.
DEFAULT_EXPORT_WIDTH_PX = 1100
#: Height when the figure sets none (plotly's own default).
DEFAULT_EXPORT_HEIGHT_PX = 500
#: PNG pixels per layout pixel: 2 gives a sharp image on slides and high-DPI screens.
PNG_SCALE = 2
#: Seconds one render may take before the browser is deemed stuck (and restarted next time).
RENDER_TIMEOUT_S = 60.0
#: Seconds to start Chromium and load kaleido's page.
START_TIMEOUT_S = 60.0


class StaticExportError(RuntimeError):
    """A PNG/SVG export failed (no browser, the browser did not start or did not answer)."""


def chrome_path() -> str | None:
    """Return the Chromium-based browser that static exports use, or None.

    ``CHROME_PATH`` (the tests' variable) or ``BROWSER_PATH`` (choreographer's) win if set
    and executable; otherwise choreographer's own search (``PATH``, typical install paths, a
    browser fetched by ``kaleido_get_chrome``).
    """
    for var in ("CHROME_PATH", "BROWSER_PATH"):
        explicit = os.environ.get(var)
        if explicit:
            return explicit if os.path.isfile(explicit) and os.access(explicit, os.X_OK) else None
    return _found_browser()


@lru_cache(maxsize=1)
def _found_browser() -> str | None:
    try:
        from choreographer.browsers.chromium import Chromium
    except ImportError:  # kaleido (and with it choreographer) not installed
        return None
    found = Chromium.find_browser(skip_local=False)
    return str(found) if found else None


def static_export_available() -> bool:
    """Whether PNG/SVG export can run here (kaleido installed and a browser found)."""
    try:
        import kaleido  # noqa: F401
    except ImportError:
        return False
    return chrome_path() is not None


def export_size(fig: go.Figure) -> tuple[int, int]:
    """Return the exported image's ``(width, height)`` in layout pixels.

    The figure's own ``layout.width``/``layout.height`` where set, else
    :data:`DEFAULT_EXPORT_WIDTH_PX` x :data:`DEFAULT_EXPORT_HEIGHT_PX`.
    """
    width = fig.layout.width or DEFAULT_EXPORT_WIDTH_PX
    height = fig.layout.height or DEFAULT_EXPORT_HEIGHT_PX
    return int(width), int(height)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "chart"


def export_file_name(name: str, preset: str | None, ext: str) -> str:
    """Return a file name from a chart name and the scenario's preset.

    >>> export_file_name("collectives busbw", "dgx-h100-ib-ndr", "png")
    'collectives-busbw_dgx-h100-ib-ndr.png'
    """
    stem = _slug(name) + (f"_{_slug(preset)}" if preset else "")
    return f"{stem}.{ext.lstrip('.')}"


class _Renderer:
    """One kaleido (one headless Chromium tab) on a private event-loop thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._kaleido: Any = None
        self._atexit = False

    def render(self, fig_dict: dict[str, Any], opts: dict[str, Any]) -> bytes:
        with self._lock:
            if self._kaleido is None:
                self._start()
            loop, k = self._loop, self._kaleido
            future = asyncio.run_coroutine_threadsafe(k.calc_fig(fig_dict, opts=opts), loop)  # type: ignore[arg-type]
            try:
                return bytes(future.result(RENDER_TIMEOUT_S))
            except BaseException as exc:
                future.cancel()
                self._stop()  # a browser that failed once starts afresh next time
                raise StaticExportError(
                    f"{opts.get('format', 'image')} export failed: {exc or type(exc).__name__}"
                ) from exc

    def _start(self) -> None:
        path = chrome_path()
        if path is None:
            raise StaticExportError(
                "no Chromium found for PNG/SVG export (apt-get install "
                "chromium, or set CHROME_PATH)"
            )
        import kaleido

        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="kaleido-export", daemon=True)
        thread.start()

        async def open_browser() -> Any:
            # mathjax=False: no figure here uses LaTeX, and the default would fetch MathJax
            # from a CDN (slow or hanging offline); plotly.js comes from the plotly package.
            k = kaleido.Kaleido(n=1, timeout=RENDER_TIMEOUT_S, mathjax=False, path=path)
            await k.open()
            return k

        try:
            self._kaleido = asyncio.run_coroutine_threadsafe(open_browser(), loop).result(
                START_TIMEOUT_S
            )
        except BaseException as exc:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            raise StaticExportError(
                f"could not start {path} for PNG/SVG export: {exc or type(exc).__name__}"
            ) from exc
        self._loop, self._thread = loop, thread
        if not self._atexit:
            atexit.register(self.close)
            self._atexit = True

    def _stop(self) -> None:
        loop, thread, k = self._loop, self._thread, self._kaleido
        self._loop = self._thread = self._kaleido = None
        if loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(k.close(), loop).result(10)
        except BaseException:  # best effort: the browser may be gone already
            pass
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(10)
        if not loop.is_running():
            loop.close()

    def close(self) -> None:
        with self._lock:
            self._stop()

    @property
    def running(self) -> bool:
        return self._kaleido is not None


_RENDERER = _Renderer()


def shutdown_renderer() -> None:
    """Stop the export browser if it runs (it restarts on the next export)."""
    _RENDERER.close()


def _static(fig: go.Figure, fmt: str, width: int | None, height: int | None, scale: float) -> bytes:
    default_w, default_h = export_size(fig)
    opts = {
        "format": fmt,
        "width": width or default_w,
        "height": height or default_h,
        "scale": scale,
    }
    return _RENDERER.render(_vector_traces(fig), opts)


def _vector_traces(fig: go.Figure) -> dict[str, Any]:
    """Return the figure as a dict with WebGL scatter traces drawn as SVG scatter traces.

    Headless Chromium has no GPU, so WebGL (``scattergl``, used for the topology diagram's
    thousands of cables) renders in software: seconds per image, and only as a bitmap inside
    an SVG. The SVG trace type takes the same attributes and gives a true vector file.
    """
    out = fig.to_plotly_json()
    out["data"] = [
        {**t, "type": "scatter"} if t.get("type") == "scattergl" else t for t in out["data"]
    ]
    return out


def figure_png(
    fig: go.Figure, *, width: int | None = None, height: int | None = None, scale: float = PNG_SCALE
) -> bytes:
    """Return the figure as PNG bytes, ``scale`` x its :func:`export_size` in pixels.

    Raises
    ------
    StaticExportError
        If no browser is found or the render fails.

    Notes
    -----
    Measured on the project's 2-core machine: the first export of a process starts Chromium
    (2-4 s); later ones reuse it (0.2-0.3 s for a bar chart, 0.6 s for the 1,024-GPU topology
    diagram), where plotly's own ``to_image`` starts a browser per call (4-5 s each).
    """
    return _static(fig, "png", width, height, scale)


def figure_svg(fig: go.Figure, *, width: int | None = None, height: int | None = None) -> bytes:
    """Return the figure as SVG bytes (UTF-8), :func:`export_size` in layout pixels.

    Raises
    ------
    StaticExportError
        If no browser is found or the render fails.
    """
    return _static(fig, "svg", width, height, 1)


def figure_html(fig: go.Figure) -> bytes:
    """Return a standalone HTML page of the interactive figure (UTF-8).

    plotly.js is inlined (about 4.7 MB), so the file opens offline and loads nothing from
    the network; the figure stretches to the window.
    """
    html = fig.to_html(
        include_plotlyjs=True,
        full_html=True,
        include_mathjax=False,
        config={"displaylogo": False, "responsive": True},
        default_width="100%",
        default_height=f"{export_size(fig)[1]}px",
    )
    return html.encode("utf-8")
