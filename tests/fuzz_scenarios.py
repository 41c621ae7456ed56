"""Random scenarios over the whole key table, and one CLI verb run on each, in-process.

Shared by ``tests/test_fuzz.py`` (hypothesis draws the seed of the ``random.Random`` that
:func:`random_case` draws from; the CI run is derandomized) and ``benchmarks/fuzz.py``
(thousands of seeded cases, crashes per thousand).

A case is a verb, its arguments and a set of ``--set`` overrides on a preset. Every key of
``python -m fabric_model keys`` can be drawn: the structural ones (GPU counts that are not
powers of two nor multiples of a rack, partial NVLink domains, every GPU x family x vendor x
routing x tiers x oversubscription, degradations, placements, models and plans of every
shape) with values chosen to reach deep into the model; every other key now and then, at
its bounds or anywhere between them. A few values fall outside their bounds on purpose, so
the refusals are exercised too.

The outcome of a case is acceptable when the verb exits 0 with JSON whose numbers are all
finite (NaN only inside an object marked ``"feasible": false``, as the step and sweep
contracts document), or exits 2 with one line ``error: ...`` on stderr. Anything else, a
traceback above all, is a crash; :attr:`FuzzCase.command` reproduces it.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import random
import shlex
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabric_model.catalog import load_catalog
from fabric_model.cli import main
from fabric_model.collectives import ALGOS, OPS
from fabric_model.presets import list_presets, load_preset
from fabric_model.scenario import MODEL_SHAPES, SHAPE_KEYS, FieldSpec, Scenario, iter_field_specs

__all__ = [
    "VERB_MAX_GPUS",
    "VERB_WEIGHTS",
    "FuzzCase",
    "Outcome",
    "check_outcome",
    "describe_failure",
    "random_case",
    "random_overrides",
    "run_case",
]

#: Largest ``cluster.n_gpus`` drawn per verb (the verbs that solve flows stay small and fast).
VERB_MAX_GPUS = {
    "bom": 131_072,
    "collective": 4096,
    "step": 4096,
    "sweep": 2048,
    "plan": 1024,
    "acceptance": 4096,
    "check-nccl": 4096,
    "report": 512,
}
#: How often the benchmark draws each verb (``report`` writes a 5 MB file: rarely).
VERB_WEIGHTS = {
    "bom": 4,
    "collective": 8,
    "step": 5,
    "sweep": 2,
    "plan": 1,
    "acceptance": 2,
    "check-nccl": 2,
    "report": 0.1,
}
#: Chance that a key the structural draw leaves alone is set anyway (at a bound or between);
#: lower for the model's shape keys, most of whose random values break a shape rule.
GENERIC_KEY_CHANCE = 0.05
GENERIC_SHAPE_KEY_CHANCE = 0.01
#: Chance that one drawn value is pushed outside its bounds (the refusal path).
OUT_OF_RANGE_CHANCE = 0.05

_SPECS: dict[str, FieldSpec] = {key: spec for key, spec, _ in iter_field_specs()}
#: Keys only the structural draw sets: a random ``model.params_b`` contradicts the shape,
#: a random ``parallel.dp`` the GPU count, and ``model.name`` is drawn there already.
_STRUCTURAL = frozenset({"model.name", "model.params_b", "parallel.dp"})
#: Keys drawn at :data:`GENERIC_SHAPE_KEY_CHANCE`: most random values break a rule.
_FRAGILE = frozenset({f"model.{k}" for k in SHAPE_KEYS} | {"model.routing_skew"})
_CATALOG = load_catalog()
_PRESETS = tuple(p.name for p in list_presets())
#: nccl-tests binaries the log generator writes, and the op each one is.
_BINARIES = {
    "all_reduce_perf": "allreduce",
    "all_gather_perf": "allgather",
    "reduce_scatter_perf": "reducescatter",
    "alltoall_perf": "alltoall",
}
#: Algorithms that run each operation (the others are refused, which is drawn less often).
_OP_ALGOS = {
    "allreduce": ("ring", "tree", "nvls", "sharp", "hierarchical"),
    "allgather": ("ring", "nvls"),
    "reducescatter": ("ring", "nvls"),
    "alltoall": ("direct", "hierarchical"),
}
#: Message sizes (bytes) drawn for ``--sizes`` and the generated logs: edges, odd and
#: nccl-tests-like.
_SIZES_BYTES = (
    0,
    1,
    7,
    8,
    1000,
    4095,
    2**13,
    2**16,
    2**20 + 3,
    2**24,
    2**26,
    2**28,
    2**30,
    2**33,
    2**36,
    2**40,
)

#: JSON keys ending so are times, rates, counts, costs or powers: never negative.
_NON_NEGATIVE = (
    "_us",
    "_s",
    "_GBps",
    "_Bps",
    "_usd",
    "_w",
    "_gib",
    "_bytes",
    "bytes",
    "n_gpus",
    "n_switches",
    "n_links",
    "n_nics",
    "n_cables",
    "n_transceivers",
)
#: Chance that a case keeps its preset's cluster and fabric (a published design with
#: what-ifs) when the preset is small enough for the verb.
KEEP_PRESET_DESIGN_CHANCE = 0.15


@dataclass(frozen=True)
class FuzzCase:
    """One verb on one scenario: what to run, and how to say it on a command line.

    Attributes
    ----------
    verb : str
        CLI verb.
    args : tuple[str, ...]
        The verb's own arguments (``--op``, ``--sizes``, ...); ``{LOG}`` and ``{OUT}`` stand
        for the nccl-tests log and the report path, filled in by :meth:`argv`.
    preset : str
        Base preset.
    overrides : tuple[tuple[str, str], ...]
        ``--set`` assignments, in order.
    log_text : str
        The generated nccl-tests log (``check-nccl`` only).
    """

    verb: str
    args: tuple[str, ...]
    preset: str
    overrides: tuple[tuple[str, str], ...]
    log_text: str = ""

    def argv(self, log_path: str = "LOG", out_path: str = "report.html") -> list[str]:
        """Return the CLI arguments (without ``python -m fabric_model``)."""
        args = [a.replace("{LOG}", log_path).replace("{OUT}", out_path) for a in self.args]
        sets = [item for k, v in self.overrides for item in ("--set", f"{k}={v}")]
        return [self.verb, *args, "--json", "--preset", self.preset, *sets]

    def command(self, log_path: str = "LOG") -> str:
        """Return the shell command that reproduces the case."""
        return "python -m fabric_model " + shlex.join(self.argv(log_path))


@dataclass(frozen=True)
class Outcome:
    """What a case did: exit status, output, and the traceback of an uncaught exception."""

    status: int | None
    stdout: str
    stderr: str
    crash: str = ""
    problems: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """Whether the outcome is a result or one clean refusal."""
        return not self.crash and not self.problems


# ------------------------------------------------------------------------------ drawing


def _log_int(rng: random.Random, lo: int, hi: int) -> int:
    """An integer in ``[lo, hi]``, log-uniform (small values as likely as large ones)."""
    if hi <= lo:
        return lo
    return min(hi, max(lo, int(math.exp(rng.uniform(math.log(lo), math.log(hi + 1))))))


def _generic_value(rng: random.Random, key: str, spec: FieldSpec) -> Any:
    """A value of ``key`` from its spec alone: a bound, just inside one, or anywhere."""
    if spec.kind == "bool":
        return rng.random() < 0.5
    if spec.kind == "choice":
        return rng.choice((*(("auto",) if spec.auto else ()), *spec.choices))
    if spec.kind == "text":
        return _text_value(rng, key)
    lo = spec.min if spec.min is not None else 0.0
    hi = spec.max if spec.max is not None else max(lo, 1.0) * 1000
    if spec.auto and rng.random() < 0.2:
        return "auto"
    if spec.optional and rng.random() < 0.2:
        return "null"
    pick = rng.random()
    if spec.kind == "int":
        lo_i = int(lo) + (1 if spec.min_exclusive else 0)
        if pick < 0.2:
            return lo_i
        if pick < 0.35:
            return int(hi)
        return _log_int(rng, max(lo_i, 1), int(hi)) if lo_i >= 0 else rng.randint(lo_i, int(hi))
    if pick < 0.2:
        return lo * (1 + 1e-9) + 1e-12 if spec.min_exclusive else lo
    if pick < 0.35:
        return hi
    return round(rng.uniform(lo, hi), rng.choice((1, 2, 6)))


def _out_of_range(rng: random.Random, spec: FieldSpec) -> Any:
    """A value ``spec`` must refuse."""
    if spec.kind in ("int", "float") and spec.max is not None and rng.random() < 0.5:
        return spec.max * 2 + 1
    if spec.kind in ("int", "float") and spec.min is not None:
        return spec.min - 1
    return rng.choice(("-1", "nan", "banana", ""))


def _text_value(rng: random.Random, key: str) -> str:
    known = {
        "cluster.gpu": list(_CATALOG.gpus),
        "fabric.switch": ["auto", "auto", *_CATALOG.switches],
        "fabric.nic": ["auto", "auto", *_CATALOG.nics],
    }.get(key, ["auto"])
    return str(rng.choice(known))


def _gpu_count(rng: random.Random, per_node: int, domain: int, max_gpus: int, topology: str) -> int:
    """A GPU count that stresses the builders: partial racks, odd node counts, edges.

    A torus or hypercube node is a whole NVLink domain (a hypercube has ``2^d`` of them), so
    those families mostly get whole domains; so does an OCS fabric, mostly no more blocks than
    an OCS has ports (136 or more in the catalog).
    """
    nodes_max = max(1, max_gpus // per_node)
    kind = rng.random()
    if topology == "ocs" and kind < 0.7:
        n = _log_int(rng, 1, max(1, min(128, max_gpus // max(domain, 1)))) * domain
    elif topology in ("torus-3d", "hypercube") and kind < 0.7:
        most = max(1, max_gpus // max(domain, 1))
        n_nodes = (
            2 ** rng.randint(0, int(math.log2(most)))
            if topology == "hypercube"
            else _log_int(rng, 1, most)
        )
        n = n_nodes * domain
    elif kind < 0.25:  # a power of two
        n = 2 ** rng.randint(1, max(1, int(math.log2(max_gpus))))
    elif kind < 0.45:  # whole NVLink domains, plus or minus a server (a partial domain)
        racks = _log_int(rng, 1, max(1, max_gpus // max(domain, 1)))
        n = racks * domain + rng.choice((0, 0, per_node, -per_node, 2 * per_node))
    elif kind < 0.87:  # any whole number of servers
        n = _log_int(rng, 1, nodes_max) * per_node
    elif kind < 0.96:  # fewer GPUs than one server, or one server
        n = rng.randint(2, max(2, per_node))
    else:  # anything (often not a multiple of a server: refused)
        n = _log_int(rng, 2, max_gpus)
    return max(2, min(n, max_gpus))


def _cluster(rng: random.Random, max_gpus: int, out: dict[str, Any]) -> None:
    gpu = rng.choice(list(_CATALOG.gpus))
    rack_scale = gpu.startswith("gb")
    per_node = (
        rng.choice((4, 4, 4, 2, 1))
        if rack_scale and rng.random() < 0.8
        else rng.choice((8, 8, 8, 4, 2, 1, 16, rng.randint(1, 16)))
    )
    if rng.random() < 0.97:  # a multiple of the server
        mults = [
            m for m in (1, 1, 2, 3, 4, 8, 9, 16, 18, 32, 36, 64, 72, 144) if m * per_node <= 576
        ]
        domain = per_node * rng.choice(mults)
        if rack_scale and rng.random() < 0.5 and 72 % per_node == 0:
            domain = rng.choice((72, 72, 36, 144 if per_node <= 4 else 72))
    else:
        domain = rng.randint(1, 576)
    out["cluster.gpu"] = gpu
    out["cluster.gpus_per_node"] = per_node
    out["cluster.nvlink_domain"] = domain
    out["cluster.n_gpus"] = _gpu_count(rng, per_node, domain, max_gpus, out["fabric.topology"])
    out["cluster.nics_per_gpu"] = rng.choice((1, 1, 1, 2, 4, 3))
    # mostly a line rate the GPU's host link can feed (a faster one is refused)
    feed_GBps = _CATALOG.server(_CATALOG.gpu(gpu).server).host_link_GBps
    rates = [g for g in (100, 200, 400, 800, 1600) if g / 8 <= feed_GBps]
    out["fabric.link_gbps"] = (
        rng.choice(rates) if rng.random() < 0.85 else rng.choice((100, 200, 400, 800, 1600))
    )


def _fabric(rng: random.Random, out: dict[str, Any]) -> None:
    out["fabric.vendor"] = rng.choice(_SPECS["fabric.vendor"].choices)
    out["fabric.topology"] = rng.choice(_SPECS["fabric.topology"].choices)
    out["fabric.routing"] = rng.choice(("auto", "auto", *_SPECS["fabric.routing"].choices))
    out["fabric.tiers"] = rng.choice(("auto", "auto", 1, 2, 3))
    out["fabric.rail_optimized"] = rng.random() < 0.7
    if rng.random() < 0.4:
        out["fabric.oversubscription"] = rng.choice(
            (1.0, 1.5, 2.0, 3.0, 4.0, 7.0, 16.0, round(rng.uniform(1.0, 16.0), 3))
        )
    if rng.random() < 0.2:
        out["fabric.spine_oversubscription"] = rng.choice(
            (1.0, 2.0, 7.0, 16.0, round(rng.uniform(1.0, 16.0), 3))
        )
    if rng.random() < 0.3:
        out["fabric.qps_per_connection"] = rng.choice((1, 2, 4, 8, 64))
    for key in ("fabric.sharp", "fabric.nvls"):
        if rng.random() < 0.3:
            out[key] = rng.random() < 0.5


def _model(rng: random.Random, out: dict[str, Any]) -> None:
    names = _SPECS["model.name"].choices[1:]
    if rng.random() < 0.1:  # a stated size: mostly auto, else one that rarely fits the shape
        out["model.params_b"] = (
            "auto"
            if rng.random() < 0.7
            else _generic_value(rng, "model.params_b", _SPECS["model.params_b"])
        )
    if rng.random() < 0.8:  # small models more often: they fit the small clusters drawn
        out["model.name"] = rng.choices(
            names, weights=[4 if "8b" in n or "8x7b" in n else 1 for n in names]
        )[0]
        return
    # a custom shape that passes the cross-field rules, of any size
    kind = rng.choice(("dense", "moe"))
    heads = rng.choice((1, 2, 8, 12, 32, 64, 96, 128))
    head_dim = rng.choice((16, 64, 128))
    out.update(
        {
            "model.name": "custom",
            "model.kind": kind,
            "model.heads": heads,
            "model.hidden": heads * head_dim,
            "model.kv_heads": rng.choice([d for d in (1, 2, 4, 8, heads) if heads % d == 0]),
            "model.layers": rng.choice((1, 2, 3, 7, 32, 61, 80, 126)),
            "model.ffn_hidden": rng.choice((64, 1408, 4 * heads * head_dim)),
            "model.seq_len": rng.choice((16, 1000, 2048, 8192, 131072)),
            "model.vocab": rng.choice((2, 32000, 128256)),
        }
    )
    if kind == "moe":
        experts = rng.choice((2, 8, 16, 64, 256))
        out["model.n_experts"] = experts
        out["model.top_k"] = rng.randint(1, min(experts, 8))
        out["model.shared_experts"] = rng.choice((0, 0, 1, 2))
        out["model.dense_layers"] = rng.randint(0, out["model.layers"] - 1)
        skew = rng.choice((1.0, 1.0, 2.0, 4.0, 8.0))
        out["model.routing_skew"] = skew
        out["model.hot_fraction"] = rng.choice(
            [f for f in (0.125, 0.0625, 0.25, 0.5, 1.0) if f * skew <= 1.0]
        )
    else:
        out.update({"model.n_experts": 1, "model.top_k": 1, "model.shared_experts": 0})


def _degree(rng: random.Random, choices: tuple[int, ...], room: int) -> int:
    """A parallel degree from ``choices``, mostly one that divides ``room``."""
    fits = [d for d in choices if room % d == 0]
    return rng.choice(fits) if fits and rng.random() < 0.95 else rng.choice(choices)


def _plan(rng: random.Random, n_gpus: int, out: dict[str, Any]) -> None:
    room = n_gpus
    for key, choices in (
        ("parallel.tp", (1, 1, 2, 4, 8, 8, 16, 3, 6, 72)),
        ("parallel.pp", (1, 1, 2, 4, 8, 3, 16)),
        ("parallel.cp", (1, 1, 1, 2, 4)),
    ):
        out[key] = _degree(rng, choices, room)
        room = max(1, room // out[key])
    name = out["model.name"]
    kind = out["model.kind"] if name == "custom" else MODEL_SHAPES[name]["shape"]["kind"]
    out["parallel.ep"] = (
        _degree(rng, (1, 1, 2, 4, 8, 16, 64), room) if kind == "moe" or rng.random() < 0.1 else 1
    )
    if rng.random() < 0.2:  # dp given: mostly the one that fits
        out["parallel.dp"] = room if rng.random() < 0.8 else rng.choice((1, 2, 3, 16, 128))
    if rng.random() < 0.3 and out["parallel.pp"] > 1:
        out["parallel.vpp"] = rng.choice((1, 2, 3, 4))
    if rng.random() < 0.3:
        out["parallel.zero_stage"] = rng.choice((0, 1, 2, 3))
    micro = rng.choice((1, 1, 2, 4, 3, 16)) if rng.random() < 0.3 else 1
    if micro > 1:
        out["training.micro_batch"] = micro
    if rng.random() < 0.5:  # whole micro-batches per replica, or any count of tokens
        seq = out.get("model.seq_len") or MODEL_SHAPES.get(name, {}).get("shape", {}).get(
            "seq_len", 8192
        )
        out["training.global_batch_tokens"] = (
            room * micro * seq * rng.choice((1, 2, 8, 64))
            if rng.random() < 0.7
            else _log_int(rng, 1, 2**30)
        )
    if rng.random() < 0.3:
        out["training.recompute"] = rng.choice(("none", "selective", "full"))


def _what_if(rng: random.Random, out: dict[str, Any]) -> None:
    if rng.random() < 0.35:
        out["what_if.degraded_link_factor"] = rng.choice(
            (0.5, 0.25, 0.1, 1e-3, 1e-9, 1.0, round(rng.uniform(0.01, 1.0), 3))
        )
        out["what_if.degraded_link"] = rng.choice(("nic", "nic", "leaf-spine", "spine-core"))
        out["what_if.degraded_position"] = rng.choice(_SPECS["what_if.degraded_position"].choices)
    if rng.random() < 0.3:
        out["what_if.placement"] = rng.choice(_SPECS["what_if.placement"].choices)


def random_overrides(
    rng: random.Random, max_gpus: int, design: Scenario | None = None
) -> dict[str, Any]:
    """Draw ``--set`` overrides: the structural keys, then any other key now and then.

    ``cluster.n_gpus`` stays at most ``max_gpus`` (unless pushed out of range on purpose).
    With ``design``, its cluster and fabric are kept and only the rest is drawn.
    """
    out: dict[str, Any] = {}
    if design is None:
        _fabric(rng, out)
        _cluster(rng, max_gpus, out)
    _model(rng, out)
    _plan(rng, out.get("cluster.n_gpus", design.cluster.n_gpus if design else 2), out)
    _what_if(rng, out)
    for key, spec in _SPECS.items():
        chance = GENERIC_SHAPE_KEY_CHANCE if key in _FRAGILE else GENERIC_KEY_CHANCE
        if key not in out and key not in _STRUCTURAL and rng.random() < chance:
            out[key] = _generic_value(rng, key, spec)
    if rng.random() < OUT_OF_RANGE_CHANCE:
        key = rng.choice(sorted(out))
        out[key] = _out_of_range(rng, _SPECS[key])
    return out


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _sizes_arg(rng: random.Random) -> str:
    sizes = rng.sample(_SIZES_BYTES, rng.randint(1, 4))
    return ",".join(str(s) for s in sorted(sizes))


def _nccl_log(rng: random.Random, binary: str, n_ranks: int) -> str:
    """An nccl-tests (2.13+) log of ``binary`` on ``n_ranks`` ranks with plausible timings."""
    op = _BINARIES[binary]
    factor = 2 * (n_ranks - 1) / n_ranks if op == "allreduce" else (n_ranks - 1) / n_ranks
    sizes = sorted({max(s, 8) - max(s, 8) % 8 for s in rng.sample(_SIZES_BYTES[:14], 5)})
    lines = [
        f"mpirun -np {n_ranks} ./build/{binary} -b {sizes[0]} -e {sizes[-1]} -f 2 -g 1",
        f"# nThread 1 nGpus 1 minBytes {sizes[0]} maxBytes {sizes[-1]} step: 2(factor) "
        "warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
        *(
            f"#  Rank {r:2d} Group  0 Pid {1000 + r:6d} on node{r // 8:04d} device {r % 8:2d} "
            "[0x1b] NVIDIA H100 80GB HBM3"
            for r in range(min(n_ranks, 64))
        ),
        "#",
        "#                                                              out-of-place"
        "                       in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
        "            (us)  (GB/s)  (GB/s)       ",
    ]
    redop = "sum" if op in ("allreduce", "reducescatter") else "none"
    for size in sizes:
        time_us = rng.choice((0.01, 5.0, 30.0)) + size / rng.uniform(1e3, 4e5)
        algbw = size / time_us / 1e3
        cells = f"{time_us:8.2f} {algbw:7.2f} {algbw * factor:7.2f}      0"
        lines.append(f"{size:12d} {size // 4:13d}     float {redop:>7}      -1 {cells} {cells}")
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 1.0", "#"]
    return "\n".join(lines) + "\n"


def _sweep_size(rng: random.Random, max_gpus: int) -> int:
    """A sweep point: mostly whole 8-GPU servers, sometimes any count."""
    n = _log_int(rng, 2, max_gpus)
    return max(8, n - n % 8) if rng.random() < 0.7 else n


def _verb_args(
    rng: random.Random, verb: str, n_gpus: int, max_gpus: int
) -> tuple[tuple[str, ...], str]:
    """The verb's own arguments (and, for ``check-nccl``, the log text)."""
    if verb == "bom":
        return (("--compare",) if rng.random() < 0.3 else ()), ""
    if verb == "collective":
        op = rng.choice(OPS)
        algo = rng.choice(("auto", *_OP_ALGOS[op])) if rng.random() < 0.7 else rng.choice(ALGOS)
        args = ("--op", op, "--algo", algo, "--sizes", _sizes_arg(rng))
        return args + (("--breakdown",) if rng.random() < 0.3 else ()), ""
    if verb == "sweep":
        gpus = sorted({_sweep_size(rng, max_gpus) for _ in range(rng.randint(1, 3))})
        return ("--gpus", ",".join(map(str, gpus)), "--scaling", rng.choice(("weak", "strong"))), ""
    if verb == "plan":
        return ("--top", str(rng.randint(1, 5))), ""
    if verb == "acceptance":
        tolerance = ("--tolerance", str(rng.choice((0.15, 0.01, 0.5, 0.99))))
        # the failure modes' catches model the design 7 more times: a tenth of the cases
        return tolerance + (() if rng.random() < 0.1 else ("--no-catches",)), ""
    if verb == "check-nccl":
        binary = rng.choice(sorted(_BINARIES))
        ranks = n_gpus if rng.random() < 0.7 else _log_int(rng, 2, max_gpus)
        args: tuple[str, ...] = ("{LOG}",)
        if rng.random() < 0.2:
            args += ("--op", _BINARIES[binary])
        if rng.random() < 0.2:
            args += ("--tolerance", str(rng.choice((0.05, 0.5))))
        return args, _nccl_log(rng, binary, max(2, ranks))
    if verb == "report":
        return ("--out", "{OUT}"), ""
    return (), ""  # step


