"""Read the text output of nccl-tests (``all_reduce_perf`` and friends) into values.

nccl-tests (https://github.com/NVIDIA/nccl-tests) prints a run header, one ``#  Rank`` line per
GPU, a result table with one row per message size and a two-line footer. The table layout has
changed over the years, so the parser reads the column-name line of each log and maps the row
fields by position instead of assuming one layout:

* nccl-tests 2.13 and later: ``size count type redop root`` then, for out-of-place and
  in-place, ``time algbw busbw #wrong`` (``#wrong`` is ``N/A`` with ``-c 0``).
* before 2.13: no ``root`` column (all_reduce), no ``redop`` column (all_gather, broadcast),
  and an ``error`` column holding the largest deviation from the expected result
  (``2e-07``), not a count of wrong elements.
* 2.17 and later may add ``#bitdiff``, per-iteration (``i_min`` ... ``i_cv%``, with ``-I 1``)
  and ``timestamp`` columns; ``i_p99`` is read, the others are skipped.

The JSON file nccl-tests writes with ``-J FILE.json`` (2.17.3 and later; per-iteration
percentiles from 2.19) is read by :mod:`fabric_model.validate.nccl_json`; `parse_nccl_tests`
hands it over when the input is a JSON object, so callers take either.

NCCL ``INFO`` lines, MPI warnings and launcher labels (``srun -l``'s ``0: ``, Open MPI's
``[1,0]<stdout>:``) may be interleaved anywhere; they are ignored. A row that cannot be read
is skipped with a warning that names its line; only input with no readable table raises
`NcclLogError`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabric_model.errors import NcclLogError
from fabric_model.validate.nccl_json import parse_nccl_tests_json
from fabric_model.validate.nccl_results import (
    BINARY_RE,
    NCCL_TESTS_OPS,
    NcclTestRow,
    NcclTestsLog,
    RowResult,
    avg_check,
    binary_op,
    decode_nccl_code,
    guess_op,
    normalize_op,
    row_warnings,
)

if TYPE_CHECKING:
    import os


__all__ = [
    "MAX_LOG_FILE_BYTES",
    "NCCL_TESTS_OPS",
    "NcclTestRow",
    "NcclTestsLog",
    "parse_nccl_tests",
    "parse_nccl_tests_file",
]

#: Largest log file `parse_nccl_tests_file` reads (20 MiB); a full sweep is a few hundred KiB.
MAX_LOG_FILE_BYTES = 20 * 2**20

_ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# Launcher prefixes: Open MPI --tag-output, srun -l ("0: "), pdsh ("node: "), PALS
# ("node 0: ").
_LABEL_RE = re.compile(r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:\s*|[A-Za-z0-9_.\-]+(?:\s+\d+)?:\s+)")
_RANK_RE = re.compile(
    r"^#\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(?P<host>\S+)\s+"
    r"device\s+\d+\s+\[[^\]]*\]\s*(?P<device>.*?)\s*$"
)
_NCCL_VERSION_RE = re.compile(r"\bNCCL version\s+(\d+\.\d+\.\d+\S*)")
_TESTS_VERSION_RE = re.compile(
    r"^#\s*nccl-tests version\s+(?P<version>\S+).*?(?:nccl-library=(?P<library>\d+))?\s*$"
)
_NRANKS_RE = re.compile(r"\bNCCL INFO\b.*\bnranks\s+(\d+)")
# Process count of a launcher command line (read only up to the binary name: nccl-tests' own
# "-n" is its iteration count).
_LAUNCH_NP_RE = re.compile(
    r"\b(?:mpirun|mpiexec|srun)\b.*?\s(?:-np|-n|--np|--ntasks)(?:=|\s+)(\d+)\b"
)
_OOB_RE = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(\w*)")
_AVG_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)\s*(\w*)")
_CONCLUDED_RE = re.compile(r"^#\s*Collective test concluded\b")
_INT_RE = re.compile(r"^[+-]?\d+$")
_FLOAT_RE = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$|^[+-]?(?:nan|inf)$", re.I)
# A byte count, or (never seen from upstream, accepted for forks) a binary-suffixed size "4M".
_SIZE_RE = re.compile(r"^(\d+)$|^(\d+(?:\.\d+)?)([KMGT])(?:i?B)?$", re.I)
_SIZE_MULT = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_WORD_RE = re.compile(r"^[A-Za-z][\w.]*$")

_NO_TABLE_MESSAGE = (
    "no nccl-tests result table found (expected a line starting with '#  size' or "
    "'#       size'); is this an nccl-tests log?"
)


# --------------------------------------------------------------------------------------------
# Table layout


@dataclass(frozen=True)
class _Slot:
    """One column of the table: what it holds, which half, how many whitespace tokens."""

    role: str  # size count dtype redop root time algbw busbw wrong error extra
    side: str = ""  # "oop", "ip" or "" for the leading columns
    width: int = 1


_PREFIX_ROLES = {
    "size": "size",
    "bytes": "size",
    "count": "count",
    "n": "count",
    "elements": "count",
    "type": "dtype",
    "dtype": "dtype",
    "datatype": "dtype",
    "redop": "redop",
    "op": "redop",
    "root": "root",
}
_GROUP_ROLES = {
    "time": "time",
    "cputime": "time",
    "algbw": "algbw",
    "busbw": "busbw",
    "#wrong": "wrong",
    "wrong": "wrong",
    "error": "error",
    "errors": "error",
    "res": "error",
    "i_p99": "p99",
}


def _header_names(body: str) -> list[str]:
    """Column names of a ``#  size count ...`` line, lower-cased, units dropped."""
    names = []
    for token in body.lstrip().lstrip("#").split():
        token = token.lower()
        if token.startswith("(") and token.endswith(")"):
            continue  # a unit such as "(B)" printed as its own token
        token = re.sub(r"\(.*\)$", "", token)  # "size(B)" -> "size"
        if token:
            names.append(token)
    return names


