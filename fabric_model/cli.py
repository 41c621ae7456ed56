"""Command line: ``python -m fabric_model <verb> [--scenario FILE] [--preset NAME] [--set K=V]``.

Every verb also takes ``--json``.

Bad input exits with status 2 and one line on stderr naming the key and what is allowed;
never a traceback. Each verb is a function registered in :data:`VERBS`, so new verbs slot in.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NoReturn

from fabric_model import __version__
from fabric_model.errors import FabricModelError
from fabric_model.presets import DEFAULT_PRESET, list_presets, load_preset
from fabric_model.scenario import (
    Scenario,
    apply_overrides,
    iter_field_specs,
    load_scenario,
    parse_assignment,
)

__all__ = ["VERBS", "Verb", "format_table", "main", "scenario_from_args"]

EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and exit 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"error: {message} (see `{self.prog} --help`)\n")
        sys.exit(EXIT_BAD_INPUT)


@dataclass(frozen=True)
class Verb:
    """A CLI verb: its help, how to add its own arguments, and what it runs."""

    help: str
    run: Callable[[argparse.Namespace], int]
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None
    takes_scenario: bool = True


VERBS: dict[str, Verb] = {}


def verb(
    name: str,
    help: str,
    *,
    takes_scenario: bool = True,
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    """Register a verb function under ``name``."""

    def wrap(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        VERBS[name] = Verb(help, fn, add_arguments, takes_scenario)
        return fn

    return wrap


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def scenario_from_args(args: argparse.Namespace) -> Scenario:
    """Build the scenario: ``--preset`` or ``--scenario`` (else the default), then ``--set``.

    Raises
    ------
    FabricModelError
        For any bad input, with the key named.
    """
    if args.scenario and args.preset:
        raise FabricModelError("use either --scenario or --preset, not both")
    if args.scenario:
        base = load_scenario(args.scenario)
    else:
        base = load_preset(args.preset or DEFAULT_PRESET)
    overrides = dict(parse_assignment(item) for item in args.set or [])
    return apply_overrides(base, overrides) if overrides else base


def _fmt_cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> str:
    """Format dict rows as an aligned text table (numbers right-aligned)."""
    if not rows:
        return "(no rows)"
    cols = list(columns or rows[0].keys())
    cells = [[_fmt_cell(r.get(c, "")) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    numeric = [all(isinstance(r.get(c), (int, float)) for r in rows) for c in cols]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ).rstrip()

    return "\n".join([line(cols), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def _emit(args: argparse.Namespace, payload: Any, text: str) -> None:
    if args.json:
        print(json.dumps(payload, indent=2, default=str))
    else:
        print(text)


# --------------------------------------------------------------------------------------
# verbs
# --------------------------------------------------------------------------------------


@verb("presets", "list the presets", takes_scenario=False)
def _presets(args: argparse.Namespace) -> int:
    rows = [{"name": p.name, "description": p.description} for p in list_presets()]
    _emit(args, rows, format_table(rows))
    return 0


@verb(
    "compat",
    "which NVLink domain sizes, NICs and link speeds each GPU of the catalog can have",
    takes_scenario=False,
)
def _compat(args: argparse.Namespace) -> int:
    from fabric_model.catalog import compatibility, load_catalog

    rows = compatibility(load_catalog())
    table = [
        {
            "gpu": r["gpu"] + (" (announced)" if r["announced"] else ""),
            "server": r["server"],
            "nvlink_domain": r["nvlink_domains"],
            "host_link_GBps": r["host_link_GBps"],
            "link_gbps": ", ".join(map(str, r["link_gbps"])),
            "nics (speeds its host link feeds)": "; ".join(
                f"{k} {'/'.join(map(str, v))}" for k, v in r["nics"].items()
            ),
        }
        for r in rows
    ]
    _emit(args, rows, format_table(table))
    return 0


@verb(
    "keys",
    "list every scenario key with its default, allowed values and meaning",
    takes_scenario=False,
)
def _keys(args: argparse.Namespace) -> int:
    rows = [
        {"key": key, "default": default, "allowed": spec.allowed(), "help": spec.help}
        for key, spec, default in iter_field_specs()
    ]
    text = "\n".join(
        f"{r['key']:<34} default "
        f"{_fmt_cell(r['default']) if r['default'] is not None else 'null':<10}"
        f" {r['allowed']}\n{'':<34} {r['help']}"
        for r in rows
    )
    _emit(args, rows, text)
    return 0


def _bom_text(bom: Any) -> str:
    d = bom.to_dict()
    switch = (
        f"{bom.hardware.switch.name} radix {d['radix']}, " if d["n_switches"] else "switchless, "
    )
    tiers = f"{d['tiers']} tiers" if d["tiers"] else "direct links"
    if d.get("planes", 1) > 1:
        tiers += f" per plane, {d['planes']} planes of {bom.topology.request.link_gbps}G"
    head = [
        f"scenario {d['scenario']}: {d['n_gpus']:,} GPUs, {d['topology']} ({tiers}), "
        f"{d['vendor']}, {switch}{bom.hardware.nic.name}",
        "switches by tier: "
        + (", ".join(f"{k} {v:,}" for k, v in d["switches_by_tier"].items()) or "none"),
        f"links {d['n_links']:,}  transceivers {d['n_transceivers']:,}  cables {d['n_cables']:,}"
        f"  NICs {d['n_nics']:,}",
        f"max switch hops {d['max_switch_hops']}  mean {d['mean_switch_hops']:.2f}  "
        f"bisection {d['bisection_GBps']:,.0f} GB/s",
        f"switch {d['switch'] or '-'} radix {d['switch_radix']}, pods of "
        f"{d['pod_nics']:,} NIC ports, limit: {d['limit']}"
        + (
            f", optics {d['optics']} ({d['n_cpo_ports']:,} co-packaged ports, "
            f"{d['n_lasers']:,.0f} laser modules)"
            if d["optics"] == "cpo"
            else ""
        ),
        *([f"note: {d['switch_choice']}"] if d["switch_choice"] else []),
        *(f"note: {n}" for n in d["notes"]),
        *(f"warning: {w}" for w in d["warnings"]),
        "",
    ]
    lines = format_table(
        [
            {
                "category": x["category"],
                "item": x["item"],
                "where": x["where"],
                "quantity": x["quantity"],
                "unit_usd": x["unit_price_usd"],
                "capex_usd": x["capex_usd"],
                "power_w": x["power_w"],
            }
            for x in d["lines"]
        ]
    )
    totals = [
        "",
        "capex USD: " + ", ".join(f"{k} {v:,.0f}" for k, v in d["capex_usd"].items()),
        "power W:   " + ", ".join(f"{k} {v:,.0f}" for k, v in d["power_w"].items()),
        f"per GPU: ${d['capex_per_gpu_usd']:,.0f}, {d['power_per_gpu_w']:.1f} W;  "
        f"compute-fabric share of cluster capex {d['network_share_of_cluster_capex']:.1%};  "
        f"TCO over {d['tco_years']:g} years ${d['tco_usd']:,.0f}",
        "(the figures above are the compute fabric's)",
    ]
    return "\n".join(head) + lines + "\n".join(totals) + _site_text(bom)


def _site_text(bom: Any) -> str:
    """Describe the other two networks and the floor plan, after the compute fabric's bill."""
    from fabric_model.plant.floorplan import halls_text, verdict_text

    out = [""]
    split = ";  ".join(
        f"{name} ${bom.capex_by_network_usd[name] / 1e6:,.2f} M, "
        f"{bom.power_by_network_w[name] / 1e3:,.1f} kW"
        for name in bom.capex_by_network_usd
    )
    out.append(f"networks: {split}")
    for net in bom.networks:
        out += ["", f"{net.name} network:"]
        out.append(
            format_table(
                [
                    {
                        "category": x.category,
                        "item": x.item,
                        "where": x.where,
                        "quantity": x.quantity,
                        "unit_usd": x.unit_price_usd,
                        "capex_usd": x.capex_usd,
                        "power_w": x.power_w,
                    }
                    for x in net.lines
                ]
            )
        )
        out += [f"note: {n}" for n in net.notes]
    plan = bom.floorplan
    if plan is None:
        return "\n".join(out)
    lay = plan.layout
    runs = ", ".join(f"{k} {v:g} m" for k, v in plan.lengths_m.items()) or "none placed"
    out += [
        "",
        f"floor plan: {lay.n_racks:,} racks ({lay.n_compute_racks:,} compute x "
        f"{lay.servers_per_rack} servers, {lay.n_network_racks:,} network) in {lay.n_rows:,} "
        f"rows of {lay.racks_per_row} compute racks; {plan.compute_rack_kw:,.1f} kW per "
        f"compute rack, {plan.network_rack_kw:,.1f} kW per network rack; "
        f"{plan.total_it_kw:,.0f} kW IT",
        f"cooling ({lay.cooling}): {verdict_text(plan)}",
        f"floor area {lay.floor_area_m2:,.0f} m2 ({halls_text(lay)}); cable lengths "
        f"(longest run per class): {runs}",
        *(f"warning: {w}" for w in plan.warnings),
        *(f"note: {n}" for n in plan.notes),
    ]
    return "\n".join(out)


