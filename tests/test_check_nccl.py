"""check-nccl: an nccl-tests log against the model (CLI contract, verdicts, bad input)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fabric_model.errors import FabricModelError
from fabric_model.presets import load_preset
from fabric_model.validate.compare import compare_log
from fabric_model.validate.nccl_log import parse_nccl_tests_file

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "tests" / "data" / "nccl"


def run(*args):
    return subprocess.run(
        [sys.executable, "-m", "fabric_model", "check-nccl", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_json_contract_and_rank_override():
    out = run(str(LOGS / "all_reduce_perf_8xH100.log"), "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert rows and {"bytes", "measured_busbw_GBps", "model_busbw_GBps", "ratio"} <= set(rows[0])
    for r in rows:
        assert r["ratio"] == pytest.approx(r["model_time_us"] / r["measured_time_us"])
        if r["measured_busbw_GBps"] > 10:  # printed busbw agrees where rounding is small
            assert r["ratio"] == pytest.approx(
                r["measured_busbw_GBps"] / r["model_busbw_GBps"], rel=0.01
            )
        assert r["regime"] in ("latency-bound", "bandwidth-bound")
        assert r["verdict"].startswith(("within", "below", "above"))


def test_rank_count_comes_from_the_log():
    log = parse_nccl_tests_file(LOGS / "all_reduce_perf_8xH100.log")
    result = compare_log(log, load_preset("dgx-h100-ib-ndr"))
    assert result.n_ranks == log.n_ranks == 8
    assert any("cluster.n_gpus set to the log's 8 ranks" in n for n in result.notes)


def test_verdicts_follow_the_ratio_and_regime():
    log = parse_nccl_tests_file(LOGS / "all_reduce_perf_8xH100.log")
    result = compare_log(log, load_preset("dgx-h100-ib-ndr"), tolerance=0.05)
    for r in result.rows:
        if abs(r.ratio - 1) <= 0.05:
            assert r.verdict == "within the expected band"
        elif r.ratio < 1:
            assert r.verdict.startswith(f"below, {r.regime}")
        else:
            assert r.verdict.startswith("above the model")
    # a fabric at a quarter of the speed: the same log now reads far above the model
    slow = compare_log(
        log,
        load_preset("dgx-h100-ib-ndr").__class__.from_dict(
            {"cluster": {"gpu": "a100"}, "fabric": {"link_gbps": 200}}
        ),
    )
    assert slow.median_ratio > result.median_ratio


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("sendrecv_perf_2gpu.log", "this log is 'sendrecv'"),  # the model covers 4 collectives
        ("garbage.log", "no nccl-tests result table found"),
    ],
)
def test_bad_logs_exit_2_with_one_line(name, words):
    out = run(str(LOGS / name))
    assert out.returncode == 2 and words in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_missing_file_and_bad_tolerance():
    out = run("/nonexistent/x.log")
    assert out.returncode == 2 and "no such file" in out.stderr
    log = parse_nccl_tests_file(LOGS / "all_reduce_perf_8xH100.log")
    with pytest.raises(FabricModelError, match="tolerance"):
        compare_log(log, load_preset("dgx-h100-ib-ndr"), tolerance=2)
