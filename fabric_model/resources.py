"""Where the package's data files live: the installed copy, or the checkout's ``assets/``.

``pip install .`` ships ``assets/*.yaml`` and ``assets/presets/`` inside the package as
``fabric_model/_assets`` (``pyproject.toml``: package-dir and package-data); a checkout
reads them in place, so editing a YAML file needs no reinstall.

>>> (assets_dir() / "catalog.yaml").is_file()
True
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

__all__ = ["SafeLoader", "asset", "assets_dir", "load_yaml"]

#: libyaml's safe loader where PyYAML was built with it (about 10x faster on the catalog),
#: else the pure-Python one; both construct the same plain data.
SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_CHECKOUT = Path(__file__).resolve().parents[1] / "assets"


@cache
def assets_dir() -> Path:
    """Return the folder holding the catalog, models, constants and presets."""
    installed = Path(str(resources.files("fabric_model") / "_assets"))
    return installed if installed.is_dir() else _CHECKOUT


def asset(*parts: str) -> Path:
    """Return the path of one data file, e.g. ``asset("presets", "meta-24k-roce.yaml")``."""
    return assets_dir().joinpath(*parts)


def load_yaml(path: Path) -> Any:
    """Return the data of a YAML file, read with :data:`SafeLoader` (data only, no objects).

    >>> load_yaml(asset("nccl_constants.yaml"))["max_channels"] > 0
    True
    """
    return yaml.load(path.read_text(encoding="utf-8"), Loader=SafeLoader)
