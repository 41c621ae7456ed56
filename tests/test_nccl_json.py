"""nccl-tests JSON (``-J FILE.json``): round trips in the published schema, malformed files,
the comparison's p50/p99, check-nccl, and the acceptance script's NCCL_TESTS_MIN_BW.

The JSON files are written by ``tests/nccl_json_writer.py``, a transcription of the writer in
NVIDIA/nccl-tests src/util.cu (2.19.6).
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_model.errors import NcclLogError
from fabric_model.presets import load_preset
from fabric_model.scenario import apply_overrides
from fabric_model.validate.acceptance import (
    NCCL_TESTS_BINARY,
    NCCL_TESTS_MIN_BW_SLACK,
    acceptance_expectations,
)
from fabric_model.validate.compare import compare_log
from fabric_model.validate.nccl_json import looks_like_json, parse_nccl_tests_json
from fabric_model.validate.nccl_log import parse_nccl_tests, parse_nccl_tests_file
from tests.nccl_json_writer import (
    FIXTURES,
    Half,
    Result,
    Run,
    all_gather_16_ranks_v1,
    all_reduce_8xh100,
    write_json,
)

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "nccl"


def _run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fabric_model", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


# ------------------------------------------------------------------------------------------
# fixtures are what the writer produces


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixtures_are_the_writers_output(name: str) -> None:
    assert (DATA / name).read_text(encoding="utf-8") == write_json(FIXTURES[name]())


def test_written_json_is_one_line_and_valid() -> None:
    text = write_json(all_reduce_8xh100())
    assert "\n" not in text
    data = json.loads(text)
    assert data["version"] == 3
    assert data["config"]["per_iter_timing"] == "true"
    assert "out_of_place_per_iter" in data["results"][0]


# ------------------------------------------------------------------------------------------
# round trips


def test_json_round_trip_matches_the_text_log_of_the_same_run() -> None:
    text_log = parse_nccl_tests_file(DATA / "all_reduce_perf_8xH100.log")
    json_log = parse_nccl_tests_file(DATA / "all_reduce_perf_8xH100.json")
    assert json_log.source == "json" and text_log.source == "text"
    assert json_log.op == text_log.op == "allreduce"
    assert json_log.n_ranks == text_log.n_ranks == 8
    assert json_log.hosts == ("dgx-h100-01",)
    assert json_log.devices == ("NVIDIA H100 80GB HBM3",) * 8
    assert json_log.nccl_version == "2.27.3"
    assert len(json_log.rows) == len(text_log.rows) == 31
    fields = ("size_bytes", "count", "dtype", "redop", "root", "oop_time_us", "oop_busbw_GBps")
    fields += ("oop_algbw_GBps", "ip_time_us", "ip_busbw_GBps", "oop_wrong", "ip_wrong")
    for j, t in zip(json_log.rows, text_log.rows, strict=True):
        for f in fields:
            assert getattr(j, f) == pytest.approx(getattr(t, f)), f
    assert json_log.busbw_by_size == pytest.approx(text_log.busbw_by_size)
    assert json_log.avg_busbw_GBps == pytest.approx(json_log_mean(json_log), rel=1e-6)


def json_log_mean(log) -> float:  # type: ignore[no-untyped-def]
    values = [v for r in log.rows for v in (r.oop_busbw_GBps, r.ip_busbw_GBps) if v is not None]
    return sum(values) / len(values)


def test_percentiles_are_read_as_nccl_tests_computes_them() -> None:
    run = all_reduce_8xh100()
    log = parse_nccl_tests_json(write_json(run))
    for row, res in zip(log.rows, run.results, strict=True):
        times = sorted(res.oop.iter_times_us)  # type: ignore[union-attr]
        assert row.oop_p50_us == pytest.approx(times[len(times) // 2], abs=1e-6)
        assert row.oop_p99_us == pytest.approx(times[-1], abs=1e-6)  # 20 samples: p99 = max
        # busbw at a percentile scales as 1 / time at a fixed size
        assert row.oop_p99_busbw_GBps == pytest.approx(
            row.oop_busbw_GBps * row.oop_time_us / row.oop_p99_us
        )
        assert row.oop_p99_busbw_GBps <= row.oop_p50_busbw_GBps + 1e-9
    assert not any("unreadable" in w for w in log.warnings)


def test_version_1_without_per_iteration_and_mpi_rank_count() -> None:
    log = parse_nccl_tests_file(DATA / "all_gather_perf_16rank_v1.json")
    assert log.op == "allgather"
    assert log.n_ranks == 16  # 2 processes x 1 thread x 8 GPUs
    assert log.hosts == ("node-a", "node-b")
    assert log.nccl_version == "2.26.2"
    assert all(r.oop_p50_us is None and r.oop_p99_us is None for r in log.rows)
    assert all(r.redop == "none" for r in log.rows)


_pos = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=2**34), min_size=1, max_size=8, unique=True),
    times=st.lists(_pos, min_size=8, max_size=8),
    bws=st.lists(st.floats(min_value=0, max_value=2000), min_size=8, max_size=8),
    version=st.sampled_from([1, 2, 3]),
    wrong=st.sampled_from([0.0, None]),
)
def test_round_trip_property(sizes, times, bws, version, wrong) -> None:  # type: ignore[no-untyped-def]
    results = [
        Result(
            s,
            max(1, s // 4),
            "float",
            "sum",
            -1,
            Half(times[i], bws[i] / 2, bws[i], wrong, [times[i]] * 5 if version > 1 else None),
            Half(times[i] * 1.1, bws[i] / 2.2, bws[i] / 1.1, wrong),
        )
        for i, s in enumerate(sorted(sizes))
    ]
    run = Run(version=version, results=results, per_iter=version > 1)
    log = parse_nccl_tests(write_json(run))
    assert [r.size_bytes for r in log.rows] == sorted(sizes)
    for row, res in zip(log.rows, results, strict=True):
        # %lf keeps six decimals
        assert row.oop_time_us == pytest.approx(res.oop.time_us, abs=1e-6)  # type: ignore[union-attr]
        assert row.oop_busbw_GBps == pytest.approx(res.oop.busbw_GBps, abs=1e-6)  # type: ignore[union-attr]
        assert row.ip_time_us == pytest.approx(res.ip.time_us, abs=1e-6)
        assert row.oop_wrong == (None if wrong is None else 0)
        if version > 1:
            assert row.oop_p50_us == pytest.approx(res.oop.time_us, abs=1e-6)  # type: ignore[union-attr]
        else:
            assert row.oop_p50_us is None


def test_bytes_and_a_bom_are_accepted() -> None:
    text = write_json(all_gather_16_ranks_v1())
    assert parse_nccl_tests(("\ufeff" + text).encode()).source == "json"
    assert looks_like_json("  \n" + text) and not looks_like_json("# nThread 1")


def test_out_of_place_null_and_nan_values() -> None:
    run = all_gather_16_ranks_v1()
    run.results[0] = dataclasses.replace(run.results[0], oop=None)
    run.results[1].oop.time_us = float("nan")  # type: ignore[union-attr]
    log = parse_nccl_tests_json(write_json(run))
    assert log.rows[0].oop_time_us is None and log.rows[0].ip_time_us is not None
    assert log.rows[1].oop_time_us is None  # "nan" becomes "not measured"
    # the comparison skips rows without out-of-place times
    result = compare_log(log, load_preset("dgx-h100-ib-ndr"))
    assert [r.size_bytes for r in result.rows] == [r.size_bytes for r in log.rows[2:]]


def test_failed_min_bw_errors_and_wrong_results_are_warned() -> None:
    run = all_gather_16_ranks_v1()
    run.min_bw = 1e6
    run.errors = ("NCCL WARN NET/IB : Got completion with error 12",)
    run.results[2].oop.wrong = 3.0  # type: ignore[union-attr]
    log = parse_nccl_tests_json(write_json(run))
    text = "\n".join(log.warnings)
    assert "NCCL_TESTS_MIN_BW" in text
    assert "completion with error 12" in text
    assert "result 3: 3 wrong results" in text


def test_op_from_args_wins_and_unknown_binary() -> None:
    run = all_gather_16_ranks_v1()
    log = parse_nccl_tests_json(write_json(run), op="allreduce")
    assert log.op == "allgather" and any("args[0] names" in w for w in log.warnings)
    run.binary = "./build/gather_perf"
    assert parse_nccl_tests_json(write_json(run)).op == "unknown"
    run.binary = "./my_bench"
    assert parse_nccl_tests_json(write_json(run), op="alltoall").op == "alltoall"


def test_text_table_with_per_iteration_columns_gives_p99() -> None:
    # the -I 1 layout of writeResultHeader (src/util.cu): i_min i_max i_p99 i_cv% per half
    header = (
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong"
        "    i_min    i_max    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min"
        "    i_max    i_p99    i_cv%"
    )
    rows = [
        "           8             2     float     sum      -1    10.44    0.00    0.00       0"
        "    10.23    16.70    16.70    12.73    10.59    0.00    0.00       0    10.38"
        "    16.94    16.94    12.80",
        "     1048576        262144     float     sum      -1    14.77   70.99  124.23       0"
        "    14.50    20.10    20.10     8.10    14.32   73.24  128.18       0    14.10"
        "    19.80    19.80     8.00",
    ]
    head = "# nThread 1 nGpus 8 minBytes 8 maxBytes 1048576 step: 2(factor)"
    foot = ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 63.1025", ""]
    text = "\n".join([head, header, *rows, *foot])
    log = parse_nccl_tests(text, op="allreduce")
    assert [r.oop_p99_us for r in log.rows] == [16.70, 20.10]
    assert [r.ip_p99_us for r in log.rows] == [16.94, 19.80]
    assert all(r.oop_p50_us is None for r in log.rows)  # the text table has no p50
    assert log.rows[1].oop_p99_busbw_GBps == pytest.approx(124.23 * 14.77 / 20.10)


# ------------------------------------------------------------------------------------------
# malformed input: one message each


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"version": 3, "results": [', "ends early"),
        ('{"version": 3,, "results": []}', "not valid JSON"),
        ('{"version": 3, "config": {}}', "no 'results' list"),
        ('{"results": "none"}', "no 'results' list"),
        ('{"results": []}', "no readable result"),
        ('{"results": [{"size": "8", "count": 2}]}', "no readable result"),
        ('{"results": [{"size": 8, "count": 2}]}', "no readable result"),
        ('{"results": [{"size": 8, "count": 2, "out_of_place": {"time": true}}]}', "no readable"),
        ("{}", "no 'results' list"),
    ],
)
def test_malformed_json_raises_one_message(text: str, message: str) -> None:
    with pytest.raises(NcclLogError, match=message) as info:
        parse_nccl_tests(text)
    assert "\n" not in str(info.value)


def test_truncated_fixture_names_the_cause() -> None:
    text = (DATA / "all_reduce_perf_8xH100.json").read_text(encoding="utf-8")
    with pytest.raises(NcclLogError, match="stopped before closing"):
        parse_nccl_tests(text[: len(text) // 2])


def test_one_bad_result_is_skipped_with_a_warning() -> None:
    data = json.loads((DATA / "all_gather_perf_16rank_v1.json").read_text(encoding="utf-8"))
    data["results"][1]["size"] = -5
    log = parse_nccl_tests(json.dumps(data))
    assert len(log.rows) == len(data["results"]) - 1
    assert any(w.startswith("result 2: unreadable result ignored") for w in log.warnings)


# ------------------------------------------------------------------------------------------
# comparison and command line


def test_comparison_carries_p50_and_p99() -> None:
    log = parse_nccl_tests_file(DATA / "all_reduce_perf_8xH100.json")
    result = compare_log(log, load_preset("dgx-h100-ib-ndr"))
    big = result.rows[-1]
    assert big.measured_p99_busbw_GBps is not None and big.measured_p50_busbw_GBps is not None
    assert big.measured_p99_busbw_GBps < big.measured_p50_busbw_GBps
    assert big.to_dict()["measured_p99_time_us"] == pytest.approx(log.rows[-1].oop_p99_us)
    text = compare_log(
        parse_nccl_tests_file(DATA / "all_reduce_perf_8xH100.log"), load_preset("dgx-h100-ib-ndr")
    )
    assert text.rows[-1].measured_p50_busbw_GBps is None


def test_check_nccl_reads_json_and_text_alike() -> None:
    out_json = _run_cli("check-nccl", str(DATA / "all_reduce_perf_8xH100.json"), "--json")
    out_text = _run_cli("check-nccl", str(DATA / "all_reduce_perf_8xH100.log"), "--json")
    assert out_json.returncode == 0 and out_text.returncode == 0, out_json.stderr
    rows_json, rows_text = json.loads(out_json.stdout), json.loads(out_text.stdout)
    assert [r["bytes"] for r in rows_json] == [r["bytes"] for r in rows_text]
    for a, b in zip(rows_json, rows_text, strict=True):
        assert a["ratio"] == pytest.approx(b["ratio"], rel=1e-6)
    assert rows_json[-1]["measured_p99_busbw_GBps"] < rows_json[-1]["measured_busbw_GBps"]
    table = _run_cli("check-nccl", str(DATA / "all_reduce_perf_8xH100.json"))
    assert "p50_GBps" in table.stdout and "p99_GBps" in table.stdout


def test_check_nccl_malformed_json_exits_2_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "run.json"
    bad.write_text('{"version": 3, "results": [{"size": 8', encoding="utf-8")
    out = _run_cli("check-nccl", str(bad))
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "not valid JSON" in out.stderr
    assert "Traceback" not in out.stderr


# ------------------------------------------------------------------------------------------
# the acceptance script sets NCCL_TESTS_MIN_BW from the floors


def _fake_nccl_tests(tmp_path: Path, busbw: float) -> dict[str, str]:
    """A fake mpirun and binaries that apply nccl-tests' own NCCL_TESTS_MIN_BW rule.

    nccl-tests (src/common.cu) fails when the average busbw is below 0.9 x NCCL_TESTS_MIN_BW;
    the fake prints one row at ``busbw`` and exits 1 under the same rule.
    """
    bindir = tmp_path / "build"
    bindir.mkdir()
    (tmp_path / "seen").mkdir()
    mpirun = tmp_path / "mpirun"
    mpirun.write_text('#!/usr/bin/env bash\nshift 2\nexec "$@"\n')
    body = (
        "#!/usr/bin/env bash\n"
        "size=$2\n"
        f'echo "$NCCL_TESTS_MIN_BW" > "{tmp_path}/seen/$(basename "$0")-$size"\n'
        'printf "%12s %12s  float  sum  -1  100.0  1.00  '
        f'{busbw}  0  100.0  1.00  {busbw}  0\\n"'
        ' "$size" 1\n'
        f'awk -v a="{busbw}" -v m="${{NCCL_TESTS_MIN_BW:--1}}" '
        "'BEGIN {exit (m != -1 && a < m * 0.9)}'\n"
    )
    for name in ("all_reduce_perf", "all_gather_perf", "alltoall_perf"):
        (bindir / name).write_text(body)
    for f in [mpirun, *bindir.iterdir()]:
        f.chmod(f.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "NCCL_TESTS": str(bindir), "MPIRUN": str(mpirun)}


def test_acceptance_script_sets_min_bw_so_nccl_tests_fails_at_the_floor(tmp_path: Path) -> None:
    table = acceptance_expectations(
        apply_overrides(load_preset("dgx-h100-ib-ndr"), {"cluster.n_gpus": 8})
    )
    script = tmp_path / "acceptance.sh"
    script.write_text(table.to_shell_script())
    floor = max(r.min_busbw_GBps for r in table.rows)
    out = subprocess.run(
        ["bash", str(script)],
        env=_fake_nccl_tests(tmp_path, floor * 1.001),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    for r in table.rows:
        binary = NCCL_TESTS_BINARY[r.op]
        seen = float((tmp_path / "seen" / f"{binary}-{r.size_bytes}").read_text())
        # nccl-tests fails below 0.9 x MIN_BW: that product is the floor (to 4 decimals)
        assert seen * NCCL_TESTS_MIN_BW_SLACK == pytest.approx(r.min_busbw_GBps, abs=1e-3)


def test_acceptance_script_reports_nccl_tests_own_failure(tmp_path: Path) -> None:
    table = acceptance_expectations(
        apply_overrides(load_preset("dgx-h100-ib-ndr"), {"cluster.n_gpus": 8})
    )
    # the awk check on column 8 passes (busbw at the floor), nccl-tests' own check fails
    text = table.to_shell_script().replace('b="$5"', 'b="0"')
    script = tmp_path / "acceptance.sh"
    script.write_text(text)
    out = subprocess.run(
        ["bash", str(script)],
        env=_fake_nccl_tests(tmp_path, 0.001),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert "NCCL_TESTS_MIN_BW" in out.stdout and "FAIL " in out.stdout
