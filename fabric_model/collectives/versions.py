"""NCCL releases (``nccl.version``): which features each has, from ``assets/nccl_versions.yaml``.

Every feature names the first release that has it and cites its release note; the model's
algorithm availability, ``auto`` and the tuner CSV export ask :func:`has` and
:func:`max_ctas`. The cost-model constants are NCCL 2.30.7's (``assets/nccl_constants.yaml``)
for every release: a release differs only by its features.

>>> has("2.21", "pat"), has("2.23", "pat")
(False, True)
>>> max_ctas("2.27", "blackwell"), max_ctas("2.28", "blackwell"), max_ctas("2.32", "hopper")
(32, 16, 32)
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from fabric_model.resources import asset, load_yaml

__all__ = [
    "FEATURES",
    "VERSIONS",
    "feature_source",
    "has",
    "max_ctas",
    "version_data",
    "version_key",
]

VERSIONS_PATH = asset("nccl_versions.yaml")


@lru_cache(maxsize=1)
def version_data() -> dict[str, Any]:
    """Return ``assets/nccl_versions.yaml`` (versions, features, CTA caps, symmetric kernels)."""
    data: dict[str, Any] = load_yaml(VERSIONS_PATH)
    return data


#: ``nccl.version`` values, oldest first.
VERSIONS: tuple[str, ...] = tuple(version_data()["versions"])
#: Feature name -> the first ``nccl.version`` that has it.
FEATURES: dict[str, str] = {k: str(v["since"]) for k, v in version_data()["features"].items()}


def version_key(version: str) -> tuple[int, ...]:
    """Return ``(major, minor)`` for ordering (``"2.9"`` < ``"2.21"``)."""
    return tuple(int(p) for p in str(version).split("."))


def has(version: str, feature: str) -> bool:
    """Whether NCCL ``version`` has ``feature`` (a key of :data:`FEATURES`)."""
    return version_key(version) >= version_key(FEATURES[feature])


def feature_source(feature: str) -> str:
    """Return the release-note citation of ``feature``."""
    return str(version_data()["features"][feature]["source"])


def max_ctas(version: str, arch: str) -> int:
    """NCCL's default CTA (channel) cap: 16 on Blackwell from 2.28, else 32 (release note)."""
    caps = version_data()["max_ctas"]
    if arch == "blackwell" and has(version, "blackwell_16_ctas"):
        return int(caps["blackwell_from_2_28"])
    return int(caps["before_blackwell_16_ctas"])
