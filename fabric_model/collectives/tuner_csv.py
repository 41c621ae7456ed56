"""The model's ``auto`` choice as the CSV NCCL's example tuner plugin reads.

NVIDIA/nccl ``plugins/tuner/example`` (``plugin.c``, ``README.md``, ``nccl_tuner.conf``; read at
5067397c) loads ``NCCL_TUNER_CONFIG_FILE`` (default ``nccl_tuner.conf``), one configuration per
line::

    collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff

``#`` lines and empty lines are skipped; fields are split on commas and trimmed; 8 to 10
fields. ``collective_type`` is ``broadcast``, ``reduce``, ``allgather``, ``reducescatter`` or
``allreduce`` (any other name is read as ``allreduce``, so all-to-all, point-to-point in NCCL,
is never written); ``algorithm`` one of ``tree``, ``ring``, ``collnet_direct``,
``collnet_chain``, ``nvls``, ``nvls_tree``, ``pat``; ``protocol`` ``ll``, ``ll128`` or
``simple``. ``pluginGetCollInfo`` takes the first line whose collective matches, with
``min_bytes <= nBytes <= max_bytes`` and ``nNodes`` / ``nRanks`` / ``numPipeOps`` / ``regBuff``
equal or ``-1``, and sets that (algorithm, protocol)'s cost to 0. Its channel count starts at
1 and a row's ``-1`` keeps it, so every row here names the model's channel count.

NCCL's ``nNodes`` counts the communicator's intra-node rings (``init.cc``, "Determine nNodes":
one per distinct ``ringRecv[0]``), which span a whole multi-node NVLink domain (MNNVL): the
file's ``nNodes`` is the job's NVLink domains.

The model's choice is evaluated at every power of two from 1 B to 16 GiB; the row of size
``2^k`` covers ``[2^k, 2^(k+1) - 1]`` (the first from 0, the last to the largest ``size_t``),
and neighbouring sizes with the same choice share one row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fabric_model.collectives import algo_models, times_from_models
from fabric_model.collectives.context import FabricContext
from fabric_model.collectives.model import AlgorithmUnavailableError
from fabric_model.collectives.terms import ring_channels
from fabric_model.collectives.versions import max_ctas
from fabric_model.scenario import Scenario

__all__ = [
    "MAX_BYTES",
    "TUNER_ALGORITHMS",
    "TUNER_COLLECTIVES",
    "TUNER_PROTOCOLS",
    "TUNER_SIZES",
    "TunerRow",
    "tuner_csv",
    "tuner_rows",
]

#: The plugin's collective names the model runs (it has no broadcast or reduce).
TUNER_COLLECTIVES: tuple[str, ...] = ("allreduce", "allgather", "reducescatter")
#: The model's algorithm (as ``CollectiveTime.algo`` reports it) -> the plugin's name.
TUNER_ALGORITHMS: dict[str, str] = {
    "ring": "ring",
    "tree": "tree",
    "nvls": "nvls",
    "nvls-tree": "nvls_tree",
    "sharp": "collnet_direct",
    "nvls-sharp": "nvls",
    "pat": "pat",
}
#: The model's protocol -> the plugin's name.
TUNER_PROTOCOLS: dict[str, str] = {"LL": "ll", "LL128": "ll128", "Simple": "simple"}
#: Sizes the choice is evaluated at, bytes (powers of two, 1 B to 16 GiB).
TUNER_SIZES: tuple[int, ...] = tuple(2**k for k in range(35))
#: The open upper end of the last row (``size_t``'s largest value; ``strtoull`` reads it).
MAX_BYTES = 2**64 - 1

HEADER = (
    "collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,"
    "numPipeOps,regBuff"
)


@dataclass(frozen=True)
class TunerRow:
    """One line of the tuner CSV."""

    collective: str
    min_bytes: int
    max_bytes: int
    algorithm: str
    protocol: str
    channels: int
    n_nodes: int
    n_ranks: int
    num_pipe_ops: int
    reg_buff: int

    def line(self) -> str:
        """Return the CSV line (10 fields, as ``plugin.c`` parses them)."""
        return ",".join(
            str(v)
            for v in (
                self.collective,
                self.min_bytes,
                self.max_bytes,
                self.algorithm,
                self.protocol,
                self.channels,
                self.n_nodes,
                self.n_ranks,
                self.num_pipe_ops,
                self.reg_buff,
            )
        )


def tuner_rows(
    ctx: FabricContext, sizes: Sequence[int] = TUNER_SIZES
) -> tuple[list[TunerRow], list[str]]:
    """Return the rows of the model's ``auto`` choice per collective, and notes.

    Sizes where ``auto`` runs something the tuner does not choose (NCCL's symmetric kernels on
    registered buffers bypass its table) and collectives no algorithm runs get no row; the
    notes say which.
    """
    s = ctx.scenario
    channels = min(ring_channels(ctx), max_ctas(s.nccl.version, ctx.arch))
    reg = 1 if s.nccl.registered_buffers else 0
    rows: list[TunerRow] = []
    notes: list[str] = []
    for op in TUNER_COLLECTIVES:
        try:
            models = algo_models(ctx, op, "auto")
        except AlgorithmUnavailableError as exc:
            notes.append(f"{op}: no row ({exc})")
            continue
        times = times_from_models(models, list(sizes), "auto")
        skipped = 0
        for i, t in enumerate(times):
            algo = TUNER_ALGORITHMS.get(t.algo)
            if algo is None:
                skipped += 1
                continue
            lo = 0 if i == 0 else sizes[i]
            hi = MAX_BYTES if i == len(sizes) - 1 else sizes[i + 1] - 1
            row = TunerRow(
                op,
                lo,
                hi,
                algo,
                TUNER_PROTOCOLS[t.proto],
                channels,
                ctx.n_domains,
                ctx.n_ranks,
                -1,
                reg,
            )
            last = rows[-1] if rows else None
            if (
                last is not None
                and last.collective == op
                and last.max_bytes == lo - 1
                and (last.algorithm, last.protocol) == (row.algorithm, row.protocol)
            ):
                rows[-1] = TunerRow(**{**last.__dict__, "max_bytes": hi})
            else:
                rows.append(row)
        if skipped:
            notes.append(
                f"{op}: {skipped} of {len(sizes)} sizes run NCCL's symmetric-memory kernels "
                f"or copy engines, which do not read the tuner's table (no row)"
            )
    return rows, notes


def tuner_csv(scenario: Scenario) -> tuple[str, int, tuple[str, ...]]:
    """Write the tuner CSV of ``scenario``: ``(text, rows, notes)``."""
    ctx = FabricContext.from_scenario(scenario)
    rows, notes = tuner_rows(ctx)
    c = scenario.cluster
    head = [
        "# NCCL example tuner plugin config (NVIDIA/nccl plugins/tuner/example), written by "
        "fabric_model from its NCCL-like auto choice",
        f"# scenario: {scenario.name}; {c.n_gpus:,} x {c.gpu}, {ctx.n_domains:,} NVLink "
        f"domain(s) of {ctx.physical_domain}; {scenario.fabric.vendor} "
        f"{scenario.fabric.link_gbps}G {scenario.fabric.topology}; nccl.version "
        f"{scenario.nccl.version}",
        "# load with NCCL_TUNER_PLUGIN=<path to libnccl-tuner-example.so> "
        "NCCL_TUNER_CONFIG_FILE=<this file>",
        "# channels: the model's ring channel count (two per NIC leaving a domain), at most the "
        "release's CTA cap; the plugin keeps 1 channel for a row's -1, so none is written",
        f"# Format: {HEADER}",
    ]
    head += [f"# note: {n}" for n in notes]
    text = "\n".join([*head, *(r.line() for r in rows)]) + "\n"
    return text, len(rows), tuple(notes)