def _bom_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--compare",
        action="store_true",
        help="price the same design on InfiniBand, Spectrum-X and RoCE",
    )


@verb(
    "bom",
    "bill of materials, capex, power and TCO of the scenario's fabric",
    add_arguments=_bom_args,
)
def _bom(args: argparse.Namespace) -> int:
    from fabric_model.plant.cost import bill_of_materials, compare_vendors
    from fabric_model.report.summaries import vendor_rows

    scenario = scenario_from_args(args)
    if not args.compare:
        bom = bill_of_materials(scenario)
        _emit(args, bom.to_dict(), _bom_text(bom))
        return 0
    results = compare_vendors(scenario)
    payload = [
        {"vendor": r.vendor, **(r.bom.to_dict() if r.bom else {"error": r.error})} for r in results
    ]
    rows: list[dict[str, Any]] = []
    for r, v in zip(results, vendor_rows(results), strict=True):
        if not v.ok:
            rows.append(
                {
                    "vendor": v.vendor,
                    "switch": "-",
                    "radix": "-",
                    "pod_nics": "-",
                    "n_switches": "-",
                    "tiers": "-",
                    "capex_usd": "-",
                    "per_gpu_usd": "-",
                    "power_kw": "-",
                    "note": r.error or "",
                }
            )
            continue
        rows.append(
            {
                "vendor": v.vendor,
                "switch": v.switch_key,
                "radix": v.radix,
                "pod_nics": v.pod_nics,
                "n_switches": v.n_switches,
                "tiers": v.tiers,
                "capex_usd": v.capex_usd,
                "per_gpu_usd": v.capex_per_gpu_usd,
                "power_kw": v.power_kw,
                "note": v.limit,
            }
        )
    _emit(args, payload, format_table(rows))
    return 0


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