def _table_layout(body: str) -> tuple[_Slot, ...] | None:
    """Return the column layout if ``body`` is a result-table column-name line, else None."""
    if not body.lstrip().startswith("#"):
        return None
    names = _header_names(body)
    if len(names) < 5 or names[0] not in ("size", "bytes"):
        return None
    time_at = [i for i, name in enumerate(names) if name in ("time", "cputime")]
    if not time_at or "busbw" not in names or "algbw" not in names:
        return None
    slots = [_Slot(_PREFIX_ROLES.get(name, "extra")) for name in names[: time_at[0]]]
    bounds = [*time_at, len(names)]
    for group, (start, stop) in enumerate(pairwise(bounds)):
        side = ("oop", "ip")[group] if group < 2 else "extra"
        for name in names[start:stop]:
            if name == "timestamp":
                slots.append(_Slot("extra", side, width=2))  # "2025-01-31 12:00:00"
            elif side == "extra":
                slots.append(_Slot("extra", side))
            else:
                slots.append(_Slot(_GROUP_ROLES.get(name, "extra"), side))
    roles = {(s.role, s.side) for s in slots}
    needed = {("size", ""), ("count", ""), ("time", "oop"), ("algbw", "oop"), ("busbw", "oop")}
    if not needed <= roles:
        return None
    return tuple(slots)


# --------------------------------------------------------------------------------------------
# Small token parsers (raise ValueError with a short reason)


def _parse_size(token: str) -> int:
    m = _SIZE_RE.match(token)
    if not m:
        raise ValueError(f"size {token!r} is not a byte count")
    if m.group(1) is not None:
        return int(token)
    value = float(m.group(2)) * _SIZE_MULT[m.group(3).upper()]
    if value != int(value):
        raise ValueError(f"size {token!r} is not a whole number of bytes")
    return int(value)


