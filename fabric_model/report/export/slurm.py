"""Slurm's topology: ``topology.conf`` for the tree plugin, ``topology.yaml`` with blocks.

``topology.conf`` for the tree plugin and ``topology.yaml`` (Slurm 25.05+) with the tree and,
when NVLink domains span several servers, a block topology of the domains
(https://slurm.schedmd.com/topology.conf.html, https://slurm.schedmd.com/topology.yaml.html).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fabric_model import __version__
from fabric_model.errors import FabricModelError
from fabric_model.report.export.formats import Export, file_name
from fabric_model.report.export.plan import DeploymentPlan

__all__ = [
    "SLURM_CONF_DOC",
    "SLURM_TREE_SOURCE",
    "SLURM_YAML_DOC",
    "SlurmSwitch",
    "hostlist",
    "servers_per_domain",
    "slurm_topology_conf",
    "slurm_topology_yaml",
    "slurm_tree",
]

SLURM_CONF_DOC = "https://slurm.schedmd.com/topology.conf.html"
SLURM_YAML_DOC = "https://slurm.schedmd.com/topology.yaml.html"
#: Where Slurm warns about a node under several leaf switches (why each server has one home).
SLURM_TREE_SOURCE = "SchedMD/slurm src/plugins/topology/tree/switch_record.c"


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
    """One switch of Slurm's tree: its servers (leaf) or child switches, and what it stands for."""

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
                if servers_per_domain(plan) > 1
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


def servers_per_domain(plan: DeploymentPlan) -> int:
    """Return the servers of one NVLink domain (1 for single-server domains)."""
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
    per = servers_per_domain(plan)
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
        file_name(plan, "slurm-topology"),
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
        file_name(plan, "slurm-topology-yaml"),
        tuple(warnings),
    )
