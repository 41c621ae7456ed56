"""Load test: N concurrent browser sessions moving a sidebar slider on one dashboard server.

Run: ``python benchmarks/load_test.py [--sessions 10] [--seconds 60] [--page /]``, or with
``--protocol`` (``--sessions 50``) to drive the sessions over Streamlit's own websocket
protocol with no browser (``benchmarks/protocol_client.py``): each move is a rerun with the
slider's new value, timed from the send to the server's ``script_finished``, so the figures
are the server's capacity alone.

Starts ``streamlit run app.py`` on a free port (or uses ``--url`` of a running server), opens
``--sessions`` browser sessions, each in its own browser context (own cookies, own Streamlit
session) spread over ``--browsers`` Debian chromium processes, and lets every session move the
sidebar slider (``--slider``, by default the GPU-count select_slider) with the keyboard, back
and forth, for ``--seconds``. A move's latency runs from the key press to the redrawn page:
the script is idle again (``data-test-script-state=notRunning``), no skeleton is left, every
plotly chart has drawn, and the charts' data or titles differ from before the move (on a page
without charts, the main area's text differs).

Prints sessions, duration, moves, errors (exception elements, error alerts, lost connections,
page errors, timeouts) and p50/p95/max latency in ms, split into moves to a value the server
had drawn before (any session: its caches are shared) and moves to a new value, with the
server's peak RSS read from /proc. Exits with status 1 if there was any error. For the slider
benchmark of one user at the largest size: ``--sessions 1 --page "/?cluster.n_gpus=131072"``
(a new value there is a new 65,536- or 131,072-GPU fabric).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"

#: Flags that work with Debian's chromium in containers (as in tests/conftest.py).
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
IDLE = "[data-testid=stApp][data-test-script-state=notRunning]"
VIEWPORT = {"width": 1400, "height": 1000}

#: True when the page is drawn: script idle, no skeleton, every plotly chart drawn.
_DRAWN_JS = """() => {
  const app = document.querySelector('[data-testid=stApp]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  const main = document.querySelector('[data-testid=stMain]');
  if (!main || main.querySelector('[data-testid=stSkeleton]')) return false;
  for (const c of main.querySelectorAll('[data-testid=stPlotlyChart]'))
    if (!c.querySelector('.main-svg')) return false;
  return true;
}"""
#: What the user sees change: every chart's data and title, else the main area's text.
_SIGNATURE_JS = """() => {
  const main = document.querySelector('[data-testid=stMain]');
  if (!main) return '';
  const charts = Array.from(main.querySelectorAll('.js-plotly-plot'));
  if (!charts.length) return main.innerText;
  return JSON.stringify(charts.map(gd => [
    ((gd.layout || {}).title || {}).text || '',
    (gd.data || []).map(t => [t.name, t.x, t.y]),
  ]));
}"""
_REDRAWN_JS = f"""(old) => ({_DRAWN_JS})() && ({_SIGNATURE_JS})() !== old"""
#: Problems a user would see: an exception box, an error alert, a lost connection.
PROBLEMS_JS = """() => {
  const out = [];
  const n = s => document.querySelectorAll(s).length;
  if (n('[data-testid=stException]')) out.push('exception element');
  if (n('[data-testid=stAlertContentError]')) out.push('error alert');
  const app = document.querySelector('[data-testid=stApp]');
  const conn = app && app.getAttribute('data-test-connection-state');
  if (conn && conn !== 'CONNECTED') out.push('connection ' + conn);
  return out;
}"""


# --------------------------------------------------------------------------------------
# server and /proc
# --------------------------------------------------------------------------------------


def chrome_path() -> str:
    path = (
        os.environ.get("CHROME_PATH") or shutil.which("chromium") or shutil.which("google-chrome")
    )
    if not path:
        sys.exit("no chromium on PATH (apt-get install chromium, or set CHROME_PATH)")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def streamlit_server(
    log_name: str = "load-test-streamlit.log", timeout_s: float = 60.0
) -> Iterator[tuple[str, int]]:
    """Run ``streamlit run app.py`` on a free port; yield ``(base URL, pid)``, then stop it."""
    ARTIFACTS.mkdir(exist_ok=True)
    port = _free_port()
    with open(ARTIFACTS / log_name, "w") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                str(ROOT / "app.py"),
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
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                with contextlib.suppress(OSError):
                    with urllib.request.urlopen(url + "/_stcore/health", timeout=1) as r:
                        if r.read() == b"ok":
                            break
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"streamlit did not start; see {log.name}")
                time.sleep(0.2)
            yield url, proc.pid
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _status_kb(pid: int, key: str) -> int | None:
    """A ``kB`` field (VmRSS, VmHWM) of /proc/<pid>/status, or None if unreadable."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process (/proc/<pid>/stat)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError, ValueError):
            out += [int(c) for c in (task / "children").read_text().split()]
    return out


def _descendants(pid: int) -> list[int]:
    todo, seen = [pid], []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo += _children(p)
    return seen[1:]


def pid_listening_on(url: str) -> int | None:
    """The pid of the local process that listens on the URL's port (readable ones only)."""
    port = urlsplit(url).port or 80
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                f = line.split()
                if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:  # 0A = LISTEN
                    inodes.add(f"socket:[{f[9]}]")
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in inodes:
                        return int(proc.name)
    return None


@dataclass
class MemorySampler:
    """Samples the server's RSS and the browser processes' summed RSS and CPU time.

    A browser process's CPU is read at every sample (a session's renderer exits when its
    context closes, taking its counters with it): :meth:`browser_cpu_since_mark` sums each
    process's CPU since :meth:`mark` (since its start for one born later), up to its last
    sample.
    """

    server_pid: int | None
    interval_s: float = 0.5
    server_peak_kb: int = 0
    browser_peak_kb: int = 0
    #: (monotonic time s, server RSS kB) of every sample, for the memory growth
    server_samples: list[tuple[float, int]] = field(default_factory=list)
    _task: asyncio.Task | None = None
    _browser_cpu: dict[int, float] = field(default_factory=dict)
    _browser_mark: dict[int, float] = field(default_factory=dict)

    def mark(self) -> None:
        """Start counting the browsers' CPU from now."""
        self.sample()
        self._browser_mark = dict(self._browser_cpu)

    def browser_cpu_since_mark(self) -> float:
        """CPU seconds the browser processes used since :meth:`mark`."""
        return sum(v - self._browser_mark.get(p, 0.0) for p, v in self._browser_cpu.items())

    def sample(self) -> None:
        server = set()
        if self.server_pid:
            server = {self.server_pid, *_descendants(self.server_pid)}
            rss_kb = sum(_status_kb(p, "VmRSS") or 0 for p in server)
            self.server_peak_kb = max(self.server_peak_kb, rss_kb)
            self.server_samples.append((time.monotonic(), rss_kb))
        browser = [p for p in _descendants(os.getpid()) if p not in server]
        for p in browser:
            cpu = _cpu_seconds(p)
            if cpu is not None:
                self._browser_cpu[p] = cpu
        self.browser_peak_kb = max(
            self.browser_peak_kb, sum(_status_kb(p, "VmRSS") or 0 for p in browser)
        )

    async def _run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(self.interval_s)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        self.sample()
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


# --------------------------------------------------------------------------------------
# sessions
# --------------------------------------------------------------------------------------


@dataclass
class Start:
    """The common start of the measured phase, set once every session has loaded its page;
    ``loading`` bounds how many sessions open their page at the same time."""

    loading: asyncio.Semaphore
    event: asyncio.Event = field(default_factory=asyncio.Event)
    deadline: float = 0.0


@dataclass
class SessionResult:
    load_ms: float | None = None
    latencies_ms: list[float] = field(default_factory=list)
    #: per move: whether the server had drawn the slider's new value before (any session)
    seen_before: list[bool] = field(default_factory=list)
    errors: Counter = field(default_factory=Counter)


#: Slider values the server has drawn, across all sessions (its caches are shared).
SEEN_VALUES: set[str] = set()


async def slider_value(slider) -> str:
    """The slider's shown value (a select_slider's label, else its number)."""
    return (
        await slider.get_attribute("aria-valuetext")
        or await slider.get_attribute("aria-valuenow")
        or ""
    )


async def wait_drawn(page, timeout_ms: float) -> None:
    await page.wait_for_function(_DRAWN_JS, timeout=timeout_ms, polling=50)


async def open_page(page, url: str, timeout_ms: float) -> None:
    """Open a page and wait until it is drawn (its title or an exception box, then idle)."""
    await page.goto(url, timeout=timeout_ms)
    await page.locator("[data-testid=stMain] h1, [data-testid=stException]").first.wait_for(
        timeout=timeout_ms
    )
    await wait_drawn(page, timeout_ms)


def slider_locator(page, label: str):
    # the accessible name repeats the label ("GPUs GPUs") in some versions
    name = re.escape(label)
    return page.get_by_role("slider", name=re.compile(rf"^{name}( {name})?$"))


async def run_session(
    index: int, browser, args: argparse.Namespace, base: str, start: Start, loaded: asyncio.Queue
) -> SessionResult:
    """One user: open the page, wait for the common start, move the slider until the end."""
    res = SessionResult()
    think = random.Random(index)  # each session's pauses, the same run to run
    timeout_ms = args.timeout * 1000
    context = await browser.new_context(viewport=VIEWPORT)
    page = await context.new_page()
    page.on("pageerror", lambda exc: res.errors.update([f"page error: {exc}"[:120]]))
    try:
        async with start.loading:  # users arrive a few at a time, not all in one instant
            t0 = time.perf_counter()
            await open_page(page, base + args.page, timeout_ms)
            res.load_ms = (time.perf_counter() - t0) * 1000
        res.errors.update(await page.evaluate(PROBLEMS_JS))
    except Exception as exc:  # any failure to load is an error
        res.errors[f"load: {type(exc).__name__}"] += 1
        await loaded.put(index)
        await context.close()
        return res
    await loaded.put(index)
    await start.event.wait()
    if args.think_ms:  # users do not all start at the same instant either
        await asyncio.sleep(think.random() * args.think_ms / 1000)

    slider = slider_locator(page, args.slider)
    deadline = start.deadline
    direction, steps = "ArrowRight", 0
    try:
        await slider.wait_for(timeout=timeout_ms)
    except Exception:  # no such slider on this page
        res.errors[f"no slider named {args.slider!r}"] += 1
        await context.close()
        return res
    SEEN_VALUES.add(await slider_value(slider))
    while time.monotonic() < deadline:
        try:
            await page.wait_for_selector(IDLE, timeout=timeout_ms)
            before = await page.evaluate(_SIGNATURE_JS)
            now, top, bottom = [
                await slider.get_attribute(a)
                for a in ("aria-valuenow", "aria-valuemax", "aria-valuemin")
            ]
            # a select_slider has no aria-valuenow/max/min: its ends show as a key press
            # that leaves the value unchanged (below)
            at_end = now is not None and (
                (direction == "ArrowRight" and now == top)
                or (direction == "ArrowLeft" and now == bottom)
            )
            if steps >= args.span or at_end:
                direction = "ArrowLeft" if direction == "ArrowRight" else "ArrowRight"
                steps = 0
            old_value = await slider_value(slider)
            await slider.focus()
            t0 = time.perf_counter()
            await slider.press(direction)
            value = await slider_value(slider)
            for _ in range(10):  # the widget shows the new value at once, the page later
                if value != old_value:
                    break
                await asyncio.sleep(0.02)
                value = await slider_value(slider)
            if value == old_value:  # at an end of the slider: nothing to redraw, turn back
                direction = "ArrowLeft" if direction == "ArrowRight" else "ArrowRight"
                steps = 0
                continue
            await page.wait_for_function(
                _REDRAWN_JS, arg=before, timeout=timeout_ms, polling=args.poll_ms
            )
            res.latencies_ms.append((time.perf_counter() - t0) * 1000)
            res.seen_before.append(value in SEEN_VALUES)
            SEEN_VALUES.add(value)
            steps += 1
            res.errors.update(await page.evaluate(PROBLEMS_JS))
        except Exception as exc:  # a timeout or a closed page
            name = "timeout" if "Timeout" in type(exc).__name__ else type(exc).__name__
            res.errors[name] += 1
            with contextlib.suppress(Exception):
                await wait_drawn(page, timeout_ms)
        if args.think_ms:  # a user reads the result: mean think_ms, +- think_jitter of it
            jitter = args.think_jitter * (2 * think.random() - 1)
            await asyncio.sleep(args.think_ms * (1 + jitter) / 1000)
    await context.close()
    return res


@dataclass(frozen=True)
class MemoryGrowth:
    """The server's RSS over the measured phase, MiB, and how fast it grew."""

    start_mib: float
    peak_mib: float
    end_mib: float
    minutes: float
    #: least-squares slope of RSS against time over the phase, MiB per minute
    slope_mib_per_min: float

    @property
    def growth_mib(self) -> float:
        """End minus start, MiB."""
        return self.end_mib - self.start_mib


def memory_growth(samples: list[tuple[float, int]], t_start: float) -> MemoryGrowth | None:
    """Summarise the RSS samples (time s, kB) taken from ``t_start`` on (None: too few)."""
    phase = [(t, kb / 1024) for t, kb in samples if t >= t_start]
    if len(phase) < 2:
        return None
    ts, mib = [t for t, _ in phase], [m for _, m in phase]
    t_mean, m_mean = sum(ts) / len(ts), sum(mib) / len(mib)
    var = sum((t - t_mean) ** 2 for t in ts)
    slope_per_s = (
        sum((t - t_mean) * (m - m_mean) for t, m in zip(ts, mib, strict=True)) / var if var else 0
    )
    return MemoryGrowth(
        start_mib=mib[0],
        peak_mib=max(mib),
        end_mib=mib[-1],
        minutes=(ts[-1] - ts[0]) / 60,
        slope_mib_per_min=slope_per_s * 60,
    )


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def print_moves(
    args: argparse.Namespace, results: list[SessionResult], elapsed: float, runner: str, until: str
) -> tuple[list[float], int]:
    """Print the moves, errors, latency and load lines; return (latencies, n_errors)."""
    latencies = [x for r in results for x in r.latencies_ms]
    pairs = [(x, b) for r in results for x, b in zip(r.latencies_ms, r.seen_before, strict=False)]
    seen = [x for x, b in pairs if b]
    new = [x for x, b in pairs if not b]
    loads = [r.load_ms for r in results if r.load_ms is not None]
    errors: Counter = Counter()
    for r in results:
        errors.update(r.errors)
    n_errors = sum(errors.values())
    print(f"page        {args.page} ({args.slider} slider, {args.span} step(s) each way)")
    print(f"sessions    {args.sessions} {runner}")
    print(f"duration    {elapsed:.1f} s")
    print(f"moves       {len(latencies)} ({len(latencies) / elapsed:.1f}/s)")
    print(
        f"errors      {n_errors}"
        + (f" ({', '.join(f'{k}: {v}' for k, v in errors.items())})" if n_errors else "")
    )
    print(
        f"latency ms  p50 {percentile(latencies, 50):,.0f}  p95 {percentile(latencies, 95):,.0f}"
        f"  max {max(latencies, default=math.nan):,.0f}{until}"
    )
    for label, part in (("seen before", seen), ("new value", new)):
        print(
            f"  {label:<10}{len(part):>4} moves, p50 {percentile(part, 50):,.0f}  "
            f"p95 {percentile(part, 95):,.0f}  max {max(part, default=math.nan):,.0f}"
        )
    if loads:
        print(f"page load   p50 {percentile(loads, 50):,.0f} ms  max {max(loads):,.0f} ms")
    return latencies, n_errors


async def load_test(args: argparse.Namespace, base: str, server_pid: int | None) -> int:
    from playwright.async_api import async_playwright

    sampler = MemorySampler(server_pid)
    async with async_playwright() as pw:
        browsers = [
            await pw.chromium.launch(executable_path=chrome_path(), args=CHROME_ARGS)
            for _ in range(max(1, args.browsers))
        ]
        # warm-up: the server's first page view pays imports and numba compilation
        warm = await browsers[0].new_context(viewport=VIEWPORT)
        page = await warm.new_page()
        await open_page(page, base + args.page, 180_000)
        problems = await page.evaluate(PROBLEMS_JS)
        await warm.close()
        if problems:
            print(
                f"{base + args.page} is broken before the test starts: {', '.join(problems)}",
                file=sys.stderr,
            )
            return 1

        sampler.start()
        rss_before = _status_kb(server_pid, "VmRSS") if server_pid else None
        start, loaded = Start(asyncio.Semaphore(max(1, args.parallel_loads))), asyncio.Queue()
        tasks = [
            asyncio.create_task(
                run_session(i, browsers[i % len(browsers)], args, base, start, loaded)
            )
            for i in range(args.sessions)
        ]
        for _ in range(args.sessions):
            await loaded.get()
        # CPU of the moves phase only (the page loads before it are not moves)
        cpu_before = _cpu_seconds(server_pid) if server_pid else None
        sampler.mark()
        t_start = time.monotonic()
        start.deadline = t_start + args.seconds
        start.event.set()
        results = await asyncio.gather(*tasks)
        elapsed = time.monotonic() - t_start
        await sampler.stop()
        cpu_after = _cpu_seconds(server_pid) if server_pid else None
        browser_used = sampler.browser_cpu_since_mark()
        for b in browsers:
            await b.close()

    latencies, n_errors = print_moves(
        args, results, elapsed, f"in {len(browsers)} chromium process(es)", ""
    )
    mib = 1024
    if server_pid:
        hwm = _status_kb(server_pid, "VmHWM")
        print(
            f"server RSS  {(rss_before or 0) / mib:,.0f} MiB before the sessions, peak "
            f"{sampler.server_peak_kb / mib:,.0f} MiB during the run"
            + (f" (VmHWM {hwm / mib:,.0f} MiB)" if hwm else "")
        )
        growth = memory_growth(sampler.server_samples, t_start)
        if growth is not None:
            print(
                f"memory      moves phase: start {growth.start_mib:,.0f} MiB, peak "
                f"{growth.peak_mib:,.0f} MiB, end {growth.end_mib:,.0f} MiB; growth "
                f"{growth.growth_mib:+,.0f} MiB in {growth.minutes:.1f} min, "
                f"{growth.slope_mib_per_min:+,.1f} MiB/min (least-squares slope)"
            )
        if cpu_before is not None and cpu_after is not None:
            used = cpu_after - cpu_before
            per_move = f", {used / len(latencies) * 1000:,.0f} ms per move" if latencies else ""
            print(f"server CPU  {used:,.1f} s ({used / elapsed:.0%} of one core{per_move})")
    else:
        print("server RSS  n/a (no readable local process listens on that port)")
    print(f"browser RSS {sampler.browser_peak_kb / mib:,.0f} MiB peak (chromium processes summed)")
    per_move = f", {browser_used / len(latencies) * 1000:,.0f} ms per move" if latencies else ""
    print(
        f"browser CPU {browser_used:,.1f} s ({browser_used / elapsed:.0%} of one core{per_move};"
        " chromium processes summed)"
    )
    print(f"load avg    {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    return 1 if n_errors else 0


# --------------------------------------------------------------------------------------
# protocol sessions (no browser): the server's own capacity
# --------------------------------------------------------------------------------------


async def run_protocol_session(
    index: int, args: argparse.Namespace, base: str, start: Start, loaded: asyncio.Queue
) -> SessionResult:
    """One user over Streamlit's websocket protocol: open the page, move the slider by value."""
    from protocol_client import ProtocolSession

    res = SessionResult()
    think = random.Random(index)
    sess = ProtocolSession(base, args.page)
    try:
        async with start.loading:
            await sess.connect()
            first = await sess.rerun(timeout_s=max(args.timeout, 180))
            res.load_ms = first.elapsed_ms
        res.errors.update(f"exception: {e}"[:120] for e in first.exceptions)
        res.errors.update(f"error: {e}"[:120] for e in first.errors)
    except Exception as exc:
        res.errors[f"load: {type(exc).__name__}"] += 1
        await loaded.put(index)
        await sess.close()
        return res
    await loaded.put(index)
    widget = sess.widgets.get(args.slider)
    if widget is None or not widget.options:
        res.errors[f"no slider named {args.slider!r}"] += 1
        await sess.close()
        return res
    options = widget.options
    at = options.index(args.start) if args.start in options else len(options) // 2
    SEEN_VALUES.add(options[at])
    await start.event.wait()
    if args.think_ms:
        await asyncio.sleep(think.random() * args.think_ms / 1000)
    direction, steps = 1, 0
    while time.monotonic() < start.deadline:
        if steps >= args.span or not 0 <= at + direction < len(options):
            direction, steps = -direction, 0
        at += direction
        value = options[at]
        try:
            run = await sess.rerun({widget.id: [value]}, timeout_s=args.timeout)
            res.latencies_ms.append(run.elapsed_ms)
            res.seen_before.append(value in SEEN_VALUES)
            SEEN_VALUES.add(value)
            res.errors.update(f"exception: {e}"[:120] for e in run.exceptions)
            res.errors.update(f"error: {e}"[:120] for e in run.errors)
        except Exception as exc:  # a timeout or a closed connection
            name = "timeout" if isinstance(exc, TimeoutError) else type(exc).__name__
            res.errors[name] += 1
            break  # the connection's state is unknown after a lost run
        steps += 1
        if args.think_ms:
            jitter = args.think_jitter * (2 * think.random() - 1)
            await asyncio.sleep(args.think_ms * (1 + jitter) / 1000)
    await sess.close()
    return res


async def load_test_protocol(args: argparse.Namespace, base: str, server_pid: int | None) -> int:
    """``--protocol``: N sessions over the websocket protocol; print the server's figures."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from protocol_client import ProtocolSession

    warm = ProtocolSession(base, args.page)  # the server's first run pays imports and numba
    await warm.connect()
    first = await warm.rerun(timeout_s=300)
    await warm.close()
    if first.exceptions or first.errors:
        print(f"{args.page} is broken before the test starts: {first.exceptions + first.errors}")
        return 1
    sampler = MemorySampler(server_pid)
    sampler.start()
    rss_before = _status_kb(server_pid, "VmRSS") if server_pid else None
    start, loaded = Start(asyncio.Semaphore(max(1, args.parallel_loads))), asyncio.Queue()
    tasks = [
        asyncio.create_task(run_protocol_session(i, args, base, start, loaded))
        for i in range(args.sessions)
    ]
    for _ in range(args.sessions):
        await loaded.get()
    cpu_before = _cpu_seconds(server_pid) if server_pid else None
    sampler.mark()
    t_start = time.monotonic()
    start.deadline = t_start + args.seconds
    start.event.set()
    results = await asyncio.gather(*tasks)
    elapsed = time.monotonic() - t_start
    await sampler.stop()
    cpu_after = _cpu_seconds(server_pid) if server_pid else None

    latencies, n_errors = print_moves(
        args,
        results,
        elapsed,
        "over the websocket protocol (no browser)",
        "  (send to script_finished)",
    )
    mib = 1024
    if server_pid:
        print(
            f"server RSS  {(rss_before or 0) / mib:,.0f} MiB before the sessions, peak "
            f"{sampler.server_peak_kb / mib:,.0f} MiB during the run"
        )
        growth = memory_growth(sampler.server_samples, t_start)
        if growth is not None:
            print(
                f"memory      moves phase: growth {growth.growth_mib:+,.0f} MiB in "
                f"{growth.minutes:.1f} min, {growth.slope_mib_per_min:+,.1f} MiB/min"
            )
        if cpu_before is not None and cpu_after is not None:
            used = cpu_after - cpu_before
            per_move = f", {used / len(latencies) * 1000:,.0f} ms per move" if latencies else ""
            print(f"server CPU  {used:,.1f} s ({used / elapsed:.0%} of one core{per_move})")
    print(f"load avg    {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    return 1 if n_errors else 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="base URL of a running server (default: start one)")
    p.add_argument("--sessions", type=int, default=10, help="concurrent browser sessions")
    p.add_argument("--seconds", type=float, default=60, help="how long the sessions move")
    p.add_argument("--page", default="/", help="page URL path (and query), e.g. /cost")
    p.add_argument(
        "--browsers",
        type=int,
        default=1,
        help="chromium processes; sessions are spread over them round-robin",
    )
    p.add_argument("--slider", default="GPUs", help="label of the sidebar slider to move")
    p.add_argument("--span", type=int, default=2, help="steps in one direction before turning back")
    p.add_argument(
        "--parallel-loads",
        type=int,
        default=2,
        help="sessions that open their page at the same time before the moves start",
    )
    p.add_argument("--timeout", type=float, default=30, help="seconds before a move times out")
    p.add_argument("--think-ms", type=float, default=0, help="mean pause between a session's moves")
    p.add_argument(
        "--think-jitter",
        type=float,
        default=0.5,
        help="each pause is think-ms x uniform(1 - j, 1 + j), so sessions do not move in step",
    )
    p.add_argument("--poll-ms", type=float, default=20, help="redraw check interval")
    p.add_argument(
        "--protocol",
        action="store_true",
        help="drive the sessions over Streamlit's websocket protocol (protobuf BackMsg / "
        "ForwardMsg, benchmarks/protocol_client.py) instead of browsers: the server's capacity",
    )
    p.add_argument(
        "--start",
        default="1,024",
        help="with --protocol: the slider option the sessions start from (as the slider shows it)",
    )
    args = p.parse_args(argv)
    if args.sessions < 1 or args.seconds <= 0:
        p.error("--sessions and --seconds must be positive")
    if not args.page.startswith("/"):
        args.page = "/" + args.page
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    run = load_test_protocol if args.protocol else load_test
    if args.url:
        base = args.url.rstrip("/")
        return asyncio.run(run(args, base, pid_listening_on(base)))
    with streamlit_server() as (base, pid):
        return asyncio.run(run(args, base, pid))


if __name__ == "__main__":
    sys.exit(main())