def random_case(
    rng: random.Random, verb: str | None = None, max_gpus: int | None = None
) -> FuzzCase:
    """Draw one case: ``verb`` (or one by :data:`VERB_WEIGHTS`) on random overrides.

    ``max_gpus`` caps ``cluster.n_gpus`` below the verb's :data:`VERB_MAX_GPUS`.
    """
    if verb is None:
        verbs = sorted(VERB_WEIGHTS)
        verb = rng.choices(verbs, weights=[VERB_WEIGHTS[v] for v in verbs])[0]
    cap = min(VERB_MAX_GPUS[verb], max_gpus or VERB_MAX_GPUS[verb])
    preset = rng.choice(_PRESETS)
    base = load_preset(preset)
    keep = base.cluster.n_gpus <= cap and rng.random() < KEEP_PRESET_DESIGN_CHANCE
    overrides = random_overrides(rng, cap, base if keep else None)
    drawn = overrides.get("cluster.n_gpus", base.cluster.n_gpus)
    n_gpus = drawn if isinstance(drawn, int) else 8
    args, log_text = _verb_args(rng, verb, max(2, min(n_gpus, cap)), cap)
    items = tuple((k, _fmt(v)) for k, v in overrides.items())
    return FuzzCase(verb, args, preset, items, log_text)


