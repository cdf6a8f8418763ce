"""p4cc.paths and the package data an installed p4cc needs."""

from __future__ import annotations

import glob
import os
import re
import sys

import pytest

from p4cc import paths

tomllib = pytest.importorskip("tomllib")
PYPROJECT = paths.REPO_ROOT / "pyproject.toml"
needs_checkout = pytest.mark.skipif(not PYPROJECT.is_file(), reason="not a source checkout")


def _package_data_files() -> set[str]:
    """Files (relative to p4cc/) that [tool.setuptools.package-data] puts in a wheel:
    setuptools expands each pattern with glob (``**`` recursive) in the package dir."""
    globs = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["package-data"]["p4cc"]
    root = str(paths.PACKAGE_DIR)
    return {os.path.relpath(f, root) for g in globs
            for f in glob.glob(os.path.join(root, g), recursive=True) if os.path.isfile(f)}


@needs_checkout
def test_package_data_covers_the_p4_program_and_data_files() -> None:
    shipped = _package_data_files()
    p4 = {os.path.relpath(f, paths.PACKAGE_DIR) for pattern in ("*.json", "*.txtpb")
          for f in glob.glob(str(paths.P4_BUILD_DIR / pattern))}
    assert {"data/p4/p4cc.json", "data/p4/p4cc.p4info.txtpb"} <= p4
    assert p4 <= shipped
    assert os.path.relpath(paths.P4_JSON, paths.PACKAGE_DIR) in shipped
    assert os.path.relpath(paths.P4INFO, paths.PACKAGE_DIR) in shipped
    assert "data/testbed.yaml" in shipped
    for d in (paths.TRAFFIC_DATA_DIR, paths.HOSTCC_DATA_DIR):
        files = {os.path.relpath(f, paths.PACKAGE_DIR) for f in glob.glob(f"{d}/*")}
        assert files and files <= shipped, d


def test_no_module_computes_the_repository_root() -> None:
    """Every path goes through p4cc.paths: no ``parents[n]`` / ``__file__`` arithmetic."""
    pattern = re.compile(r"parents\[|__file__")
    hits = [f"{p.relative_to(paths.PACKAGE_DIR)}:{i}: {line.strip()}"
            for p in sorted(paths.PACKAGE_DIR.rglob("*.py")) if p.name != "paths.py"
            for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)
            and 'resolve().parents[1] / "include"' not in line  # BMv2's install prefix
            and 'getattr(standard, "__file__"' not in line]  # where a module is (doctor)
    assert hits == []


def test_paths_point_into_the_package() -> None:
    assert paths.P4_JSON.is_file() and paths.P4INFO.is_file()
    assert (paths.DATA_DIR / "testbed.yaml").is_file()
    assert paths.P4_BUILD_DIR.parent == paths.DATA_DIR
    assert paths.PACKAGE_DIR == paths.DATA_DIR.parent and paths.PACKAGE_DIR.name == "p4cc"
    assert sys.modules["p4cc"].__file__ is not None
