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

* :class:`Int8Mlp` -- the windowed MLP.  Inputs: per-feature affine integer codes over a
  fixed range (δ ∈ [``delta_lo``, target] in :data:`DELTA_BITS` = 16 bits, a_{t−1} ∈
  [1/1.2, 1.2] in 8 bits, code 0 at δ = 0 and a_{t−1} = 1; δ below ``delta_lo`` is
  clipped: the trained MLP is saturated there).  Why these widths and zeros: see
  :data:`DELTA_BITS` (session 4 used 8-bit codes from δ = −12 and 8-bit activations; the
  ``in_bits``/``hidden_bits``/``out_frac_bits``/``center`` defaults build that scheme).
  Weights: int8, symmetric, one scale per output unit (Wu et al. §4: per-channel weights,
  max calibration); the input scales and offsets are folded into the first layer's
  weights and bias.  Biases: int32 in the accumulator's unit.  Accumulators: int32
  (bounded: fan-in × 127 × 65535 < 2³¹).  After ReLU, activations are re-quantised to
  unsigned :data:`HIDDEN_BITS`-bit codes with a per-tensor scale (max calibration over
  the quantised input box) by an integer multiplier and shift (m = m0·2^−shift,
  m0 < 2³¹; Jacob et al. 2018 §2.2 -- no float in the loop).  The output is re-quantised
  to a signed code over [−Y, Y] (8 bits plus :data:`OUT_FRAC_BITS`) and mapped to the
  action by a 256-entry lookup table (NVIDIA §5.1) in Q16 fixed point, read at the code's
  upper 8 bits and linearly interpolated on the rest (integer multiply and shift).
* :class:`Int8Trees` -- the tree ensemble.  Inputs: each feature becomes its uint8 bin
  index among the sorted thresholds the trees use on it (CatBoost's binarisation;
  lossless for the splits, it needs ≤ 255 distinct thresholds per feature); the node
  tests compare bin indices; leaves are int32 in units of 2^−``LEAF_BITS`` of the output
  code's step; their sum (8 bits below the code's step) is mapped by the same
  interpolated table (session 4 rounded it to the 8-bit code first).  Linear leaves
  (session 17) add integer terms on the features' affine value codes
  (:mod:`p4cc.hostcc.rlcc_int8_linear`).

The float observation becomes a code at the input and the Q16 action a float at the
output (the NIC does both in fixed point); everything between is integer
(:meth:`Int8Mlp.forward_codes`, :meth:`Int8Trees.forward_codes`).  The LSTM's integer
copy is in :mod:`p4cc.hostcc.rlcc_int8_lstm`.  A policy's input ``signal`` (RTT or the
INT queue depth) carries over to its int8 copy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from p4cc.errors import ConfigError
from p4cc.hostcc.rlcc_int8_core import (  # noqa: F401  (names re-exported)
    ACT_HI,
    ACT_LO,
    CENTER,
    CODE_MAX,
    DELTA_BITS,
    DELTA_LO,
    HIDDEN_BITS,
    LEAF_BITS,
    OUT_FRAC_BITS,
    Q_ACTION,
    Y_CAP_BOUNDED,
    AffineCode,
    IntArray,
    _y_cap,
    action_lut,
    fixed_multiplier,
    lut_action,
    observation_ranges,
    requantize,
)
from p4cc.hostcc.rlcc_int8_linear import LinearCodes
from p4cc.hostcc.rlcc_policy_base import (
    OBS_DIM,
    FloatArray,
    Policy,
    PolicyState,
    WindowedPolicy,
)
from p4cc.hostcc.rlcc_trees import leaf_index


class _Int8Base(WindowedPolicy):
    """The windowed state, the output table and the float boundary."""

    output = "identity"
    y_step = 1.0
    out_frac_bits = 0
    lut: IntArray
    signal = "rtt"

    def forward_codes(self, x: FloatArray) -> IntArray:
        raise NotImplementedError

    def act(self, obs: FloatArray, state: PolicyState) -> tuple[FloatArray, PolicyState]:
        x, new_state = self.features(obs, state)
        q16 = lut_action(self.lut, self.forward_codes(x), self.out_frac_bits)
        return q16.astype(np.float64) / 2.0**Q_ACTION, new_state


