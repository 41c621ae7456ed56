"""One-click HTML report of a scenario: key numbers, charts, tables, the scenario, its sources.

:func:`build_report` returns one self-contained HTML document: plotly.js is inlined once in
the head, each chart is a ``<div>`` plus its figure JSON, and nothing is fetched from the
network, so the file opens offline and can be mailed or archived as it is. It is a pure
function of the scenario over the model and the ``ui.figures`` builders: plotly, no streamlit
(the dashboard's facades cache through streamlit, so they are not used here), which lets the
command line (``python -m fabric_model report --out FILE.html``) and the dashboard's
"Download report (HTML)" button share it.

A part the model cannot compute (a plan that does not fit, a design that cannot be built, an
all-to-all the fabric cannot run) becomes a message in its section; the rest of the report is
still written. Every text that comes from the user (scenario name and description, values in
error messages) is escaped.
"""

from __future__ import annotations

import html
import importlib
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

import fabric_model
from fabric_model.catalog import Catalog, load_catalog
from fabric_model.collectives import (
    CollectiveTime,
    FabricContext,
    algo_models,
    nccl_constants,
    times_from_models,
)
from fabric_model.cost import (
    BillOfMaterials,
    VendorComparison,
    bill_of_materials,
    compare_vendors,
)
from fabric_model.errors import FabricModelError
from fabric_model.scenario import (
    GPU_COUNT_MAX,
    MODEL_SHAPES,
    Scenario,
    dump_scenario,
    iter_field_specs,
)
from fabric_model.topology import Topology
from fabric_model.training import DIMS, StepResult, SweepPoint, sweep, training_step
from fabric_model.units import GIB
from ui.figures import (
    busbw_curve_figure,
    size_label,
    topology_figure,
    vendor_capex_figure,
    vendor_power_figure,
    vendor_summary_frame,
)
from ui.theme import OP_LABELS, TOPOLOGY_LABELS, VENDOR_LABELS
from ui.training_figures import ScalingLine, scaling_figure, step_breakdown_figure

__all__ = [
    "BUSBW_SIZES",
    "REFERENCES",
    "SECTIONS",
    "build_report",
    "scaling_sizes",
    "training_citations",
]

#: Section ids and headings, in report order (the table of contents and the tests use them).
SECTIONS: tuple[tuple[str, str], ...] = (
    ("key-numbers", "Key numbers"),
    ("training", "Training step"),
    ("collectives", "Collectives"),
    ("scaling", "Strong scaling"),
    ("cost", "Cost and power by vendor"),
    ("topology", "Topology"),
    ("bom", "Bill of materials"),
    ("scenario", "Scenario (YAML)"),
    ("sources", "Assumptions and sources"),
)
_HEADING = dict(SECTIONS)

#: All-reduce curve: 8 B to 16 GiB in binary steps (1 GiB, the headline size, among them).
BUSBW_SIZES: tuple[int, ...] = tuple(2**i for i in range(3, 35))
#: The headline message size of the collective numbers.
HEADLINE_BYTES = GIB
#: Strong-scaling sweep: the scenario's size times these powers of two (8 sizes, n/64 to 2n),
#: enough for the curve's shape and fast even at 100K GPUs.
SCALING_EXPONENTS = tuple(range(-6, 2))

#: Full references of the papers the training model's docstrings cite as "Name et al. YEAR".
REFERENCES: dict[str, str] = {
    "Narayanan et al. 2021": (
        'D. Narayanan, M. Shoeybi, J. Casper et al., "Efficient Large-Scale Language Model '
        "Training on GPU Clusters Using Megatron-LM\", SC '21 (arXiv 2104.04473): the model "
        "FLOPs formula (eq. 3) behind MFU, the 1F1B and interleaved pipeline bubble, weak and "
        "strong scaling"
    ),
    "Rajbhandari et al. 2020": (
        'S. Rajbhandari, J. Rasley, O. Ruwase, Y. He, "ZeRO: Memory Optimizations Toward '
        "Training Trillion Parameter Models\", SC '20 (arXiv 1910.02054): 2 + 2 + 12 bytes of "
        "model state per parameter and its sharding by ZeRO stage"
    ),
    "Korthikanti et al. 2022": (
        'V. Korthikanti, J. Casper, S. Lym et al., "Reducing Activation Recomputation in Large '
        'Transformer Models", MLSys 2023 (arXiv 2205.05198): activation memory with tensor '
        "and sequence parallelism (eq. 2), selective recomputation"
    ),
}
#: Code (not paper) sources the training model states in its module constants.
CODE_REFERENCES: tuple[str, ...] = (
    "Megatron-core DDP gradient buckets of max(40M, 1M x data-parallel size) parameters: "
    "NVIDIA/Megatron-LM megatron/core/distributed/distributed_data_parallel.py (bucket_size)",
)
_TRAINING_MODULES = ("shapes", "memory", "step", "sweep", "fabric", "layout")
_CITATION = re.compile(r"\b([A-Z][A-Za-z-]+) et al\.\s+(\d{4})")
_SOURCE_REF = re.compile(r"\[(S[A-Za-z0-9]+)\]")
#: BOM line category -> catalog section.
_BOM_SECTION = {"switches": "switches", "nics": "nics", "optics": "optics", "cables": "cables"}
#: Catalog sections in the order the sources list them.
_CATALOG_ORDER = ("gpus", "servers", "vendors", "switches", "nics", "optics", "cables")
_PLOT_CONFIG = {"displaylogo": False, "responsive": True}


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


