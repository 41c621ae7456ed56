"""``nccl.version`` and NCCL's knobs (issue 31 item 5): each release changes what its release
note says (``assets/nccl_versions.yaml``) and nothing else; NCCL_ALGO / NCCL_PROTO / buffer
registration as what-ifs, refused where NCCL cannot run them, naming the key."""

from __future__ import annotations

import math
from functools import cache

import pytest

from fabric_model.cli import main
from fabric_model.collectives import ALGORITHMS, AlgorithmUnavailableError, collective
from fabric_model.collectives.registry import NCCL_ALGO_MODELS, auto_candidates
from fabric_model.collectives.symmetric_kernels import MAX_BLOCKS, kernel_times
from fabric_model.collectives.versions import FEATURES, VERSIONS, has, max_ctas, version_data
from fabric_model.errors import ScenarioError
from fabric_model.scenario import (
    NCCL_VERSIONS,
    Scenario,
    apply_overrides,
    field_spec,
    scenario_from_text,
)

SIZES = [8, 2**16, 2**20, 2**24, 2**30]
#: Probe designs: 2 HGX H100 nodes; 16 GPUs one per NVLink domain (where PAT runs from
#: 2.23); one HGX H100 node with registered buffers (symmetric kernels from 2.27).
PROBES = {
    "two-nodes": {"cluster.n_gpus": 16},
    "one-gpu-domains": {
        "cluster.n_gpus": 16,
        "cluster.gpus_per_node": 1,
        "cluster.nvlink_domain": 1,
    },
    "one-node-registered": {"cluster.n_gpus": 8, "nccl.registered_buffers": True},
    # 2 HGX H100 nodes on SHARP switches with registered buffers (NVLS + IB SHARP from 2.27)
    "two-nodes-sharp": {
        "cluster.n_gpus": 16,
        "fabric.sharp": True,
        "nccl.registered_buffers": True,
    },
    # one HGX H100 node, registered buffers, NCCL_CTA_POLICY_ZERO (copy engines from 2.28)
    "one-node-zero-cta": {
        "cluster.n_gpus": 8,
        "nccl.registered_buffers": True,
        "nccl.cta_policy": "zero",
    },
    # one HGX B200 node, registered buffers (symmetric kernels from 2.27, their 16-CTA cap
    # from 2.28, large all-gathers on the copy engines from 2.29)
    "one-node-blackwell-registered": {
        "cluster.n_gpus": 8,
        "cluster.gpu": "b200",
        "nccl.registered_buffers": True,
    },
}
OPS = ("allreduce", "allgather", "reducescatter", "alltoall")


def sc(version: str, probe: str, **extra: object) -> Scenario:
    return apply_overrides(Scenario(), {**PROBES[probe], "nccl.version": version, **extra})


@cache
def outcome(version: str, probe: str) -> tuple[tuple[str, tuple[tuple[str, str, float], ...]], ...]:
    """Every op's auto choice and time per size, on one probe design and release."""
    out = []
    for op in OPS:
        rows = collective(sc(version, probe), op, "auto", SIZES)
        out.append((op, tuple((r.algo, r.proto, round(r.time_us, 6)) for r in rows)))
    return tuple(out)


def test_the_key_table_lists_the_data_files_versions_newest_default():
    assert NCCL_VERSIONS == VERSIONS
    assert Scenario().nccl.version == VERSIONS[-1] == "2.32"
    assert list(VERSIONS) == sorted(VERSIONS, key=lambda v: tuple(map(int, v.split("."))))
    for v in version_data()["versions"].values():
        assert v["source"]  # every release cites its release note or commit
    for name, f in version_data()["features"].items():
        assert f["since"] in VERSIONS and f["source"] and f["model"], name


def test_an_unknown_version_is_refused_naming_the_key_and_the_list(capsys):
    with pytest.raises(ScenarioError, match=r"nccl\.version = '2\.25': must be one of 2\.21, "):
        apply_overrides(Scenario(), {"nccl.version": "2.25"})
    assert main(["keys"]) == 0
    capsys.readouterr()
    assert (
        main(["collective", "--op", "allreduce", "--sizes", "1M", "--set", "nccl.version=3"]) == 2
    )
    err = capsys.readouterr().err
    assert "nccl.version" in err and "2.32" in err and "Traceback" not in err


