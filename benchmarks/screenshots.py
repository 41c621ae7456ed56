"""Regenerate the README's page screenshots in ``assets/screenshots/`` (light theme).

Run: ``python benchmarks/screenshots.py [--url URL] [--pages Overview,Cost]``.

Starts ``streamlit run app.py`` (or uses ``--url``), reads the pages from the sidebar's
navigation links, opens each page in Streamlit's light theme on the default scenario, waits
until its charts have drawn, refuses a page that shows an exception or an error alert, and
saves the top of the page (sidebar, title, metrics, first charts) as
``assets/screenshots/<page>.png``: the viewport is the crop (cut above the first element the
viewport's bottom edge would slice), so no image library is needed.
Then the Topology page's diagram alone for the README tour's four designs
(:data:`DIAGRAMS`: a 1K fat-tree, a 16K dragonfly+, a 4K torus, a 4.6K NVL72 fat-tree) as
``assets/screenshots/diagram-<preset>.png`` (``--pages diagrams`` for only these).
Then the meeting-room views (``--pages views`` for only these): the Scaling page's "versus
the best fabric" section (its sentence and chart) as ``versus-best.png`` and presentation
mode's second view (``?present=1&slide=2``) as ``present.png``.
The Cluster page runs on demand: its picture (``cluster.png``) opens the simulation section
of the README's example (4,096 GPUs, a 4:1 spine, 500 jobs) and shows its charts over time
(utilisation, queue, fragmentation; which job holds each server under first-fit).
Exits with status 1 if a page is broken or an image exceeds ``--max-kb``.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from pathlib import Path
from urllib.parse import urlsplit

from load_test import CHROME_ARGS, PROBLEMS_JS, chrome_path, open_page, streamlit_server

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "assets" / "screenshots"
NAV_LINKS = "[data-testid=stSidebarNav] a[data-testid=stSidebarNavLink]"
TIMEOUT_MS = 120_000
#: Presets whose topology diagram the README tour shows.
DIAGRAMS = ("dgx-h100-ib-ndr", "dragonfly-plus-16k", "torus-3d-4k", "gb300-nvl72-xdr")
#: Where to cut the picture: just above the first element that would be cut by the viewport's
#: bottom edge (main area or sidebar), unless that would lose more than 40 % of the height.
_CROP_JS = """(height) => {
  let cut = height;
  const sel = ['stMain', 'stSidebar'].map(
      t => `[data-testid=${t}] [data-testid=stElementContainer]`).join(', ');
  for (const e of document.querySelectorAll(sel)) {
    const r = e.getBoundingClientRect();
    if (r.height > 0 && r.bottom > height && r.top < cut && r.top > 0.6 * height)
      cut = r.top;
  }
  return Math.floor(cut) - (cut < height ? 8 : 0);
}"""


def slug(title: str) -> str:
    """File name of a page: its title in lower case, runs of other characters as '-'."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


async def discover_pages(page) -> list[tuple[str, str]]:
    """``(title, URL path)`` of every page in the sidebar navigation, in its order."""
    more = page.locator("[data-testid=stSidebarNavViewButton]")
    if await more.count() and "more" in (await more.inner_text()).lower():
        await more.click()  # Streamlit folds long navigations behind "View more"
    links = page.locator(NAV_LINKS)
    await links.first.wait_for()
    pages = []
    for link in await links.all():
        title = (await link.inner_text()).strip()
        pages.append((title, urlsplit(await link.get_attribute("href") or "/").path or "/"))
    return pages


async def take(base: str, args: argparse.Namespace) -> int:
    from playwright.async_api import async_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    status = 0
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=chrome_path(), args=CHROME_ARGS)
        context = await browser.new_context(
            viewport={"width": args.width, "height": args.height}, color_scheme="light"
        )
        page = await context.new_page()
        await open_page(page, base + "/?embed_options=light_theme", TIMEOUT_MS)
        pages = await discover_pages(page)
        wanted = {w.strip().lower() for w in args.pages.split(",")} if args.pages else None
        for title, path in pages:
            if wanted and title.lower() not in wanted and slug(title) not in wanted:
                continue
            if slug(title) == "cluster":
                status |= await take_cluster(page, base, path, args)
                continue
            await open_page(page, f"{base}{path}?embed_options=light_theme", TIMEOUT_MS)
            problems = await page.evaluate(PROBLEMS_JS)
            if problems:
                print(f"{title}: not saved, the page shows {', '.join(problems)}")
                status = 1
                continue
            out = OUT / f"{slug(title)}.png"
            height = await page.evaluate(_CROP_JS, args.height)
            await page.screenshot(
                path=str(out), clip={"x": 0, "y": 0, "width": args.width, "height": height}
            )
            kb = out.stat().st_size / 1024
            too_big = kb > args.max_kb
            status |= too_big
            print(
                f"{title:<14} {path:<16} -> {out.relative_to(ROOT)} ({kb:,.0f} KB"
                + (f", over {args.max_kb:g} KB)" if too_big else ")")
            )
        if not wanted or "diagrams" in wanted:
            status |= await take_diagrams(page, base, args)
        if not wanted or "views" in wanted:
            status |= await take_views(page, base, args)
        if (
            wanted
            and not any(title.lower() in wanted or slug(title) in wanted for title, _ in pages)
            and "diagrams" not in wanted
            and "views" not in wanted
        ):
            print(f"no page matches --pages {args.pages}; pages: " + ", ".join(t for t, _ in pages))
            status = 1
        await browser.close()
    return status


