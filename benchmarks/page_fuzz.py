"""Open many random scenarios on every dashboard page (AppTest) and print crashes per thousand.

Run: ``python benchmarks/page_fuzz.py --n 1000 --seed 0`` (``--page scaling`` for one page,
``--max-gpus 4096`` for larger clusters). The cases come from the generator that drives
``tests/test_page_fuzz.py`` (``tests/page_fuzz_cases.py``, on top of the CLI fuzzer's
scenarios): case ``i`` of seed ``s`` is drawn from ``random.Random(f"{s}:{i}")`` on page
``i mod 10`` (or the one ``--page``), so any case reruns alone with ``--seed s --only i``.

A crash is a page that breaks the contract: an exception element, anything escaping the
script run (a timeout included), an error or warning that names no scenario key (nor a page
parameter, nor a known physics finding), a metric showing nan or inf. Each prints the URL
that reproduces it; the summary gives cases, crashes and messages per page, crashes per
thousand, and the slowest case.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabric_model.cli import format_table
from tests.page_fuzz_cases import (
    PAGES,
    describe_page_failure,
    quiet_streamlit,
    random_page_case,
    run_page_case,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="cases to run (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the run (default 0)")
    parser.add_argument(
        "--page", choices=[Path(p).stem for p in PAGES], help="only this page (file stem)"
    )
    parser.add_argument("--only", type=int, metavar="I", help="run case I of the seed alone")
    parser.add_argument(
        "--max-gpus", type=int, default=512, help="largest preset and drawn cluster (512)"
    )
    parser.add_argument("--timeout", type=float, default=300, help="per page run, s (300)")
    parser.add_argument(
        "--messages", action="store_true", help="print every distinct error/warning seen"
    )
    args = parser.parse_args()
    quiet_streamlit()  # bare-mode warnings on every call; failures are printed below

    pages = [f"pages/{args.page}.py"] if args.page else list(PAGES)
    counts: dict[str, Counter[str]] = {p: Counter() for p in pages}
    seen: Counter[str] = Counter()
    crashes = 0
    slowest = (0.0, "")
    t0 = time.perf_counter()
    indices = [args.only] if args.only is not None else range(args.n)
    for i in indices:
        page = pages[i % len(pages)]
        case = random_page_case(random.Random(f"{args.seed}:{i}"), page, args.max_gpus)
        t = time.perf_counter()
        outcome = run_page_case(case, args.timeout)
        dt = time.perf_counter() - t
        slowest = max(slowest, (dt, f"case {i}: {case.url}"))
        counts[page]["cases"] += 1
        counts[page]["messages"] += len(outcome.messages)
        seen.update(m[:160] for m in outcome.messages)
        if outcome.ok:
            continue
        crashes += 1
        counts[page]["crashes"] += 1
        lines = describe_page_failure(case, outcome).splitlines()
        print(f"CRASH case {i}: {lines[0]}\n    " + "\n    ".join(lines[1:8]), flush=True)
    elapsed_s = time.perf_counter() - t0
    rows = [
        {
            "page": Path(p).stem,
            "cases": c["cases"],
            "crashes": c["crashes"],
            "messages": c["messages"],
        }
        for p, c in counts.items()
        if c["cases"]
    ]
    total = len(indices)
    if args.messages:
        for text, n in seen.most_common():
            print(f"{n:5d}  {text}")
    print(format_table(rows))
    print(f"slowest: {slowest[0]:.1f} s ({slowest[1]})")
    print(
        f"{total} page runs (seed {args.seed}, up to {args.max_gpus:,} GPUs) in "
        f"{elapsed_s:.0f} s: {crashes} crash(es), {1000 * crashes / max(total, 1):.1f} per "
        "thousand"
    )
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