class Int8Mlp(_Int8Base):
    """A windowed MLP in int8 weights / unsigned activation codes / int32 accumulators.

    ``in_bits``: bits of each input feature's code (default 8); ``hidden_bits``: of the
    hidden activations (8); ``out_frac_bits``: extra bits of the output code below the
    table's step (0: the 8-bit code of session 4)."""

    def __init__(self, layers: list[tuple[FloatArray, FloatArray]], window: int, output: str,
                 lo: FloatArray, hi: FloatArray, calib_seed: int = 0,
                 calib_points: int = 20000, in_bits: npt.ArrayLike = 8,
                 hidden_bits: int = 8, out_frac_bits: int = 0,
                 center: npt.ArrayLike | None = None) -> None:
        self.window, self.output = window, output
        self.name = "mlp-int8"
        lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
        dim = OBS_DIM * window
        bits = np.broadcast_to(np.asarray(in_bits, np.int64), (dim,))
        if lo.shape != (dim,) or hi.shape != (dim,) or np.any(hi <= lo):
            raise ConfigError(f"input ranges need {dim} features with hi > lo")
        if np.any(bits < 2) or np.any(bits > 16) or not 2 <= hidden_bits <= 16 \
                or not 0 <= out_frac_bits <= 12:
            raise ConfigError("input/hidden codes take 2..16 bits, the output 0..12 extra")
        self.in_max = (np.int64(1) << bits) - 1
        self.h_max = (1 << hidden_bits) - 1
        self.out_frac_bits = out_frac_bits
        # code 0 at ``center`` (default lo): u = round((x − center)/step) in
        # [u_lo, u_lo + in_max]; the folded weights' rounding error grows with |u|
        self.code = AffineCode.over(lo, hi, bits, lo if center is None else center)
        self.center, self.in_scale = self.code.center, self.code.step
        self.u_lo, self.u_hi = self.code.u_lo, self.code.u_hi
        w0, b0 = layers[0]
        folded = [(w0 * self.in_scale[None, :], b0 + w0 @ self.center), *layers[1:]]
        # calibration: the float network on the quantised input box (random codes + corners)
        rng = np.random.default_rng(calib_seed)
        codes = np.floor(rng.random((calib_points, dim)) * (self.in_max + 1))
        corners = ((np.arange(2**dim)[:, None] >> np.arange(dim)) & 1) * self.in_max
        x = np.concatenate([codes, corners.astype(np.float64)]) + self.u_lo
        self.wq: list[IntArray] = []
        self.bq: list[IntArray] = []
        self.m0: list[IntArray] = []
        self.shift: list[IntArray] = []
        s_in = np.ones(1)
        out_unit = 1.0
        for k, (w, b) in enumerate(folded):
            s_w = np.maximum(np.abs(w).max(axis=1), 1e-12) / 127.0  # per output unit
            self.wq.append(np.clip(np.round(w / s_w[:, None]), -127, 127).astype(np.int64))
            self.bq.append(np.round(b / (s_w * s_in)).astype(np.int64))
            x = x @ w.T + b
            if k < len(folded) - 1:
                x = np.maximum(x, 0.0)
                s_h = max(float(x.max()), 1e-12) / self.h_max
                m0, sh = fixed_multiplier(s_w * s_in / s_h)
                s_in = np.full(1, s_h)
            else:
                self.y_step = _y_cap(output, float(np.abs(x).max())) / CODE_MAX
                out_unit = self.y_step / 2**out_frac_bits
                m0, sh = fixed_multiplier(s_w * s_in / out_unit)
            self.m0.append(m0)
            self.shift.append(sh)
        self.code_max = CODE_MAX << out_frac_bits
        self.lut = action_lut(self.y_step, output, extra=1 if out_frac_bits else 0)

    def input_codes(self, x: FloatArray) -> IntArray:
        """The float features as unsigned codes (the quantiser at the input)."""
        return self.code.encode(x)

    def forward_codes(self, x: FloatArray) -> IntArray:
        """Output codes in [−127, 127]·2^out_frac_bits; integer arithmetic only after
        :meth:`input_codes`."""
        return self.forward_int(self.input_codes(x))

    def forward_int(self, u: IntArray) -> IntArray:
        if u.dtype.kind not in "iu":
            raise ConfigError("forward_int takes integer codes")
        q = u
        last = len(self.wq) - 1
        for k, (wq, bq) in enumerate(zip(self.wq, self.bq, strict=True)):
            acc = q @ wq.T + bq  # int64 holding int32-range sums
            if k < last:
                q = np.clip(requantize(np.maximum(acc, 0), self.m0[k], self.shift[k]), 0,
                            self.h_max)
            else:
                q = np.clip(requantize(acc, self.m0[k], self.shift[k]), -self.code_max,
                            self.code_max)
        return q[:, 0]

    def weight_bytes(self) -> int:
        """int8 weights + int32 biases (the paper's memory figure)."""
        return sum(w.size + 4 * b.size for w, b in zip(self.wq, self.bq, strict=True))


