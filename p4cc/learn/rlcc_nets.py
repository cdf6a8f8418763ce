"""Torch RL-CC policies and their export to the runtime's numpy formats.

* :class:`TorchLstm`: in → 32 → 16 (ReLU) → LSTM 16 → 1 (Tessler et al. §7; NVIDIA
  RL-CC §3), exported as :class:`p4cc.hostcc.rlcc_policies.LstmPolicy` (``.npz``).
* :class:`TorchMlp`: a window of the last k observations → hidden ReLU layers → 1
  (NVIDIA RL-CC §4.1/§5.1: "input → 12 → 1" over a window of two states), exported as
  :class:`p4cc.hostcc.rlcc_policies.MlpPolicy`.

Both output y; the action is the runtime's ``bounded`` transform of y
(:data:`p4cc.hostcc.rlcc_policy_base.BOUNDED_M`), so the numpy forward pass computes the
same decision.  The input (δ, a_{t−1}) is standardised inside the first layer
(:data:`OBS_SHIFT`, :data:`OBS_SCALE`); the export folds that into the first layer's
weights, so the runtime feeds raw observations as it always has.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import torch
from torch import nn

from p4cc.errors import ConfigError
from p4cc.hostcc.rlcc import DEFAULT_TARGET
from p4cc.hostcc.rlcc_policies import LstmPolicy, MlpPolicy
from p4cc.hostcc.rlcc_policy_base import BOUNDED_M, OBS_DIM

#: Observation standardisation: δ in units of the default target (0 at the operating
#: point, 1 at an empty queue), the previous action as its offset from 1 in units of m.
OBS_SHIFT = (0.0, 1.0)
OBS_SCALE = (DEFAULT_TARGET, BOUNDED_M)


def bounded_action(y: torch.Tensor) -> torch.Tensor:
    """The runtime's ``bounded`` output in torch (rlcc_policy_base.apply_output)."""
    u = torch.tanh(y)
    return torch.where(u >= 0, 1.0 + BOUNDED_M * u, 1.0 / (1.0 - BOUNDED_M * u))


def _standardise(x: torch.Tensor) -> torch.Tensor:
    shift = torch.tensor(OBS_SHIFT, dtype=x.dtype).repeat(x.shape[-1] // OBS_DIM)
    scale = torch.tensor(OBS_SCALE, dtype=x.dtype).repeat(x.shape[-1] // OBS_DIM)
    return (x - shift) / scale


def _fold(w: np.ndarray, b: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """First-layer weights on raw inputs: W·((x − s)/k) + b = (W/k)·x + (b − W·s/k)."""
    shift = np.tile(np.asarray(OBS_SHIFT), window)
    scale = np.tile(np.asarray(OBS_SCALE), window)
    return w / scale, b - (w / scale) @ shift


class TorchLstm(nn.Module):
    """fc(2→32) → ReLU → fc(32→16) → ReLU → LSTMCell(16) → fc(16→1)."""

    kind = "lstm"

    def __init__(self, h1: int = 32, h2: int = 16, hidden: int = 16) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(OBS_DIM, h1), nn.Linear(h1, h2)
        self.cell = nn.LSTMCell(h2, hidden)
        self.out = nn.Linear(hidden, 1)
        self.hidden = hidden
        with torch.no_grad():  # start near "keep the rate" (a ≈ 1)
            self.out.weight.mul_(0.1)
            self.out.bias.zero_()

    def forward(self, obs: torch.Tensor, h: torch.Tensor, c: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """obs (T, B, 2), (h, c) (B, H) each → y (T, B) and the last (h, c)."""
        x = torch.relu(self.fc2(torch.relu(self.fc1(_standardise(obs)))))
        ys = []
        for t in range(x.shape[0]):
            h, c = self.cell(x[t], (h, c))
            ys.append(self.out(h)[:, 0])
        return torch.stack(ys), h, c

    def export(self) -> LstmPolicy:
        def np_(p: torch.Tensor) -> np.ndarray:
            return p.detach().cpu().double().numpy()

        w1, b1 = _fold(np_(self.fc1.weight), np_(self.fc1.bias), 1)
        return LstmPolicy({
            "fc1_w": w1, "fc1_b": b1, "fc2_w": np_(self.fc2.weight), "fc2_b": np_(self.fc2.bias),
            "lstm_w_ih": np_(self.cell.weight_ih), "lstm_w_hh": np_(self.cell.weight_hh),
            "lstm_b": np_(self.cell.bias_ih) + np_(self.cell.bias_hh),
            "out_w": np_(self.out.weight), "out_b": np_(self.out.bias)}, output="bounded")


class TorchMlp(nn.Module):
    """Window of ``window`` observations (oldest first) → ReLU layers → 1."""

    kind = "mlp"

    def __init__(self, window: int = 2, hidden: tuple[int, ...] = (12,)) -> None:
        super().__init__()
        self.window = window
        sizes = (OBS_DIM * window, *hidden, 1)
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in pairwise(sizes))
        with torch.no_grad():
            self.linears()[-1].weight.mul_(0.1)
            self.linears()[-1].bias.zero_()

    def linears(self) -> list[nn.Linear]:
        return [m for m in self.layers if isinstance(m, nn.Linear)]

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        """feats (..., window·2) → y (...)."""
        x = _standardise(feats)
        for i, lin in enumerate(self.linears()):
            x = lin(x)
            if i < len(self.layers) - 1:
                x = torch.relu(x)
        return x[..., 0]

    def export(self) -> MlpPolicy:
        layers = [(lin.weight.detach().double().numpy(), lin.bias.detach().double().numpy())
                  for lin in self.linears()]
        layers[0] = _fold(*layers[0], self.window)
        return MlpPolicy(layers, self.window, output="bounded")


def _unfold(w: np.ndarray, b: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of :func:`_fold`: first-layer weights on standardised inputs."""
    shift = np.tile(np.asarray(OBS_SHIFT), window)
    scale = np.tile(np.asarray(OBS_SCALE), window)
    return w * scale, b + w @ shift


def mlp_from_policy(policy: MlpPolicy) -> TorchMlp:
    """A :class:`TorchMlp` that computes ``policy``'s decisions (a warm start: training
    continues from an exported, e.g. shipped, ``bounded`` MLP)."""
    if policy.output != "bounded":
        raise ConfigError(f"warm start needs a 'bounded' MLP policy, not {policy.output!r}")
    sizes = tuple(w.shape[0] for w, _ in policy.layers[:-1])
    model = TorchMlp(policy.window, sizes)
    raw = list(policy.layers)
    raw[0] = _unfold(*raw[0], policy.window)
    with torch.no_grad():
        for lin, (w, b) in zip(model.linears(), raw, strict=True):
            lin.weight.copy_(torch.as_tensor(w, dtype=torch.float32))
            lin.bias.copy_(torch.as_tensor(b, dtype=torch.float32))
    return model


def windows(obs: torch.Tensor, window: int) -> torch.Tensor:
    """(T, B, 2) observations → (T, B, window·2) windows, padded as the runtime pads
    (δ = 0, previous action = 1: :class:`p4cc.hostcc.rlcc_policy_base.WindowedPolicy`)."""
    pad = torch.zeros(window - 1, *obs.shape[1:], dtype=obs.dtype)
    pad[..., 1] = 1.0
    full = torch.cat([pad, obs])
    return torch.cat([full[k:k + obs.shape[0]] for k in range(window)], dim=-1)