async def take_diagrams(page, base: str, args: argparse.Namespace) -> int:
    """Save the Topology page's diagram of each of :data:`DIAGRAMS`; 1 if one fails."""
    status = 0
    for preset in DIAGRAMS:
        await open_page(
            page, f"{base}/topology?preset={preset}&embed_options=light_theme", TIMEOUT_MS
        )
        problems = await page.evaluate(PROBLEMS_JS)
        if problems:
            print(f"diagram {preset}: not saved, the page shows {', '.join(problems)}")
            status = 1
            continue
        out = OUT / f"diagram-{preset}.png"
        chart = page.locator("[data-testid=stPlotlyChart]").first
        await chart.scroll_into_view_if_needed()
        await chart.screenshot(path=str(out))
        kb = out.stat().st_size / 1024
        too_big = kb > args.max_kb
        status |= too_big
        print(
            f"diagram {preset:<20} -> {out.relative_to(ROOT)} ({kb:,.0f} KB"
            + (f", over {args.max_kb:g} KB)" if too_big else ")")
        )
    return status


def _saved(out: Path, what: str, args: argparse.Namespace) -> int:
    kb = out.stat().st_size / 1024
    too_big = kb > args.max_kb
    print(
        f"{what:<28} -> {out.relative_to(ROOT)} ({kb:,.0f} KB"
        + (f", over {args.max_kb:g} KB)" if too_big else ")")
    )
    return int(too_big)


async def take_cluster(page, base: str, path: str, args: argparse.Namespace) -> int:
    """Save the Cluster page's simulation: its charts over time and the servers by job."""
    await page.set_viewport_size({"width": args.width, "height": 2400})
    query = (
        "cluster.n_gpus=4096&fabric.oversubscription=4&schedule.jobs=500&schedule.view=first-fit"
    )
    await open_page(page, f"{base}{path}?{query}&embed_options=light_theme", TIMEOUT_MS)
    await page.get_by_text("Simulate every policy on this job mix").click()
    servers = page.locator(".st-key-cluster_servers [data-testid=stPlotlyChart] .main-svg")
    await servers.first.wait_for(timeout=TIMEOUT_MS)
    await page.wait_for_timeout(800)
    problems = await page.evaluate(PROBLEMS_JS)
    if problems:
        print(f"Cluster: not saved, the page shows {', '.join(problems)}")
        await page.set_viewport_size({"width": args.width, "height": args.height})
        return 1
    top = page.locator(".st-key-cluster_time")
    await top.evaluate("e => e.scrollIntoView({block: 'start'})")  # the main area scrolls
    await page.wait_for_timeout(300)
    a = await top.bounding_box()
    b = await page.locator(".st-key-cluster_servers").bounding_box()
    if a is None or b is None:
        print("Cluster: the charts are not on the page")
        return 1
    out = OUT / "cluster.png"
    await page.screenshot(
        path=str(out),
        clip={
            "x": a["x"] - 8,
            "y": a["y"] - 8,
            "width": a["width"] + 16,
            "height": min(b["y"] + b["height"], a["y"] + 1200) - a["y"] + 16,
        },
    )
    await page.set_viewport_size({"width": args.width, "height": args.height})
    return _saved(out, "Cluster: simulation", args)


async def take_views(page, base: str, args: argparse.Namespace) -> int:
    """Save the versus-best section and a presentation-mode view; 1 if one fails."""
    status = 0
    await page.set_viewport_size({"width": args.width, "height": 1600})  # the whole section
    await open_page(page, f"{base}/scaling?embed_options=light_theme", TIMEOUT_MS)
    problems = await page.evaluate(PROBLEMS_JS)
    if problems:
        print(f"versus-best: not saved, the page shows {', '.join(problems)}")
        return 1
    heading = page.locator("[data-testid=stMain] h3").filter(has_text="Versus the best fabric")
    chart = page.locator(".st-key-scaling_vs_best")
    await heading.scroll_into_view_if_needed()
    top = await heading.bounding_box()
    bottom = await chart.bounding_box()
    if top is None or bottom is None:
        print("versus-best: the section is not on the page")
        return 1
    out = OUT / "versus-best.png"
    await page.screenshot(
        path=str(out),
        clip={
            "x": bottom["x"] - 8,
            "y": top["y"] - 8,
            "width": bottom["width"] + 16,
            "height": bottom["y"] + bottom["height"] - top["y"] + 16,
        },
    )
    status |= _saved(out, "Scaling: versus the best", args)
    await page.set_viewport_size({"width": args.width, "height": args.height})
    await page.goto(f"{base}/?present=1&slide=2&embed_options=light_theme")
    await (
        page.locator("[data-testid=stMain] h1")
        .filter(has_text="Where the step goes")
        .wait_for(timeout=TIMEOUT_MS)
    )
    await page.locator("[data-testid=stPlotlyChart] .main-svg").first.wait_for(timeout=TIMEOUT_MS)
    await page.wait_for_timeout(500)
    out = OUT / "present.png"
    await page.screenshot(path=str(out))
    status |= _saved(out, "presentation mode, view 2", args)
    return status


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="base URL of a running server (default: start one)")
    p.add_argument("--pages", help="comma-separated page titles (default: every page)")
    p.add_argument("--width", type=int, default=1280, help="viewport width in pixels")
    p.add_argument("--height", type=int, default=900, help="viewport height, the largest crop")
    p.add_argument("--max-kb", type=float, default=250, help="largest image allowed")
    args = p.parse_args(argv)
    if args.url:
        return asyncio.run(take(args.url.rstrip("/"), args))
    with streamlit_server("screenshots-streamlit.log") as (base, _pid):
        return asyncio.run(take(base, args))


if __name__ == "__main__":
    sys.exit(main())