class Int8Trees(_Int8Base):
    """A tree ensemble on uint8 bin indices with int32 fixed-point leaves."""

    def __init__(self, trees: Any, delta_lo: float = DELTA_LO, target: float = 0.064,
                 delta_bits: int = DELTA_BITS) -> None:
        from p4cc.hostcc.rlcc_trees import TreePolicy

        if not isinstance(trees, TreePolicy):
            raise ConfigError("Int8Trees needs a TreePolicy")
        self.name = "trees-int8"
        self.window, self.output = trees.window, trees.output
        self.depth, self.left, self.right = trees.depth, trees.left, trees.right
        self.feat, self.clipped = trees.feat, trees.clipped  # the file's input bounds
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
        # linear leaves (rlcc_int8_linear): value codes beside the bin codes
        self.linear: LinearCodes | None = None
        leaves, codes = trees.leaves, (delta_lo, target, delta_bits)
        if leaves is not None:
            y_max += LinearCodes.build(leaves, trees.scale, trees.window, 1.0, *codes).bound()
        self.y_step = _y_cap(self.output, float(y_max)) / CODE_MAX
        unit = self.y_step / 2**LEAF_BITS
        if leaves is not None:
            self.linear = LinearCodes.build(leaves, trees.scale, trees.window, unit, *codes)
        self.leaf_q = np.where(internal, 0, np.round(leaf / unit)).astype(np.int64)
        self.base_q = round(trees.base / unit)
        # session 6: the action is read from the leaf sum itself (LEAF_BITS below the
        # table's step, interpolated) instead of its rounding to the 8-bit code, which
        # held the queue 3-6 % above the float trees' (docs/results.md, int8)
        self.out_frac_bits = LEAF_BITS
        self.lut = action_lut(self.y_step, self.output, extra=1)

    def input_codes(self, x: FloatArray) -> IntArray:
        """Each feature's bin index among its borders (0..255): the only float step."""
        x = self.clipped(np.asarray(x, np.float64))
        return np.stack([np.searchsorted(b, x[:, f], side="left")
                         for f, b in enumerate(self.borders)], axis=1).astype(np.int64)

    def value_codes(self, x: FloatArray) -> IntArray | None:
        """Linear leaves' value codes of the features (None: constant leaves)."""
        return None if self.linear is None else self.linear.value_codes(self.clipped(x))

    def forward_codes(self, x: FloatArray) -> IntArray:
        return self.forward_int(self.input_codes(x), self.value_codes(x))

    def leaf_sum(self, u: IntArray, v: IntArray | None = None) -> IntArray:
        """The ensemble's int32 sum in units of 2^−LEAF_BITS output-code steps, clipped
        (``u``: bin codes; ``v``: value codes, needed by linear leaves)."""
        if u.dtype.kind not in "iu" or (v is not None and v.dtype.kind not in "iu"):
            raise ConfigError("forward_int takes integer codes")
        idx = leaf_index(u, self.feat, self.tq, self.left, self.right, self.depth)
        cols = np.arange(self.feat.shape[0])[None, :]
        lim = CODE_MAX << LEAF_BITS
        total = self.base_q + self.leaf_q[cols, idx].sum(axis=1)
        if self.linear is not None:
            if v is None:
                raise ConfigError("linear leaves need the value codes (value_codes(x))")
            total = total + self.linear.leaf_terms(v, idx)
        return np.clip(total, -lim, lim)

    def forward_int(self, u: IntArray, v: IntArray | None = None) -> IntArray:
        """The 8-bit output code (the leaf sum rounded)."""
        half = np.int64(1) << (LEAF_BITS - 1)
        return np.clip((self.leaf_sum(u, v) + half) >> LEAF_BITS, -CODE_MAX, CODE_MAX)

    def act(self, obs: FloatArray, state: PolicyState) -> tuple[FloatArray, PolicyState]:
        x, new_state = self.features(obs, state)
        q16 = lut_action(self.lut, self.leaf_sum(self.input_codes(x), self.value_codes(x)),
                         self.out_frac_bits)
        return q16.astype(np.float64) / 2.0**Q_ACTION, new_state


def quantize(policy: Policy, delta_lo: float = DELTA_LO, target: float = 0.064,
             delta_bits: int = DELTA_BITS, out_frac_bits: int = OUT_FRAC_BITS,
             hidden_bits: int = HIDDEN_BITS) -> Policy:
    """The int8 version of a windowed MLP, tree or LSTM policy (δ's code: ``delta_bits``
    over [``delta_lo``, ``target``], zero at :data:`CENTER`; the MLP's and LSTM's hidden
    codes ``hidden_bits``, output code ``out_frac_bits`` below the table's step).  The
    policy's input ``signal`` carries over."""
    from p4cc.hostcc.rlcc_policies import LstmPolicy, MlpPolicy
    from p4cc.hostcc.rlcc_trees import TreePolicy

    q: Policy
    if isinstance(policy, MlpPolicy):
        lo, hi, bits, center = observation_ranges(policy.window, delta_lo, target,
                                                  delta_bits)
        q = Int8Mlp(policy.layers, policy.window, policy.output, lo, hi, in_bits=bits,
                    hidden_bits=hidden_bits, out_frac_bits=out_frac_bits, center=center)
    elif isinstance(policy, TreePolicy):
        q = Int8Trees(policy, delta_lo=delta_lo, target=target, delta_bits=delta_bits)
    elif isinstance(policy, LstmPolicy):
        from p4cc.hostcc.rlcc_int8_lstm import Int8Lstm

        q = Int8Lstm(policy, delta_lo=delta_lo, target=target, delta_bits=delta_bits,
                     hidden_bits=hidden_bits, out_frac_bits=out_frac_bits)
    else:
        raise ConfigError(f"int8 inference exists for the windowed MLP, tree and LSTM "
                          f"policies, not {getattr(policy, 'name', type(policy).__name__)!r}")
    q.signal = getattr(policy, "signal", "rtt")
    return q
