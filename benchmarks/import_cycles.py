"""List the import graph's strongly connected components, function-level imports included.

Every ``import`` / ``from ... import`` of the project's own modules in ``fabric_model/`` and
``ui/`` is an edge, read with ``ast``: at module level (*top*), inside a function (*lazy*)
or under ``if TYPE_CHECKING:`` (*tc*, left out unless ``--type-checking``). A module that
imports a package depends on its ``__init__``; ``from pkg import name`` depends on
``pkg.name`` where that is a module. Tarjan's algorithm gives the components; a cycle is a
component of more than one module. Each lazy import is listed with its reason where a
``# lazy: ...`` comment on the line (or the line above) gives one.

    python benchmarks/import_cycles.py            # cycles over top + lazy imports
    python benchmarks/import_cycles.py --lazy     # also every lazy import, with its reason
    python benchmarks/import_cycles.py --top-only # cycles over module-level imports only
    python benchmarks/import_cycles.py --package fabric_model

Exit status 1 when a cycle exists (so CI or a reviewer can run it as a check).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("fabric_model", "ui")


@dataclass(frozen=True)
class Edge:
    """One import of a project module by another."""

    src: str
    dst: str
    kind: str  # "top", "lazy" or "tc"
    line: int
    reason: str


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    found = {}
    for pkg in packages:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            found[_module_name(path)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Yield every import statement with its kind (top, lazy or tc)."""

    def walk(node: ast.AST, kind: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, kind
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                yield from walk(child, "tc" if kind == "tc" else "lazy")
            elif isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.body:
                    yield from walk(ast.Module(body=[sub], type_ignores=[]), "tc")
                for sub in child.orelse:
                    yield from walk(ast.Module(body=[sub], type_ignores=[]), kind)
            else:
                yield from walk(child, kind)

    yield from walk(tree, "top")


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _reason(lines: list[str], line: int) -> str:
    for text in (lines[line - 1], lines[line - 2] if line >= 2 else ""):
        if "# lazy:" in text:
            return text.split("# lazy:", 1)[1].strip()
    return ""


def edges(packages: tuple[str, ...] = PACKAGES) -> list[Edge]:
    """Every import of a module of ``packages`` by one of them."""
    modules = _modules(packages)
    out = []
    for src, path in modules.items():
        text = path.read_text()
        lines = text.splitlines()
        is_pkg = path.name == "__init__.py"
        for node, kind in _imports(ast.parse(text)):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = src.split(".")
                    anchor = anchor if is_pkg else anchor[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{a.name}" for a in node.names] or [base]
                targets.append(base)
            for t in targets:
                dst = _resolve(t, modules)
                # a module's own package __init__ is not an edge of interest (it runs first)
                if dst is None or dst == src or src.startswith(dst + "."):
                    continue
                out.append(Edge(src, dst, kind, node.lineno, _reason(lines, node.lineno)))
    return list(dict.fromkeys(out))  # one edge per statement and target


def components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one node, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    sys.setrecursionlimit(10_000)

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--top-only", action="store_true", help="module-level imports only")
    p.add_argument("--type-checking", action="store_true", help="add TYPE_CHECKING imports")
    p.add_argument("--lazy", action="store_true", help="list every function-level import")
    p.add_argument(
        "--package", action="append", choices=PACKAGES, help="only this package (repeatable)"
    )
    args = p.parse_args()
    packages = tuple(args.package or PACKAGES)
    kinds = (
        {"top"} | (set() if args.top_only else {"lazy"}) | ({"tc"} if args.type_checking else set())
    )
    all_edges = edges(packages)
    graph: dict[str, set[str]] = {}
    for e in all_edges:
        if e.kind in kinds:
            graph.setdefault(e.src, set()).add(e.dst)
    comps = components(graph)
    print(f"imports counted: {', '.join(sorted(kinds))}; modules {len(_modules(packages))}")
    for comp in comps:
        members = set(comp)
        print(f"cycle of {len(comp)}: {' <-> '.join(comp)}")
        for e in all_edges:
            if e.kind in kinds and e.src in members and e.dst in members:
                print(f"    {e.src}:{e.line} -> {e.dst} ({e.kind})")
    print(f"strongly connected components of more than one module: {len(comps)}")
    if args.lazy:
        lazy = [e for e in all_edges if e.kind == "lazy"]
        print(f"\nfunction-level imports of project modules: {len(lazy)}")
        for e in lazy:
            print(f"    {e.src}:{e.line} -> {e.dst}" + (f"  [{e.reason}]" if e.reason else ""))
    return 1 if comps else 0


if __name__ == "__main__":
    raise SystemExit(main())