def test_yaml_numbers_are_read_as_their_release():
    assert scenario_from_text("nccl: {version: 2.30}").nccl.version == "2.30"
    assert scenario_from_text("nccl: {version: 2.27}").nccl.version == "2.27"


def test_pat_is_refused_before_2_23_naming_nccl_version(capsys):
    with pytest.raises(AlgorithmUnavailableError, match=r"nccl\.version = 2\.21"):
        collective(sc("2.21", "one-gpu-domains"), "allgather", "pat", [2**20])
    argv = ["collective", "--op", "allgather", "--algo", "pat", "--sizes", "1M"]
    argv += ["--set", "nccl.version=2.21", "--set", "cluster.n_gpus=16"]
    assert main(argv) == 2
    assert "nccl.version = 2.21" in capsys.readouterr().err
    (row,) = collective(sc("2.23", "one-gpu-domains"), "allgather", "pat", [2**20])
    assert row.algo == "pat" and row.proto == "Simple"  # NCCL: PAT runs Simple only


def test_pat_with_several_gpus_per_domain_needs_2_31_and_nvls():
    with pytest.raises(AlgorithmUnavailableError, match=r"before 2\.31.*nccl\.version = 2\.30"):
        collective(sc("2.30", "two-nodes"), "allgather", "pat", [2**20])
    assert collective(sc("2.31", "two-nodes"), "allgather", "pat", [2**20])[0].algo == "pat"
    with pytest.raises(AlgorithmUnavailableError, match=r"fabric\.nvls"):
        collective(sc("2.31", "two-nodes", **{"fabric.nvls": False}), "allgather", "pat", [8])


#: Result names that are another algorithm's (its aliases), and the feature a result needs
#: beyond its algorithm's (SHARP all-reduce runs in every release, its all-gather from 2.27).
RESULT_ALGORITHM = {alias: a.name for a in ALGORITHMS.values() for alias, _ in a.aliases}
RESULT_FEATURE = {"nvls-sharp": "nvls_sharp_allgather_reducescatter"}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("probe", PROBES)
def test_auto_never_picks_an_algorithm_the_release_lacks(version, probe):
    s = sc(version, probe)
    for op, rows in outcome(version, probe):
        for algo, _, _ in rows:
            name = RESULT_ALGORITHM.get(algo, algo)
            since = RESULT_FEATURE.get(algo, ALGORITHMS[name].since)
            assert not since or has(version, since), (op, algo)
        assert set(auto_candidates(s.fabric, op, s.nccl)) <= {
            n for n, a in ALGORITHMS.items() if not a.since or has(version, a.since)
        }


#: Which probe each release changes against the one before it (its release note's feature
#: that the model expresses); every other pair is equal to the microsecond.
CHANGES = {
    "2.23": {"one-gpu-domains"},  # PAT, one rank per node
    # symmetric-memory kernels on registered buffers; NVLS + IB SHARP all-gather and
    # reduce-scatter on registered buffers
    "2.27": {
        "one-node-registered",
        "one-node-zero-cta",
        "one-node-blackwell-registered",
        "two-nodes-sharp",
    },
    # copy-engine collectives (NCCL_CTA_POLICY_ZERO); Blackwell's 16-CTA cap leaves the
    # symmetric kernels at their peak bandwidth (16 x 55 GiB/s > 600), so 2.28 shows there only
    # in the tuner CSV's channels (test_blackwell_cta_cap_is_16_from_2_28)
    "2.28": {"one-node-zero-cta"},
    "2.29": {"one-node-blackwell-registered"},  # large all-gathers on the copy engines
    "2.31": {"two-nodes", "two-nodes-sharp"},  # PAT across nodes with NVLS inside
}


@pytest.mark.parametrize("i", range(1, len(VERSIONS)))
def test_each_release_changes_what_its_note_says_and_nothing_else(i):
    before, after = VERSIONS[i - 1], VERSIONS[i]
    changed = {p for p in PROBES if outcome(before, p) != outcome(after, p)}
    assert changed == CHANGES.get(after, set()), (before, after)


