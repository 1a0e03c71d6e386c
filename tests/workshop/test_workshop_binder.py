"""Binder's environment agrees with pyproject.toml: it installs tilelab itself (so TileLang's pin
comes from one place), JupyterLab as the `lab` extra asks, torch under the same constraint from
PyTorch's CPU index, and nothing that pyproject constrains differently. `make test-binder` builds
it for real; `make lab` passes --allow-root as root only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")


def _requirements(path: Path) -> tuple[dict[str, str], list[str]]:
    from packaging.requirements import Requirement

    reqs, options = {}, []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-"):
            options.append(line)
        elif line in (".", "./"):
            reqs["tilelab"] = ""
        else:
            r = Requirement(line)
            reqs[r.name.lower()] = str(r.specifier)
    return reqs, options


def _pyproject() -> dict[str, str]:
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    out = {}
    for line in project["dependencies"] + project["optional-dependencies"]["lab"]:
        r = Requirement(line)
        out[r.name.lower()] = str(r.specifier)
    return out


def test_binder_requirements_agree_with_pyproject():
    binder, options = _requirements(ROOT / "binder" / "requirements.txt")
    pinned = _pyproject()
    assert "tilelab" in binder, "binder must install this repository ('.'), which brings TileLang's pin"
    assert "jupyterlab" in binder and "torch" in binder
    for name, spec in binder.items():
        if name in pinned:
            assert spec == pinned[name], f"binder asks {name}{spec}, pyproject {name}{pinned[name]}"
    assert "tilelang" not in binder or binder["tilelang"] == pinned["tilelang"]
    assert any(o.startswith("--extra-index-url") and "download.pytorch.org/whl/cpu" in o for o in options)


@pytest.mark.parametrize("uid,flag", [("0", True), ("1000", False)])
def test_make_lab_passes_allow_root_only_as_root(uid, flag, tmp_path):
    """`make -n lab` with an `id` that answers root, then a user: the flag follows the user id."""
    import os
    import shutil

    if shutil.which("make") is None:  # pragma: no cover
        pytest.skip("make is not installed")
    fake = tmp_path / "id"
    fake.write_text(f"#!/bin/sh\necho {uid}\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    make = subprocess.run(["make", "-n", "lab"], cwd=ROOT, capture_output=True, text=True, env=env, check=False)
    lines = [x for x in make.stdout.splitlines() if "jupyter lab" in x]
    assert lines, make.stdout + make.stderr
    assert ("--allow-root" in lines[-1]) == flag, lines[-1]
