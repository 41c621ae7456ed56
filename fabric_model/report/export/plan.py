"""The deployment plan: every cable of a design, end to end, as arrays.

Everything the exports write is derived from the built topology's cables
(``Topology.graph``: one entry per cable, in link-class order) and from the bill of
materials' media choice (:func:`fabric_model.plant.cost.link_media`), so the files agree with
the BOM by construction.

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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabric_model.catalog import Catalog, load_catalog
from fabric_model.errors import FabricModelError, InfeasibleDesignError
from fabric_model.plant.cost import BillOfMaterials, LinkMedia, bill_of_materials, link_media
from fabric_model.scenario import Scenario

__all__ = ["HYBRID_EXPORT", "DeploymentPlan", "deployment_plan"]

#: Why a hybrid has no deployment files yet (its partitions do, one at a time).
HYBRID_EXPORT = (
    "hybrid: deployment files are written per partition (set fabric.topology to "
    "hybrid.a_topology or hybrid.b_topology and cluster.n_gpus to its size); allowed: "
    "fat-tree, rail-only, dragonfly-plus, torus-3d, hypercube"
)


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
