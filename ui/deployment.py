"""Deployment-file downloads (cabling plan, Slurm topology, graph, NCCL tuner config).

The files come from :mod:`fabric_model.report.export`; each is written only when its button is
clicked (a deferred ``st.download_button`` payload; at 131,072 GPUs the cabling plan is
~40 MB), cached per scenario and format.
"""

from __future__ import annotations

import functools

import streamlit as st

from fabric_model.report.export import EXPORT_FORMATS, export_design, export_unavailable_reason
from fabric_model.scenario import Scenario
from fabric_model.topology import Topology
from ui.cache_keys import scenario_cache

__all__ = ["DEPLOYMENT_BUTTONS", "deployment_downloads", "export_bytes"]

#: Format -> (button label, help), in display order.
DEPLOYMENT_BUTTONS: dict[str, tuple[str, str]] = {
    "cabling-csv": (
        "Cabling plan (CSV)",
        "one row per physical cable: a_end and b_end (device:port), link class, length, "
        "media and transceivers; as many rows as the bill of materials has cables",
    ),
    "slurm-topology": (
        "Slurm topology.conf",
        "for Slurm's topology/tree plugin: every server under one leaf-level switch, every "
        "referenced switch defined",
    ),
    "slurm-topology-yaml": (
        "Slurm topology.yaml",
        "Slurm 25.05+: the tree and, when an NVLink domain spans several servers (NVL72), a "
        "block topology of the domains",
    ),
    "networkx-json": (
        "Graph (networkx JSON)",
        "networkx node-link data of servers and switches; each edge has its link class and "
        "cable count (networkx.node_link_graph(data, edges='edges'))",
    ),
    "nccl-tuner-csv": (
        "NCCL tuner config (CSV)",
        "the model's NCCL algorithm, protocol and channels per message size, as the CSV of "
        "NCCL's example tuner plugin (NCCL_TUNER_CONFIG_FILE; plugins/tuner/example)",
    ),
    "kueue-topology": (
        "Kueue Topology (YAML)",
        "Kueue Topology-Aware Scheduling: the Topology (levels block / rack / host), a "
        "ResourceFlavor using it, and every server's block and rack node labels",
    ),
}


@scenario_cache(8)
def export_bytes(scenario: Scenario, fmt: str) -> bytes:
    """Write one deployment file of the scenario (raises the model's errors)."""
    return export_design(scenario, fmt).text.encode("utf-8")


def deployment_downloads(scenario: Scenario, topo: Topology) -> None:
    """Draw one download button per export format; a format the design lacks is greyed out."""
    columns = st.columns(len(DEPLOYMENT_BUTTONS))
    for col, (fmt, (label, help_text)) in zip(columns, DEPLOYMENT_BUTTONS.items(), strict=True):
        reason = export_unavailable_reason(topo, fmt)
        col.download_button(
            label,
            functools.partial(export_bytes, scenario, fmt),
            file_name=f"{scenario.name}{EXPORT_FORMATS[fmt].file_suffix}",
            mime=EXPORT_FORMATS[fmt].mime,
            key=f"dl_export_{fmt}",
            help=f"Not available: {reason}." if reason else help_text,
            disabled=reason is not None,
            on_click="ignore",
        )
