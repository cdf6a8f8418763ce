"""The RED marking test's family-wise bound (tests/red_bound.py), simulated: a correct
switch passes >= 99.9 % of runs, a wrong Pmax fails."""

from __future__ import annotations

import numpy as np
from red_bound import bound_z, curve_failures

from p4cc.controlplane.ecn import EcnConfig

KMIN, KMAX, PKT = 10, 40, 1000
CURVE = EcnConfig(KMIN * PKT, KMAX * PKT, 0.5)


def _run(rng: np.random.Generator, pmax: float) -> list[str]:
    """One simulated sweep like the live test's: ~10,000 ECT packets at depths 0-60."""
    marker = EcnConfig(KMIN * PKT, KMAX * PKT, pmax)
    depths = rng.integers(0, 60, 10_000)
    p = np.array([marker.marking_probability(int(q), PKT) for q in range(60)])
    marked = rng.random(depths.size) < p[depths]
    return curve_failures(list(zip(depths.tolist(), marked.tolist(), strict=True)),
                          lambda q: CURVE.marking_probability(q, PKT), KMIN, KMAX)


def test_bound_arithmetic() -> None:
    assert abs(bound_z(7) - 3.80) < 0.01  # alpha 0.001 / 7, two-sided


def test_red_bound_is_tight_and_catches_a_wrong_pmax() -> None:
    rng = np.random.default_rng(3)
    false_fail = sum(bool(_run(rng, 0.5)) for _ in range(300))
    assert false_fail <= 1  # expected 0.3 at a 0.1 % family-wise rate (3 sigma: ~6)
    assert all(_run(rng, 0.4) for _ in range(20))  # Pmax 0.4 instead of 0.5
    assert all(_run(rng, 0.6) for _ in range(20))
