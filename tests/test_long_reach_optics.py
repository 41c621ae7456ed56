"""Long-reach (2 km) optics price the runs past 500 m of the 1,048,576-GPU designs.

The 800G DR8 2 km part ([SL1] 8 x 100GE from one OSFP 800G module, [SL2] 100GBASE-FR1 2 km)
carries a run past every 500 m module. On the default floor plan, 1,048,576 B300 on 8 planes
of 100G (Tomahawk 5) fill 10 data halls in a 4 x 3 grid (a campus ~330 m across): the
spine-core runs cross halls at ~320 m, within a 500 m module (when one hall was a ~1.9 km
corridor, its leaf-spine runs were 1,748 m and took the 2 km part); a spine-core run set to
1.5 km takes it.
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
    assert "10 halls" in out and "spine-core 318.6 m" in out
    assert "800G OSFP DR8 2 km" not in out
    assert main(["bom", *EIGHT_PLANES, "--set", "fabric.spine_core_m=1500"]) == 0
    out = capsys.readouterr().out
    assert "800G OSFP DR8 2 km" in out
    assert "capex USD:" in out
