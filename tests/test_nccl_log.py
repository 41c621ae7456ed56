"""Tests for the nccl-tests log parser (`fabric_model.validate.nccl_log`).

The sample logs in ``tests/data/nccl`` are synthetic: their layouts follow the printf formats
of NVIDIA/nccl-tests (pre-2.13, 2.13-2.16 and 2.17+), their numbers are illustrative. Each
file names what it was modeled on in its first line.
"""

# ruff: noqa: UP031 - printf-style strings here copy nccl-tests' C format strings on purpose.

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_model.errors import FabricModelError, NcclLogError
from fabric_model.validate.nccl_log import (
    MAX_LOG_FILE_BYTES,
    NCCL_TESTS_OPS,
    NcclTestRow,
    NcclTestsLog,
    parse_nccl_tests,
    parse_nccl_tests_file,
)

DATA = Path(__file__).parent / "data" / "nccl"


def _log(name: str) -> NcclTestsLog:
    return parse_nccl_tests_file(DATA / name)


def _text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def _without_binary_names(text: str) -> str:
    """Drop every line naming a *_perf binary, so the op must come from elsewhere."""
    return "\n".join(line for line in text.split("\n") if "_perf" not in line)


# ------------------------------------------------------------------------------------------
# Sample logs


def test_every_sample_log_declares_its_source() -> None:
    logs = sorted(DATA.glob("*.log"))
    assert len(logs) >= 8
    for path in logs:
        first = path.read_text(encoding="utf-8").split("\n", 1)[0]
        assert first.startswith("# source: "), path.name


def test_modern_all_reduce_on_8_h100() -> None:
    log = _log("all_reduce_perf_8xH100.log")
    assert log.op == "allreduce"
    assert log.n_ranks == 8
    assert log.devices == ("NVIDIA H100 80GB HBM3",) * 8
    assert log.hosts == ("dgx-h100-01",)
    assert log.nccl_version == "2.18.5+cuda12.2"
    assert log.header["nGpus"] == "8"
    assert log.header["step"] == "2(factor)"
    assert log.header["warmup iters"] == "5"
    assert len(log.rows) == 31
    first, last = log.rows[0], log.rows[-1]
    assert (first.size_bytes, first.count, first.dtype, first.redop, first.root) == (
        8,
        2,
        "float",
        "sum",
        -1,
    )
    assert first.oop_time_us == 10.44
    assert last.size_bytes == 8589934592
    assert last.oop_time_us == 31720.0
    assert last.oop_busbw_GBps == 473.90
    assert last.ip_busbw_GBps == 474.79
    assert (last.oop_wrong, last.ip_wrong) == (0, 0)
    assert last.oop_error is None
    assert log.avg_busbw_GBps == 184.098
    assert log.out_of_bounds == 0
    assert log.warnings == ()
    assert log.busbw_by_size[8589934592] == 473.90


def test_all_reduce_busbw_is_algbw_times_2_n_minus_1_over_n() -> None:
    # nccl-tests doc/PERFORMANCE.md: all-reduce busbw = algbw * 2(n-1)/n; both printed with
    # two decimals, so they agree to rounding.
    log = _log("all_reduce_perf_8xH100.log")
    n = log.n_ranks
    assert n is not None
    for row in log.rows:
        assert row.oop_algbw_GBps is not None and row.oop_busbw_GBps is not None
        assert row.oop_busbw_GBps == pytest.approx(row.oop_algbw_GBps * 2 * (n - 1) / n, abs=0.02)


def test_legacy_all_reduce_without_root_and_with_error_column() -> None:
    log = _log("all_reduce_perf_legacy_error_column.log")
    assert log.op == "allreduce"
    assert log.n_ranks == 16
    assert log.hosts == ("ip-172-31-10-21", "ip-172-31-14-87")
    assert log.devices[15] == "Tesla V100-SXM2-32GB"
    assert log.nccl_version == "2.7.8+cuda11.0"
    assert "agg iters" not in log.header
    assert log.header["iters"] == "100"
    assert len(log.rows) == 28
    first, last = log.rows[0], log.rows[-1]
    assert first.size_bytes == 8 and last.size_bytes == 1073741824
    assert last.root is None
    assert last.redop == "sum"
    # The old 'error' column is a deviation, not a count: it never becomes #wrong.
    assert last.oop_wrong is None and last.ip_wrong is None
    assert last.oop_error == 2e-07
    assert all(row.oop_error is not None and row.oop_error <= 2e-07 for row in log.rows)
    assert last.oop_busbw_GBps == 12.01
    assert log.avg_busbw_GBps == 5.41407
    assert log.warnings == ()


