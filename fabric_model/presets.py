"""Named scenarios shipped in ``assets/presets/`` (one YAML file each, sparse over the defaults)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from fabric_model.errors import ScenarioError
from fabric_model.resources import asset
from fabric_model.scenario import Scenario, scenario_from_text

__all__ = ["DEFAULT_PRESET", "PRESET_DIR", "PresetInfo", "list_presets", "load_preset"]

PRESET_DIR = asset("presets")
#: The preset equal to an empty scenario ``{}``.
DEFAULT_PRESET = "dgx-h100-ib-ndr"


@dataclass(frozen=True)
class PresetInfo:
    """Name and one-line description of a preset."""

    name: str
    description: str


@lru_cache(maxsize=1)
def _presets() -> dict[str, Scenario]:
    out = {}
    for path in sorted(PRESET_DIR.glob("*.yaml")):
        scenario = scenario_from_text(path.read_text(encoding="utf-8"), source=str(path))
        out[path.stem] = replace(scenario, name=path.stem)
    return out


def list_presets() -> list[PresetInfo]:
    """Return every preset's name and description, default first."""
    presets = _presets()
    names = sorted(presets, key=lambda n: (n != DEFAULT_PRESET, n))
    return [PresetInfo(n, presets[n].description) for n in names]


def load_preset(name: str) -> Scenario:
    """Return the preset scenario ``name``.

    Raises
    ------
    ScenarioError
        If there is no such preset (the message lists them).
    """
    presets = _presets()
    if name in RENAMED:
        raise ScenarioError("preset", name, RENAMED[name])
    if name not in presets:
        raise ScenarioError(
            "preset", name, "must be one of " + ", ".join(p.name for p in list_presets())
        )
    return presets[name]


#: Presets that were renamed because they described hardware that is not built, with why.
RENAMED = {
    "gb200-nvl72-xdr": (
        "was removed: GB200 NVL72 compute trays carry one 400G ConnectX-7 per GPU on PCIe Gen5 "
        "(NVIDIA DGX GB200 reference architecture), not 800G XDR; use gb200-nvl72-ndr, or "
        "gb300-nvl72-xdr for 800G ConnectX-8 (GB300)"
    ),
}
