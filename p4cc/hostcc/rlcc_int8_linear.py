"""Integer linear leaves for :class:`p4cc.hostcc.rlcc_int8.Int8Trees` (the distilled
student's leaves are linear since session 17: p4cc.learn.rlcc_distill_fit).

The splits keep comparing bin indices (lossless).  A linear leaf c + Σ w_f·x_f also needs
the features' values: each feature gets a second, affine code u_f = round((x_f −
center_f)/step_f), the windowed MLP's input code (:class:`p4cc.hostcc.rlcc_int8.Int8Mlp`:
δ ∈ [delta_lo, target] in ``delta_bits``, a_{t−1} ∈ [1/1.2, 1.2] in 8 bits, code 0 at
δ = 0 and a_{t−1} = 1).  Folded into the leaf sum's unit (2^−LEAF_BITS of the output
code's step): the leaf's constant becomes c + Σ w_f·center_f (int32, added to the leaf),
each weight w_f·step_f becomes a fixed-point multiplier k_f with :data:`COEF_FRAC_BITS`
fraction bits, each leaf's input bounds become code bounds, and the leaf adds
(Σ k_f·clip(u_f)) >> COEF_FRAC_BITS -- integer products of at
most 21 + 17 bits in int64, as the re-quantisation of Jacob et al. 2018 §2.2 (no float
between the input codes and the action table).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from p4cc.hostcc.rlcc_int8_core import AffineCode, IntArray, observation_ranges
from p4cc.hostcc.rlcc_trees_linear import LinearLeaves

#: Fraction bits of the folded linear weights k_f (error ≤ 2^−17 leaf units per code).
COEF_FRAC_BITS = 16


@dataclass(frozen=True)
class LinearCodes:
    """The value codes of the features and every linear leaf's folded integers."""

    code: AffineCode  # the features' value codes
    const_q: IntArray  # (trees, nodes) the folded constant Σ w_f·center_f, leaf units
    coef_q: IntArray  # (trees, nodes, features) k_f, COEF_FRAC_BITS fraction bits
    leaf_lo: IntArray  # (trees, nodes, features) each leaf's input bounds, as codes
    leaf_hi: IntArray

    @classmethod
    def build(cls, leaves: LinearLeaves, scale: float, window: int, unit: float,
              delta_lo: float, target: float, delta_bits: int) -> LinearCodes:
        """``leaves``: the float trees' linear leaves (weights times ``scale``);
        ``unit``: the leaf sum's unit."""
        coef = scale * leaves.coef
        code = AffineCode.over(*observation_ranges(window, delta_lo, target, delta_bits))
        const_q = np.round(coef @ code.center / unit).astype(np.int64)
        coef_q = np.round(coef * code.step / unit * 2.0**COEF_FRAC_BITS).astype(np.int64)
        return cls(code, const_q, coef_q, code.encode(leaves.lo), code.encode(leaves.hi))

    def bound(self) -> float:
        """The largest |Σ k_f·u_f| (as a float value) any leaf reaches within its bounds,
        summed over trees."""
        k = self.coef_q / 2.0**COEF_FRAC_BITS
        per_leaf = np.maximum(np.abs(k * self.leaf_lo), np.abs(k * self.leaf_hi)).sum(axis=2)
        return float(per_leaf.max(axis=1).sum())

    def value_codes(self, x: npt.NDArray[np.float64]) -> IntArray:
        """The float features as value codes (the quantiser at the input)."""
        return self.code.encode(x)

    def leaf_terms(self, u: IntArray, idx: IntArray) -> IntArray:
        """(n,) Σ over trees of the reached leaves' linear terms, in leaf units."""
        cols = np.arange(idx.shape[1])[None, :]
        ub = np.clip(u[:, None, :], self.leaf_lo[cols, idx], self.leaf_hi[cols, idx])
        acc = np.einsum("ntf,ntf->nt", self.coef_q[cols, idx], ub)
        half = np.int64(1) << (COEF_FRAC_BITS - 1)
        terms = (acc + half) >> COEF_FRAC_BITS
        return (terms + self.const_q[cols, idx]).sum(axis=1)
