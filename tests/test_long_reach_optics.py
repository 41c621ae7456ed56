"""Long-reach (2 km) optics price the 1,048,576-GPU designs on the default floor plan.

The floor plan of 1,048,576 B300 on 8 planes of 100G (Tomahawk 5) puts ~1.7 km between a
leaf and the centre rows of spines, past every 500 m module; the 800G DR8 2 km part
([SL1] 8 x 100GE from one OSFP 800G module, [SL2] 100GBASE-FR1 2 km) carries it.
"""

from __future__ import annotations

import pytest

from fabric_model.catalog import load_catalog
from fabric_model.cli import main
from fabric_model.errors import InfeasibleDesignError

EIGHT_PLANES = [
    "--set",
    "cluster.gpu=b300",
    "--set",
    "cluster.n_gpus=1048576",
    "--set",
    "fabric.vendor=lossy-ethernet",
    "--set",
    "fabric.link_gbps=800",
    "--set",
    "fabric.planes=8",
]


def test_catalog_has_a_2km_100g_breakout_and_no_further() -> None:
    cat = load_catalog()
    o = cat.optic_for("switch", 100, 1748.4, cage_gbps=800, protocol="ethernet")
    assert o.key == "osfp_800g_dr8_2km" and o.reach_m == 2000
    assert "100GBASE-FR1" in cat.source_note("optics", o.key, "reach_m")
    with pytest.raises(InfeasibleDesignError, match="longest reach at that speed is 2000 m"):
        cat.optic_for("switch", 100, 2500.0, cage_gbps=800, protocol="ethernet")


def test_million_gpu_eight_plane_bom_prices_on_the_floor_plan(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["bom", *EIGHT_PLANES]) == 0
    out = capsys.readouterr().out
    assert "leaf-spine 1748.4 m" in out
    assert "800G OSFP DR8 2 km" in out
    assert "capex USD:" in out