def test_multi_node_all_gather_with_nccl_info_lines_interleaved() -> None:
    log = _log("all_gather_perf_2node_nccl_info.log")
    assert log.op == "allgather"
    assert log.n_ranks == 16
    assert log.hosts == ("gpu-a-017", "gpu-a-018")
    assert log.nccl_version == "2.21.5+cuda12.4"
    sizes = [row.size_bytes for row in log.rows]
    assert sizes == [2**20 * 2**k for k in range(14)]  # 1 MiB ... 8 GiB, none lost
    assert all(row.redop == "none" and row.root == -1 for row in log.rows)
    assert all(row.size_bytes == row.count * 16 * 4 for row in log.rows)
    assert log.rows[-1].oop_busbw_GBps == 46.18
    assert log.avg_busbw_GBps == 39.5333
    assert log.warnings == ()


def test_alltoall_under_srun_labels() -> None:
    log = _log("alltoall_perf_srun_labels.log")
    assert log.op == "alltoall"
    assert log.n_ranks == 8
    assert log.hosts == ("a100-n01", "a100-n02")
    assert log.header["minBytes"] == "65536"
    assert len(log.rows) == 15
    assert log.rows[0].size_bytes == 65536 and log.rows[0].count == 2048
    assert log.rows[-1].size_bytes == 1073741824
    assert log.rows[-1].oop_busbw_GBps == 20.0
    assert log.avg_busbw_GBps == 14.4477
    assert log.warnings == ()


def test_sendrecv_newest_format_in_place_not_validated() -> None:
    log = _log("sendrecv_perf_2gpu.log")
    assert log.op == "sendrecv"
    assert log.n_ranks == 2
    assert log.nccl_version == "2.26.3"  # decoded from nccl-library=22603
    assert log.header["nccl-tests version"] == "2.17.6"
    assert log.header["unalign"] == "0"
    assert [row.size_bytes for row in log.rows] == [1024 * 4**k for k in range(10)]
    assert all(row.oop_wrong == 0 and row.ip_wrong is None for row in log.rows)
    assert all(row.oop_busbw_GBps == row.oop_algbw_GBps for row in log.rows)  # factor 1
    assert log.rows[-1].oop_time_us == 12351.7
    assert log.avg_busbw_GBps == 12.167
    assert log.warnings == ()


def test_reduce_scatter_without_validation() -> None:
    log = _log("reduce_scatter_perf_nocheck.log")
    assert log.op == "reducescatter"
    assert log.n_ranks == 8
    assert log.header["validation"] == "0"
    assert all(row.oop_wrong is None and row.ip_wrong is None for row in log.rows)
    assert log.rows[0].size_bytes == 33554432
    assert log.rows[-1].size_bytes == 4294967296
    assert log.rows[-1].oop_busbw_GBps == 226.25
    assert log.avg_busbw_GBps == 225.123
    assert log.warnings == ()


def test_truncated_log_keeps_complete_rows_and_says_why() -> None:
    log = _log("all_reduce_perf_truncated.log")
    assert log.op == "allreduce"
    assert log.n_ranks == 4
    assert len(log.rows) == 18
    assert log.rows[0].size_bytes == 1024
    assert log.rows[-1].size_bytes == 134217728
    assert log.rows[-1].oop_busbw_GBps == 141.41
    assert log.avg_busbw_GBps is None
    assert log.out_of_bounds is None
    assert len(log.warnings) == 2
    assert log.warnings[0].startswith("line 34: truncated row ignored")
    assert "268435456" in log.warnings[0]
    assert log.warnings[1] == ("line 34: no '# Avg bus bandwidth' footer: the log may be truncated")