@verb(
    "collective",
    "time of one collective across cluster.n_gpus ranks per message size (nccl-tests-style table)",
    add_arguments=_collective_args,
)
def _collective(args: argparse.Namespace) -> int:
    from fabric_model.collectives import FabricContext, algo_models, times_from_models
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


def _check_nccl_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("log", metavar="LOG", help="nccl-tests output (all_reduce_perf, ...)")
    p.add_argument("--op", default=None, help="collective, when the log does not name its binary")
    p.add_argument(
        "--tolerance",
        type=float,
        default=0.15,
        help="relative band around the model counted as expected (default 0.15)",
    )


@verb(
    "check-nccl",
    "compare an nccl-tests log with the model of the scenario that describes the cluster",
    add_arguments=_check_nccl_args,
)
def _check_nccl(args: argparse.Namespace) -> int:
    from fabric_model.units import format_size_bytes
    from fabric_model.validate.compare import compare_log
    from fabric_model.validate.nccl_log import parse_nccl_tests_file

    scenario = scenario_from_args(args)
    log = parse_nccl_tests_file(args.log) if args.op is None else _parse_with_op(args.log, args.op)
    n_gpus_set = any(parse_assignment(item)[0] == "cluster.n_gpus" for item in args.set or [])
    result = compare_log(log, scenario, tolerance=args.tolerance, n_gpus_set=n_gpus_set)
    payload = [r.to_dict() for r in result.rows]
    # nccl-tests -I 1: the median and 99th-percentile iteration, as busbw
    pct = [
        (key, name)
        for key, name in (
            ("measured_p50_busbw_GBps", "p50_GBps"),
            ("measured_p99_busbw_GBps", "p99_GBps"),
        )
        if any(getattr(r, key) is not None for r in result.rows)
    ]
    table = [
        {
            "size": format_size_bytes(r.size_bytes),
            "measured_GBps": round(r.measured_busbw_GBps, 2),
            **{name: _round_or_dash(getattr(r, key)) for key, name in pct},
            "model_GBps": round(r.model_busbw_GBps, 2),
            "ratio": round(r.ratio, 3),
            "regime": r.regime,
            "model_algo": r.model_algo,
            "verdict": r.verdict,
        }
        for r in result.rows
    ]
    head = [
        f"# {log.op} on {result.n_ranks:,} ranks (ranks: {result.n_ranks:,} from "
        f"{result.n_ranks_source}): measured (out-of-place busbw) vs model; "
        f"median ratio {result.median_ratio:.2f}"
    ]
    head += [f"# note: {n}" for n in (*result.notes, *log.warnings)]
    head += [f"# advice: {a}" for a in result.advice]
    _emit(args, payload, "\n".join(head) + "\n" + format_table(table))
    return 0


