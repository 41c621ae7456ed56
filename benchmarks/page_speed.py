"""Page speed: every dashboard page on every preset, cold and warm, under AppTest (and chromium).

Run: ``python benchmarks/page_speed.py [--presets a,b] [--pages moe,scaling] [--browser]``.

Under AppTest (``streamlit.testing.v1``) each preset gets a fresh Python process. The process
first imports the app's modules and runs one page on another preset, so the numba kernels
are loaded and nothing of *this* preset is cached (those costs are the app's start, reported
as ``start``). Then, for each page:

- **cold**: every cache emptied (``st.cache_resource``, ``st.cache_data`` and the model's
  own fabric caches), a new session opens the page on the preset: what the first visitor of
  that page and preset waits for;
- **warm**: a new session opens the same page again (the best of ``--warm-runs``): the
  caches are shared across sessions, so this is any later visitor, or a page switch back.

With ``--browser`` each preset also gets a fresh ``streamlit run app.py`` server, warmed on
another preset the same way, and Debian's chromium opens every page of the preset in
navigation order: **cold** is the first visit by URL (a new session: the browser loads the
app, pages share the server's caches as they do for a user walking through the pages),
**warm** a switch back to the page through the sidebar's navigation in the same session. A
page counts as drawn when its title is shown, the script is idle, no skeleton is left and
every plotly chart has drawn. ``--browser`` also times the *first render*: the default
Overview and a bare Streamlit page with two plotly charts (``benchmarks/bare_two_charts.py``,
the floor of any page), each opened ``--first-render-samples`` times in a new browser context
(no cache, as a first visitor), interleaved on two warmed servers, with the ratio of medians.

Prints one table per runner (page x preset, ``cold / warm`` seconds), the slowest cold and
warm page, and how many cells miss the targets (2 s cold, 0.5 s warm). ``--json FILE`` also
writes every figure. Wall times on this machine; nothing here is asserted by the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

COLD_TARGET_S = 2.0
WARM_TARGET_S = 0.5


def _pages() -> list[Any]:
    from conftest import app_pages  # the navigation, parsed from app.py as the tests do

    return app_pages()


def _presets() -> list[str]:
    from fabric_model.presets import list_presets

    return [p.name for p in list_presets()]


def _other_preset(preset: str) -> str:
    return next(p for p in _presets() if p != preset)


def _clear_caches() -> None:
    import streamlit as st

    st.cache_resource.clear()
    st.cache_data.clear()
    try:
        from fabric_model.training.fabric import clear_caches
    except ImportError:  # the model moved its caches; the UI caches are the ones that count
        return
    clear_caches()
    from fabric_model.collectives.context import clear_route_cache

    clear_route_cache()  # routed patterns kept across communicators (issue 13)


# ------------------------------------------------------------------------------ AppTest
def _apptest_worker(preset: str, scripts: list[str], warm_runs: int, timeout_s: float) -> None:
    """Time each page on ``preset`` in this fresh process; print one JSON line per page."""
    t0 = time.perf_counter()
    from streamlit.testing.v1 import AppTest

    import ui.facade  # noqa: F401  (the app's heavy imports: plotly, pandas, the model)

    app = str(ROOT / "app.py")

    def run(script: str, name: str) -> tuple[float, str]:
        at = AppTest.from_file(app, default_timeout=timeout_s)
        at.query_params["preset"] = name
        t = time.perf_counter()
        try:
            at.switch_page(script).run()
        except RuntimeError as exc:  # AppTest's timeout
            return time.perf_counter() - t, f"timeout: {exc}"
        error = "; ".join(str(e.value)[:200] for e in at.exception)
        return time.perf_counter() - t, error

    warmup_s, _ = run(scripts[0], _other_preset(preset))
    print(json.dumps({"start_s": time.perf_counter() - t0, "warmup_s": warmup_s}), flush=True)
    for script in scripts:
        _clear_caches()
        cold_s, error = run(script, preset)
        warm = [run(script, preset)[0] for _ in range(warm_runs)] if not error else []
        print(
            json.dumps(
                {
                    "page": script,
                    "cold_s": cold_s,
                    "warm_s": min(warm) if warm else None,
                    "error": error,
                }
            ),
            flush=True,
        )


# ------------------------------------------------------------------------------ browser
def _browser_worker(preset: str, scripts: list[str], warm_runs: int, timeout_s: float) -> None:
    """Time each page on ``preset`` in chromium against a fresh server; print JSON lines."""
    from conftest import CHROME_ARGS, chrome_path, run_streamlit, wait_for_page
    from playwright.sync_api import sync_playwright

    pages = {p.script: p for p in _pages()}
    t0 = time.perf_counter()
    with run_streamlit(f"page-speed-{preset}.log") as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chrome_path(), args=CHROME_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1600})
        page = context.new_page()
        timeout_ms = timeout_s * 1000

        def visit(script: str, name: str) -> float:
            p = pages[script]
            t = time.perf_counter()
            page.goto(f"{url}{p.url}?preset={name}")
            wait_for_page(page, p.title, timeout_ms)
            return time.perf_counter() - t

        def switch(script: str) -> float:
            """Leave for another page, then come back through the sidebar's navigation."""
            p = pages[script]
            other = next(q for q in pages.values() if q.script != script)
            nav = page.locator("[data-testid=stSidebarNav]")
            nav.get_by_role("link", name=other.title, exact=True).click()
            wait_for_page(page, other.title, timeout_ms)
            t = time.perf_counter()
            nav.get_by_role("link", name=p.title, exact=True).click()
            wait_for_page(page, p.title, timeout_ms)
            return time.perf_counter() - t

        warmup_s = visit(scripts[0], _other_preset(preset))
        print(json.dumps({"start_s": time.perf_counter() - t0, "warmup_s": warmup_s}), flush=True)
        for script in scripts:
            try:
                cold_s, error = visit(script, preset), ""
                warm = min(switch(script) for _ in range(warm_runs))
            except Exception as exc:  # a timeout: report it, go on with the next page
                cold_s, warm, error = timeout_s, None, f"{type(exc).__name__}: {exc}"[:200]
            print(
                json.dumps({"page": script, "cold_s": cold_s, "warm_s": warm, "error": error}),
                flush=True,
            )
        browser.close()


