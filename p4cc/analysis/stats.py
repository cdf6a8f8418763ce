"""Confidence intervals over seeds: Student's t without scipy.

``t_cdf_two_sided`` is Abramowitz & Stegun, *Handbook of Mathematical Functions*, 26.7.3
(odd ν) and 26.7.4 (even ν): A(t|ν) = P(|T| <= t) for integer degrees of freedom, as
finite sums in θ = arctan(t/√ν).  ``t_quantile`` inverts it by bisection (A is monotone
in t), giving e.g. t_{0.975, 2} = 4.303 and t_{0.975, 4} = 2.776 as in the printed tables.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def t_cdf_two_sided(t: float, df: int) -> float:
    """A(t|ν) = P(|T| <= t) for Student's t with ``df`` (>= 1, integer) degrees of
    freedom (A&S 26.7.3/26.7.4)."""
    if df < 1:
        raise ValueError(f"degrees of freedom {df} must be >= 1")
    theta = math.atan(abs(t) / math.sqrt(df))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if df == 1:
        return 2.0 * theta / math.pi
    term, total = 1.0, 1.0
    if df % 2 == 0:  # 26.7.4: sinθ (1 + 1/2 cos²θ + 1·3/(2·4) cos⁴θ + ...)
        for k in range(1, df // 2):
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        return s * total
    # 26.7.3: 2/π (θ + sinθ cosθ (1 + 2/3 cos²θ + 2·4/(3·5) cos⁴θ + ...))
    for k in range(1, (df - 1) // 2):
        term *= c2 * (2 * k) / (2 * k + 1)
        total += term
    return 2.0 / math.pi * (theta + s * math.cos(theta) * total)


def t_quantile(level: float, df: int) -> float:
    """t such that P(|T| <= t) = ``level`` (two-sided; 0.95 -> the 97.5 % quantile)."""
    if not 0 < level < 1:
        raise ValueError(f"confidence level {level} must be in (0, 1)")
    lo, hi = 0.0, 1.0
    while t_cdf_two_sided(hi, df) < level:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf_two_sided(mid, df) < level:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def mean_ci(values: Sequence[float] | np.ndarray, level: float = 0.95) -> tuple[float, float,
                                                                               int]:
    """(mean, half-width, n) of the finite ``values``: half-width = t_{ν=n-1} · s/√n with
    the sample standard deviation s (ddof=1); NaN half-width for n < 2."""
    a = np.asarray(values, dtype=float)
    a = a[np.isfinite(a)]
    n = len(a)
    if n == 0:
        return math.nan, math.nan, 0
    mean = float(a.mean())
    if n < 2:
        return mean, math.nan, n
    half = t_quantile(level, n - 1) * float(a.std(ddof=1)) / math.sqrt(n)
    return mean, half, n
