"""Section ``ocs``: blocks joined by optical circuit switches (``fabric.topology = ocs``).

The keys the issue's contract names (``ocs.block``, ``ocs.block_gpus``, ``ocs.switch``,
``ocs.circuits``, ``ocs.reconfig_ms``, ``ocs.reconfigure``) and the availability what-if
(``ocs.spare_blocks``, ``ocs.failed_blocks``); the model is :mod:`fabric_model.topology.ocs`.
A scenario on another family ignores the section.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from fabric_model.catalog import load_catalog
from fabric_model.errors import ScenarioError
from fabric_model.scenario.fields import FieldSpec, _f
from fabric_model.scenario.workload import rank_order

__all__ = [
    "OCS_BLOCKS",
    "OCS_CIRCUITS",
    "OCS_RECONFIGURE",
    "OCS_SWITCHES",
    "OcsSpec",
    "check_ocs",
    "ocs_plan_key",
    "reconfig_ms",
    "reduction_scenario",
]

#: What one block is: an NVLink domain (an HGX server's 8 GPUs, an NVL72 rack), a 4 x 4 x 4
#: torus cube of NVLink domains (TPU v4's rack), or a pod with its own leaf-spine fabric.
OCS_BLOCKS = ("nvlink", "cube", "pod")
#: The circuit patterns between blocks.
OCS_CIRCUITS = ("uniform", "torus", "twisted-torus", "ring", "job")
#: When the circuits change: never (installed once), at each job start, or per step phase.
OCS_RECONFIGURE = ("never", "job", "phase")
#: The catalog's optical circuit switches (``assets/catalog.yaml`` section ``ocs``).
OCS_SWITCHES: tuple[str, ...] = tuple(load_catalog().ocs)

#: Most blocks kept aside or failed in the what-if (the OCS port count bounds blocks anyway).
_MAX_BLOCKS = 1024


@dataclass(frozen=True)
class OcsSpec:
    """Blocks, optical circuit switches, circuits and reconfiguration of an OCS fabric."""

    block: str = _f(
        "nvlink",
        FieldSpec(
            "choice",
            "ocs: what one block is: nvlink = one NVLink domain (an 8-GPU server, an NVL72 "
            "rack) whose NIC ports land on the OCS; cube = a 4 x 4 x 4 torus cube of NVLink "
            "domains whose face links land on the OCS (TPU v4's rack); pod = ocs.block_gpus "
            "GPUs on their own non-blocking leaf-spine, its spines' uplinks on the OCS",
            choices=OCS_BLOCKS,
        ),
    )
    block_gpus: int | str = _f(
        "auto",
        FieldSpec(
            "int",
            "ocs: GPUs per block (whole NVLink domains); auto = the NVLink domain (nvlink), "
            "64 domains (cube), the largest pod a switch tier of the vendor's radix holds "
            "(k^2 / 4 NIC ports) or half the cluster if smaller (pod); must divide "
            "cluster.n_gpus",
            "GPUs",
            min=1,
            max=1_048_576,
            auto=True,
        ),
    )
    switch: str = _f(
        "lumentum-r300",
        FieldSpec(
            "choice",
            "ocs: the optical circuit switch (catalog section ocs: ports, insertion loss, "
            "reconfiguration time, power, price); each OCS gives every block the same number "
            "of ports, so the blocks are at most its ports / fibers per uplink",
            choices=OCS_SWITCHES,
        ),
    )
    circuits: str = _f(
        "uniform",
        FieldSpec(
            "choice",
            "ocs: the circuits between blocks: uniform = spread evenly over every block pair; "
            "torus = a 3D torus of blocks (TPU v4); twisted-torus = its long dimension's "
            "wraparound shifted by half the others (n x n x 2n blocks); ring = every circuit "
            "to the two ring neighbours (a DP ring); job = the job's DP ring and PP chain get "
            "direct circuits, the rest spread",
            choices=OCS_CIRCUITS,
        ),
    )
    reconfig_ms: float | str = _f(
        "auto",
        FieldSpec(
            "float",
            "ocs: time to set a new set of circuits; auto = the switch's catalog figure "
            "(MEMS: milliseconds, Mission Apollo 2022; CALIENT S320 bulk: up to 200 ms; an "
            "OCS inside silicon-photonics transceivers: 60-80 us, InfiniteHBD, SIGCOMM 2025)",
            "ms",
            min=0.01,
            max=1000.0,
            auto=True,
            step=0.01,
        ),
    )
    reconfigure: str = _f(
        "job",
        FieldSpec(
            "choice",
            "ocs: when the circuits change: never = installed once (ocs.circuits stay for "
            "every job); job = set at each job start; phase = twice per step, the expert "
            "all-to-all and pipeline sends on ocs.circuits and the gradient reduction on ring "
            "circuits, paying ocs.reconfig_ms at each switch",
            choices=OCS_RECONFIGURE,
        ),
    )
    spare_blocks: int = _f(
        0,
        FieldSpec(
            "int",
            "ocs: blocks built beyond the job's (on the OCS, a spare takes a failed block's "
            "place by reconfiguring circuits)",
            "blocks",
            min=0,
            max=_MAX_BLOCKS,
        ),
    )
    failed_blocks: int = _f(
        0,
        FieldSpec(
            "int",
            "ocs: what-if: blocks down; the job runs on healthy blocks (spares first), and its "
            "circuits route around the failed ones (re-formed among the job's blocks unless "
            "ocs.reconfigure = never)",
            "blocks",
            min=0,
            max=_MAX_BLOCKS,
        ),
    )


def check_ocs(s: Any) -> None:
    """Refuse ``ocs`` keys that contradict each other (only when ``fabric.topology = ocs``).

    Raises
    ------
    ScenarioError
        On ``ocs.reconfigure`` for job circuits that are never set, on
        ``ocs.failed_blocks`` beyond the spares.
    """
    if s.fabric.topology != "ocs":
        return
    o: OcsSpec = s.ocs
    if o.circuits == "job" and o.reconfigure == "never":
        raise ScenarioError(
            "ocs.reconfigure",
            o.reconfigure,
            "ocs.circuits = job sets circuits for each job at its start: allowed job or phase "
            "(or another ocs.circuits pattern with never)",
        )
    if o.failed_blocks > o.spare_blocks:
        raise ScenarioError(
            "ocs.failed_blocks",
            o.failed_blocks,
            f"must be at most ocs.spare_blocks = {o.spare_blocks}: the job needs all its "
            f"blocks, and only spares can take a failed block's place",
        )


def ocs_plan_key(s: Any) -> tuple[Any, ...]:
    """Return what an OCS fabric reads of the plan: its degrees when its circuits follow the job.

    ``ocs.circuits = job`` lays circuits along the job's DP rings and PP chains, which the
    plan's TP, CP, EP and PP degrees and its rank order (``parallel.order``, resolved with
    ``training.framework``) place; every other fabric reads nothing of the plan (``()``).
    Part of the built fabric's cache key (``fabric_model.training.fabric.FABRIC_READS``).
    """
    if s.fabric.topology != "ocs" or s.ocs.circuits != "job":
        return ()
    p = s.parallel
    return (p.tp, p.cp, p.ep, p.pp, rank_order(p, s.training))


def reconfig_ms(s: Any) -> float:
    """Return the time to set a new circuit set, ms: ``ocs.reconfig_ms``, or the switch's."""
    if s.ocs.reconfig_ms != "auto":
        return float(s.ocs.reconfig_ms)
    return float(load_catalog().ocs_switch(s.ocs.switch).reconfig_ms)


def reduction_scenario(s: Any) -> Any:
    """Return the scenario the gradient reduction runs on: with ``phase``, ring circuits.

    ``ocs.reconfigure = phase`` sets ring circuits for the data-parallel reduction and
    ``ocs.circuits`` back for the forward and backward (:mod:`fabric_model.training.step`);
    any other scenario reduces on its own fabric.
    """
    if s.fabric.topology != "ocs" or s.ocs.reconfigure != "phase" or s.ocs.circuits == "ring":
        return s
    return dataclasses.replace(s, ocs=dataclasses.replace(s.ocs, circuits="ring"))
