"""Kueue's topology-aware scheduling: a ``Topology``, a ``ResourceFlavor`` and node labels."""

from __future__ import annotations

import numpy as np

from fabric_model import __version__
from fabric_model.errors import FabricModelError
from fabric_model.report.export.formats import Export, file_name
from fabric_model.report.export.plan import DeploymentPlan
from fabric_model.report.export.slurm import servers_per_domain, slurm_tree

__all__ = ["KUEUE_LEVELS", "KUEUE_TAS_DOC", "kueue_topology"]

KUEUE_TAS_DOC = "https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/"
#: Kueue's Topology levels as its documentation's samples name them, outermost first.
KUEUE_LEVELS = (
    "cloud.provider.com/topology-block",
    "cloud.provider.com/topology-rack",
    "kubernetes.io/hostname",
)


def _k8s_name(text: str) -> str:
    """``text`` as a Kubernetes object name / label value (lower-case alphanumerics and -)."""
    out = "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-")
    return (out or "fabric")[:63].rstrip("-")


def kueue_topology(plan: DeploymentPlan) -> Export:
    """Return Kueue's ``Topology`` for the design, a ``ResourceFlavor`` and the node labels.

    Levels ``block`` / ``rack`` / ``host`` (Kueue's samples, :data:`KUEUE_LEVELS`; see
    :data:`KUEUE_TAS_DOC`). With single-server NVLink domains a rack is a leaf group of the
    Slurm tree (:func:`slurm_topology_conf`: the leaves that reach the same servers) and a
    block the spine group above it; with NVLink domains of several servers (NVL72) a rack is
    the domain and a block the leaf group of its first server; a switchless design has racks
    (its domains) only. ``kubernetes.io/hostname`` is the kubelet's own label, so only the
    block and rack labels (and ``fabric-model/cluster``, which the flavor selects) are written;
    ``kubectl apply`` merges them into the existing Node objects.

    Raises
    ------
    FabricModelError
        For a switchless design whose NVLink domains are single servers (no levels).
    """
    topo = plan.bom.topology
    ns = plan.n_servers
    per = servers_per_domain(plan)
    name = _k8s_name(plan.bom.scenario_name)
    rack: list[str] = [""] * ns
    block: list[str] = [""] * ns
    warnings: list[str] = []
    if plan.server_block is not None and topo.tiers == 0:
        # an OCS fabric of NVLink domains or cubes: blocks are its OCS blocks, racks its
        # NVLink domains (or the blocks, when a domain is one server)
        if int(np.bincount(plan.server_block).max()) <= 1:
            raise FabricModelError(
                "kueue-topology: the OCS blocks are single servers: no block or rack level"
            )
        for n in range(ns):
            block[n] = f"ocsblock{int(plan.server_block[n])}"
            rack[n] = f"nvl{n // per}" if per > 1 else block[n]
    elif topo.tiers:
        switches, _, warnings = slurm_tree(plan)
        leaf_of: dict[int, str] = {}
        for sw in switches:
            for n in sw.nodes:
                leaf_of[n] = sw.name
        parent: dict[str, str] = {}
        for sw in switches:
            for child in sw.children:
                parent.setdefault(child, sw.name)
        for n in range(ns):
            if per > 1:
                rack[n] = f"nvl{n // per}"
                first = leaf_of[(n // per) * per]
                block[n] = first
            else:
                rack[n] = leaf_of[n]
                block[n] = parent.get(rack[n], rack[n])
    elif per > 1:
        rack = [f"nvl{n // per}" for n in range(ns)]
    else:
        raise FabricModelError(
            f"kueue-topology: {topo.family} is switchless and its NVLink domains of "
            f"{topo.request.nvlink_domain} GPUs are single servers: no block or rack level"
        )
    levels = KUEUE_LEVELS if topo.tiers or plan.server_block is not None else KUEUE_LEVELS[1:]
    lines = [
        f"# Kueue Topology-Aware Scheduling ({KUEUE_TAS_DOC})",
        f"# scenario {plan.bom.scenario_name!r}: {topo.n_gpus:,} GPUs on {ns:,} servers "
        f"node[0-{ns - 1}]; fabric_model {__version__}",
        "# node<i> is server i of the cabling plan: rename to your node names. apiVersion is",
        "# Kueue's current one (v1beta2); releases before it served Topology as v1alpha1",
        "# racks: "
        + ("NVLink domains" if per > 1 else "leaf groups of the Slurm tree")
        + (
            "; blocks: " + ("the leaf group of each domain" if per > 1 else "spine groups")
            if topo.tiers
            else ""
        ),
        "apiVersion: kueue.x-k8s.io/v1beta2",
        "kind: Topology",
        "metadata:",
        f"  name: {name}",
        "spec:",
        "  levels:",
        *(f"  - nodeLabel: {lvl}" for lvl in levels),
        "---",
        "apiVersion: kueue.x-k8s.io/v1beta2",
        "kind: ResourceFlavor",
        "metadata:",
        f"  name: {name}-tas",
        "spec:",
        "  nodeLabels:",
        f"    fabric-model/cluster: {name}",
        f"  topologyName: {name}",
    ]
    for n in range(ns):
        lines += [
            "---",
            "apiVersion: v1",
            "kind: Node",
            "metadata:",
            f"  name: node{n}",
            "  labels:",
            f"    fabric-model/cluster: {name}",
        ]
        if block[n]:
            lines.append(f"    {KUEUE_LEVELS[0]}: {_k8s_name(block[n])}")
        lines.append(f"    {KUEUE_LEVELS[1]}: {_k8s_name(rack[n])}")
    return Export(
        "kueue-topology",
        "\n".join(lines) + "\n",
        2 + ns,
        file_name(plan, "kueue-topology"),
        tuple(warnings),
    )