def test_failed_validation_rows_are_kept_and_warned() -> None:
    log = _log("reduce_perf_wrong_results.log")
    assert log.op == "reduce"
    assert all(row.root == 0 for row in log.rows)
    assert len(log.rows) == 9
    assert log.out_of_bounds == 2
    bad = {row.size_bytes: (row.oop_wrong, row.ip_wrong) for row in log.rows}
    assert bad[8388608] == (3, 0)
    assert bad[67108864] == (0, 12)
    assert log.warnings[0].startswith(
        "line 19: 3 wrong results at 8388608 bytes: data validation failed"
    )
    assert log.warnings[1].startswith(
        "line 22: 12 wrong results at 67108864 bytes: data validation failed"
    )
    assert "2 out-of-bounds values (FAILED)" in log.warnings[2]
    assert len(log.warnings) == 3


def test_legacy_broadcast_with_root_and_no_redop_column() -> None:
    log = _log("broadcast_perf_legacy.log")
    assert log.op == "broadcast"
    assert log.n_ranks == 8
    assert len(log.rows) == 12
    assert all(row.redop == "none" and row.root == 0 for row in log.rows)
    assert all(row.ip_error == 0.0 for row in log.rows)
    assert log.rows[-1].size_bytes == 134217728
    assert log.warnings == ()


def test_garbage_file_is_not_an_nccl_tests_log() -> None:
    with pytest.raises(NcclLogError, match="no nccl-tests result table found") as info:
        _log("garbage.log")
    assert "garbage.log" in str(info.value)
    assert "is this an nccl-tests log?" in str(info.value)


# ------------------------------------------------------------------------------------------
# Broken input raises NcclLogError with a plain message


@pytest.mark.parametrize("text", ["", "   \n\n\t\n"])
def test_empty_input_raises(text: str) -> None:
    with pytest.raises(NcclLogError, match="empty input"):
        parse_nccl_tests(text)


def test_binary_input_raises() -> None:
    blob = bytes(range(256)) * 64
    with pytest.raises(NcclLogError, match="binary"):
        parse_nccl_tests(blob.decode("utf-8", errors="replace"))
    with pytest.raises(NcclLogError, match="binary"):
        parse_nccl_tests(blob)
    no_nul = bytes(b for b in range(128, 256)) * 64
    with pytest.raises(NcclLogError, match="binary"):
        parse_nccl_tests(no_nul.decode("utf-8", errors="replace"))


def test_binary_file_raises(tmp_path: Path) -> None:
    path = tmp_path / "core.log"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 32)
    with pytest.raises(NcclLogError, match="binary"):
        parse_nccl_tests_file(path)


def test_text_without_a_table_raises() -> None:
    with pytest.raises(NcclLogError, match=r"no nccl-tests result table found .*'#  size'"):
        parse_nccl_tests("hello\nworld\n# nThread 1 nGpus 1\n")


def test_table_without_readable_rows_raises() -> None:
    text = _text("all_reduce_perf_8xH100.log")
    header_only = text[: text.index("           8             2")]
    with pytest.raises(NcclLogError, match="has no readable rows"):
        parse_nccl_tests(header_only)


def test_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(NcclLogError, match="no such file"):
        parse_nccl_tests_file(tmp_path / "missing.log")


def test_directory_raises(tmp_path: Path) -> None:
    with pytest.raises(NcclLogError, match="is a directory"):
        parse_nccl_tests_file(tmp_path)


def test_oversized_file_raises(tmp_path: Path) -> None:
    path = tmp_path / "huge.log"
    with path.open("wb") as f:
        f.truncate(MAX_LOG_FILE_BYTES + 1)  # sparse: no 20 MiB written
    with pytest.raises(NcclLogError, match="20 MiB"):
        parse_nccl_tests_file(path)


def test_unknown_op_argument_raises() -> None:
    with pytest.raises(NcclLogError, match="not an nccl-tests collective"):
        parse_nccl_tests(_text("all_reduce_perf_8xH100.log"), op="allsum")


def test_errors_are_fabric_model_errors_and_value_errors() -> None:
    with pytest.raises(FabricModelError):
        parse_nccl_tests("")
    with pytest.raises(ValueError):
        parse_nccl_tests("")


