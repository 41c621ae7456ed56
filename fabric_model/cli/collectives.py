"""The ``collective`` verb: time of one collective per message size."""

from __future__ import annotations

import argparse
from typing import Any

from fabric_model.cli.registry import _emit, format_table, scenario_from_args, verb
from fabric_model.errors import FabricModelError


def _collective_args(p: argparse.ArgumentParser) -> None:
    from fabric_model.collectives import ALGOS, OPS

    p.add_argument("--op", default="allreduce", choices=OPS, help="collective (default allreduce)")
    p.add_argument(
        "--algo",
        default="auto",
        choices=ALGOS,
        help="algorithm; auto = NCCL-like choice per size (default)",
    )
    p.add_argument(
        "--sizes",
        default="8,1K,64K,1M,16M,256M,1G,4G",
        metavar="LIST",
        help="message sizes, binary suffixes as nccl-tests (default %(default)s)",
    )
    p.add_argument(
        "--breakdown",
        action="store_true",
        help="also show the latency and bandwidth terms and the bottleneck link class",
    )
    p.add_argument(
        "--links",
        type=int,
        default=0,
        metavar="N",
        help="also list the N busiest links of the largest size's algorithm (utilisation, "
        "class, tier; from its full flow solve)",
    )


def _parse_sizes(text: str) -> list[int]:
    from fabric_model.units import parse_size_bytes

    sizes = []
    for item in text.split(","):
        try:
            sizes.append(parse_size_bytes(item))
        except ValueError as exc:
            raise FabricModelError(f"--sizes: {exc}") from None
    if not sizes or max(sizes) > 2**40:
        raise FabricModelError("--sizes: give 1 to many sizes from 0 to 1T, e.g. 8,1K,1M,1G")
    return sizes


def _incast_notes(models: Any, rows: Any) -> list[str]:
    """One line per algorithm row whose transport slows its incast: the mechanism, in words.

    The largest size each such algorithm is chosen for; empty without an incast.
    """
    out, seen = [], set()
    for r in sorted(rows, key=lambda r: -r.size_bytes):
        m = next((m for m in models if m.algo == r.algo), None)
        if m is None or m.incast is None or r.algo in seen or r.transport_efficiency >= 1.0:
            continue
        seen.add(r.algo)
        out.append(f"{r.algo}: " + m.incast.describe(r.size_bytes * m.incast_port_bytes))
    return out


@verb(
    "collective",
    "time of one collective across cluster.n_gpus ranks per message size (nccl-tests-style table)",
    add_arguments=_collective_args,
)
def _collective(args: argparse.Namespace) -> int:
    from fabric_model.collectives import (
        FabricContext,
        algo_models,
        times_from_models,
        with_tails,
    )
    from fabric_model.collectives.model import AlgorithmUnavailableError
    from fabric_model.units import format_size_bytes

    scenario = scenario_from_args(args)
    ctx = FabricContext.from_scenario(scenario)
    models = algo_models(ctx, args.op, args.algo)
    if not models:
        raise AlgorithmUnavailableError(f"no algorithm can run {args.op} on this design")
    if not 0 <= args.links <= 10_000:
        raise FabricModelError(f"--links = {args.links}: must be 0 (off) to 10,000")
    rows = times_from_models(models, _parse_sizes(args.sizes), args.algo)
    tails = scenario.tails.enabled
    if tails:  # p50 / p99 over iterations (tails.*): ECMP draws and the slowest rank's launch
        rows = [with_tails(r, scenario.tails) for r in rows]
    payload: Any = [r.to_dict() for r in rows]
    links: list[dict[str, Any]] = []
    link_algo = ""
    if args.links:
        big = max(rows, key=lambda r: r.size_bytes)
        chosen = next(m for m in models if m.algo == big.algo)
        link_algo = big.algo
        if chosen.pattern is not None:
            src, dst, demand = chosen.pattern
            links = ctx.busiest_links(src, dst, demand, args.links)
        payload = {"rows": payload, "links": links, "links_algo": link_algo}
    table = []
    for r in rows:
        row: dict[str, Any] = {
            "size": format_size_bytes(r.size_bytes),
            "bytes": r.size_bytes,
            "time_us": round(r.time_us, 2),
            **(
                {"p50_us": round(r.time_us_p50, 2), "p99_us": round(r.time_us_p99, 2)}
                if tails
                else {}
            ),
            "algbw_GBps": round(r.algbw_GBps, 2),
            "busbw_GBps": round(r.busbw_GBps, 2),
            "algo": r.algo,
            "proto": r.proto,
            "regime": r.regime,
            "ceiling": r.ceiling,
            "pct_of_ceiling": "-" if r.pct_of_ceiling is None else round(r.pct_of_ceiling, 1),
        }
        if args.breakdown:
            row.update(
                latency_us=round(r.latency_us, 2),
                bandwidth_us=round(r.bandwidth_us, 2),
                busbw_range=f"{r.busbw_min_GBps:.1f}-{r.busbw_max_GBps:.1f}",
                bottleneck=r.bottleneck,
                fastest_on_fabric=(
                    "(this one)"
                    if (r.fastest_algo, r.fastest_proto) == (r.algo, r.proto)
                    else f"{r.fastest_algo}/{r.fastest_proto} {r.fastest_time_us:,.0f} us"
                ),
            )
        table.append(row)
    head = (
        f"# {args.op} across {ctx.n_ranks:,} GPUs, {scenario.fabric.topology}"
        + (
            f" (hybrid.job = {scenario.hybrid.job}: {ctx.topology.family})"
            if scenario.fabric.topology == "hybrid"
            else ""
        )
        + ", "
        f"{scenario.fabric.vendor} {scenario.fabric.link_gbps}G, algo {args.algo}\n"
        + "".join(f"# {note}\n" for note in ctx.notes())
        + "".join(f"# transport: {note}\n" for note in _incast_notes(models, rows))
        + (
            "# algo/proto: what NCCL's tuner picks from its own table (tuning.cc);"
            " fastest_on_fabric: the candidate this fabric runs fastest\n"
            if args.breakdown
            else ""
        )
    )
    text = head + format_table(table)
    if args.links:
        if links:
            text += (
                f"\n# the {len(links)} busiest links of {link_algo} (full flow solve; "
                "utilisation = load / capacity)\n"
                + format_table(
                    [
                        {
                            "link": x["link"],
                            "class": x["class"],
                            "tier": x["tier"],
                            "utilisation": f"{x['utilisation']:.1%}",
                            "load_GBps": round(x["load_GBps"], 2),
                            "capacity_GBps": round(x["capacity_GBps"], 2),
                            "flows": x["flows"],
                            "frozen_flows": x["frozen_flows"],
                        }
                        for x in links
                    ]
                )
            )
        else:
            text += (
                f"\n# {link_algo}: no network links to list (the pattern stays on NVLink, "
                "or is solved by flow classes without per-link loads)\n"
            )
    _emit(args, payload, text)
    return 0