def _parse_int(token: str, what: str) -> int:
    if not _INT_RE.match(token):
        raise ValueError(f"{what} {token!r} is not an integer")
    return int(token)


def _parse_float(token: str, what: str) -> float:
    if not _FLOAT_RE.match(token):
        raise ValueError(f"{what} {token!r} is not a number")
    value = float(token)
    if value < 0:
        raise ValueError(f"{what} {token!r} is negative")
    return value


def _parse_wrong(token: str) -> int | None:
    if token.upper() == "N/A":
        return None
    if not _FLOAT_RE.match(token):
        raise ValueError(f"#wrong {token!r} is not a count")
    value = float(token)
    if math.isnan(value) or value < 0:
        return None  # some forks print -1 when validation is off
    return round(value)


def _parse_error(token: str) -> tuple[float | None, bool]:
    """Parse an old-style ``error`` cell; the flag is True for rccl's ``*`` (over threshold)."""
    over = token.endswith("*")
    token = token.rstrip("*")
    if token.upper() == "N/A":
        return None, over
    if not _FLOAT_RE.match(token):
        raise ValueError(f"error {token!r} is not a number")
    return float(token), over


def _looks_like_row(tokens: Sequence[str]) -> bool:
    """Tell whether tokens start like a result row: a size, then (if any) an integer count."""
    if not tokens or not _SIZE_RE.match(tokens[0]):
        return False
    return len(tokens) == 1 or tokens[1].isdigit()


def _parse_row(tokens: Sequence[str], layout: Sequence[_Slot], line_no: int) -> RowResult:
    expected = sum(slot.width for slot in layout)
    if len(tokens) < expected:
        return RowResult(reason=f"expected {expected} fields, found {len(tokens)}", too_few=True)
    values: dict[str, Any] = {"redop": "none", "root": None, "dtype": ""}
    over = False
    pos = 0
    try:
        for slot in layout:
            token = tokens[pos]
            pos += slot.width
            key = f"{slot.side}_{slot.role}" if slot.side else slot.role
            if slot.role == "size":
                values[key] = _parse_size(token)
            elif slot.role == "count":
                values[key] = _parse_int(token, "count")
                if values[key] < 0:
                    raise ValueError(f"count {token!r} is negative")
            elif slot.role in ("dtype", "redop"):
                if not _WORD_RE.match(token):
                    raise ValueError(f"{slot.role} {token!r} is not a name")
                values[key] = token
            elif slot.role == "root":
                values[key] = _parse_int(token, "root")
            elif slot.role in ("time", "algbw", "busbw"):
                values[key] = _parse_float(token, slot.role)
            elif slot.role == "p99":
                values[key] = _parse_float(token, "i_p99")
            elif slot.role == "wrong":
                values[key] = _parse_wrong(token)
            elif slot.role == "error":
                values[key], flagged = _parse_error(token)
                over = over or flagged
    except ValueError as exc:
        return RowResult(reason=str(exc))
    row = NcclTestRow(
        size_bytes=values["size"],
        count=values["count"],
        dtype=values["dtype"],
        redop=values["redop"],
        root=values["root"],
        oop_time_us=values.get("oop_time"),
        oop_algbw_GBps=values.get("oop_algbw"),
        oop_busbw_GBps=values.get("oop_busbw"),
        oop_wrong=values.get("oop_wrong"),
        ip_time_us=values.get("ip_time"),
        ip_algbw_GBps=values.get("ip_algbw"),
        ip_busbw_GBps=values.get("ip_busbw"),
        ip_wrong=values.get("ip_wrong"),
        line_no=line_no,
        oop_error=values.get("oop_error"),
        ip_error=values.get("ip_error"),
        oop_p99_us=values.get("oop_p99"),
        ip_p99_us=values.get("ip_p99"),
    )
    return RowResult(row=row, extra_fields=len(tokens) - expected, over_threshold=over)


# --------------------------------------------------------------------------------------------
# Line-level helpers


