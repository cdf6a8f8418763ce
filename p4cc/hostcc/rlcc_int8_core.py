"""The integer formats shared by RL-CC's int8 policies (p4cc.hostcc.rlcc_int8 for the MLP
and the trees, p4cc.hostcc.rlcc_int8_lstm for the LSTM): code widths and ranges, the
re-quantisation multiplier (Jacob et al. 2018 §2.2) and the output's action table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from p4cc.errors import ConfigError
from p4cc.hostcc.rlcc_policy_base import BOUNDED_M, apply_output

IntArray = npt.NDArray[np.int64]
#: Q-format of the action from the lookup table: action = LUT[code] / 2^16.
Q_ACTION = 16
#: Default lower end of δ's input range (δ below it is clipped).  Chosen on the shipped
#: ADPG MLP over random windows (δ ~ N(0, 0.1), −Exp(1), −Exp(5)): with −4 the error near
#: the operating point was smallest (mean |Δa| 0.0015) but the MLP reacts to δ_{t−1} far
#: below −4 (δ −12 → −3 raises the rate): 1 % of those states erred by ≥ 0.3; with −12
#: the 99th percentile error is 0.018, the mean 0.004 (an 8-bit step of δ is
#: 12.064/255 = 0.047 ≈ 0.74·target).  On an 8→1 / 32→1 incast (2000 RTTs, stagger 10)
#: −12 tracked the float policy's utilisation, Jain and inflation; −4 lost packets at 32.
DELTA_LO = -12.0
#: The session-4 MLP copy (8-bit codes from δ = −12, 8-bit hidden activations, 8-bit
#: output code) held the queue 9 % / 11 % above its float version at N = 8 / 32
#: (docs/results.md "int8-quantised inference").  Measured on the shipped MLP, the
#: steady-state decision a(δ, a_{t−1} = 1) for δ ∈ [−0.3, target] (error against float;
#: session 6, /work/scratch/rl-int/diag.py): three sources, each about as large:
#: (1) the input code's zero at δ = −12: the int8 weight's rounding error is multiplied by
#: the code, largest (×255) exactly at the operating point δ ≈ 0 -- code 0 now sits at
#: δ = 0 and a_{t−1} = 1 (:data:`CENTER`; Jacob et al. 2018 §2.1: the zero point is where
#: the value must be exact); (2) the 8-bit hidden activations, whose max calibration over
#: the whole input box (δ down to −12) leaves a few levels for the operating point;
#: (3) δ's step (0.047).  Mean / max |Δa| near δ = 0: 0.0037 / 0.0088 (session 4),
#: 0.0018 / 0.0065 (centred), 0.00004 / 0.00009 (centred, 16-bit δ and hidden codes, 8
#: output fraction bits).  Integer only still: int8 weights, 16-bit activation codes,
#: int32 accumulators (|acc| < 12·127·65535 < 2²⁷; Jacob et al. §2.2 keep biases and
#: accumulators in int32; Wu et al. 2020 §6 keep precision-sensitive tensors wider).
DELTA_BITS = 16
#: Bits of the hidden activations' unsigned codes (see :data:`DELTA_BITS`).
HIDDEN_BITS = 16
#: Extra output-code bits below the action table's step (0: the 8-bit code); the table
#: is interpolated on them (:func:`lut_action`).
OUT_FRAC_BITS = 8
#: Where each observation's code is 0: δ = 0 (the operating point), a_{t−1} = 1.
CENTER = (0.0, 1.0)
#: The output code's range for ``bounded`` policies: tanh(3) = 0.995, so beyond it the
#: action differs from the bound by < 0.001.
Y_CAP_BOUNDED = 3.0
LEAF_BITS = 8
CODE_MAX = 127  # output code in [−127, 127]
ACT_LO, ACT_HI = 1 / (1 + BOUNDED_M), 1 + BOUNDED_M


def fixed_multiplier(m: npt.ArrayLike) -> tuple[IntArray, IntArray]:
    """(m0, shift) with m ≈ m0·2^−shift, m0 ∈ [2^30, 2^31] (Jacob et al. 2018 §2.2)."""
    mm = np.atleast_1d(np.asarray(m, dtype=np.float64))
    if np.any(mm <= 0) or not np.all(np.isfinite(mm)):
        raise ConfigError("re-quantisation multipliers must be positive and finite")
    mant, exp = np.frexp(mm)  # m = mant·2^exp, mant ∈ [0.5, 1)
    m0 = np.round(mant * 2.0**31).astype(np.int64)
    shift = (31 - exp).astype(np.int64)
    if np.any(shift < 1) or np.any(shift > 62):
        raise ConfigError(f"re-quantisation multiplier out of range: {mm}")
    return m0, shift


def requantize(acc: IntArray, m0: IntArray, shift: IntArray) -> IntArray:
    """round(acc·m0·2^−shift) in int64 (|acc| < 2^31, m0 ≤ 2^31: no overflow)."""
    return (acc * m0 + (np.int64(1) << (shift - 1))) >> shift


def action_lut(y_step: float, output: str, extra: int = 0) -> IntArray:
    """Q16 action for each output code c ∈ [−127, 127 + extra] (index c + 127):
    y = c·y_step (``extra`` 1: the entry interpolation reads past +127)."""
    y = np.arange(-CODE_MAX, CODE_MAX + 1 + extra, dtype=np.float64) * y_step
    return np.round(apply_output(y, output) * 2.0**Q_ACTION).astype(np.int64)


def _y_cap(output: str, y_abs_max: float) -> float:
    cap = Y_CAP_BOUNDED if output == "bounded" else np.inf
    return float(max(min(y_abs_max, cap), 1e-6))


def lut_action(lut: IntArray, code: IntArray, frac_bits: int) -> IntArray:
    """Q16 action of output codes with ``frac_bits`` bits below the table's step: the
    table entry at the upper bits, linearly interpolated on the rest (integer only; the
    table has one entry past +127 for that).  ``frac_bits`` 0: the entry itself."""
    i = (code >> frac_bits) + CODE_MAX
    if frac_bits == 0:
        return lut[i]
    frac = code & ((np.int64(1) << frac_bits) - 1)
    lo = lut[i]
    hi = lut[np.minimum(i + 1, lut.size - 1)]
    return lo + (((hi - lo) * frac + (np.int64(1) << (frac_bits - 1))) >> frac_bits)


def observation_ranges(window: int, delta_lo: float, target: float,
                       delta_bits: int) -> tuple[npt.NDArray[np.float64],
                                                 npt.NDArray[np.float64], IntArray,
                                                 npt.NDArray[np.float64]]:
    """(lo, hi, bits, center) of a window of observations' input codes: δ over
    [``delta_lo``, ``target``] in ``delta_bits``, a_{t−1} over [1/1.2, 1.2] in 8 bits,
    code 0 at :data:`CENTER`."""
    return (np.tile([delta_lo, ACT_LO], window), np.tile([target, ACT_HI], window),
            np.tile(np.array([delta_bits, 8], np.int64), window),
            np.tile(np.asarray(CENTER, np.float64), window))


@dataclass(frozen=True)
class AffineCode:
    """Per-feature affine integer codes u = round((x − center)/step), clipped to
    [u_lo, u_hi]: 2^bits codes over [lo, hi], code 0 at ``center`` (Jacob et al. 2018
    §2.1: the zero point is where the value must be exact)."""

    center: npt.NDArray[np.float64]
    step: npt.NDArray[np.float64]
    u_lo: IntArray
    u_hi: IntArray

    @classmethod
    def over(cls, lo: npt.ArrayLike, hi: npt.ArrayLike, bits: npt.ArrayLike,
             center: npt.ArrayLike) -> AffineCode:
        lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
        n_max = (np.int64(1) << np.asarray(bits, np.int64)) - 1
        c = np.asarray(center, np.float64)
        step = (hi - lo) / n_max
        u_lo = np.round((lo - c) / step).astype(np.int64)
        return cls(c, step, u_lo, u_lo + n_max)

    def encode(self, x: npt.ArrayLike) -> IntArray:
        """The float values as codes (the quantiser at the input; ±inf saturate)."""
        u = np.round((np.asarray(x, np.float64) - self.center) / self.step)
        return np.clip(u, self.u_lo, self.u_hi).astype(np.int64)
