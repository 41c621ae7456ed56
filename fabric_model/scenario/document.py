"""The whole scenario (:class:`Scenario`) and the checks that span sections."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fabric_model.errors import ScenarioError, ScenarioFileError
from fabric_model.scenario.costs import CostSpec, ReliabilitySpec
from fabric_model.scenario.hardware import ClusterSpec, FabricSpec
from fabric_model.scenario.hybrid import HybridSpec
from fabric_model.scenario.nccl import NcclSpec
from fabric_model.scenario.ocs import OcsSpec, check_ocs
from fabric_model.scenario.plant import FacilitySpec, ManagementSpec, StorageSpec
from fabric_model.scenario.registry import (
    _SPECS,
    SECTIONS,
    _build_section,
    _unknown_key_hint,
    field_spec,
)
from fabric_model.scenario.shapes import shape_counts
from fabric_model.scenario.tails import TailsSpec
from fabric_model.scenario.whatif import WhatIfSpec
from fabric_model.scenario.workload import ModelSpec, ParallelismPlan, TrainingSpec, _shape_name

__all__ = ["Scenario"]


@dataclass(frozen=True)
class Scenario:
    """A whole what-if: cluster, fabric, model, parallelism, training, what-ifs and costs.

    Build with :meth:`from_dict` (validates every key) or :func:`apply_overrides`.
    """

    name: str = "custom"
    description: str = ""
    cluster: ClusterSpec = field(default_factory=ClusterSpec)
    fabric: FabricSpec = field(default_factory=FabricSpec)
    model: ModelSpec = field(default_factory=ModelSpec)
    parallel: ParallelismPlan = field(default_factory=ParallelismPlan)
    training: TrainingSpec = field(default_factory=TrainingSpec)
    what_if: WhatIfSpec = field(default_factory=WhatIfSpec)
    costs: CostSpec = field(default_factory=CostSpec)
    reliability: ReliabilitySpec = field(default_factory=ReliabilitySpec)
    facility: FacilitySpec = field(default_factory=FacilitySpec)
    storage: StorageSpec = field(default_factory=StorageSpec)
    management: ManagementSpec = field(default_factory=ManagementSpec)
    hybrid: HybridSpec = field(default_factory=HybridSpec)
    ocs: OcsSpec = field(default_factory=OcsSpec)
    nccl: NcclSpec = field(default_factory=NcclSpec)
    tails: TailsSpec = field(default_factory=TailsSpec)

    def __post_init__(self) -> None:
        # the name follows the shape: a changed layer count makes it a custom model
        named = _shape_name(self.model)
        if named != self.model.name:
            object.__setattr__(self, "model", dataclasses.replace(self.model, name=named))
        _check_cross_fields(self)

    @classmethod
    def from_dict(cls, data: Any) -> Scenario:
        """Build and validate a scenario from a nested mapping (as read from YAML or JSON).

        Raises
        ------
        ScenarioError
            For an unknown key, a wrong type or an out-of-range value.
        """
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise ScenarioFileError(
                f"a scenario must be a mapping of sections (cluster, fabric, ...), "
                f"got {type(data).__name__}"
            )
        kwargs: dict[str, Any] = {}
        for top, value in data.items():
            if top in ("name", "description"):
                if value is not None and not isinstance(value, str):
                    raise ScenarioError(top, value, "must be a text")
                kwargs[top] = value or ""
            elif top in SECTIONS:
                kwargs[top] = _build_section(top, value)
            else:
                raise ScenarioError(str(top), ScenarioError.NO_VALUE, _unknown_key_hint(str(top)))
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        """Return the full nested mapping (every key), ready for YAML or JSON."""
        out: dict[str, Any] = {"name": self.name, "description": self.description}
        for section in SECTIONS:
            out[section] = dataclasses.asdict(getattr(self, section))
        return out

    def get(self, key: str) -> Any:
        """Return the value of a dotted key."""
        field_spec(key)
        section, name = key.split(".", 1)
        return getattr(getattr(self, section), name)

    def flat(self) -> dict[str, Any]:
        """Return ``{dotted_key: value}`` for every key."""
        return {key: self.get(key) for key in _SPECS}

    def diff(self, base: Scenario) -> dict[str, Any]:
        """Return the dotted keys whose value differs from ``base`` (for URLs and presets)."""
        mine, theirs = self.flat(), base.flat()
        return {k: v for k, v in mine.items() if v != theirs[k]}


def _check_cross_fields(s: Scenario) -> None:
    c = s.cluster
    if c.nvlink_domain % c.gpus_per_node:
        raise ScenarioError(
            "cluster.nvlink_domain",
            c.nvlink_domain,
            f"must be a multiple of cluster.gpus_per_node = {c.gpus_per_node}",
        )
    if c.n_gpus > c.gpus_per_node and c.n_gpus % c.gpus_per_node:
        raise ScenarioError(
            "cluster.n_gpus",
            c.n_gpus,
            f"must be a multiple of cluster.gpus_per_node = {c.gpus_per_node} "
            f"(or fewer GPUs than one server holds)",
        )
    _check_planes(s)
    _check_hybrid(s)
    check_ocs(s)
    if s.model.routing_skew * s.model.hot_fraction > 1.0 + 1e-9:
        raise ScenarioError(
            "model.routing_skew",
            s.model.routing_skew,
            f"must be at most 1 / model.hot_fraction = {1 / s.model.hot_fraction:g} (the hot "
            f"GPUs cannot receive more than all of the traffic)",
        )
    m = s.model
    if m.top_k > m.n_experts:
        raise ScenarioError(
            "model.top_k", m.top_k, f"must be at most model.n_experts = {m.n_experts}"
        )
    if m.kind == "moe" and m.n_experts < 2:
        raise ScenarioError(
            "model.n_experts", m.n_experts, "must be at least 2 for an MoE model (model.kind = moe)"
        )
    if m.kind == "dense" and (m.n_experts > 1 or m.top_k > 1 or m.shared_experts):
        key = (
            "model.n_experts"
            if m.n_experts > 1
            else ("model.top_k" if m.top_k > 1 else "model.shared_experts")
        )
        raise ScenarioError(
            key,
            s.get(key),
            "a dense model (model.kind = dense) has no "
            "experts: n_experts 1, top_k 1, shared_experts 0; or set "
            "model.kind = moe",
        )
    if m.kind == "moe" and m.dense_layers >= m.layers:
        raise ScenarioError(
            "model.dense_layers",
            m.dense_layers,
            f"must be less than model.layers = {m.layers} for an MoE model",
        )
    if not m.head_dim and m.hidden % m.heads:
        raise ScenarioError(
            "model.heads", m.heads, f"must divide model.hidden = {m.hidden} (or set model.head_dim)"
        )
    if m.kv_heads > m.heads or m.heads % m.kv_heads:
        raise ScenarioError("model.kv_heads", m.kv_heads, f"must divide model.heads = {m.heads}")
    if m.params_b != "auto":
        counted_b = shape_counts(m).total / 1e9
        if abs(float(m.params_b) - counted_b) > 0.05 * counted_b:
            raise ScenarioError(
                "model.params_b",
                m.params_b,
                f"must agree within 5% with the shape's {counted_b:,.1f} B parameters "
                f"(model.layers, hidden, ffn_hidden, ...), or be auto",
            )


def _check_hybrid(s: Scenario) -> None:
    """Refuse partitions that do not add up to the cluster (``fabric.topology = hybrid``)."""
    h, n = s.hybrid, s.cluster.n_gpus
    if s.fabric.topology != "hybrid":
        return
    if h.a_gpus != "auto" and h.b_gpus != "auto" and int(h.a_gpus) + int(h.b_gpus) != n:
        raise ScenarioError(
            "hybrid.b_gpus",
            h.b_gpus,
            f"hybrid.a_gpus + hybrid.b_gpus must equal cluster.n_gpus = {n:,} "
            f"(hybrid.a_gpus = {int(h.a_gpus):,}; set hybrid.b_gpus = auto or "
            f"{n - int(h.a_gpus):,})",
        )
    for key in ("hybrid.a_gpus", "hybrid.b_gpus"):
        v = s.get(key)
        if v != "auto" and int(v) >= n:
            raise ScenarioError(
                key, v, f"must be less than cluster.n_gpus = {n:,} (both partitions hold GPUs)"
            )


def _check_planes(s: Scenario) -> None:
    """Refuse plane what-ifs a design cannot have (one line naming the key and the bound)."""
    f, w = s.fabric, s.what_if
    if f.link_gbps % f.planes:
        raise ScenarioError(
            "fabric.planes",
            f.planes,
            f"must divide fabric.link_gbps = {f.link_gbps} into whole Gb/s per plane",
        )
    degraded = 1 if w.degraded_plane_factor < 1.0 else 0
    if f.planes == 1 and (w.failed_planes or degraded or w.failed_switch != "none"):
        key = (
            "what_if.failed_planes"
            if w.failed_planes
            else "what_if.degraded_plane_factor"
            if degraded
            else "what_if.failed_switch"
        )
        raise ScenarioError(key, s.get(key), "needs fabric.planes >= 2 (now 1)")
    if w.failed_planes + degraded > f.planes - 1:
        most = f.planes - 1 - degraded
        raise ScenarioError(
            "what_if.failed_planes",
            w.failed_planes,
            f"must be at most {most} (fabric.planes = {f.planes}"
            + (", one more plane degraded" if degraded else "")
            + "): at least one plane must stay healthy",
        )