# --------------------------------------------------------------------------------------
# model evaluation (each part may fail on its own)
# --------------------------------------------------------------------------------------

#: What a part of the model raises when the scenario cannot be modelled: the package's own
#: errors, and NotImplementedError for a routing the topology family does not have yet.
_MODEL_ERRORS = (FabricModelError, NotImplementedError)


@dataclass
class _Outcome:
    """A model result or the message that replaces it."""

    value: Any = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


def _attempt(what: str, fn: Callable[[], Any]) -> _Outcome:
    try:
        return _Outcome(fn())
    except _MODEL_ERRORS as exc:
        return _Outcome(error=f"{what}: {exc}")


@dataclass
class _Results:
    """Everything the report shows, computed once."""

    scenario: Scenario
    catalog: Catalog
    bom: _Outcome
    step: _Outcome
    allreduce: _Outcome
    alltoall: _Outcome
    comparisons: list[VendorComparison]
    sweep: _Outcome
    sweep_sizes: tuple[int, ...]
    generated_at: datetime


def scaling_sizes(scenario: Scenario) -> tuple[int, ...]:
    """Return the cluster sizes of the report's strong-scaling curve.

    The scenario's size times :data:`SCALING_EXPONENTS` powers of two, keeping whole GPU
    counts of at least one model replica (``tp x pp x cp x ep``) and at most the model's
    GPU-count bound.
    """
    n = scenario.cluster.n_gpus
    par = scenario.parallel
    replica = max(8, par.tp * par.pp * par.cp * max(1, par.ep))
    sizes = []
    for k in SCALING_EXPONENTS:
        size = n * 2**k if k >= 0 else (n >> -k if n % 2**-k == 0 else 0)
        if replica <= size <= GPU_COUNT_MAX:
            sizes.append(size)
    return tuple(sizes) or (n,)


def _collectives(scenario: Scenario) -> tuple[_Outcome, _Outcome]:
    """NCCL-like ``auto`` all-reduce curve and all-to-all at 1 GiB on one built fabric."""
    try:
        ctx = FabricContext.from_scenario(scenario)
    except _MODEL_ERRORS as exc:
        problem = _Outcome(error=f"this design cannot be built: {exc}")
        return problem, problem

    def run(op: str, sizes: Sequence[int]) -> list[CollectiveTime]:
        models = algo_models(ctx, op, "auto")
        if not models:
            raise FabricModelError(f"no algorithm can run {OP_LABELS[op]} on this design")
        return times_from_models(models, sizes, "auto")

    return (
        _attempt("all-reduce", lambda: run("allreduce", BUSBW_SIZES)),
        _attempt("all-to-all", lambda: run("alltoall", [HEADLINE_BYTES])),
    )


def _evaluate(scenario: Scenario, generated_at: datetime | None) -> _Results:
    catalog = load_catalog()
    bom = _attempt("this design cannot be built", lambda: bill_of_materials(scenario, catalog))
    step = (
        _attempt("this design cannot be built", lambda: training_step(scenario, catalog))
        if bom.ok
        else _Outcome(error=bom.error)
    )
    allreduce, alltoall = _collectives(scenario) if bom.ok else (bom, bom)
    sizes = scaling_sizes(scenario)
    points = _attempt("strong scaling", lambda: sweep(scenario, list(sizes), scaling="strong"))
    return _Results(
        scenario=scenario,
        catalog=catalog,
        bom=bom,
        step=step,
        allreduce=allreduce,
        alltoall=alltoall,
        comparisons=compare_vendors(scenario, catalog=catalog),
        sweep=points,
        sweep_sizes=sizes,
        generated_at=generated_at or datetime.now(UTC),
    )


# --------------------------------------------------------------------------------------
# HTML pieces
# --------------------------------------------------------------------------------------


def _problem(text: str) -> str:
    return f'<div class="problem" role="alert"><strong>Not shown:</strong> {_e(text)}</div>'


def _figure(fig: go.Figure, name: str) -> str:
    """One chart: a ``<div>`` and the script that draws it with the page's plotly.js.

    WebGL traces (the topology diagram's cables) become SVG traces: the diagrams aggregate
    large designs into a few hundred lines, and SVG prints and draws without a GPU.
    """
    spec = fig.to_plotly_json()
    spec["data"] = [
        {**t, "type": "scatter"} if t.get("type") == "scattergl" else t for t in spec["data"]
    ]
    height = fig.layout.height or 450
    # plotly writes "<" in its JSON as \u003c, so no text inside a figure can close the script
    body = pio.to_html(
        spec,
        include_plotlyjs=False,
        full_html=False,
        div_id=f"fig-{name}",
        config=_PLOT_CONFIG,
        default_width="100%",
        default_height=f"{height}px",
        validate=False,
    )
    return f'<figure class="chart" data-chart="{_e(name)}">{body}</figure>'


