"""Read the JSON file nccl-tests writes (``-J FILE.json``) into the text parser's values.

nccl-tests 2.17.3 added ``-J/--output_file`` (a ``.json`` suffix selects JSON); 2.19 added
per-iteration timing (``-I 1``) with percentiles in the JSON. The writer is
``src/util.cu`` of https://github.com/NVIDIA/nccl-tests (read at 2.19.6, ``JSON_FILE_VERSION
3``): one object, written without line breaks, with

- ``version`` (1 for 2.17, 2 with per-iteration timing, 3 with ``per_iter_skip``),
  ``start_time``, ``args`` (argv: ``args[0]`` names the binary, hence the collective),
  ``env``, ``nccl_version`` (NCCL_VERSION_CODE, e.g. ``22703``), ``end_time``;
- ``config``: ``nthreads``, ``ngpus``, ``minimum_bytes``, ``maximum_bytes``, ``step_factor``
  or ``step_bytes``, ``warmup_iters``, ``iterations``, ``aggregated_iterations``,
  ``validation``, ``graph``, booleans written as the strings ``"true"``/``"false"``, and
  ``devices``: one ``{rank, group, pid, hostname, device, device_hex, device_info}`` per
  process (its first GPU), so ranks = ``len(devices) x nthreads x ngpus``;
- ``results``: per size ``{size, count, type, redop, root, out_of_place, in_place,
  actual_iterations, experiment_name}`` with ``out_of_place``/``in_place`` = ``{time`` (or
  ``cpu_time`` with ``-C 1``), ``alg_bw``, ``bus_bw``, ``nwrong}`` (``nwrong`` null without
  validation; ``out_of_place`` null when only in-place ran) and, with ``-I 1``,
  ``out_of_place_per_iter``/``in_place_per_iter`` = ``{skipped_iterations, min_us, max_us,
  avg_us, p50_us, p95_us, p99_us, stdev_us, cv_pct, times_us, [per_process_max_times_us]}``;
- ``out_of_bounds`` ``{count, okay}``, ``average_bus_bandwidth`` ``{bandwidth, okay}``
  (``okay`` is ``"unchecked"`` unless ``NCCL_TESTS_MIN_BW`` is set) and ``errors``.

A NaN double is written as the string ``"nan"``. Units as in the text table: times in
microseconds, bandwidths in GB/s (10^9 bytes/s).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from typing import Any

from fabric_model.errors import NcclLogError
from fabric_model.validate.nccl_results import (
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

__all__ = ["JSON_VERSIONS", "looks_like_json", "parse_nccl_tests_json"]

#: ``version`` values of the nccl-tests JSON file this reader knows (2.17.3 to 2.19.6).
JSON_VERSIONS = (1, 2, 3)


def looks_like_json(text: str | bytes) -> bool:
    """Tell whether ``text`` is a JSON object (nccl-tests' ``-J`` file), by its first byte."""
    if isinstance(text, bytes):
        text = text[:64].decode("utf-8", errors="replace")
    return text.lstrip("\ufeff \t\r\n").startswith("{")


def _number(value: Any, what: str, *, allow_none: bool = False) -> float | None:
    """Return a JSON number (or nccl-tests' ``"nan"``) as float; raise ValueError if not."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{what} {value!r} is not a number")
    if isinstance(value, str):
        if value.strip().lower() != "nan":
            raise ValueError(f"{what} {value!r} is not a number")
        return math.nan
    out = float(value)
    if out < 0:
        raise ValueError(f"{what} {value!r} is negative")
    return out


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _half(result: dict[str, Any], side: str) -> dict[str, Any]:
    """Read ``out_of_place``/``in_place``: time, algbw, busbw, wrong, p50, p99."""
    body = result.get(side)
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise ValueError(f"{side} is not an object")
    time = body.get("time", body.get("cpu_time"))
    out: dict[str, Any] = {
        "time": _finite(_number(time, f"{side}.time")),
        "algbw": _finite(_number(body.get("alg_bw"), f"{side}.alg_bw")),
        "busbw": _finite(_number(body.get("bus_bw"), f"{side}.bus_bw")),
    }
    wrong = _number(body.get("nwrong"), f"{side}.nwrong", allow_none=True)
    out["wrong"] = round(wrong) if wrong is not None and math.isfinite(wrong) else None
    per_iter = result.get(f"{side}_per_iter")
    if isinstance(per_iter, dict):
        for key in ("p50", "p99"):
            value = _number(per_iter.get(f"{key}_us"), f"{side}_per_iter.{key}_us", allow_none=True)
            out[key] = _finite(value)
    return out


def _int_field(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise ValueError(f"{what} {value!r} is not an integer")
    if value < 0:
        raise ValueError(f"{what} {value!r} is negative")
    return int(value)


def _row(result: Any, index: int) -> NcclTestRow:
    """Read one ``results`` entry (ValueError with the reason when it is unreadable)."""
    if not isinstance(result, dict):
        raise ValueError("is not an object")
    size = _int_field(result.get("size"), "size")
    count = _int_field(result.get("count"), "count")
    root_text = str(result.get("root", "")).strip()
    try:
        root: int | None = int(root_text) if root_text else None
    except ValueError:
        raise ValueError(f"root {result.get('root')!r} is not an integer") from None
    oop, ip = _half(result, "out_of_place"), _half(result, "in_place")
    if not oop and not ip:
        raise ValueError("has neither out_of_place nor in_place results")
    dtype = result.get("type", "")
    redop = result.get("redop", "none")
    return NcclTestRow(
        size_bytes=size,
        count=count,
        dtype=str(dtype),
        redop=str(redop) if redop else "none",
        root=root,
        oop_time_us=oop.get("time"),
        oop_algbw_GBps=oop.get("algbw"),
        oop_busbw_GBps=oop.get("busbw"),
        oop_wrong=oop.get("wrong"),
        ip_time_us=ip.get("time"),
        ip_algbw_GBps=ip.get("algbw"),
        ip_busbw_GBps=ip.get("busbw"),
        ip_wrong=ip.get("wrong"),
        line_no=index,
        oop_p50_us=oop.get("p50"),
        oop_p99_us=oop.get("p99"),
        ip_p50_us=ip.get("p50"),
        ip_p99_us=ip.get("p99"),
    )


def _load(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text.lstrip("\ufeff"))
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        if not text.rstrip().endswith("}"):
            raise NcclLogError(
                f"not valid JSON: it ends early ({exc.msg}: {where}); nccl-tests may have "
                "stopped before closing its -J file"
            ) from None
        raise NcclLogError(f"not valid JSON: {exc.msg} ({where})") from None
    except RecursionError:  # thousands of nested brackets: no -J file looks like that
        raise NcclLogError(
            "not an nccl-tests -J file: its JSON is nested too deeply to read"
        ) from None
    if not isinstance(data, dict):
        raise NcclLogError(
            f"the JSON is a {type(data).__name__}, not an object; is this the -J file of "
            "an nccl-tests run?"
        )
    if not isinstance(data.get("results"), list):
        raise NcclLogError(
            "the JSON has no 'results' list; is this the -J file of an nccl-tests run "
            "(all_reduce_perf -J out.json)?"
        )
    return data


def _config(data: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    config = data.get("config")
    if not isinstance(config, dict):
        return {}, []
    devices = [d for d in config.get("devices", []) or [] if isinstance(d, dict)]
    return config, devices


def _n_ranks(config: dict[str, Any], devices: list[dict[str, Any]]) -> int | None:
    try:
        per_process = int(config.get("nthreads", 1)) * int(config.get("ngpus", 1))
    except (TypeError, ValueError):
        return None
    return len(devices) * per_process if devices and per_process > 0 else None


def _footer(data: dict[str, Any]) -> tuple[float | None, int | None, list[str]]:
    """Average busbw, out-of-bounds count and the footer's warnings."""
    warnings: list[str] = []
    avg = None
    block = data.get("average_bus_bandwidth")
    if isinstance(block, dict):
        try:
            avg = _finite(_number(block.get("bandwidth"), "bandwidth"))
        except ValueError as exc:
            warnings.append(f"average bus bandwidth ignored: {exc}")
        if str(block.get("okay", "")).lower() == "false":
            warnings.append(
                "nccl-tests reports the average bus bandwidth below NCCL_TESTS_MIN_BW (okay: false)"
            )
    else:
        warnings.append("no 'average_bus_bandwidth': the run may have stopped early")
    oob = None
    block = data.get("out_of_bounds")
    if isinstance(block, dict) and isinstance(block.get("count"), int):
        oob = int(block["count"])
        if oob > 0:
            warnings.append(
                f"nccl-tests reports {oob} out-of-bounds values (FAILED): data validation failed"
            )
    errors = data.get("errors")
    if isinstance(errors, list):
        warnings += [f"nccl-tests reported an error: {e}" for e in errors if e]
    return avg, oob, warnings


def _resolve_op(
    data: dict[str, Any],
    requested: str | None,
    rows: list[NcclTestRow],
    n_ranks: int | None,
    warnings: list[str],
) -> str:
    args = data.get("args")
    found = None
    if isinstance(args, list) and args:
        found = binary_op(os.path.basename(str(args[0])))
    if found is not None:
        binary, op = found
        if op is None:
            warnings.append(f"json: {binary} is not one of the modelled collectives")
            return "unknown"
        if requested is not None and requested != op:
            warnings.append(
                f"json: op={requested!r} was given but args[0] names {binary}; using {op!r}"
            )
        return op
    if requested is not None:
        return requested
    guessed, why = guess_op(rows, n_ranks)
    warnings.append(
        f"json: op {'guessed as ' + repr(guessed) if guessed != 'unknown' else 'unknown'} "
        f"from the results ({why}); args[0] names no *_perf binary"
    )
    return guessed


def _located(items: Iterable[tuple[int, str]]) -> list[str]:
    return [f"result {n}: {msg}" for n, msg in items]


def parse_nccl_tests_json(text: str | bytes, *, op: str | None = None) -> NcclTestsLog:
    """Parse the JSON file of one nccl-tests run (``-J FILE.json``).

    Parameters
    ----------
    text
        The file's content. Bytes are decoded as UTF-8 with replacement.
    op
        Collective to assume when ``args[0]`` names no nccl-tests binary.

    Returns
    -------
    NcclTestsLog
        As :func:`fabric_model.validate.nccl_log.parse_nccl_tests` returns for a text log,
        with ``source="json"``, the per-iteration p50/p99 where the run measured them
        (``-I 1``), and ``line_no`` = the result's 1-based position.

    Raises
    ------
    NcclLogError
        One message for input that is not JSON, not an object with a ``results`` list, or
        has no readable result.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if not text.strip():
        raise NcclLogError("empty input: there is no nccl-tests output to read")
    data = _load(text)
    requested = normalize_op(op) if op is not None else None
    warnings: list[str] = []
    version = data.get("version")
    if version not in JSON_VERSIONS:
        warnings.append(
            f"json: version {version!r} is not one this reader knows "
            f"({', '.join(map(str, JSON_VERSIONS))}); read as version {JSON_VERSIONS[-1]}"
        )
    config, devices = _config(data)
    n_ranks = _n_ranks(config, devices)
    rows: list[NcclTestRow] = []
    per_row: list[tuple[int, str]] = []
    for i, result in enumerate(data["results"], start=1):
        try:
            row = _row(result, i)
        except ValueError as exc:
            per_row.append((i, f"unreadable result ignored: {exc}"))
            continue
        rows.append(row)
        per_row.extend(row_warnings(RowResult(row=row)))
    if not rows:
        detail = f" ({len(per_row)} unreadable)" if per_row else ""
        raise NcclLogError(f"the JSON's 'results' list has no readable result{detail}")
    avg, oob, footer_warnings = _footer(data)
    warnings += _located(per_row) + [f"json: {w}" for w in footer_warnings]
    if avg is not None:
        warnings += [f"json: {msg}" for _, msg in avg_check(rows, avg, 0)]
    final_op = _resolve_op(data, requested, rows, n_ranks, warnings)
    per_process = max(1, (n_ranks or len(devices)) // max(1, len(devices))) if devices else 1
    names = tuple(str(d.get("device_info", "")) for d in devices for _ in range(per_process))
    hosts = tuple(dict.fromkeys(str(d.get("hostname", "")) for d in devices))
    code = data.get("nccl_version")
    nccl_version = decode_nccl_code(str(code)) if isinstance(code, int) else None
    header = {str(k): str(v) for k, v in config.items() if k != "devices"}
    header["json version"] = str(version)
    return NcclTestsLog(
        op=final_op,
        n_ranks=n_ranks,
        devices=names,
        hosts=hosts,
        nccl_version=nccl_version,
        header=header,
        rows=tuple(rows),
        avg_busbw_GBps=avg,
        out_of_bounds=oob,
        warnings=tuple(warnings),
        source="json",
        n_ranks_source="json devices" if n_ranks is not None else "",
    )
