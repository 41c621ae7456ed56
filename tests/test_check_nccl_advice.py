"""check-nccl's advice follows from the model's fields (issue 10, item 9): a log that runs
at the ring's rate where NCCL's own choice is NVLS-Tree is called a ring-only run; a log
that matches NCCL's choice gets no algorithm advice; a shortfall that no algorithm explains
names the model's limiting resource."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fabric_model.collectives import bus_factor, collective
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.validate.compare import compare_log
from fabric_model.validate.nccl_log import parse_nccl_tests

SIZES = [2**k for k in range(20, 34, 2)]  # 1 MiB .. 8 GiB
N = 16  # two HGX H100 nodes: NCCL's choice is NVLS-Tree, a ring-only run is ~20 % slower


def scenario() -> Scenario:
    return apply_overrides(Scenario(), {"cluster.n_gpus": N})


def synthetic_log(algo: str, factor: float = 1.0) -> str:
    """An all_reduce_perf table whose times are ``algo``'s model times / ``factor``."""
    rows = collective(scenario(), "allreduce", algo, SIZES)
    lines = [
        f"# nThread 1 nGpus 1 minBytes {SIZES[0]} maxBytes {SIZES[-1]} step: 4(factor)",
        "#       size         count      type   redop    root     time   algbw   busbw "
        "#wrong     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
        "            (us)  (GB/s)  (GB/s)",
    ]
    buses = []
    for size, row in zip(SIZES, rows, strict=True):
        t = row.time_us / factor
        alg = size / t / 1e3
        bus = alg * bus_factor("allreduce", N)
        buses.append(bus)
        cells = f"{t:10.2f} {alg:7.2f} {bus:7.2f}      0"
        lines.append(f"{size:12d} {size // 4:13d}     float     sum      -1 {cells} {cells}")
    lines.append(
        f"# Out of bounds values : 0 OK\n# Avg bus bandwidth    : {sum(buses) / len(buses):.3f}"
    )
    return "\n".join(lines) + "\n"


def test_a_ring_only_run_is_named_as_such():
    auto = collective(scenario(), "allreduce", "auto", SIZES[-1:])[0]
    assert auto.algo != "ring"  # the premise: NCCL's choice here is not the ring
    result = compare_log(parse_nccl_tests(synthetic_log("ring", 0.98), op="allreduce"), scenario())
    (advice,) = result.advice
    assert "match a run with NCCL_ALGO=Ring" in advice
    # NCCL's choice here is NVLS-Tree: disabling NVLS is the other setting that gives a ring
    assert "NCCL_ALGO=NVLSTree" in advice and "NCCL_NVLS_ENABLE=0" in advice
    assert result.rows[-1].best_match_algo == "ring"
    assert result.rows[-1].best_match_ratio == pytest.approx(0.98, rel=1e-3)


def test_a_run_that_matches_ncclss_choice_gets_no_algorithm_advice():
    result = compare_log(parse_nccl_tests(synthetic_log("auto"), op="allreduce"), scenario())
    assert result.advice == ()
    assert result.median_ratio == pytest.approx(1.0, abs=0.01)


def test_a_shortfall_no_algorithm_explains_names_the_limit():
    result = compare_log(parse_nccl_tests(synthetic_log("auto", 0.5), op="allreduce"), scenario())
    (advice,) = result.advice
    assert advice.startswith("below the model by 50%")
    assert "no NCCL setting explains it" in advice
    assert result.rows[-1].bottleneck in advice
    assert result.diagnosis == ()  # a uniform shortfall is not a misconfiguration's shape


def test_cli_prints_the_advice_and_keeps_the_json_rows(tmp_path):
    log = tmp_path / "all_reduce_perf.log"
    log.write_text(synthetic_log("ring", 0.98))
    cmd = [sys.executable, "-m", "fabric_model", "check-nccl", str(log), "--op", "allreduce"]
    cmd += ["--set", f"cluster.n_gpus={N}"]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    assert "# advice: the bandwidth-bound sizes match a run with NCCL_ALGO=Ring" in text
    assert "(ranks: 16 from --set cluster.n_gpus)" in text
    rows = json.loads(
        subprocess.run([*cmd, "--json"], capture_output=True, text=True, check=True).stdout
    )
    assert rows[-1]["best_match_algo"] == "ring"


