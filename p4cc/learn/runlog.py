"""What a training run leaves behind under ``runs/<name>/``, and its progress line.

* ``curves.csv`` / ``curves.png``: one row per logged step (step, phase, reward, loss, ...);
* ``<algo>.npz``: the exported weights (p4cc.controlplane.agents.mlp format), small
  enough to commit, and ``<algo>.json`` beside it: the exact command, seed, git commit,
  configuration and the final curve values;
* progress: tqdm when installed, else one rewritten stderr line.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from p4cc.controlplane.agents.mlp import Layers, save_npz
from p4cc.paths import REPO_ROOT


def provenance(path: Path, config: Any, seed: int | None,
               command: list[str] | None = None) -> dict[str, Any]:
    """What every checkpoint sidecar says about how ``path`` was made: the exact command,
    seed, git commit, time, size and the full config."""
    return {
        "command": " ".join(command if command is not None else ["p4cc", *sys.argv[1:]]),
        "seed": seed,
        "git_commit": git_commit(),
        "created_unix": int(time.time()),
        "bytes": path.stat().st_size,
        "config": asdict(config) if is_dataclass(config) and not isinstance(config, type)
        else config,
    }


def git_commit() -> str:
    """HEAD of the source checkout (with ``-dirty`` when the tree has changes), or ''."""
    try:
        head = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"],
                              capture_output=True, text=True, timeout=10, check=True)
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


class Curves:
    """Rows of learning-curve values, written as CSV and plotted as PNG."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def log(self, **row: Any) -> None:
        self.rows.append(row)

    def last(self, key: str) -> Any:
        for row in reversed(self.rows):
            if row.get(key) is not None:
                return row[key]
        return None

    def final(self) -> dict[str, Any]:
        keys = {k for row in self.rows for k in row}
        return {k: self.last(k) for k in sorted(keys)}

    def write(self, out_dir: Path, title: str) -> tuple[Path, Path]:
        out_dir.mkdir(parents=True, exist_ok=True)
        keys: list[str] = []
        for row in self.rows:
            keys += [k for k in row if k not in keys]
        csv_path, png_path = out_dir / "curves.csv", out_dir / "curves.png"
        with csv_path.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=keys)
            w.writeheader()
            w.writerows(self.rows)
        self._plot(png_path, keys, title)
        return csv_path, png_path

    def _plot(self, path: Path, keys: list[str], title: str) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        series = [k for k in keys if k not in ("step", "phase") and any(
            isinstance(r.get(k), (int, float)) for r in self.rows)]
        fig, axes = plt.subplots(len(series) or 1, 1, figsize=(7, 2.2 * max(1, len(series))),
                                 sharex=True, squeeze=False)
        for ax, key in zip(axes[:, 0], series, strict=False):
            pts = [(r["step"], r[key]) for r in self.rows if isinstance(r.get(key),
                                                                        (int, float))]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], lw=1)
            ax.set_ylabel(key, fontsize=8)
            ax.grid(alpha=0.3)
        axes[-1, 0].set_xlabel("environment step (interval Δt)")
        axes[0, 0].set_title(title, fontsize=9)
        fig.tight_layout()
        fig.savefig(path, dpi=90)
        plt.close(fig)


def save_checkpoint(out_dir: Path, algo: str, nets: dict[str, Layers], meta: dict[str, Any],
                    config: Any, seed: int, curves: Curves,
                    command: list[str] | None = None) -> tuple[Path, Path]:
    """Write ``<algo>.npz`` and its JSON sidecar; returns both paths."""
    npz = save_npz(out_dir / f"{algo}.npz", nets, meta)
    sidecar = {**provenance(npz, config, seed, command), "checkpoint": npz.name,
               "final": curves.final(), "meta": meta}
    side = out_dir / f"{algo}.json"
    side.write_text(json.dumps(sidecar, indent=2, sort_keys=False, default=str) + "\n")
    return npz, side


class Progress:
    """tqdm if installed, else a stderr line rewritten at most every 0.5 s."""

    def __init__(self, total: int, desc: str, enabled: bool = True) -> None:
        self.total, self.desc, self.enabled, self.n = total, desc, enabled, 0
        self._bar: Any = None
        self._t0 = self._shown = time.monotonic()
        if enabled:
            try:
                from tqdm import tqdm  # optional
                self._bar = tqdm(total=total, desc=desc, file=sys.stderr)
            except ImportError:
                self._bar = None

    def update(self, n: int = 1, **info: Any) -> None:
        self.n += n
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(n)
            if info:
                self._bar.set_postfix(info, refresh=False)
            return
        now = time.monotonic()
        if now - self._shown >= 0.5 or self.n >= self.total:
            self._shown = now
            rate = self.n / max(now - self._t0, 1e-9)
            extra = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                             for k, v in info.items())
            print(f"\r{self.desc}: {self.n}/{self.total} ({rate:.0f}/s) {extra}   ",
                  end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self.enabled:
            print(file=sys.stderr)