def _strip_label(line: str) -> str:
    """Drop launcher prefixes (``0: ``, ``[1,0]<stdout>:``, ``node: ``) from a line.

    A prefix is dropped only when what follows looks like nccl-tests output (a ``#`` line or
    a row), so NCCL INFO lines (``host:pid:tid [0] NCCL INFO``) are left as they are.
    """
    for _ in range(2):
        m = _LABEL_RE.match(line)
        if not m:
            break
        rest = line[m.end() :].lstrip()
        if not rest or not (rest[0] == "#" or rest[0].isdigit()):
            break
        line = line[m.end() :]
    return line


def _parse_run_header(body: str) -> dict[str, str]:
    """Parse ``# nThread 1 nGpus 8 ... step: 2(factor) warmup iters: 5 ...`` into a dict."""
    out: dict[str, str] = {}
    tokens = body.strip().lstrip("#").split()
    pending: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.endswith(":") and i + 1 < len(tokens):
            out[" ".join([*pending, token[:-1]])] = tokens[i + 1]
            pending = []
            i += 2
            continue
        if pending and re.match(r"^[+-]?\d", token):
            out[" ".join(pending)] = token
            pending = []
        else:
            pending.append(token)
        i += 1
    return out


def _reject_binary(text: str) -> None:
    sample = text[:65536]
    if "\x00" in sample:
        raise NcclLogError("input looks binary (it contains NUL bytes), not an nccl-tests text log")
    odd = sum(1 for ch in sample if ch == "\ufffd" or (ch < " " and ch not in "\t\n\r\f\x1b"))
    if odd > max(8, 0.05 * len(sample)):
        raise NcclLogError(
            f"input looks binary ({odd} undecodable or control characters in the first "
            f"{len(sample)}), not an nccl-tests text log"
        )


# --------------------------------------------------------------------------------------------
# Front doors


@dataclass
class _Meta:
    """Mutable accumulator for the run metadata while scanning (private)."""

    header: dict[str, str] = field(default_factory=dict)
    ranks: dict[int, tuple[str, str]] = field(default_factory=dict)
    nccl_version: str | None = None
    library_version: str | None = None
    info_nranks: int | None = None
    mpi_np: int | None = None
    binaries: list[tuple[int, str, str | None]] = field(default_factory=list)

    def read(self, line_no: int, raw: str, body: str) -> None:
        stripped = body.strip()
        found = binary_op(raw)
        if found:
            self.binaries.append((line_no, *found))
        if (m := _RANK_RE.match(stripped)) is not None:
            self.ranks[int(m.group("rank"))] = (m.group("host"), m.group("device"))
            return
        if stripped.startswith("#") and re.match(r"^#\s*nThread\b", stripped):
            # A new run: rank lines seen so far belonged to an earlier (failed) run.
            self.ranks.clear()
            self.header = {**self.header, **_parse_run_header(stripped)}
            return
        if (m := _TESTS_VERSION_RE.match(stripped)) is not None:
            self.header["nccl-tests version"] = m.group("version")
            if m.group("library"):
                self.library_version = decode_nccl_code(m.group("library"))
            return
        if self.nccl_version is None and (m := _NCCL_VERSION_RE.search(raw)) is not None:
            self.nccl_version = m.group(1)
        if (m := _NRANKS_RE.search(raw)) is not None:
            self.info_nranks = int(m.group(1))
        command = raw[: found_at.start()] if (found_at := BINARY_RE.search(raw)) else raw
        if (m := _LAUNCH_NP_RE.search(command)) is not None:
            self.mpi_np = int(m.group(1))

    def n_ranks_source(self) -> str:
        """Where :meth:`n_ranks` takes its count from (see ``NcclTestsLog.n_ranks_source``)."""
        if self.ranks:
            return "rank lines"
        if self.info_nranks is not None:
            return "nccl info"
        return "launch line" if self.n_ranks() is not None else ""

    def n_ranks(self) -> int | None:
        if self.ranks:
            return len(self.ranks)
        if self.info_nranks is not None:
            return self.info_nranks
        if self.mpi_np is not None:
            try:
                per_proc = int(self.header.get("nThread", "1")) * int(self.header.get("nGpus", "1"))
            except ValueError:
                return None
            return self.mpi_np * per_proc
        return None


