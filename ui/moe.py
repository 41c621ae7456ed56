"""MoE page logic: the MoE model shown, its expert-parallel degrees and the points it draws.

The page computes only what is on screen: the all-to-all share per EP degree on the picked
topologies (by default the sidebar's alone), the skew bars at one EP degree, and the dense
vs MoE sweep over cluster sizes only once its section is opened (it builds a fabric per
size, the costliest part of the page).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fabric_model.scenario import MODEL_SHAPES, Scenario, apply_overrides
from fabric_model.training import SweepPoint
from fabric_model.training.sweep import expert_degrees
from ui import facade
from ui.training_figures import MoePoint

__all__ = [
    "DEFAULT_MOE",
    "DEFAULT_SKEWS",
    "DENSE_MODEL",
    "MAX_EP",
    "SKEWS",
    "MoeSetup",
    "current_ep",
    "default_topologies",
    "dense_vs_moe_lines",
    "moe_names",
    "setup",
    "skipped",
]

#: The MoE model shown when the sidebar's model is dense.
DEFAULT_MOE = "deepseek-v3"
#: The dense model the MoE one is compared with when the sidebar's model is MoE.
DENSE_MODEL = "llama3-70b"
#: Largest expert-parallel degree drawn.
MAX_EP = 256
#: Routing skews offered, and those drawn before the user picks.
SKEWS = (1.0, 1.5, 2.0, 4.0, 8.0)
DEFAULT_SKEWS = (1.0, 2.0, 4.0)
#: Cluster sizes of the dense vs MoE sweep.
SWEEP_MIN_GPUS = 64
#: The published plan of each MoE model (all but the expert-parallel degree, which the page
#: varies), used when the page swaps an MoE model in for the sidebar's dense one: the
#: sidebar's plan is the dense model's, not one anyone runs an MoE model with.
PUBLISHED_PLANS: dict[str, tuple[dict[str, object], str]] = {
    "deepseek-v3": (
        {
            "parallel.tp": 1,
            "parallel.pp": 16,
            "parallel.cp": 1,
            "parallel.vpp": 1,
            "parallel.zero_stage": 1,
            "training.recompute": "selective",
            "training.recompute_modules": "cheap",
        },
        "DeepSeek-V3's own plan (technical report, arXiv 2412.19437, section 3.2: PP16, "
        "EP64, ZeRO-1 data parallelism, no tensor parallelism; section 3.2.3 recomputation)",
    ),
    "mixtral-8x7b": (
        {"parallel.tp": 1, "parallel.pp": 1, "parallel.cp": 1, "parallel.vpp": 1},
        "NeMo 25.04's Mixtral 8x7B recipe (EP8, no tensor or pipeline parallelism; "
        "tests/golden/training_public.yaml)",
    ),
}


#: The topology the MoE page sets beside the sidebar's by default: rail-only has no path
#: between rails, so its expert all-to-all goes through NVLink first (a contrast wherever
#: the all-to-all crosses rails), and a rail-only sidebar design is set beside a fat-tree.
CONTRAST_TOPOLOGY = {"rail-only": "fat-tree"}


def default_topologies(scenario: Scenario) -> list[str]:
    """Return the MoE page's topologies before the user picks: the sidebar's and a contrast."""
    own = scenario.fabric.topology
    return [own, CONTRAST_TOPOLOGY.get(own, "rail-only")]


def moe_names() -> list[str]:
    """Return the published MoE shapes (``assets/models.yaml``), in file order."""
    return [n for n, e in MODEL_SHAPES.items() if e["shape"]["kind"] == "moe"]


@dataclass(frozen=True)
class MoeSetup:
    """The MoE scenario the page models and the EP degrees its plan allows.

    Attributes
    ----------
    moe : Scenario
        The sidebar's scenario with the picked MoE model (the sidebar's own if ``custom``).
    dp : int
        Data-parallel degree of the sidebar's plan (0 when tp x pp x cp does not divide the
        cluster).
    eps : tuple[int, ...]
        Expert-parallel degrees to draw: powers of two dividing the experts and ``dp``, at
        most :data:`MAX_EP` (empty when ``dp`` is 0).
    """

    moe: Scenario
    dp: int
    eps: tuple[int, ...]
    plan_source: str = "the sidebar's plan"


def setup(scenario: Scenario, name: str) -> MoeSetup:
    """Return the MoE scenario of model ``name`` (``custom``: the sidebar's) and its EP degrees.

    An MoE model swapped in for another model runs its published plan
    (:data:`PUBLISHED_PLANS`) where that plan divides the cluster, else the sidebar's.
    """
    moe = scenario if name == "custom" else apply_overrides(scenario, {"model.name": name})
    source = "the sidebar's plan"
    if name != scenario.model.name and name in PUBLISHED_PLANS:
        over, cite = PUBLISHED_PLANS[name]
        own = apply_overrides(moe, {**over, "parallel.dp": "auto", "parallel.ep": 1})
        inner = own.parallel.tp * own.parallel.pp * own.parallel.cp
        if own.cluster.n_gpus % inner == 0:
            moe, source = own, cite
    par = moe.parallel
    inner = par.tp * par.pp * par.cp
    dp = moe.cluster.n_gpus // inner if moe.cluster.n_gpus % inner == 0 else 0
    eps = tuple(e for e in expert_degrees(moe, dp) if e <= MAX_EP) if dp else ()
    return MoeSetup(moe, dp, eps, source)


def ep_points(
    moe: MoeSetup, topologies: Sequence[str], deadline: float | None = None
) -> list[MoePoint]:
    """Model every EP degree on each topology, at the scenario's routing skew.

    No point starts after ``deadline`` (``time.monotonic()``; see :func:`skipped`).
    """
    points: list[MoePoint] = []
    for topo in topologies:
        points += facade.moe_points(
            moe.moe, topo, moe.eps, (moe.moe.model.routing_skew,), deadline=deadline
        )
    return points


def skipped(points: Iterable[MoePoint]) -> list[MoePoint]:
    """Return the points a deadline left unmodelled."""
    return [p for p in points if p.step.reason.endswith(facade.MOE_SKIPPED_REASON)]


def current_ep(moe: MoeSetup, points: Sequence[MoePoint]) -> int:
    """Return the EP degree of the skew chart and the sweep.

    The sidebar's, if it is one the plan allows; else the fastest feasible one on the
    sidebar's topology; else the largest.
    """
    s = moe.moe
    if s.parallel.ep > 1 and s.parallel.ep in moe.eps:
        return s.parallel.ep
    here = [p for p in points if p.topology == s.fabric.topology and p.step.feasible]
    if here:
        return min(here, key=lambda p: p.step.step_time_s).ep
    return max(moe.eps)


def skew_points(
    moe: MoeSetup, ep: int, skews: Sequence[float], deadline: float | None = None
) -> tuple[MoePoint, ...]:
    """Model the sidebar's topology at EP degree ``ep`` for each routing skew (sorted)."""
    s = apply_overrides(moe.moe, {"parallel.ep": ep})
    return facade.moe_points(
        s, s.fabric.topology, (ep,), tuple(sorted(skews or [1.0])), deadline=deadline
    )


def dense_vs_moe_lines(
    scenario: Scenario, moe: MoeSetup, ep: int, deadline: float | None = None
) -> dict[str, tuple[SweepPoint, ...]]:
    """Weak scaling of the dense model and the MoE one (at EP ``ep``) on the sidebar's fabric.

    The dense model is the sidebar's, or :data:`DENSE_MODEL` when the sidebar's is MoE. The
    dense line is the Scaling page's line for the same design, so the two pages share it.
    """
    dense = (
        apply_overrides(scenario, {"model.name": DENSE_MODEL})
        if scenario.model.kind == "moe"
        else scenario
    )
    gpus = tuple(
        n for n in facade.SCALING_SIZES if SWEEP_MIN_GPUS <= n <= facade.MOE_SWEEP_MAX_GPUS
    )
    moe_ep = apply_overrides(moe.moe, {"parallel.ep": ep})
    f = scenario.fabric
    return {
        f"dense: {dense.model.name}": facade.scaling_line(
            dense, f.topology, f.vendor, gpus, "weak", deadline=deadline
        ),
        f"MoE: {moe.moe.model.name} (EP{ep})": facade.scaling_line(
            moe_ep, f.topology, f.vendor, gpus, "weak", deadline=deadline
        ),
    }