def test_the_changes_are_the_features_own():
    # 2.23: PAT wins small all-gathers on 16 one-GPU nodes; ring before
    small = dict(outcome("2.23", "one-gpu-domains"))["allgather"][2]
    assert (
        small[0] == "pat" and dict(outcome("2.21", "one-gpu-domains"))["allgather"][2][0] == "ring"
    )
    # 2.27: NCCL runs the symmetric kernels on registered buffers, for every size
    for op, rows in outcome("2.27", "one-node-registered"):
        if op != "alltoall":
            assert {r[0] for r in rows} == {"symmetric"}, op
    assert all(
        r[0] != "symmetric" for _, rows in outcome("2.26", "one-node-registered") for r in rows
    )
    # 2.31: PAT with NVLS inside takes the medium all-gathers across 2 nodes (1 MiB), the
    # ring keeps the largest
    rows = dict(outcome("2.31", "two-nodes"))["allgather"]
    assert rows[2][0] == "pat" and rows[-1][0] == "ring"
    # 2.27: NVLS + IB SHARP takes the 1 MiB all-gather and reduce-scatter across 2 nodes
    for op in ("allgather", "reducescatter"):
        assert dict(outcome("2.27", "two-nodes-sharp"))[op][2][0] == "nvls-sharp", op
        assert dict(outcome("2.26", "two-nodes-sharp"))[op][2][0] == "ring", op
    # 2.28: NCCL_CTA_POLICY_ZERO puts every all-gather and all-to-all on the copy engines
    for op in ("allgather", "alltoall"):
        assert {r[0] for r in dict(outcome("2.28", "one-node-zero-cta"))[op]} == {"ce"}, op
        assert "ce" not in {r[0] for r in dict(outcome("2.27", "one-node-zero-cta"))[op]}, op
    # 2.29: a 1 GiB all-gather on B200 moves to the copy engines, 1 MiB stays symmetric
    rows = dict(outcome("2.29", "one-node-blackwell-registered"))["allgather"]
    assert (rows[2][0], rows[-1][0]) == ("symmetric", "ce")
    assert dict(outcome("2.28", "one-node-blackwell-registered"))["allgather"][-1][0] == "symmetric"


def test_symmetric_kernels_beat_the_legacy_latency_as_the_release_note_says():
    # "performance gains expected particularly for small to medium message sizes"
    s = sc("2.27", "one-node-registered")
    legacy = collective(
        apply_overrides(s, {"nccl.registered_buffers": False}), "allreduce", "auto", [8]
    )
    (sym,) = collective(s, "allreduce", "auto", [8])
    assert sym.algo == "symmetric" and sym.proto == "LL"
    assert sym.time_us == pytest.approx(4.5, abs=0.01)  # sym_kernels.cc: Hopper LL baseLat
    assert sym.time_us < legacy[0].time_us


def test_symmetric_kernel_bandwidth_is_nccls_own_formula():
    # Hopper all-gather ST: bw = min(blocks x 44 GiB/s, 320 GiB/s), bus bytes (n-1) nBytes
    s = sc("2.27", "one-node-registered", **{"fabric.nvls": False})
    from fabric_model.collectives import FabricContext

    kt = kernel_times(FabricContext.from_scenario(s), "allgather")
    lat, busbw, blocks, name = kt["Simple"]
    assert (name, blocks, lat) == ("ST", min(MAX_BLOCKS, 32), 7.8)
    assert busbw == pytest.approx(min(32 * 44, 320) * 2**30)


def test_blackwell_cta_cap_is_16_from_2_28():
    assert FEATURES["blackwell_16_ctas"] == "2.28"
    assert [max_ctas(v, "blackwell") for v in ("2.27", "2.28", "2.32")] == [32, 16, 16]
    assert {max_ctas(v, "hopper") for v in VERSIONS} == {32}


# ----------------------------------------------------------------- NCCL_ALGO / NCCL_PROTO


def test_nccl_algo_forces_that_algorithm():
    s = apply_overrides(Scenario(), {"cluster.n_gpus": 16, "nccl.algo": "ring"})
    assert {r.algo for r in collective(s, "allreduce", "auto", SIZES)} == {"ring"}
    tree = apply_overrides(s, {"nccl.algo": "tree"})
    assert {r.algo for r in collective(tree, "allreduce", "auto", SIZES)} == {"tree"}
    nvlstree = apply_overrides(s, {"nccl.algo": "nvlstree"})
    assert {r.algo for r in collective(nvlstree, "allreduce", "auto", SIZES)} == {"nvls-tree"}
    # all-to-all is point-to-point in NCCL: NCCL_ALGO leaves it alone
    a2a = collective(s, "alltoall", "auto", [2**20])
    assert a2a == collective(apply_overrides(s, {"nccl.algo": "auto"}), "alltoall", "auto", [2**20])


