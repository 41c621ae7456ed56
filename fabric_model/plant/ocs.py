"""An OCS fabric's plant in numbers: its circuits and optics, their cost share, and availability.

:func:`ocs_summary` gathers what the ``bom`` verb, the Cost page and the report show of an
``fabric.topology = ocs`` design beside its bill: the blocks, OCSes, circuits and uplink
transceiver; the OCS and block-to-OCS optics as shares of the cluster's capex and power (the
figure TPU v4 published: under 5 % of system cost and 3 % of power, Jouppi et al., ISCA
2023); and the availability what-if.

Availability (steady state, exponential failures and repairs): a block is down while any of
its parts is, so its failure rate is the sum over its GPUs, servers, NICs, uplink
transceivers and (pods) switches of count x ``reliability.*_failures_per_year`` (software
failures restart the job but take no block down), and its availability
``a = 1 / (1 + lambda x reliability.repair_h)``. A job of ``S`` blocks on a fabric of ``P``
built blocks (``ocs.spare_blocks`` beyond the job's):

- with the OCS, any ``S`` healthy blocks are joined by circuits: ``P(job can run) =
  sum_{k >= S} C(P, k) a^k (1 - a)^(P - k)``;
- with fixed wiring (a static torus or patch panel), a job runs on one of the ``floor(P /
  S)`` wired slices and needs all of its blocks: ``1 - (1 - a^S)^floor(P / S)``.

TPU v4 reports "up to 3x better availability" from the OCS (Lightwave Fabrics, SIGCOMM
2023): the same mechanism, reproduced in kind in ``tests/golden/ocs_tpu_v4.yaml``.
"""

from __future__ import annotations

import math
from typing import Any

from fabric_model.catalog import Catalog, load_catalog
from fabric_model.plant.cost import BillOfMaterials
from fabric_model.scenario import Scenario
from fabric_model.scenario.ocs import reconfig_ms
from fabric_model.units import HOURS_PER_YEAR

__all__ = ["block_availability", "ocs_summary", "slice_availability"]


def slice_availability(a: float, slice_blocks: int, built_blocks: int) -> tuple[float, float]:
    """Return ``(with OCS, with fixed wiring)``: the chance a job of ``slice_blocks`` can run.

    ``a`` is one block's availability; ``built_blocks`` the blocks there are (module
    docstring). Both are 0 when the slice needs more blocks than there are.

    >>> round(slice_availability(0.9, 2, 4)[0], 4), round(slice_availability(0.9, 2, 4)[1], 4)
    (0.9963, 0.9639)
    """
    if slice_blocks > built_blocks or slice_blocks < 1:
        return 0.0, 0.0
    with_ocs = sum(
        math.comb(built_blocks, k) * a**k * (1.0 - a) ** (built_blocks - k)
        for k in range(slice_blocks, built_blocks + 1)
    )
    slots = built_blocks // slice_blocks
    static = 1.0 - (1.0 - a**slice_blocks) ** slots
    return min(1.0, with_ocs), static


def block_availability(scenario: Scenario, bom: BillOfMaterials) -> tuple[float, float]:
    """Return ``(availability, failures per year)`` of one block of an OCS design.

    Its GPUs, servers, NICs and uplink transceivers, and a pod's leaves and spines, at the
    ``reliability.*`` rates; ``a = 1 / (1 + lambda x repair_h)``.
    """
    p = bom.topology.params
    rel = scenario.reliability
    built = int(p["n_blocks_built"])
    gpus = int(p["block_gpus"])
    servers = bom.n_servers / built
    nics = gpus * scenario.cluster.nics_per_gpu
    optics = sum(x.quantity for x in bom.lines if x.where.startswith("block-ocs")) / built
    switches = (int(p["pod_leaves"]) + int(p["pod_spines"])) if p["block"] == "pod" else 0
    per_year = (
        gpus * rel.gpu_failures_per_year
        + servers * rel.server_failures_per_year
        + nics * rel.nic_failures_per_year
        + optics * rel.optic_failures_per_year
        + switches * rel.switch_failures_per_year
    )
    down = per_year * float(rel.repair_h) / HOURS_PER_YEAR
    return 1.0 / (1.0 + down), per_year


def ocs_summary(
    scenario: Scenario, bom: BillOfMaterials, catalog: Catalog | None = None
) -> dict[str, Any]:
    """Return an OCS design's blocks, circuits, optics, cost and power shares, availability.

    Raises
    ------
    ValueError
        For a design that is not ``fabric.topology = ocs``.
    """
    topo = bom.topology
    if topo.family != "ocs":
        raise ValueError(f"not an OCS design: {topo.family}")
    cat = catalog or load_catalog()
    p = topo.params
    ocs = cat.ocs_switch(str(p["ocs_key"]))
    optic = cat.optic(str(p["optic_key"]))
    ocs_lines = [x for x in bom.lines if x.where == "ocs"]
    optic_lines = [
        x for x in bom.lines if x.where.startswith("block-ocs") and x.category == "optics"
    ]
    capex = sum(x.capex_usd for x in ocs_lines + optic_lines)
    power = sum(x.power_w for x in ocs_lines + optic_lines)
    a, per_year = block_availability(scenario, bom)
    built, job = int(p["n_blocks_built"]), int(p["n_blocks"])
    with_ocs, static = slice_availability(a, job, built)
    return {
        "block": p["block"],
        "block_gpus": int(p["block_gpus"]),
        "n_blocks": job,
        "n_blocks_built": built,
        "uplinks_per_block": int(p["uplinks_per_block"]),
        "ocs_switch": ocs.key,
        "n_ocs": int(p["n_ocs"]),
        "ocs_ports": int(p["ocs_ports"]),
        "ocs_ports_used": int(p["ocs_ports_used"]),
        "fibers_per_uplink": int(p["fibers_per_uplink"]),
        "uplink_transceiver": optic.key,
        "circuits": p["circuits"],
        "n_circuits": int(p["n_circuits"]),
        "reconfigure": p["reconfigure"],
        "reconfig_ms": reconfig_ms(scenario),
        "failed_blocks": int(p["n_failed_blocks"]),
        "ocs_and_optics_capex_usd": capex,
        "ocs_and_optics_power_w": power,
        "ocs_and_optics_share_of_cluster_capex": capex / bom.cluster_capex_usd,
        "ocs_and_optics_share_of_cluster_power": power / bom.cluster_power_w,
        "block_availability": a,
        "block_failures_per_year": per_year,
        "job_availability_with_ocs": with_ocs,
        "job_availability_fixed_wiring": static,
    }
