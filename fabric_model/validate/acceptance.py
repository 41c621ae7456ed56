"""Acceptance expectations: what a healthy fabric of this design shows in nccl-tests.

For its scopes (one server; one whole NVLink domain when it spans several servers, an NVL72
rack over MNNVL, as operators accept a rack; one rail group = one scalable unit of servers
sharing their leaves; the whole cluster), three collectives (all-reduce, all-gather,
all-to-all) and three sizes (8 KiB latency-bound, 64 MiB, 8 GiB bandwidth-bound) the model
gives the expected nccl-tests bus bandwidth with NCCL's own algorithm choice, and a band
around it. The band's floor uses the worst ECMP seed when the routing hashes. The table
downloads as CSV and as a bash script that runs nccl-tests and fails a run below the floor.

The script also sets ``NCCL_TESTS_MIN_BW`` so nccl-tests fails the run itself: nccl-tests
(``src/common.cu``, 2.19.6) exits non-zero when the "Avg bus bandwidth" of the run, the mean
busbw over every size and both out-of-place and in-place, is below ``0.9 x
NCCL_TESTS_MIN_BW``. Each check runs one size (``-b S -e S``), so that mean is the size's
busbw and ``NCCL_TESTS_MIN_BW = floor / 0.9`` fails exactly below the floor.
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass
from typing import Any

from fabric_model import __version__
from fabric_model.collectives import (
    CollectiveTime,
    FabricContext,
    algo_models,
    nccl_constants,
    times_from_models,
)
from fabric_model.collectives.failure_modes import checkable_modes, misconfigured
from fabric_model.errors import FabricModelError
from fabric_model.plant.design import build_topology
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.units import format_size_bytes

__all__ = [
    "ACCEPTANCE_OPS",
    "ACCEPTANCE_SIZES",
    "DOMAIN_SCOPE",
    "NCCL_TESTS_BINARY",
    "NCCL_TESTS_MIN_BW_SLACK",
    "AcceptanceRow",
    "AcceptanceTable",
    "FailureCatch",
    "acceptance_expectations",
]

ACCEPTANCE_SIZES = (8 * 2**10, 64 * 2**20, 8 * 2**30)
#: nccl-tests fails a run whose average busbw is below this fraction of NCCL_TESTS_MIN_BW
#: (``bw[0] < check_avg_bw*(0.9)`` in NVIDIA/nccl-tests src/common.cu, 2.19.6).
NCCL_TESTS_MIN_BW_SLACK = 0.9
ACCEPTANCE_OPS = ("allreduce", "allgather", "alltoall")
NCCL_TESTS_BINARY = {
    "allreduce": "all_reduce_perf",
    "allgather": "all_gather_perf",
    "reducescatter": "reduce_scatter_perf",
    "alltoall": "alltoall_perf",
}


@dataclass(frozen=True)
class AcceptanceRow:
    """One expected nccl-tests result."""

    scope: str
    n_gpus: int
    op: str
    size_bytes: int
    expected_busbw_GBps: float
    min_busbw_GBps: float
    max_busbw_GBps: float
    expected_time_us: float
    algo: str


@dataclass(frozen=True)
class FailureCatch:
    """Which floors a failure mode (``assets/failure_modes.yaml``) falls below.

    Attributes
    ----------
    key, label, check : str
        The failure mode and the setting to check when it is caught.
    caught : tuple[tuple[AcceptanceRow, float], ...]
        Each row whose floor the misconfigured design's busbw falls below, with that busbw
        (GB/s), worst first.
    worst_ratio : float
        The misconfigured busbw over the healthy expectation at the row it hurts most.
    """

    key: str
    label: str
    check: str
    caught: tuple[tuple[AcceptanceRow, float], ...]
    worst_ratio: float

    def describe(self) -> str:
        """One line: the floors that catch it, or how close it stays to them."""
        if not self.caught:
            return (
                f"{self.label}: no floor catches it (at worst {self.worst_ratio:.0%} of the "
                f"expected busbw, inside the band)"
            )
        row, bw = self.caught[0]
        more = f" and {len(self.caught) - 1} more" if len(self.caught) > 1 else ""
        return (
            f"{self.label}: caught by {row.scope} {row.op} {format_size_bytes(row.size_bytes)} "
            f"({bw:.1f} GB/s < floor {row.min_busbw_GBps:.1f}){more}"
        )


@dataclass(frozen=True)
class AcceptanceTable:
    """The expectations for one design, with what could not be modelled.

    ``catches`` says, per failure mode that applies to the design, which floors it falls
    below (the same scopes, collectives and sizes modelled with its keys).
    """

    scenario_name: str
    tolerance: float
    rows: tuple[AcceptanceRow, ...]
    skipped: tuple[str, ...]
    catches: tuple[FailureCatch, ...] = ()

    def to_frame(self) -> Any:
        """One row per expectation (pandas DataFrame)."""
        import pandas as pd

        return pd.DataFrame([asdict(r) for r in self.rows])

    def to_csv(self) -> str:
        """Return the table as CSV text."""
        return str(self.to_frame().to_csv(index=False))

    def to_shell_script(self) -> str:
        """Return a bash script that runs nccl-tests and checks each floor.

        Environment: ``NCCL_TESTS`` (the nccl-tests build directory, default ``./build``),
        ``MPIRUN`` (the launcher, default ``mpirun``; add a hostfile there) and ``JSON_DIR``
        (optional: each run also writes nccl-tests' ``-J`` JSON file there, 2.17.3 and
        later). The out-of-place bus bandwidth is column 8 of nccl-tests' (2.13 and later)
        result rows; each run also gets ``NCCL_TESTS_MIN_BW = floor / 0.9``, so nccl-tests'
        own check (its average busbw below ``0.9 x NCCL_TESTS_MIN_BW``) fails at the floor.
        """
        lines = [
            "#!/usr/bin/env bash",
            f"# nccl-tests acceptance run for scenario {self.scenario_name!r}: floors are the",
            f"# fabric model's expected bus bandwidth minus {self.tolerance:.0%} (fabric_model "
            f"{__version__}, {nccl_constants()['version']}).",
            "# Usage: NCCL_TESTS=/path/to/nccl-tests/build MPIRUN='mpirun --hostfile hosts' "
            "bash acceptance.sh",
            "# Each run gets NCCL_TESTS_MIN_BW = floor / 0.9: nccl-tests exits non-zero when its",
            "# 'Avg bus bandwidth' (here the one size's out-of-place and in-place mean) is below",
            "# 0.9 x NCCL_TESTS_MIN_BW (src/common.cu). Open MPI forwards it with",
            "# MPIRUN='mpirun -x NCCL_TESTS_MIN_BW ...'; srun passes the environment.",
            "# JSON_DIR=dir keeps each run's -J JSON file (nccl-tests 2.17.3+) for check-nccl.",
            "set -u",
            'NCCL_TESTS="${NCCL_TESTS:-./build}"',
            'MPIRUN="${MPIRUN:-mpirun}"',
            'JSON_DIR="${JSON_DIR:-}"',
            "failed=0",
            "check() {  # scope ranks binary bytes floor expected min_bw",
            "  local out bw rc json=()",
            '  if [ -n "$JSON_DIR" ]; then json=(-J "$JSON_DIR/$1-$3-$4.json"); fi',
            '  out=$(NCCL_TESTS_MIN_BW="$7" $MPIRUN -np "$2" "$NCCL_TESTS/$3" -b "$4" -e "$4" '
            '-g 1 -n 20 -w 5 ${json[@]+"${json[@]}"} 2>&1)',
            "  rc=$?",
            "  bw=$(printf '%s\\n' \"$out\" | awk -v s=\"$4\" '$1 == s {print $8; exit}')",
            '  if [ -z "$bw" ]; then echo "ERROR $1 $3 $4 B: no result row (exit $rc)"; '
            "failed=1; return; fi",
            '  if awk -v a="$bw" -v b="$5" \'BEGIN {exit !(a + 0 >= b + 0)}\'; then',
            '    if [ "$rc" -ne 0 ]; then',
            '      echo "FAIL  $1 $3 $4 B: busbw $bw GB/s, but nccl-tests exited $rc (its '
            'NCCL_TESTS_MIN_BW=$7 check, or a failed run)"; failed=1; return',
            "    fi",
            '    echo "ok    $1 $3 $4 B: busbw $bw GB/s (expected $6, floor $5)"',
            "  else",
            '    echo "BELOW $1 $3 $4 B: busbw $bw GB/s (expected $6, floor $5)"; failed=1',
            "  fi",
            "}",
        ]
        for r in self.rows:
            args = [
                r.scope.replace(" ", "-"),
                str(r.n_gpus),
                NCCL_TESTS_BINARY[r.op],
                str(r.size_bytes),
                f"{r.min_busbw_GBps:.2f}",
                f"{r.expected_busbw_GBps:.2f}",
                f"{r.min_busbw_GBps / NCCL_TESTS_MIN_BW_SLACK:.4f}",
            ]
            lines.append("check " + " ".join(shlex.quote(a) for a in args))
        lines += [
            'if [ "$failed" -ne 0 ]; then echo "acceptance: FAILED"; exit 1; fi',
            'echo "acceptance: all results at or above their floors"',
        ]
        return "\n".join(lines) + "\n"


#: The scope of one whole NVLink domain that spans several servers (an NVL72 rack over
#: MNNVL): what operators accept a rack with before they cable it into the fabric.
DOMAIN_SCOPE = "one NVLink domain"


def _scopes(scenario: Scenario, notes: list[str]) -> list[tuple[str, int]]:
    c = scenario.cluster
    scopes = [("one node", min(c.gpus_per_node, c.n_gpus))]
    topo = build_topology(scenario)  # an impossible design raises here, with its key
    if c.gpus_per_node < c.nvlink_domain <= c.n_gpus:
        # MNNVL: the rack's trays share one NVLink domain; all-reduce, all-gather and
        # all-to-all of the whole domain run on NVLink (and NVLS) alone
        scopes.append((DOMAIN_SCOPE, c.nvlink_domain))
    down = int(topo.params.get("down_per_leaf", 0) or 0)
    if down and topo.request.rail_optimized:
        group = down * c.gpus_per_node  # a scalable unit: every rail of `down` servers
        if scopes[-1][1] < group < c.n_gpus:
            scopes.append(("one rail group", group))
    else:
        notes.append("one rail group: only rail-optimized designs with leaf switches have one")
    if c.n_gpus > scopes[-1][1]:
        scopes.append(("whole cluster", c.n_gpus))
    return [s for s in scopes if s[1] >= 2]


def acceptance_expectations(
    scenario: Scenario, tolerance: float = 0.15, *, catches: bool = False
) -> AcceptanceTable:
    """Tabulate what nccl-tests should show on a healthy fabric of this design, with a band.

    With ``catches``, each failure mode that applies to the design is modelled at the same
    scopes, collectives and sizes, and the floors it falls below are listed
    (:class:`FailureCatch`).

    Raises
    ------
    FabricModelError
        If the tolerance is not between 0 and 1, or the design cannot be built.
    """
    if not 0 < tolerance < 1:
        raise FabricModelError(f"tolerance = {tolerance}: must be between 0 and 1")
    rows: list[AcceptanceRow] = []
    skipped: list[str] = []
    for scope, n in _scopes(scenario, skipped):
        s = apply_overrides(scenario, {"cluster.n_gpus": n})
        for op, results in _curves(s, ACCEPTANCE_OPS, ACCEPTANCE_SIZES).items():
            if isinstance(results, FabricModelError):
                skipped.append(f"{scope} {op}: {results}")
                continue
            for r in results:
                rows.append(
                    AcceptanceRow(
                        scope=scope,
                        n_gpus=n,
                        op=op,
                        size_bytes=r.size_bytes,
                        expected_busbw_GBps=round(r.busbw_GBps, 2),
                        min_busbw_GBps=round(r.busbw_min_GBps * (1 - tolerance), 2),
                        max_busbw_GBps=round(r.busbw_max_GBps * (1 + tolerance), 2),
                        expected_time_us=round(r.time_us, 1),
                        algo=f"{r.algo}/{r.proto}",
                    )
                )
    found = _catches(scenario, rows) if catches else ()
    return AcceptanceTable(scenario.name, tolerance, tuple(rows), tuple(skipped), found)


def _curves(
    scenario: Scenario, ops: tuple[str, ...], sizes: tuple[int, ...]
) -> dict[str, list[CollectiveTime] | FabricModelError]:
    """Each op's NCCL-like curve at ``sizes`` on one built fabric (or why it cannot run)."""
    try:
        ctx = FabricContext.from_scenario(scenario)
    except FabricModelError as exc:
        return dict.fromkeys(ops, exc)
    out: dict[str, list[CollectiveTime] | FabricModelError] = {}
    for op in ops:
        try:
            out[op] = times_from_models(algo_models(ctx, op, "auto"), list(sizes), "auto")
        except FabricModelError as exc:
            out[op] = exc
    return out


