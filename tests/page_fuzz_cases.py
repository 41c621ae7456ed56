"""Random scenarios opened on every dashboard page through AppTest, and the page contract.

Shared by ``tests/test_page_fuzz.py`` (a bounded, derandomized set in CI) and
``benchmarks/page_fuzz.py`` (thousands of seeded cases, crashes per thousand). The scenarios
come from the CLI fuzzer's generator (``tests/fuzz_scenarios.py``: every key of the key
table, drawn to reach deep into the model); a case puts them in the URL the way a shared
link does (``/scaling?preset=...&cluster.n_gpus=...``), plus the page's own parameters
(``wi.``, ``cmp.``, ``ex.``) and, on Validate, a generated nccl-tests log pasted in.

A page passes when:

- the script ran to its end or to a deliberate ``st.stop`` (no exception element, nothing
  escaped ``AppTest.run``, no timeout);
- every ``st.error`` and ``st.warning`` names what to change: a scenario key, a page
  parameter, or one of the physics findings in :data:`PHYSICS_WARNINGS` (a pipeline bubble,
  oversubscription, ...);
- no metric shows ``nan`` or ``inf``.

:attr:`PageCase.url` reproduces a failure in a browser.
"""

from __future__ import annotations

import random
import re
import traceback
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabric_model.presets import list_presets, load_preset
from fabric_model.scenario import iter_field_specs
from tests.fuzz_scenarios import _fmt, _nccl_log, random_overrides

__all__ = [
    "PAGES",
    "PHYSICS_WARNINGS",
    "PageCase",
    "PageOutcome",
    "check_page",
    "describe_page_failure",
    "message_problem",
    "quiet_streamlit",
    "random_page_case",
    "run_page_case",
]

#: The navigation's page scripts, as AppTest.switch_page wants them.
PAGES = (
    "pages/overview.py",
    "pages/topology.py",
    "pages/collectives.py",
    "pages/scaling.py",
    "pages/moe.py",
    "pages/whatif.py",
    "pages/compare.py",
    "pages/explore.py",
    "pages/cost.py",
    "pages/validate.py",
)
#: Every dotted scenario key, longest first (so ``fabric.oversubscription`` is found before
#: a key it starts with).
_KEYS = sorted((k for k, _, _ in iter_field_specs()), key=len, reverse=True)
#: Words that name what to change without being a dotted key: the URL's own parameters.
_PARAM_WORDS = re.compile(r"\b(preset|(wi|cmp|ex)\.[a-z_.0-9]+)\b")
#: Messages that report a physical finding about a design that runs (what to change is the
#: whole design, not one key): each pattern is one message a page writes on purpose.
PHYSICS_WARNINGS = (
    re.compile(r"^The pipeline bubble is \d+% of the step"),
    re.compile(r"^Exposed communication is \d+% of the step"),
    re.compile(r"^The leaf is [\d.]+:1 oversubscribed"),
    re.compile(r"^Static ECMP hashing: across seeds"),
    re.compile(r"^Memory is tight: [\d,.]+ \+- [\d,.]+ GiB per GPU"),
    # a page's time budget ran out (ui.facade.COMPUTE_BUDGET_S): it says how to get the rest
    re.compile(r"^Cut short after the (page's )?\d+ s budget: .*`python -m fabric_model "),
)
_BAD_NUMBER = re.compile(r"\b(nan|inf|infinity)\b", re.IGNORECASE)


@dataclass(frozen=True)
class PageCase:
    """One page opened on one scenario: its URL parameters and, on Validate, a pasted log.

    Attributes
    ----------
    page : str
        Page script (``pages/overview.py``).
    params : tuple[tuple[str, str], ...]
        URL query parameters in order: ``preset`` first, then scenario keys, then the
        page's own parameters.
    log_text : str
        An nccl-tests log pasted into the Validate page (empty: none).
    """

    page: str
    params: tuple[tuple[str, str], ...]
    log_text: str = ""

    @property
    def url(self) -> str:
        """Return the page's URL path with its query (the browser reproduces the case)."""
        stem = Path(self.page).stem
        path = "/" if stem == "overview" else "/" + stem
        return path + "?" + urllib.parse.urlencode(self.params)


@dataclass(frozen=True)
class PageOutcome:
    """What a page did: what breaks the contract (empty: nothing), and the messages seen."""

    problems: tuple[str, ...] = ()
    crash: str = ""
    messages: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """Whether the page kept the contract."""
        return not self.crash and not self.problems


# ------------------------------------------------------------------------------ drawing


#: The smallest presets hold 1,024 GPUs: a case's base preset is at most this size or
#: ``max_gpus``, whichever is larger.
_PRESET_FLOOR_GPUS = 1024


def _small_presets(max_gpus: int) -> list[str]:
    cap = max(max_gpus, _PRESET_FLOOR_GPUS)
    return [p.name for p in list_presets() if load_preset(p.name).cluster.n_gpus <= cap]


def _whatif_params(rng: random.Random) -> dict[str, str]:
    """``wi.`` parameters: a few of the page's changes, mostly valid values."""
    pool = {
        "wi.degraded_link_factor": ("0.5", "0.1", "0.001", "1", "0.25"),
        "wi.degraded_link": ("nic", "leaf-spine", "spine-core"),
        "wi.placement": ("scattered", "contiguous"),
        "wi.oversubscription": ("1", "2", "4", "7.5"),
        "wi.link_gbps": ("200", "400", "800", "1600"),
        "wi.nics_per_gpu": ("1", "2", "4"),
    }
    picked = rng.sample(sorted(pool), rng.randint(0, 3))
    return {name: rng.choice(pool[name]) for name in picked}


