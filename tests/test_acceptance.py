"""Acceptance expectations: the table, and the generated script run against fake nccl-tests."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from fabric_model.collectives import collective
from fabric_model.errors import FabricModelError
from fabric_model.presets import load_preset
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.validate.acceptance import acceptance_expectations

ROOT = Path(__file__).resolve().parents[1]


def test_scopes_ops_sizes_and_band():
    s = load_preset("dgx-h100-ib-ndr")
    table = acceptance_expectations(s, 0.1)
    scopes = {(r.scope, r.n_gpus) for r in table.rows}
    assert scopes == {("one node", 8), ("one rail group", 256), ("whole cluster", 1024)}
    assert {r.op for r in table.rows} == {"allreduce", "allgather", "alltoall"}
    for r in table.rows:
        assert r.min_busbw_GBps <= r.expected_busbw_GBps <= r.max_busbw_GBps
        want = collective(
            apply_overrides(s, {"cluster.n_gpus": r.n_gpus}), r.op, "auto", [r.size_bytes]
        )[0]
        assert r.expected_busbw_GBps == pytest.approx(want.busbw_GBps, abs=0.01)
    with pytest.raises(FabricModelError, match="tolerance"):
        acceptance_expectations(s, 1.5)


def test_ecmp_floor_uses_the_worst_seed():
    table = acceptance_expectations(
        apply_overrides(load_preset("dgx-h100-roce-ecmp"), {"what_if.placement": "scattered"}), 0.1
    )
    big = next(
        r
        for r in table.rows
        if r.scope == "whole cluster" and r.size_bytes == 8 * 2**30 and r.op == "allreduce"
    )
    assert big.min_busbw_GBps <= big.expected_busbw_GBps * 0.9 + 1e-9


def _fake_tools(tmp_path: Path, busbw: float) -> dict[str, str]:
    """A fake mpirun (drops -np N) and nccl-tests binaries printing one result row."""
    bindir = tmp_path / "build"
    bindir.mkdir()
    mpirun = tmp_path / "mpirun"
    mpirun.write_text('#!/usr/bin/env bash\nshift 2\nexec "$@"\n')
    row = (
        "#!/usr/bin/env bash\n"
        "size=$2\n"
        'echo "# nThread 1 nGpus 1"\n'
        'printf "%12s %12s  float  sum  -1  100.0  1.00  '
        f'{busbw}  0  100.0  1.00  {busbw}  0\\n"'
        ' "$size" 1\n'
    )
    for name in ("all_reduce_perf", "all_gather_perf", "alltoall_perf"):
        (bindir / name).write_text(row)
    for f in [mpirun, *bindir.iterdir()]:
        f.chmod(f.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "NCCL_TESTS": str(bindir), "MPIRUN": str(mpirun)}


@pytest.mark.parametrize(("busbw", "code"), [(100000.0, 0), (0.001, 1)])
def test_generated_script_checks_the_floors(tmp_path, busbw, code):
    table = acceptance_expectations(
        apply_overrides(load_preset("dgx-h100-ib-ndr"), {"cluster.n_gpus": 8})
    )
    script = tmp_path / "acceptance.sh"
    script.write_text(table.to_shell_script())
    out = subprocess.run(
        ["bash", str(script)],
        env=_fake_tools(tmp_path, busbw),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == code, out.stdout + out.stderr
    assert out.stdout.count("\n") >= len(table.rows)
    assert ("BELOW" in out.stdout) == bool(code)


def test_cli_acceptance(tmp_path):
    script = tmp_path / "acc.sh"
    out = subprocess.run(
        [sys.executable, "-m", "fabric_model", "acceptance", "--json", "--script", str(script)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert {"scope", "n_gpus", "op", "size_bytes", "expected_busbw_GBps", "min_busbw_GBps"} <= set(
        rows[0]
    )
    assert script.read_text().startswith("#!/usr/bin/env bash")


def test_impossible_design_raises_and_missing_scopes_are_explained():
    s = load_preset("dgx-h100-ib-ndr")
    with pytest.raises(FabricModelError, match=r"fabric\.tiers"):  # (4 tiers would hold it)
        acceptance_expectations(apply_overrides(s, {"cluster.n_gpus": 131072, "fabric.tiers": 3}))
    torus = acceptance_expectations(load_preset("torus-3d-4k"))
    assert any("one rail group" in n for n in torus.skipped)


def test_acceptance_json_says_what_it_skipped_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    """The JSON stays the contract's list; the scopes not modelled are named on stderr."""
    import json

    from fabric_model.cli import main

    status = main(
        [
            "acceptance",
            "--json",
            "--set",
            "fabric.topology=hypercube",
            "--set",
            "cluster.gpus_per_node=2",
            "--set",
            "cluster.nvlink_domain=2",
            "--set",
            "cluster.n_gpus=2",
            "--set",
            "what_if.degraded_link_factor=0.5",
        ]
    )
    out, err = capsys.readouterr()
    assert status == 0 and json.loads(out) == []
    assert err.count("# not modelled:") >= 2 and "no cable to degrade" in err


def test_an_nvl72_rack_is_its_own_scope():
    # what operators accept: the whole 72-GPU MNNVL domain, on NVLink alone, before cabling
    from fabric_model.validate.acceptance import DOMAIN_SCOPE

    s = apply_overrides(load_preset("gb200-nvl72-ndr"), {"cluster.n_gpus": 144})
    table = acceptance_expectations(s, 0.15)
    rack = [r for r in table.rows if r.scope == DOMAIN_SCOPE]
    assert {r.n_gpus for r in rack} == {72}
    assert {r.op for r in rack} == {"allreduce", "allgather", "alltoall"}
    one_rack = apply_overrides(s, {"cluster.n_gpus": 72})
    for r in rack:
        want = collective(one_rack, r.op, "auto", [r.size_bytes])[0]
        assert r.expected_busbw_GBps == pytest.approx(want.busbw_GBps, abs=0.01)
        assert r.min_busbw_GBps == pytest.approx(want.busbw_min_GBps * 0.85, abs=0.01)
    big = {r.op: r for r in rack if r.size_bytes == 8 * 2**30}
    assert big["allreduce"].algo.startswith("nvls")  # NVLS inside the rack
    # an H100 cluster's NVLink domain is the server: no rack scope
    assert DOMAIN_SCOPE not in {r.scope for r in acceptance_expectations(Scenario(), 0.1).rows}
