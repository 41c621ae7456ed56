"""CLI start: whole-process wall time of ``python -m fabric_model <verb>``, best of N.

Run: ``python benchmarks/cli_start.py [--repeat 5] [--preset NAME] [--imports]``.

Each verb runs in a fresh interpreter (as a user or a script runs it), on the default
preset unless ``--preset`` names another, output discarded. The numba cache on disk is
warmed by one untimed run of each verb first and the package's bytecode is compiled (as
an installed package has it), so the figures are a normal start, not the first compile of a
fresh clone. Prints per verb the best and the median of ``--repeat`` runs
against the targets (``presets`` and ``keys`` 0.5 s, ``bom``, ``step`` and ``collective``
1 s); ``--imports`` also lists the slowest imports of each verb (``python -X importtime``).
Wall times on this machine; nothing here is asserted by the tests.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: (verb arguments, target seconds)
VERBS: list[tuple[list[str], float]] = [
    (["--help"], 0.5),
    (["presets"], 0.5),
    (["keys"], 0.5),
    (["bom"], 1.0),
    (["step"], 1.0),
    (["collective"], 1.0),
    (["bom", "--compare"], 1.0),
    (["collective", "--op", "alltoall"], 1.0),
]
_TAKES_PRESET = {"bom", "step", "collective"}


def _cmd(args: list[str], preset: str | None) -> list[str]:
    extra = ["--preset", preset] if preset and args[0] in _TAKES_PRESET else []
    return [sys.executable, "-m", "fabric_model", *args, *extra]


def _run(cmd: list[str], root: Path = ROOT) -> float:
    t = time.perf_counter()
    proc = subprocess.run(
        cmd,
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    elapsed = time.perf_counter() - t
    if proc.returncode:
        raise RuntimeError(
            f"{' '.join(cmd[2:])} exited {proc.returncode}: "
            f"{proc.stderr.decode(errors='replace').strip()[-300:]}"
        )
    return elapsed


def _slowest_imports(cmd: list[str], root: Path = ROOT, n: int = 6) -> list[str]:
    proc = subprocess.run(
        [cmd[0], "-X", "importtime", *cmd[1:]],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = (x.strip() for x in line[len("import time:") :].split("|"))
        if cumulative.isdigit() and name.split(".")[0] != "encodings":
            depth = (len(name) - len(name.lstrip())) // 2
            rows.append((int(cumulative), depth, name.strip()))
    top = sorted((r for r in rows if r[1] <= 2), reverse=True)[:n]
    return [f"{name} {us / 1e3:.0f} ms" for us, _, name in top]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per verb (best is kept)")
    parser.add_argument("--preset", default=None, help="preset for bom/step/collective")
    parser.add_argument("--imports", action="store_true", help="list the slowest imports")
    parser.add_argument(
        "--root",
        type=Path,
        default=ROOT,
        help="checkout to run (default this one), e.g. a copy at an older commit",
    )
    args = parser.parse_args()

    width = max(len(" ".join(v)) for v, _ in VERBS) + 2
    print(
        f"{'verb'.ljust(width)}{'best s':>8}{'median s':>10}{'target s':>10}  ok"
        + (f"   (preset {args.preset})" if args.preset else "")
    )
    # bytecode as an installed package has it, even where PYTHONDONTWRITEBYTECODE=1 keeps
    # the warm-up runs from writing it (each start would otherwise compile every module)
    compileall.compile_dir(str(args.root / "fabric_model"), quiet=1)
    missed = 0
    for verb, target in VERBS:
        cmd = _cmd(verb, args.preset)
        _run(cmd, args.root)  # warm the disk caches (numba, bytecode); not timed
        times = [_run(cmd, args.root) for _ in range(args.repeat)]
        best = min(times)
        missed += best > target
        print(
            f"{' '.join(verb).ljust(width)}{best:>8.2f}{statistics.median(times):>10.2f}"
            f"{target:>10.1f}  {'yes' if best <= target else 'NO'}",
            flush=True,
        )
        if args.imports:
            for item in _slowest_imports(cmd, args.root):
                print(f"{'':<{width}}  {item}")
    print(f"{missed} verb(s) over target" if missed else "every verb within its target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