def _catches(scenario: Scenario, rows: list[AcceptanceRow]) -> tuple[FailureCatch, ...]:
    """Model each applicable failure mode at the rows' scopes; list the floors it breaks."""
    by_scope: dict[tuple[str, int, str], list[AcceptanceRow]] = {}
    for r in rows:
        by_scope.setdefault((r.scope, r.n_gpus, r.op), []).append(r)
    out = []
    for mode in checkable_modes():
        bad = misconfigured(scenario, mode)
        if bad is None:
            continue
        caught: list[tuple[AcceptanceRow, float]] = []
        worst = 1.0
        scopes: dict[int, dict[str, Any]] = {}
        for (_, n, op), group in by_scope.items():
            if n not in scopes:  # one fabric per scope for the three collectives
                try:
                    s = apply_overrides(bad, {"cluster.n_gpus": n})
                except FabricModelError:
                    continue
                scopes[n] = _curves(s, ACCEPTANCE_OPS, ACCEPTANCE_SIZES)
            got = scopes[n].get(op)
            if not isinstance(got, list):
                continue
            at = {g.size_bytes: g for g in got}
            for r in group:
                g = at[r.size_bytes]
                if g.time_us > 0:  # busbw ratio = time ratio (rounded busbw would blur it)
                    worst = min(worst, r.expected_time_us / g.time_us)
                # as the script compares nccl-tests' two-decimal busbw with the floor
                if round(g.busbw_GBps, 2) < r.min_busbw_GBps:
                    caught.append((r, g.busbw_GBps))
        caught.sort(key=lambda rb: rb[1] / max(rb[0].min_busbw_GBps, 1e-12))
        out.append(FailureCatch(mode.id, mode.label, mode.check, tuple(caught), worst))
    return tuple(out)


def describe(row: AcceptanceRow) -> str:
    """One line for a row, as the CLI prints it."""
    return (
        f"{row.scope} ({row.n_gpus:,} GPUs) {row.op} {format_size_bytes(row.size_bytes)}: "
        f"{row.expected_busbw_GBps:.1f} GB/s [{row.min_busbw_GBps:.1f}, "
        f"{row.max_busbw_GBps:.1f}]"
    )
