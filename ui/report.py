"""One-click HTML report of a scenario: key numbers, charts, tables, the scenario, its sources.

:func:`build_report` returns one self-contained HTML document: plotly.js is inlined once in
the head, each chart is a ``<div>`` plus its figure JSON, and nothing is fetched from the
network, so the file opens offline and can be mailed or archived as it is. It is a pure
function of the scenario over the model and the ``ui.*_figures`` builders: plotly, no streamlit
(the dashboard's facades cache through streamlit, so they are not used here), which lets the
command line (``python -m fabric_model report --out FILE.html``) and the dashboard's
"Download report (HTML)" button share it.

The document is a jinja2 template (``ui/templates/report.html.j2``, extending
``_base.html.j2``, with ``_macros.html.j2`` and ``_sources.html.j2``) rendered with
autoescaping: :func:`report_context` assembles plain data (numbers already formatted as
text) and the charts, pre-rendered by plotly, and every other value the template prints is
escaped, user text (scenario name and description, values in error messages) included. The
sources come from the model itself (:mod:`fabric_model.report.citations`): the source notes of the
catalog entries the design uses, the NCCL and training constants files, the model shape's
source and the formulas behind the numbers (``assets/formulas.yaml``: each formula with the
code implementing it and its source).

A part the model cannot compute (a plan that does not fit, a design that cannot be built, an
all-to-all the fabric cannot run) becomes a message in its section; the rest of the report is
still written.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any

import jinja2
import plotly.graph_objects as go
import plotly.io as pio
from markupsafe import Markup
from plotly.offline import get_plotlyjs

import fabric_model
from fabric_model.catalog import Catalog, load_catalog
from fabric_model.collectives import CollectiveTime, FabricContext
from fabric_model.errors import FabricModelError
from fabric_model.plant.cost import (
    BillOfMaterials,
    VendorComparison,
    bill_of_materials,
    compare_vendors,
)
from fabric_model.report import citations, summaries
from fabric_model.scenario import (
    GPU_COUNT_MAX,
    Scenario,
    dump_scenario,
    iter_field_specs,
)
from fabric_model.topology import Topology
from fabric_model.training import StepResult, SweepPoint, sweep, training_step
from ui.collective_figures import busbw_curve_figure
from ui.cost_figures import vendor_capex_figure, vendor_power_figure, vendor_summary_frame
from ui.diagrams import cable_info, topology_diagram
from ui.figure_base import size_label
from ui.theme import TOPOLOGY_LABELS, VENDOR_LABELS
from ui.training_figures import ScalingLine, scaling_figure, step_breakdown_figure

__all__ = [
    "BUSBW_SIZES",
    "SECTIONS",
    "build_report",
    "render_report",
    "report_context",
    "scaling_sizes",
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

#: All-reduce curve: 8 B to 16 GiB in binary steps (1 GiB, the headline size, among them).
BUSBW_SIZES: tuple[int, ...] = tuple(2**i for i in range(3, 35))
#: The headline message size of the collective numbers (the Overview's, the CLI's).
HEADLINE_BYTES = summaries.HEADLINE_BYTES
#: Strong-scaling sweep: the scenario's size times these powers of two (8 sizes, n/64 to 2n),
#: enough for the curve's shape and fast even at 100K GPUs.
SCALING_EXPONENTS = tuple(range(-6, 2))

_TEMPLATE = "report.html.j2"
_PLOT_CONFIG = {"displaylogo": False, "responsive": True}


@cache
def _environment() -> jinja2.Environment:
    """Return the loader of ``ui/templates``, escaping every value of an HTML template."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("ui", "templates"),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "html.j2")),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


# --------------------------------------------------------------------------------------
# model evaluation (each part may fail on its own)
# --------------------------------------------------------------------------------------

#: What a part of the model raises when the scenario cannot be modelled: the package's own
#: errors (every family has a router and an array form, so nothing else is expected).
_MODEL_ERRORS = (FabricModelError,)


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
    """NCCL-like ``auto`` all-reduce curve and all-to-all at 1 GiB on one built fabric.

    :func:`fabric_model.report.summaries.collective_summary`, exactly as the Overview computes it
    (the same all-to-all rule at every cluster size, so the two always agree).
    """
    try:
        ctx = FabricContext.from_scenario(scenario)
    except _MODEL_ERRORS as exc:
        problem = _Outcome(error=f"this design cannot be built: {exc}")
        return problem, problem
    try:
        summary = summaries.collective_summary(
            scenario,
            summaries.models_on(ctx),
            sizes=(HEADLINE_BYTES,),
            curve_sizes=BUSBW_SIZES,
        )
    except _MODEL_ERRORS as exc:
        return _Outcome(error=f"all-reduce: {exc}"), _Outcome(error=f"all-to-all: {exc}")
    allreduce = (
        _Outcome(error=f"all-reduce: {summary.allreduce_error}")
        if summary.allreduce_error
        else _Outcome(list(summary.allreduce_curve))
    )
    alltoall = (
        _Outcome(list(summary.alltoall))
        if summary.alltoall
        else _Outcome(error=f"all-to-all: {summary.alltoall_error}")
    )
    return allreduce, alltoall


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
# context pieces: plain data for the template
# --------------------------------------------------------------------------------------


