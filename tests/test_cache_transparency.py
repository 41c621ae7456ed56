"""Caches that cannot lie: a result computed after another scenario equals a cold start's.

The dashboard is one long-lived process, so every cache is shared by every scenario its
sessions ask for (issue 30). For random pairs of scenarios A and B drawn over every section
of the key table (B is A with a few keys of random sections changed, so that B shares part
of every hand-picked key with A), B computed right after A must equal B computed after
``clear_caches()``: topology counts (the one the training step builds too), the bill of
materials and capex, collective times, the training step, the sweep row and its network
capex, the explore row, and the dashboard facade's cached results. Outcomes are compared
whole, a refusal's message included.

The declared dependencies (:class:`fabric_model.caching.Reads`) are checked too:
every section a declaration leaves out can change without moving its result, and every
declared name moves the key.

Two regression tests pin the holes issue 30 found: the training fabric ignored ``hybrid``
(``hybrid-32k`` then ``hybrid.a_topology = rail-only`` gave the fat-tree's 1,280 switches,
not 768) and the sweep's network price ignored ``hybrid``, ``storage`` and ``management``.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, assume, example, given, settings
from hypothesis import strategies as st

from fabric_model.collectives import collective
from fabric_model.errors import FabricModelError
from fabric_model.plant.cost import bill_of_materials
from fabric_model.plant.design import build_topology
from fabric_model.presets import load_preset
from fabric_model.run.explore import DesignTask, evaluate_design
from fabric_model.scenario import Scenario, apply_overrides, iter_field_specs
from fabric_model.training import training_step
from fabric_model.training.fabric import DimensionFabric, clear_caches
from fabric_model.training.step import resolve_plan
from fabric_model.training.sweep import evaluate_point
from ui import facade

#: Every key of the table by section (a key this wave adds is drawn without a change here).
_KEYS: dict[str, list[tuple[str, Any, Any]]] = {}
for _key, _spec, _default in iter_field_specs():
    _KEYS.setdefault(_key.split(".", 1)[0], []).append((_key, _spec, _default))
#: Keys whose random values mostly break a shape rule or the GPU count (drawn structurally).
_SKIP = {"model.name", "model.params_b", "parallel.dp", "cluster.n_gpus"} | {
    f"model.{k}"
    for k in ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "experts")
}
#: The GPU counts drawn: small, so that a step solves in milliseconds.
_GPUS = (64, 128, 256)


def _values(key: str, spec: Any, default: Any) -> st.SearchStrategy[Any]:
    """Values of ``key`` from its spec: its choices, or its bounds and a point between."""
    if spec.kind == "bool":
        return st.booleans()
    if spec.kind == "choice":
        return st.sampled_from((*(("auto",) if spec.auto else ()), *spec.choices))
    if spec.kind in ("int", "float"):
        lo = spec.min if spec.min is not None else 0
        hi = spec.max if spec.max is not None else max(1, lo) * 100
        points = [lo, hi, (lo + hi) / 2, (lo + hi) / 7]
        if isinstance(default, int | float) and not isinstance(default, bool):
            points += [default, default * 2, default / 2]
        if spec.kind == "int":
            points = [round(p) for p in points]
        if spec.auto:
            points.append("auto")
        return st.sampled_from(points)
    return st.just(default)


def _change(section: str) -> st.SearchStrategy[tuple[str, Any]]:
    keys = [k for k in _KEYS[section] if k[0] not in _SKIP]
    return st.sampled_from(keys).flatmap(lambda k: st.tuples(st.just(k[0]), _values(*k)))


#: Per section, a change of one or two of its keys (every section of the key table).
CHANGES = st.fixed_dictionaries(
    {section: st.lists(_change(section), min_size=1, max_size=2) for section in sorted(_KEYS)}
)

#: The design of A: a small cluster on any family (hybrids often), any vendor, a small model.
DESIGN = st.fixed_dictionaries(
    {
        "cluster.n_gpus": st.sampled_from(_GPUS),
        "fabric.topology": st.sampled_from(
            ["fat-tree", "rail-only", "dragonfly-plus", "hybrid", "hybrid", "ocs"]
        ),
        "fabric.vendor": st.sampled_from(["infiniband", "spectrum-x", "roce"]),
        "model.name": st.sampled_from(["llama3-8b", "mixtral-8x7b"]),
    },
    optional={
        "hybrid.a_topology": st.sampled_from(["fat-tree", "rail-only", "dragonfly-plus"]),
        "hybrid.job": st.sampled_from(["a", "b", "both"]),
        "ocs.circuits": st.sampled_from(["uniform", "ring", "job"]),
        "parallel.tp": st.sampled_from([1, 2, 8]),
        "parallel.ep": st.sampled_from([1, 2, 8]),
        "what_if.degraded_link_factor": st.sampled_from([0.5, 1.0]),
        "storage.enabled": st.booleans(),
        "tails.enabled": st.booleans(),
    },
)


def _scenario(over: dict[str, Any]) -> Scenario | None:
    """Build a scenario of the default preset and ``over`` (None when it is refused)."""
    base = load_preset("dgx-h100-ib-ndr")
    full = {**over, "parallel.dp": "auto", "fabric.tiers": "auto"}
    try:
        return apply_overrides(base, full)
    except FabricModelError:
        return None


def _plain(value: Any) -> Any:
    """``value`` as nested dicts, lists and numbers (dataclasses, arrays, tuples unfolded)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    return value