def _first_render_worker(samples: int, timeout_s: float) -> None:
    """Time the first render of the default Overview and of the bare two-chart page.

    Each sample opens a new browser context (no HTTP cache, no cookies: a first visitor) on
    each server in turn, so both see the same machine at the same minutes; the servers are
    warmed first, so the figures are the browser's first visit, not the server's first run.
    Prints one JSON line: every sample of both, their medians and the ratio.
    """
    os.environ.pop("FABRIC_MODEL_CHECK_FLOWS", None)  # the tests' full flow checks: not a user's
    from conftest import CHROME_ARGS, chrome_path, run_streamlit, wait_for_page
    from playwright.sync_api import sync_playwright

    bare = ROOT / "benchmarks" / "bare_two_charts.py"
    timeout_ms = timeout_s * 1000
    with (
        run_streamlit("first-render-app.log") as app_url,
        run_streamlit("first-render-bare.log", script=bare) as bare_url,
        sync_playwright() as pw,
    ):
        browser = pw.chromium.launch(executable_path=chrome_path(), args=CHROME_ARGS)

        def first_visit(url: str) -> float:
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            page = context.new_page()
            t = time.perf_counter()
            page.goto(url)
            wait_for_page(page, "Overview", timeout_ms)
            page.wait_for_function(
                "() => document.querySelectorAll('[data-testid=stMain] .main-svg').length >= 2",
                timeout=timeout_ms,
            )
            elapsed = time.perf_counter() - t
            context.close()
            return elapsed

        for url in (app_url, bare_url):  # warm the servers: imports, numba, first script run
            first_visit(url)
        times: dict[str, list[float]] = {"overview": [], "bare": []}
        for _ in range(samples):
            times["overview"].append(first_visit(app_url))
            times["bare"].append(first_visit(bare_url))
        browser.close()
    med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    print(json.dumps({"samples": times, "median_s": med, "ratio": med["overview"] / med["bare"]}))