def _round_or_dash(value: float | None) -> float | str:
    return "-" if value is None else round(value, 2)


def _acceptance_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tolerance",
        type=float,
        default=0.15,
        help="band around the expected busbw (default 0.15)",
    )
    p.add_argument(
        "--script",
        metavar="FILE",
        help="also write a bash script that runs nccl-tests against the floors",
    )


@verb(
    "acceptance",
    "what a healthy fabric of this design shows in nccl-tests (one node, one "
    "rail group, the whole cluster), with a tolerance band",
    add_arguments=_acceptance_args,
)
def _acceptance(args: argparse.Namespace) -> int:
    from pathlib import Path

    from fabric_model.units import format_size_bytes
    from fabric_model.validate.acceptance import acceptance_expectations

    table = acceptance_expectations(scenario_from_args(args), args.tolerance)
    if args.script:
        try:
            Path(args.script).write_text(table.to_shell_script(), encoding="utf-8")
        except OSError as exc:
            raise FabricModelError(f"--script {args.script}: {exc.strerror or exc}") from None
    rows = [
        {
            "scope": r.scope,
            "gpus": r.n_gpus,
            "op": r.op,
            "size": format_size_bytes(r.size_bytes),
            "expected_GBps": r.expected_busbw_GBps,
            "floor_GBps": r.min_busbw_GBps,
            "ceiling_GBps": r.max_busbw_GBps,
            "time_us": r.expected_time_us,
            "algo": r.algo,
        }
        for r in table.rows
    ]
    notes = "".join(f"\n# not modelled: {s}" for s in table.skipped)
    from dataclasses import asdict

    if args.json and table.skipped:  # the JSON stays the contract's list; say what is missing
        print(notes.strip(), file=sys.stderr)
    _emit(args, [asdict(r) for r in table.rows], format_table(rows) + notes)
    return 0


def _parse_with_op(path: str, op: str) -> Any:
    from fabric_model.validate.nccl_log import parse_nccl_tests, parse_nccl_tests_file

    parse_nccl_tests_file(path)  # file checks (exists, size) with their messages
    with open(path, encoding="utf-8", errors="replace") as fh:
        return parse_nccl_tests(fh.read(), op=op)


# --------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------- training


def _step_text(d: dict[str, Any], plan_label: str, comm: Sequence[Any] = ()) -> str:
    """Describe one step: its terms, the communication per dimension (``comm``), MFU, memory.

    ``comm`` is :func:`fabric_model.report.summaries.comm_breakdown` of the step.
    """
    lines = [
        f"# one training step: {plan_label}",
        format_table(
            [
                {"term": k, "seconds": d[k]}
                for k in (
                    "step_time_s",
                    "compute_s",
                    "imbalance_s",
                    "bubble_s",
                    "offload_s",
                    "optimizer_s",
                    "stall_s",
                    "exposed_comm_s",
                    "step_time_ideal_scale_out_s",
                    "step_time_ideal_network_s",
                )
            ]
        ),
        f"scale-out fabric {d['scale_out_share_of_step']:.1%}, NVLink "
        f"{d['scale_up_share_of_step']:.1%} of the step (exposed communication "
        f"{d['network_share_of_step']:.1%}; over the scale-out network: "
        f"{', '.join(d['scale_out_dims']) or 'nothing'})",
        "",
        format_table(
            [
                {"dimension": c.dim, "comm_s": c.comm_s, "exposed_s": c.exposed_s, "how": c.detail}
                for c in comm
            ]
            or [{"dimension": "-", "comm_s": 0.0, "exposed_s": 0.0, "how": ""}]
        ),
        "",
        f"MFU {d['mfu']:.3f}"
        + (
            f" ({d['mfu_precision_peak']:.3f} of the {d['precision'].upper()} peak)"
            if d["mfu_precision_peak"] != d["mfu"]
            else ""
        )
        + f"   tokens/s {d['tokens_per_s']:,.0f}   "
        f"memory {d['memory_gib_per_gpu']:.1f} GiB per GPU ({d['memory_status']})",
    ]
    mem = d.get("memory") or {}
    if mem.get("stages"):
        lines.append(
            "memory by pipeline rank: "
            + "; ".join(
                f"rank {st['rank']} ({st['layers']} layers, {st['micro_batches_in_flight']:g} "
                f"in flight) {st['total_gib']:.1f} GiB"
                for st in mem["stages"]
            )
        )
    lines += [f"warning: {w}" for w in d.get("warnings", [])]
    return "\n".join(lines)


