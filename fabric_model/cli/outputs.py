"""Verbs that write files: ``report`` (HTML or slides) and ``export`` (deployment files)."""

from __future__ import annotations

import argparse
import sys

from fabric_model.cli.registry import _emit, scenario_from_args, verb
from fabric_model.errors import FabricModelError

# ------------------------------------------------------------------------------ report


def _report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--out",
        required=True,
        metavar="FILE",
        help="where to write the report (html: one file that opens offline; pptx: the slides)",
    )
    p.add_argument(
        "--format",
        choices=("html", "pptx"),
        default="html",
        help="html (default): the report; pptx: slides of the same sections (python-pptx), "
        "one per chart and key table, charts as PNG through the system chromium",
    )


@verb(
    "report",
    "self-contained HTML report of the scenario (or, --format pptx, its slides): key "
    "numbers, charts, bill of materials, vendor comparison, the scenario and the sources "
    "of its numbers",
    add_arguments=_report_args,
)
def _report(args: argparse.Namespace) -> int:
    from pathlib import Path

    out = Path(args.out)
    if out.is_dir() or not out.parent.is_dir():
        raise FabricModelError(
            f"--out {args.out}: "
            + ("is a directory" if out.is_dir() else f"no directory {out.parent}")
            + "; give a file path such as "
            f"report.{args.format}"
        )
    scenario = scenario_from_args(args)
    # Imported here, not at the top: the report draws with plotly (ui.report), and importing
    # fabric_model or this CLI must never load plotly or streamlit (tests/test_report.py).
    try:
        from ui.deck import build_slides
        from ui.report import build_report
    except ImportError as exc:
        raise FabricModelError(
            "report needs the dashboard's ui package and plotly"
            + (" and python-pptx" if args.format == "pptx" else "")
            + f" ({exc}); run it from the repository root with requirements.txt installed"
        ) from None
    if args.format == "pptx":
        data = build_slides(scenario)  # a FabricModelError without a Chromium for the charts
    else:
        data = build_report(scenario).encode("utf-8")
    try:
        out.write_bytes(data)
    except OSError as exc:
        raise FabricModelError(f"--out {args.out}: {exc.strerror or exc}") from None
    payload = {"path": str(out), "bytes": len(data)}
    _emit(args, payload, f"{out} ({len(data) / 1e6:.1f} MB, {len(data):,} bytes)")
    return 0


# ------------------------------------------------------------------------------ export

_EXPORT_FORMATS = (
    "cabling-csv",
    "slurm-topology",
    "slurm-topology-yaml",
    "networkx-json",
    "nccl-tuner-csv",
    "kueue-topology",
)


def _export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--format",
        required=True,
        choices=_EXPORT_FORMATS,
        help="cabling-csv (one row per cable), slurm-topology (topology.conf, tree plugin), "
        "slurm-topology-yaml (topology.yaml: tree and NVLink blocks), networkx-json, "
        "nccl-tuner-csv (the model's algorithm/protocol/channels per size for NCCL's "
        "example tuner plugin), kueue-topology (Kueue Topology, ResourceFlavor and node labels)",
    )
    p.add_argument("--out", required=True, metavar="FILE", help="where to write; - for stdout")


@verb(
    "export",
    "deployment files consistent with the BOM: cabling plan, Slurm topology, node-link graph; "
    "the NCCL tuner plugin CSV of the model's choice",
    add_arguments=_export_args,
)
def _export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from fabric_model.report.export import export_design

    out = None if args.out == "-" else Path(args.out)
    if out is not None and (out.is_dir() or not out.parent.is_dir()):
        what = "is a directory" if out.is_dir() else f"no directory {out.parent}"
        raise FabricModelError(f"--out {args.out}: {what}; give a file path, or - for stdout")
    result = export_design(scenario_from_args(args), args.format)
    for note in result.notes:
        print(f"# note: {note}", file=sys.stderr)
    if out is None:
        sys.stdout.write(result.text)
        return 0
    try:
        out.write_text(result.text, encoding="utf-8")
    except OSError as exc:
        raise FabricModelError(f"--out {args.out}: {exc.strerror or exc}") from None
    payload = {"path": str(out), "format": result.format, "items": result.n_items}
    _emit(args, payload, f"{out}: {result.format}, {result.n_items:,} items")
    return 0
