"""The installable package (issue 14, item 2): a wheel carries the data files it reads."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from fabric_model.resources import assets_dir

ROOT = Path(__file__).resolve().parents[1]


def test_the_checkout_reads_assets_in_place() -> None:
    assert assets_dir() == ROOT / "assets"


def test_the_wheel_ships_every_yaml_the_package_reads(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        cwd=tmp_path,
    )
    (wheel,) = tmp_path.glob("fabric_model-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = {
        f"fabric_model/_assets/{p.relative_to(ROOT / 'assets').as_posix()}"
        for p in (ROOT / "assets").rglob("*.yaml")
    }
    assert wanted and wanted <= names, sorted(wanted - names)
    assert "fabric_model/cli/__init__.py" in names and "fabric_model/training/memory.py" in names
    meta = next(n for n in names if n.endswith("METADATA"))
    text = zipfile.ZipFile(wheel).read(meta).decode()
    for dep in ("numpy", "numba", "networkx", "pyyaml"):
        assert f"Requires-Dist: {dep}" in text.replace("PyYAML", "pyyaml"), dep
