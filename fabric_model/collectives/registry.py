"""The registry of collective algorithms: one :class:`Algorithm` entry per ``--algo`` value.

Each entry says which operations the algorithm runs (and which only inside one NVLink
domain), its cost model (``(FabricContext, op) -> AlgoModel``, in
:mod:`fabric_model.collectives.algorithms`), whether NCCL-like ``auto`` and the Collectives
page consider it, its label and colour, and how a job makes NCCL run it. The front door
(:func:`fabric_model.collectives.algo_models`), the CLI's ``--algo`` choices, the pages and the
nccl-tests advice read this table; ``ALGOS``, ``AUTO_CANDIDATES``, ``MODELS`` and the UI's
``OP_ALGORITHMS``, ``DEFAULT_ALGORITHMS`` and ``ALGO_LABELS`` are views of it.

A new algorithm is its model function (a module or a function in ``algorithms.py``) plus one
entry in :data:`ALGORITHMS`.

>>> ALGORITHMS["tree"].ops
('allreduce',)
>>> OP_ALGORITHMS["alltoall"]
('direct', 'hierarchical')
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fabric_model.collectives import algorithms as _a
from fabric_model.collectives.context import FabricContext
from fabric_model.collectives.copy_engine import ce_model
from fabric_model.collectives.model import OPS, AlgoModel, AlgorithmUnavailableError
from fabric_model.collectives.pat import pat_model
from fabric_model.collectives.sharp_gather import sharp_any_model
from fabric_model.collectives.symmetric_kernels import symmetric_model
from fabric_model.collectives.versions import FEATURES, has
from fabric_model.families import OKABE_ITO
from fabric_model.scenario import FabricSpec, NcclSpec

__all__ = [
    "ALGORITHMS",
    "ALGOS",
    "AUTO_CANDIDATES",
    "DEFAULT_ALGORITHMS",
    "MODELS",
    "NCCL_ALGO_MODELS",
    "OP_ALGORITHMS",
    "Algorithm",
    "auto_candidates",
    "check_op",
    "check_version",
    "forced_models",
]


@dataclass(frozen=True)
class Algorithm:
    """One collective algorithm: what it runs, its cost model, where it is valid, its label.

    Attributes
    ----------
    name : str
        The ``--algo`` value and ``CollectiveTime.algo``.
    label : str
        Display name (legends, tables).
    model : Callable[[FabricContext, str], AlgoModel]
        The cost model; raises :class:`AlgorithmUnavailableError` where the design cannot run
        it (the message says why).
    ops : tuple[str, ...]
        Operations it runs on any job; the first is the one it is built for (the views list,
        per operation, the algorithms built for it first).
    one_domain_ops : tuple[str, ...]
        Operations it runs only inside one NVLink domain (refused across domains).
    auto_ops : tuple[str, ...]
        Operations for which NCCL-like ``auto`` considers it (and, those of ``ops``, the
        Collectives page plots it before the user picks).
    auto_flag : str
        A boolean ``fabric.*`` field that must be on for ``auto`` to consider it (empty: none).
    valid : str
        Where it is valid, one line (docs and the ``keys``-style listings).
    nccl : str
        How a job makes NCCL run it (the nccl-tests advice).
    color : str
        Hex colour (Okabe-Ito) of its lines and bars.
    aliases : tuple[tuple[str, str], ...]
        Other names its results may carry, with their labels (``nvls`` across NVLink domains
        runs NCCL's NVLS-Tree and reports ``nvls-tree``).
    since : str
        The NCCL feature (``assets/nccl_versions.yaml``) it needs; ``nccl.version`` before
        that feature's release refuses it and ``auto`` leaves it out (empty: every release).
    needs_registered : bool
        ``auto`` considers it only with ``nccl.registered_buffers`` on.
    """

    name: str
    label: str
    model: Callable[[FabricContext, str], AlgoModel]
    ops: tuple[str, ...]
    one_domain_ops: tuple[str, ...] = ()
    auto_ops: tuple[str, ...] = ()
    auto_flag: str = ""
    valid: str = ""
    nccl: str = ""
    color: str = OKABE_ITO["grey"]
    aliases: tuple[tuple[str, str], ...] = ()
    since: str = ""
    needs_registered: bool = False

    @property
    def all_ops(self) -> tuple[str, ...]:
        """Return every operation the model accepts (some only inside one NVLink domain)."""
        return self.ops + self.one_domain_ops


_RING_OPS = ("allreduce", "allgather", "reducescatter")

#: Every algorithm, in the order of the CLI's ``--algo`` choices (architecture section 3.2).
ALGORITHMS: dict[str, Algorithm] = {
    a.name: a
    for a in (
        Algorithm(
            "ring",
            "ring",
            _a.ring_model,
            _RING_OPS,
            auto_ops=_RING_OPS,
            valid="every fabric; on a torus or hypercube the multi-colour rings of every trunk",
            nccl="NCCL_ALGO=Ring",
            color=OKABE_ITO["blue"],
        ),
        Algorithm(
            "tree",
            "tree (double binary)",
            _a.tree_model,
            ("allreduce",),
            auto_ops=("allreduce",),
            valid="every fabric (NCCL's double binary tree over NVLink domains)",
            nccl="NCCL_ALGO=Tree",
            color=OKABE_ITO["orange"],
        ),
        Algorithm(
            "nvls",
            "NVLS",
            _a.nvls_model,
            ("allreduce",),
            one_domain_ops=("allgather", "reducescatter"),
            auto_ops=_RING_OPS,
            auto_flag="nvls",
            valid="NVSwitch domains of 2+ Hopper or newer GPUs with fabric.nvls on; "
            "all-gather and reduce-scatter inside one domain",
            nccl="NCCL_ALGO=NVLS",
            color=OKABE_ITO["green"],
            aliases=(("nvls-tree", "NVLS-Tree (NVLS in the domain, tree across)"),),
        ),
        Algorithm(
            "sharp",
            "SHARP",
            sharp_any_model,
            _RING_OPS,
            auto_ops=_RING_OPS,
            auto_flag="sharp",
            valid="switches with SHARP (InfiniBand); auto considers it with fabric.sharp on; "
            "all-gather and reduce-scatter as NVLS + IB SHARP across NVLink domains of at most "
            "one GPU per NIC head, with registered buffers (NCCL 2.27+)",
            nccl="NCCL_ALGO=CollNetDirect (NCCL_COLLNET_ENABLE=1 with the SHARP plugin); "
            "all-gather / reduce-scatter: NCCL_ALGO=NVLS with NCCL_COLLNET_ENABLE=1 and "
            "registered buffers",
            color=OKABE_ITO["purple"],
            aliases=(("nvls-sharp", "NVLS + IB SHARP (NVLS in the domain, SHARP across)"),),
        ),
        Algorithm(
            "hierarchical",
            "hierarchical",
            _a.hierarchical_or_pxn_model,
            ("allreduce", "alltoall"),
            auto_ops=("alltoall",),
            valid="every fabric; all-to-all moves data over NVLink onto the destination's "
            "rail first (PXN)",
            nccl="a hierarchical (intra-node, then inter-node) schedule",
            color=OKABE_ITO["sky"],
        ),
        Algorithm(
            "direct",
            "direct",
            _a.direct_model,
            ("alltoall",),
            auto_ops=("alltoall",),
            valid="fabrics with a path between every two NICs (not rail-only across domains)",
            nccl="direct peer-to-peer sends",
            color=OKABE_ITO["vermillion"],
        ),
        Algorithm(
            "pat",
            "PAT (parallel aggregated trees)",
            pat_model,
            ("allgather", "reducescatter"),
            auto_ops=("allgather", "reducescatter"),
            valid="across NVLink domains, one GPU per domain (NCCL 2.23+), or with NVLS "
            "inside the domain (NCCL 2.31+)",
            nccl="NCCL_ALGO=PAT",
            color=OKABE_ITO["yellow"],
            since="pat",
        ),
        Algorithm(
            "symmetric",
            "symmetric-memory kernels",
            symmetric_model,
            (),
            one_domain_ops=_RING_OPS,
            auto_ops=_RING_OPS,
            valid="inside one NVLink domain of Hopper or Blackwell GPUs with registered "
            "buffers (nccl.registered_buffers, NCCL 2.27+)",
            nccl="symmetric-memory kernels (buffers registered with ncclCommWindowRegister "
            "and NCCL_WIN_COLL_SYMMETRIC)",
            color=OKABE_ITO["grey"],
            since="symmetric_kernels",
            needs_registered=True,
        ),
        Algorithm(
            "ce",
            "copy engines (zero SMs)",
            ce_model,
            (),
            one_domain_ops=("allgather", "alltoall"),
            auto_ops=("allgather", "alltoall"),
            valid="inside one NVLink domain of Hopper or newer GPUs with NVLS, registered "
            "buffers (nccl.registered_buffers); NCCL 2.28+ with nccl.cta_policy = zero, and "
            "large all-gathers on Blackwell from 2.29",
            nccl="NCCL_CTA_POLICY_ZERO in ncclConfig_t and buffers registered with "
            "ncclCommWindowRegister (NCCL_WIN_COLL_SYMMETRIC)",
            color=OKABE_ITO["black"],
            since="ce_collectives",
            needs_registered=True,
        ),
    )
}

#: ``nccl.algo`` (NCCL_ALGO's names) -> the model's algorithm that runs it. NCCL's NVLS and
#: NVLSTree are one model algorithm (``nvls``: NVLS inside one domain, NVLS-Tree across);
#: CollNet Direct is the model's ``sharp``. CollNet Chain has no model (refused).
NCCL_ALGO_MODELS: dict[str, str] = {
    "ring": "ring",
    "tree": "tree",
    "nvls": "nvls",
    "nvlstree": "nvls",
    "collnetdirect": "sharp",
    "pat": "pat",
}


def forced_models(nccl_algo: str, op: str) -> tuple[str, ...]:
    """Return the model algorithms ``nccl.algo`` (NCCL_ALGO) lets NCCL run for ``op``.

    NCCL's NVLS all-gather and reduce-scatter across nodes is NVLS + IB SHARP (``tuning.cc``),
    the model's ``sharp`` for those operations; everywhere else one model algorithm.

    >>> forced_models("nvls", "allgather"), forced_models("nvls", "allreduce")
    (('nvls', 'sharp'), ('nvls',))
    """
    model = NCCL_ALGO_MODELS.get(nccl_algo)
    if model is None:
        return ()
    if nccl_algo == "nvls" and op in ("allgather", "reducescatter"):
        return ("nvls", "sharp")
    return (model,)


#: ``--algo`` values: every algorithm, then ``auto`` (NCCL-like choice).
ALGOS: tuple[str, ...] = (*ALGORITHMS, "auto")

#: One cost model per algorithm.
MODELS: dict[str, Callable[[FabricContext, str], AlgoModel]] = {
    n: a.model for n, a in ALGORITHMS.items()
}


def _per_op(keep: Callable[[Algorithm, str], bool]) -> dict[str, tuple[str, ...]]:
    """``{op: algorithms}``, those built for ``op`` (their first op) first, else in order."""
    out = {}
    for op in OPS:
        names = [n for n, a in ALGORITHMS.items() if keep(a, op)]
        out[op] = tuple(sorted(names, key=lambda n: ALGORITHMS[n].all_ops[0] != op))
    return out


#: Algorithms that run each operation on any job, in display order (the Collectives page's
#: choices); any other pairing is refused with "runs ... only" or, for ``one_domain_ops``,
#: across NVLink domains.
OP_ALGORITHMS: dict[str, tuple[str, ...]] = _per_op(lambda a, op: op in a.ops)
#: Algorithms ``auto`` considers per operation (before the ``auto_flag`` switches).
AUTO_CANDIDATES: dict[str, tuple[str, ...]] = _per_op(lambda a, op: op in a.auto_ops)
#: What the Collectives page plots before the user picks.
DEFAULT_ALGORITHMS: dict[str, tuple[str, ...]] = _per_op(
    lambda a, op: op in a.auto_ops and op in a.ops
)


def auto_candidates(fabric: FabricSpec, op: str, nccl: NcclSpec | None = None) -> tuple[str, ...]:
    """Return the algorithms ``auto`` chooses among for ``op`` with these fabric switches.

    ``nccl`` is the scenario's ``nccl`` section (default: the newest release, no registered
    buffers): only what that release has, what registered buffers enable, and, under
    ``nccl.algo`` (NCCL_ALGO), that algorithm alone (all-to-all is point-to-point in NCCL
    and ignores NCCL_ALGO).
    """
    names = [
        n
        for n in AUTO_CANDIDATES[op]
        if not ALGORITHMS[n].auto_flag or getattr(fabric, ALGORITHMS[n].auto_flag)
    ]
    if nccl is None:
        nccl = NcclSpec()
    names = [
        n
        for n in names
        if (not ALGORITHMS[n].since or has(nccl.version, ALGORITHMS[n].since))
        and (not ALGORITHMS[n].needs_registered or nccl.registered_buffers)
    ]
    if nccl.algo != "auto" and op != "alltoall":
        forced = forced_models(nccl.algo, op)
        names = [n for n in names if n in forced]
    return tuple(names)


def check_version(algo: str, nccl: NcclSpec) -> None:
    """Refuse an algorithm the scenario's NCCL release does not have.

    Raises
    ------
    AlgorithmUnavailableError
        ``"<algo> needs NCCL <since> or later (nccl.version = ...)"``.
    """
    since = ALGORITHMS[algo].since if algo in ALGORITHMS else ""
    if since and not has(nccl.version, since):
        raise AlgorithmUnavailableError(
            f"{algo} needs NCCL {FEATURES[since]} or later (nccl.version = {nccl.version}; "
            f"assets/nccl_versions.yaml, feature {since})"
        )


def check_op(algo: str, op: str) -> None:
    """Refuse an operation ``algo`` does not run.

    Raises
    ------
    AlgorithmUnavailableError
        ``"<algo> runs <ops> only, not <op>"``.
    """
    accepted = ALGORITHMS[algo].all_ops
    if op not in accepted:
        raise AlgorithmUnavailableError(f"{algo} runs {', '.join(accepted)} only, not {op}")
