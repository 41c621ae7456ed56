"""The fabric as a graph: ``networkx`` node-link JSON of servers and switches.

The graph (``networkx.node_link_data`` layout, edges under ``"edges"``) has one node per
server and switch and one edge per device pair and link class, with ``links`` (logical
links) and ``cables`` (physical cables; a splitter cable serving two servers counts 1/2 on
each server's edge), so the ``cables`` sum is the BOM's ``n_cables``.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from fabric_model import __version__
from fabric_model.report.export.cabling import cable_groups, cabling_notes
from fabric_model.report.export.formats import Export, file_name
from fabric_model.report.export.plan import DeploymentPlan

__all__ = ["graph_export", "load_node_link_graph", "node_link_data"]


def node_link_data(plan: DeploymentPlan) -> dict[str, Any]:
    """Return the fabric as ``networkx.node_link_data`` of servers and switches.

    One node per server (``kind="server"``, ``gpus``, ``nvlink_domain``) and switch
    (``kind="switch"``, ``tier``, ``switch``, ``plane``); one edge per device pair and link
    class with ``link_class``, ``links``, ``cables`` (fractional only for a splitter cable
    shared by two servers), ``length_m``, ``link_gbps`` and ``media``. Edges are under
    ``"edges"`` (the key networkx 3.6 writes; pass ``edges="edges"`` to
    ``networkx.node_link_graph`` on 3.4 and 3.5, ``link="edges"`` before, or use
    :func:`load_node_link_graph`). The ``graph`` attributes carry ``n_cables`` (the BOM's).
    """
    topo = plan.bom.topology
    req = topo.request
    weight = np.zeros(plan.n_links, dtype=np.float64)
    for grp in cable_groups(plan):
        k = grp.per_cable
        sizes = np.full(grp.n_cables, k, dtype=np.float64)
        if grp.order.size % k:
            sizes[-1] = grp.order.size % k
        weight[grp.order] = 1.0 / np.repeat(sizes, k)[: grp.order.size]
    u = np.minimum(plan.a_dev, plan.b_dev)
    v = np.maximum(plan.a_dev, plan.b_dev)
    n_dev = int(plan.device_names.size)
    n_cls = len(topo.links)
    key = (u * n_dev + v) * n_cls + plan.link_class
    uniq, inverse = np.unique(key, return_inverse=True)
    links = np.bincount(inverse, minlength=uniq.size)
    cables = np.bincount(inverse, weights=weight, minlength=uniq.size)
    eu, rest = np.divmod(uniq, n_dev * n_cls)
    ev, ec = np.divmod(rest, n_cls)
    pair = eu * n_dev + ev
    multigraph = bool(np.unique(pair).size < pair.size)
    names = plan.device_names
    cls_attrs = []
    for lc, media in zip(topo.links, plan.media, strict=True):
        kind = media.copper.kind.upper() if media.copper is not None else "fiber"
        cls_attrs.append(
            {
                "link_class": lc.name,
                "length_m": float(lc.length_m),
                "link_gbps": int(lc.link_gbps),
                "media": kind,
            }
        )
    edges = []
    for a_i, b_i, c_i, n_l, n_c in zip(
        eu.tolist(), ev.tolist(), ec.tolist(), links.tolist(), cables.tolist(), strict=True
    ):
        edge = {
            **cls_attrs[c_i],
            "links": n_l,
            "cables": int(n_c) if float(n_c).is_integer() else round(n_c, 6),
            "source": names[a_i],
            "target": names[b_i],
        }
        if multigraph:
            edge["key"] = cls_attrs[c_i]["link_class"]
        edges.append(edge)
    gpn, dom = req.gpus_per_node, req.nvlink_domain
    nodes: list[dict[str, Any]] = [
        {
            "kind": "server",
            "tier": "server",
            "gpus": min(gpn, req.n_gpus - i * gpn),
            "nvlink_domain": i * gpn // dom,
            "id": names[i],
        }
        for i in range(plan.n_servers)
    ]
    switch_key = plan.bom.hardware.switch.key
    ocs_key = str(topo.params.get("ocs_key", ""))
    nodes += [
        {
            "kind": "ocs" if plan.device_tier[d] == "ocs" else "switch",
            "tier": str(plan.device_tier[d]),
            "switch": ocs_key if plan.device_tier[d] == "ocs" else switch_key,
            "plane": int(plan.device_plane[d]),
            "id": names[d],
        }
        for d in range(plan.n_servers, n_dev)
    ]
    extra: dict[str, Any] = {}
    if plan.circuits is not None:  # the light paths the OCSes set: not cables, not edges
        c = plan.circuits
        extra = {
            "circuits": {
                "ocs": names[c[:, 0]].tolist(),
                "port_a": (c[:, 1] + 1).tolist(),
                "port_b": (c[:, 2] + 1).tolist(),
                "block_a": c[:, 3].tolist(),
                "block_b": c[:, 4].tolist(),
            },
            "n_circuits": int(c.shape[0]),
            "circuit_pattern": str(topo.params["circuits"]),
        }
    return {
        "directed": False,
        "multigraph": multigraph,
        "graph": {
            "name": plan.bom.scenario_name,
            "family": topo.family,
            "n_gpus": topo.n_gpus,
            "n_servers": plan.n_servers,
            "n_switches": topo.n_switches,
            "n_cables": plan.bom.n_cables,
            "planes": plan.planes,
            "generator": f"fabric_model {__version__}",
            **extra,
        },
        "nodes": nodes,
        "edges": edges,
    }


def load_node_link_graph(data: dict[str, Any]) -> Any:
    """Return ``networkx.node_link_graph(data)`` for an export, on any networkx >= 3.3."""
    import networkx as nx

    try:
        return nx.node_link_graph(data, edges="edges")
    except TypeError:  # networkx < 3.4 names the keyword ``link``
        return nx.node_link_graph(data, link="edges")


def graph_export(plan: DeploymentPlan) -> Export:
    """Write the node-link JSON of the fabric (:func:`node_link_data`)."""
    data = node_link_data(plan)
    return Export(
        "networkx-json",
        json.dumps(data, separators=(",", ":")),
        len(data["edges"]),
        file_name(plan, "networkx-json"),
        cabling_notes(plan),
    )