def _equal(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN (infeasible results carry NaN figures)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_equal, a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def _outcome(fn: Any) -> Any:
    """``fn()`` as plain data, or the refusal it raised (type and message)."""
    try:
        return _plain(fn())
    except FabricModelError as exc:
        return {"refused": type(exc).__name__, "message": str(exc)}


def _counts(topo: Any) -> dict[str, Any]:
    return {
        "family": topo.family,
        "switches_by_tier": dict(topo.switches_by_tier),
        "links": sorted((lc.name, lc.n_links, lc.length_m) for lc in topo.links),
        "n_endpoints": topo.n_endpoints,
    }


def _training_fabric(s: Scenario) -> Any:
    """The fabric the training step runs on (its cache), and its capacities."""
    plan, _ = resolve_plan(s)
    if plan is None:
        return None
    base = DimensionFabric(s, plan.layout).base
    return {**_counts(base.topology), "capacity_Bps": float(np.sum(base.capacity_Bps))}


def _facade_clear() -> None:
    """Empty the dashboard facade's caches (``st.cache_resource``, outside a server)."""
    for name in dir(facade):
        fn = getattr(facade, name)
        if callable(getattr(fn, "clear", None)) and hasattr(fn, "__wrapped__"):
            fn.clear()


def _results(s: Scenario) -> dict[str, Any]:
    """Every cached result of ``s`` the model and the dashboard compute."""
    return {
        "topology": _outcome(lambda: _counts(build_topology(s))),
        "training fabric": _outcome(lambda: _training_fabric(s)),
        "bom": _outcome(lambda: bill_of_materials(s).to_dict()),
        "collective": _outcome(
            lambda: [
                dataclasses.asdict(r)
                for op in ("allreduce", "alltoall")
                for r in collective(s, op, "auto", [2**20, 2**28])
            ]
        ),
        "step": _outcome(lambda: training_step(s).to_dict()),
        "sweep row": _outcome(lambda: evaluate_point(s).to_dict()),
        "explore row": _outcome(lambda: evaluate_design(DesignTask(s, {}))),
        "facade metrics": _outcome(lambda: facade.scenario_metrics(s)),
        "facade curves": _outcome(
            lambda: facade.collective_curves(s, "allreduce", ("ring", "tree")).auto
        ),
    }


def _cold(s: Scenario) -> dict[str, Any]:
    clear_caches()
    _facade_clear()
    return _results(s)


@settings(
    max_examples=8,
    deadline=None,
    derandomize=True,
    database=None,
    phases=(Phase.explicit, Phase.generate),  # the message names each stale pair: no shrinking
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(design=DESIGN, changes=CHANGES)
# the first falsifying example this test drew on the code before issue 30 (the training fabric
# of a hybrid was keyed without the hybrid section)
@example(
    design={
        "cluster.n_gpus": 64,
        "fabric.topology": "hybrid",
        "model.name": "llama3-8b",
        "fabric.vendor": "infiniband",
    },
    changes={"hybrid": [("hybrid.a_topology", "fat-tree"), ("hybrid.a_topology", "rail-only")]},
)
def test_b_after_a_equals_b_alone(
    design: dict[str, Any], changes: dict[str, list[tuple[str, Any]]]
) -> None:
    """For each section, B = A with one or two of its keys changed: A then B = B alone."""
    a = _scenario(design)
    assume(a is not None)
    assert a is not None
    pairs, lies = 0, []
    for change in changes.values():
        b = _scenario({**design, **dict(change)})
        if b is None or b == a:
            continue
        pairs += 1
        cold = _cold(b)
        clear_caches()
        _facade_clear()
        _results(a)
        warm = _results(b)
        stale = [k for k in cold if not _equal(warm[k], cold[k])]
        if stale:
            lies.append(f"B = A with {b.diff(a)}: stale {', '.join(stale)}")
    assume(pairs > 0)
    assert not lies, "; ".join(lies)


# ---------------------------------------------------------------- the holes of issue 30


def test_training_fabric_sees_the_hybrid_section() -> None:
    """``hybrid-32k`` then ``hybrid.a_topology = rail-only``: the rail-only fabric (768)."""
    a = load_preset("hybrid-32k")
    b = apply_overrides(a, {"hybrid.a_topology": "rail-only"})
    clear_caches()
    alone = _training_fabric(b)
    clear_caches()
    first = _training_fabric(a)
    after = _training_fabric(b)
    clear_caches()
    assert sum(first["switches_by_tier"].values()) == 1280
    assert sum(alone["switches_by_tier"].values()) == 768
    assert after == alone


@pytest.mark.parametrize(
    "over", [{"hybrid.shared_oversubscription": 4}, {"hybrid.a_topology": "rail-only"}]
)
def test_sweep_price_sees_every_section_it_reads(over: dict[str, Any]) -> None:
    """The sweep's network capex after a scenario differing in one priced key is its own."""
    a = apply_overrides(
        load_preset("hybrid-32k"),
        {"cluster.n_gpus": 256, "hybrid.a_gpus": 128, "hybrid.b_gpus": 128, "parallel.dp": "auto"},
    )
    b = apply_overrides(a, over)
    clear_caches()
    alone = evaluate_point(b).network_capex_usd
    clear_caches()
    first = evaluate_point(a).network_capex_usd
    after = evaluate_point(b).network_capex_usd
    clear_caches()
    assert alone != first  # the key changes the price, so a stale price would show
    assert after == alone


def test_tails_quantiles_follow_the_tails_section() -> None:
    """The p50/p99 caches are keyed by the tails section: B after A is B alone.

    The deterministic step does not read ``tails`` (no fabric or step cache declares it);
    the quantiles (``training.tails.step_quantiles_s``, ``collectives.tails.
    collective_quantiles_us``) take the section as an argument.
    """
    a = _scenario({"cluster.n_gpus": 64, "model.name": "llama3-8b", "tails.enabled": True})
    assert a is not None
    b = apply_overrides(a, {"tails.slow_rank_factor": 0.5})
    cold = _cold(b)
    clear_caches()
    _facade_clear()
    _results(a)
    warm = _results(b)
    assert _equal(warm, cold)
    assert warm["step"]["step_time_p50_s"] > _results(a)["step"]["step_time_p50_s"]
    assert warm["step"]["step_time_s"] == _results(a)["step"]["step_time_s"]


# ------------------------------------------------------------- declared dependencies


def _other_value(key: str, spec: Any, current: Any) -> list[Any]:
    """Values of ``key`` other than ``current``, most plausible first."""
    if spec.kind == "bool":
        return [not current]
    if spec.kind == "choice":
        return [c for c in (*spec.choices, *(("auto",) if spec.auto else ())) if c != current]
    if spec.kind in ("int", "float"):
        out = [v for v in (spec.max, spec.min) if v is not None and v != current]
        if isinstance(current, int | float) and not isinstance(current, bool) and current:
            out = [current * 2, current / 2, *out]
        return [int(v) for v in out] if spec.kind == "int" else out
    return []


def _perturbed(s: Scenario, section: str) -> list[Scenario]:
    """``s`` with each key of ``section`` changed in turn (values the table refuses skipped)."""
    out = []
    for key, spec, _ in _KEYS[section]:
        if key in _SKIP:
            continue
        for value in _other_value(key, spec, s.get(key)):
            try:
                out.append(apply_overrides(s, {key: value}))
                break
            except FabricModelError:
                continue
    return out


_DECLARED_BASES = {
    "hybrid": {"cluster.n_gpus": 128, "fabric.topology": "hybrid", "model.name": "mixtral-8x7b"},
    "fat-tree": {"cluster.n_gpus": 128, "fabric.topology": "fat-tree", "parallel.ep": 8},
}


def _fabric_of(s: Scenario) -> Any:
    from fabric_model.collectives import FabricContext

    return _outcome(
        lambda: {
            **_counts(FabricContext.from_scenario(s).topology),
            "capacity_Bps": FabricContext.from_scenario(s).capacity_Bps,
        }
    )


def _price_of(s: Scenario) -> Any:
    return _outcome(lambda: bill_of_materials(s).capex_usd)


@pytest.mark.parametrize("base", list(_DECLARED_BASES))
def test_declared_reads_cover_what_each_cached_result_reads(base: str) -> None:
    """A section a declaration leaves out never moves its result; a declared one moves the key."""
    from fabric_model.training.fabric import FABRIC_READS
    from fabric_model.training.sweep import PRICE_READS

    s = _scenario(_DECLARED_BASES[base])
    assert s is not None
    for reads, result in ((FABRIC_READS, _fabric_of), (PRICE_READS, _price_of)):
        expected = result(s)
        for section in sorted(_KEYS):
            for other in _perturbed(s, section):
                if section in reads.sections:
                    assert reads.key(other) != reads.key(s), (reads.what, other.diff(s))
                else:
                    assert _equal(result(other), expected), (reads.what, other.diff(s))


def test_clear_caches_empties_every_registered_cache() -> None:
    """Every cache of the model and the facade is registered, and ``clear_caches`` empties it."""
    from fabric_model import caching

    s = _scenario(_DECLARED_BASES["hybrid"])
    assert s is not None
    _results(s)
    names = {c.name for c in caching.caches()}
    assert {
        "training.fabric._BASES",
        "training.fabric._MODELS",
        "training.sweep._CAPEX",
        "collectives.context._ROUTES",
        "caching.kept_per_fabric",
        "ui.facade.training_step",
    } <= names
    training_fabric = importlib.import_module("fabric_model.training.fabric")
    training_sweep = importlib.import_module("fabric_model.training.sweep")

    assert len(training_fabric._BASES) and len(training_sweep._CAPEX)
    clear_caches()
    assert not len(training_fabric._BASES) and not len(training_sweep._CAPEX)
    assert not caching._KEPT


#: Caches of data files read once per process: they depend on no scenario (see
#: ``fabric_model.caching``), so they are not registered. ``_found_browser`` looks
#: for Chromium once; ``_environment`` is the report's Jinja loader.
_DATA_FILE_LOADERS = {
    "fabric_model/resources.py",
    "fabric_model/collectives/context.py:nccl_constants",
    "fabric_model/training/constants.py",
    "fabric_model/families.py",
    "fabric_model/presets.py",
    "fabric_model/report/citations.py",
    "fabric_model/catalog/load.py",
    "fabric_model/collectives/versions.py",
    "fabric_model/transports.py",
    "fabric_model/scenario/failure_modes.py",
    "ui/exports.py",
    "ui/report.py",
}


def test_every_cache_in_the_source_is_registered() -> None:
    """A new ``lru_cache``, ``OrderedDict`` or per-graph dict beside the registry fails here."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    pattern = re.compile(
        r"(lru_cache\(|^@cache\b|@functools\.cache\b|= OrderedDict\(\)|WeakKeyDictionary\(\)"
        r"|st\.cache_resource\(|st\.cache_data\()",
        re.M,
    )
    unregistered = []
    for path in sorted((*root.glob("fabric_model/**/*.py"), *root.glob("ui/*.py"))):
        rel = path.relative_to(root).as_posix()
        if rel in ("fabric_model/caching.py", "ui/cache_keys.py"):
            continue
        text = path.read_text(encoding="utf-8")
        for m in pattern.finditer(text):
            line = text[: m.start()].count("\n")
            after = "\n".join(text.splitlines()[line : line + 3])
            if rel in _DATA_FILE_LOADERS or any(
                f"{rel}:{name}" in _DATA_FILE_LOADERS for name in re.findall(r"def (\w+)", after)
            ):
                continue
            if "register(" not in text:
                unregistered.append(f"{rel}:{line + 1}")
    assert not unregistered, f"caches not in fabric_model.caching: {unregistered}"


#: Module-level containers the code fills that are not caches of results: the verb registry
#: (filled by the ``verb`` decorator as its modules load) and the command line's parsers (one
#: per verb, built from no scenario, like the data files above).
_NOT_RESULT_CACHES = {"fabric_model/cli/registry.py:VERBS", "fabric_model/cli/app.py:_PARSERS"}


def test_no_hand_written_cache_beside_the_registry() -> None:
    """A module-level dict, list or set that a function fills is a cache: it must be registered.

    ``plant.design._CHOICE_CACHE`` was such a dict (``_CHOICE_CACHE[key] = ...`` in
    ``_choose_switch``) that the pattern scan above does not see and ``clear_caches`` missed.
    """
    import ast
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    factories = {"dict", "list", "set", "OrderedDict", "defaultdict", "deque"}
    mutators = {"setdefault", "update", "add", "append", "extend", "insert", "__setitem__"}
    binding = re.compile(
        r"^(?!__all__)\w+(?:\s*:[^=\n]+)?\s*=\s*(?:[{\[]|(?:\w+\.)?(?:"
        + "|".join(factories)
        + r")\()",
        re.M,
    )

    def container(value: ast.expr | None) -> bool:
        if isinstance(value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp):
            return True
        if isinstance(value, ast.Call):
            f = value.func
            return (f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")) in factories
        return False

    unregistered = []
    for path in sorted((*root.glob("fabric_model/**/*.py"), *root.glob("ui/*.py"))):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        if rel == "fabric_model/caching.py" or not binding.search(text):
            continue
        tree = ast.parse(text)
        names = {
            t.id
            for node in tree.body
            if isinstance(node, ast.Assign | ast.AnnAssign) and container(node.value)
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(t, ast.Name)
        }
        filled = set()
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for n in ast.walk(fn):
                if (
                    isinstance(n, ast.Subscript)
                    and isinstance(n.ctx, ast.Store)
                    and isinstance(n.value, ast.Name)
                ):
                    filled.add(n.value.id)
                elif (
                    isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Attribute)
                    and isinstance(n.func.value, ast.Name)
                    and n.func.attr in mutators
                ):
                    filled.add(n.func.value.id)
        for name in sorted(names & filled):
            registered = re.search(rf'register\(\s*"[\w.]*\b{re.escape(name)}"', text)
            if not registered and f"{rel}:{name}" not in _NOT_RESULT_CACHES:
                unregistered.append(f"{rel}:{name}")
    assert not unregistered, f"hand-written caches not in fabric_model.caching: {unregistered}"