# ------------------------------------------------------------------------------ driver
def _run_preset(
    runner: str, preset: str, scripts: list[str], args: argparse.Namespace
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        runner,
        "--presets",
        preset,
        "--pages",
        ",".join(scripts),
        "--warm-runs",
        str(args.warm_runs),
        "--timeout",
        str(args.timeout),
    ]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=args.timeout * (1 + args.warm_runs) * len(scripts) + 300,
    )
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    if not lines:  # the app did not even import: every page of the preset is an error
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])[-300:]
        return (
            {"start_s": 0.0, "warmup_s": 0.0},
            [
                {"page": s, "cold_s": 0.0, "warm_s": None, "error": f"worker: {tail}"}
                for s in scripts
            ],
        )
    return lines[0], lines[1:]


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _table(
    runner: str,
    results: dict[str, dict[str, Any]],
    starts: dict[str, dict[str, Any]],
    scripts: list[str],
) -> str:
    presets = list(results)
    name_w = max(len(Path(s).stem) for s in scripts) + 2
    col_w = max(13, *(len(p) for p in presets)) + 2
    out = [
        f"## {runner}: seconds, cold / warm (targets {COLD_TARGET_S:g} s / "
        f"{WARM_TARGET_S:g} s; * = over, ! = error)",
        "page".ljust(name_w) + "".join(p.rjust(col_w) for p in presets),
    ]
    for s in scripts:
        cells = []
        for p in presets:
            r = results[p].get(s)
            if r is None:
                cells.append("-")
                continue
            mark = (
                "!"
                if r["error"]
                else (
                    "*"
                    if r["cold_s"] > COLD_TARGET_S or (r["warm_s"] or 0) > WARM_TARGET_S
                    else " "
                )
            )
            cells.append(f"{_fmt(r['cold_s'])} / {_fmt(r['warm_s'])}{mark}")
        out.append(Path(s).stem.ljust(name_w) + "".join(c.rjust(col_w) for c in cells))
    out.append(
        "start".ljust(name_w)
        + "".join(
            f"{starts[p]['start_s']:.1f}+{starts[p]['warmup_s']:.1f}".rjust(col_w) for p in presets
        )
        + "   (imports + first page on another preset)"
    )
    rows = [
        (r["cold_s"], r["warm_s"] or 0.0, Path(s).stem, p, r["error"])
        for p in presets
        for s, r in results[p].items()
    ]
    if rows:
        cold = max(rows)
        warm = max(rows, key=lambda r: r[1])
        over = sum(r[0] > COLD_TARGET_S or r[1] > WARM_TARGET_S for r in rows)
        out.append(
            f"slowest cold: {cold[2]} on {cold[3]}, {cold[0]:.2f} s; slowest warm: "
            f"{warm[2]} on {warm[3]}, {warm[1]:.2f} s; {over} of {len(rows)} "
            f"page x preset cells over target"
        )
        for r in rows:
            if r[4]:
                out.append(f"error: {r[2]} on {r[3]}: {r[4]}")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", default="", help="comma-separated (default: all)")
    parser.add_argument(
        "--pages", default="", help="comma-separated page names or scripts (default: all)"
    )
    parser.add_argument("--browser", action="store_true", help="also time pages in chromium")
    parser.add_argument("--no-apptest", action="store_true", help="skip the AppTest runner")
    parser.add_argument("--warm-runs", type=int, default=2, help="warm runs, best kept")
    parser.add_argument("--timeout", type=float, default=600.0, help="per page run, seconds")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument(
        "--first-render-samples",
        type=int,
        default=5,
        help="with --browser: fresh-browser first visits of the Overview and the bare page",
    )
    parser.add_argument(
        "--worker", choices=("apptest", "browser", "first-render"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()

    all_scripts = [p.script for p in _pages()]
    wanted = [x.strip() for x in args.pages.split(",") if x.strip()]
    scripts = [s for s in all_scripts if not wanted or s in wanted or Path(s).stem in wanted]
    presets = [x.strip() for x in args.presets.split(",") if x.strip()] or _presets()

    if args.worker == "first-render":
        _first_render_worker(args.first_render_samples, args.timeout)
        return 0
    if args.worker:
        worker = _apptest_worker if args.worker == "apptest" else _browser_worker
        worker(presets[0], scripts, args.warm_runs, args.timeout)
        return 0

    runners = ([] if args.no_apptest else ["apptest"]) + (["browser"] if args.browser else [])
    report: dict[str, Any] = {}
    for runner in runners:
        results: dict[str, dict[str, Any]] = {}
        starts: dict[str, dict[str, Any]] = {}
        for preset in presets:
            t = time.perf_counter()
            starts[preset], lines = _run_preset(runner, preset, scripts, args)
            results[preset] = {r["page"]: r for r in lines}
            print(
                f"[{runner}] {preset}: {time.perf_counter() - t:.0f} s "
                + json.dumps(results[preset]),
                file=sys.stderr,
                flush=True,
            )
        print(_table(runner, results, starts, scripts) + "\n", flush=True)
        report[runner] = {"results": results, "start": starts}
    if args.browser:
        report["first_render"] = first = _first_render(args)
        if first:
            med = first["median_s"]
            print(
                f"first render in a fresh browser (median of {args.first_render_samples}): "
                f"default Overview {med['overview']:.2f} s, bare two-chart page "
                f"{med['bare']:.2f} s, ratio {first['ratio']:.2f} (target <= 1.5)"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


def _first_render(args: argparse.Namespace) -> dict[str, Any] | None:
    """Run the first-render worker in its own process; its JSON line, or None on a failure."""
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        "first-render",
        "--first-render-samples",
        str(args.first_render_samples),
        "--timeout",
        str(args.timeout),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    if not lines:
        print("first render: " + " | ".join(proc.stderr.strip().splitlines()[-3:]))
        return None
    return lines[-1]


if __name__ == "__main__":
    sys.exit(main())
