"""What every RL-CC policy module shares: the policy protocol, the observation layout,
the output transforms, the windowed base class, the load error and the reference gains.

A module of its own so that :mod:`p4cc.hostcc.rlcc_policies` (which dispatches to the
tree loader) and :mod:`p4cc.hostcc.rlcc_trees` (which builds on the windowed base) both
import it and not each other.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from p4cc.errors import ConfigError

FloatArray = npt.NDArray[np.float64]
PolicyState = tuple[FloatArray, ...]
OBS_DIM = 2
OUTPUTS = ("identity", "exp", "bounded")
#: ``bounded``: u = tanh(y) in (−1, 1) becomes 1 + m·u (u >= 0) or 1/(1 − m·u) (u < 0), a
#: rate factor in (1/(1+m), 1+m) symmetric in log scale -- the bounded multiplicative
#: action of ADPG (Tessler et al. §6; NVIDIA RL-CC §3: a ∈ [1/1.2, 1.2], REFERENCE §3).
BOUNDED_M = 0.2


class PolicyLoadError(ConfigError):
    """A policy file is missing, unreadable, or has the wrong content/shapes."""


@runtime_checkable
class Policy(Protocol):
    name: str

    def initial_state(self, n: int) -> PolicyState: ...

    def act(self, obs: FloatArray, state: PolicyState) -> tuple[FloatArray, PolicyState]: ...


def apply_output(y: FloatArray, output: str) -> FloatArray:
    """A model's raw output as an action: ``identity``, ``exp`` (of a log action) or
    ``bounded`` (see :data:`BOUNDED_M`)."""
    if output == "bounded":
        u = np.tanh(y)
        return np.where(u >= 0, 1.0 + BOUNDED_M * u, 1.0 / (1.0 - BOUNDED_M * u))
    return np.exp(np.clip(y, -50.0, 50.0)) if output == "exp" else y


#: Reference policy gains (per decision).  Chosen on the simulator's N-flow incast
#: (p4cc.sim.validate.rlcc_fixed_point, N = 2..256, paper and testbed scales) with a
#: decision per base RTT: the measured RTT inflation was within 1 % of target·√N + β and
#: the link full; with the hosts' rule (a decision per 2 base RTTs, p4cc.hostcc.rlcc_rule)
#: within 2.1 % (N = 2; exact to 3 digits for N >= 4, docs/simulator.md (1b)).
#: The former purely integral policy a = exp(ln(1.2)/target·δ) (k_i = 2.85, k_p = 0)
#: oscillated around that point (inflation 2.5 for 1.63, util. 0.78): the queue
#: integrates the rate excess and the policy integrates δ, two integrators in a loop with
#: one RTT of delay, so the loop needs the proportional (damping) term.
REF_KI = 0.125
REF_KP = 1.0
#: δ is squashed to δ_s·tanh(δ/δ_s) first: linear near the operating point (|δ| ≲ 0.3),
#: bounded in deep congestion, where RTT jitter moves δ by several units and the k_p
#: term would turn that jitter into random ±20 % steps (BMv2 4→1 incast: the flows took
#: 2 s to come down from the start-up overload).
REF_DELTA_SCALE = 1.0


class WindowedPolicy:
    """Base for policies over the last ``window`` observations, oldest first."""

    name = "windowed"
    window = 1

    def initial_state(self, n: int) -> PolicyState:
        hist = np.zeros((n, max(self.window - 1, 0), OBS_DIM))
        hist[:, :, 1] = 1.0  # padding: δ = 0, previous action = 1
        return (hist,)

    def features(self, obs: FloatArray, state: PolicyState) -> tuple[FloatArray, PolicyState]:
        (hist,) = state
        full = np.concatenate([hist, obs[:, None, :]], axis=1)
        return full.reshape(obs.shape[0], -1), (full[:, 1:, :],)
