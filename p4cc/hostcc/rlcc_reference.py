"""The shipped files of the hand-made PI baseline, made by code (docs/hostcc-cc.md): the
:class:`~p4cc.hostcc.rlcc_policies.ReferencePolicy` in each RL-CC policy file format, run
as ``rlcc:pi-lstm``, ``pi-mlp``, ``pi-trees``, ``pi-catboost`` (not learned policies).

``make_reference_files(dir)`` writes ``rlcc-lstm-ref.npz``, ``rlcc-mlp-ref.npz``
(hand-wired to :class:`~p4cc.hostcc.rlcc_policies.ReferencePolicy`), and the tree files
of :mod:`p4cc.hostcc.rlcc_trees`; a test checks that the files in
``p4cc/hostcc/data`` are what it writes.  Regenerate them whenever ``REF_*`` change.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from p4cc.hostcc.rlcc_policies import (
    REF_DELTA_SCALE,
    REF_KI,
    REF_KP,
    FloatArray,
    LstmPolicy,
    MlpPolicy,
    save_lstm,
    save_mlp,
)

#: Knots of the piecewise-linear squash the ReLU layers of the shipped MLP/LSTM compute.
#: 32 knots on [−4, 4]·δ_s, denser where tanh bends; values fitted (near minimax).
REF_N_KNOTS = 32
#: The LSTM's carried signal is ε·e (small, so that tanh(tanh(ε·e)) ≈ ε·e).
REF_LSTM_EPS = 1e-3


def reference_squash_knots(delta_scale: float = REF_DELTA_SCALE,
                           n: int = REF_N_KNOTS) -> tuple[FloatArray, FloatArray]:
    """Knots x and values v of a piecewise-linear c ≈ δ_s·tanh(δ/δ_s), constant outside.

    Evaluated as c(δ) = v[0] + Σ_k w_k·relu(δ − x_k) with w = the slope changes
    (:func:`_squash_slopes`).  Max |c − δ_s·tanh(δ/δ_s)| = 0.85·10⁻³·δ_s (any δ).
    """
    u = np.linspace(-4.0, 4.0, 4001)
    dens = np.sqrt(np.abs(2 * np.tanh(u)) / np.cosh(u) ** 2) + 0.05  # ∝ √|tanh''|
    cum = np.cumsum(dens)
    cum = (cum - cum[0]) / (cum[-1] - cum[0])
    k = np.interp(np.linspace(0.0, 1.0, n), cum, u)
    k = 0.5 * (k - k[::-1])  # exactly odd
    # values: near-minimax fit on a fine grid (hat-function basis; Lawson's reweighted
    # least squares, 10 rounds), then made exactly odd
    grid = np.linspace(-6.0, 6.0, 2401)
    basis = np.stack([np.interp(grid, k, np.eye(n)[j]) for j in range(n)], axis=1)
    wt = np.full(grid.shape, 1.0 / grid.size)
    for _ in range(10):
        sw = np.sqrt(wt)
        v = np.linalg.lstsq(basis * sw[:, None], np.tanh(grid) * sw, rcond=None)[0]
        wt = wt * np.abs(basis @ v - np.tanh(grid))
        wt /= wt.sum()
    v = 0.5 * (v - v[::-1])
    return delta_scale * k, delta_scale * v


def _squash_slopes(x: FloatArray, v: FloatArray) -> FloatArray:
    """Weights w_k of relu(δ − x_k) so that v[0] + Σ w_k·relu(δ − x_k) interpolates (x, v)."""
    slopes = np.concatenate([[0.0], np.diff(v) / np.diff(x), [0.0]])
    return np.asarray(np.diff(slopes), dtype=np.float64)


def reference_mlp(ki: float = REF_KI, kp: float = REF_KP,
                  delta_scale: float = REF_DELTA_SCALE) -> MlpPolicy:
    """Window 2, 4 → 64 (ReLU) → 1, output ``exp``: the :class:`ReferencePolicy` map
    log a_t = (k_i + k_p)·c(δ_t) − k_p·c(δ_{t−1}), with c a 32-knot piecewise-linear
    approximation of the squash δ_s·tanh(δ/δ_s) (:func:`reference_squash_knots`; error in
    log a ≤ (k_i + 2·k_p)·0.85·10⁻³·δ_s).  The window carries δ_{t−1} instead of a state.

    First decision: the window is padded with δ_{t−1} = 0 (WindowedPolicy), so the MLP
    gives log a_1 = (k_i + k_p)·c(δ_1) -- as if the flow had been at the operating point
    before -- where ReferencePolicy gives k_i·e(δ_1) (its k_p term starts at t = 2).
    """
    x, v = reference_squash_knots(delta_scale)
    w = _squash_slopes(x, v)
    n = len(x)
    w0, b0 = np.zeros((2 * n, 4)), np.concatenate([-x, -x])
    w0[:n, 2] = 1.0  # relu(δ_t − x_k)
    w0[n:, 0] = 1.0  # relu(δ_{t−1} − x_k)
    w1 = np.concatenate([(ki + kp) * w, -kp * w])[None, :]
    b1 = np.array([ki * v[0]])  # (k_i + k_p)·v_0 − k_p·v_0
    return MlpPolicy([(w0, b0), (w1, b1)], window=2, output="exp")


def reference_lstm(ki: float = REF_KI, kp: float = REF_KP,
                   delta_scale: float = REF_DELTA_SCALE) -> LstmPolicy:
    """2 → 32 → 16 (ReLU) → LSTM 16 → 1, output ``exp``, wired to :class:`ReferencePolicy`.

    fc1 computes relu(δ_t − x_k) at the 32 knots of :func:`reference_squash_knots`, fc2
    unit 0 the squash c(δ_t) + off (off keeps it ≥ 0 through the ReLU).  Four LSTM units
    (gate biases ±20, so sigmoid ≈ 0 or 1 within 2·10⁻⁹; ε = REF_LSTM_EPS):

    * A: g = tanh(ε·c(δ_t)), i = o = 1, f = 0, so h_A = tanh(tanh(ε·c)) ≈ ε·c(δ_t);
    * B: the same with g = tanh(h_A of the previous step): h_B ≈ ε·c(δ_{t−1}), 0 at t = 1;
    * C: g = 1, so h_C = tanh(1) from the first step on (0 before it): "has decided";
    * D: like A, but its output gate opens only when h_C of the previous step is tanh(1):
      h_D ≈ ε·c(δ_t) from the second decision on, 0 on the first.

    y = (k_i·h_A + k_p·h_D − k_p·h_B)/ε ≈ k_i·c(δ_t) + k_p·(c(δ_t) − c(δ_{t−1})), and
    ≈ k_i·c(δ_1) on the first decision, as ReferencePolicy.  Besides the squash error the
    cells' tanh add a relative ≤ (4/3)·(ε·c)² ≈ 10⁻⁶ (B passes through four of them).
    """
    x, v = reference_squash_knots(delta_scale)
    slope = _squash_slopes(x, v)
    eps, big = REF_LSTM_EPS, 20.0
    off = 2.0 * float(np.abs(v).max())
    w = {"fc1_w": np.zeros((32, 2)), "fc1_b": np.zeros(32), "fc2_w": np.zeros((16, 32)),
         "fc2_b": np.zeros(16), "lstm_w_ih": np.zeros((64, 16)),
         "lstm_w_hh": np.zeros((64, 16)), "lstm_b": np.zeros(64), "out_w": np.zeros((1, 16)),
         "out_b": np.zeros(1)}
    n = len(x)
    w["fc1_w"][:n, 0], w["fc1_b"][:n] = 1.0, -x
    w["fc2_w"][0, :n], w["fc2_b"][0] = slope, v[0] + off  # c(δ_t) + off
    ua, ub, uc, ud = 0, 1, 2, 3
    i_, f_, g_, o_ = 0, 16, 32, 48
    for u in (ua, ub, uc, ud):
        w["lstm_b"][i_ + u], w["lstm_b"][f_ + u], w["lstm_b"][o_ + u] = big, -big, big
    for u in (ua, ud):
        w["lstm_w_ih"][g_ + u, 0], w["lstm_b"][g_ + u] = eps, -eps * off
    w["lstm_w_hh"][g_ + ub, ua] = 1.0
    w["lstm_b"][g_ + uc] = big
    w["lstm_w_hh"][o_ + ud, uc], w["lstm_b"][o_ + ud] = 2 * big / math.tanh(1.0), -big
    w["out_w"][0, ua], w["out_w"][0, ud], w["out_w"][0, ub] = ki / eps, kp / eps, -kp / eps
    return LstmPolicy(w, output="exp")


def make_reference_files(directory: str | Path, ki: float = REF_KI, kp: float = REF_KP,
                         delta_scale: float = REF_DELTA_SCALE) -> dict[str, Path]:
    """Write the shipped reference policies (all approximate :class:`ReferencePolicy`)."""
    from p4cc.hostcc.rlcc_trees import reference_catboost_json, reference_tree_json

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    out = {"lstm": save_lstm(d / "rlcc-lstm-ref.npz", reference_lstm(ki, kp, delta_scale)),
           "mlp": save_mlp(d / "rlcc-mlp-ref.npz", reference_mlp(ki, kp, delta_scale))}
    out["trees"] = d / "rlcc-trees-ref.json"
    out["trees"].write_text(reference_tree_json(ki, kp, delta_scale))
    out["catboost"] = d / "rlcc-catboost-ref.json"
    out["catboost"].write_text(reference_catboost_json(ki, kp, delta_scale))
    return out
