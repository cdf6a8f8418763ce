"""DAgger for the distilled RL-CC student: label the states the *student* visits.

A student fitted only on the teacher's rollouts (NVIDIA RL-CC §5.3, the default of
:mod:`p4cc.learn.rlcc_distill`) is trained on the teacher's state distribution, but in
closed loop it drives the flows into states of its own, where its errors compound (Ross &
Bagnell, AISTATS 2010; the N-dependent queue error of docs/results.md "Distillation,
session 8").  DAgger (Ross, Gordon & Bagnell, AISTATS 2011, Algorithm 3.1) iterates:

1. roll out the mixture π_i = β_i·π* + (1 − β_i)·π̂_i of the teacher π* and the current
   student π̂_i (here per decision and flow: the teacher's action with probability β_i);
2. label every state visited with the teacher's output (the expert's action);
3. aggregate with all earlier data and refit the student on the union.

β_i = β^i for round i = 1, 2, … (round 0 is the teacher's own data, β_0 = 1; β = 0 is
Ross et al.'s β_i = I(i = 1), the pure student from round 1 on).  This reads the paper
differently (it distils on the teacher's rollouts only), so it is opt-in
(``DistillConfig.dagger_rounds``, docs/learning.md "DAgger (session 9)").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from p4cc.errors import ConfigError
from p4cc.hostcc.rlcc_policy_base import FloatArray, Policy, PolicyState


class Mixture:
    """π = β·teacher + (1 − β)·student: per decision and flow the teacher's action with
    probability β, else the student's.  Both must be windowed policies of the same window
    (their state is the same observation history, so one state serves both)."""

    name = "distill-dagger-mixture"

    def __init__(self, teacher: Policy, student: Policy, beta: float,
                 rng: np.random.Generator) -> None:
        if not 0.0 <= beta <= 1.0:
            raise ConfigError(f"beta={beta}: the teacher's share must be in [0, 1]")
        tw, sw = getattr(teacher, "window", None), getattr(student, "window", None)
        if tw != sw:
            raise ConfigError(f"teacher window {tw} != student window {sw}")
        self.teacher, self.student, self.beta, self.rng = teacher, student, beta, rng
        self.window: int = int(tw or 1)

    def initial_state(self, n: int) -> PolicyState:
        return self.teacher.initial_state(n)

    def act(self, obs: FloatArray, state: PolicyState) -> tuple[FloatArray, PolicyState]:
        a_s, new = self.student.act(obs, state)
        if self.beta <= 0.0:
            return a_s, new
        a_t, _ = self.teacher.act(obs, state)
        return np.where(self.rng.random(len(obs)) < self.beta, a_t, a_s), new


def round_beta(beta: float, i: int) -> float:
    """β_i of DAgger round ``i`` >= 1: β^i (β_0 = 1: the teacher's own rollouts)."""
    if i < 1:
        raise ConfigError(f"DAgger rounds count from 1, got {i}")
    return float(beta) ** i


@dataclass
class Aggregate:
    """The growing DAgger data set D: features, the teacher's labels, sample weights,
    held-out mask, and which round each row came from (0: the teacher's rollouts)."""

    x: FloatArray
    y: FloatArray
    w: FloatArray
    test: np.ndarray
    round: np.ndarray
    history: list[dict[str, Any]] = field(default_factory=list)

    def add(self, x_new: FloatArray, y_new: FloatArray, weight: float | FloatArray,
            test: np.ndarray, rnd: int) -> None:
        """Append rows (their labels already the teacher's) with their weights (one for
        all, or one per row)."""
        if len(x_new) != len(y_new) or len(test) != len(y_new):
            raise ConfigError("features, labels and held-out mask differ in length")
        self.x = np.concatenate([self.x, x_new])
        self.y = np.concatenate([self.y, y_new])
        w = np.broadcast_to(np.asarray(weight, dtype=np.float64), (len(y_new),))
        self.w = np.concatenate([self.w, w])
        self.test = np.concatenate([self.test, test])
        self.round = np.concatenate([self.round, np.full(len(y_new), rnd, dtype=np.int64)])


def aggregate(data: Aggregate, x_new: FloatArray, label: Callable[[FloatArray], FloatArray],
              weight: float | FloatArray, rng: np.random.Generator, rnd: int,
              held_out: float = 0.2) -> None:
    """DAgger's step 2-3: label the student-visited states ``x_new`` with the teacher
    (``label``: features -> teacher's pre-tanh output) and add them to ``data`` with
    ``weight`` (a random ``held_out`` fraction marked held out)."""
    data.add(x_new, label(x_new), weight, rng.random(len(x_new)) < held_out, rnd)


def run(data: Aggregate, rounds: int, beta: float,
        refit: Callable[[Aggregate], Policy],
        visit: Callable[[Mixture, int], FloatArray],
        label: Callable[[FloatArray], FloatArray],
        weight: Callable[[FloatArray], FloatArray],
        rng: np.random.Generator, teacher: Policy) -> Policy:
    """DAgger: ``refit`` the student on ``data``, then ``rounds`` times roll out the
    β_i-mixture (``visit``: policy, round -> features of the states it visited), label,
    aggregate (``weight``: features -> sample weights) and refit.  Returns the last
    student; ``data.history`` gets one entry per round (β_i, states added, in all)."""
    student = refit(data)
    for i in range(1, rounds + 1):
        b = round_beta(beta, i)
        x_new = visit(Mixture(teacher, student, b, rng), i)
        aggregate(data, x_new, label, weight(x_new), rng, i)
        data.history.append({"round": i, "beta": b, "added": len(x_new),
                             "states": len(data.y)})
        student = refit(data)
    return student