def _compare_params(rng: random.Random, presets: list[str], max_gpus: int) -> dict[str, str]:
    """``cmp.<n>`` pins: a preset plus a few random keys each (as the page writes them)."""
    out = {}
    for n in range(1, rng.randint(0, 2) + 1):
        preset = rng.choice(presets)
        over = random_overrides(rng, max_gpus)
        keys = rng.sample(sorted(over), min(len(over), rng.randint(1, 4)))
        out[f"cmp.{n}"] = "~".join([preset, *(f"{k}={_fmt(over[k])}" for k in keys)])
    return out


def _explore_params(rng: random.Random) -> dict[str, str]:
    """``ex.`` parameters: one or two dimensions of a few values (a handful of designs)."""
    pool = {
        "ex.fabric.vendor": ("infiniband", "spectrum-x", "roce"),
        "ex.fabric.link_gbps": ("200", "400", "800"),
        "ex.fabric.topology": ("fat-tree", "rail-only", "dragonfly-plus", "torus-3d"),
        "ex.fabric.oversubscription": ("1", "2", "4"),
        "ex.cluster.nics_per_gpu": ("1", "2"),
    }
    out = {}
    for name in rng.sample(sorted(pool), rng.randint(0, 2)):
        out[name] = "~".join(rng.sample(pool[name], rng.randint(1, 2)))
    if out and rng.random() < 0.1:
        out["ex.plan_search"] = "true"
    return out


def random_page_case(rng: random.Random, page: str, max_gpus: int = 512) -> PageCase:
    """Draw one case of ``page``: a small preset and random keys of at most ``max_gpus`` GPUs.

    A refused key leaves the preset's value, so the preset bounds the cluster too (at most
    ``max_gpus`` or 1,024 GPUs, the smallest presets).
    """
    presets = _small_presets(max_gpus)
    preset = rng.choice(presets)
    base = load_preset(preset)
    keep = rng.random() < 0.15
    overrides = random_overrides(rng, max_gpus, base if keep else None)
    params = {"preset": preset, **{k: _fmt(v) for k, v in overrides.items()}}
    if page == "pages/whatif.py":
        params.update(_whatif_params(rng))
    elif page == "pages/compare.py":
        params.update(_compare_params(rng, presets, max_gpus))
    elif page == "pages/explore.py":
        params.update(_explore_params(rng))
    log_text = ""
    if page == "pages/validate.py" and rng.random() < 0.7:
        binary = rng.choice(
            ("all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf")
        )
        drawn = overrides.get("cluster.n_gpus", base.cluster.n_gpus)
        ranks = drawn if isinstance(drawn, int) and 2 <= drawn <= max_gpus else 16
        log_text = _nccl_log(rng, binary, ranks)
    return PageCase(page, tuple(params.items()), log_text)


# ------------------------------------------------------------------------------ running


def message_problem(text: str) -> str:
    """Return why an error or warning breaks the contract ('' when it names what to change)."""
    if any(key in text for key in _KEYS) or _PARAM_WORDS.search(text):
        return ""
    if any(p.search(text) for p in PHYSICS_WARNINGS):
        return ""
    return f"names no scenario key: {text[:300]!r}"


def check_page(at: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Return (problems, messages) of a page AppTest ran (see the module docstring)."""
    from tests.apptest_helpers import alerts

    problems = [f"exception: {e.value}" for e in at.exception]
    messages = alerts(at)
    problems += [p for p in map(message_problem, messages) if p]
    for m in at.metric:
        if _BAD_NUMBER.search(str(m.value)):
            problems.append(f"metric {m.label!r} shows {m.value!r}")
    return tuple(problems), tuple(messages)


def quiet_streamlit() -> None:
    """Silence streamlit's console logging (bare-mode warnings, the tracebacks it prints).

    For long runs: every failure is reported by :func:`describe_page_failure` instead.
    """
    from streamlit import config, logger

    config.set_option("logger.enableRich", False)
    logger.set_log_level("critical")


def run_page_case(case: PageCase, timeout_s: float = 300) -> PageOutcome:
    """Open the case's page in a new AppTest session and judge what it drew."""
    from tests.apptest_helpers import VALIDATE_PASTE_KEY, new_session

    at = new_session(case.params, timeout_s=timeout_s)
    try:
        at.switch_page(case.page).run()
        if case.log_text and not at.exception:
            areas = [t for t in at.text_area if t.key == VALIDATE_PASTE_KEY]
            if areas:
                areas[0].set_value(case.log_text).run()
    except Exception:  # a timeout or anything AppTest itself could not run
        return PageOutcome(crash=traceback.format_exc())
    problems, messages = check_page(at)
    return PageOutcome(problems, messages=messages)


def describe_page_failure(case: PageCase, outcome: PageOutcome) -> str:
    """The URL that reproduces the case, then the traceback's last lines or the problems."""
    lines = [case.url]
    if case.log_text:
        lines.append("(with a generated nccl-tests log pasted on Validate)")
    if outcome.crash:
        lines += outcome.crash.strip().splitlines()[-6:]
    lines += [p[:2000] for p in outcome.problems]
    return "\n".join(lines)
