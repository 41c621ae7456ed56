"""Write nccl-tests JSON files the way nccl-tests writes them, for the parser's tests.

A Python transcription of the JSON writer in NVIDIA/nccl-tests ``src/util.cu`` (2.19.6,
``JSON_FILE_VERSION 3``; keys and their order from ``jsonOutputInit``, ``writeDeviceReport``,
``writeBenchmarkLinePreamble``/``Body``/``Terminator``, ``writePerIterReport``,
``writeResultFooter``, ``writeErrors`` and ``jsonOutputFinalize``): one object, no line
breaks, doubles printed with ``%lf`` (six decimals), a NaN as the string ``"nan"``, booleans
as the strings ``"true"``/``"false"``, the root as ``%6i``. Versions 1 and 2 drop the keys
added later (``per_iter_timing`` in 2, ``per_iter_skip`` in 3).

Run as a script to regenerate the fixtures in ``tests/data/nccl/*.json``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "nccl"
NOTE = (
    "FABRIC_MODEL_FIXTURE=synthetic example for fabric_model tests in the schema of "
    "NVIDIA/nccl-tests src/util.cu 2.19.6; numbers are illustrative, NOT measurements"
)


def _str(s: str) -> str:
    out = s.replace("\\", "\\\\").replace('"', '\\"').replace("/", "\\/")
    return '"' + out.replace("\t", "\\t").replace("\n", "\\n") + '"'


def _double(x: float) -> str:
    return '"nan"' if x != x else f"{x:f}"


def _bool(b: bool) -> str:
    return _str("true" if b else "false")


def _obj(items: list[tuple[str, str]]) -> str:
    return "{" + ",".join(f"{_str(k)}:{v}" for k, v in items) + "}"


def _list(values: list[str]) -> str:
    return "[" + ",".join(values) + "]"


@dataclass
class Half:
    """One of out_of_place / in_place for one size."""

    time_us: float
    algbw_GBps: float
    busbw_GBps: float
    wrong: float | None = 0.0
    iter_times_us: list[float] | None = None  # with -I 1


@dataclass
class Result:
    size: int
    count: int
    dtype: str
    redop: str
    root: int
    oop: Half | None
    ip: Half
    iterations: int = 20


@dataclass
class Run:
    binary: str = "./build/all_reduce_perf"
    args: tuple[str, ...] = ("-b", "8", "-e", "8G", "-f", "2", "-g", "8")
    version: int = 3
    nccl_version: int = 22703
    nthreads: int = 1
    ngpus: int = 8
    devices: list[tuple[int, str, str]] = field(
        default_factory=lambda: [(0, "dgx-h100-01", "NVIDIA H100 80GB HBM3")]
    )
    results: list[Result] = field(default_factory=list)
    per_iter: bool = True
    per_iter_skip: int = 0
    min_bw: float | None = None  # NCCL_TESTS_MIN_BW
    errors: tuple[str, ...] = ()
    out_of_bounds: int = 0

    def avg_busbw(self) -> float:
        values = [h.busbw_GBps for r in self.results for h in (r.oop, r.ip) if h is not None]
        return sum(values) / len(values)


def _stats(times: list[float], skip: int) -> list[tuple[str, str]]:
    """``computeIterStats`` + ``writePerIterReport`` (times in microseconds)."""
    kept = sorted(times[skip:])
    n = len(kept)

    def pct(p: int) -> float:
        return kept[min(n - 1, (n * p + 99) // 100 - 1)]

    avg = sum(kept) / n
    stdev = math.sqrt(sum((t - avg) ** 2 for t in kept) / n)
    return [
        ("skipped_iterations", str(skip)),
        ("min_us", _double(kept[0])),
        ("max_us", _double(kept[-1])),
        ("avg_us", _double(avg)),
        ("p50_us", _double(kept[n // 2])),
        ("p95_us", _double(pct(95))),
        ("p99_us", _double(pct(99))),
        ("stdev_us", _double(stdev)),
        ("cv_pct", _double(stdev / avg * 100 if avg > 0 else 0.0)),
        ("times_us", _list([_double(t) for t in times])),
    ]


def _half(h: Half) -> str:
    return _obj(
        [
            ("time", _double(h.time_us)),
            ("alg_bw", _double(h.algbw_GBps)),
            ("bus_bw", _double(h.busbw_GBps)),
            ("nwrong", "null" if h.wrong is None else _double(h.wrong)),
        ]
    )


def write_json(run: Run) -> str:
    """Return the run's JSON text as nccl-tests writes it."""
    top: list[tuple[str, str]] = [
        ("version", str(run.version)),
        ("start_time", _str("2026-11-30 10:00:00")),
        ("args", _list([_str(a) for a in (run.binary, *run.args)])),
        ("env", _list([_str(NOTE), _str("NCCL_DEBUG=VERSION")])),
        ("nccl_version", str(run.nccl_version)),
    ]
    config = [
        ("nthreads", str(run.nthreads)),
        ("ngpus", str(run.ngpus)),
        ("minimum_bytes", str(run.results[0].size if run.results else 8)),
        ("maximum_bytes", str(run.results[-1].size if run.results else 8)),
        ("step_factor", "2"),
        ("warmup_iters", "5"),
        ("iterations", "20"),
        ("aggregated_iterations", "1"),
        ("validation", "1"),
        ("graph", "0"),
        ("blocking_collectives", _bool(False)),
    ]
    if run.version >= 2:
        config.append(("per_iter_timing", _bool(run.per_iter)))
    if run.version >= 3:
        config.append(("per_iter_skip", str(run.per_iter_skip)))
    config.append(("parallel_init", _bool(False)))
    devices = [
        _obj(
            [
                ("rank", str(rank)),
                ("group", "0"),
                ("pid", str(48213 + rank)),
                ("hostname", _str(host)),
                ("device", "0"),
                ("device_hex", _str("0000:1b:00")),
                ("device_info", _str(info)),
            ]
        )
        for rank, host, info in run.devices
    ]
    config.append(("devices", _list(devices)))
    top.append(("config", _obj(config)))
    results = []
    for r in run.results:
        items: list[tuple[str, str]] = [
            ("size", str(r.size)),
            ("count", str(r.count)),
            ("type", _str(r.dtype)),
            ("redop", _str(r.redop)),
            ("root", _str(f"{r.root:6d}")),
        ]
        for key, half in (("out_of_place", r.oop), ("in_place", r.ip)):
            if half is None:
                items.append((key, "null"))
                continue
            items.append((key, _half(half)))
            if run.per_iter and half.iter_times_us:
                items.append(
                    (f"{key}_per_iter", _obj(_stats(half.iter_times_us, run.per_iter_skip)))
                )
        items += [("actual_iterations", str(r.iterations)), ("experiment_name", _str(""))]
        results.append(_obj(items))
    top.append(("results", _list(results)))
    avg = run.avg_busbw()
    okay = "unchecked" if run.min_bw is None else ("true" if avg >= run.min_bw * 0.9 else "false")
    top += [
        (
            "out_of_bounds",
            _obj([("count", str(run.out_of_bounds)), ("okay", _bool(run.out_of_bounds == 0))]),
        ),
        ("average_bus_bandwidth", _obj([("bandwidth", _double(avg)), ("okay", _str(okay))])),
        ("errors", _list([_str(e) for e in run.errors])),
        ("end_time", _str("2026-11-30 10:03:12")),
    ]
    return _obj(top)