# ------------------------------------------------------------------------------------------
# Row-level robustness: bad rows are skipped, never raised


JUNK = [
    "gpu01:4242:4300 [3] NCCL INFO Channel 07/0 : 3[3] -> 4[4] via P2P/CUMEM/read",
    "",
    "[gpu01:4242] 7 more processes have sent help message help-mpi-btl-openib.txt",
    "1 more process has sent help message help-mpi-btl-base.txt / btl:no-nics",
    "NCCL version 2.18.5+cuda12.2",
    "   warning: something odd, retrying",
    "#",
]


def test_junk_between_rows_loses_no_rows() -> None:
    clean = _log("all_reduce_perf_8xH100.log")
    lines = _text("all_reduce_perf_8xH100.log").split("\n")
    noisy: list[str] = []
    for k, line in enumerate(lines):
        noisy.append(line)
        if line.strip() and line.strip()[0].isdigit():
            noisy.append(JUNK[k % len(JUNK)])
    log = parse_nccl_tests("\n".join(noisy))
    assert [dataclasses.replace(r, line_no=0) for r in log.rows] == [
        dataclasses.replace(r, line_no=0) for r in clean.rows
    ]
    assert log.warnings == ()
    for row in log.rows:
        assert noisy[row.line_no - 1].split()[0] == str(row.size_bytes)


def test_bad_row_is_skipped_with_a_warning_naming_its_line() -> None:
    lines = _text("all_reduce_perf_8xH100.log").split("\n")
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("1024 "))
    lines[at] = lines[at].replace("float     sum", "float     sum   garbage")
    log = parse_nccl_tests("\n".join(lines))
    assert len(log.rows) == 30
    assert 1024 not in log.busbw_by_size
    assert log.warnings[0].startswith(f"line {at + 1}: unparsable table row ignored: ")
    assert "root 'garbage' is not an integer" in log.warnings[0]
    # The footer average no longer matches the rows that were read.
    assert any("rows may be missing" in w for w in log.warnings)


def test_row_split_by_nccl_info_is_rejoined() -> None:
    # Shape of a real split row (an NCCL INFO message glued to the row preamble, the rest
    # of the row on the next line) under a PALS "host rank: " label; values made up.
    pals = "x1000c0s1b0n0.hsn.example.org 0: "
    lines = [
        pals + "#       size         count      type   redop    root     time   algbw   busbw"
        "  #wrong     time   algbw   busbw  #wrong",
        pals + "   134217728      33554432     float     sum      -1   8770.1   15.30   28.69"
        "       0   8861.0   15.15   28.40       0",
        pals + "   268435456      67108864     float     sum      -1x1000c0s1b0n0:123:456 [0]"
        " NCCL INFO Connected all trees",
        pals + "      17560.8   15.29   28.66       0  17598.6   15.25   28.60       0",
        pals + "# Out of bounds values : 0 OK",
        pals + "# Avg bus bandwidth    : 28.5875 ",
    ]
    log = parse_nccl_tests("\n".join(lines), op="allreduce")
    assert [r.size_bytes for r in log.rows] == [134217728, 268435456]
    assert log.rows[1].oop_time_us == 17560.8
    assert log.rows[1].ip_busbw_GBps == 28.60
    assert log.rows[1].line_no == 3
    assert log.warnings == ("line 3: row split by interleaved output; rejoined with line 4",)


def test_newest_layout_with_bitwise_and_timestamp_columns() -> None:
    # Format strings of nccl-tests 2.17+ writeResultHeader/writeBenchmarkLineBody with
    # --bitwise and timestamps on; values made up.
    names = (
        "size",
        "count",
        "type",
        "redop",
        "root",
        "time",
        "algbw",
        "busbw",
        "#wrong",
        "#bitdiff",
        "time",
        "algbw",
        "busbw",
        "#wrong",
        "#bitdiff",
    )
    header = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %8s  %7s  %6s  %6s  %6s  %8s %*s" % (
        *names,
        19,
        "timestamp",
    )
    row = "%12li  %12li  %8s  %6s  %6s" % (1048576, 262144, "bfloat16", "sum", "    -1")
    row += "  %7s  %6s  %6s  %6g  %8g" % ("14.53", "72.17", "126.30", 0, 0)
    row += "  %7s  %6s  %6s  %6g  %8g" % ("14.21", "73.79", "129.13", 0, 0)
    row += "%21s" % "2025-06-01 10:00:00"
    log = parse_nccl_tests("\n".join([header, row, "# Avg bus bandwidth    : 127.715 "]))
    (parsed,) = log.rows
    assert parsed.dtype == "bfloat16"
    assert parsed.ip_busbw_GBps == 129.13
    assert (parsed.oop_wrong, parsed.ip_wrong) == (0, 0)