@verb(
    "step",
    "one training step: compute, pipeline bubble and exposed communication per "
    "parallel dimension, MFU, memory",
)
def _step(args: argparse.Namespace) -> int:
    from fabric_model.report.summaries import comm_breakdown
    from fabric_model.training import training_step

    result = training_step(scenario_from_args(args), suggest=True)
    payload = result.to_dict()
    if not result.feasible:
        if args.json:
            print(json.dumps(payload, indent=2, default=str))
        raise FabricModelError("infeasible plan: " + result.reason)
    assert result.plan is not None
    _emit(args, payload, _step_text(payload, result.plan.label(), comm_breakdown(result)))
    return 0


def _parse_gpus(text: str) -> list[int]:
    out = []
    for item in text.split(","):
        item = item.strip().replace("_", "")
        if not item.isdigit() or int(item) < 2:
            raise FabricModelError(
                f"--gpus: {item!r} is not a GPU count >= 2 (give a list such as 8,64,1024)"
            )
        out.append(int(item))
    return out


@contextmanager
def _mapper(workers: int) -> Iterator[Any]:
    """``map``, or a process pool's ``map`` for ``workers > 1`` (shut down on exit)."""
    if workers <= 1:
        yield map
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers) as pool:
        yield pool.map


def _progress(args: argparse.Namespace, what: str) -> Any:
    if args.json or not sys.stderr.isatty():
        return None

    def report(done: int, total: int) -> None:
        sys.stderr.write(f"\r{what}: {done}/{total}")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return report


def _sweep_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--gpus",
        default=",".join(str(2**i) for i in range(3, 18)),
        metavar="LIST",
        help="cluster sizes (default powers of two 8..131072)",
    )
    p.add_argument(
        "--scaling",
        default="weak",
        choices=("weak", "strong"),
        help="weak: tokens per replica fixed (default); strong: global batch fixed",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="processes to spread the sizes over (default 1)",
    )


@verb(
    "sweep",
    "training step and network cost across cluster sizes (scaling efficiency)",
    add_arguments=_sweep_args,
)
def _sweep(args: argparse.Namespace) -> int:
    from fabric_model.training import sweep

    scenario = scenario_from_args(args)
    with _mapper(args.workers) as map_fn:
        points = sweep(
            scenario,
            _parse_gpus(args.gpus),
            scaling=args.scaling,
            map_fn=map_fn,
            progress=_progress(args, "sweep"),
        )
    payload = [p.to_dict() for p in points]
    table = [
        {
            "n_gpus": p.n_gpus,
            "step_time_s": p.step.step_time_s if p.feasible else "-",
            "mfu": p.step.mfu if p.feasible else "-",
            "scaling_eff": p.scaling_efficiency if p.feasible else "-",
            "network_capex_usd": p.network_capex_usd if p.feasible else "-",
            "plan": p.step.plan.label() if p.feasible and p.step.plan else "",
            "note": "" if p.feasible else p.reason[:90],
        }
        for p in points
    ]
    head = (
        f"# {args.scaling} scaling of {scenario.model.name} on {scenario.fabric.topology}, "
        f"{scenario.fabric.vendor} {scenario.fabric.link_gbps}G\n"
    )
    _emit(args, payload, head + format_table(table))
    return 0


def _plan_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--top", type=int, default=5, metavar="N", help="plans to show (default 5)")
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="processes to spread the candidates over (default 1)",
    )


@verb(
    "plan",
    "search TP/PP/CP/EP/interleaving/recomputation for the fastest feasible plan",
    add_arguments=_plan_args,
)
def _plan(args: argparse.Namespace) -> int:
    from fabric_model.training import search_plans

    scenario = scenario_from_args(args)
    with _mapper(args.workers) as map_fn:
        found = search_plans(
            scenario, top=args.top, map_fn=map_fn, progress=_progress(args, "plans")
        )
    if not found:
        raise FabricModelError(
            "parallel: no plan fits this model on this cluster (memory or "
            "batch); add GPUs, raise training.global_batch_tokens or use "
            "a GPU with more memory"
        )
    payload = [{"overrides": c.overrides, **c.step.to_dict()} for c in found]
    table = [
        {
            "plan": c.label,
            "step_time_s": c.step.step_time_s,
            "mfu": c.step.mfu,
            "memory_gib": c.step.memory.total_gib if c.step.memory else 0.0,
            "exposed_comm_s": c.step.exposed_comm_s,
            "bubble_s": c.step.bubble_s,
            "micro_batches": c.step.plan.micro_batches if c.step.plan else 0,
            "scale_out_share": c.step.scale_out_share_of_step,
        }
        for c in found
    ]
    _emit(args, payload, format_table(table))
    return 0