def _table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    numeric: Sequence[bool] = (),
    caption: str = "",
    css: str = "",
) -> str:
    num = list(numeric) + [False] * (len(columns) - len(numeric))
    head = "".join(
        f'<th class="{"num" if n else ""}">{_e(c)}</th>' for c, n in zip(columns, num, strict=True)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="{"num" if n else ""}">{_e(v)}</td>' for v, n in zip(row, num, strict=True)
        )
        + "</tr>"
        for row in rows
    )
    cap = f"<caption>{_e(caption)}</caption>" if caption else ""
    return (
        f'<div class="table-wrap"><table class="{css}">{cap}<thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def _metric(key: str, label: str, value: str, detail: str = "", raw: float | None = None) -> str:
    data = "" if raw is None or not math.isfinite(raw) else f' data-value="{raw!r}"'
    detail_html = f'<div class="detail">{_e(detail)}</div>' if detail else ""
    return (
        f'<div class="metric" data-metric="{_e(key)}"{data}><div class="label">'
        f'{_e(label)}</div><div class="value">{_e(value)}</div>{detail_html}</div>'
    )


def _na(key: str, label: str, why: str) -> str:
    return _metric(key, label, "n/a", why)


def _usd(x: float) -> str:
    return f"${x:,.0f}"


def _num(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:,.4g}"
    return "" if value is None else str(value)


# --------------------------------------------------------------------------------------
# sections
# --------------------------------------------------------------------------------------


def _section(sid: str, *parts: str) -> str:
    return f'<section id="{sid}"><h2>{_e(_HEADING[sid])}</h2>' + "".join(parts) + "</section>"


def _design_line(s: Scenario) -> str:
    c, f, m, par = s.cluster, s.fabric, s.model, s.parallel
    tiers = "" if f.tiers == "auto" else f", {f.tiers} tier{'s' * (f.tiers != 1)}"
    return (
        f"{c.n_gpus:,} {c.gpu.upper()} GPUs ({c.gpus_per_node} per server, "
        f"{c.nvlink_domain}-GPU NVLink domains, {c.nics_per_gpu} x {f.link_gbps}G NIC per "
        f"GPU) on {VENDOR_LABELS.get(f.vendor, f.vendor)} "
        f"{TOPOLOGY_LABELS.get(f.topology, f.topology).lower()}{tiers}"
        + (f", {f.oversubscription:g}:1 at the leaf" if f.oversubscription > 1 else "")
        + (", rail-optimized" if f.rail_optimized else "")
        + f"; training {m.name if m.name != 'custom' else 'a custom model'} "
        f"({'MoE' if m.kind == 'moe' else 'dense'}), TP{par.tp} PP{par.pp}"
        + (f" CP{par.cp}" if par.cp > 1 else "")
        + (f" EP{par.ep}" if par.ep > 1 else "")
    )


def _key_numbers(r: _Results) -> str:
    if not r.bom.ok:  # every number below needs the built fabric: one message, not fifteen
        return _section("key-numbers", _problem(r.bom.error))
    training: list[str] = []
    step: StepResult | None = r.step.value if r.step.ok else None
    if step is not None and step.feasible and step.plan is not None:
        t, plan = step.step_time_s, step.plan
        training += [
            _metric(
                "step_time_s",
                "Step time",
                f"{t:,.2f} s",
                f"{plan.label()}: compute {step.compute_s:,.2f} s",
                t,
            ),
            _metric(
                "mfu",
                "MFU",
                f"{step.mfu:.1%}",
                "model FLOPs / (GPUs x dense BF16 peak x step time)",
                step.mfu,
            ),
            _metric(
                "tokens_per_s",
                "Tokens per second",
                f"{step.tokens_per_s:,.0f}",
                f"{step.tokens_per_step:,.0f} tokens per step",
                step.tokens_per_s,
            ),
            _metric(
                "exposed_comm_share",
                "Exposed communication",
                f"{step.exposed_comm_s / t:.1%} of the step",
                f"{step.exposed_comm_s:,.2f} s not hidden behind compute",
                step.exposed_comm_s / t,
            ),
            _metric(
                "bubble_share",
                "Pipeline bubble",
                f"{step.bubble_fraction:.1%} of the step",
                f"{step.bubble_s:,.2f} s; {plan.micro_batches} micro-batches for {plan.pp} stages",
                step.bubble_fraction,
            ),
        ]
    else:
        why = r.step.error or f"this parallel plan cannot run: {step.reason if step else ''}"
        training.append(_problem(why))  # placed above the group's grid
    coll: list[str] = []
    if r.allreduce.ok:
        big = next(x for x in r.allreduce.value if x.size_bytes == HEADLINE_BYTES)
        coll.append(
            _metric(
                "allreduce_busbw_GBps",
                "All-reduce busbw, 1 GiB",
                f"{big.busbw_GBps:,.1f} GB/s",
                f"{big.algo}/{big.proto}, {big.time_us:,.0f} us; bottleneck {big.bottleneck}",
                big.busbw_GBps,
            )
        )
    else:
        coll.append(_na("allreduce_busbw_GBps", "All-reduce busbw, 1 GiB", r.allreduce.error))
    if r.alltoall.ok:
        a2a = r.alltoall.value[0]
        coll.append(
            _metric(
                "alltoall_busbw_GBps",
                "All-to-all busbw, 1 GiB",
                f"{a2a.busbw_GBps:,.1f} GB/s",
                f"{a2a.algo}, {a2a.time_us:,.0f} us; bottleneck {a2a.bottleneck}",
                a2a.busbw_GBps,
            )
        )
    else:
        coll.append(_na("alltoall_busbw_GBps", "All-to-all busbw, 1 GiB", r.alltoall.error))
    b: BillOfMaterials = r.bom.value
    topo: Topology = b.topology
    fabric = [
        _metric(
            "capex_usd",
            "Network capex",
            _usd(b.capex_usd),
            "switches + NICs + optics + cables",
            b.capex_usd,
        ),
        _metric(
            "capex_per_gpu_usd",
            "Network capex per GPU",
            _usd(b.capex_per_gpu_usd),
            raw=b.capex_per_gpu_usd,
        ),
        _metric(
            "power_per_gpu_w",
            "Network power per GPU",
            f"{b.power_per_gpu_w:,.1f} W",
            f"{b.power_w / 1000:,.1f} kW in all (IT load)",
            b.power_per_gpu_w,
        ),
        _metric(
            "network_share",
            "Network share of cluster capex",
            f"{b.network_share:.1%}",
            "network / (GPU servers without scale-out NICs + network)",
            b.network_share,
        ),
        _metric(
            "n_switches",
            "Switches",
            f"{topo.n_switches:,}",
            ", ".join(f"{k} {v:,}" for k, v in topo.switches_by_tier.items()) or "switchless",
            topo.n_switches,
        ),
        _metric("n_cables", "Cables", f"{b.n_cables:,}", f"{topo.n_links:,} links", b.n_cables),
        _metric("n_transceivers", "Transceivers", f"{b.n_transceivers:,}", raw=b.n_transceivers),
        _metric(
            "tiers",
            "Switch tiers",
            str(topo.tiers) if topo.tiers else "none",
            b.hardware.switch.name if topo.tiers else "direct links",
            topo.tiers,
        ),
        _metric(
            "max_switch_hops",
            "Max switch hops",
            str(topo.max_switch_hops),
            f"mean {topo.mean_switch_hops:.2f}",
            topo.max_switch_hops,
        ),
        _metric(
            "bisection_per_gpu_GBps",
            "Bisection per GPU",
            f"{topo.bisection_per_gpu_GBps:,.1f} GB/s",
            f"{topo.bisection_GBps:,.0f} GB/s in all",
            topo.bisection_per_gpu_GBps,
        ),
    ]

    def group(title: str, items: list[str]) -> str:
        notes = "".join(i for i in items if i.startswith('<div class="problem"'))
        cards = "".join(i for i in items if not i.startswith('<div class="problem"'))
        grid = f'<div class="metrics">{cards}</div>' if cards else ""
        return f"<h3>{_e(title)}</h3>{notes}{grid}"

    return _section(
        "key-numbers",
        group("Training", training),
        group("Collectives", coll),
        group("Fabric and cost", fabric),
    )


def _training(r: _Results) -> str:
    if not r.step.ok:
        return _section("training", _problem(r.step.error))
    step: StepResult = r.step.value
    plan = step.plan
    if not step.feasible or plan is None:
        return _section("training", _problem("this parallel plan cannot run: " + step.reason))
    mem = step.memory
    intro = (
        f"<p>Plan {_e(plan.label())}, {plan.micro_batches:,} micro-batches of "
        f"{plan.micro_batch} sequence(s) per replica, recomputation {_e(plan.recompute)}, "
        f"ZeRO stage {plan.zero_stage}"
        + (f"; {mem.total_gib:,.1f} GiB per GPU" if mem else "")
        + ". "
        "step time = compute + pipeline bubble + exposed communication"
        + (" + MoE load imbalance" if step.imbalance_s else "")
        + ".</p>"
    )
    chart = _figure(
        step_breakdown_figure(
            [SweepPoint(step.n_gpus, step, math.nan, scaling_efficiency=math.nan)],
            "Where the step goes",
        ),
        "step",
    )
    rows = []
    for d in DIMS:
        comm = step.comm_s.get(d, 0.0)
        if comm <= 0:
            continue
        exposed = step.exposed_s.get(d, 0.0)
        rows.append(
            [
                d,
                f"{comm:,.3f}",
                f"{exposed:,.3f}",
                f"{1 - exposed / comm:.0%}",
                f"{exposed / step.step_time_s:.1%}",
                step.comm_detail.get(d, ""),
            ]
        )
    table = (
        _table(
            [
                "dimension",
                "communication (s)",
                "exposed (s)",
                "hidden",
                "of the step",
                "what is sent",
            ],
            rows,
            numeric=[False, True, True, True, True, False],
            caption="Communication per parallel dimension, per step",
            css="comm",
        )
        if rows
        else "<p>No communication on the network.</p>"
    )
    return _section("training", intro, chart, table)


def _collectives_section(r: _Results) -> str:
    if not r.allreduce.ok:
        return _section("collectives", _problem(r.allreduce.error))
    n = r.scenario.cluster.n_gpus
    rows: list[CollectiveTime] = r.allreduce.value
    chart = _figure(
        busbw_curve_figure(rows, f"All-reduce across {n:,} GPUs (NCCL-like algorithm choice)"),
        "busbw",
    )
    picks: list[tuple[int, tuple[str, str]]] = []
    for x in rows:
        if not picks or picks[-1][1] != (x.algo, x.proto):
            picks.append((x.size_bytes, (x.algo, x.proto)))
    text = (
        "<p>Bus bandwidth as nccl-tests prints it (algorithm bandwidth x the bus factor), "
        "from the flow solver on this fabric and NCCL's latency model. The NCCL-like "
        "choice: "
        + "; ".join(f"{_e(a)}/{_e(p)} from {_e(size_label(s))}" for s, (a, p) in picks)
        + ".</p>"
    )
    if not r.alltoall.ok:
        text += _problem(r.alltoall.error)
    return _section("collectives", text, chart)


def _scaling(r: _Results) -> str:
    if not r.sweep.ok:
        return _section("scaling", _problem(r.sweep.error))
    s = r.scenario
    points: list[SweepPoint] = r.sweep.value
    intro = (
        f"<p>The same model, plan and global batch "
        f"({s.training.global_batch_tokens:,} tokens per step) on this design at "
        f"{', '.join(f'{n:,}' for n in r.sweep_sizes)} GPUs: replicas get fewer "
        "micro-batches as the cluster grows. Scaling efficiency = tokens/s per GPU "
        "against the smallest size that runs.</p>"
    )
    if not any(p.feasible for p in points):
        return _section(
            "scaling", intro, _problem("no size of this sweep runs: " + points[-1].reason)
        )
    line = ScalingLine(s.fabric.topology, s.fabric.vendor, tuple(points), current=True)
    charts = (
        '<div class="pair">'
        + _figure(scaling_figure([line], "scaling_efficiency", "strong"), "scaling-eff")
        + _figure(scaling_figure([line], "mfu", "strong"), "scaling-mfu")
        + "</div>"
    )
    rows = []
    for p in points:
        if p.feasible:
            plan = p.step.plan.label() if p.step.plan else ""
            rows.append(
                [
                    f"{p.n_gpus:,}",
                    plan,
                    f"{p.step.step_time_s:,.2f}",
                    f"{p.step.mfu:.1%}",
                    f"{p.scaling_efficiency:.1%}",
                    _usd(p.network_capex_usd),
                    "",
                ]
            )
        else:
            rows.append([f"{p.n_gpus:,}", "-", "-", "-", "-", "-", p.reason])
    table = _table(
        ["GPUs", "plan", "step time (s)", "MFU", "scaling efficiency", "network capex", "why not"],
        rows,
        numeric=[True, False, True, True, True, True, False],
        css="scaling",
    )
    return _section("scaling", intro, charts, table)


#: Headers of the vendor comparison table (``vendor_summary_frame``'s columns).
_VENDOR_COLUMNS = {
    "capex_usd": "capex (USD)",
    "capex_per_gpu_usd": "capex per GPU (USD)",
    "power_kw": "power (kW)",
    "power_per_gpu_w": "power per GPU (W)",
    "network_share_pct": "network share (%)",
    "tco_usd": "TCO (USD)",
}


def _cost(r: _Results) -> str:
    ok = [c for c in r.comparisons if c.bom is not None]
    notes = "".join(
        _problem(f"{VENDOR_LABELS.get(c.vendor, c.vendor)} cannot build this design: {c.error}")
        for c in r.comparisons
        if c.bom is None
    )
    intro = (
        "<p>The same design (size, topology, link speed, tapering) on each vendor's "
        "default switch and NIC for the link speed, with its default routing. Capex "
        "and power of the scale-out network only; power is IT load before PUE.</p>"
    )
    if not ok:
        return _section("cost", intro, notes)
    charts = (
        '<div class="pair">'
        + _figure(vendor_capex_figure(r.comparisons), "capex")
        + _figure(vendor_power_figure(r.comparisons), "power")
        + "</div>"
    )
    frame = vendor_summary_frame(r.comparisons)
    columns = [c for c in frame.columns if c != "note" or frame["note"].astype(bool).any()]
    numeric = [c not in ("vendor", "switch", "nic", "note") for c in columns]
    rows = [
        [
            _num(v) if isinstance(v, (int, float)) else ("" if v is None else v)
            for v in (rec[c] for c in columns)
        ]
        for rec in frame.to_dict("records")
    ]
    table = _table(
        [_VENDOR_COLUMNS.get(c, c) for c in columns],
        rows,
        numeric=numeric,
        caption="Vendor comparison",
        css="vendors",
    )
    return _section("cost", intro, charts, notes, table)


def _topology(r: _Results) -> str:
    if not r.bom.ok:
        return _section("topology", _problem(r.bom.error))
    topo: Topology = r.bom.value.topology
    return _section("topology", _figure(topology_figure(topo), "topology"))


def _bom_section(r: _Results) -> str:
    if not r.bom.ok:
        return _section("bom", _problem(r.bom.error))
    b: BillOfMaterials = r.bom.value
    rows = [
        [
            x.category,
            x.item,
            x.where,
            f"{x.quantity:,}",
            _usd(x.unit_price_usd),
            _usd(x.capex_usd),
            f"{x.unit_power_w:,.1f}",
            f"{x.power_w:,.0f}",
        ]
        for x in b.lines
    ]
    rows.append(["total", "", "", "", "", _usd(b.capex_usd), "", f"{b.power_w:,.0f}"])
    intro = (
        f"<p>{_e(VENDOR_LABELS.get(b.vendor, b.vendor))}: {_e(b.hardware.switch.name)} "
        f"switches (radix {b.hardware.radix}), {_e(b.hardware.nic.name)} NICs; "
        f"TCO over {b.costs.years:g} years {_usd(b.tco_usd)} (capex + network power x "
        f"PUE {b.costs.pue:g} at ${b.costs.electricity_usd_per_kwh:g}/kWh). Each price's "
        "source is under Assumptions and sources.</p>"
    )
    table = _table(
        [
            "category",
            "item",
            "where",
            "quantity",
            "unit price",
            "capex",
            "unit power (W)",
            "power (W)",
        ],
        rows,
        numeric=[False, False, False, True, True, True, True, True],
        css="bom",
    )
    return _section("bom", intro, table)


def _scenario_section(s: Scenario) -> str:
    return _section(
        "scenario",
        "<p>Every key of the scenario; "
        "<code>python -m fabric_model report --scenario FILE</code> reads it "
        "back.</p>",
        f'<pre class="yaml"><code>{_e(dump_scenario(s))}</code></pre>',
    )


# --------------------------------------------------------------------------------------
# assumptions and sources
# --------------------------------------------------------------------------------------


def training_citations() -> dict[str, list[str]]:
    """Return the papers cited as "Name et al. YEAR" in the training model's docstrings.

    Maps each citation (``"Narayanan et al. 2021"``) to the ``fabric_model.training``
    modules whose docstring cites it, in first-seen order.
    """
    found: dict[str, list[str]] = {}
    for name in _TRAINING_MODULES:
        module = importlib.import_module(f"fabric_model.training.{name}")
        for who, year in _CITATION.findall(module.__doc__ or ""):
            found.setdefault(f"{who} et al. {year}", [])
            if module.__name__ not in found[f"{who} et al. {year}"]:
                found[f"{who} et al. {year}"].append(module.__name__)
    return found


def _used_entries(r: _Results) -> dict[tuple[str, str], list[str]]:
    """Catalog entries behind the report's numbers -> what uses them."""
    used: dict[tuple[str, str], list[str]] = {}

    def add(section: str, key: str, why: str) -> None:
        whys = used.setdefault((section, key), [])
        if why not in whys:
            whys.append(why)

    own = r.scenario.fabric.vendor
    designs: list[tuple[str, BillOfMaterials]] = []
    if r.bom.ok:
        designs.append(("this design", r.bom.value))
    designs += [
        (f"vendor comparison ({VENDOR_LABELS.get(c.vendor, c.vendor)})", c.bom)
        for c in r.comparisons
        if c.bom is not None and c.vendor != own
    ]
    for why, b in designs:
        hw = b.hardware
        add("gpus", hw.gpu.key, why)
        add("servers", hw.server.key, why)
        add("vendors", hw.vendor.key, why)
        if b.topology.n_switches:
            add("switches", hw.switch.key, why)
        add("nics", hw.nic.key, why)
        for line in b.lines:
            add(_BOM_SECTION[line.category], line.key, why)
    if not designs and r.scenario.cluster.gpu in r.catalog.gpus:
        add("gpus", r.scenario.cluster.gpu, "this design")
    order = {s: i for i, s in enumerate(_CATALOG_ORDER)}
    return dict(sorted(used.items(), key=lambda kv: order.get(kv[0][0], 99)))


def _value_text(value: Any) -> str:
    """Format a catalog value: numbers grouped, lists and mappings spelled out."""
    if isinstance(value, Mapping):
        return ", ".join(f"{_value_text(k)}: {_value_text(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_value_text(v) for v in value)
    return "null" if value is None else _num(value)


def _catalog_sources(r: _Results) -> str:
    cat = r.catalog
    cited: list[str] = []
    items = []
    for (section, key), whys in _used_entries(r).items():
        entry = cat.section(section)[key]
        notes = []
        for fname, note in entry.sources.items():
            shown = _value_text(getattr(entry, fname, None))
            notes.append(f"<li><code>{_e(fname)}</code> = {_e(shown)}: {_e(note)}</li>")
            cited += [k for k in _SOURCE_REF.findall(note) if k not in cited]
        remark = f'<div class="remark">{_e(entry.remark)}</div>' if entry.remark else ""
        items.append(
            f'<li class="entry" data-entry="{_e(section)}.{_e(key)}"><strong>'
            f"{_e(entry.name)}</strong> <code>{_e(section)}.{_e(key)}</code> "
            f'<span class="used">({_e("; ".join(whys))})</span>{remark}'
            f'<ul class="notes">{"".join(notes)}</ul></li>'
        )
    refs = []
    for k in cited:
        src = cat.sources.get(k)
        if src is None:
            continue
        link = (
            f'<a href="{_e(src.url)}">{_e(src.url)}</a>'
            if src.url.startswith(("https://", "http://"))
            else _e(src.url)
        )
        refs.append(
            f'<li id="src-{_e(k)}"><strong>[{_e(k)}]</strong> {_e(src.title)}'
            + (f" ({_e(src.date)})" if src.date else "")
            + f", {link}</li>"
        )
    return (
        f"<h3>Hardware catalog (version {_e(cat.version)})</h3>"
        "<p>The parts this design and the vendor comparison use, each number with its "
        "source note (<em>estimate</em> = a reasoned planning figure, not a quote; prices "
        "are 2024-2026 USD planning figures).</p>"
        f'<ul class="catalog">{"".join(items)}</ul>'
        "<h4>Catalog sources cited above</h4>"
        f'<ul class="refs">{"".join(refs)}</ul>'
    )


def _nccl_sources() -> str:
    c = nccl_constants()
    items = "".join(
        f"<li><strong>{_e(k)}</strong>: {_e(v)}</li>" for k, v in (c.get("sources") or {}).items()
    )
    return (
        f"<h3>NCCL-like constants (version {_e(c.get('version', '?'))})</h3>"
        "<p>Latency, protocol and efficiency constants of the collective model "
        "(assets/nccl_constants.yaml); the network-side bandwidth comes from the flow "
        f"solver on this fabric.</p><ul>{items}</ul>"
    )


def _model_source(s: Scenario) -> str:
    m = s.model
    entry = MODEL_SHAPES.get(m.name)
    if entry is None:
        body = (
            "<p>A custom shape given in the scenario (see the YAML above): no published source.</p>"
        )
    else:
        body = (
            f"<p><strong>{_e(entry.get('description', m.name))}</strong>: "
            f"{_e(entry.get('source', ''))}"
            + (
                f"; published parameters {entry['published_params_b']:g}B"
                if "published_params_b" in entry
                else ""
            )
            + ".</p>"
        )
    return f"<h3>Model shape ({_e(m.name)})</h3>{body}"


def _paper_sources() -> str:
    items = []
    for cite, modules in training_citations().items():
        full = REFERENCES.get(cite, cite)
        items.append(
            f"<li><strong>{_e(cite)}</strong>: {_e(full)}. Cited in {_e(', '.join(modules))}.</li>"
        )
    items += [f"<li>{_e(text)}.</li>" for text in CODE_REFERENCES]
    return (
        "<h3>Training-model formulas</h3><p>Papers and code the training-step model "
        "(fabric_model.training) follows, as its docstrings cite them.</p>"
        f'<ul class="papers">{"".join(items)}</ul>'
    )


def _assumptions(s: Scenario) -> str:
    rows = []
    for key, spec, _default in iter_field_specs():
        if key.split(".")[0] not in ("training", "what_if", "costs"):
            continue
        value = s.get(key)
        shown = "catalog value" if value is None else _num(value)
        rows.append(
            [key, shown + (f" {spec.unit}" if spec.unit and value is not None else ""), spec.help]
        )
    return "<h3>Assumptions of this scenario</h3>" + _table(
        ["key", "value", "meaning"], rows, css="assumptions"
    )


def _sources(r: _Results) -> str:
    return _section(
        "sources",
        _assumptions(r.scenario),
        _catalog_sources(r),
        _nccl_sources(),
        _model_source(r.scenario),
        _paper_sources(),
    )


# --------------------------------------------------------------------------------------
# the document
# --------------------------------------------------------------------------------------

_CSS = """
:root { --fg: #1d2330; --muted: #5b6472; --line: #d9dde3; --bg-soft: #f5f7fa;
        --warn-bg: #fff4e5; --warn-line: #e69f00; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       margin: 0 auto; max-width: 1200px; padding: 24px 28px 60px; }
h1 { font-size: 1.7rem; margin: 0 0 .3rem; }
h2 { font-size: 1.3rem; margin: 2.2rem 0 .6rem; padding-bottom: .2rem;
     border-bottom: 2px solid var(--line); }
h3 { font-size: 1.05rem; margin: 1.2rem 0 .4rem; }
h4 { font-size: .95rem; margin: 1rem 0 .3rem; }
.description { font-size: 1.05rem; margin: .2rem 0; }
.design, .meta, .used, .remark, .detail, caption { color: var(--muted); }
.meta { font-size: .85rem; }
nav ol { display: flex; flex-wrap: wrap; gap: .2rem 1.2rem; padding: 0; margin: .8rem 0;
         list-style: none; font-size: .9rem; }
.metrics { display: grid; grid-template-columns: repeat(auto-fill, minmax(210px, 1fr));
           gap: 10px; }
.metric { background: var(--bg-soft); border: 1px solid var(--line); border-radius: 6px;
          padding: 8px 12px; }
.metric .label { font-size: .85rem; color: var(--muted); }
.metric .value { font-size: 1.35rem; font-weight: 600; }
.metric .detail { font-size: .8rem; }
.problem { background: var(--warn-bg); border-left: 4px solid var(--warn-line);
           padding: 8px 12px; margin: .6rem 0; border-radius: 4px; }
.chart { margin: .6rem 0; }
.pair { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 12px; }
.table-wrap { overflow-x: auto; margin: .6rem 0; }
table { border-collapse: collapse; font-size: .88rem; }
caption { text-align: left; padding: 4px 0; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 10px; text-align: left;
         vertical-align: top; }
th { background: var(--bg-soft); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
pre.yaml { background: var(--bg-soft); border: 1px solid var(--line); padding: 10px 14px;
           overflow-x: auto; font-size: .82rem; line-height: 1.35; }
ul.notes { margin: .1rem 0 .6rem; font-size: .85rem; }
ul.catalog > li { margin-bottom: .4rem; }
footer { margin-top: 3rem; font-size: .85rem; color: var(--muted); }
@media print { nav { display: none; } .chart, .metric, tr { break-inside: avoid; } }
"""


def build_report(scenario: Scenario, *, generated_at: datetime | None = None) -> str:
    """Return a self-contained HTML report of ``scenario`` (one document, works offline).

    Parameters
    ----------
    scenario
        The what-if to report on.
    generated_at
        The generation time printed in the report (default: now, UTC).

    Returns
    -------
    str
        The HTML document: title and description, key numbers, the training step, the
        all-reduce curve, a strong-scaling sweep, capex and power by vendor, the topology
        diagram, the bill of materials, the scenario as YAML, the model and data versions,
        and the sources of the numbers. plotly.js (about 4.8 MB) is inlined once; each chart
        adds its figure JSON.

    Notes
    -----
    Parts the model cannot compute show the model's message in their place; the function
    does not raise for an infeasible plan or a design that cannot be built.
    """
    r = _evaluate(scenario, generated_at)
    s = scenario
    nccl_version = nccl_constants().get("version", "?")
    when = r.generated_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    versions = (
        f"fabric_model {fabric_model.__version__}, NCCL constants {nccl_version}, "
        f"catalog {r.catalog.version}; generated {when}"
    )
    body = "".join(
        [
            _key_numbers(r),
            _training(r),
            _collectives_section(r),
            _scaling(r),
            _cost(r),
            _topology(r),
            _bom_section(r),
            _scenario_section(s),
            _sources(r),
        ]
    )
    toc = "".join(f'<li><a href="#{sid}">{_e(title)}</a></li>' for sid, title in SECTIONS)
    description = s.description or "(no description)"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="fabric_model {_e(fabric_model.__version__)}">'
        f"<title>Fabric report: {_e(s.name)}</title>"
        f"<style>{_CSS}</style>"
        # plotly.js once for every chart below; inlined so the file needs no network
        f'<script type="text/javascript">{get_plotlyjs()}</script>'
        "</head><body>"
        f"<header><h1>Fabric what-if report: {_e(s.name)}</h1>"
        f'<p class="description">{_e(description)}</p>'
        f'<p class="design">{_e(_design_line(s))}</p>'
        f'<p class="meta" data-version="{_e(fabric_model.__version__)}" '
        f'data-nccl-version="{_e(nccl_version)}">{_e(versions)}</p>'
        f"<nav><ol>{toc}</ol></nav></header>"
        f"<main>{body}</main>"
        f"<footer>Made by the fabric what-if model: {_e(versions)}. Figures are model "
        "estimates from the sources listed above, not measurements or quotes.</footer>"
        "</body></html>\n"
    )
