"""Int8-quantised inference for the deployed RL-CC policies (``rlcc:<name>-int8``).

Our reading of the papers:

* Tessler et al. §8.3 and App. D quantise the trained agent "following Wu et al. (2020)":
  all weights and arithmetic in int8, "a short transition to int32 (to avoid overflow),
  followed by a de-quantization and re-quantization step" between layers.
* NVIDIA RL-CC §5.1: the NIC has no floating point, so they "employed integer
  quantization [Wu et al.] and approximated the non-linear activations using lookup
  tables"; the deployed student is a tree ensemble (CatBoost, ≤ 10 trees, depth ≤ 4),
  which CatBoost itself evaluates on *quantised* features (each float feature becomes
  the index of its bin among the model's borders, ≤ 255 borders: 8 bits).

What we build (numpy, integer dtypes from the input codes to the action code):

* :class:`Int8Mlp` -- the windowed MLP.  Inputs: per-feature affine 8-bit codes
  u ∈ [0, 255] over a fixed range (δ ∈ [``delta_lo``, target], a_{t−1} ∈ [1/1.2, 1.2];
  δ below ``delta_lo`` is clipped: the trained MLP is saturated there).  Weights: int8,
  symmetric, one scale per output unit (Wu et al. §4: per-channel weights, max
  calibration); the input scales and offsets are folded into the first layer's weights
  and bias.  Biases: int32 in the accumulator's unit.  Accumulators: int32 (bounded: fan-in
  × 127 × 255 ≪ 2³¹).  After ReLU, activations are re-quantised to unsigned 8 bits with a
  per-tensor scale (max calibration over the quantised input box) by an integer
  multiplier and shift (m = m0·2^−shift, m0 < 2³¹; Jacob et al. 2018 §2.2 -- no float in
  the loop).  The output is re-quantised to a signed 8-bit code over [−Y, Y] and mapped to
  the action by a 255-entry lookup table (NVIDIA §5.1), in Q16 fixed point.
* :class:`Int8Trees` -- the tree ensemble.  Inputs: each feature becomes its uint8 bin
  index among the sorted thresholds the trees use on it (CatBoost's binarisation;
  lossless for the splits, it needs ≤ 255 distinct thresholds per feature); the node
  tests compare bin indices; leaves are int32 in units of 2^−``LEAF_BITS`` of the output
  code's step; their sum is shifted to the 8-bit code and mapped by the same table.

The float observation becomes a code at the input and the Q16 action a float at the
output (the NIC does both in fixed point); everything between is integer
(:meth:`Int8Mlp.forward_codes`, :meth:`Int8Trees.forward_codes`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from p4cc.errors import ConfigError
from p4cc.hostcc.rlcc_policy_base import (
    BOUNDED_M,
    OBS_DIM,
    FloatArray,
    Policy,
    PolicyState,
    WindowedPolicy,
    apply_output,
)
from p4cc.hostcc.rlcc_trees import leaf_index

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


def action_lut(y_step: float, output: str) -> IntArray:
    """Q16 action for each output code c ∈ [−127, 127] (index c + 127): y = c·y_step."""
    y = np.arange(-CODE_MAX, CODE_MAX + 1, dtype=np.float64) * y_step
    return np.round(apply_output(y, output) * 2.0**Q_ACTION).astype(np.int64)


def _y_cap(output: str, y_abs_max: float) -> float:
    cap = Y_CAP_BOUNDED if output == "bounded" else np.inf
    return float(max(min(y_abs_max, cap), 1e-6))


class _Int8Base(WindowedPolicy):
    """The windowed state, the output table and the float boundary."""

    output = "identity"
    y_step = 1.0
    lut: IntArray

    def forward_codes(self, x: FloatArray) -> IntArray:
        raise NotImplementedError

    def act(self, obs: FloatArray, state: PolicyState) -> tuple[FloatArray, PolicyState]:
        x, new_state = self.features(obs, state)
        code = self.forward_codes(x)
        return self.lut[code + CODE_MAX].astype(np.float64) / 2.0**Q_ACTION, new_state


class Int8Mlp(_Int8Base):
    """A windowed MLP in int8 weights / 8-bit activations / int32 accumulators."""

    def __init__(self, layers: list[tuple[FloatArray, FloatArray]], window: int, output: str,
                 lo: FloatArray, hi: FloatArray, calib_seed: int = 0,
                 calib_points: int = 20000) -> None:
        self.window, self.output = window, output
        self.name = "mlp-int8"
        lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
        dim = OBS_DIM * window
        if lo.shape != (dim,) or hi.shape != (dim,) or np.any(hi <= lo):
            raise ConfigError(f"input ranges need {dim} features with hi > lo")
        self.lo, self.in_scale = lo, (hi - lo) / 255.0
        w0, b0 = layers[0]
        folded = [(w0 * self.in_scale[None, :], b0 + w0 @ lo), *layers[1:]]
        # calibration: the float network on the quantised input box (random codes + corners)
        rng = np.random.default_rng(calib_seed)
        codes = rng.integers(0, 256, (calib_points, dim)).astype(np.float64)
        corners = ((np.arange(2**dim)[:, None] >> np.arange(dim)) & 1) * 255.0
        x = np.concatenate([codes, corners])
        self.wq: list[IntArray] = []
        self.bq: list[IntArray] = []
        self.m0: list[IntArray] = []
        self.shift: list[IntArray] = []
        s_in = np.ones(1)
        for k, (w, b) in enumerate(folded):
            s_w = np.maximum(np.abs(w).max(axis=1), 1e-12) / 127.0  # per output unit
            self.wq.append(np.clip(np.round(w / s_w[:, None]), -127, 127).astype(np.int64))
            self.bq.append(np.round(b / (s_w * s_in)).astype(np.int64))
            x = x @ w.T + b
            if k < len(folded) - 1:
                x = np.maximum(x, 0.0)
                s_h = max(float(x.max()), 1e-12) / 255.0
                m0, sh = fixed_multiplier(s_w * s_in / s_h)
                s_in = np.full(1, s_h)
            else:
                self.y_step = _y_cap(output, float(np.abs(x).max())) / CODE_MAX
                m0, sh = fixed_multiplier(s_w * s_in / self.y_step)
            self.m0.append(m0)
            self.shift.append(sh)
        self.lut = action_lut(self.y_step, output)

    def input_codes(self, x: FloatArray) -> IntArray:
        """The float features as uint8 codes (the quantiser at the input)."""
        u = np.round((np.asarray(x, np.float64) - self.lo) / self.in_scale)
        return np.clip(u, 0, 255).astype(np.int64)

    def forward_codes(self, x: FloatArray) -> IntArray:
        """Output codes in [−127, 127]; integer arithmetic only after :meth:`input_codes`."""
        return self.forward_int(self.input_codes(x))

    def forward_int(self, u: IntArray) -> IntArray:
        if u.dtype.kind not in "iu":
            raise ConfigError("forward_int takes integer codes")
        q = u
        last = len(self.wq) - 1
        for k, (wq, bq) in enumerate(zip(self.wq, self.bq, strict=True)):
            acc = q @ wq.T + bq  # int64 holding int32-range sums
            if k < last:
                q = np.clip(requantize(np.maximum(acc, 0), self.m0[k], self.shift[k]), 0, 255)
            else:
                q = np.clip(requantize(acc, self.m0[k], self.shift[k]), -CODE_MAX, CODE_MAX)
        return q[:, 0]

    def weight_bytes(self) -> int:
        """int8 weights + int32 biases (the paper's memory figure)."""
        return sum(w.size + 4 * b.size for w, b in zip(self.wq, self.bq, strict=True))


class Int8Trees(_Int8Base):
    """A tree ensemble on uint8 bin indices with int32 fixed-point leaves."""

    def __init__(self, trees: Any) -> None:
        from p4cc.hostcc.rlcc_trees import TreePolicy

        if not isinstance(trees, TreePolicy):
            raise ConfigError("Int8Trees needs a TreePolicy")
        self.name = "trees-int8"
        self.window, self.output = trees.window, trees.output
        self.depth, self.left, self.right = trees.depth, trees.left, trees.right
        self.feat = trees.feat
        internal = trees.left >= 0
        dim = OBS_DIM * trees.window
        self.borders: list[FloatArray] = []
        tq = np.zeros(trees.thr.shape, np.int64)
        for f in range(dim):
            on_f = internal & (trees.feat == f)
            b = np.unique(trees.thr[on_f])
            if b.size > 255:
                raise ConfigError(f"feature {f}: {b.size} distinct thresholds; 8-bit bins "
                                  "hold at most 255")
            self.borders.append(b)
            # x > thr  <=>  bin(x) > index of thr, with bin(x) = #borders < x
            tq[on_f] = np.searchsorted(b, trees.thr[on_f])
        self.tq = tq
        # leaves: sum of the ensemble is base + scale·Σ value; its code step covers |y| max
        leaf = trees.scale * trees.value
        y_max = abs(trees.base) + np.abs(np.where(internal, 0.0, leaf)).max(axis=1).sum()
        self.y_step = _y_cap(self.output, float(y_max)) / CODE_MAX
        unit = self.y_step / 2**LEAF_BITS
        self.leaf_q = np.where(internal, 0, np.round(leaf / unit)).astype(np.int64)
        self.base_q = round(trees.base / unit)
        self.lut = action_lut(self.y_step, self.output)

    def input_codes(self, x: FloatArray) -> IntArray:
        """Each feature's bin index among its borders (0..255): the only float step."""
        x = np.asarray(x, np.float64)
        return np.stack([np.searchsorted(b, x[:, f], side="left")
                         for f, b in enumerate(self.borders)], axis=1).astype(np.int64)

    def forward_codes(self, x: FloatArray) -> IntArray:
        return self.forward_int(self.input_codes(x))

    def forward_int(self, u: IntArray) -> IntArray:
        if u.dtype.kind not in "iu":
            raise ConfigError("forward_int takes integer codes")
        idx = leaf_index(u, self.feat, self.tq, self.left, self.right, self.depth)
        cols = np.arange(self.feat.shape[0])[None, :]
        acc = self.base_q + self.leaf_q[cols, idx].sum(axis=1)
        half = np.int64(1) << (LEAF_BITS - 1)
        return np.clip((acc + half) >> LEAF_BITS, -CODE_MAX, CODE_MAX)


def quantize(policy: Policy, delta_lo: float = DELTA_LO, target: float = 0.064) -> Policy:
    """The int8 version of a windowed MLP or tree policy (LSTM: not supported)."""
    from p4cc.hostcc.rlcc_policies import MlpPolicy
    from p4cc.hostcc.rlcc_trees import TreePolicy

    if isinstance(policy, MlpPolicy):
        dim = OBS_DIM * policy.window
        lo = np.tile([delta_lo, ACT_LO], dim // OBS_DIM)
        hi = np.tile([target, ACT_HI], dim // OBS_DIM)
        return Int8Mlp(policy.layers, policy.window, policy.output, lo, hi)
    if isinstance(policy, TreePolicy):
        return Int8Trees(policy)
    raise ConfigError(f"int8 inference exists for the windowed MLP and tree policies, not "
                      f"{getattr(policy, 'name', type(policy).__name__)!r}")