def _explore_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--vary",
        action="append",
        default=[],
        metavar="KEY=V1,V2[,...]",
        help="a scenario key and its values; every combination is a design (repeatable)",
    )
    p.add_argument(
        "--plan-search", action="store_true", help="give each design its fastest parallel plan"
    )
    p.add_argument(
        "--engine",
        choices=("local", "dask"),
        default=None,
        help="local (default) or dask: a dask.distributed cluster (embedded LocalCluster, or "
        "--scheduler)",
    )
    p.add_argument("--scheduler", metavar="ADDRESS", help="dask scheduler, e.g. tcp://host:8786")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="processes: local pool size (default 1) or LocalCluster workers (default: cores)",
    )
    p.add_argument(
        "--max-designs",
        type=int,
        default=10_000,
        metavar="N",
        help="refuse larger grids (default %(default)s)",
    )
    p.add_argument("--out", metavar="designs.csv", help="also write the designs as CSV")


@verb(
    "explore",
    "every combination of --vary values: time to train, cost per run (with failures and "
    "goodput) and the Pareto front",
    add_arguments=_explore_args,
)
def _explore(args: argparse.Namespace) -> int:
    from fabric_model.run.explore import explore, parse_vary, write_csv

    scenario = scenario_from_args(args)
    dims = [parse_vary(v) for v in args.vary]
    engine = args.engine or ("dask" if args.scheduler else "local")
    common = {
        "plan_search": args.plan_search,
        "engine": engine,
        "scheduler": args.scheduler,
        "workers": args.workers,
        "max_designs": args.max_designs,
        "progress": _progress(args, "designs"),
    }
    if engine == "local":
        with _mapper(args.workers or 1) as map_fn:
            result = explore(scenario, dims, map_fn=map_fn, **common)
    else:
        result = explore(scenario, dims, **common)
    if args.out:
        write_csv(result, args.out)
    keys = [d.key for d in dims]
    table = [
        {
            **{k.split(".", 1)[1]: d["keys"][k] for k in keys},
            "pareto": "*" if d["pareto"] else "",
            "days": d["time_to_train_days"] if d["feasible"] else "-",
            "cost_per_run_usd": d["cost_per_run_usd"] if d["feasible"] else "-",
            "goodput": d["goodput"] if d["feasible"] else "-",
            "mfu": d["mfu"] if d["feasible"] else "-",
            "switch": d.get("switch") or "-",
            "radix": d.get("switch_radix") or "-",
            "pod_nics": d.get("pod_nics") or "-",
            "note": "" if d["feasible"] else str(d["reason"])[:80],
        }
        for d in result.designs
    ]
    head = (
        f"# {len(table)} designs on {engine}; * = Pareto front of time to train vs cost per "
        f"run ({scenario.training.total_tokens:,} tokens)\n"
    )
    _emit(args, result.to_dict(), head + format_table(table))
    return 0


# ------------------------------------------------------------------------------ report


def _report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--out",
        required=True,
        metavar="FILE",
        help="where to write the report (html: one file that opens offline; pptx: the slides)",
    )
    p.add_argument(
        "--format",
        choices=("html", "pptx"),
        default="html",
        help="html (default): the report; pptx: slides of the same sections (python-pptx), "
        "one per chart and key table, charts as PNG through the system chromium",
    )


