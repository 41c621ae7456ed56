"""``export --format nccl-tuner-csv`` round-trips through a reader written from NCCL's example
tuner plugin (NVIDIA/nccl ``plugins/tuner/example/plugin.c``, read at 5067397c): ``loadConfig``
parses the lines, ``pluginGetCollInfo`` picks the first matching one; every size the model
evaluates gets back exactly the model's ``auto`` choice."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cache

import pytest

from fabric_model.cli import main
from fabric_model.collectives import FabricContext, collective
from fabric_model.collectives.tuner_csv import MAX_BYTES, TUNER_ALGORITHMS, TUNER_SIZES
from fabric_model.collectives.versions import max_ctas
from fabric_model.presets import load_preset
from fabric_model.report.export import export_design
from fabric_model.scenario import Scenario, apply_overrides

# --- the plugin's reader, transcribed from plugin.c -------------------------------------

MAX_LINE_LENGTH = 256  # fgets buffer: a longer line would be split
#: parseCollType / parseAlgorithm / parseProtocol: the names it knows (any other name falls
#: back silently to allreduce / ring / simple, so the test refuses unknown names outright).
COLL_TYPES = ("broadcast", "reduce", "allgather", "reducescatter", "allreduce")
ALGORITHMS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
PROTOCOLS = ("ll", "ll128", "simple")


@dataclass(frozen=True)
class Config:
    coll: str
    min_bytes: int
    max_bytes: int
    algorithm: str
    protocol: str
    n_channels: int
    n_nodes: int
    n_ranks: int
    num_pipe_ops: int
    reg_buff: int


def _atoi(token: str) -> int:
    return int(token)  # the files are well formed: atoi == int here


def load_config(text: str) -> list[Config]:
    """``loadConfig``: skip '#' and empty lines, strtok on ',', trim ' ' and '\\t', 8-10 fields."""
    configs = []
    for raw in text.splitlines(keepends=True):
        assert len(raw) < MAX_LINE_LENGTH, raw
        if raw[0] in "#\n":
            continue
        line = raw.rstrip("\n")
        if not line:
            continue
        tokens = [t.strip(" \t") for t in line.split(",") if t != ""][:10]  # strtok skips empties
        if not 8 <= len(tokens) <= 10:
            continue
        assert tokens[0] in COLL_TYPES and tokens[3] in ALGORITHMS and tokens[4] in PROTOCOLS
        configs.append(
            Config(
                tokens[0],
                int(tokens[1]),  # strtoull
                int(tokens[2]),
                tokens[3],
                tokens[4],
                _atoi(tokens[5]),
                _atoi(tokens[6]),
                _atoi(tokens[7]),
                _atoi(tokens[8]) if len(tokens) >= 9 else -1,
                _atoi(tokens[9]) if len(tokens) >= 10 else -1,
            )
        )
    return configs


def get_coll_info(
    configs: list[Config],
    coll: str,
    n_bytes: int,
    n_nodes: int,
    n_ranks: int,
    pipe_ops: int,
    reg: int,
) -> Config | None:
    """``pluginGetCollInfo``: the first config that matches the call."""
    for c in configs:
        if (
            c.coll == coll
            and c.min_bytes <= n_bytes <= c.max_bytes
            and c.n_nodes in (-1, n_nodes)
            and c.n_ranks in (-1, n_ranks)
            and c.num_pipe_ops in (-1, pipe_ops)
            and c.reg_buff in (-1, reg)
        ):
            return c
    return None


# --- the round trip ---------------------------------------------------------------------

#: Designs: 2 HGX H100 nodes (NVLS-Tree, PAT+NVLS from 2.31), 2 GB200 NVL72 racks (MNNVL:
#: NCCL's nNodes is the rack count), one NVL72 rack alone.
DESIGNS = {
    "h100-2-nodes": (Scenario(), {"cluster.n_gpus": 16}),
    "gb200-2-racks": (load_preset("gb200-nvl72-ndr"), {"cluster.n_gpus": 144}),
    "gb200-1-rack-2.21": (
        load_preset("gb200-nvl72-ndr"),
        {"cluster.n_gpus": 72, "nccl.version": "2.21"},
    ),
}


@cache
def scenario(name: str) -> Scenario:
    base, overrides = DESIGNS[name]
    return apply_overrides(base, overrides)


@cache
def exported(name: str) -> str:
    return export_design(scenario(name), "nccl-tuner-csv").text


@pytest.mark.parametrize("name", DESIGNS)
def test_every_size_reads_back_the_models_auto_choice(name):
    s = scenario(name)
    ctx = FabricContext.from_scenario(s)
    configs = load_config(exported(name))
    reg = int(s.nccl.registered_buffers)
    for op in ("allreduce", "allgather", "reducescatter"):
        rows = collective(s, op, "auto", list(TUNER_SIZES))
        for row in rows:
            for size in (row.size_bytes, row.size_bytes * 3 // 2):  # the grid and between
                got = get_coll_info(configs, op, size, ctx.n_domains, ctx.n_ranks, 1, reg)
                assert got is not None, (op, size)
                if size == row.size_bytes:
                    assert got.algorithm == TUNER_ALGORITHMS[row.algo], (op, size)
                    assert got.protocol == row.proto.lower(), (op, size)
        # a call of another communicator (other ranks) or other buffers does not match
        assert get_coll_info(configs, op, 2**20, ctx.n_domains, ctx.n_ranks + 1, 1, reg) is None
        assert get_coll_info(configs, op, 2**20, ctx.n_domains, ctx.n_ranks, 1, 1 - reg) is None


@pytest.mark.parametrize("name", DESIGNS)
def test_rows_tile_every_size_once_and_name_channels(name):
    s = scenario(name)
    ctx = FabricContext.from_scenario(s)
    configs = load_config(exported(name))
    for op in ("allreduce", "allgather", "reducescatter"):
        mine = [c for c in configs if c.coll == op]
        assert mine[0].min_bytes == 0 and mine[-1].max_bytes == MAX_BYTES
        for a, b in itertools.pairwise(mine):
            assert b.min_bytes == a.max_bytes + 1
            assert (a.algorithm, a.protocol) != (b.algorithm, b.protocol)  # merged runs
    for c in configs:
        # the plugin keeps 1 channel for -1: every row names the model's count
        assert 1 <= c.n_channels <= max_ctas(s.nccl.version, ctx.arch)
        assert (c.n_nodes, c.n_ranks) == (ctx.n_domains, ctx.n_ranks)


def test_nnodes_is_the_nvlink_domain_count_under_mnnvl():
    (c, *_) = load_config(exported("gb200-2-racks"))
    assert (c.n_nodes, c.n_ranks) == (2, 144)  # 36 trays, 2 MNNVL cliques


def test_blackwell_channels_follow_the_cta_cap_of_the_release():
    # 2 NVL72 racks: the ring leaves each rack on 16 NICs, 32 channels; NCCL 2.28 caps
    # Blackwell at 16 CTAs
    older = apply_overrides(scenario("gb200-2-racks"), {"nccl.version": "2.27"})
    chans = {c.n_channels for c in load_config(export_design(older, "nccl-tuner-csv").text)}
    assert chans == {32}
    assert {c.n_channels for c in load_config(exported("gb200-2-racks"))} == {16}


def test_symmetric_kernels_get_no_row_and_a_note():
    s = apply_overrides(Scenario(), {"cluster.n_gpus": 8, "nccl.registered_buffers": True})
    export = export_design(s, "nccl-tuner-csv")
    assert load_config(export.text) == [] and export.n_items == 0
    assert any("symmetric-memory kernels" in n for n in export.notes)


def test_the_cli_writes_the_file(tmp_path, capsys):
    out = tmp_path / "nccl_tuner.conf"
    argv = ["export", "--format", "nccl-tuner-csv", "--out", str(out), "--set", "cluster.n_gpus=16"]
    assert main(argv) == 0
    assert load_config(out.read_text()) == load_config(exported("h100-2-nodes"))
    assert "nccl-tuner-csv" in capsys.readouterr().out
