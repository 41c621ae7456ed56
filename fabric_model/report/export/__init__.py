"""Deployment artifacts of a design, one module per artifact.

Every file is derived from the built topology's cables and the bill of materials' media
choice (:mod:`.plan`, the deployment plan), so the files agree with the BOM by construction:

- :mod:`.cabling`: the cabling plan CSV, one row per physical cable;
- :mod:`.slurm`: Slurm's ``topology.conf`` (tree plugin) and ``topology.yaml`` (tree and
  NVLink blocks);
- :mod:`.kueue`: Kueue's ``Topology``, a ``ResourceFlavor`` and the node labels;
- :mod:`.graph`: networkx node-link JSON of servers and switches;
- :mod:`.nccl_tuner`: the CSV NCCL's example tuner plugin reads;
- :mod:`.formats`: the formats registry (:data:`EXPORT_FORMATS`) and :class:`Export`;
- :mod:`.write`: the front door, :func:`export_design`.
"""

from fabric_model.report.export.cabling import cabling_columns, cabling_frame
from fabric_model.report.export.formats import EXPORT_FORMATS, Export, ExportFormat
from fabric_model.report.export.graph import load_node_link_graph, node_link_data
from fabric_model.report.export.kueue import KUEUE_LEVELS, KUEUE_TAS_DOC, kueue_topology
from fabric_model.report.export.plan import HYBRID_EXPORT, DeploymentPlan, deployment_plan
from fabric_model.report.export.slurm import (
    SLURM_CONF_DOC,
    SLURM_TREE_SOURCE,
    SLURM_YAML_DOC,
    SlurmSwitch,
    hostlist,
    slurm_topology_conf,
    slurm_topology_yaml,
    slurm_tree,
)
from fabric_model.report.export.write import export_design, export_unavailable_reason

__all__ = [
    "EXPORT_FORMATS",
    "HYBRID_EXPORT",
    "KUEUE_LEVELS",
    "KUEUE_TAS_DOC",
    "SLURM_CONF_DOC",
    "SLURM_TREE_SOURCE",
    "SLURM_YAML_DOC",
    "DeploymentPlan",
    "Export",
    "ExportFormat",
    "SlurmSwitch",
    "cabling_columns",
    "cabling_frame",
    "deployment_plan",
    "export_design",
    "export_unavailable_reason",
    "hostlist",
    "kueue_topology",
    "load_node_link_graph",
    "node_link_data",
    "slurm_topology_conf",
    "slurm_topology_yaml",
    "slurm_tree",
]