def _chart(fig: go.Figure, name: str) -> dict[str, Any]:
    """One chart: its name and plotly's ``<div>`` and script, drawn with the page's plotly.js.

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
    # plotly's own markup, printed as it is; the figure itself for the slides (ui.deck)
    return {"name": name, "html": Markup(body), "figure": fig}


#: What an empty cell prints: an em dash (never "None", "nan" or nothing).
EMPTY_CELL = "\u2014"


def _cell(value: Any) -> str:
    """Return a cell's text: :data:`EMPTY_CELL` for nothing (None, NaN, an empty string)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return EMPTY_CELL
    text = str(value)
    return text if text.strip() else EMPTY_CELL


def _table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    numeric: Sequence[bool] = (),
    caption: str = "",
    css: str = "",
) -> dict[str, Any]:
    num = list(numeric) + [False] * (len(columns) - len(numeric))
    return {
        "head": list(zip(columns, num, strict=True)),
        "rows": [list(zip((_cell(v) for v in row), num, strict=True)) for row in rows],
        "caption": caption,
        "css": css,
    }


def _metric(
    key: str, label: str, value: str, detail: str = "", raw: float | None = None
) -> dict[str, str]:
    shown = "" if raw is None or not math.isfinite(raw) else repr(raw)
    return {"key": key, "label": label, "value": value, "detail": detail, "raw": shown}


def _na(key: str, label: str, why: str) -> dict[str, str]:
    return _metric(key, label, "n/a", why)


def _usd(x: float) -> str:
    return f"${x:,.0f}"


def _num(value: Any) -> str:
    return "" if value is None else citations.value_text(value)


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


# --------------------------------------------------------------------------------------
# sections
# --------------------------------------------------------------------------------------


def _key_numbers(r: _Results) -> dict[str, Any]:
    if not r.bom.ok:  # every number below needs the built fabric: one message, not fifteen
        return {"problem": r.bom.error, "groups": []}
    training: list[dict[str, str]] = []
    training_problems: list[str] = []
    step: StepResult | None = r.step.value if r.step.ok else None
    head = summaries.step_headline(step)
    if head is not None:
        t = head.step_time_s
        training += [
            _metric(
                "step_time_s",
                "Step time",
                f"{t:,.2f} s",
                f"{head.plan_label}: compute {head.compute_s:,.2f} s",
                t,
            ),
            _metric(
                "mfu",
                "MFU",
                f"{head.mfu:.1%}",
                "model FLOPs / (GPUs x dense BF16 peak x step time)",
                head.mfu,
            ),
            _metric(
                "tokens_per_s",
                "Tokens per second",
                f"{head.tokens_per_s:,.0f}",
                f"{head.tokens_per_step:,.0f} tokens per step",
                head.tokens_per_s,
            ),
            _metric(
                "exposed_comm_share",
                "Exposed communication",
                f"{head.exposed_comm_share:.1%} of the step",
                f"{head.fabric_split}; {head.exposed_comm_s:,.2f} s not hidden behind compute",
                head.exposed_comm_share,
            ),
            _metric(
                "bubble_share",
                "Pipeline bubble",
                f"{head.bubble_share:.1%} of the step",
                f"{head.bubble_s:,.2f} s; {head.micro_batches} micro-batches for {head.pp} stages",
                head.bubble_share,
            ),
        ]
    else:
        why = r.step.error or f"this parallel plan cannot run: {step.reason if step else ''}"
        training_problems.append(why)
    coll: list[dict[str, str]] = []
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
    return {
        "problem": "",
        "groups": [
            {"title": "Training", "problems": training_problems, "metrics": training},
            {"title": "Collectives", "problems": [], "metrics": coll},
            {"title": "Fabric and cost", "problems": [], "metrics": fabric},
        ],
    }