# ------------------------------------------------------ N9: NCCL's terms, the rank origin


def _with_header(log: str, header: str) -> str:
    first, rest = log.split("\n", 1)
    return f"{first}\n{header}\n{rest}"


RANK0 = "#  Rank  0 Group  0 Pid  1234 on node0 device  0 [0x1b] NVIDIA H100 80GB HBM3"


def test_advice_never_names_the_models_own_variants():
    for algo, factor in (("ring", 0.98), ("tree", 1.0), ("auto", 0.5), ("auto", 1.0)):
        result = compare_log(
            parse_nccl_tests(synthetic_log(algo, factor), op="allreduce"), scenario()
        )
        for text in (*result.advice, *(r.verdict for r in result.rows)):
            assert "hierarchical" not in text and "-only run" not in text, text
        assert all(r.best_match_algo != "hierarchical" for r in result.rows)


def test_a_tree_run_is_named_nccl_algo_tree():
    result = compare_log(parse_nccl_tests(synthetic_log("tree"), op="allreduce"), scenario())
    assert any("NCCL_ALGO=Tree" in a for a in result.advice), result.advice


def test_the_per_channel_cap_is_nccls_software_limit_not_a_link():
    # 16 H100: NVLS-Tree at large sizes is capped by NCCL's per-channel table
    result = compare_log(parse_nccl_tests(synthetic_log("auto", 0.5), op="allreduce"), scenario())
    capped = [
        r for r in result.rows if "per-channel" in r.bottleneck and r.regime == "bandwidth-bound"
    ]
    assert capped, [r.bottleneck for r in result.rows]
    for r in capped:
        assert "NCCL's software limit" in r.verdict and "not a link" in r.verdict
        assert "links (NIC" not in r.verdict
    assert "NCCL's software limit" in result.advice[0]


def test_one_rank_line_does_not_override_set_n_gpus(tmp_path):
    log = tmp_path / "one_rank.log"
    log.write_text(_with_header(synthetic_log("ring", 0.98), RANK0))
    cmd = [sys.executable, "-m", "fabric_model", "check-nccl", str(log), "--op", "allreduce"]
    cmd += ["--set", f"cluster.n_gpus={N}"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"# allreduce on {N} ranks (ranks: {N} from --set cluster.n_gpus)" in done.stdout
    assert "the log shows 1 rank" in done.stdout


def test_the_rank_count_says_where_it_came_from():
    lines = "\n".join(
        f"#  Rank {r:2d} Group  0 Pid  {1000 + r} on node{r // 8} device  {r % 8} [0x1b] "
        "NVIDIA H100 80GB HBM3"
        for r in range(N)
    )
    from_header = compare_log(
        parse_nccl_tests(_with_header(synthetic_log("auto"), lines), op="allreduce"),
        apply_overrides(Scenario(), {"cluster.n_gpus": 1024}),
        n_gpus_set=True,
    )
    assert from_header.n_ranks == N and "header" in from_header.n_ranks_source
    info = "node0:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 16 cudaDev 0 busId 1b000 - Init COMPLETE"
    via_info = parse_nccl_tests(_with_header(synthetic_log("auto"), info), op="allreduce")
    assert via_info.n_ranks == N and via_info.n_ranks_source == "nccl info"
    kept = compare_log(via_info, Scenario(), n_gpus_set=True)
    assert (
        kept.n_ranks == Scenario().cluster.n_gpus and kept.n_ranks_source == "--set cluster.n_gpus"
    )
    assert any("kept over 16" in n for n in kept.notes)
    taken = compare_log(via_info, Scenario())
    assert taken.n_ranks == N and "NCCL INFO" in taken.n_ranks_source


def test_the_logs_nccl_release_sets_nccl_version():
    log = parse_nccl_tests(
        _with_header(synthetic_log("auto"), "# NCCL version 2.26.2+cuda12.8"), op="allreduce"
    )
    assert log.nccl_version == "2.26.2+cuda12.8"
    result = compare_log(log, scenario())
    assert any("nccl.version set to 2.26" in n for n in result.notes)
