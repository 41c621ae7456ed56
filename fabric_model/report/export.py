"""Deployment artifacts of a design: a cabling plan, a Slurm topology and a node-link graph.

Everything here is derived from the built topology's cables (``Topology.graph``: one entry
per cable, in link-class order) and from the bill of materials' media choice
(:func:`fabric_model.plant.cost.link_media`), so the files agree with the BOM by construction.

Conventions
-----------
- Devices: server ``i`` is ``node<i>`` (``gpus_per_node`` consecutive GPUs; rename to your
  hostnames); switch ``k`` of a tier is ``leaf<k>``, ``spine<k>``, ``core<k>``, numbered as
  the topology builder numbers them (for several planes: plane by plane, the ``plane``
  column tells which).
- Ports: a NIC port is ``nic<r>``, ``r`` its rail on the server (``local GPU x NICs per GPU
  + NIC``), 0-based as the OS numbers HCAs; with planes, leg ``p`` of that port's breakout is
  ``nic<r>/<p>``. A switch port is ``p<n>``, 1-based as on the front panel, numbered over the
  switch's cables in link-class order (down-links first, then up-links); on twin-port cages
  ports ``2m-1`` and ``2m`` share cage ``m``. Switchless families (torus, hypercube) land a
  domain's cables on its NIC ports in cable order (the topology does not model where inside
  a domain a cable lands).
- One CSV row per physical cable, so the rows equal the BOM's ``n_cables``. A copper cable
  that carries ``k > 1`` links (a 1:2 splitter DAC from one switch cage to two NICs, a 2x400G
  twin cable) is one row whose ``a_end`` and ``b_end`` list its ``k`` ends joined by ``+``
  (``links`` = ``k``), grouping the class's links by switch port, as the BOM counts
  ``ceil(links / k)`` cables per class.
- The graph (``networkx.node_link_data`` layout, edges under ``"edges"``) has one node per
  server and switch and one edge per device pair and link class, with ``links`` (logical
  links) and ``cables`` (physical cables; a splitter cable serving two servers counts 1/2 on
  each server's edge), so the ``cables`` sum is the BOM's ``n_cables``.
- Slurm: ``topology.conf`` for the tree plugin and ``topology.yaml`` (Slurm 25.05+) with the
  tree and, when NVLink domains span several servers, a block topology of the domains
  (https://slurm.schedmd.com/topology.conf.html, https://slurm.schedmd.com/topology.yaml.html).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from fabric_model import __version__
from fabric_model.catalog import Catalog, load_catalog
from fabric_model.errors import FabricModelError, InfeasibleDesignError
from fabric_model.plant.cost import BillOfMaterials, LinkMedia, bill_of_materials, link_media
from fabric_model.scenario import Scenario
from fabric_model.topology import Topology

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "EXPORT_FORMATS",
    "DeploymentPlan",
    "Export",
    "ExportFormat",
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

SLURM_CONF_DOC = "https://slurm.schedmd.com/topology.conf.html"
SLURM_YAML_DOC = "https://slurm.schedmd.com/topology.yaml.html"
KUEUE_TAS_DOC = "https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/"
#: Kueue's Topology levels as its documentation's samples name them, outermost first.
KUEUE_LEVELS = (
    "cloud.provider.com/topology-block",
    "cloud.provider.com/topology-rack",
    "kubernetes.io/hostname",
)
#: Where Slurm warns about a node under several leaf switches (why each server has one home).
SLURM_TREE_SOURCE = "SchedMD/slurm src/plugins/topology/tree/switch_record.c"


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


@dataclass(frozen=True, eq=False)
class DeploymentPlan:
    """Every cable of a design, end to end, as arrays (one entry per logical link).

    Attributes
    ----------
    bom
        The bill of materials the plan agrees with (its topology and hardware).
    media
        The media of each link class (index = class index in ``bom.topology.links``).
    device_names
        Object array: servers ``node<i>`` first (``n_servers`` of them), then switches.
    device_tier
        Tier name per device (``"server"``, ``"leaf"``, ``"spine"``, ``"core"``).
    device_plane
        Plane of each switch (0 for servers, which sit in every plane).
    link_class, link_plane : int arrays
        Class index and plane of each logical link.
    a_dev, b_dev, a_port, b_port : int arrays
        Device and port index of both ends: for a NIC end the port is the rail, for a switch
        end the 0-based port. ``a`` is the end nearer the servers.
    a_nic, b_nic : bool arrays
        Whether each end is a NIC port.
    """

    bom: BillOfMaterials
    media: tuple[LinkMedia, ...]
    n_servers: int
    device_names: np.ndarray
    device_tier: np.ndarray
    device_plane: np.ndarray
    link_class: np.ndarray
    link_plane: np.ndarray
    a_dev: np.ndarray
    b_dev: np.ndarray
    a_port: np.ndarray
    b_port: np.ndarray
    a_nic: np.ndarray
    b_nic: np.ndarray
    #: Devices with no transceiver at their ports (an OCS: the light passes through); None
    #: when every switch port takes one.
    device_passive: np.ndarray | None = None
    #: An OCS fabric's circuits: ``(ocs device, port a, port b, block a, block b)`` rows
    #: (0-based ports); None for other families.
    circuits: np.ndarray | None = None
    #: Built block of each server (an OCS fabric), for Slurm blocks and Kueue levels.
    server_block: np.ndarray | None = None

    @property
    def n_links(self) -> int:
        """Logical links (a multi-link copper cable counts each of its links)."""
        return int(self.link_class.size)

    @property
    def planes(self) -> int:
        """Network planes."""
        return self.bom.topology.planes


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


# ------------------------------------------------------------------------------------------
# the plan


def _rank_within(node: np.ndarray, order_key: np.ndarray) -> np.ndarray:
    """Rank of each entry among the entries with the same ``node``, in ``order_key`` order."""
    order = np.lexsort((order_key, node))
    sorted_node = node[order]
    idx = np.arange(node.size, dtype=np.int64)
    start = np.ones(node.size, dtype=bool)
    start[1:] = sorted_node[1:] != sorted_node[:-1]
    first = np.maximum.accumulate(np.where(start, idx, 0))
    rank = np.empty(node.size, dtype=np.int64)
    rank[order] = idx - first
    return rank


def deployment_plan(scenario: Scenario, catalog: Catalog | None = None) -> DeploymentPlan:
    """Lay out every cable of the scenario's fabric: devices, ports and media.

    Parameters
    ----------
    scenario
        The design.
    catalog
        Parts (default: the shipped catalog), for the media choice.

    Returns
    -------
    DeploymentPlan

    Raises
    ------
    FabricModelError
        If the design cannot be built or priced, or has no scale-out cable (every GPU in
        one NVLink domain): there is nothing to deploy.
    """
    cat = catalog or load_catalog()
    bom = bill_of_materials(scenario, cat)
    topo = bom.topology
    req = topo.request
    if topo.n_links == 0:
        raise FabricModelError(
            f"export: this design has no scale-out cables (its {topo.n_gpus:,} GPUs share "
            f"one NVLink domain of cluster.nvlink_domain = {req.nvlink_domain}); there is "
            "nothing to export"
        )
    if topo.family == "hybrid":
        raise InfeasibleDesignError("fabric.topology", HYBRID_EXPORT)
    if topo.family == "ocs":
        return _ocs_plan(bom, cat)
    media = tuple(link_media(lc, bom.hardware, cat) for lc in topo.links)
    g = topo.graph
    cls_all = g.link_class[0::2].astype(np.int64)
    cable = cls_all >= 0  # switchless graphs add internal endpoint links (class -1)
    a = g.link_src[0::2][cable].astype(np.int64)
    b = g.link_dst[0::2][cable].astype(np.int64)
    cls = cls_all[cable]
    n_e = req.n_endpoints
    rails = req.rails
    n_servers = req.n_nodes
    planes = topo.planes
    if a.size * planes != topo.n_links:
        raise RuntimeError(
            f"{topo.family}: the graph has {a.size:,} cables per plane, the counts "
            f"{topo.n_links:,} over {planes} plane(s)"
        )
    ends = np.concatenate([a, b])
    cable_no = np.tile(np.arange(a.size, dtype=np.int64), 2)
    if topo.tiers == 0:
        # switchless: a cable joins two domains; give it the domain's next free NIC port
        ports = req.nvlink_domain * req.nics_per_gpu
        rank = _rank_within(ends, cable_no)
        if rank.size and int(rank.max()) >= ports:
            raise RuntimeError(f"{topo.family}: more cables than NIC ports on a domain")
        ends = (ends - n_e) * ports + rank
    is_nic = ends < n_e
    sw_rank = _rank_within(ends, cable_no) if topo.tiers else np.zeros_like(ends)
    n_sw = g.n_nodes - n_e if topo.tiers else 0
    port = np.where(is_nic, ends % rails, sw_rank)
    dev = np.where(is_nic, ends // rails, n_servers + (ends - n_e))

    tier_names = list(topo.switches_by_tier)
    sw_tier = g.node_tier[n_e:].astype(np.int64) if n_sw else np.zeros(0, dtype=np.int64)
    plane_counts = np.bincount(sw_tier, minlength=len(tier_names) + 1)[1:]
    expected = [n // planes for n in topo.switches_by_tier.values()]
    if n_sw and plane_counts.tolist() != expected:
        raise RuntimeError(
            f"{topo.family}: graph switches per tier {plane_counts.tolist()} differ from the "
            f"counts per plane {expected}"
        )
    # switch names, numbered per tier over all planes (plane-major)
    names: list[str] = [f"node{i}" for i in range(n_servers)]
    tiers: list[str] = ["server"] * n_servers
    dev_plane: list[int] = [0] * n_servers
    within = np.zeros(n_sw, dtype=np.int64)
    for t in range(1, len(tier_names) + 1):
        mask = sw_tier == t
        within[mask] = np.arange(int(mask.sum()), dtype=np.int64)
    for p in range(planes):
        for t_idx, k in zip(sw_tier.tolist(), within.tolist(), strict=True):
            n_t = expected[t_idx - 1]
            names.append(f"{tier_names[t_idx - 1]}{p * n_t + k}")
            tiers.append(tier_names[t_idx - 1])
            dev_plane.append(p)

    n_c = a.size
    a_dev, b_dev = dev[:n_c], dev[n_c:]
    a_port, b_port = port[:n_c], port[n_c:]
    a_nic, b_nic = is_nic[:n_c], is_nic[n_c:]
    if planes > 1:
        offs = np.repeat(np.arange(planes, dtype=np.int64) * n_sw, n_c)

        def tile(x: np.ndarray) -> np.ndarray:
            return np.tile(x, planes)

        a_nic, b_nic = tile(a_nic), tile(b_nic)
        a_dev = np.where(a_nic, tile(a_dev), tile(a_dev) + offs)
        b_dev = np.where(b_nic, tile(b_dev), tile(b_dev) + offs)
        a_port, b_port, cls = tile(a_port), tile(b_port), tile(cls)
    link_plane = np.repeat(np.arange(planes, dtype=np.int64), n_c)
    return DeploymentPlan(
        bom=bom,
        media=media,
        n_servers=n_servers,
        device_names=np.array(names, dtype=object),
        device_tier=np.array(tiers, dtype=object),
        device_plane=np.array(dev_plane, dtype=np.int64),
        link_class=cls,
        link_plane=link_plane,
        a_dev=a_dev,
        b_dev=b_dev,
        a_port=a_port,
        b_port=b_port,
        a_nic=a_nic,
        b_nic=b_nic,
    )


def _ocs_plan(bom: BillOfMaterials, cat: Catalog) -> DeploymentPlan:
    """Lay out an OCS fabric's cables: each block's own, and its uplink fibers to OCS ports.

    Devices: every built server (spares too), a pod's leaves and spines (``leaf<k>``,
    ``spine<k>``, numbered over the pods), the OCSes (``ocs<k>``, passive: no transceiver
    at their ports). Uplink ``u`` of block ``b`` lands on OCS ``u // p`` at port ``(b p +
    u mod p) f + 1`` (and the ``f - 1`` ports after it for a duplex uplink, ``f`` fibers
    per uplink). A block's uplinks leave from: its NICs in uplink order (an NVLink domain);
    the face domains' outward NIC ports (a cube: port ``(2 dim + side) c + j`` of a domain,
    the mesh cables taking the others); its spines round-robin (a pod; the leaf of a
    one-leaf pod). The circuits are the plan's ``circuits`` rows.
    """
    topo = bom.topology
    req, p = topo.request, topo.params
    kind = str(p["block"])
    built, U = int(p["n_blocks_built"]), int(p["uplinks_per_block"])
    bg, gpn, nics = int(p["block_gpus"]), req.gpus_per_node, req.nics_per_gpu
    per_ocs, f = int(p["ocs_uplinks_per_block"]), int(p["fibers_per_uplink"])
    n_servers = built * bg // gpn
    names: list[str] = [f"node{i}" for i in range(n_servers)]
    tiers: list[str] = ["server"] * n_servers

    def nic_end(block: np.ndarray, port_in_block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Server and rail of NIC port ``port_in_block`` of ``block``."""
        gpu = block * bg + port_in_block // nics
        return gpu // gpn, (gpu % gpn) * nics + port_in_block % nics

    links = {lc.name: i for i, lc in enumerate(topo.links)}
    cls: list[np.ndarray] = []
    a_dev: list[np.ndarray] = []
    a_port: list[np.ndarray] = []
    a_nic: list[np.ndarray] = []
    b_dev: list[np.ndarray] = []
    b_port: list[np.ndarray] = []
    b_nic: list[np.ndarray] = []

    def add(c: str, ad, ap, an, bd, bp, bn) -> None:  # type: ignore[no-untyped-def]
        cls.append(np.full(np.size(ad), links[c], dtype=np.int64))
        for store, v in zip(
            (a_dev, a_port, a_nic, b_dev, b_port, b_nic), (ad, ap, an, bd, bp, bn), strict=True
        ):
            store.append(np.broadcast_to(np.asarray(v), np.shape(ad)).astype(np.asarray(v).dtype))

    b_id = np.repeat(np.arange(built, dtype=np.int64), U)
    u_id = np.tile(np.arange(U, dtype=np.int64), built)
    up_dev: np.ndarray
    up_port: np.ndarray
    up_nic = kind != "pod"
    if kind == "pod":
        ports = bg * nics
        half = req.radix // 2
        n_leaves, n_spines = int(p["pod_leaves"]), int(p["pod_spines"])
        per_leaf = -(-ports // n_leaves)
        first_leaf = len(names)
        names += [f"leaf{k}" for k in range(built * n_leaves)]
        tiers += ["leaf"] * (built * n_leaves)
        first_spine = len(names)
        names += [f"spine{k}" for k in range(built * n_spines)]
        tiers += ["spine"] * (built * n_spines)
        i = np.tile(np.arange(ports, dtype=np.int64), built)
        blk = np.repeat(np.arange(built, dtype=np.int64), ports)
        srv, rail = nic_end(blk, i)
        leaf = first_leaf + blk * n_leaves + i // per_leaf
        add("nic-leaf", srv, rail, True, leaf, i % per_leaf, False)
        if n_spines:
            spine = first_spine + blk * n_spines + i % n_spines
            # a leaf's ports: its NICs first, then its uplinks; a spine's: leaves, then OCS
            add("leaf-spine", leaf, per_leaf + i % per_leaf, False, spine, i // n_spines, False)
            up_dev = first_spine + b_id * n_spines + u_id % n_spines
            up_port = -(-ports // n_spines) + u_id // n_spines
        else:
            up_dev = first_leaf + b_id * n_leaves
            up_port = ports + u_id
        del half
    elif kind == "cube":
        side, c = 4, int(topo.links[links["cube-mesh"]].n_links // max(1, built) // 144)
        dom, per = req.nvlink_domain, side**3
        face, rest = np.divmod(u_id, side * side * c)
        k, j = np.divmod(rest, c)
        dim, outer = face // 2, face % 2
        coord = np.where(outer == 1, side - 1, 0)
        o1, o2 = k % side, k // side
        xyz = np.zeros((3, u_id.size), dtype=np.int64)
        for d in range(3):
            others = [e for e in range(3) if e != d]
            on = dim == d
            xyz[d, on] = coord[on]
            xyz[others[0], on] = o1[on]
            xyz[others[1], on] = o2[on]
        d_in_cube = xyz[0] + side * (xyz[1] + side * xyz[2])
        port = (2 * dim + outer) * c + j
        up_dev, up_port = nic_end(b_id, d_in_cube * dom * nics + port)
        # the mesh: domain to its +1 neighbour in each dimension, c cables each
        cube_ids = np.arange(built, dtype=np.int64)
        mesh_a, mesh_b, pa, pb = [], [], [], []
        for d in range(3):
            stride = side**d
            node = np.arange(per, dtype=np.int64)
            low = node[(node // stride) % side < side - 1]
            for jj in range(c):
                mesh_a.append(low)
                mesh_b.append(low + stride)
                pa.append(np.full(low.size, 2 * d * c + jj))
                pb.append(np.full(low.size, (2 * d + 1) * c + jj))
        ma, mb = np.concatenate(mesh_a), np.concatenate(mesh_b)
        qa, qb = np.concatenate(pa), np.concatenate(pb)
        blk = np.repeat(cube_ids, ma.size)
        sa, ra = nic_end(blk, np.tile(ma, built) * dom * nics + np.tile(qa, built))
        sb, rb = nic_end(blk, np.tile(mb, built) * dom * nics + np.tile(qb, built))
        add("cube-mesh", sa, ra, True, sb, rb, True)
    else:
        up_dev, up_port = nic_end(b_id, u_id)
    first_ocs = len(names)
    n_ocs = int(p["n_ocs"])
    names += [f"ocs{k}" for k in range(n_ocs)]
    tiers += ["ocs"] * n_ocs
    ocs_dev = first_ocs + u_id // per_ocs
    ocs_port = (b_id * per_ocs + u_id % per_ocs) * f
    add("block-ocs", up_dev, up_port, up_nic, ocs_dev, ocs_port, False)

    media = []
    optic = cat.optic(str(p["optic_key"]))
    for lc in topo.links:
        if lc.name == "block-ocs":
            media.append(
                LinkMedia(None, cat.fiber, optic if up_nic else None, None if up_nic else optic)
            )
        else:
            media.append(link_media(lc, bom.hardware, cat))
    circ = p["circuits_data"]
    circuits = np.stack(
        [
            first_ocs + circ.slot // per_ocs,
            (circ.a * per_ocs + circ.slot % per_ocs) * f,
            (circ.b * per_ocs + circ.slot % per_ocs) * f,
            circ.a,
            circ.b,
        ],
        axis=1,
    ).astype(np.int64)
    passive = np.zeros(len(names), dtype=bool)
    passive[first_ocs:] = True
    n_links = sum(x.size for x in cls)
    return DeploymentPlan(
        bom=bom,
        media=tuple(media),
        n_servers=n_servers,
        device_names=np.array(names, dtype=object),
        device_tier=np.array(tiers, dtype=object),
        device_plane=np.zeros(len(names), dtype=np.int64),
        link_class=np.concatenate(cls),
        link_plane=np.zeros(n_links, dtype=np.int64),
        a_dev=np.concatenate(a_dev).astype(np.int64),
        b_dev=np.concatenate(b_dev).astype(np.int64),
        a_port=np.concatenate(a_port).astype(np.int64),
        b_port=np.concatenate(b_port).astype(np.int64),
        a_nic=np.concatenate(a_nic).astype(bool),
        b_nic=np.concatenate(b_nic).astype(bool),
        device_passive=passive,
        circuits=circuits,
        server_block=np.arange(n_servers, dtype=np.int64) // max(1, bg // gpn),
    )


# ------------------------------------------------------------------------------------------
# cables: links grouped into physical cables


@dataclass(frozen=True, eq=False)
class _Cables:
    """The links of one class, ordered and grouped into physical cables."""

    cls: int
    order: np.ndarray  # link indices in cable order
    per_cable: int  # links per cable (the last cable of the class may hold fewer)

    @property
    def n_cables(self) -> int:
        return -(-int(self.order.size) // self.per_cable)


def _cable_groups(plan: DeploymentPlan) -> list[_Cables]:
    """Group each class's links into the physical cables the BOM counts."""
    out = []
    for c, media in enumerate(plan.media):
        idx = np.flatnonzero(plan.link_class == c)
        k = media.links_per_cable
        if k > 1 and idx.size:
            # the switch end of a NIC link, else end a: adjacent ports share a cage
            sw_b = plan.a_nic[idx] & ~plan.b_nic[idx]
            s_dev = np.where(sw_b, plan.b_dev[idx], plan.a_dev[idx])
            s_port = np.where(sw_b, plan.b_port[idx], plan.a_port[idx])
            o_dev = np.where(sw_b, plan.a_dev[idx], plan.b_dev[idx])
            idx = idx[np.lexsort((s_port, o_dev, s_dev))]
        out.append(_Cables(c, idx, k))
    return out


def _end_labels(plan: DeploymentPlan, side: str) -> np.ndarray:
    """``device:port`` of one end of every link (object array)."""
    dev = plan.a_dev if side == "a" else plan.b_dev
    port = plan.a_port if side == "a" else plan.b_port
    nic = plan.a_nic if side == "a" else plan.b_nic
    n_port = int(port.max()) + 1 if port.size else 1
    if plan.planes > 1:
        nic_names = np.array(
            [f":nic{r}/{p}" for p in range(plan.planes) for r in range(n_port)], dtype=object
        )
        nic_label = nic_names[plan.link_plane * n_port + port]
    else:
        nic_label = np.array([f":nic{r}" for r in range(n_port)], dtype=object)[port]
    sw_label = np.array([f":p{r + 1}" for r in range(n_port)], dtype=object)[port]
    labels: np.ndarray = plan.device_names[dev] + np.where(nic, nic_label, sw_label)
    return labels


def _join_groups(values: np.ndarray, k: int) -> np.ndarray:
    """Join each run of ``k`` consecutive labels with ``+`` (the last run may be shorter)."""
    if k == 1:
        return values
    out = values[0::k].copy()
    for j in range(1, k):
        part = values[j::k]
        out[: part.size] = out[: part.size] + "+" + part
    return out


def _straddling(dev: np.ndarray, k: int) -> np.ndarray:
    """Whether each cable (run of ``k`` links) has that end on more than one device."""
    first = dev[0::k]
    mixed = np.zeros(first.size, dtype=bool)
    for j in range(1, k):
        part = dev[j::k]
        mixed[: part.size] |= part != first[: part.size]
    return mixed


def cabling_columns(plan: DeploymentPlan) -> dict[str, np.ndarray]:
    """Return the cabling plan as columns, one entry per physical cable (in file order).

    Columns: ``cable_id`` (1-based), ``plane`` (only with several planes), ``link_class``,
    ``a_end``, ``b_end`` (``device:port``; ``+`` between the ends of a multi-link cable),
    ``length_m``, ``link_gbps``, ``media`` (``DAC``, ``ACC``, ``LACC`` or ``fiber``),
    ``cable`` (catalog key), ``a_transceiver``, ``b_transceiver`` (catalog keys; empty on
    copper) and ``links`` (logical links in the cable). Text columns are object arrays.
    """
    topo = plan.bom.topology
    a_lab, b_lab = _end_labels(plan, "a"), _end_labels(plan, "b")
    parts: list[dict[str, np.ndarray]] = []

    def const(n: int, value: object) -> np.ndarray:
        return np.full(n, value, dtype=object)

    for grp in _cable_groups(plan):
        lc, media = topo.links[grp.cls], plan.media[grp.cls]
        k, idx = grp.per_cable, grp.order
        n = grp.n_cables
        links = np.full(n, k, dtype=np.int64)
        if idx.size % k:
            links[-1] = idx.size % k
        if media.copper is not None:
            kind, a_tr, b_tr = media.copper.kind.upper(), const(n, ""), const(n, "")
        else:
            kind = "fiber"
            keys = np.array(
                [
                    media.switch_optic.key if media.switch_optic is not None else "",
                    media.nic_optic.key if media.nic_optic is not None else "",
                ],
                dtype=object,
            )
            a_tr = keys[plan.a_nic[idx][0::k].astype(np.int64)]
            b_tr = keys[plan.b_nic[idx][0::k].astype(np.int64)]
            if plan.device_passive is not None:  # an OCS port takes no transceiver
                a_tr = np.where(plan.device_passive[plan.a_dev[idx][0::k]], "", a_tr)
                b_tr = np.where(plan.device_passive[plan.b_dev[idx][0::k]], "", b_tr)
        parts.append(
            {
                "plane": plan.link_plane[idx][0::k],
                "link_class": const(n, lc.name),
                "a_end": _join_groups(a_lab[idx], k),
                "b_end": _join_groups(b_lab[idx], k),
                "length_m": np.full(n, float(lc.length_m)),
                "link_gbps": np.full(n, int(lc.link_gbps), dtype=np.int64),
                "media": const(n, kind),
                "cable": const(n, media.cable.key),
                "a_transceiver": a_tr,
                "b_transceiver": b_tr,
                "links": links,
            }
        )
    columns = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
    if plan.planes > 1:
        order = np.argsort(columns["plane"], kind="stable")
        columns = {key: col[order] for key, col in columns.items()}
    else:
        del columns["plane"]
    n_rows = int(columns["a_end"].size)
    return {"cable_id": np.arange(1, n_rows + 1, dtype=np.int64), **columns}


def cabling_frame(plan: DeploymentPlan) -> pd.DataFrame:
    """Return the cabling plan as a DataFrame, one row per physical cable.

    The columns of :func:`cabling_columns`.
    """
    import pandas as pd

    return pd.DataFrame(cabling_columns(plan))


def _csv_text(columns: dict[str, np.ndarray]) -> str:
    """Write columns as CSV (no field holds a comma, quote or line end: none is quoted)."""
    fields: list[list[str]] = []
    for col in columns.values():
        if col.dtype == object:
            fields.append(col.tolist())
            continue
        values, inverse = np.unique(col, return_inverse=True)
        if values.size <= 4096:  # few distinct numbers (lengths, speeds): format each once
            texts = np.array([str(v) for v in values.tolist()], dtype=object)
            fields.append(texts[inverse].tolist())
        else:
            fields.append([str(v) for v in col.tolist()])
    body = "\n".join(map(",".join, zip(*fields, strict=True)))
    return ",".join(columns) + "\n" + body + "\n"


def _cabling_notes(plan: DeploymentPlan) -> tuple[str, ...]:
    notes = []
    for grp in _cable_groups(plan):
        if grp.per_cable == 1:
            continue
        name = plan.bom.topology.links[grp.cls].name
        k, order = grp.per_cable, grp.order
        # a splitter's legs may reach two servers; a cable's switch end is one cage
        cross = _straddling(plan.b_dev[order], k)
        if not (plan.a_nic[order].all() and not plan.b_nic[order].any()):
            cross |= _straddling(plan.a_dev[order], k)
        n_cross = int(cross.sum())
        if n_cross:
            notes.append(
                f"{name}: {n_cross:,} of {grp.n_cables:,} {k}-link cables have an end on two "
                f"devices (the BOM counts ceil(links / {k}) cables per class); those need "
                "separate cables on site"
            )
    return tuple(notes)


# ------------------------------------------------------------------------------------------
# graph


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
    for grp in _cable_groups(plan):
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


# ------------------------------------------------------------------------------------------
# Slurm


def hostlist(prefix: str, numbers: Sequence[int] | np.ndarray) -> str:
    """Compress ``prefix`` + numbers into a Slurm hostlist expression.

    ``hostlist("node", [0, 1, 2, 5])`` is ``"node[0-2,5]"``; one number gives ``"node5"``.
    """
    nums = sorted({int(n) for n in numbers})
    if not nums:
        return ""
    if len(nums) == 1:
        return f"{prefix}{nums[0]}"
    runs: list[str] = []
    start = prev = nums[0]
    for n in [*nums[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        runs.append(f"{start}" if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return f"{prefix}[{','.join(runs)}]"


@dataclass(frozen=True)
class SlurmSwitch:
    name: str
    nodes: tuple[int, ...] = ()
    children: tuple[str, ...] = ()
    members: str = ""  # the physical switches it stands for, when several


def slurm_tree(plan: DeploymentPlan) -> tuple[list[SlurmSwitch], list[str], list[str]]:
    """Slurm tree switches bottom-up, how the fabric was mapped, and what to warn about."""
    topo = plan.bom.topology
    if topo.tiers == 0 and topo.family == "ocs":
        raise FabricModelError(
            "slurm-topology: an OCS fabric of NVLink domains or cubes has no electrical switch "
            "tree (its blocks meet on circuits); --format slurm-topology-yaml writes its blocks"
        )
    if topo.tiers == 0:
        raise FabricModelError(
            f"slurm-topology: Slurm's tree plugin needs switches; {topo.family} is "
            "switchless"
            + (
                " (use --format slurm-topology-yaml for its NVLink domains as blocks)"
                if _servers_per_domain(plan) > 1
                else ""
            )
        )
    ns = plan.n_servers
    tier_of = plan.device_tier
    tier_names = list(topo.switches_by_tier)
    level = {name: i + 1 for i, name in enumerate(tier_names)}
    notes: list[str] = []
    warnings: list[str] = []
    # leaves: group the leaves that reach the same servers (a rail-optimized unit's rails)
    nic_leaf = plan.a_nic & ~plan.b_nic
    leaf_dev, server = plan.b_dev[nic_leaf], plan.a_dev[nic_leaf]
    pairs = np.unique(leaf_dev * ns + server)
    p_leaf, p_server = np.divmod(pairs, ns)
    bounds = np.flatnonzero(np.diff(p_leaf)) + 1
    group_of: dict[int, int] = {}
    sets: dict[tuple[int, ...], int] = {}
    members: list[list[int]] = []
    for leaf_block, server_block in zip(
        np.split(p_leaf, bounds), np.split(p_server, bounds), strict=True
    ):
        key = tuple(server_block.tolist())
        gid = sets.setdefault(key, len(sets))
        if gid == len(members):
            members.append([])
        members[gid].append(int(leaf_block[0]))
        group_of[int(leaf_block[0])] = gid
    # each server's home: the leaf group holding most of its NIC links
    group_by_leaf = np.full(int(plan.device_names.size), -1, dtype=np.int64)
    for d, gid in group_of.items():
        group_by_leaf[d] = gid
    n_groups = len(members)
    keys, counts = np.unique(server * n_groups + group_by_leaf[leaf_dev], return_counts=True)
    k_server, k_group = np.divmod(keys, n_groups)
    best = np.lexsort((k_group, -counts, k_server))  # per server: most links, then lowest
    first = np.ones(best.size, dtype=bool)
    first[1:] = k_server[best][1:] != k_server[best][:-1]
    home = np.full(ns, -1, dtype=np.int64)
    home[k_server[best][first]] = k_group[best][first]
    if (home < 0).any():
        raise RuntimeError("a server without a leaf link")
    multi = int((np.bincount(k_server, minlength=ns) > 1).sum())
    if multi:
        warnings.append(
            f"{multi:,} servers have NIC links on more than one leaf group; each is listed "
            "under the group holding most of its links (Slurm warns about nodes on several "
            "leaf switches)"
        )
    levels: list[list[SlurmSwitch]] = []
    leaf_prefix = tier_names[0] + ("grp" if any(len(m) > 1 for m in members) else "")
    by_home = np.argsort(home, kind="stable")
    leaf_nodes = np.split(by_home, np.searchsorted(home[by_home], np.arange(1, n_groups)))
    names = [
        f"{leaf_prefix}{g}" if leaf_prefix != tier_names[0] else str(plan.device_names[m[0]])
        for g, m in enumerate(members)
    ]
    levels.append(
        [
            SlurmSwitch(
                names[g],
                nodes=tuple(leaf_nodes[g].tolist()),
                members=_member_text(plan, members[g]),
            )
            for g in range(n_groups)
            if leaf_nodes[g].size
        ]
    )
    if any(len(m) > 1 for m in members):
        notes.append(
            f"{leaf_prefix}<i> stands for the {tier_names[0]} switches that reach the same "
            "servers (one per rail of a rail-optimized scalable unit, or per plane)"
        )
    defined = {s.name for s in levels[0]}
    group_name = {d: names[g] for d, g in group_of.items()}
    # upper tiers: a switch's children are the groups of the switches one tier below
    lo_tier = np.array([level.get(str(t), 0) for t in tier_of], dtype=np.int64)
    a_t, b_t = lo_tier[plan.a_dev], lo_tier[plan.b_dev]
    for t in range(2, len(tier_names) + 1):
        up = (b_t == t) & (a_t == t - 1)
        down = (a_t == t) & (b_t == t - 1)
        upper = np.concatenate([plan.b_dev[up], plan.a_dev[down]])
        lower = np.concatenate([plan.a_dev[up], plan.b_dev[down]])
        children: dict[int, set[str]] = {}
        for hi, lo in zip(upper.tolist(), lower.tolist(), strict=True):
            name = group_name.get(lo)
            if name in defined:
                children.setdefault(hi, set()).add(name)
        sets_t: dict[tuple[str, ...], list[int]] = {}
        for hi in sorted(children):
            sets_t.setdefault(tuple(sorted(children[hi], key=_natural)), []).append(hi)
        merged = any(len(m) > 1 for m in sets_t.values())
        prefix = tier_names[t - 1] + ("grp" if merged else "")
        level_switches = []
        for i, (kids, hs) in enumerate(sets_t.items()):
            name = f"{prefix}{i}" if merged else str(plan.device_names[hs[0]])
            for hi in hs:
                group_name[hi] = name
            level_switches.append(SlurmSwitch(name, children=kids, members=_member_text(plan, hs)))
        if not level_switches:
            break
        levels.append(level_switches)
        defined |= {s.name for s in level_switches}
        if merged:
            notes.append(
                f"{prefix}<i> stands for the {tier_names[t - 1]} switches that reach the "
                f"same {tier_names[t - 2]} groups"
            )
    # a root over every switch nobody lists as a child, when there are several
    listed = {c for lvl in levels for s in lvl for c in s.children}
    orphans = [s.name for lvl in levels for s in lvl if s.name not in listed]
    if len(orphans) > 1:
        root = "fabric"
        why = (
            "the global links join the groups directly (not a tree)"
            if topo.family == "dragonfly-plus"
            else "no physical switch reaches every server"
        )
        warnings.append(
            f"{root} is a virtual root over {len(orphans):,} top switches: {why}; without "
            "it Slurm would not place a job across them (jobs span only nodes connected "
            "by the same switch fabric)"
        )
        levels.append([SlurmSwitch(root, children=tuple(orphans))])
    return [s for lvl in levels for s in lvl], warnings + notes, warnings


def _natural(name: str) -> tuple[str, int]:
    head = name.rstrip("0123456789")
    tail = name[len(head) :]
    return head, int(tail) if tail else -1


def _member_text(plan: DeploymentPlan, devs: Sequence[int]) -> str:
    if len(devs) < 2:
        return ""
    by_tier: dict[str, list[int]] = {}
    for d in devs:
        head, num = _natural(str(plan.device_names[d]))
        by_tier.setdefault(head, []).append(num)
    return " ".join(hostlist(head, nums) for head, nums in by_tier.items())


def _servers_per_domain(plan: DeploymentPlan) -> int:
    req = plan.bom.topology.request
    return max(1, req.nvlink_domain // req.gpus_per_node)


def _blocks(plan: DeploymentPlan) -> list[tuple[str, tuple[int, ...]]]:
    """NVLink domains of several servers as Slurm blocks: ``(name, servers)``.

    An OCS fabric's blocks (NVL72 racks, cubes, pods) are its Slurm blocks: a job inside
    one needs no circuit.
    """
    if plan.server_block is not None:
        per = int(np.bincount(plan.server_block).max())
        if per <= 1:
            return []
        return [
            (f"ocsblock{b}", tuple(np.flatnonzero(plan.server_block == b).tolist()))
            for b in range(int(plan.server_block.max()) + 1)
        ]
    per = _servers_per_domain(plan)
    if per <= 1:
        return []
    servers = np.arange(plan.n_servers, dtype=np.int64)
    domain = servers // per
    return [
        (f"nvl{d}", tuple(servers[domain == d].tolist()))
        for d in range(int(domain.max()) + 1 if servers.size else 0)
    ]


def _header(plan: DeploymentPlan, what: str, doc: str) -> list[str]:
    topo = plan.bom.topology
    tiers = f"{topo.tiers}-tier " if topo.tiers else ""
    planes = f", {plan.planes} planes" if plan.planes > 1 else ""
    return [
        f"# {what} ({doc})",
        f"# scenario {plan.bom.scenario_name!r}: {topo.n_gpus:,} GPUs on {plan.n_servers:,} "
        f"servers node[0-{plan.n_servers - 1}], {tiers}{topo.family}{planes}; "
        f"fabric_model {__version__}",
        "# node<i> is server i of the cabling plan (gpus_per_node consecutive GPUs): rename "
        "to your hostnames",
    ]


def slurm_topology_conf(plan: DeploymentPlan) -> Export:
    """Return a ``topology.conf`` for Slurm's topology/tree plugin.

    Every server is under exactly one leaf-level switch and every switch named in a
    ``Switches=`` list is defined. Leaves that reach the same servers (the rail leaves of a
    rail-optimized scalable unit, the planes' copies) are one Slurm switch, as are upper
    switches that reach the same groups: Slurm places jobs by switch distance, and a
    server under several leaves draws a warning (see :data:`SLURM_TREE_SOURCE`).

    Raises
    ------
    FabricModelError
        For a switchless family (the tree plugin needs switches).
    """
    switches, notes, warnings = slurm_tree(plan)
    lines = _header(plan, "Slurm topology.conf for the topology/tree plugin", SLURM_CONF_DOC)
    lines += [f"# {n}" for n in notes]
    for s in switches:
        if s.members:
            lines.append(f"# {s.name} = {s.members}")
        if s.nodes:
            lines.append(f"SwitchName={s.name} Nodes={hostlist('node', s.nodes)}")
        else:
            lines.append(f"SwitchName={s.name} Switches={_name_list(s.children)}")
    return Export(
        "slurm-topology",
        "\n".join(lines) + "\n",
        len(switches),
        _file_name(plan, "slurm-topology"),
        tuple(warnings),
    )


def _name_list(names: Sequence[str]) -> str:
    by_head: dict[str, list[int]] = {}
    plain: list[str] = []
    for name in names:
        head, num = _natural(name)
        if num < 0:
            plain.append(name)
        else:
            by_head.setdefault(head, []).append(num)
    return ",".join([*(hostlist(h, nums) for h, nums in by_head.items()), *plain])


def slurm_topology_yaml(plan: DeploymentPlan) -> Export:
    """Return a ``topology.yaml`` (Slurm 25.05+): the tree and, if any, the NVLink blocks.

    The tree topology (switch fabrics) is the tree of :func:`slurm_topology_conf`. When an
    NVLink domain spans several servers (NVL72: 18 trays), a block topology lists one block
    per domain with ``block_sizes`` = servers per domain, and is the cluster default (a job
    placed inside one domain talks over NVLink). Switchless families get the blocks only.

    Raises
    ------
    FabricModelError
        For a switchless design whose NVLink domains are single servers (no tree, no block).
    """
    topo = plan.bom.topology
    blocks = _blocks(plan)
    tree: list[SlurmSwitch] = []
    notes: list[str] = []
    warnings: list[str] = []
    if topo.tiers:
        tree, notes, warnings = slurm_tree(plan)
    elif not blocks:
        raise FabricModelError(
            f"slurm-topology-yaml: {topo.family} is switchless (no tree for Slurm's tree "
            f"plugin) and its NVLink domains of {topo.request.nvlink_domain} GPUs are single "
            "servers (no blocks): there is no Slurm topology to write"
        )
    lines = _header(plan, "Slurm topology.yaml (Slurm 25.05+)", SLURM_YAML_DOC)
    lines += [f"# {n}" for n in notes]
    if tree:
        lines += [
            "- topology: fabric",
            f"  cluster_default: {'false' if blocks else 'true'}",
            "  tree:",
            "    switches:",
        ]
        for s in tree:
            if s.members:
                lines.append(f"      # {s.name} = {s.members}")
            lines.append(f"      - switch: {s.name}")
            if s.nodes:
                lines.append(f"        nodes: {hostlist('node', s.nodes)}")
            else:
                lines.append(f"        children: {_name_list(s.children)}")
    if blocks:
        per = max(len(servers) for _, servers in blocks)
        short = [name for name, servers in blocks if len(servers) < per]
        lines += [
            f"# ocs: one block per OCS block of {topo.params['block_gpus']:,} GPUs ({per} "
            "servers); a job across blocks runs on the circuits the OCS sets between them"
            if plan.server_block is not None
            else f"# nvlink: one block per NVLink domain of {topo.request.nvlink_domain} GPUs "
            f"({per} servers)",
        ]
        if short:
            lines.append(
                f"# {', '.join(short)}: a partial domain, fewer servers than the block size"
            )
        lines += [
            f"- topology: {'ocs' if plan.server_block is not None else 'nvlink'}",
            "  cluster_default: true",
            "  block:",
            "    block_sizes:",
            f"      - {per}",
            "    blocks:",
        ]
        for name, servers in blocks:
            lines += [f"      - block: {name}", f"        nodes: {hostlist('node', servers)}"]
    return Export(
        "slurm-topology-yaml",
        "\n".join(lines) + "\n",
        len(tree) + len(blocks),
        _file_name(plan, "slurm-topology-yaml"),
        tuple(warnings),
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
    per = _servers_per_domain(plan)
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
        _file_name(plan, "kueue-topology"),
        tuple(warnings),
    )


# ------------------------------------------------------------------------------------------
# front door


def _file_name(plan: DeploymentPlan, fmt: str) -> str:
    return f"{plan.bom.scenario_name}{EXPORT_FORMATS[fmt].file_suffix}"


def _cabling_export(plan: DeploymentPlan) -> Export:
    columns = cabling_columns(plan)
    return Export(
        "cabling-csv",
        _csv_text(columns),
        int(columns["cable_id"].size),
        _file_name(plan, "cabling-csv"),
        _cabling_notes(plan),
    )


def _graph_export(plan: DeploymentPlan) -> Export:
    data = node_link_data(plan)
    return Export(
        "networkx-json",
        json.dumps(data, separators=(",", ":")),
        len(data["edges"]),
        _file_name(plan, "networkx-json"),
        _cabling_notes(plan),
    )


_WRITERS: dict[str, Callable[[DeploymentPlan], Export]] = {
    "cabling-csv": _cabling_export,
    "slurm-topology": slurm_topology_conf,
    "slurm-topology-yaml": slurm_topology_yaml,
    "networkx-json": _graph_export,
    "kueue-topology": kueue_topology,
}


#: Why a hybrid has no deployment files yet (its partitions do, one at a time).
HYBRID_EXPORT = (
    "hybrid: deployment files are written per partition (set fabric.topology to "
    "hybrid.a_topology or hybrid.b_topology and cluster.n_gpus to its size); allowed: "
    "fat-tree, rail-only, dragonfly-plus, torus-3d, hypercube"
)


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
        from fabric_model.collectives.tuner_csv import tuner_csv

        text, n_rows, notes = tuner_csv(scenario)
        suffix = EXPORT_FORMATS[fmt].file_suffix
        return Export(fmt, text, n_rows, f"{scenario.name}{suffix}", notes)
    if fmt not in _WRITERS:
        raise FabricModelError(f"--format {fmt!r}: must be one of {', '.join(EXPORT_FORMATS)}")
    plan = scenario if isinstance(scenario, DeploymentPlan) else deployment_plan(scenario, catalog)
    return _WRITERS[fmt](plan)