@verb(
    "report",
    "self-contained HTML report of the scenario (or, --format pptx, its slides): key "
    "numbers, charts, bill of materials, vendor comparison, the scenario and the sources "
    "of its numbers",
    add_arguments=_report_args,
)
def _report(args: argparse.Namespace) -> int:
    from pathlib import Path

    out = Path(args.out)
    if out.is_dir() or not out.parent.is_dir():
        raise FabricModelError(
            f"--out {args.out}: "
            + ("is a directory" if out.is_dir() else f"no directory {out.parent}")
            + "; give a file path such as "
            f"report.{args.format}"
        )
    scenario = scenario_from_args(args)
    # Imported here, not at the top: the report draws with plotly (ui.report), and importing
    # fabric_model or this CLI must never load plotly or streamlit (tests/test_report.py).
    try:
        from ui.report import build_report, build_slides
    except ImportError as exc:
        raise FabricModelError(
            "report needs the dashboard's ui package and plotly"
            + (" and python-pptx" if args.format == "pptx" else "")
            + f" ({exc}); run it from the repository root with requirements.txt installed"
        ) from None
    if args.format == "pptx":
        data = build_slides(scenario)  # a FabricModelError without a Chromium for the charts
    else:
        data = build_report(scenario).encode("utf-8")
    try:
        out.write_bytes(data)
    except OSError as exc:
        raise FabricModelError(f"--out {args.out}: {exc.strerror or exc}") from None
    payload = {"path": str(out), "bytes": len(data)}
    _emit(args, payload, f"{out} ({len(data) / 1e6:.1f} MB, {len(data):,} bytes)")
    return 0


# ------------------------------------------------------------------------------ export

_EXPORT_FORMATS = (
    "cabling-csv",
    "slurm-topology",
    "slurm-topology-yaml",
    "networkx-json",
    "nccl-tuner-csv",
    "kueue-topology",
)


def _export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--format",
        required=True,
        choices=_EXPORT_FORMATS,
        help="cabling-csv (one row per cable), slurm-topology (topology.conf, tree plugin), "
        "slurm-topology-yaml (topology.yaml: tree and NVLink blocks), networkx-json, "
        "nccl-tuner-csv (the model's algorithm/protocol/channels per size for NCCL's "
        "example tuner plugin), kueue-topology (Kueue Topology, ResourceFlavor and node labels)",
    )
    p.add_argument("--out", required=True, metavar="FILE", help="where to write; - for stdout")


@verb(
    "export",
    "deployment files consistent with the BOM: cabling plan, Slurm topology, node-link graph; "
    "the NCCL tuner plugin CSV of the model's choice",
    add_arguments=_export_args,
)
def _export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from fabric_model.report.export import export_design

    out = None if args.out == "-" else Path(args.out)
    if out is not None and (out.is_dir() or not out.parent.is_dir()):
        what = "is a directory" if out.is_dir() else f"no directory {out.parent}"
        raise FabricModelError(f"--out {args.out}: {what}; give a file path, or - for stdout")
    result = export_design(scenario_from_args(args), args.format)
    for note in result.notes:
        print(f"# note: {note}", file=sys.stderr)
    if out is None:
        sys.stdout.write(result.text)
        return 0
    try:
        out.write_text(result.text, encoding="utf-8")
    except OSError as exc:
        raise FabricModelError(f"--out {args.out}: {exc.strerror or exc}") from None
    payload = {"path": str(out), "format": result.format, "items": result.n_items}
    _emit(args, payload, f"{out}: {result.format}, {result.n_items:,} items")
    return 0


# ------------------------------------------------------------------------------ schedule


def _schedule_args(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--jobs",
        metavar="FILE",
        help="job trace, CSV or YAML (id, submit_h, "
        "gpus, model, plan, tokens or duration_h, priority)",
    )
    src.add_argument(
        "--generate",
        type=int,
        metavar="N",
        help="draw N jobs from assets/job_mix.yaml (sourced shapes)",
    )
    p.add_argument(
        "--policy",
        choices=("first-fit", "tree", "block", "tas"),
        default="tree",
        help="placement policy (default %(default)s)",
    )
    p.add_argument(
        "--compare-policies",
        action="store_true",
        help="also run every policy on the same jobs and failure draws",
    )
    p.add_argument("--days", type=float, default=30.0, help="horizon, days (default 30)")
    p.add_argument("--seed", type=int, default=0, help="seed of the draws (default 0)")
    p.add_argument(
        "--seeds",
        type=int,
        default=1,
        metavar="K",
        help="run seeds S .. S+K-1 (with --engine dask: in parallel)",
    )
    p.add_argument(
        "--engine",
        choices=("local", "dask"),
        default="local",
        help="local, or dask: the seeds on an embedded LocalCluster of 2 workers",
    )
    p.add_argument("--out", metavar="jobs.csv", help="also write the per-job rows as CSV")


