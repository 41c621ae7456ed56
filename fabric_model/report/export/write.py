"""Write one deployment artifact of a design: each format's writer, and what can be written.

:func:`export_design` is the front door (the ``export`` verb, the Deploy page);
:func:`export_unavailable_reason` says, without building anything, why a built topology has
no file of a format.
"""

from __future__ import annotations

from collections.abc import Callable

from fabric_model.catalog import Catalog
from fabric_model.errors import FabricModelError
from fabric_model.report.export.cabling import cabling_export
from fabric_model.report.export.formats import EXPORT_FORMATS, Export
from fabric_model.report.export.graph import graph_export
from fabric_model.report.export.kueue import kueue_topology
from fabric_model.report.export.nccl_tuner import nccl_tuner_export
from fabric_model.report.export.plan import HYBRID_EXPORT, DeploymentPlan, deployment_plan
from fabric_model.report.export.slurm import slurm_topology_conf, slurm_topology_yaml
from fabric_model.scenario import Scenario
from fabric_model.topology import Topology

__all__ = ["WRITERS", "export_design", "export_unavailable_reason"]

#: Each format written from a deployment plan, by name (the NCCL tuner CSV is written from
#: the scenario: :mod:`.nccl_tuner`).
WRITERS: dict[str, Callable[[DeploymentPlan], Export]] = {
    "cabling-csv": cabling_export,
    "slurm-topology": slurm_topology_conf,
    "slurm-topology-yaml": slurm_topology_yaml,
    "networkx-json": graph_export,
    "kueue-topology": kueue_topology,
}


def export_unavailable_reason(topo: Topology, fmt: str) -> str | None:
    """Say why ``fmt`` cannot be written for this built topology (None when it can).

    Cheap (no plan is built), for a page to grey out a download.
    """
    if fmt not in EXPORT_FORMATS:
        return f"unknown format {fmt!r}; one of {', '.join(EXPORT_FORMATS)}"
    if fmt == "nccl-tuner-csv":  # collectives, not cables: one NVLink domain has them too
        return None
    if topo.n_links == 0:
        return "no scale-out cables: every GPU is in one NVLink domain"
    if topo.family == "hybrid":
        return HYBRID_EXPORT
    req = topo.request
    multi_server_domains = req.nvlink_domain > req.gpus_per_node
    if topo.family == "ocs":
        block_servers = int(topo.params["block_gpus"]) // req.gpus_per_node
        if fmt == "slurm-topology" and topo.tiers == 0:
            return "an OCS fabric of NVLink domains or cubes has no electrical switch tree"
        if fmt in ("slurm-topology-yaml", "kueue-topology") and block_servers <= 1:
            return "its OCS blocks are single servers: no tree and no blocks"
        return None
    if fmt == "slurm-topology" and topo.tiers == 0:
        return f"Slurm's tree plugin needs switches; {topo.family} is switchless"
    if (
        fmt in ("slurm-topology-yaml", "kueue-topology")
        and topo.tiers == 0
        and not multi_server_domains
    ):
        return (
            f"{topo.family} is switchless and its NVLink domains are single servers: "
            "no tree and no blocks"
        )
    return None


def export_design(
    scenario: Scenario | DeploymentPlan, fmt: str, catalog: Catalog | None = None
) -> Export:
    """Write one deployment artifact of the scenario's design.

    Parameters
    ----------
    scenario
        The design, or its already built :class:`DeploymentPlan`.
    fmt
        One of :data:`EXPORT_FORMATS`.
    catalog
        Parts (default: the shipped catalog).

    Returns
    -------
    Export
        The file's text, its item count (cables, Slurm switches and blocks, graph edges)
        and a file name.

    Raises
    ------
    FabricModelError
        For an unknown format, a design that cannot be built, has no scale-out cable, or
        does not fit the format (a switchless family for Slurm's tree plugin).
    """
    if fmt == "nccl-tuner-csv":
        if not isinstance(scenario, Scenario):
            raise FabricModelError("--format nccl-tuner-csv is written from a scenario, not a plan")
        return nccl_tuner_export(scenario)
    if fmt not in WRITERS:
        raise FabricModelError(f"--format {fmt!r}: must be one of {', '.join(EXPORT_FORMATS)}")
    plan = scenario if isinstance(scenario, DeploymentPlan) else deployment_plan(scenario, catalog)
    return WRITERS[fmt](plan)
