"""Section ``nccl``: the NCCL version and the algorithm and protocol it is told to use."""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from fabric_model.resources import asset, load_yaml
from fabric_model.scenario.fields import FieldSpec, _f

__all__ = ["NCCL_ALGOS", "NCCL_VERSIONS", "NCCL_VERSIONS_PATH", "NcclSpec"]


#: ``nccl.version`` values (``assets/nccl_versions.yaml``, oldest first; the last is the default).
NCCL_VERSIONS_PATH = asset("nccl_versions.yaml")
NCCL_VERSIONS: tuple[str, ...] = tuple(
    yaml.safe_load(NCCL_VERSIONS_PATH.read_text(encoding="utf-8"))["versions"]
)
#: ``nccl.algo`` values: NCCL_ALGO's names (lower case, as NCCL parses them), or auto.
NCCL_ALGOS: tuple[str, ...] = (
    "ring",
    "tree",
    "nvls",
    "nvlstree",
    "collnetdirect",
    "collnetchain",
    "pat",
)


@dataclass(frozen=True)
class NcclSpec:
    """The NCCL release the collective model follows, and NCCL's own knobs as what-ifs."""

    version: str = _f(
        NCCL_VERSIONS[-1],
        FieldSpec(
            "choice",
            "NCCL release whose algorithms, kernels and CTA cap the model follows "
            "(assets/nccl_versions.yaml: what each release changes, with its release note)",
            choices=NCCL_VERSIONS,
        ),
    )
    algo: str = _f(
        "auto",
        FieldSpec(
            "choice",
            "NCCL_ALGO: force NCCL's algorithm for all-reduce, all-gather and reduce-scatter "
            "(all-to-all is point-to-point and ignores it); auto = NCCL's tuner",
            choices=NCCL_ALGOS,
            auto=True,
        ),
    )
    proto: str = _f(
        "auto",
        FieldSpec(
            "choice",
            "NCCL_PROTO: force NCCL's protocol (all-to-all ignores it); auto = NCCL's tuner",
            choices=("LL", "LL128", "Simple"),
            auto=True,
        ),
    )
    max_channels: int | str = _f(
        "auto",
        FieldSpec(
            "int",
            "NCCL_MAX_NCHANNELS (and NCCL_MIN_NCHANNELS): at most this many channels; "
            "fewer channels use fewer NICs per NVLink domain and lower NCCL's per-channel "
            "caps; auto = NCCL's own count",
            "channels",
            min=1,
            max=int(load_yaml(asset("nccl_constants.yaml"))["max_channels"]),
            auto=True,
        ),
    )
    registered_buffers: bool = _f(
        False,
        FieldSpec(
            "bool",
            "user buffers registered with NCCL (ncclCommRegister / ncclCommWindowRegister "
            "with NCCL_WIN_COLL_SYMMETRIC): from 2.27 a job inside one NVLink domain runs "
            "NCCL's symmetric-memory kernels; the tuner CSV's regBuff column",
        ),
    )
    cta_policy: str = _f(
        "default",
        FieldSpec(
            "choice",
            "NCCL_CTA_POLICY of the communicator: zero = NCCL_CTA_POLICY_ZERO, from 2.28 "
            "all-gather and all-to-all inside one NVLink domain on registered buffers run on "
            "the copy engines (zero SMs)",
            choices=("default", "zero"),
        ),
    )
