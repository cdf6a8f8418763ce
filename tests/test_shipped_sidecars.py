"""Every shipped checkpoint says which command, seed and clean commit produced it
(developers' guide, "honest names"; issues 9 and 11)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import p4cc

PKG = Path(p4cc.__file__).parent
COMMIT = re.compile(r"^[0-9a-f]{40}$")

def sidecars() -> list[Path]:
    """The sidecar of every trained checkpoint: ``X.json`` beside ``X.npz``, and the
    distilled trees' ``.sidecar.json`` (their ``.json`` is the tree file itself)."""
    out = [p.with_suffix(".json") for p in sorted((PKG / "data" / "agents").glob("*.npz"))]
    hostcc = PKG / "hostcc" / "data"
    out += [p.with_suffix(".json") for p in sorted(hostcc.glob("rlcc-adpg-*.npz"))]
    out += sorted(hostcc.glob("*.sidecar.json"))
    return out


def test_every_trained_checkpoint_has_a_sidecar() -> None:
    found = sidecars()
    assert len(found) >= 9, [p.name for p in found]
    missing = [p.name for p in found if not p.is_file()]
    assert not missing, f"checkpoints without a sidecar: {missing}"


@pytest.mark.parametrize("path", sidecars(), ids=lambda p: p.name)
def test_sidecar_names_command_seed_and_clean_commit(path: Path) -> None:
    meta = json.loads(path.read_text())
    assert str(meta.get("command", "")).startswith("p4cc train "), meta.get("command")
    assert isinstance(meta.get("seed"), int), meta.get("seed")
    assert f"--seed {meta['seed']}" in meta["command"]
    commit = str(meta.get("git_commit", ""))
    assert COMMIT.match(commit), f"{path.name}: commit {commit!r} is not a clean 40-hex commit"
