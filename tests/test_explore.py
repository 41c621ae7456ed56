"""The explore verb: Pareto flags, the run model's formulas, Dask equal to local, bad input.

Hand calculations use the formulas of ``fabric_model/run/reliability.py``'s docstring (Young 1974
/ Daly 2006 first-order waste) with numbers written out here, and the calibration of
``assets/reliability.yaml`` is recomputed from Llama 3's Table 5 and this model's bill of
materials.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_model.cli import main
from fabric_model.plant.cost import bill_of_materials
from fabric_model.presets import DEFAULT_PRESET, load_preset
from fabric_model.run.explore import (
    DesignTask,
    Dimension,
    design_scenario,
    evaluate_design,
    explore,
    pareto_flags,
    parse_vary,
)
from fabric_model.run.reliability import (
    CHECKPOINT_BYTES_PER_PARAM,
    estimate_run,
    goodput,
    run_cost_usd,
    young_daly_interval_s,
)
from fabric_model.scenario import apply_overrides
from fabric_model.training import shape_counts, training_step

BASE = load_preset(DEFAULT_PRESET)
DATA = yaml.safe_load((ROOT / "assets" / "reliability.yaml").read_text(encoding="utf-8"))
#: A small grid: 2 x 2 x 2 designs, some topologies cheaper, some faster.
GRID = [
    "fabric.vendor=infiniband,roce",
    "fabric.link_gbps=200,400",
    "fabric.topology=fat-tree,rail-only",
]


def brute_force_pareto(points: list[tuple[float, float] | None]) -> list[bool]:
    out = []
    for i, p in enumerate(points):
        if p is None:
            out.append(False)
            continue
        beaten = any(
            q is not None and q[0] <= p[0] and q[1] <= p[1] and (q[0] < p[0] or q[1] < p[1])
            for j, q in enumerate(points)
            if j != i
        )
        out.append(not beaten)
    return out


# ------------------------------------------------------------------------------- Pareto

point = st.one_of(
    st.none(),
    st.tuples(st.integers(0, 6), st.integers(0, 6)).map(lambda t: (float(t[0]), float(t[1]))),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(point, max_size=30))
def test_pareto_flags_equal_a_brute_force_check(points: list[tuple[float, float] | None]) -> None:
    assert pareto_flags(points) == brute_force_pareto(points)


def test_pareto_flags_on_hand_made_points() -> None:
    pts = [(1.0, 5.0), (2.0, 2.0), (3.0, 1.0), (2.0, 3.0), (4.0, 4.0), None, (2.0, 2.0)]
    assert pareto_flags(pts) == [True, True, True, False, False, False, True]


@pytest.fixture(scope="module")
def local_result() -> dict[str, Any]:
    return explore(BASE, [parse_vary(v) for v in GRID]).to_dict()


def test_explore_json_shape_and_pareto_against_brute_force(local_result: dict[str, Any]) -> None:
    out = local_result
    assert out["n_designs"] == 8 == len(out["designs"])
    assert out["engine"] == "local"
    assert out["objectives"] == ["time_to_train_days", "cost_per_run_usd"]
    contract = {
        "keys", "feasible", "reason", "step_time_s", "mfu", "tokens_per_s", "goodput",
        "time_to_train_days", "network_capex_usd", "cluster_capex_usd", "tco_usd",
        "cost_per_run_usd", "pareto",
    }  # fmt: skip
    for d in out["designs"]:
        assert contract <= set(d)
        assert set(d["keys"]) == {"fabric.vendor", "fabric.link_gbps", "fabric.topology"}
        assert d["feasible"] and d["reason"] is None
    # grid order: the last --vary changes fastest
    assert [d["keys"]["fabric.topology"] for d in out["designs"][:2]] == ["fat-tree", "rail-only"]
    points = [(d["time_to_train_days"], d["cost_per_run_usd"]) for d in out["designs"]]
    flags = [d["pareto"] for d in out["designs"]]
    assert flags == brute_force_pareto(points)
    assert any(flags)
    json.dumps(out, allow_nan=False)  # strict JSON: no NaN anywhere


def test_each_design_is_its_scenario_modelled(local_result: dict[str, Any]) -> None:
    d = local_result["designs"][5]
    s = apply_overrides(BASE, d["keys"])
    step = training_step(s)
    bom = bill_of_materials(s)
    run = estimate_run(s, step.tokens_per_s, bom)
    assert d["step_time_s"] == step.step_time_s
    assert d["network_capex_usd"] == bom.capex_usd
    assert d["cluster_capex_usd"] == bom.cluster_capex_usd
    assert d["cost_per_run_usd"] == run.cost_per_run_usd
    # days = total tokens / (tokens/s x goodput) / 86,400
    assert d["time_to_train_days"] == pytest.approx(
        s.training.total_tokens / (step.tokens_per_s * d["goodput"]) / 86_400, rel=1e-12
    )


# ----------------------------------------------------------------- formulas by hand


def test_goodput_and_young_daly_by_hand() -> None:
    # tau 3,600 s, delta 60 s, R 600 s, one failure a day:
    # 3600 / 3660 x (1 - (600 + 3660 / 2) / 86400) = 0.983607 x 0.971875 = 0.955943
    g = goodput(interval_s=3600.0, write_s=60.0, restart_s=600.0, failures_per_s=1 / 86_400)
    assert g == pytest.approx(0.9559426, abs=1e-7)
    # sqrt(2 x 60 x 86,400) = sqrt(10,368,000) = 3,219.94
    assert young_daly_interval_s(60.0, 86_400.0) == pytest.approx(3219.938, abs=1e-3)
    # the Young/Daly interval is the optimum of the first-order goodput
    tau = young_daly_interval_s(60.0, 86_400.0)

    def at(t: float) -> float:
        return goodput(interval_s=t, write_s=60.0, restart_s=600.0, failures_per_s=1 / 86_400)

    assert at(tau) > at(tau * 0.8) and at(tau) > at(tau * 1.25)
    assert goodput(interval_s=math.inf, write_s=1.0, restart_s=1.0, failures_per_s=0.0) == 1.0


def test_cost_per_run_by_hand() -> None:
    s = apply_overrides(
        BASE, {"costs.years": 4, "costs.electricity_usd_per_kwh": 0.1, "costs.pue": 1.2}
    )
    bom = bill_of_materials(s)
    capex = bom.n_servers * bom.server_unit_price_usd + bom.capex_usd
    energy = bom.cluster_power_w / 1000 * 1.2 * 8760 * 4 * 0.1
    per_day = (capex + energy) / (4 * 365)
    assert run_cost_usd(bom, 10.0) == pytest.approx(per_day * 10.0, rel=1e-12)
    run = estimate_run(s, 1e6, bom)
    assert run.tco_usd == pytest.approx(capex + energy, rel=1e-12)
    assert run.cost_per_run_usd == pytest.approx(per_day * run.time_to_train_days, rel=1e-12)
    assert run.usd_per_million_tokens == pytest.approx(
        run.cost_per_run_usd / (s.training.total_tokens / 1e6), rel=1e-12
    )


def test_interruptions_checkpoint_and_goodput_by_hand() -> None:
    s = BASE
    bom = bill_of_materials(s)
    r = s.reliability
    per_year = (
        bom.n_gpus * (r.gpu_failures_per_year + r.software_failures_per_year)
        + bom.n_servers * r.server_failures_per_year
        + bom.n_nics * r.nic_failures_per_year
        + bom.topology.n_switches * r.switch_failures_per_year
        + bom.n_transceivers * r.optic_failures_per_year
        + bom.n_cables * r.cable_failures_per_year
    )
    run = estimate_run(s, 1e6, bom)
    assert run.interruptions_per_day == pytest.approx(per_year / 365, rel=1e-12)
    # checkpoint: parameters x (2 bf16 + 12 fp32 optimizer) bytes, at 0.122 GB/s per GPU
    assert CHECKPOINT_BYTES_PER_PARAM == 14
    ckpt = shape_counts(s.model).total * 14
    write_s = ckpt / (1024 * 0.122e9)
    mtbf = 86_400 / run.interruptions_per_day
    tau = math.sqrt(2 * write_s * mtbf)
    assert run.checkpoint_interval_s == pytest.approx(tau, rel=1e-12)
    lam = 1 / mtbf
    assert run.goodput == pytest.approx(
        tau / (tau + write_s) * (1 - lam * (600 + (tau + write_s) / 2)), rel=1e-12
    )


def test_llama3_calibration_reproduces_table_5() -> None:
    # Meta's 16,384-GPU job on a 3-tier 400G RoCE fabric: 419 unexpected in 54 days
    s = apply_overrides(load_preset("meta-24k-roce"), {"cluster.n_gpus": 16384})
    bom = bill_of_materials(s)
    snap = DATA["llama3_snapshot"]
    run = estimate_run(s, 1e6, bom)
    assert run.interruptions_per_day == pytest.approx(419 / 54, rel=0.01)
    # the optic/cable rate: (35 - the switches' share) over the fabric's transceivers + cables
    switch_share = bom.topology.n_switches * s.reliability.switch_failures_per_year / 365 * 54
    units = bom.n_transceivers + bom.n_cables
    rate = (snap["network_switch_cable_interruptions"] - switch_share) / units / 54 * 365
    assert DATA["rates_per_year"]["optic"]["value"] == pytest.approx(rate, rel=0.01)
    assert DATA["rates_per_year"]["gpu"]["value"] == pytest.approx(268 / (16384 * 54) * 365, 1e-3)
    for entry in DATA["rates_per_year"].values():
        assert entry["source"]


def test_more_optics_and_switches_fail_more_often() -> None:
    one = evaluate_design(DesignTask(BASE, {}))
    two = evaluate_design(DesignTask(BASE, {"cluster.nics_per_gpu": 2}))
    assert two["interruptions_per_day"] > one["interruptions_per_day"]
    assert two["goodput"] < one["goodput"]


def test_infeasible_designs_say_why() -> None:
    # radix-64 QM9700 in 3 tiers hold at most 65,536 NIC ports
    big = evaluate_design(DesignTask(BASE, {"cluster.n_gpus": 131072, "fabric.tiers": 3}))
    assert not big["feasible"] and "65,536" in big["reason"]
    assert big["cost_per_run_usd"] is None and not big["pareto"]
    # failures every few minutes with an hour-long restart leave no time to train
    flaky = evaluate_design(
        DesignTask(BASE, {"reliability.gpu_failures_per_year": 50, "reliability.restart_s": 3600})
    )
    assert not flaky["feasible"] and flaky["reason"].startswith("reliability.restart_s")
    assert flaky["cost_per_run_usd"] is None


def test_a_varied_gpu_brings_its_server() -> None:
    s = design_scenario(BASE, {"cluster.gpu": "gb200"})
    assert (s.cluster.gpus_per_node, s.cluster.nvlink_domain) == (4, 72)
    kept = design_scenario(BASE, {"cluster.gpu": "gb200", "cluster.nvlink_domain": 36})
    assert kept.cluster.nvlink_domain == 36


def test_plan_search_gives_each_design_its_best_plan() -> None:
    base = apply_overrides(BASE, {"model.name": "llama3-8b", "cluster.n_gpus": 64})
    out = explore(base, [Dimension("fabric.vendor", ("infiniband",))], plan_search=True)
    d = out.designs[0]
    fixed = evaluate_design(DesignTask(base, {"fabric.vendor": "infiniband"}))
    assert d["feasible"] and d["step_time_s"] <= fixed["step_time_s"]


# ------------------------------------------------------------------------------ Dask


@pytest.fixture(scope="module")
def dask_cluster() -> Iterator[Any]:
    import logging

    from distributed import LocalCluster

    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        silence_logs=logging.ERROR,
    )
    yield cluster
    cluster.close()


def test_dask_equals_local(dask_cluster: Any, local_result: dict[str, Any]) -> None:
    dims = [parse_vary(v) for v in GRID]
    seen: list[tuple[int, int]] = []
    out = explore(
        BASE,
        dims,
        engine="dask",
        scheduler=dask_cluster.scheduler_address,
        progress=lambda done, total: seen.append((done, total)),
    ).to_dict()
    assert out["engine"] == "dask"
    assert out["designs"] == local_result["designs"]
    assert seen[-1] == (8, 8)


def test_cli_explore_on_a_dask_scheduler_and_csv(
    dask_cluster: Any, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    out_csv = tmp_path / "designs.csv"
    args = ["explore", "--vary", GRID[0], "--vary", GRID[1], "--json", "--out", str(out_csv)]
    assert main([*args, "--scheduler", dask_cluster.scheduler_address]) == 0
    on_dask = json.loads(capsys.readouterr().out)
    assert main(args) == 0
    local = json.loads(capsys.readouterr().out)
    assert on_dask["engine"] == "dask" and local["engine"] == "local"
    assert on_dask["designs"] == local["designs"]
    rows = list(csv.DictReader(out_csv.open(encoding="utf-8")))
    assert len(rows) == 4
    assert rows[0]["fabric.vendor"] == "infiniband" and rows[0]["fabric.link_gbps"] == "200"
    assert float(rows[0]["cost_per_run_usd"]) == local["designs"][0]["cost_per_run_usd"]


# ------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--vary", "fabric.venor=roce"], "fabric.venor"),
        (["--vary", "fabric.link_gbps=200,300"], "100, 200, 400, 800, 1600"),
        (["--vary", "fabric.link_gbps"], "KEY=VALUE"),
        (["--vary", "fabric.link_gbps=200,"], "no empty value"),
        (["--vary", "cluster.n_gpus=8,16", "--vary", "cluster.n_gpus=32"], "twice"),
        (["--vary", "fabric.link_gbps=200,400", "--max-designs", "1"], "--max-designs"),
        (["--engine", "local", "--scheduler", "tcp://127.0.0.1:1"], "--scheduler"),
        (["--set", "training.total_tokens=0"], "training.total_tokens"),
        (["--workers", "0", "--engine", "dask"], "--workers"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explore", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert named in err


def test_the_default_grid_limit_is_ten_thousand(capsys: pytest.CaptureFixture[str]) -> None:
    sizes = ",".join(str(8 * i) for i in range(1, 102))  # 101 x 100 = 10,100 designs
    gbps = ",".join(str(v) for v in range(1, 101))
    assert main(["explore", "--vary", f"cluster.n_gpus={sizes}", "--vary",
                 f"reliability.restart_s={gbps}"]) == 2  # fmt: skip
    assert "10,100 designs, more than --max-designs 10,000" in capsys.readouterr().err


def test_sensitivity_is_a_tornado_of_independent_runs() -> None:
    from fabric_model.run.explore import sensitivity

    rows = sensitivity(BASE)
    swings = [r.swing_usd for r in rows]
    assert swings == sorted(swings, reverse=True)
    server = next(r for r in rows if r.key == "costs.server_usd")
    for value, cost in ((server.low_value, server.low_usd), (server.high_value, server.high_usd)):
        d = evaluate_design(DesignTask(BASE, {"costs.server_usd": value}))
        assert cost == d["cost_per_run_usd"]
    assert server.low_usd < server.high_usd
    # an end the design cannot run (800G on an H100's PCIe Gen5) is named, not a crash
    link = next(r for r in rows if r.key == "fabric.link_gbps")
    assert link.high_usd is None and "800" in link.note