_EMBEDDED_LOG_RE = re.compile(r"[A-Za-z][\w.\-]*:\d+:\d+ \[\d+\] NCCL ")
_NTHREAD_RE = re.compile(r"^#\s*nThread\b")


def _cut_embedded_log(body: str) -> str:
    """Return ``body`` up to an NCCL log message glued into it (``... -1host:12:34 [0] NCCL``).

    NCCL threads print to the same stdout, so with ``NCCL_DEBUG=INFO`` a message can land in
    the middle of a row that nccl-tests prints in pieces; the rest of the row then follows on
    a later line.
    """
    m = _EMBEDDED_LOG_RE.search(body)
    return body if m is None else body[: m.start()]


def _is_row_tail(tokens: Sequence[str]) -> bool:
    """Tell whether tokens could be the rest of a split row: numbers and ``N/A`` only."""
    return bool(tokens) and all(
        _FLOAT_RE.match(token.rstrip("*")) or token.upper() == "N/A" for token in tokens
    )


class _TableScan:
    """Read the rows and footer of one result table, line by line (private)."""

    def __init__(self, layout: tuple[_Slot, ...], table_line: int, meta: _Meta) -> None:
        self.layout = layout
        self.n_fields = sum(slot.width for slot in layout)
        self.table_line = table_line
        self.meta = meta
        self.rows: list[NcclTestRow] = []
        self.failed: list[tuple[int, RowResult, str]] = []
        self.warnings: list[tuple[int, str]] = []
        self.avg_busbw: float | None = None
        self.out_of_bounds: int | None = None
        self.footer_line: int | None = None
        self.end: int | None = None  # index of the first line after the table
        self._pending: tuple[int, list[str], str, RowResult] | None = None
        self._extra_warned = False

    def feed(self, index: int, raw: str, body: str) -> bool:
        """Read line ``index``; return False once the table has ended."""
        line_no = index + 1
        cut = _cut_embedded_log(body)
        was_cut = len(cut) != len(body)
        if was_cut:
            self.meta.read(line_no, raw, body[len(cut) :])
        stripped = cut.strip()
        if stripped.startswith("#"):
            return self._comment(index, stripped)
        tokens = stripped.split()
        if tokens and _looks_like_row(tokens):
            self._flush()
            self._row(line_no, tokens, stripped)
        elif (
            self._pending is not None
            and _is_row_tail(tokens)
            and len(self._pending[1]) + len(tokens) <= self.n_fields
        ):
            self._join(line_no, tokens)
        elif not was_cut:
            self.meta.read(line_no, raw, body)
        return True

    def finish(self, n_lines: int) -> None:
        """Close the scan at end of input."""
        self._flush()
        if self.end is None:
            self.end = n_lines

    def problems(self, last_line: int) -> list[tuple[int, str]]:
        """Return warnings for the rows that could not be read.

        A row after the last good one with no footer below is reported as truncated when it
        is short of fields or is the last line of the input (cut inside its last field).
        """
        out = []
        last_row_line = self.rows[-1].line_no if self.rows else self.table_line
        for line_no, result, text in self.failed:
            shown = text if len(text) <= 80 else text[:77] + "..."
            at_end = result.too_few or line_no == last_line
            if at_end and line_no > last_row_line and self.footer_line is None:
                out.append((line_no, f"truncated row ignored ({result.reason}): {shown!r}"))
            else:
                out.append((line_no, f"unparsable table row ignored: {result.reason}: {shown!r}"))
        return out

    def _comment(self, index: int, stripped: str) -> bool:
        line_no = index + 1
        if (m := _OOB_RE.match(stripped)) is not None:
            self._flush()
            self.out_of_bounds = int(m.group(1))
            self.footer_line = line_no
            if self.out_of_bounds > 0:
                self.warnings.append(
                    (
                        line_no,
                        f"nccl-tests reports {self.out_of_bounds} out-of-bounds values "
                        "(FAILED): data validation failed",
                    )
                )
            return True
        if (m := _AVG_RE.match(stripped)) is not None:
            self._flush()
            self.footer_line = line_no
            self.end = index + 1
            value = float(m.group(1)) if _FLOAT_RE.match(m.group(1)) else math.nan
            if math.isfinite(value):
                self.avg_busbw = value
            else:
                self.warnings.append(
                    (line_no, f"average bus bandwidth {m.group(1)!r} is not a number; ignored")
                )
            if m.group(2).upper() == "FAILED":
                self.warnings.append(
                    (
                        line_no,
                        "nccl-tests reports the average bus bandwidth below "
                        "NCCL_TESTS_MIN_BW (FAILED)",
                    )
                )
            return False
        if _table_layout(stripped) is not None or _NTHREAD_RE.match(stripped):
            self._flush()
            self.end = index
            self.warnings.append(
                (
                    line_no,
                    f"a new nccl-tests run starts before the footer of the table at line "
                    f"{self.table_line}; only that table was read",
                )
            )
            return False
        return True

    def _row(self, line_no: int, tokens: list[str], text: str) -> None:
        result = _parse_row(tokens, self.layout, line_no)
        if result.row is not None:
            self._accept(result)
        elif result.too_few:
            self._pending = (line_no, tokens, text, result)
        else:
            self.failed.append((line_no, result, text))

    def _join(self, line_no: int, tokens: list[str]) -> None:
        if self._pending is None:
            return
        first, head, text, result = self._pending
        joined = head + tokens
        if len(joined) < self.n_fields:
            self._pending = (first, joined, text, result)
            return
        self._pending = None
        result = _parse_row(joined, self.layout, first)
        if result.row is None:
            self.failed.append((first, result, text))
            return
        self.warnings.append(
            (first, f"row split by interleaved output; rejoined with line {line_no}")
        )
        self._accept(result)

    def _flush(self) -> None:
        if self._pending is not None:
            first, _, text, result = self._pending
            self.failed.append((first, result, text))
            self._pending = None

    def _accept(self, result: RowResult) -> None:
        row = result.row
        if row is None:
            return
        self.rows.append(row)
        if result.extra_fields and not self._extra_warned:
            self._extra_warned = True
            self.warnings.append(
                (
                    row.line_no,
                    f"{result.extra_fields} more field(s) than the table header names; "
                    "extra fields ignored",
                )
            )
        self.warnings.extend(row_warnings(result))


