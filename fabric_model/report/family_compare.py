"""The same cluster on several fabric families, side by side: cost, collectives, training steps.

What the Cost and Explore pages show to put an OCS fabric beside a fat-tree and a rail-only
fabric of the same GPUs: for each family, the scenario with only ``fabric.topology`` changed
(the same GPUs, vendor, link speed, and for ``ocs`` the scenario's ``ocs`` section), its
compute fabric's capex and power, the all-reduce and all-to-all bus bandwidth at 1 GiB
(NCCL-like ``auto``), and one step of a dense and of an MoE model with a fixed plan (the
dense model's gradient all-reduce crosses the fabric; the MoE model's expert all-to-all
crosses NVLink domains), with tokens per second per $M of cluster capex (servers and
network), the throughput at equal cost. Each figure a family cannot give is ``nan`` with
the reason.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from fabric_model.collectives import AlgorithmUnavailableError, collective
from fabric_model.errors import FabricModelError
from fabric_model.families import family_label
from fabric_model.plant.cost import bill_of_materials
from fabric_model.scenario import Scenario, apply_overrides
from fabric_model.training import training_step
from fabric_model.units import GIB

__all__ = [
    "COMPARED_FAMILIES",
    "DENSE_CASE",
    "MOE_CASE",
    "FamilyRow",
    "compare_families",
]

#: The families compared by default, in display order.
COMPARED_FAMILIES = ("fat-tree", "rail-only", "ocs")
#: The dense model and plan: TP inside an 8-GPU domain, data parallel across the fabric.
DENSE_CASE: dict[str, Any] = {
    "model.name": "llama3-8b",
    "parallel.tp": 8,
    "parallel.pp": 1,
    "parallel.cp": 1,
    "parallel.ep": 1,
    "parallel.vpp": 1,
    "parallel.dp": "auto",
}
#: The MoE model and plan: EP 8 over TP 2, so an expert group spans two 8-GPU domains.
MOE_CASE: dict[str, Any] = {
    "model.name": "mixtral-8x7b",
    "parallel.tp": 2,
    "parallel.pp": 1,
    "parallel.cp": 1,
    "parallel.ep": 8,
    "parallel.vpp": 1,
    "parallel.dp": "auto",
}


@dataclass(frozen=True)
class FamilyRow:
    """One family's figures on the scenario's cluster (``nan`` where it cannot give one)."""

    family: str
    label: str
    capex_usd: float = math.nan
    power_w: float = math.nan
    cluster_capex_usd: float = math.nan
    allreduce_busbw_GBps: float = math.nan
    alltoall_busbw_GBps: float = math.nan
    dense_step_s: float = math.nan
    moe_step_s: float = math.nan
    dense_tokens_per_s_per_musd: float = math.nan
    moe_tokens_per_s_per_musd: float = math.nan
    reasons: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """Return the row as a plain dict (``reasons`` joined)."""
        out = asdict(self)
        out["reasons"] = "; ".join(self.reasons)
        return out


def _busbw(scenario: Scenario, op: str) -> float:
    (row,) = collective(scenario, op, "auto", [GIB])
    return float(row.busbw_GBps)


def compare_families(
    scenario: Scenario, families: tuple[str, ...] = COMPARED_FAMILIES
) -> list[FamilyRow]:
    """Return one :class:`FamilyRow` per family for the scenario's cluster (module docstring)."""
    rows = []
    for fam in families:
        reasons: list[str] = []
        values: dict[str, float] = {}
        try:
            variant = apply_overrides(scenario, {"fabric.topology": fam})
            bom = bill_of_materials(variant)
        except FabricModelError as exc:
            rows.append(FamilyRow(fam, family_label(fam), reasons=(f"cannot be built: {exc}",)))
            continue
        values.update(
            capex_usd=bom.capex_usd, power_w=bom.power_w, cluster_capex_usd=bom.cluster_capex_usd
        )
        for op in ("allreduce", "alltoall"):
            try:
                values[f"{op}_busbw_GBps"] = _busbw(variant, op)
            except (FabricModelError, AlgorithmUnavailableError) as exc:
                reasons.append(f"{op}: {exc}")
        for case, over in (("dense", DENSE_CASE), ("moe", MOE_CASE)):
            try:
                step = training_step(apply_overrides(variant, over))
            except FabricModelError as exc:
                reasons.append(f"{case} step: {exc}")
                continue
            if not step.feasible:
                reasons.append(f"{case} step: {step.reason}")
                continue
            values[f"{case}_step_s"] = step.step_time_s
            values[f"{case}_tokens_per_s_per_musd"] = step.tokens_per_s / (
                bom.cluster_capex_usd / 1e6
            )
        rows.append(FamilyRow(fam, family_label(fam), **values, reasons=tuple(reasons)))
    return rows
