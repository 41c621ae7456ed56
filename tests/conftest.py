"""Shared test fixtures: the repository root, a live streamlit server and the browser setup.

The browser tests drive the system's Chromium (Debian ``chromium``, or ``google-chrome`` on
GitHub runners) through pytest-playwright, so no ``playwright install`` download is needed.
``CHROME_PATH`` overrides the search. Without a browser the e2e tests are skipped locally but
fail when ``CI`` is set: a CI run must not go green by silently skipping them.

Every fixture is safe under pytest-xdist: each worker starts its own server on its own free
port and writes its own log.
"""

from __future__ import annotations

import ast
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# Every flow set a router hands over unchecked (``FlowSet.built``) is checked in full under
# the tests, in this process and in every server or CLI process a test starts.
os.environ["FABRIC_MODEL_CHECK_FLOWS"] = "1"

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"

#: Flags measured to work with Debian's chromium in containers (see the testing recipes).
CHROME_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]

SERVER_START_TIMEOUT_S = 60.0
#: The first page load of a server includes imports and numba compilation.
FIRST_PAGE_TIMEOUT_MS = 60_000
IDLE = "[data-testid=stApp][data-test-script-state=notRunning]"


@dataclass(frozen=True)
class AppPage:
    """One ``st.Page`` of ``app.py``'s navigation."""

    script: str  # relative to app.py, as AppTest.switch_page wants it
    title: str
    url: str  # the page's URL path in the browser ("/" for the default page)


def app_pages() -> list[AppPage]:
    """Read the pages from ``app.py``'s ``st.Page(...)`` calls, in navigation order.

    Parsed rather than hard-coded so a page added to the navigation is tested at once.
    """
    pages = []
    for node in ast.walk(ast.parse((ROOT / "app.py").read_text(encoding="utf-8"))):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "Page"
            and node.args
        ):
            continue
        script = ast.literal_eval(node.args[0])
        kw = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
        stem = Path(script).stem
        url = "/" if kw.get("default") else "/" + kw.get("url_path", stem)
        pages.append(AppPage(script, kw.get("title", stem), url))
    if not pages:
        raise RuntimeError("no st.Page(...) calls found in app.py")
    return pages


def pytest_configure(config: pytest.Config) -> None:
    # pytest-base-url (pulled in by pytest-playwright) defines its session fixture as a method,
    # which pytest 9 deprecates; not ours to fix, and it would print on every run.
    config.addinivalue_line(
        "filterwarnings",
        "ignore:Session-scoped fixtures defined as instance methods"
        ":pytest.PytestRemovedIn10Warning",
    )


def in_ci() -> bool:
    """Whether this run is a CI run (``CI`` set to anything but empty/0/false)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def chrome_path() -> str | None:
    """Return ``CHROME_PATH`` if set (even if wrong), else chromium or google-chrome on PATH."""
    explicit = os.environ.get("CHROME_PATH")
    if explicit:
        return explicit
    return shutil.which("chromium") or shutil.which("google-chrome")


def _browser_problem() -> str | None:
    path = chrome_path()
    if path is None:
        return "no chromium on PATH (apt-get install chromium, or set CHROME_PATH)"
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return f"CHROME_PATH={path} is not an executable file"
    return None


def _worker_id() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def run_streamlit(log_name: str, script: Path | None = None) -> Iterator[str]:
    """Run ``streamlit run app.py`` (or ``script``) on a free port; yield its URL, then stop it.

    The output goes to ``test-artifacts/<log_name>``, kept for CI artifacts.
    """
    ARTIFACTS.mkdir(exist_ok=True)
    port = _free_port()
    log_path = ARTIFACTS / log_name
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                str(script or ROOT / "app.py"),
                "--server.headless",
                "true",
                "--server.address",
                "127.0.0.1",
                "--server.port",
                str(port),
                "--server.fileWatcherType",
                "none",
                "--browser.gatherUsageStats",
                "false",
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        try:
            while True:
                try:
                    with urllib.request.urlopen(url + "/_stcore/health", timeout=1) as r:
                        if r.read() == b"ok":
                            break
                except OSError:
                    pass
                if proc.poll() is not None:
                    raise RuntimeError(f"streamlit exited with {proc.returncode}; see {log_path}")
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"streamlit not healthy after {SERVER_START_TIMEOUT_S:g} s; see {log_path}"
                    )
                time.sleep(0.2)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="session")
def streamlit_server() -> Iterator[str]:
    """This worker's streamlit server (its own port and log); yields the base URL."""
    with run_streamlit(f"streamlit-{_worker_id()}.log") as url:
        yield url


