"""RL-CC policies, vectorized over N flows, and their file formats.

Every policy maps observations ``obs`` of shape (n, 2) = (δ_t, a_{t−1}) plus a per-flow
state (a tuple of arrays with leading dimension n) to raw actions (n,) and a new state.
The core (:func:`p4cc.hostcc.rlcc.step`) clips the actions to the configured bounds.

* :class:`ReferencePolicy` — the PI baseline (``rlcc:pi``), hand-made, not learned:
  log a = k_i·δ_t + k_p·(δ_t − δ_{t−1}),
  a PI controller on the log rate; a steady δ > 0 raises the rate, δ = 0 (the operating
  point) keeps it, δ < 0 lowers it.
* :class:`LstmPolicy` — in → 32 → 16 (ReLU) → LSTM 16 → 1 (Tessler et al. §7; NVIDIA
  RL-CC §3), per-flow (h, c).  PyTorch gate order i, f, g, o.
* :class:`MlpPolicy` — window of the last k observations → hidden ReLU layers → 1
  (NVIDIA RL-CC §4.1, §5.1).
* Tree ensembles live in :mod:`p4cc.hostcc.rlcc_trees`.

The pieces both modules build on (the :class:`Policy` protocol, :class:`PolicyLoadError`,
:class:`WindowedPolicy`, the reference gains ``REF_*``) live in
:mod:`p4cc.hostcc.rlcc_policy_base` and are importable from here too.

Files: ``.npz`` (LSTM/MLP weights, key ``kind``), ``.json`` (p4cc trees or a CatBoost
JSON export).  :func:`load_policy` raises :class:`PolicyLoadError` naming the file and
the problem.
"""

from __future__ import annotations

import math
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from p4cc.errors import ConfigError
from p4cc.hostcc.rlcc_policy_base import (
    OBS_DIM,
    OUTPUTS,
    REF_DELTA_SCALE,
    REF_KI,
    REF_KP,
    FloatArray,
    Policy,
    PolicyLoadError,
    PolicyState,
    WindowedPolicy,
    apply_output,
)
from p4cc.paths import HOSTCC_DATA_DIR


def take_state(state: PolicyState, idx: npt.NDArray[np.intp]) -> PolicyState:
    return tuple(a[idx] for a in state)


def scatter_state(state: PolicyState, idx: npt.NDArray[np.intp],
                  sub: PolicyState) -> PolicyState:
    out = []
    for a, s in zip(state, sub, strict=True):
        b = a.copy()
        b[idx] = s
        out.append(b)
    return tuple(out)


def _relu(x: FloatArray) -> FloatArray:
    return np.maximum(x, 0.0)


def _sigmoid(x: FloatArray) -> FloatArray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # overflow-free logistic


class ReferencePolicy:
    """A hand-made recurrent policy: a PI controller on the log rate.

    With e = δ_s·tanh(δ/δ_s): log a_t = k_i·e_t + k_p·(e_t − e_{t−1}); the state is
    e_{t−1} (NaN before the first decision, when the k_p term is 0).  In continuous time
    d(log r)/dt ∝ k_i·e + k_p·de/dt: the k_i term moves every flow toward δ = 0 -- the
    fixed point, where (inflation − β)·√rate = target holds for all flows at once only if
    they share the link equally (NVIDIA RL-CC eq. 4) -- and the k_p term damps the
    queue's swing.  A steady δ > 0 (below the operating point) raises the rate, δ < 0
    lowers it; an LSTM can represent the same map (``rlcc_reference.reference_lstm``).
    """

    name = "pi"  # the PI baseline: hand-made, not learned (``rlcc:pi``)

    def __init__(self, ki: float = REF_KI, kp: float = REF_KP,
                 delta_scale: float = REF_DELTA_SCALE) -> None:
        # δ's sensitivity to the queue is √rate, whatever the target: the gains are absolute
        for nm, v in (("ki", ki), ("kp", kp), ("delta_scale", delta_scale)):
            if not (math.isfinite(v) and v >= 0):
                raise ConfigError(f"ReferencePolicy {nm}={v!r} must be a number >= 0")
        if ki == 0 or delta_scale == 0:
            raise ConfigError("ReferencePolicy ki and delta_scale must be > 0 (ki = 0 never "
                              "reaches δ = 0)")
        self.ki, self.kp, self.delta_scale = float(ki), float(kp), float(delta_scale)

    def squash(self, delta: FloatArray) -> FloatArray:
        return self.delta_scale * np.tanh(np.asarray(delta, dtype=np.float64) / self.delta_scale)

    def initial_state(self, n: int) -> PolicyState:
        return (np.full(n, np.nan),)

    def act(self, obs: FloatArray, state: PolicyState) -> tuple[FloatArray, PolicyState]:
        e = self.squash(obs[:, 0])
        prev = state[0]
        step = np.where(np.isnan(prev), 0.0, e - prev)
        y = self.ki * e + self.kp * step
        return np.exp(np.clip(y, -50.0, 50.0)), (e,)


