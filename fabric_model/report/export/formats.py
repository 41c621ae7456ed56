"""The export formats: their names, what each file holds, and how to save it.

:data:`EXPORT_FORMATS` is the registry (``python -m fabric_model export --format NAME``, the
Deploy page's downloads); :class:`Export` is one written file.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabric_model.report.export.plan import DeploymentPlan

__all__ = ["EXPORT_FORMATS", "Export", "ExportFormat", "file_name"]


@dataclass(frozen=True)
class ExportFormat:
    """One export format: its name, what it holds, and how to save it."""

    name: str
    description: str
    file_suffix: str
    mime: str


#: The export formats, by name (``python -m fabric_model export --format NAME``).
EXPORT_FORMATS: dict[str, ExportFormat] = {
    f.name: f
    for f in (
        ExportFormat(
            "cabling-csv",
            "cabling plan: one row per physical cable (ends, link class, length, media, "
            "transceivers), as many rows as the BOM's cables",
            "-cabling.csv",
            "text/csv",
        ),
        ExportFormat(
            "slurm-topology",
            "Slurm topology.conf for the topology/tree plugin (switch fabrics only)",
            "-topology.conf",
            "text/plain",
        ),
        ExportFormat(
            "slurm-topology-yaml",
            "Slurm topology.yaml (25.05+): the tree and, for NVLink domains of several "
            "servers, a block topology",
            "-topology.yaml",
            "application/yaml",
        ),
        ExportFormat(
            "networkx-json",
            "networkx node-link JSON of servers and switches, cables and link class per edge",
            "-graph.json",
            "application/json",
        ),
        ExportFormat(
            "nccl-tuner-csv",
            "the model's NCCL algorithm, protocol and channels per message size and "
            "collective, as the CSV NCCL's example tuner plugin reads (plugins/tuner/example)",
            "-nccl_tuner.conf",
            "text/csv",
        ),
        ExportFormat(
            "kueue-topology",
            "Kueue Topology (levels block / rack / host), a ResourceFlavor using it, and every "
            "server's node labels",
            "-kueue-topology.yaml",
            "application/yaml",
        ),
    )
}


@dataclass(frozen=True)
class Export:
    """One exported file: its text, what it counts, and a file name to save it under."""

    format: str
    text: str
    n_items: int
    file_name: str
    notes: tuple[str, ...] = ()

    @property
    def mime(self) -> str:
        """MIME type of the file."""
        return EXPORT_FORMATS[self.format].mime


def file_name(plan: DeploymentPlan, fmt: str) -> str:
    """Return the file name of format ``fmt`` for the plan's scenario."""
    return f"{plan.bom.scenario_name}{EXPORT_FORMATS[fmt].file_suffix}"