def test_header_with_size_and_unit_tokens_fused() -> None:
    text = (
        "# size(B) count(elements) type redop root time(us) algbw(GB/s) busbw(GB/s) #wrong"
        " time(us) algbw(GB/s) busbw(GB/s) #wrong\n"
        "1M 262144 float sum -1 20.00 52.43 91.75 0 19.50 53.77 94.10 0\n"
    )
    log = parse_nccl_tests(text, op="allreduce")
    assert log.rows[0].size_bytes == 2**20
    assert log.rows[0].ip_busbw_GBps == 94.10


# ------------------------------------------------------------------------------------------
# Op detection


def test_op_is_guessed_from_the_table_with_a_warning() -> None:
    log = parse_nccl_tests(_without_binary_names(_text("all_reduce_perf_8xH100.log")))
    assert log.op == "allreduce"
    assert len(log.warnings) == 1
    assert "op guessed as 'allreduce' from the table" in log.warnings[0]
    assert "size == count x 4 bytes" in log.warnings[0]


def test_reduce_scatter_is_guessed_from_size_over_count() -> None:
    log = parse_nccl_tests(_without_binary_names(_text("reduce_scatter_perf_nocheck.log")))
    assert log.op == "reducescatter"
    assert "guessed" in log.warnings[0]


def test_all_gather_cannot_be_told_from_alltoall() -> None:
    log = parse_nccl_tests(_without_binary_names(_text("all_gather_perf_2node_nccl_info.log")))
    assert log.op == "unknown"
    assert "all_gather or alltoall" in log.warnings[0]


@pytest.mark.parametrize("alias", ["allreduce", "all_reduce", "AllReduce", "all_reduce_perf"])
def test_op_argument_is_used_when_the_log_names_no_binary(alias: str) -> None:
    log = parse_nccl_tests(_without_binary_names(_text("all_reduce_perf_8xH100.log")), op=alias)
    assert log.op == "allreduce"
    assert log.warnings == ()


def test_binary_name_wins_over_a_conflicting_op_argument() -> None:
    log = parse_nccl_tests(_text("all_reduce_perf_8xH100.log"), op="alltoall")
    assert log.op == "allreduce"
    assert "op='alltoall' was given but the log names all_reduce_perf" in log.warnings[0]


_HEADER_2_13 = (
    "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    "     time   algbw   busbw #wrong"
)
_ROW_1K = (
    "        1024           256     float     sum      -1    10.00    0.10    0.18      0"
    "    10.00    0.10    0.18      0"
)


@pytest.mark.parametrize(
    ("launch", "n_ranks"),
    [
        ("mpirun -np 4 ./build/all_reduce_perf -b 8 -e 1G -n 100 -g 2", 8),
        ("srun --ntasks=16 ./build/all_reduce_perf -b 8 -e 1G", 32),
        # nccl-tests' own "-n" (iterations) after the binary is not a process count.
        ("mpirun -N 8 --hostfile hosts ./build/all_reduce_perf -b 8 -n 100", None),
    ],
)
def test_n_ranks_from_the_launcher_line_when_no_rank_lines(
    launch: str, n_ranks: int | None
) -> None:
    text = "\n".join([launch, "# nThread 1 nGpus 2 minBytes 8", _HEADER_2_13, _ROW_1K, ""])
    assert parse_nccl_tests(text).n_ranks == n_ranks


def test_guess_copes_with_an_unknown_dtype_row() -> None:
    odd = _ROW_1K.replace("256     float", "128     fp6e3")
    log = parse_nccl_tests("\n".join([_HEADER_2_13, odd, _ROW_1K, ""]))
    assert log.op == "allreduce"
    assert log.rows[0].dtype == "fp6e3"
    assert "guessed" in log.warnings[0]