def _text_lines(text: str | bytes) -> list[str]:
    """Check the input and split it into lines (no line ends, no ANSI colour codes)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if not isinstance(text, str):
        raise NcclLogError(f"expected the log text as str, got {type(text).__name__}")
    if not text.strip():
        raise NcclLogError("empty input: there is no nccl-tests output to read")
    _reject_binary(text)
    return [_ANSI_RE.sub("", line.rstrip("\r")) for line in text.split("\n")]


def parse_nccl_tests(text: str | bytes, *, op: str | None = None) -> NcclTestsLog:
    """Parse the text output of one nccl-tests run.

    Parameters
    ----------
    text
        The log text (stdout of ``all_reduce_perf`` etc., possibly mixed with NCCL INFO lines
        and launcher output), or the JSON file of ``-J FILE.json`` (read by
        :func:`fabric_model.validate.nccl_json.parse_nccl_tests_json` when the input starts
        with ``{``). Bytes are decoded as UTF-8 with replacement.
    op
        Collective to assume when the log does not name its binary (``"allreduce"``,
        ``"all_reduce"``, ``"AllReduce"`` ... are all accepted). A binary name in the log
        (``./build/all_gather_perf``, ``# Collective test starting: ...``) wins; a mismatch
        is reported in ``warnings``.

    Returns
    -------
    NcclTestsLog
        Metadata, rows and footer of the first result table in ``text``.

    Raises
    ------
    NcclLogError
        If there is nothing to read: empty or binary input, no result table, a table without
        a single readable row, or an ``op`` that is not a known collective.

    Notes
    -----
    Bad rows never raise: each is skipped with a warning naming its line. Rows whose
    ``#wrong`` is above zero are kept and warned about. A row split by an interleaved NCCL
    message is rejoined (with a warning). When ``op`` is neither named in the log nor
    given, it is guessed from the table (reduction, root, size / count ratio) and the guess
    is reported in ``warnings``.

    The footer's average bus bandwidth is checked against the mean of the out-of-place and
    in-place busbw of the rows (nccl-tests averages both), a cheap sign of lost rows. busbw
    is algbw x 2(n-1)/n for all-reduce, x (n-1)/n for all-gather, reduce-scatter and
    all-to-all, and x 1 for broadcast, reduce and sendrecv (nccl-tests doc/PERFORMANCE.md).
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if isinstance(text, str) and text.lstrip("\ufeff \t\r\n").startswith("{"):
        return parse_nccl_tests_json(text, op=op)
    lines = _text_lines(text)
    requested = normalize_op(op) if op is not None else None
    bodies = [_strip_label(line) for line in lines]

    meta = _Meta()
    header_at = -1
    layout: tuple[_Slot, ...] | None = None
    for i, body in enumerate(bodies):
        layout = _table_layout(body)
        if layout is not None:
            header_at = i
            break
        meta.read(i + 1, lines[i], body)
    if layout is None:
        raise NcclLogError(_NO_TABLE_MESSAGE)
    table_line = header_at + 1

    scan = _TableScan(layout, table_line, meta)
    for i in range(header_at + 1, len(lines)):
        if not scan.feed(i, lines[i], bodies[i]):
            break
    scan.finish(len(lines))
    last_line = max((i + 1 for i, line in enumerate(lines) if line.strip()), default=1)
    warnings = scan.warnings + scan.problems(last_line)
    warnings += _read_trailer(lines, bodies, scan.end or len(lines), table_line, meta)
    if not scan.rows:
        unreadable = f" ({len(scan.failed)} unreadable)" if scan.failed else ""
        raise NcclLogError(
            f"the nccl-tests result table at line {table_line} has no readable rows{unreadable}"
        )
    if scan.footer_line is None:
        if scan.rows[-1].line_no == len(lines):
            warnings.append(
                (
                    len(lines),
                    "the log ends inside this row with no line end; its last field may be cut",
                )
            )
        warnings.append((last_line, "no '# Avg bus bandwidth' footer: the log may be truncated"))
    elif scan.avg_busbw is not None:
        warnings += avg_check(scan.rows, scan.avg_busbw, scan.footer_line)

    n_ranks = meta.n_ranks()
    final_op = _resolve_op(meta, requested, scan.rows, n_ranks, table_line, warnings)
    ranks = [meta.ranks[r] for r in sorted(meta.ranks)]
    warnings.sort(key=lambda item: item[0])
    return NcclTestsLog(
        op=final_op,
        n_ranks=n_ranks,
        devices=tuple(device for _, device in ranks),
        hosts=tuple(dict.fromkeys(host for host, _ in ranks)),
        nccl_version=meta.nccl_version or meta.library_version,
        header=dict(meta.header),
        rows=tuple(scan.rows),
        avg_busbw_GBps=scan.avg_busbw,
        out_of_bounds=scan.out_of_bounds,
        warnings=tuple(f"line {n}: {msg}" for n, msg in warnings),
        n_ranks_source=meta.n_ranks_source(),
    )


def _read_trailer(
    lines: Sequence[str], bodies: Sequence[str], start: int, table_line: int, meta: _Meta
) -> list[tuple[int, str]]:
    """Read what follows the table up to the next run: the ``concluded`` binary name."""
    for i in range(start, len(lines)):
        stripped = bodies[i].strip()
        if _table_layout(stripped) is not None or _NTHREAD_RE.match(stripped):
            return [
                (
                    i + 1,
                    f"another nccl-tests run follows; only the first table (line {table_line}) "
                    "was read",
                )
            ]
        if _CONCLUDED_RE.match(stripped) and (found := binary_op(stripped)) is not None:
            meta.binaries.append((i + 1, *found))
    return []


def _resolve_op(
    meta: _Meta,
    requested: str | None,
    rows: Sequence[NcclTestRow],
    n_ranks: int | None,
    table_line: int,
    warnings: list[tuple[int, str]],
) -> str:
    """Choose the op: binary named in the log, else ``op=``, else a guess from the table."""
    picked = _pick_binary(meta.binaries, table_line, warnings)
    detected = picked[0] if picked is not None else None
    if picked is not None and picked[0] != "unknown":
        if requested is not None and requested != picked[0]:
            warnings.append(
                (
                    table_line,
                    f"op={requested!r} was given but the log names {picked[1]}; "
                    f"using {picked[0]!r}",
                )
            )
        return picked[0]
    if requested is not None:
        return requested
    if detected == "unknown":
        return "unknown"
    guessed, why = guess_op(rows, n_ranks)
    if guessed == "unknown":
        warnings.append(
            (table_line, f"op could not be told from the table ({why}); pass op= to set it")
        )
    else:
        warnings.append(
            (
                table_line,
                f"op guessed as {guessed!r} from the table ({why}); the log names no *_perf "
                "binary and no op= was given",
            )
        )
    return guessed


def _pick_binary(
    binaries: Sequence[tuple[int, str, str | None]],
    table_line: int,
    warnings: list[tuple[int, str]],
) -> tuple[str, str] | None:
    """Return ``(op, binary)`` named last before the table, else first after it; or None."""
    before = [b for b in binaries if b[0] < table_line]
    after = [b for b in binaries if b[0] > table_line]
    chosen = before[-1] if before else (after[0] if after else None)
    if chosen is None:
        return None
    line_no, binary, op = chosen
    if op is None:
        warnings.append(
            (line_no, f"{binary} is not one of the modelled collectives; op is 'unknown'")
        )
        return "unknown", binary
    return op, binary


def parse_nccl_tests_file(path: str | os.PathLike[str]) -> NcclTestsLog:
    """Read an nccl-tests log file and parse it with `parse_nccl_tests`.

    Parameters
    ----------
    path
        Path to the log, read as UTF-8 with undecodable bytes replaced.

    Returns
    -------
    NcclTestsLog
        As `parse_nccl_tests`, with the op taken from the log or guessed.

    Raises
    ------
    NcclLogError
        If the path is missing, a directory, unreadable or larger than `MAX_LOG_FILE_BYTES`
        (20 MiB), or if its content has nothing to read.
    """
    p = Path(path)
    if not p.exists():
        raise NcclLogError(f"{p}: no such file")
    if p.is_dir():
        raise NcclLogError(f"{p}: is a directory, not an nccl-tests log file")
    try:
        size_bytes = p.stat().st_size
        if size_bytes > MAX_LOG_FILE_BYTES:
            raise NcclLogError(
                f"{p}: file is {size_bytes} bytes, over the {MAX_LOG_FILE_BYTES} byte (20 MiB) "
                "limit for an nccl-tests log"
            )
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise NcclLogError(f"{p}: cannot read: {exc.strerror or exc}") from exc
    try:
        return parse_nccl_tests(text)
    except NcclLogError as exc:
        raise NcclLogError(f"{p}: {exc}") from exc
