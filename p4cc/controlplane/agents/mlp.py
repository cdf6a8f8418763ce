"""Exported agent weights (.npz) and their numpy forward pass: no torch at deployment.

Format (written by p4cc.learn.export, read here): one ``.npz`` with
``<net>/<layer>/w`` (out × in, as torch.nn.Linear stores it) and ``<net>/<layer>/b``
arrays, float32, and ``meta``: a JSON string (algorithm, action template, history k,
feature count, reward weights, ...).  Nets: ``main`` (the offline model every switch
loads, ACC §4.3 / PET §4.4) and, after online fine-tuning, ``<switch>:<port>`` for
ports that have their own copy.  Hidden layers use ReLU, the last layer is linear.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from p4cc.errors import ConfigError

Layers = list[tuple[np.ndarray, np.ndarray]]


def forward(layers: Layers, x: np.ndarray) -> np.ndarray:
    """MLP forward pass: ReLU between layers, linear output.  ``x``: (..., in)."""
    h = np.asarray(x, np.float32)
    for i, (w, b) in enumerate(layers):
        h = h @ w.T + b
        if i < len(layers) - 1:
            h = np.maximum(h, 0.0)
    return h


def save_npz(path: str | Path, nets: dict[str, Layers], meta: dict[str, Any]) -> Path:
    """Write ``nets`` and ``meta`` to ``path`` (float32, compressed)."""
    arrays: dict[str, np.ndarray] = {"meta": np.asarray(json.dumps(meta, sort_keys=True))}
    for name, layers in nets.items():
        for i, (w, b) in enumerate(layers):
            arrays[f"{name}/{i}/w"] = np.asarray(w, np.float32)
            arrays[f"{name}/{i}/b"] = np.asarray(b, np.float32)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("wb") as fh:
        np.savez_compressed(fh, **arrays)  # type: ignore[arg-type]
    return out


def load_npz(path: str | Path) -> tuple[dict[str, Layers], dict[str, Any]]:
    """Read a checkpoint written by ``save_npz``; ConfigError if absent or malformed."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"agent checkpoint {p} not found; train one with `p4cc train` "
                          f"and pass it as acc:<path> or pet:<path>")
    try:
        with np.load(p, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            raw = {k: z[k] for k in z.files if k != "meta"}
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"agent checkpoint {p} is not a p4cc .npz: {exc}") from exc
    nets: dict[str, Layers] = {}
    for name in sorted({k.rsplit("/", 2)[0] for k in raw}):
        n = len({k for k in raw if k.startswith(f"{name}/") and k.endswith("/w")})
        nets[name] = [(raw[f"{name}/{i}/w"], raw[f"{name}/{i}/b"]) for i in range(n)]
    if "main" not in nets:
        raise ConfigError(f"agent checkpoint {p} has no 'main' network")
    return nets, meta