def test_concatenated_runs_read_the_first_table() -> None:
    text = _text("broadcast_perf_legacy.log") + _text("all_reduce_perf_8xH100.log")
    log = parse_nccl_tests(text)
    assert log.op == "broadcast"
    assert len(log.rows) == 12
    assert log.n_ranks == 8
    assert "another nccl-tests run follows" in log.warnings[0]


def test_ops_are_normalised_names() -> None:
    for name in DATA.glob("*.log"):
        if name.name != "garbage.log":
            assert _log(name.name).op in NCCL_TESTS_OPS


# ------------------------------------------------------------------------------------------
# Result values


def test_to_frame_has_both_halves_and_a_headline_busbw() -> None:
    log = _log("sendrecv_perf_2gpu.log")
    frame = log.to_frame()
    assert len(frame) == len(log.rows)
    for column in ("size_bytes", "oop_time_us", "ip_time_us", "busbw_GBps", "line_no"):
        assert column in frame.columns
    assert frame["busbw_GBps"].tolist() == [row.oop_busbw_GBps for row in log.rows]
    assert frame["ip_wrong"].isna().all()
    assert str(frame["oop_wrong"].dtype) == "Int64"
    assert frame.attrs["op"] == "sendrecv"
    assert frame.attrs["n_ranks"] == 2


def test_to_dict_is_json_ready() -> None:
    log = _log("all_reduce_perf_truncated.log")
    data = json.loads(json.dumps(log.to_dict()))
    assert data["op"] == "allreduce"
    assert len(data["rows"]) == 18
    assert data["rows"][0]["size_bytes"] == 1024
    assert data["warnings"] == list(log.warnings)


def test_results_are_frozen() -> None:
    log = _log("all_reduce_perf_8xH100.log")
    with pytest.raises(dataclasses.FrozenInstanceError):
        log.op = "broadcast"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        log.rows[0].size_bytes = 1  # type: ignore[misc]


def test_busbw_by_size_averages_repeated_sizes() -> None:
    row = NcclTestRow(8, 2, "float", "sum", -1, 1.0, 0.0, 1.0, 0, 1.0, 0.0, 1.0, 0, 1)
    log = NcclTestsLog(
        "allreduce",
        2,
        (),
        (),
        None,
        {},
        (row, dataclasses.replace(row, oop_busbw_GBps=3.0, line_no=2)),
        None,
        None,
    )
    assert log.busbw_by_size == {8: 2.0}


def test_nccl_version_decoded_from_an_old_style_code() -> None:
    text = _text("all_reduce_perf_truncated.log").replace(
        "# nThread", "# nccl-tests version 2.10.0 nccl-headers=2708 nccl-library=2708\n# nThread"
    )
    assert parse_nccl_tests(text).nccl_version == "2.7.8"


# ------------------------------------------------------------------------------------------
# Property tests: well-formed tables round-trip their numbers


def _time_str(time_us: float) -> str:
    # nccl-tests 2.13-2.16: "%7.0f" from 10 ms, "%7.1f" from 100 us, else "%7.2f".
    if time_us >= 10000.0:
        return "%7.0f" % time_us
    if time_us >= 100.0:
        return "%7.1f" % time_us
    return "%7.2f" % time_us


_MEASURE = st.tuples(
    st.floats(min_value=0.5, max_value=5e6, allow_nan=False),
    st.floats(min_value=0.0, max_value=999.0, allow_nan=False),
    st.floats(min_value=0.0, max_value=999.0, allow_nan=False),
    st.one_of(st.none(), st.integers(min_value=0, max_value=10**5)),
)


