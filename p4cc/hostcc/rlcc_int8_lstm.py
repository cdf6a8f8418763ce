"""Integer inference for the LSTM RL-CC policy (``rlcc:adpg-lstm-int8``).

The network of Tessler et al. §7 / NVIDIA RL-CC §3 (in → 32 → 16 → LSTM 16 → 1) in the
arithmetic of :mod:`p4cc.hostcc.rlcc_int8`: int8 weights (one scale per output unit),
int32 accumulators, integer re-quantisation (multiplier and shift, Jacob et al. 2018
§2.2), and -- as NVIDIA §5.1 did on the NIC, which has no floating point -- the
non-linear activations from lookup tables.  Our choices (no paper gives the formats):

* Inputs and the two ReLU layers: as the MLP's (δ 16 bits and a_{t−1} 8 bits, code 0 at
  δ = 0 and a_{t−1} = 1; unsigned 16-bit activation codes, max-calibrated over the
  quantised input box).
* Gates: z = W_ih·x + W_hh·h + b; the two int32 sums (different input scales) are each
  re-quantised to Q12 (z·2¹²) and added; |z| is clipped at 8.
* sigmoid and tanh: tables of :data:`ACT_ENTRIES` Q15 values on z ∈ [−8, 8] (step 1/32),
  read at the upper bits of the Q12 argument and linearly interpolated on the other 7
  (interpolation error ≤ step²/8·max|f''| = 7.5e-5 for tanh; beyond |z| = 8 the functions
  differ from their limits by < 3.4e-4).  Two tables of 513 int16: 2 KB.
* The recurrent state, per flow: h in Q15 (int16: |h| < 1), c in Q12 (int32; tanh(c) reads
  the same table).  f·c and i·g are Q15 × Q12 / Q15 × Q15 products shifted back to Q12.
* Output: y = w·h + b re-quantised to the MLP's output code (8 bits plus
  ``out_frac_bits``, range ±min(|w|₁ + |b|, 3)) and the interpolated action table.

Everything from the input codes to the Q16 action is integer
(:meth:`Int8Lstm.step_int`); the float observation becomes codes at the input and the
Q16 action a float at the output.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from p4cc.errors import ConfigError
from p4cc.hostcc.rlcc_int8_core import (
    CODE_MAX,
    DELTA_BITS,
    DELTA_LO,
    HIDDEN_BITS,
    OUT_FRAC_BITS,
    Q_ACTION,
    Y_CAP_BOUNDED,
    AffineCode,
    action_lut,
    fixed_multiplier,
    lut_action,
    observation_ranges,
    requantize,
)
from p4cc.hostcc.rlcc_policy_base import FloatArray, PolicyState

IntArray = npt.NDArray[np.int64]
#: Q-format (fraction bits) of gate pre-activations and of the cell state.
Z_FRAC = 12
#: Q-format of the activation tables' outputs and of h.
H_FRAC = 15
#: Table step 2^−ACT_STEP_BITS on [−Z_LIM, Z_LIM].
ACT_STEP_BITS = 5
Z_LIM = 8
ACT_ENTRIES = 2 * Z_LIM * (1 << ACT_STEP_BITS) + 1
#: interpolation bits: the Q12 argument's bits below the table step
_INTERP = Z_FRAC - ACT_STEP_BITS
_Z_CLIP = Z_LIM << Z_FRAC


def activation_tables() -> tuple[IntArray, IntArray]:
    """(sigmoid, tanh) in Q15 at z = −8, −8 + 1/32, …, 8."""
    z = np.linspace(-Z_LIM, Z_LIM, ACT_ENTRIES)
    sig = 0.5 * (1.0 + np.tanh(0.5 * z))
    return (np.round(sig * 2**H_FRAC).astype(np.int64),
            np.round(np.tanh(z) * 2**H_FRAC).astype(np.int64))


def table_lookup(table: IntArray, z_q: IntArray) -> IntArray:
    """``table`` at the Q12 argument ``z_q`` (clipped to ±8), linearly interpolated."""
    z = np.clip(z_q, -_Z_CLIP, _Z_CLIP)
    i = (z + _Z_CLIP) >> _INTERP
    frac = (z + _Z_CLIP) & ((1 << _INTERP) - 1)
    lo = table[i]
    hi = table[np.minimum(i + 1, table.size - 1)]
    return lo + (((hi - lo) * frac + (1 << (_INTERP - 1))) >> _INTERP)


def _quant_rows(w: FloatArray) -> tuple[IntArray, FloatArray]:
    """int8 weights with one symmetric scale per row (output unit)."""
    s = np.maximum(np.abs(w).max(axis=1), 1e-12) / 127.0
    return np.clip(np.round(w / s[:, None]), -127, 127).astype(np.int64), s


class Int8Lstm:
    """The LSTM policy in integer arithmetic; state (h Q15, c Q12) per flow, int64."""

    def __init__(self, policy: object, delta_lo: float = DELTA_LO, target: float = 0.064,
                 delta_bits: int = DELTA_BITS, hidden_bits: int = HIDDEN_BITS,
                 out_frac_bits: int = OUT_FRAC_BITS, calib_seed: int = 0,
                 calib_points: int = 20000) -> None:
        from p4cc.hostcc.rlcc_policies import LstmPolicy

        if not isinstance(policy, LstmPolicy):
            raise ConfigError("Int8Lstm needs an LstmPolicy")
        if not 2 <= hidden_bits <= 16 or not 2 <= delta_bits <= 16 \
                or not 0 <= out_frac_bits <= 12:
            raise ConfigError("codes take 2..16 bits, the output 0..12 extra")
        w = policy.w
        self.name, self.output, self.hidden = "lstm-int8", policy.output, policy.hidden
        self.signal = policy.signal
        self.out_frac_bits = out_frac_bits
        # inputs: δ and a_{t−1}, code 0 at CENTER
        self.code = AffineCode.over(*observation_ranges(1, delta_lo, target, delta_bits))
        self.in_max = self.code.u_hi - self.code.u_lo
        self.center, self.in_scale = self.code.center, self.code.step
        self.u_lo, self.u_hi = self.code.u_lo, self.code.u_hi
        self.h_max = (1 << hidden_bits) - 1
        # the two ReLU layers (input scale and offset folded into the first)
        layers = [(w["fc1_w"] * self.in_scale[None, :], w["fc1_b"] + w["fc1_w"] @ self.center),
                  (w["fc2_w"], w["fc2_b"])]
        rng = np.random.default_rng(calib_seed)
        x = np.floor(rng.random((calib_points, 2)) * (self.in_max + 1)) + self.u_lo
        x = np.concatenate([x, np.array([[a, b] for a in (self.u_lo[0], self.u_hi[0])
                                         for b in (self.u_lo[1], self.u_hi[1])], float)])
        self.wq: list[IntArray] = []
        self.bq: list[IntArray] = []
        self.m: list[tuple[IntArray, IntArray]] = []
        s_in = 1.0
        for wt, b in layers:
            q, s_w = _quant_rows(wt)
            self.wq.append(q)
            self.bq.append(np.round(b / (s_w * s_in)).astype(np.int64))
            x = np.maximum(x @ wt.T + b, 0.0)
            s_h = max(float(x.max()), 1e-12) / self.h_max
            self.m.append(fixed_multiplier(s_w * s_in / s_h))
            s_in = s_h
        # gates: two int32 sums, each re-quantised to Q12
        self.w_ih, s_ih = _quant_rows(w["lstm_w_ih"])
        self.w_hh, s_hh = _quant_rows(w["lstm_w_hh"])
        self.b_g = np.round(w["lstm_b"] / (s_ih * s_in)).astype(np.int64)
        self.m_ih = fixed_multiplier(s_ih * s_in * 2.0**Z_FRAC)
        self.m_hh = fixed_multiplier(s_hh * 2.0 ** (Z_FRAC - H_FRAC))
        self.sig, self.tanh = activation_tables()
        # output: |y| <= |w|_1 + |b| since |h| < 1
        self.w_o, s_o = _quant_rows(w["out_w"])
        self.b_o = np.round(w["out_b"] / (s_o * 2.0**-H_FRAC)).astype(np.int64)
        y_max = float(np.abs(w["out_w"]).sum() + np.abs(w["out_b"]).sum())
        cap = Y_CAP_BOUNDED if self.output == "bounded" else np.inf
        self.y_step = float(max(min(y_max, cap), 1e-6)) / CODE_MAX
        self.m_o = fixed_multiplier(s_o * 2.0**-H_FRAC / (self.y_step / 2**out_frac_bits))
        self.code_max = CODE_MAX << out_frac_bits
        self.lut = action_lut(self.y_step, self.output, extra=1 if out_frac_bits else 0)

    # -- state and the float boundary ------------------------------------------------
    def initial_state(self, n: int) -> PolicyState:
        return (np.zeros((n, self.hidden), np.int64), np.zeros((n, self.hidden), np.int64))

    def input_codes(self, obs: FloatArray) -> IntArray:
        return self.code.encode(obs)

    def act(self, obs: FloatArray, state: PolicyState) -> tuple[FloatArray, PolicyState]:
        h, c = (np.asarray(a).astype(np.int64) for a in state)
        code, h, c = self.step_int(self.input_codes(obs), h, c)
        q16 = lut_action(self.lut, code, self.out_frac_bits)
        # the state stays integer (h Q15, c Q12); the runtime only takes and scatters it
        return q16.astype(np.float64) / 2.0**Q_ACTION, (h, c)  # type: ignore[return-value]

    # -- the integer network ---------------------------------------------------------
    def step_int(self, u: IntArray, h: IntArray, c: IntArray
                 ) -> tuple[IntArray, IntArray, IntArray]:
        """One decision on integer codes: (output code, h Q15, c Q12)."""
        for arr in (u, h, c):
            if np.asarray(arr).dtype.kind not in "iu":
                raise ConfigError("step_int takes integer codes and states")
        x = u
        for wq, bq, (m0, sh) in zip(self.wq, self.bq, self.m, strict=True):
            x = np.clip(requantize(np.maximum(x @ wq.T + bq, 0), m0, sh), 0, self.h_max)
        z = (requantize(x @ self.w_ih.T + self.b_g, *self.m_ih)
             + requantize(h @ self.w_hh.T, *self.m_hh))
        n = self.hidden
        i_g, f_g = table_lookup(self.sig, z[:, :n]), table_lookup(self.sig, z[:, n:2 * n])
        g_g, o_g = table_lookup(self.tanh, z[:, 2 * n:3 * n]), table_lookup(self.sig, z[:, 3 * n:])
        half_h = np.int64(1) << (H_FRAC - 1)
        fc = (f_g * c + half_h) >> H_FRAC  # Q15·Q12 → Q12
        ig = (i_g * g_g + (np.int64(1) << (2 * H_FRAC - Z_FRAC - 1))) >> (2 * H_FRAC - Z_FRAC)
        c_new = np.clip(fc + ig, -(2**31), 2**31 - 1)
        lim = (1 << H_FRAC) - 1
        h_new = np.clip((o_g * table_lookup(self.tanh, c_new) + half_h) >> H_FRAC, -lim, lim)
        code = np.clip(requantize(h_new @ self.w_o.T + self.b_o, *self.m_o), -self.code_max,
                       self.code_max)
        return code[:, 0], h_new, c_new

    def weight_bytes(self) -> int:
        """int8 weights + int32 biases + the two int16 activation tables."""
        ws = [*self.wq, self.w_ih, self.w_hh, self.w_o]
        bs = [*self.bq, self.b_g, self.b_o]
        return sum(a.size for a in ws) + 4 * sum(b.size for b in bs) + 2 * 2 * ACT_ENTRIES