class LstmPolicy:
    """fc1 → ReLU → fc2 → ReLU → LSTM → linear, weights as in PyTorch (out, in)."""

    name = "lstm"
    signal = "rtt"  # the input δ was trained on: rtt, or qdepth (INT; npz key ``signal``)
    KEYS = ("fc1_w", "fc1_b", "fc2_w", "fc2_b", "lstm_w_ih", "lstm_w_hh", "lstm_b",
            "out_w", "out_b")

    def __init__(self, weights: dict[str, FloatArray], output: str = "identity") -> None:
        w = {k: np.asarray(weights[k], dtype=np.float64) for k in self.KEYS}
        for k, a in w.items():
            if a.ndim != (1 if k.endswith("_b") else 2):
                raise ConfigError(f"array {k!r} has shape {a.shape}: wrong number of axes")
        h1, h2 = w["fc1_w"].shape[0], w["fc2_w"].shape[0]
        hid = w["lstm_w_hh"].shape[-1]
        expect = {"fc1_w": (h1, OBS_DIM), "fc1_b": (h1,), "fc2_w": (h2, h1), "fc2_b": (h2,),
                  "lstm_w_ih": (4 * hid, h2), "lstm_w_hh": (4 * hid, hid),
                  "lstm_b": (4 * hid,), "out_w": (1, hid), "out_b": (1,)}
        _check_shapes(w, expect)
        if output not in OUTPUTS:
            raise ConfigError(f"output={output!r}: choose one of {OUTPUTS}")
        self.w, self.hidden, self.output = w, hid, output

    def initial_state(self, n: int) -> PolicyState:
        return (np.zeros((n, self.hidden)), np.zeros((n, self.hidden)))

    def act(self, obs: FloatArray, state: PolicyState) -> tuple[FloatArray, PolicyState]:
        w, hid = self.w, self.hidden
        h_prev, c_prev = state
        x = _relu(obs @ w["fc1_w"].T + w["fc1_b"])
        x = _relu(x @ w["fc2_w"].T + w["fc2_b"])
        z = x @ w["lstm_w_ih"].T + h_prev @ w["lstm_w_hh"].T + w["lstm_b"]
        i, f = _sigmoid(z[:, :hid]), _sigmoid(z[:, hid:2 * hid])
        g, o = np.tanh(z[:, 2 * hid:3 * hid]), _sigmoid(z[:, 3 * hid:])
        c = f * c_prev + i * g
        h = o * np.tanh(c)
        y = (h @ w["out_w"].T + w["out_b"])[:, 0]
        return apply_output(y, self.output), (h, c)


class MlpPolicy(WindowedPolicy):
    """Window of k observations → ReLU hidden layers → 1."""

    name = "mlp"
    signal = "rtt"  # the input δ was trained on: rtt, or qdepth (INT; npz key ``signal``)

    def __init__(self, layers: list[tuple[FloatArray, FloatArray]], window: int,
                 output: str = "identity") -> None:
        if window < 1 or not layers:
            raise ConfigError("MlpPolicy needs window >= 1 and at least one layer")
        dim = OBS_DIM * window
        self.layers = []
        for k, (wt, b) in enumerate(layers):
            wt, b = np.asarray(wt, dtype=np.float64), np.asarray(b, dtype=np.float64)
            _check_shapes({f"w{k}": wt, f"b{k}": b},
                          {f"w{k}": (wt.shape[0] if wt.ndim == 2 else -1, dim),
                           f"b{k}": (wt.shape[0] if wt.ndim == 2 else -1,)})
            self.layers.append((wt, b))
            dim = wt.shape[0]
        if dim != 1:
            raise ConfigError(f"MlpPolicy: the last layer has {dim} outputs, expected 1")
        if output not in OUTPUTS:
            raise ConfigError(f"output={output!r}: choose one of {OUTPUTS}")
        self.window, self.output = window, output

    def act(self, obs: FloatArray, state: PolicyState) -> tuple[FloatArray, PolicyState]:
        x, new_state = self.features(obs, state)
        for k, (wt, b) in enumerate(self.layers):
            x = x @ wt.T + b
            if k < len(self.layers) - 1:
                x = _relu(x)
        return apply_output(x[:, 0], self.output), new_state