def wait_for_page(page: Any, title: str, timeout_ms: float) -> None:
    """Wait until a page is drawn: its ``st.title``, the script idle, every element rendered.

    Streamlit marks the script idle before the browser has drawn everything: elements whose
    code is loaded on demand show a skeleton first, and plotly draws after that.
    """
    from playwright.sync_api import expect

    heading = page.locator("[data-testid=stMain] h1").filter(has_text=title).first
    heading.wait_for(timeout=timeout_ms)
    page.wait_for_selector(IDLE, timeout=timeout_ms)
    main = page.locator("[data-testid=stMain]")
    expect(main.locator("[data-testid=stSkeleton]")).to_have_count(0, timeout=timeout_ms)
    undrawn = main.locator("[data-testid=stPlotlyChart]:not(:has(.main-svg))")
    expect(undrawn).to_have_count(0, timeout=timeout_ms)


@pytest.fixture(scope="session")
def first_visit(
    browser: Any, browser_context_args: dict[str, Any], streamlit_server: str
) -> dict[str, Any]:
    """What the first visitor of this worker's fresh server sees at ``/cost``.

    The first page load pays the imports and numba compilation (seconds), so it gets a long
    timeout once here instead of in whichever test happens to run first. The observation
    (tab title, navigation links) is kept for a test: Streamlit treats an app with a
    ``pages/`` folder as a legacy multipage app until some session runs ``app.py``.
    """
    context = browser.new_context(**browser_context_args)
    try:
        page = context.new_page()
        page.goto(streamlit_server + "/cost")
        wait_for_page(page, "Cost", FIRST_PAGE_TIMEOUT_MS)
        return {
            "title": page.title(),
            "nav": page.locator("[data-testid=stSidebarNav] a").all_inner_texts(),
        }
    finally:
        context.close()


@pytest.fixture(scope="session")
def live_app(
    first_visit: dict[str, Any],
    browser: Any,
    browser_context_args: dict[str, Any],
    streamlit_server: str,
) -> str:
    """This worker's server after a visit to the app's root URL; returns its base URL.

    Opening ``/`` runs ``app.py``, whose ``st.navigation`` switches the whole server process
    out of Streamlit's legacy ``pages/`` mode, so every test starts from that steady state
    whatever order the tests run in.
    """
    default = next(p for p in app_pages() if p.url == "/")
    context = browser.new_context(**browser_context_args)
    try:
        page = context.new_page()
        page.goto(streamlit_server + "/")
        wait_for_page(page, default.title, FIRST_PAGE_TIMEOUT_MS)
    finally:
        context.close()
    return streamlit_server


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    """pytest-playwright hook: launch the system Chromium instead of a downloaded one."""
    problem = _browser_problem()
    if problem:
        if in_ci():
            pytest.fail(f"browser tests must run in CI: {problem}", pytrace=False)
        pytest.skip(problem)
    return {**browser_type_launch_args, "executable_path": chrome_path(), "args": CHROME_ARGS}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args: dict[str, Any]) -> dict[str, Any]:
    """pytest-playwright hook: a tall viewport so one screenshot shows most of a page."""
    return {**browser_context_args, "viewport": {"width": 1400, "height": 1600}}


@pytest.fixture(scope="session")
def screenshot_dir() -> Path:
    """Where the browser tests save page screenshots (kept as CI artifacts)."""
    path = ARTIFACTS / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path
