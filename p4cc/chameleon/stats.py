"""The monitor's layered statistics (CHAMELEON poster §2.1).

Every short period (10 ms paper time) a reporter takes one raw sample per metric; every
long period (100 ms) it uploads, per metric, statistics of the samples since the last
upload after filtering out the low-quality ones: missing or non-finite samples, and
outliers further than :data:`MAD_K` median absolute deviations from the median (with at
least :data:`MIN_FOR_OUTLIERS` samples).  Statistics: ``mean``, ``min``, ``max``,
``last``, ``slope`` (least-squares gradient per second: the trend within the period),
``n`` (samples kept) and ``dropped``.  A metric with no valid sample is uploaded as
``{"n": 0, "dropped": k}``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from p4cc.scale import Scale

#: the poster's periods (§2.1), in the papers' time; scaled with ``Scale.time``
PAPER_SHORT_PERIOD_S = 10e-3
PAPER_LONG_PERIOD_S = 100e-3
#: outlier filter: |x - median| > MAD_K · MAD (MAD scaled to σ for normal data, 1.4826)
MAD_K = 3.0
MIN_FOR_OUTLIERS = 5


@dataclass(frozen=True)
class Periods:
    short_s: float
    long_s: float

    @classmethod
    def for_scale(cls, scale: Scale) -> Periods:
        return cls(scale.time(PAPER_SHORT_PERIOD_S), scale.time(PAPER_LONG_PERIOD_S))


def summarize(t: np.ndarray, x: np.ndarray) -> dict[str, float]:
    """Filtered statistics of samples ``x`` taken at times ``t`` (seconds)."""
    ok = np.isfinite(x)
    dropped = int((~ok).sum())
    t, x = t[ok], x[ok]
    if len(x) >= MIN_FOR_OUTLIERS:
        med = float(np.median(x))
        mad = 1.4826 * float(np.median(np.abs(x - med)))
        if mad > 0:
            keep = np.abs(x - med) <= MAD_K * mad
            dropped += int((~keep).sum())
            t, x = t[keep], x[keep]
    if not len(x):
        return {"n": 0.0, "dropped": float(dropped)}
    slope = 0.0
    if len(x) >= 2 and float(np.ptp(t)) > 0:
        tc = t - t.mean()
        slope = float((tc * (x - x.mean())).sum() / (tc * tc).sum())
    return {"mean": float(x.mean()), "min": float(x.min()), "max": float(x.max()),
            "last": float(x[-1]), "slope": slope, "n": float(len(x)),
            "dropped": float(dropped)}


class Window:
    """Raw samples of several metrics since the last upload."""

    def __init__(self) -> None:
        self._t: list[float] = []
        self._rows: list[dict[str, float]] = []

    def add(self, t: float, sample: dict[str, float | None]) -> None:
        self._t.append(float(t))
        self._rows.append({k: (math.nan if v is None else float(v)) for k, v in sample.items()})

    def __len__(self) -> int:
        return len(self._t)

    def flush(self) -> dict[str, dict[str, float]]:
        """Statistics of every metric seen, and start a new window."""
        names = sorted({k for r in self._rows for k in r})
        t = np.asarray(self._t)
        out = {nm: summarize(t, np.asarray([r.get(nm, math.nan) for r in self._rows]))
               for nm in names}
        self._t, self._rows = [], []
        return out


class Counter:
    """Turns a cumulative counter into a per-second rate between samples (resets: 0)."""

    def __init__(self) -> None:
        self._last: tuple[float, float] | None = None

    def rate(self, t: float, total: float) -> float | None:
        last, self._last = self._last, (t, total)
        if last is None or t <= last[0]:
            return None
        return max(0.0, total - last[1]) / (t - last[0])


def busy(rx_bps: float | None) -> float | None:
    """A receive-throughput sample only when the host received something in the short
    period: an idle period says nothing about how fast the settings deliver.  (With the
    idle periods in, a period's mean is the load offered in it -- the same for every
    setting when the all-to-all ends within the period -- and the monitor's outlier
    filter keeps either the busy or the idle samples depending on which are the
    majority: docs/chameleon.md, "The metric".)"""
    return rx_bps if rx_bps is not None and rx_bps > 0 else None