def _check_shapes(arrays: dict[str, FloatArray], expect: dict[str, tuple[int, ...]]) -> None:
    for k, shape in expect.items():
        got = arrays[k].shape
        if got != shape:
            raise ConfigError(f"array {k!r} has shape {got}, expected {shape}")
        if not np.all(np.isfinite(arrays[k])):
            raise ConfigError(f"array {k!r} contains NaN or inf")


# -- files -------------------------------------------------------------------------------
def save_lstm(path: str | Path, policy: LstmPolicy) -> Path:
    p = Path(path)
    arrays: dict[str, Any] = dict(policy.w)
    np.savez_compressed(p, kind=np.array("lstm"), output=np.array(policy.output),
                        **_signal_entry(policy), **arrays)
    return p


def save_mlp(path: str | Path, policy: MlpPolicy) -> Path:
    p = Path(path)
    arrays: dict[str, Any] = {f"w{k}": w for k, (w, _) in enumerate(policy.layers)}
    arrays.update({f"b{k}": b for k, (_, b) in enumerate(policy.layers)})
    np.savez_compressed(p, kind=np.array("mlp"), output=np.array(policy.output),
                        window=np.array(policy.window), **_signal_entry(policy), **arrays)
    return p


#: The inputs a policy file may name (``signal``; absent: rtt).  A policy trained on the
#: INT queue depth (``p4cc train rlcc --set signal=qdepth``) must be fed it: the RL-CC
#: rule takes the signal from the policy (p4cc.hostcc.rlcc_rule.RlccRule).
SIGNALS = ("rtt", "qdepth")


def _signal_entry(policy: LstmPolicy | MlpPolicy) -> dict[str, Any]:
    """The npz entry naming a non-default input signal (none for rtt: files unchanged)."""
    sig = getattr(policy, "signal", "rtt")
    return {} if sig == "rtt" else {"signal": np.array(sig)}


def _with_signal(policy: LstmPolicy | MlpPolicy, data: dict[str, Any]) -> Policy:
    sig = str(data.get("signal", "rtt"))
    if sig not in SIGNALS:
        raise ConfigError(f"signal {sig!r}: expected one of {SIGNALS}")
    policy.signal = sig
    return policy


def _load_npz(path: Path) -> Policy:
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise PolicyLoadError(f"policy file {path}: not a readable .npz archive ({exc})") from None
    if "kind" not in data:
        raise PolicyLoadError(f"policy file {path}: no 'kind' entry (expected 'lstm' or 'mlp')")
    kind, output = str(data["kind"]), str(data.get("output", "identity"))
    try:
        if kind == "lstm":
            missing = [k for k in LstmPolicy.KEYS if k not in data]
            if missing:
                raise ConfigError(f"missing arrays {missing}")
            return _with_signal(LstmPolicy({k: data[k] for k in LstmPolicy.KEYS}, output),
                                data)
        if kind == "mlp":
            n_layers = sum(1 for k in data if k.startswith("w") and k[1:].isdigit())
            missing = [f"{c}{k}" for k in range(n_layers) for c in "wb" if f"{c}{k}" not in data]
            if n_layers == 0 or missing or "window" not in data:
                raise ConfigError(f"needs window, w0.., b0..; missing {missing or 'layers'}")
            layers = [(data[f"w{k}"], data[f"b{k}"]) for k in range(n_layers)]
            return _with_signal(MlpPolicy(layers, int(data["window"]), output), data)
    except (ConfigError, TypeError, ValueError) as exc:  # e.g. a non-scalar 'window'
        raise PolicyLoadError(f"policy file {path} ({kind}): {exc}") from None
    raise PolicyLoadError(f"policy file {path}: unknown kind {kind!r} (expected lstm or mlp)")


def load_policy(path: str | Path) -> Policy:
    """Load a policy by suffix: ``.npz`` (LSTM/MLP) or ``.json`` (trees, p4cc or CatBoost)."""
    p = Path(path)
    if not p.is_file():
        raise PolicyLoadError(f"policy file {p} does not exist")
    if p.suffix == ".npz":
        return _load_npz(p)
    if p.suffix == ".json":
        from p4cc.hostcc.rlcc_trees import load_tree_policy

        return load_tree_policy(p)
    raise PolicyLoadError(f"policy file {p}: unsupported suffix {p.suffix!r}; use .npz "
                          "(LSTM/MLP weights) or .json (tree ensemble)")


def data_dir() -> Path:
    """Where the shipped reference policy files live."""
    return HOSTCC_DATA_DIR