def _training(r: _Results) -> dict[str, Any]:
    if not r.step.ok:
        return {"problem": r.step.error}
    step: StepResult = r.step.value
    plan = step.plan
    if not step.feasible or plan is None:
        return {"problem": "this parallel plan cannot run: " + step.reason}
    chart = _chart(
        step_breakdown_figure(
            [SweepPoint(step.n_gpus, step, math.nan, scaling_efficiency=math.nan)],
            "Where the step goes",
        ),
        "step",
    )
    rows = [
        [
            c.dim,
            f"{c.comm_s:,.3f}",
            f"{c.exposed_s:,.3f}",
            f"{100 * c.hidden_share:.0f}",
            f"{100 * c.step_share:.1f}",
            c.detail,
        ]
        for c in summaries.comm_breakdown(step)
    ]
    table = (
        _table(
            [
                "dimension",
                "communication (s)",
                "exposed (s)",
                "hidden behind compute (%)",
                "of the step (%)",
                "what is sent",
            ],
            rows,
            numeric=[False, True, True, True, True, False],
            caption="Communication per parallel dimension, per step",
            css="comm",
        )
        if rows
        else None
    )
    return {
        "problem": "",
        "plan": plan.label(),
        "micro_batches": f"{plan.micro_batches:,}",
        "micro_batch": plan.micro_batch,
        "recompute": plan.recompute,
        "zero_stage": plan.zero_stage,
        "memory_gib": f"{step.memory.total_gib:,.1f}" if step.memory else "",
        "imbalance": bool(step.imbalance_s),
        "chart": chart,
        "comm": table,
    }


def _collectives_section(r: _Results) -> dict[str, Any]:
    if not r.allreduce.ok:
        return {"problem": r.allreduce.error}
    n = r.scenario.cluster.n_gpus
    rows: list[CollectiveTime] = r.allreduce.value
    chart = _chart(
        busbw_curve_figure(rows, f"All-reduce across {n:,} GPUs (NCCL-like algorithm choice)"),
        "busbw",
    )
    picks: list[dict[str, str]] = []
    for x in rows:
        if not picks or (picks[-1]["algo"], picks[-1]["proto"]) != (x.algo, x.proto):
            picks.append({"algo": x.algo, "proto": x.proto, "size": size_label(x.size_bytes)})
    return {
        "problem": "",
        "chart": chart,
        "picks": picks,
        "alltoall_problem": r.alltoall.error,
    }


def _scaling(r: _Results) -> dict[str, Any]:
    if not r.sweep.ok:
        return {"problem": r.sweep.error}
    s = r.scenario
    points: list[SweepPoint] = r.sweep.value
    out: dict[str, Any] = {
        "problem": "",
        "global_batch_tokens": f"{s.training.global_batch_tokens:,}",
        "sizes": [f"{n:,}" for n in r.sweep_sizes],
        "none_runs": "",
    }
    if not any(p.feasible for p in points):
        out["none_runs"] = "no size of this sweep runs: " + points[-1].reason
        return out
    line = ScalingLine(s.fabric.topology, s.fabric.vendor, tuple(points), current=True)
    out["charts"] = [
        _chart(scaling_figure([line], "scaling_efficiency", "strong"), "scaling-eff"),
        _chart(scaling_figure([line], "mfu", "strong"), "scaling-mfu"),
    ]
    rows = []
    for p in points:
        if p.feasible:
            plan = p.step.plan.label() if p.step.plan else ""
            rows.append(
                [
                    f"{p.n_gpus:,}",
                    plan,
                    f"{p.step.step_time_s:,.2f}",
                    f"{100 * p.step.mfu:.1f}",
                    f"{100 * p.scaling_efficiency:.1f}",
                    f"{p.network_capex_usd:,.0f}",
                    "",
                ]
            )
        else:
            rows.append([f"{p.n_gpus:,}", "", "", "", "", "", p.reason])
    out["table"] = _table(
        [
            "GPUs",
            "plan",
            "step time (s)",
            "MFU (%)",
            "scaling efficiency (%)",
            "network capex (USD)",
            "why not",
        ],
        rows,
        numeric=[True, False, True, True, True, True, False],
        css="scaling",
    )
    return out


#: Decimals of the vendor comparison's numeric columns: dollars and watts per GPU whole,
#: kW and shares to a tenth (the catalog's prices and powers are planning figures, not
#: quotes, so more digits would claim more than they know).
_VENDOR_DECIMALS = {
    "capex_usd": 0,
    "capex_per_gpu_usd": 0,
    "power_kw": 1,
    "power_per_gpu_w": 0,
    "network_share_pct": 1,
    "tco_usd": 0,
}


