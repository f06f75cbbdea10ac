"""The built wheel carries what an installed daiku needs at run time beyond its code."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # `uv run` names itself in $UV; a uv outside PATH (the Makefile's .tools/bin) still works.
    uv = os.environ.get("UV") or shutil.which("uv") or "uv"
    subprocess.run(
        [uv, "build", "--wheel", "--out-dir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("daiku-*.whl")
    return built


def test_wheel_carries_the_crds(wheel: Path) -> None:
    """Every CRD in deploy/crds is in the wheel under daiku_cli/crds, byte for byte."""
    expected = sorted(p.name for p in (ROOT / "deploy" / "crds").glob("*.yaml"))
    with zipfile.ZipFile(wheel) as archive:
        packaged = {
            Path(n).name: archive.read(n)
            for n in archive.namelist()
            if n.startswith("daiku_cli/crds/") and n.endswith(".yaml")
        }
    assert sorted(packaged) == expected
    for name in expected:
        assert packaged[name] == (ROOT / "deploy" / "crds" / name).read_bytes()


def test_installed_daiku_up_finds_its_crds_without_a_checkout(wheel: Path, tmp_path: Path) -> None:
    """`daiku up` run from an unpacked wheel reads the CRDs it carries, not a checkout's."""
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    found = subprocess.run(
        [sys.executable, "-c", "from daiku_cli.up import crd_dir; print(crd_dir())"],
        check=True,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        timeout=60,
    ).stdout.strip()
    assert Path(found) == site / "daiku_cli" / "crds"
    assert sorted(p.name for p in Path(found).glob("*.yaml")) == sorted(
        p.name for p in (ROOT / "deploy" / "crds").glob("*.yaml")
    )
