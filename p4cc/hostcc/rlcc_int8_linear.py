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

from p4cc.hostcc.rlcc_int8_core import ACT_HI, ACT_LO, CENTER, IntArray
from p4cc.hostcc.rlcc_trees_linear import LinearLeaves

#: Fraction bits of the folded linear weights k_f (error ≤ 2^−17 leaf units per code).
COEF_FRAC_BITS = 16


@dataclass(frozen=True)
class LinearCodes:
    """The value codes of the features and every linear leaf's folded integers."""

    center: npt.NDArray[np.float64]  # (features,) the value at code 0
    step: npt.NDArray[np.float64]  # (features,) value per code step
    u_lo: IntArray  # (features,) lowest code
    u_hi: IntArray  # (features,) highest code
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
        lo = np.tile([delta_lo, ACT_LO], window)
        hi = np.tile([target, ACT_HI], window)
        bits = np.tile([delta_bits, 8], window)
        center = np.tile(CENTER, window).astype(np.float64)
        step = (hi - lo) / ((np.int64(1) << bits) - 1)
        u_lo = np.round((lo - center) / step).astype(np.int64)
        u_hi = u_lo + ((np.int64(1) << bits) - 1)
        const_q = np.round(coef @ center / unit).astype(np.int64)
        coef_q = np.round(coef * step / unit * 2.0**COEF_FRAC_BITS).astype(np.int64)

        def code(v: npt.NDArray[np.float64]) -> IntArray:
            return np.clip(np.round((np.clip(v, lo, hi) - center) / step), u_lo,
                           u_hi).astype(np.int64)

        return cls(center, step, u_lo, u_hi, const_q, coef_q, code(leaves.lo),
                   code(leaves.hi))

    def bound(self) -> float:
        """The largest |Σ k_f·u_f| (as a float value) any leaf reaches within its bounds,
        summed over trees."""
        k = self.coef_q / 2.0**COEF_FRAC_BITS
        per_leaf = np.maximum(np.abs(k * self.leaf_lo), np.abs(k * self.leaf_hi)).sum(axis=2)
        return float(per_leaf.max(axis=1).sum())

    def value_codes(self, x: npt.NDArray[np.float64]) -> IntArray:
        """The float features as value codes (the quantiser at the input)."""
        u = np.round((np.asarray(x, np.float64) - self.center) / self.step)
        return np.clip(u, self.u_lo, self.u_hi).astype(np.int64)

    def leaf_terms(self, u: IntArray, idx: IntArray) -> IntArray:
        """(n,) Σ over trees of the reached leaves' linear terms, in leaf units."""
        cols = np.arange(idx.shape[1])[None, :]
        ub = np.clip(u[:, None, :], self.leaf_lo[cols, idx], self.leaf_hi[cols, idx])
        acc = np.einsum("ntf,ntf->nt", self.coef_q[cols, idx], ub)
        half = np.int64(1) << (COEF_FRAC_BITS - 1)
        terms = (acc + half) >> COEF_FRAC_BITS
        return (terms + self.const_q[cols, idx]).sum(axis=1)