def _vendor_cell(column: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _cell(value)
    if column in _VENDOR_DECIMALS and math.isfinite(value):
        return f"{value:,.{_VENDOR_DECIMALS[column]}f}"
    return _num(value) if math.isfinite(value) else EMPTY_CELL


#: Headers of the vendor comparison table (``vendor_summary_frame``'s columns).
_VENDOR_COLUMNS = {
    "nic": "NIC",
    "radix": "radix (ports)",
    "pod_nics": "pod (NIC ports)",
    "limit": "limiting resource",
    "capex_usd": "capex (USD)",
    "capex_per_gpu_usd": "capex per GPU (USD)",
    "power_kw": "power (kW)",
    "power_per_gpu_w": "power per GPU (W)",
    "network_share_pct": "network share (%)",
    "tco_usd": "TCO (USD)",
}


def _cost(r: _Results) -> dict[str, Any]:
    ok = [c for c in r.comparisons if c.bom is not None]
    problems = [
        f"{VENDOR_LABELS.get(c.vendor, c.vendor)} cannot build this design: {c.error}"
        for c in r.comparisons
        if c.bom is None
    ]
    if not ok:
        return {"charts": [], "problems": problems, "table": None}
    frame = vendor_summary_frame(r.comparisons)
    columns = [c for c in frame.columns if c != "note" or frame["note"].astype(bool).any()]
    numeric = [c not in ("vendor", "switch", "nic", "limit", "note") for c in columns]
    rows = [[_vendor_cell(c, rec[c]) for c in columns] for rec in frame.to_dict("records")]
    return {
        "charts": [
            _chart(vendor_capex_figure(r.comparisons), "capex"),
            _chart(vendor_power_figure(r.comparisons), "power"),
        ],
        "problems": problems,
        "table": _table(
            [_VENDOR_COLUMNS.get(c, c) for c in columns],
            rows,
            numeric=numeric,
            caption="Vendor comparison",
            css="vendors",
        ),
    }


def _topology(r: _Results) -> dict[str, Any]:
    if not r.bom.ok:
        return {"problem": r.bom.error}
    fig = topology_diagram(r.bom.value.topology, cable_info(r.bom.value))
    return {"problem": "", "chart": _chart(fig, "topology")}


def _bom_section(r: _Results) -> dict[str, Any]:
    if not r.bom.ok:
        return {"problem": r.bom.error}
    b: BillOfMaterials = r.bom.value
    rows = [
        [
            x.category,
            x.item,
            x.where,
            f"{x.quantity:,}",
            f"{x.unit_price_usd:,.0f}",
            f"{x.capex_usd:,.0f}",
            f"{x.unit_power_w:,.1f}",
            f"{x.power_w:,.0f}",
        ]
        for x in b.lines
    ]
    rows.append(["total", "", "", "", "", f"{b.capex_usd:,.0f}", "", f"{b.power_w:,.0f}"])
    return {
        "problem": "",
        "vendor": VENDOR_LABELS.get(b.vendor, b.vendor),
        "switch": b.hardware.switch.name,
        "radix": b.hardware.radix,
        "nic": b.hardware.nic.name,
        "years": f"{b.costs.years:g}",
        "tco": _usd(b.tco_usd),
        "pue": f"{b.costs.pue:g}",
        "electricity_usd_per_kwh": f"{b.costs.electricity_usd_per_kwh:g}",
        "table": _table(
            [
                "category",
                "item",
                "where",
                "quantity",
                "unit price (USD)",
                "capex (USD)",
                "unit power (W)",
                "power (W)",
            ],
            rows,
            numeric=[False, False, False, True, True, True, True, True],
            css="bom",
        ),
    }


# --------------------------------------------------------------------------------------
# assumptions and sources
# --------------------------------------------------------------------------------------


def _designs(r: _Results) -> list[tuple[str, BillOfMaterials]]:
    """Return the bills whose parts the report shows: this design's, the other vendors'."""
    own = r.scenario.fabric.vendor
    designs: list[tuple[str, BillOfMaterials]] = []
    if r.bom.ok:
        designs.append(("this design", r.bom.value))
    designs += [
        (f"vendor comparison ({VENDOR_LABELS.get(c.vendor, c.vendor)})", c.bom)
        for c in r.comparisons
        if c.bom is not None and c.vendor != own
    ]
    return designs


def _catalog_sources(r: _Results, cited: Iterable[str] = ()) -> dict[str, Any]:
    """Return the catalog entries the designs use and the catalog sources they or ``cited`` cite."""
    cat: Catalog = r.catalog
    used = citations.used_catalog_entries(_designs(r))
    if not used and r.scenario.cluster.gpu in cat.gpus:
        used = {("gpus", r.scenario.cluster.gpu): ("this design",)}
    entries, notes = [], []
    for (section, key), whys in used.items():
        entry = cat.section(section)[key]
        rows = citations.entry_sources(cat, section, key)
        notes += [n.source for n in rows]
        entries.append(
            {
                "section": section,
                "key": key,
                "name": entry.name,
                "used": "; ".join(whys),
                "remark": entry.remark,
                "notes": [
                    {"field": n.name.rsplit(".", 1)[-1], "value": n.value, "source": n.source}
                    for n in rows
                ],
            }
        )
    refs = [
        {
            "key": k,
            "title": src.title,
            "date": src.date,
            "url": src.url,
            "link": src.url.startswith(("https://", "http://")),
        }
        for k in citations.cited_source_keys([*notes, *cited])
        if (src := cat.sources.get(k)) is not None
    ]
    return {"version": cat.version, "entries": entries, "refs": refs}


def _assumptions(s: Scenario) -> dict[str, Any]:
    rows = []
    for key, spec, _default in iter_field_specs():
        if key.split(".")[0] not in ("training", "what_if", "costs"):
            continue
        value = s.get(key)
        shown = "catalog value" if value is None else _num(value)
        rows.append(
            [key, shown + (f" {spec.unit}" if spec.unit and value is not None else ""), spec.help]
        )
    return _table(["key", "value", "meaning"], rows, css="assumptions")


def _sources(r: _Results) -> dict[str, Any]:
    nccl_version, nccl = citations.nccl_sources()
    training_version, constants = citations.training_constant_sources()
    formulas = citations.formula_citations(r.scenario.fabric.topology)
    return {
        "assumptions": _assumptions(r.scenario),
        "catalog": _catalog_sources(r, [f.source for f in formulas]),
        "nccl": {"version": nccl_version, "sources": nccl},
        "training": {"version": training_version, "constants": constants},
        "model": {
            "name": r.scenario.model.name,
            "shape": citations.model_shape_source(r.scenario.model.name),
        },
        "formulas": formulas,
    }


# --------------------------------------------------------------------------------------
# the document
# --------------------------------------------------------------------------------------


def report_context(scenario: Scenario, *, generated_at: datetime | None = None) -> dict[str, Any]:
    """Return everything the report template shows, as plain data.

    Parameters
    ----------
    scenario
        The what-if to report on.
    generated_at
        The generation time printed in the report (default: now, UTC).

    Returns
    -------
    dict
        One entry per part of the page (``scenario``, ``versions``, ``sections``,
        ``headings``, then one per section id with ``-`` as ``_``, and ``sources``); values
        are text, numbers, lists and dicts of them, except the charts (``{"name", "html"}``,
        plotly's markup) and ``plotlyjs``, the bundle inlined once.

    Notes
    -----
    Parts the model cannot compute carry the model's message in a ``problem`` key; the
    function does not raise for an infeasible plan or a design that cannot be built.
    """
    r = _evaluate(scenario, generated_at)
    s = scenario
    nccl_version, _ = citations.nccl_sources()
    when = r.generated_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    line = (
        f"fabric_model {fabric_model.__version__}, NCCL constants {nccl_version}, "
        f"catalog {r.catalog.version}; generated {when}"
    )
    return {
        "scenario": {
            "name": s.name,
            "description": s.description or "(no description)",
            "design": _design_line(s),
            "yaml": dump_scenario(s),
        },
        "versions": {
            "fabric_model": fabric_model.__version__,
            "nccl": nccl_version,
            "catalog": r.catalog.version,
            "line": line,
        },
        "sections": SECTIONS,
        "headings": dict(SECTIONS),
        "plotlyjs": Markup(get_plotlyjs()),  # plotly's own bundle: printed as it is
        "key_numbers": _key_numbers(r),
        "training": _training(r),
        "collectives": _collectives_section(r),
        "scaling": _scaling(r),
        "cost": _cost(r),
        "topology": _topology(r),
        "bom": _bom_section(r),
        "sources": _sources(r),
    }


def render_report(context: dict[str, Any]) -> str:
    """Render a :func:`report_context` with ``ui/templates/report.html.j2`` (autoescaped)."""
    return _environment().get_template(_TEMPLATE).render(context)


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
    return render_report(report_context(scenario, generated_at=generated_at))