@st.composite
def _tables(draw: st.DrawFn) -> tuple[str, list[dict[str, object]]]:
    n_rows = draw(st.integers(min_value=1, max_value=25))
    sizes = sorted(draw(st.sets(st.integers(0, 2**40), min_size=n_rows, max_size=n_rows)))
    legacy = draw(st.booleans())
    junk = draw(st.lists(st.sampled_from(JUNK), min_size=n_rows, max_size=n_rows))
    lines = ["$ ./build/all_reduce_perf -b 8 -e 1T -f 2"]
    if legacy:
        lines.append(
            "#       size         count      type   redop     time   algbw   busbw  error"
            "     time   algbw   busbw  error"
        )
    else:
        lines.append(
            "#       size         count      type   redop    root     time   algbw   busbw"
            " #wrong     time   algbw   busbw #wrong"
        )
    expected: list[dict[str, object]] = []
    busbws: list[float] = []
    for size, noise in zip(sizes, junk, strict=True):
        oop, ip = draw(_MEASURE), draw(_MEASURE)
        line = "%12li  %12li  %8s  %6s" % (size, size // 4, "float", "sum")
        if not legacy:
            line += "  %6i" % -1
        for time_us, algbw, busbw, wrong in (oop, ip):
            if wrong is None:
                tail = "  N/A"
            elif legacy:  # pre-2.13 'error' column, printed "%5.0le"
                tail = "%5.0e" % wrong
            else:
                tail = "%5g" % wrong
            line += "  %7s  %6.2f  %6.2f  %s" % (_time_str(time_us), algbw, busbw, tail)
        lines.append(line)
        lines.append(noise)
        values = line.split()
        offset = 4 if legacy else 5
        expected.append(
            {
                "line_no": len(lines) - 1,
                "size_bytes": size,
                "oop": [float(v) for v in values[offset : offset + 3]],
                "ip": [float(v) for v in values[offset + 4 : offset + 7]],
                "oop_flag": values[offset + 3],
                "ip_flag": values[offset + 7],
            }
        )
        busbws += [float(values[offset + 2]), float(values[offset + 6])]
    lines.append("# Out of bounds values : 0 OK")
    lines.append("# Avg bus bandwidth    : %g " % (sum(busbws) / len(busbws)))
    return "\n".join(lines) + "\n", expected


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_tables())
def test_well_formed_tables_round_trip(table: tuple[str, list[dict[str, object]]]) -> None:
    text, expected = table
    log = parse_nccl_tests(text)
    assert log.op == "allreduce"
    assert len(log.rows) == len(expected)
    for row, want in zip(log.rows, expected, strict=True):
        assert row.line_no == want["line_no"]
        assert row.size_bytes == want["size_bytes"]
        assert [row.oop_time_us, row.oop_algbw_GBps, row.oop_busbw_GBps] == want["oop"]
        assert [row.ip_time_us, row.ip_algbw_GBps, row.ip_busbw_GBps] == want["ip"]
        for flag, wrong, error in (
            (want["oop_flag"], row.oop_wrong, row.oop_error),
            (want["ip_flag"], row.ip_wrong, row.ip_error),
        ):
            assert isinstance(flag, str)
            if flag == "N/A":
                assert wrong is None and error is None
            elif "e" in flag:  # legacy 'error' column: a deviation, kept apart from #wrong
                assert wrong is None and error == float(flag)
            else:
                assert wrong == int(flag) and error is None
    assert not any("unparsable" in w or "truncated" in w for w in log.warnings)
    assert not any("rows may be missing" in w for w in log.warnings)
    assert log.avg_busbw_GBps is not None and math.isfinite(log.avg_busbw_GBps)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_cutting_a_log_anywhere_never_invents_rows(data: st.DataObject) -> None:
    text = _text("all_reduce_perf_8xH100.log")
    full = [
        (r.size_bytes, r.oop_busbw_GBps, r.ip_busbw_GBps)
        for r in _log("all_reduce_perf_8xH100.log").rows
    ]
    start = text.index("#       size")
    cut = data.draw(st.integers(min_value=start, max_value=len(text)))
    try:
        log = parse_nccl_tests(text[:cut])
    except NcclLogError as exc:  # cut inside the column-name line or before the first row
        assert "no readable rows" in str(exc) or "no nccl-tests result table found" in str(exc)
        return
    got = [(r.size_bytes, r.oop_busbw_GBps, r.ip_busbw_GBps) for r in log.rows]
    assert got == full[: len(got)]
    if len(got) < len(full):
        assert any("footer" in w for w in log.warnings)