@pytest.mark.parametrize(
    ("overrides", "op", "match"),
    [
        ({"cluster.n_gpus": 16, "nccl.algo": "nvls"}, "allreduce", r"nccl\.algo = nvls"),
        ({"cluster.n_gpus": 8, "nccl.algo": "nvlstree"}, "allreduce", r"nccl\.algo = nvlstree"),
        (
            {"cluster.n_gpus": 16, "nccl.algo": "collnetchain"},
            "allreduce",
            r"nccl\.algo = collnetchain",
        ),
        ({"cluster.n_gpus": 16, "nccl.algo": "collnetdirect"}, "allreduce", r"nccl\.algo"),
        ({"cluster.n_gpus": 16, "nccl.algo": "tree"}, "allgather", r"nccl\.algo = tree"),
        (
            {"cluster.n_gpus": 16, "nccl.algo": "nvlstree", "nccl.proto": "LL"},
            "allreduce",
            r"nccl\.proto = LL",
        ),
        (
            {"cluster.n_gpus": 16, "nccl.algo": "pat", "nccl.version": "2.21"},
            "allgather",
            r"nccl\.algo = pat",
        ),
    ],
)
def test_impossible_knob_combinations_are_refused_naming_the_key(overrides, op, match):
    with pytest.raises(AlgorithmUnavailableError, match=match):
        collective(apply_overrides(Scenario(), overrides), op, "auto", [2**20])


def test_an_explicit_algo_against_nccl_algo_is_refused():
    s = apply_overrides(Scenario(), {"cluster.n_gpus": 16, "nccl.algo": "ring"})
    with pytest.raises(AlgorithmUnavailableError, match=r"nccl\.algo = ring"):
        collective(s, "allreduce", "tree", [2**20])
    assert collective(s, "allreduce", "ring", [2**20])[0].algo == "ring"


@pytest.mark.parametrize("proto", ["LL", "LL128", "Simple"])
def test_nccl_proto_forces_the_protocol(proto):
    s = apply_overrides(
        Scenario(), {"cluster.n_gpus": 16, "nccl.algo": "ring", "nccl.proto": proto}
    )
    rows = collective(s, "allreduce", "auto", SIZES)
    assert {r.proto for r in rows} == {proto}
    free = collective(apply_overrides(s, {"nccl.proto": "auto"}), "allreduce", "auto", SIZES)
    # forcing a protocol never beats NCCL's tuner on the tuner's own (uncongested) fabric
    for forced, best in zip(rows, free, strict=True):
        assert forced.time_us >= best.time_us * (1 - 1e-9) or forced.proto == best.proto


def test_every_nccl_algo_name_maps_to_a_model_algorithm():
    assert set(NCCL_ALGO_MODELS) | {"collnetchain"} == set(field_spec("nccl.algo").choices)
    assert all(m in ALGORITHMS for m in NCCL_ALGO_MODELS.values())


def test_time_stays_finite_and_positive_across_releases():
    for v in VERSIONS:
        for _, rows in outcome(v, "two-nodes"):
            assert all(math.isfinite(t) and t > 0 for _, _, t in rows)


@pytest.mark.parametrize("gpu", ["h100", "b200"])
@pytest.mark.parametrize("op", ["allreduce", "allgather", "reducescatter"])
def test_symmetric_kernels_never_beat_the_nvlink_line_rate(gpu, op):
    from fabric_model.collectives import FabricContext, bus_factor

    s = apply_overrides(
        Scenario(),
        {"cluster.gpu": gpu, "cluster.n_gpus": 8, "nccl.registered_buffers": True},
    )
    ctx = FabricContext.from_scenario(s)
    # by name: from 2.29 NCCL runs an 8 GiB all-gather on Blackwell on the copy engines
    (row,) = collective(s, op, "symmetric", [2**33])
    assert row.algo == "symmetric"
    # every GPU receives at least S (multicast all-reduce) or (n-1)/n S
    least = 1.0 if op == "allreduce" else 7 / 8
    assert row.busbw_GBps * 1e9 <= bus_factor(op, 8) * ctx.nvlink_Bps / least * (1 + 1e-9)
