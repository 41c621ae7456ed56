"""Run many random scenarios through every CLI verb and print crashes per thousand.

Run: ``python benchmarks/fuzz.py --n 2000 --seed 0`` (``--verb collective`` for one verb).
The cases come from the generator that drives ``tests/test_fuzz.py``
(``tests/fuzz_scenarios.py``): case ``i`` of seed ``s`` is drawn from
``random.Random(f"{s}:{i}")``, so any case reruns alone with ``--seed s --only i``.

A crash is an uncaught exception (a traceback) or output that breaks the contract (a
refusal that is not one line, a number that is not finite). Each crash prints the command
that reproduces it and the last line of its traceback; the summary gives results, clean
refusals and crashes per verb, and crashes per thousand cases.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabric_model.cli import format_table
from tests.fuzz_scenarios import VERB_WEIGHTS, describe_failure, random_case, run_case


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="cases to run (default 2000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the run (default 0)")
    parser.add_argument("--verb", choices=sorted(VERB_WEIGHTS), help="only this verb")
    parser.add_argument("--only", type=int, metavar="I", help="run case I of the seed alone")
    args = parser.parse_args()

    counts: dict[str, Counter[str]] = {v: Counter() for v in sorted(VERB_WEIGHTS)}
    crashes = 0
    t0 = time.perf_counter()
    indices = [args.only] if args.only is not None else range(args.n)
    with tempfile.TemporaryDirectory(prefix="fabric-fuzz-") as tmp:
        workdir = Path(tmp)
        for i in indices:
            case = random_case(random.Random(f"{args.seed}:{i}"), verb=args.verb)
            outcome = run_case(case, workdir)
            if outcome.ok:
                counts[case.verb]["result" if outcome.status == 0 else "refused"] += 1
                continue
            crashes += 1
            counts[case.verb]["crash"] += 1
            kept = workdir.parent / f"fabric-fuzz-{args.seed}-{i}.log"
            if case.log_text:
                kept.write_text(case.log_text, encoding="utf-8")
            detail = describe_failure(case, outcome, kept.parent).replace(
                str(kept.parent / "nccl.log"), str(kept)
            )
            lines = detail.splitlines()
            print(f"CRASH case {i}: {lines[0]}\n    " + "\n    ".join(lines[-2:]), flush=True)
    elapsed_s = time.perf_counter() - t0
    rows = [
        {"verb": v, "results": c["result"], "refused": c["refused"], "crashes": c["crash"]}
        for v, c in counts.items()
        if sum(c.values())
    ]
    total = len(indices)
    print(format_table(rows))
    print(
        f"{total} cases (seed {args.seed}) in {elapsed_s:.0f} s: {crashes} crash(es), "
        f"{1000 * crashes / max(total, 1):.1f} per thousand"
    )
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