# ------------------------------------------------------------------------------ running


def _numbers(value: Any, path: str, feasible: bool) -> Iterator[tuple[str, float, bool]]:
    """Yield ``(json_path, number, nan_allowed)`` for every number in a JSON document."""
    if isinstance(value, dict):
        here = feasible and value.get("feasible", True) is not False
        for k, v in value.items():
            yield from _numbers(v, f"{path}.{k}", here)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _numbers(v, f"{path}[{i}]", feasible)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield path, float(value), not feasible


def check_outcome(status: int | None, stdout: str, stderr: str) -> tuple[str, ...]:
    """List what breaks the contract in a verb's exit status and output (empty: none)."""
    problems = []
    if status not in (0, 2):
        problems.append(f"exit status {status} (expected 0 or 2)")
    if status == 2:
        lines = stderr.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("error: "):
            problems.append(f"a refusal must be one line 'error: ...' on stderr, got {stderr!r}")
    if stdout.strip():
        try:
            doc = json.loads(stdout)
        except ValueError as exc:
            return (*problems, f"stdout is not JSON ({exc}): {stdout[:200]!r}")
        for where, number, nan_ok in _numbers(doc, "$", True):
            if math.isinf(number) or (math.isnan(number) and not nan_ok):
                problems.append(f"{where} = {number} (must be finite)")
            elif number < 0 and where.rsplit(".", 1)[-1].endswith(_NON_NEGATIVE):
                problems.append(f"{where} = {number} (must not be negative)")
    elif status == 0:
        problems.append("exit 0 without output")
    return tuple(problems)


def run_case(case: FuzzCase, workdir: Path) -> Outcome:
    """Run ``case`` through the CLI's ``main`` in-process and judge the outcome.

    The generated log and the report go to ``workdir``.
    """
    log_path = workdir / "nccl.log"
    if case.log_text:
        log_path.write_text(case.log_text, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status: int | None = main(case.argv(str(log_path), str(workdir / "report.html")))
    except SystemExit as exc:  # argparse refusing an argument
        status = exc.code if isinstance(exc.code, int) else 2
    except Exception:  # any escape is the crash being looked for
        return Outcome(None, out.getvalue(), err.getvalue(), crash=traceback.format_exc())
    return Outcome(
        status,
        out.getvalue(),
        err.getvalue(),
        problems=check_outcome(status, out.getvalue(), err.getvalue()),
    )


def describe_failure(case: FuzzCase, outcome: Outcome, workdir: Path) -> str:
    """The reproducing command and the last lines of the traceback or the problems."""
    lines = [case.command(str(workdir / "nccl.log"))]
    if case.log_text:
        lines.append(f"(LOG: {workdir / 'nccl.log'})")
    if outcome.crash:
        lines += outcome.crash.strip().splitlines()[-6:]
    lines += list(outcome.problems)
    return "\n".join(lines)