def _iter_times(mean_us: float, seed: int, n: int = 20) -> list[float]:
    """Twenty per-iteration times around ``mean_us`` with one slow outlier (deterministic)."""
    out = [mean_us * (1 + 0.01 * ((seed * 7 + i * 13) % 5 - 2)) for i in range(n)]
    out[(seed * 3) % n] = mean_us * 1.6  # one slow iteration: p99 catches it, p50 does not
    return out


def all_reduce_8xh100() -> Run:
    """The all-reduce of ``all_reduce_perf_8xH100.log`` (8 ranks, 1 process, ``-I 1``)."""
    rows = []
    text = (DATA / "all_reduce_perf_8xH100.log").read_text(encoding="utf-8")
    for line in text.splitlines():
        tok = line.split()
        if len(tok) == 13 and tok[0].isdigit():
            size, count = int(tok[0]), int(tok[1])
            oop = Half(float(tok[5]), float(tok[6]), float(tok[7]), float(tok[8]))
            ip = Half(float(tok[9]), float(tok[10]), float(tok[11]), float(tok[12]))
            oop.iter_times_us = _iter_times(oop.time_us, len(rows))
            ip.iter_times_us = _iter_times(ip.time_us, len(rows) + 1)
            rows.append(Result(size, count, tok[2], tok[3], int(tok[4]), oop, ip))
    return Run(results=rows)


def all_gather_16_ranks_v1() -> Run:
    """A 2-process MPI all-gather (16 ranks) in the first JSON version (2.17: no -I)."""
    rows = []
    for i, size in enumerate(2**k for k in range(10, 31, 4)):
        time_us = 20.0 + size / 300e3  # ~300 GB/s algbw at large sizes
        algbw = size / time_us / 1e3
        busbw = algbw * 15 / 16
        rows.append(
            Result(
                size,
                size // 4 // 16,
                "float",
                "none",
                -1,
                Half(time_us, algbw, busbw, 0.0),
                Half(time_us * 1.01, algbw / 1.01, busbw / 1.01, 0.0),
            )
        )
        del i
    return Run(
        binary="/opt/nccl-tests/build/all_gather_perf",
        args=("-b", "1K", "-e", "1G", "-f", "16", "-g", "8"),
        version=1,
        nccl_version=22602,
        devices=[(0, "node-a", "NVIDIA H100 80GB HBM3"), (8, "node-b", "NVIDIA H100 80GB HBM3")],
        results=rows,
        per_iter=False,
    )


FIXTURES = {
    "all_reduce_perf_8xH100.json": all_reduce_8xh100,
    "all_gather_perf_16rank_v1.json": all_gather_16_ranks_v1,
}


if __name__ == "__main__":
    for name, make in FIXTURES.items():
        (DATA / name).write_text(write_json(make()), encoding="utf-8")
        print(DATA / name)
