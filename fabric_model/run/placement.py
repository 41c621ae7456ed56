"""The cluster's nodes as a scheduler sees them, and the placement policies that pick them.

:class:`ClusterLayout` is the built fabric's structure: which servers hang off which leaf
group (the leaves that reach the same servers: a rail-optimized scalable unit's rails are one),
which leaf groups under which spine group (a pod), and the Slurm blocks (NVLink domains of
several servers; a leaf group where a domain is one server). It reuses the grouping the Slurm
exports write (:func:`fabric_model.report.export.slurm_tree`), so a placement here is one Slurm
would make with the exported ``topology.conf`` / ``topology.yaml``.

Policies pick ``k`` whole free nodes (a multi-node job; sub-node jobs take GPUs of one node,
see :mod:`fabric_model.run.cluster_sim`); each returns ``None`` when it cannot place the job:

- ``first-fit``: the ``k`` lowest-numbered free nodes (Slurm's select/cons_tres without a
  topology plugin, which walks the node table in order).
- ``tree``: Slurm topology/tree (https://slurm.schedmd.com/topology.conf.html,
  https://slurm.schedmd.com/topology.html): the lowest-level switch whose subtree has ``k`` free
  nodes, the best fit (fewest free nodes) among those at that level; inside it the leaves with
  the most free nodes first, so the job spans the fewest leaves, then the fewest spines.
- ``block``: Slurm topology/block (https://slurm.schedmd.com/topology.yaml.html): base blocks
  and aggregated blocks of ``BlockSizes`` (base x 2^i, consecutive blocks, as Topograph infers
  them: ``[D, 2D, ..., 2^k D]``); the job goes to the smallest block level with room (one base
  block if one holds it), best fit there, its base blocks most free first; with ``--segment S``
  each segment of ``S`` nodes sits inside one base block (the recommended segments per job size
  are reported, :func:`block_sizes`; the simulation runs without them).
- ``tas``: Kueue Topology-Aware Scheduling
  (https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/): levels block (spine
  group) / rack (leaf group or NVLink domain) / host. ``podset-preferred-topology: rack``: one
  rack if any fits (the smallest that fits: BestFit), else the fewest racks of one block taken
  largest first, the last the smallest that holds the rest; with
  ``podset-required-topology: block`` a job that fits one block's capacity waits rather than
  spread over blocks.

On an optical-circuit-switched fabric (``fabric.topology = ocs``) a job gets a slice of whole
blocks joined by circuits of its own instead (:mod:`fabric_model.run.slices`): ``ocs-slice``
(the default there: the shape the design's circuits need), ``ocs-any`` (any free blocks) and
``ocs-box`` (a box of the block grid, as a torus pod without an OCS places). The switched
fabrics' policies are refused on an OCS design and the slice policies elsewhere, naming
``fabric.topology``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fabric_model.errors import FabricModelError
from fabric_model.run.slices import SliceGrid, grid_dims, ocs_any, ocs_box, ocs_slice
from fabric_model.scenario import Scenario
from fabric_model.scenario.ocs import reconfig_ms

__all__ = [
    "PLACEMENTS",
    "POLICIES",
    "SLICE_POLICIES",
    "ClusterLayout",
    "blocks_spanned",
    "check_policy",
    "default_policy",
    "default_segment",
    "leaves_spanned",
    "place",
    "policies_for",
]


@dataclass(frozen=True, eq=False)
class ClusterLayout:
    """Servers and the groups they hang off (see the module docstring)."""

    n_nodes: int
    gpus_per_node: int
    nics_per_gpu: int
    servers_per_domain: int
    leaf_of: np.ndarray  # node -> leaf group
    pod_of_leaf: np.ndarray  # leaf group -> spine group (pod)
    block_of: np.ndarray  # node -> base block
    block_nodes: int  # nodes per base block (the largest)
    n_leaf_switches: int
    n_upper_switches: int
    tiers: int
    #: an OCS design's blocks as slices are placed on them (None on a switched fabric)
    ocs: SliceGrid | None = None

    @property
    def n_leaves(self) -> int:
        """Leaf groups."""
        return int(self.pod_of_leaf.size)

    @property
    def n_blocks(self) -> int:
        """Base blocks."""
        return int(self.block_of.max()) + 1 if self.block_of.size else 0

    @property
    def n_gpus(self) -> int:
        """GPUs."""
        return self.n_nodes * self.gpus_per_node

    @property
    def pod_of(self) -> np.ndarray:
        """Node -> spine group."""
        return self.pod_of_leaf[self.leaf_of]

    @classmethod
    def from_scenario(cls, scenario: Scenario) -> ClusterLayout:
        """Build the layout from the scenario's fabric (its Slurm tree, its NVLink domains).

        Raises
        ------
        FabricModelError
            If the design cannot be deployed (a hybrid, one NVLink domain for everything).
        """
        from fabric_model.report.export import deployment_plan, slurm_tree

        c = scenario.cluster
        gpn = c.gpus_per_node
        if c.n_gpus % gpn:
            raise FabricModelError(
                f"cluster.n_gpus = {c.n_gpus}: schedule needs whole servers of "
                f"cluster.gpus_per_node = {gpn}"
            )
        n_nodes = c.n_gpus // gpn
        spd = max(1, c.nvlink_domain // gpn)
        plan = deployment_plan(scenario)
        topo = plan.bom.topology
        leaf_of = np.arange(n_nodes, dtype=np.int64) // spd
        pod_of_leaf = np.zeros(int(leaf_of.max()) + 1, dtype=np.int64)
        n_leaf_sw, n_upper = 0, 0
        if topo.tiers:
            switches, _, _ = slurm_tree(plan)
            # an OCS design's spare blocks are built beyond cluster.n_gpus: their servers are
            # not the scheduler's (ocs.spare_blocks take failed blocks' places)
            leaves = [s for s in switches if any(n < n_nodes for n in s.nodes)]
            leaf_idx = {s.name: i for i, s in enumerate(leaves)}
            leaf_of = np.full(n_nodes, -1, dtype=np.int64)
            for i, s in enumerate(leaves):
                mine = np.asarray(s.nodes, dtype=np.int64)
                leaf_of[mine[mine < n_nodes]] = i
            pod_of_leaf = np.zeros(len(leaves), dtype=np.int64)
            upper = [s for s in switches if s.children and any(k in leaf_idx for k in s.children)]
            for p, s in enumerate(upper):
                for k in s.children:
                    if k in leaf_idx:
                        pod_of_leaf[leaf_idx[k]] = p
            tier_counts = list(topo.switches_by_tier.values())
            n_leaf_sw = int(tier_counts[0])
            n_upper = int(sum(tier_counts[1:]))
        if spd > 1:
            block_of = np.arange(n_nodes, dtype=np.int64) // spd
        else:
            block_of = leaf_of.copy()
        block_nodes = int(np.bincount(block_of).max())
        grid = _slice_grid(scenario, topo.params, gpn) if topo.family == "ocs" else None
        return cls(
            n_nodes,
            gpn,
            c.nics_per_gpu,
            spd,
            leaf_of,
            pod_of_leaf,
            block_of,
            block_nodes,
            n_leaf_sw,
            n_upper,
            topo.tiers,
            grid,
        )


def _slice_grid(scenario: Scenario, params: Any, gpn: int) -> SliceGrid:
    """Return the OCS design's blocks as slices are placed on them (a ``SliceGrid``).

    Raises
    ------
    FabricModelError
        On ``ocs.failed_blocks`` (the one-job what-if: the scheduler draws its own failures)
        and on blocks that are not whole servers.
    """
    o = scenario.ocs
    if o.failed_blocks:
        raise FabricModelError(
            f"ocs.failed_blocks = {o.failed_blocks}: the one-job availability what-if; schedule "
            "draws failures from reliability.* and replaces failed blocks by spares "
            "(ocs.spare_blocks): set it to 0"
        )
    bg = int(params["block_gpus"])
    if bg % gpn:
        raise FabricModelError(
            f"ocs.block_gpus = {bg}: schedule places whole servers, so a block must be whole "
            f"servers of cluster.gpus_per_node = {gpn}"
        )
    n, built = int(params["n_blocks"]), int(params["n_blocks_built"])
    static = params["circuits_data"] if o.reconfigure == "never" else None
    return SliceGrid(
        n_blocks=n,
        n_built=built,
        nodes_per_block=bg // gpn,
        block_gpus=bg,
        uplinks=int(params["uplinks_per_block"]),
        dims=grid_dims(n, built, o.circuits, o.reconfigure, params.get("block_dims")),
        circuits=o.circuits,
        reconfigure=o.reconfigure,
        spare_blocks=int(o.spare_blocks),
        reconfig_s=reconfig_ms(scenario) / 1000.0,
        static=static,
        kind=str(params["block"]),
    )


def leaves_spanned(layout: ClusterLayout, nodes: np.ndarray) -> int:
    """Return the leaf groups a placement touches."""
    return int(np.unique(layout.leaf_of[nodes]).size)


def blocks_spanned(layout: ClusterLayout, nodes: np.ndarray) -> int:
    """Return the base blocks a placement touches."""
    return int(np.unique(layout.block_of[nodes]).size)


def default_segment(layout: ClusterLayout, k: int) -> int:
    """Return the ``--segment`` for a job of ``k`` nodes.

    All of it if one base block holds it, else the largest divisor of ``k`` that fits one base
    block (NVIDIA's GB200 study recommends segments that divide the job).
    """
    b = layout.block_nodes
    if k <= b:
        return k
    return max(d for d in range(1, b + 1) if k % d == 0)


def _first_fit(layout: ClusterLayout, free: np.ndarray, k: int) -> np.ndarray | None:
    idx = np.flatnonzero(free)
    return idx[:k] if idx.size >= k else None


def _take_groups(
    free: np.ndarray, group_of: np.ndarray, groups: np.ndarray, k: int, per: int = 1
) -> np.ndarray | None:
    """Take ``k`` free nodes from ``groups`` in the given order, ``per`` at a time per group."""
    out: list[np.ndarray] = []
    need = k
    for g in groups.tolist():
        if need <= 0:
            break
        idx = np.flatnonzero(free & (group_of == g))
        take = min(idx.size // per * per, need)
        if take:
            out.append(idx[:take])
            need -= take
    if need > 0:
        return None
    return np.sort(np.concatenate(out))


def _most_free_first(counts: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Candidates by free count descending, then index."""
    return candidates[np.lexsort((candidates, -counts[candidates]))]


def _tree(layout: ClusterLayout, free: np.ndarray, k: int) -> np.ndarray | None:
    leaf = layout.leaf_of
    per_leaf = np.bincount(leaf[free], minlength=layout.n_leaves)
    fits = np.flatnonzero(per_leaf >= k)
    if fits.size:  # one leaf: the best fit
        best = fits[np.lexsort((fits, per_leaf[fits]))][0]
        return _take_groups(free, leaf, np.array([best]), k)
    pods = layout.pod_of_leaf
    per_pod = np.bincount(pods, weights=per_leaf, minlength=int(pods.max()) + 1)
    fits = np.flatnonzero(per_pod >= k)
    if fits.size:  # one spine group: best fit, its leaves most free first
        best = fits[np.lexsort((fits, per_pod[fits]))][0]
        cand = np.flatnonzero(pods == best)
        return _take_groups(free, leaf, _most_free_first(per_leaf, cand), k)
    if int(per_leaf.sum()) < k:
        return None
    # the root: spine groups most free first, inside each its leaves most free first
    order = []
    for p in _most_free_first(per_pod, np.arange(per_pod.size)).tolist():
        order.extend(_most_free_first(per_leaf, np.flatnonzero(pods == p)).tolist())
    return _take_groups(free, leaf, np.asarray(order, dtype=np.int64), k)


def _block(
    layout: ClusterLayout, free: np.ndarray, k: int, segment: int | None = None
) -> np.ndarray | None:
    s = segment or 1  # no --segment: the job may spread over its aggregated block's nodes
    if k % s or s > layout.block_nodes:
        raise FabricModelError(
            f"--segment {s}: must divide the job's {k} nodes and fit a base block of "
            f"{layout.block_nodes}"
        )
    blk = layout.block_of
    n_b = layout.n_blocks
    per_block = np.bincount(blk[free], minlength=n_b)
    segs = per_block // s
    need = k // s
    level = 0
    while True:
        width = 1 << level
        agg = np.arange(n_b) // width
        segs_agg = np.bincount(agg, weights=segs, minlength=int(agg.max()) + 1)
        fits = np.flatnonzero(segs_agg >= need)
        if fits.size:
            free_agg = np.bincount(agg, weights=per_block, minlength=segs_agg.size)
            best = fits[np.lexsort((fits, free_agg[fits]))][0]
            cand = np.flatnonzero(agg == best)
            # blocks with the most whole segments first: the fewest blocks
            order = cand[np.lexsort((cand, -segs[cand]))]
            return _take_groups(free, blk, order, k, per=s)
        if width >= n_b:
            return None
        level += 1


def _tas(layout: ClusterLayout, free: np.ndarray, k: int) -> np.ndarray | None:
    rack = layout.block_of  # a rack: an NVLink domain, or a leaf group where a domain is one server
    n_r = layout.n_blocks
    per_rack = np.bincount(rack[free], minlength=n_r)
    fits = np.flatnonzero(per_rack >= k)
    if fits.size:  # preferred rack: BestFit (the least free rack that holds it)
        best = fits[np.lexsort((fits, per_rack[fits]))][0]
        return _take_groups(free, rack, np.array([best]), k)
    pod_of_rack = np.zeros(n_r, dtype=np.int64)
    pod_of_rack[rack] = layout.pod_of
    cap_pod = np.bincount(pod_of_rack, weights=np.bincount(rack, minlength=n_r))
    per_pod = np.bincount(pod_of_rack, weights=per_rack, minlength=cap_pod.size)

    def racks_of(pods: np.ndarray) -> np.ndarray:
        cand = np.flatnonzero(np.isin(pod_of_rack, pods))
        order = _most_free_first(per_rack, cand)
        # the largest racks first, the last one the smallest that still holds the rest
        taken, need = [], k
        for i, r in enumerate(order.tolist()):
            if need <= 0:
                break
            rest = order[i:]
            fit = rest[per_rack[rest] >= need]
            if fit.size:
                taken.append(int(fit[np.lexsort((fit, per_rack[fit]))][0]))
                need = 0
                break
            taken.append(r)
            need -= int(per_rack[r])
        return np.asarray(taken, dtype=np.int64)

    fits = np.flatnonzero(per_pod >= k)
    if fits.size:
        best = fits[np.lexsort((fits, per_pod[fits]))][0]
        return _take_groups(free, rack, racks_of(np.array([best])), k)
    if (cap_pod >= k).any():  # podset-required-topology: block
        return None
    if int(per_rack.sum()) < k:
        return None
    return _take_groups(free, rack, racks_of(np.arange(cap_pod.size)), k)


def _grid(layout: ClusterLayout) -> SliceGrid:
    if layout.ocs is None:  # place() refuses first; a direct call lands here
        raise FabricModelError("a slice policy places on fabric.topology = ocs only")
    return layout.ocs


def _ocs_slice(layout: ClusterLayout, free: np.ndarray, k: int) -> np.ndarray | None:
    return ocs_slice(_grid(layout), free, k)


def _ocs_any(layout: ClusterLayout, free: np.ndarray, k: int) -> np.ndarray | None:
    return ocs_any(_grid(layout), free, k)


def _ocs_box(layout: ClusterLayout, free: np.ndarray, k: int) -> np.ndarray | None:
    return ocs_box(_grid(layout), free, k)


#: The placement policies, by the name ``--policy`` takes: each picks ``k`` whole nodes of a
#: free mask on the layout, or returns None when it cannot now (a slice policy returns every
#: server of the slice's blocks, the job's ranks on the first ``k``). A new policy is one
#: function and one entry here (the command line, the page and the tests read the names from
#: it, :func:`policies_for`).
PLACEMENTS: dict[str, Callable[[ClusterLayout, np.ndarray, int], np.ndarray | None]] = {
    "first-fit": _first_fit,
    "tree": _tree,
    "block": _block,
    "tas": _tas,
    "ocs-slice": _ocs_slice,
    "ocs-any": _ocs_any,
    "ocs-box": _ocs_box,
}
#: The policies that place slices of OCS blocks (``fabric.topology = ocs``).
SLICE_POLICIES = ("ocs-slice", "ocs-any", "ocs-box")
#: The switched fabrics' policies, in the registry's order.
POLICIES = tuple(p for p in PLACEMENTS if p not in SLICE_POLICIES)


def policies_for(layout: ClusterLayout) -> tuple[str, ...]:
    """Return the policies that place on ``layout``'s fabric, in the registry's order.

    An OCS design takes the slice policies (``ocs-box`` only where a box of blocks is a
    slice: reconfigured circuits, or an installed torus); every other fabric the rest.
    """
    g = layout.ocs
    if g is None:
        return POLICIES
    if not g.reconfigurable and g.circuits not in ("torus", "twisted-torus"):
        return tuple(p for p in SLICE_POLICIES if p != "ocs-box")
    return SLICE_POLICIES


def default_policy(layout: ClusterLayout) -> str:
    """``ocs-slice`` on an OCS design, ``tree`` (Slurm topology/tree) elsewhere."""
    return "ocs-slice" if layout.ocs is not None else "tree"


def check_policy(policy: str, layout: ClusterLayout) -> None:
    """Refuse a policy that does not place on ``layout``'s fabric, naming the key.

    Raises
    ------
    FabricModelError
        For an unknown policy, a switched fabric's policy on an OCS design, or a slice
        policy elsewhere.
    """
    if policy not in PLACEMENTS:
        raise FabricModelError(f"--policy {policy}: one of {', '.join(PLACEMENTS)}")
    allowed = policies_for(layout)
    if policy in allowed:
        return
    if layout.ocs is not None:
        raise FabricModelError(
            f"--policy {policy}: fabric.topology = ocs places jobs on slices of blocks joined "
            f"by their own circuits: one of {', '.join(allowed)}"
            + (
                " (ocs-box needs a torus of blocks: ocs.circuits = torus, or ocs.reconfigure "
                "job or phase)"
                if policy == "ocs-box"
                else ""
            )
        )
    raise FabricModelError(
        f"--policy {policy}: places slices of blocks on fabric.topology = ocs only; one of "
        f"{', '.join(allowed)}"
    )


def place(policy: str, layout: ClusterLayout, free: np.ndarray, k: int) -> np.ndarray | None:
    """Pick ``k`` of the ``free`` nodes (a bool mask) by ``policy``; None: it cannot now.

    Raises
    ------
    FabricModelError
        For an unknown policy, or one that does not place on this fabric
        (:func:`check_policy`).
    """
    check_policy(policy, layout)
    if k <= 0 or int(free.sum()) < k:
        return None
    return PLACEMENTS[policy](layout, free, k)


def block_sizes(layout: ClusterLayout, job_nodes: list[int]) -> dict[str, object]:
    """Recommended Slurm ``BlockSizes`` and ``--segment`` per job size from a run's jobs.

    ``BlockSizes``: the base block and its doublings up to the level the largest job needed
    (Topograph's ``[D, 2D, ..., 2^k D]``); ``--segment`` per job size in nodes:
    :func:`default_segment`.
    """
    b = layout.block_nodes
    biggest = max(job_nodes or [1])
    levels = max(0, math.ceil(math.log2(max(1, -(-biggest // b)))))
    sizes = [b << i for i in range(levels + 1) if (b << i) <= max(b, layout.n_nodes)]
    seg = {str(k): default_segment(layout, k) for k in sorted(set(job_nodes)) if k > 1}
    return {"base_block_nodes": b, "BlockSizes": sizes, "segment_by_job_nodes": seg}
