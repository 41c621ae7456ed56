"""The ``bom`` verb: bill of materials, capex, power, TCO and the site."""

from __future__ import annotations

import argparse
from typing import Any

from fabric_model.cli.registry import _emit, format_table, scenario_from_args, verb


def _bom_text(bom: Any) -> str:
    d = bom.to_dict()
    electrical = d["n_switches"] - d["switches_by_tier"].get("ocs", 0)
    switch = (
        f"{bom.hardware.switch.name} radix {d['radix']}, "
        if electrical
        else ("no packet switch, " if d["topology"] == "ocs" else "switchless, ")
    )
    tiers = f"{d['tiers']} tiers" if d["tiers"] else "direct links"
    if d["topology"] == "ocs":
        tiers = (f"{d['tiers']}-tier pods, " if d["tiers"] else "") + "optical circuits"
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


def _ocs_text(o: dict[str, Any]) -> str:
    """Describe the OCS design's circuits, optics and availability, after its bill."""
    spare = (
        f" + {o['n_blocks_built'] - o['n_blocks']} spare"
        if o["n_blocks_built"] > o["n_blocks"]
        else ""
    )
    return "\n".join(
        [
            "",
            f"ocs: {o['n_blocks']:,}{spare} {o['block']} blocks of {o['block_gpus']:,} GPUs, "
            f"{o['uplinks_per_block']:,} uplinks each on {o['n_ocs']:,} x {o['ocs_switch']} "
            f"({o['ocs_ports_used']:,} of {o['n_ocs'] * o['ocs_ports']:,} ports, "
            f"{o['fibers_per_uplink']} per uplink, {o['uplink_transceiver']}); "
            f"{o['n_circuits']:,} {o['circuits']} circuits, reconfigure {o['reconfigure']} "
            f"({o['reconfig_ms']:g} ms)",
            f"ocs: OCS + uplink optics ${o['ocs_and_optics_capex_usd'] / 1e6:,.2f} M "
            f"({o['ocs_and_optics_share_of_cluster_capex']:.2%} of cluster capex), "
            f"{o['ocs_and_optics_power_w'] / 1e3:,.1f} kW "
            f"({o['ocs_and_optics_share_of_cluster_power']:.2%} of cluster power)",
            f"ocs: availability of a block {o['block_availability']:.4%} "
            f"({o['block_failures_per_year']:.2f} failures/year); the job's "
            f"{o['n_blocks']:,} blocks can run {o['job_availability_with_ocs']:.2%} of the time "
            f"with the OCS, {o['job_availability_fixed_wiring']:.2%} with fixed wiring",
        ]
    )


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
        payload, text = bom.to_dict(), _bom_text(bom)
        if bom.topology.family == "ocs":  # circuits, optics, their share, availability
            from fabric_model.plant.ocs import ocs_summary

            payload["ocs"] = ocs_summary(scenario, bom)
            text += _ocs_text(payload["ocs"])
        _emit(args, payload, text)
        return 0
    results = compare_vendors(scenario)
    vendors = [
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
    _emit(args, vendors, format_table(rows))
    return 0