def _schedule_text(d: dict[str, Any]) -> str:
    rows = [
        {
            "policy": name,
            "util": s["utilization"],
            "goodput": s["goodput"],
            "wait_h": s["mean_wait_h"] if s["mean_wait_h"] is not None else "-",
            "p95_wait_h": s["p95_wait_h"] if s["p95_wait_h"] is not None else "-",
            "slowdown_p95": s["slowdown_p95"] if s["slowdown_p95"] is not None else "-",
            "frag": s["fragmentation"],
            "interrupted": s["interrupted_jobs"],
            "usd_per_useful_gpu_h": s["cost_per_useful_gpu_hour_usd"] or "-",
        }
        for name, s in d["policies"].items()
    ]
    bs = d["block_sizes"]
    head = (
        f"# {d['n_jobs']:,} jobs over {d['days']:g} days, seed {d['seed']}; "
        f"BlockSizes {bs['BlockSizes']} (base block {bs['base_block_nodes']} nodes)\n"
    )
    return head + format_table(rows)


@verb(
    "schedule",
    "a shared cluster over time: a job mix placed by a Slurm/Kueue policy, slowdowns from "
    "the fabric, failures, goodput and cost per useful GPU-hour",
    add_arguments=_schedule_args,
)
def _schedule(args: argparse.Namespace) -> int:
    from fabric_model.run.cluster_sim import schedule, schedule_seeds, write_jobs_csv
    from fabric_model.run.jobs import load_jobs

    scenario = scenario_from_args(args)
    jobs = load_jobs(args.jobs) if args.jobs else None
    if args.generate is not None and args.generate < 1:
        raise FabricModelError(f"--generate {args.generate}: must be at least 1")
    if args.seeds < 1:
        raise FabricModelError(f"--seeds {args.seeds}: must be at least 1")
    seeds = list(range(args.seed, args.seed + args.seeds))
    common = {
        "generate": args.generate,
        "policy": args.policy,
        "compare": args.compare_policies,
        "days": args.days,
    }
    if args.engine == "dask":
        results = schedule_seeds(scenario, jobs, seeds, **common)
    else:
        results = [schedule(scenario, jobs, seed=s, **common) for s in seeds]
    if args.out:
        write_jobs_csv(results[0], args.out)
    payload: Any = results[0] if len(results) == 1 else {"seeds": results}
    _emit(args, payload, "\n".join(_schedule_text(r) for r in results))
    return 0


def build_parser(verb_name: str | None = None) -> argparse.ArgumentParser:
    """Return the argument parser with every registered verb.

    Parameters
    ----------
    verb_name
        Give only this verb its own arguments (the others are listed with their help, and
        ``VERB --help`` of another verb is never parsed by this parser). A verb's
        arguments may import its part of the model (``collective`` imports the collectives
        for the allowed ``--op`` values), so ``presets`` does not pay for them. ``""``: no
        verb gets its arguments (top-level ``--help``, an unknown verb); None: every verb.
    """
    parser = _Parser(
        prog="python -m fabric_model",
        description="Flow-level model of GPU-cluster network fabrics for LLM training.",
    )
    parser.add_argument("--version", action="version", version=f"fabric_model {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    for name, v in VERBS.items():
        p = sub.add_parser(name, help=v.help, description=v.help)
        if verb_name is not None and name != verb_name:
            continue
        if v.takes_scenario:
            p.add_argument("--scenario", metavar="FILE", help="scenario file (YAML or JSON)")
            p.add_argument(
                "--preset",
                metavar="NAME",
                help=f"named preset (see `presets`; default {DEFAULT_PRESET})",
            )
            p.add_argument(
                "--set",
                metavar="KEY=VALUE",
                action="append",
                help="override a dotted key, e.g. fabric.link_gbps=800 (repeatable)",
            )
        p.add_argument("--json", action="store_true", help="machine-readable JSON output")
        if v.add_arguments:
            v.add_arguments(p)
    return parser


#: Parsers built so far, per (verb, registered verbs): a process that calls :func:`main`
#: many times (tests, scripts) builds each one once.
_PARSERS: dict[tuple[str, tuple[str, ...]], argparse.ArgumentParser] = {}


def _parser_for(argv: Sequence[str]) -> argparse.ArgumentParser:
    """Return the (cached) parser for the verb ``argv`` names, if it names a known one.

    The top-level parser has no option that takes a value, so the verb is the first
    argument that is not an option.
    """
    name = next((a for a in argv if not a.startswith("-")), None)
    key = (name if name in VERBS else "", tuple(VERBS))
    if key not in _PARSERS:
        _PARSERS[key] = build_parser(key[0])
    return _PARSERS[key]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit status (0 ok, 2 bad input)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = _parser_for(argv)
    args = parser.parse_args(argv)
    if not args.verb:
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        return VERBS[args.verb].run(args)
    except FabricModelError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # `| head`
        return 0
