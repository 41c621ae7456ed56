"""What an nccl-tests run gives, read from its text log or its JSON file, and the checks on it.

:class:`NcclTestsLog` (metadata, rows, footer) and :class:`NcclTestRow` are the values
both readers return (:mod:`.nccl_log` for the printed table, :mod:`.nccl_json` for the
``-J`` file); the helpers here are the rules they share: naming the collective from a
binary name, an ``op=`` or the table itself, decoding NCCL's version code, and the warnings
about wrong results and a footer that disagrees with the rows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from fabric_model.errors import NcclLogError

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "BINARY_RE",
    "NCCL_TESTS_OPS",
    "NcclTestRow",
    "NcclTestsLog",
    "RowResult",
    "avg_check",
    "binary_op",
    "decode_nccl_code",
    "guess_op",
    "normalize_op",
    "row_warnings",
]

#: Normalised collective names a log can carry (``"unknown"`` when it cannot be told).
NCCL_TESTS_OPS = (
    "allreduce",
    "allgather",
    "reducescatter",
    "alltoall",
    "sendrecv",
    "broadcast",
    "reduce",
    "unknown",
)

# Binary name (without ``_perf``) -> normalised op; None for binaries the model does not cover.
_BINARY_OPS: dict[str, str | None] = {
    "all_reduce": "allreduce",
    "all_gather": "allgather",
    "reduce_scatter": "reducescatter",
    "alltoallv": None,
    "alltoall": "alltoall",
    "sendrecv": "sendrecv",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "gather": None,
    "scatter": None,
    "hypercube": None,
}
# The leftmost match wins, so "all_reduce_perf" is found before the "reduce_perf" inside it.
BINARY_RE = re.compile(
    r"(?<![A-Za-z0-9])(" + "|".join(_BINARY_OPS) + r")_perf(?:_mpi)?(?![A-Za-z0-9])"
)

# Element size of the nccl-tests data types, used only to guess the op from a table.
_DTYPE_BYTES = {
    "int8": 1,
    "char": 1,
    "uint8": 1,
    "int32": 4,
    "int": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "half": 2,
    "float16": 2,
    "float": 4,
    "float32": 4,
    "double": 8,
    "float64": 8,
    "bfloat16": 2,
    "f8e4m3": 1,
    "f8e5m2": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
}


@dataclass(frozen=True)
class NcclTestRow:
    """One row of an nccl-tests result table: one message size, out-of-place and in-place.

    Parameters
    ----------
    size_bytes
        Buffer size S in bytes (for all-gather and reduce-scatter the whole array, per-rank
        count x ranks x element size), as printed in the ``size`` column.
    count
        Element count as printed (per rank for all-gather, reduce-scatter and all-to-all).
    dtype
        Data type name as printed (``float``, ``bfloat16``, ...).
    redop
        Reduction as printed (``sum``, ...); ``"none"`` for non-reducing collectives and for
        old tables that have no ``redop`` column.
    root
        Root rank; -1 for rootless collectives; None for old tables without a ``root`` column.
    oop_time_us, ip_time_us
        Average time of one operation in microseconds, out-of-place and in-place.
    oop_algbw_GBps, ip_algbw_GBps
        Algorithm bandwidth S / t in GB/s (10^9 bytes/s).
    oop_busbw_GBps, ip_busbw_GBps
        Bus bandwidth, algbw times the collective's correction factor, in GB/s.
    oop_wrong, ip_wrong
        Number of wrong elements found by validation; None when not reported (``N/A`` with
        ``-c 0``, the in-place half of sendrecv, or an old table with an ``error`` column).
    line_no
        1-based line number of the row in the parsed text.
    oop_error, ip_error
        Old tables only: the ``error`` column, the largest deviation from the expected
        result (dimensionless, e.g. ``2e-07``); not a count. None otherwise.
    oop_p50_us, oop_p99_us, ip_p50_us, ip_p99_us
        Median and 99th percentile of the per-iteration times in microseconds (nccl-tests
        ``-I 1``: CUDA-event time of each iteration, the slowest GPU's); the text table
        prints only ``i_p99``, the JSON both. None when not measured.

    Notes
    -----
    The ``ip_*`` fields are None for tables that print out-of-place results only. For a
    JSON log ``line_no`` is the 1-based position of the result in its ``results`` list.
    """

    size_bytes: int
    count: int
    dtype: str
    redop: str
    root: int | None
    oop_time_us: float | None
    oop_algbw_GBps: float | None
    oop_busbw_GBps: float | None
    oop_wrong: int | None
    ip_time_us: float | None
    ip_algbw_GBps: float | None
    ip_busbw_GBps: float | None
    ip_wrong: int | None
    line_no: int
    oop_error: float | None = None
    ip_error: float | None = None
    oop_p50_us: float | None = None
    oop_p99_us: float | None = None
    ip_p50_us: float | None = None
    ip_p99_us: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the row as a plain dict (field name -> value)."""
        return asdict(self)

    def _busbw_at(self, time_us: float | None) -> float | None:
        if time_us is None or not time_us or self.oop_time_us is None:
            return None
        if self.oop_busbw_GBps is None:
            return None
        return self.oop_busbw_GBps * self.oop_time_us / time_us

    @property
    def oop_p50_busbw_GBps(self) -> float | None:
        """Out-of-place bus bandwidth at the median iteration time, GB/s.

        ``busbw x time / p50``: bus bandwidth is ``factor x S / t`` (nccl-tests
        doc/PERFORMANCE.md), so at a fixed size it scales as ``1 / t``. None without p50.
        """
        return self._busbw_at(self.oop_p50_us)

    @property
    def oop_p99_busbw_GBps(self) -> float | None:
        """Out-of-place bus bandwidth at the 99th-percentile (slow) iteration time, GB/s."""
        return self._busbw_at(self.oop_p99_us)


@dataclass(frozen=True)
class NcclTestsLog:
    """Everything read from one nccl-tests run: metadata, result rows and footer.

    Parameters
    ----------
    op
        Normalised collective: one of `NCCL_TESTS_OPS`.
    n_ranks
        Number of ranks (GPUs): distinct ``#  Rank`` lines, else ``nranks`` from NCCL INFO
        lines, else processes x nThread x nGpus when an ``mpirun -np`` / ``srun -n`` line
        shows the process count; None if unknown.
    devices
        Device name of each rank, in rank order (``"NVIDIA H100 80GB HBM3"``, ...).
    hosts
        Distinct host names, in order of first appearance.
    nccl_version
        NCCL library version as printed (``"2.18.5+cuda12.2"``), or decoded from the
        ``nccl-library=`` code of nccl-tests 2.17+; None if the log does not show it.
    header
        Parameters of the ``# nThread ...`` line (``{"nThread": "1", "step": "2(factor)",
        "warmup iters": "5", ...}``), plus ``"nccl-tests version"`` when printed.
    rows
        Result rows in log order.
    avg_busbw_GBps
        The ``# Avg bus bandwidth`` footer in GB/s: the mean busbw over all out-of-place and
        in-place results; None when the footer is missing.
    out_of_bounds
        The ``# Out of bounds values`` footer count; None when missing.
    warnings
        One message per problem met, each starting with ``"line N: "`` (``"result N: "``
        or ``"json: "`` for a JSON log).
    source
        ``"text"`` for the printed table, ``"json"`` for nccl-tests' ``-J`` JSON file.
    n_ranks_source
        Where ``n_ranks`` came from: ``"rank lines"`` (the header's ``#  Rank`` lines),
        ``"nccl info"`` (NCCL INFO ``nranks``), ``"launch line"`` (``mpirun -np`` / ``srun
        -n`` x nThread x nGpus), ``"json devices"``; empty when unknown.
    """

    op: str
    n_ranks: int | None
    devices: tuple[str, ...]
    hosts: tuple[str, ...]
    nccl_version: str | None
    header: dict[str, str]
    rows: tuple[NcclTestRow, ...]
    avg_busbw_GBps: float | None
    out_of_bounds: int | None
    warnings: tuple[str, ...] = field(default=())
    source: str = "text"
    n_ranks_source: str = ""

    @property
    def busbw_by_size(self) -> dict[int, float]:
        """Out-of-place bus bandwidth in GB/s for each size in bytes.

        Returns
        -------
        dict of int to float
            ``{size_bytes: busbw_GBps}`` in increasing size order. When a size appears in
            several rows (``-N`` cycles, ``-d all``), their mean.
        """
        sums: dict[int, list[float]] = {}
        for row in self.rows:
            if row.oop_busbw_GBps is not None:
                sums.setdefault(row.size_bytes, []).append(row.oop_busbw_GBps)
        return {size: sum(v) / len(v) for size, v in sorted(sums.items())}

    def to_frame(self) -> pd.DataFrame:
        """Return the rows as a DataFrame, one row per table row (normally one per size).

        Returns
        -------
        pandas.DataFrame
            Columns: the `NcclTestRow` fields plus ``busbw_GBps``, the out-of-place bus
            bandwidth nccl-tests users quote. ``attrs`` holds ``op``, ``n_ranks``,
            ``nccl_version`` and ``avg_busbw_GBps``.
        """
        import pandas as pd

        columns = [f.name for f in NcclTestRow.__dataclass_fields__.values()]
        frame = pd.DataFrame([row.to_dict() for row in self.rows], columns=columns)
        for name in ("root", "oop_wrong", "ip_wrong"):
            frame[name] = frame[name].astype("Int64")
        for name in columns:
            if name.endswith(("_us", "_GBps", "_error")):
                frame[name] = frame[name].astype("float64")
        frame["busbw_GBps"] = frame["oop_busbw_GBps"]
        frame.attrs.update(
            op=self.op,
            n_ranks=self.n_ranks,
            nccl_version=self.nccl_version,
            avg_busbw_GBps=self.avg_busbw_GBps,
        )
        return frame

    def to_dict(self) -> dict[str, Any]:
        """Return the log as plain, JSON-ready types (tuples become lists)."""
        return {
            "op": self.op,
            "n_ranks": self.n_ranks,
            "devices": list(self.devices),
            "hosts": list(self.hosts),
            "nccl_version": self.nccl_version,
            "header": dict(self.header),
            "rows": [row.to_dict() for row in self.rows],
            "avg_busbw_GBps": self.avg_busbw_GBps,
            "out_of_bounds": self.out_of_bounds,
            "warnings": list(self.warnings),
            "source": self.source,
        }


@dataclass
class RowResult:
    """One table row as read: the row, or why it was skipped, and what to warn about."""

    row: NcclTestRow | None = None
    reason: str = ""
    too_few: bool = False
    extra_fields: int = 0
    over_threshold: bool = False


def decode_nccl_code(code: str) -> str | None:
    """Decode NCCL_VERSION_CODE (``22501`` -> ``2.25.1``; ``2708`` -> ``2.7.8``)."""
    value = int(code)
    if value >= 10000:
        return f"{value // 10000}.{value // 100 % 100}.{value % 100}"
    if value >= 1000:
        return f"{value // 1000}.{value // 100 % 10}.{value % 100}"
    return None


def binary_op(line: str) -> tuple[str, str | None] | None:
    """Return ``(binary, op)`` for the first nccl-tests binary named in ``line``."""
    m = BINARY_RE.search(line)
    if not m:
        return None
    return m.group(1) + "_perf", _BINARY_OPS[m.group(1)]


def normalize_op(op: str) -> str:
    """Map a user-supplied op name (``"all_reduce"``, ``"AllReduce"``, ...) to `NCCL_TESTS_OPS`."""
    key = re.sub(r"[\s_\-]", "", str(op).lower())
    key = key.removesuffix("mpi").removesuffix("perf")
    aliases = {"bcast": "broadcast", "a2a": "alltoall"}
    key = aliases.get(key, key)
    if key not in NCCL_TESTS_OPS:
        raise NcclLogError(
            f"op {op!r} is not an nccl-tests collective; use one of " + ", ".join(NCCL_TESTS_OPS)
        )
    return key


def guess_op(rows: Sequence[NcclTestRow], n_ranks: int | None) -> tuple[str, str]:
    """Guess the collective from the table alone; return ``(op, why)``."""
    reductions = sorted({r.redop for r in rows if r.redop.lower() != "none"})
    roots = sorted({r.root for r in rows if r.root is not None and r.root >= 0})
    if roots:
        if reductions:
            return "reduce", f"root {roots[0]} and redop {reductions[0]!r}"
        return "broadcast", f"root {roots[0]} and no reduction"
    multiples = set()
    for r in rows:
        elt = _DTYPE_BYTES.get(r.dtype.lower())
        if elt is None or r.count == 0:
            continue
        q, rem = divmod(r.size_bytes, r.count * elt)
        multiples.add(q if rem == 0 else -1)
    if len(multiples) != 1 or -1 in multiples:
        return "unknown", "size is not a fixed multiple of count x element size"
    k = multiples.pop()
    elt = next(_DTYPE_BYTES[d] for r in rows if (d := r.dtype.lower()) in _DTYPE_BYTES)
    if reductions:
        redop = reductions[0]
        if k == 1:
            oop_checked = any(r.oop_wrong is not None for r in rows)
            if oop_checked and all(r.ip_wrong is None for r in rows):
                return "sendrecv", "in-place results are never validated, as in sendrecv_perf"
            return "allreduce", f"redop {redop!r} and size == count x {elt} bytes"
        if n_ranks is None or k == n_ranks:
            return "reducescatter", f"redop {redop!r} and size == count x {k} ranks x {elt} bytes"
        return "unknown", f"size == count x {k} x {elt} bytes does not match {n_ranks} ranks"
    if k > 1:
        return "unknown", "no reduction and size == count x ranks: all_gather or alltoall"
    return "unknown", "no reduction, no root and size == count x element size"


def row_warnings(result: RowResult) -> Iterable[tuple[int, str]]:
    """Yield ``(line, message)`` for a row's wrong results and an error over the threshold."""
    row = result.row
    if row is None:
        return
    wrong = [w for w in (row.oop_wrong, row.ip_wrong) if w]
    if wrong:
        detail = ", ".join(
            f"{side} {w}"
            for side, w in (("out-of-place", row.oop_wrong), ("in-place", row.ip_wrong))
            if w
        )
        yield (
            row.line_no,
            f"{sum(wrong)} wrong results at {row.size_bytes} bytes: data "
            f"validation failed ({detail})",
        )
    if result.over_threshold:
        yield (
            row.line_no,
            f"error at {row.size_bytes} bytes is marked '*' (over the "
            "threshold): data validation failed",
        )


def avg_check(rows: Sequence[NcclTestRow], avg: float, line_no: int) -> list[tuple[int, str]]:
    """Warn when the footer's average bus bandwidth is not the mean of the rows' (1 %)."""
    values = [v for r in rows for v in (r.oop_busbw_GBps, r.ip_busbw_GBps) if v is not None]
    if not values:
        return []
    mean = sum(values) / len(values)
    if abs(mean - avg) <= 0.01 + 0.01 * abs(avg):
        return []
    return [
        (
            line_no,
            f"average bus bandwidth {avg:g} GB/s differs from the mean of the rows "
            f"read ({mean:.4g} GB/s); rows may be missing",
        )
    ]
