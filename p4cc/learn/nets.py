"""Torch MLPs for G independent agents at once, and their export to numpy layers.

``GroupMLP(groups, sizes)`` holds G separate MLPs (weights G × out × in, as G
``torch.nn.Linear``) evaluated together: input (G, B, in) -> (G, B, out).  G = 1 is
the single offline model shared by every port (ACC §4.3, PET §4.4.1); G = number of
ports gives each port its own copy for online fine-tuning (ACC §4.3, PET §4.4.2).
ReLU between layers, linear output: the same function as
p4cc.controlplane.agents.mlp.forward, which runs the exported layers with numpy.
"""

from __future__ import annotations

import math
from itertools import pairwise

import numpy as np
import torch
from torch import nn

#: ACC §6 "Resource Consumption": "a four-layer NN ... nodes in each layer {20,40,40,20}".
PAPER_HIDDEN = (20, 40, 40, 20)


class GroupMLP(nn.Module):
    def __init__(self, groups: int, sizes: tuple[int, ...], out_gain: float = 1.0) -> None:
        super().__init__()
        self.groups, self.sizes = groups, tuple(sizes)
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for i, (n_in, n_out) in enumerate(pairwise(sizes)):
            # torch.nn.Linear's default init, per group
            bound = 1.0 / math.sqrt(n_in)
            w = torch.empty(groups, n_out, n_in).uniform_(-bound, bound)
            if i == len(sizes) - 2:
                w *= out_gain
            self.weights.append(nn.Parameter(w))
            self.biases.append(nn.Parameter(torch.empty(groups, 1, n_out).uniform_(-bound,
                                                                                   bound)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(G, B, in) -> (G, B, out)."""
        h = x
        n = len(self.weights)
        for i in range(n):
            h = torch.baddbmm(self.biases[i], h, self.weights[i].transpose(1, 2))
            if i < n - 1:
                h = torch.relu(h)
        return h

    def replicate(self, groups: int) -> GroupMLP:
        """A G-group copy whose every group starts from group 0 (offline -> online)."""
        out = GroupMLP(groups, self.sizes)
        with torch.no_grad():
            for dst, src in zip([*out.weights, *out.biases], [*self.weights, *self.biases],
                                strict=True):
                dst.copy_(src[:1].expand_as(dst))
        return out

    def layers(self, group: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
        """Group ``group`` as numpy (W out×in, b) pairs for p4cc.controlplane.agents.mlp."""
        return [(w[group].detach().cpu().numpy().astype(np.float32),
                 b[group, 0].detach().cpu().numpy().astype(np.float32))
                for w, b in zip(self.weights, self.biases, strict=True)]


def per_agent(x: torch.Tensor, groups: int) -> torch.Tensor:
    """Agent-major (N, B, d) -> the (G, B', d) layout: G = 1 pools all agents."""
    if groups == 1:
        return x.reshape(1, -1, x.shape[-1])
    return x


def from_agents(y: torch.Tensor, n_agents: int, groups: int) -> torch.Tensor:
    """Inverse of ``per_agent`` for outputs: (G, B', k) -> (N, B, k)."""
    if groups == 1:
        return y.reshape(n_agents, -1, y.shape[-1])
    return y
