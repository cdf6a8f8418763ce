"""Shared by the sweep tests: a tiny spec and the run-directory comparison."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

#: 2 points (load) x 1 agent x 2 seeds on a 4-host star, half a simulated second: each
#: run takes ~0.2 s of CPU.
TINY: dict[str, Any] = {
    "name": "tiny", "backend": "sim", "topology": "star,hosts=4", "scale": "testbed",
    "duration_s": 0.5, "interval_s": 0.05, "agents": ["secn1"],
    "workloads": [{"type": "websearch", "load": 0.5, "size_scale": "bdp"}],
}
GRID = ["load=0.3,0.6"]
SEEDS = (1, 2)

#: What the comparison leaves out, because it records when/where a run ran, not what it
#: measured: status.json's wall-clock fields, log.txt's HH:MM:SS line prefixes, and
#: versions.json (git state and platform of the machine; the tree may change under the
#: test while other work goes on).  Every other file must be byte-identical.
STATUS_CLOCK = ("started_unix", "updated_unix", "elapsed_s")
EXCLUDED_FILES = ("versions.json",)
_CLOCK = re.compile(r"^\d\d:\d\d:\d\d ", re.M)


def write_spec(dirpath: Path, doc: dict[str, Any] | None = None) -> Path:
    path = dirpath / "tiny.yaml"
    path.write_text(yaml.safe_dump(doc or TINY))
    return path


def comparable(path: Path) -> bytes | dict[str, Any]:
    if path.name == "status.json":
        status: dict[str, Any] = json.loads(path.read_text())
        return {k: v for k, v in status.items() if k not in STATUS_CLOCK}
    if path.name == "log.txt":
        return _CLOCK.sub("", path.read_text()).encode()
    return path.read_bytes()


def run_files(run_dir: Path) -> dict[str, bytes | dict[str, Any]]:
    return {p.name: comparable(p) for p in sorted(run_dir.iterdir())
            if p.name not in EXCLUDED_FILES}


def tree(root: Path) -> dict[str, dict[str, bytes | dict[str, Any]]]:
    """Every run directory under a sweep root (``<point>/<variant>``) -> its files."""
    return {str(d.relative_to(root)): run_files(d)
            for d in sorted(root.glob("*/*")) if (d / "spec.resolved.yaml").is_file()}
