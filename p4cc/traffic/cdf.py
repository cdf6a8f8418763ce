"""Flow-size distributions: piecewise-linear CDFs read from "bytes cumulative-%" files.

The format is the one of HPCC's ``traffic_gen`` (REFERENCE §4): one ``bytes percent``
pair per line, ``#`` starts a comment, sizes and percentages non-decreasing, the last
percentage 100.  Sampling is by inverse transform on the piecewise-linear CDF, so the
sample mean converges to the piecewise-linear mean (``FlowSizeCdf.mean``), which is the
mean REFERENCE §4 states for each distribution.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from p4cc.errors import ConfigError
from p4cc.paths import TRAFFIC_DATA_DIR as DATA_DIR

#: Built-in distributions by name (files in p4cc/traffic/data/).
BUILTIN_CDFS: dict[str, str] = {
    "websearch": "websearch.cdf",
    "datamining": "datamining.cdf",
    "fbhdp": "fbhdp.cdf",
    "alistorage": "alistorage.cdf",
}


@dataclass(frozen=True)
class FlowSizeCdf:
    """A piecewise-linear flow-size CDF; ``percent`` runs from >= 0 to 100."""

    name: str
    sizes: tuple[float, ...]
    percent: tuple[float, ...]

    def __post_init__(self) -> None:
        _check(self.name, list(zip(self.sizes, self.percent, strict=True)))

    @property
    def mean(self) -> float:
        """Exact mean of the piecewise-linear distribution (bytes)."""
        x = np.asarray(self.sizes, dtype=float)
        p = np.asarray(self.percent, dtype=float) / 100.0
        # Mass below the first point sits at the first size.
        return float(p[0] * x[0] + np.sum(np.diff(p) * (x[1:] + x[:-1]) / 2.0))

    @property
    def max_bytes(self) -> float:
        return float(self.sizes[-1])

    def quantile(self, u: np.ndarray) -> np.ndarray:
        """Inverse CDF at ``u`` in [0, 1] (piecewise linear)."""
        return np.interp(np.asarray(u) * 100.0, self.percent, self.sizes)

    def sample(self, rng: np.random.Generator, n: int, scale: float = 1.0) -> np.ndarray:
        """``n`` flow sizes in whole bytes (>= 1), each multiplied by ``scale``."""
        sizes = self.quantile(rng.random(n)) * scale
        return np.maximum(1, np.rint(sizes)).astype(np.int64)


def _check(name: str, points: list[tuple[float, float]]) -> None:
    if len(points) < 2:
        raise ConfigError(f"CDF {name}: needs at least two 'bytes percent' points")
    prev_x, prev_p = -1.0, -1.0
    for i, (x, p) in enumerate(points):
        if not (np.isfinite(x) and np.isfinite(p)):
            raise ConfigError(f"CDF {name}: point {i + 1} ({x}, {p}) is not finite")
        if x < 0 or p < 0 or p > 100:
            raise ConfigError(
                f"CDF {name}: point {i + 1} ({x:g} B, {p:g} %) must have bytes >= 0 and "
                f"percent in [0, 100]"
            )
        if x < prev_x or p < prev_p:
            raise ConfigError(
                f"CDF {name}: point {i + 1} ({x:g} B, {p:g} %) is not monotone after "
                f"({prev_x:g} B, {prev_p:g} %); sizes and percentages must not decrease"
            )
        prev_x, prev_p = x, p
    if abs(points[-1][1] - 100.0) > 1e-9:
        raise ConfigError(f"CDF {name}: the last percentage is {points[-1][1]:g}, not 100")


def parse_cdf(text: str, name: str = "<text>") -> FlowSizeCdf:
    """Parse "bytes cumulative-%" lines (``#`` comments, blank lines ignored)."""
    points: list[tuple[float, float]] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2:
            raise ConfigError(f"CDF {name} line {lineno}: expected 'bytes percent', got {raw!r}")
        try:
            points.append((float(parts[0]), float(parts[1])))
        except ValueError:
            raise ConfigError(
                f"CDF {name} line {lineno}: {raw!r} is not two numbers"
            ) from None
    _check(name, points)
    return FlowSizeCdf(name, tuple(p[0] for p in points), tuple(p[1] for p in points))


def load_cdf(name_or_path: str | Path) -> FlowSizeCdf:
    """A built-in distribution by name (``websearch`` ...) or a ``.cdf`` file path."""
    key = str(name_or_path)
    if key.lower() in BUILTIN_CDFS:
        path = DATA_DIR / BUILTIN_CDFS[key.lower()]
        return parse_cdf(path.read_text(), key.lower())
    path = Path(key)
    if not path.is_file():
        raise ConfigError(
            f"unknown flow-size distribution {key!r}: not one of {sorted(BUILTIN_CDFS)} "
            f"and no such file"
        )
    return parse_cdf(path.read_text(), str(path))
