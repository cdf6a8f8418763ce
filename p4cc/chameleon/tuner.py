"""CHAMELEON's greedy tuner (poster §2.2), pure logic: a metric in, the next settings out.

One parameter p per round: ``v_{i+1} = v_i ± s_i`` with ``s_{i+1} = λ·s_i`` (λ = 0.95).
With m_i the metric of round i (higher is better) and gain (m_i - m_{i-1}) / m_{i-1}:

* gain ≥ β: keep the direction;
* m_i < m_{i-1}: the direction was wrong: reverse it (``v_{i+1} = v_i ∓ s_i``);
* otherwise (0 ≤ gain < β) the gain is slight;
* after ``patience`` rounds in a row without a gain ≥ β (slight or worse), or
  ``max_rounds_per_param`` rounds, p is left at the best value seen while tuning it and
  the next parameter starts with one baseline round (the metric with p at that value);
* the tuner stops when every parameter has been traversed or the metric reaches
  ``target``.

Where the poster is silent we chose: a worse round also counts toward ``patience``
(else a noisy metric could reverse forever); a step that would leave the range is
clamped to it, and one that cannot move at all reverses; p is kept at its best value
when moving on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from p4cc.errors import ConfigError


@dataclass(frozen=True)
class TunerConfig:
    lam: float = 0.95  # step shrink per round (poster: λ = 0.95)
    beta: float = 0.01  # relative gain that counts as an improvement
    patience: int = 3  # rounds without such a gain before moving on
    max_rounds_per_param: int = 40
    target: float | None = None  # stop once the metric reaches this

    def __post_init__(self) -> None:
        if not 0 < self.lam <= 1:
            raise ConfigError(f"tuner λ={self.lam} must be in (0, 1]")
        if not self.beta >= 0:
            raise ConfigError(f"tuner β={self.beta} must be >= 0")
        if self.patience < 1 or self.max_rounds_per_param < 1:
            raise ConfigError("tuner patience and max_rounds_per_param must be >= 1")


@dataclass
class Knob:
    """One parameter: its value and range in tuning coordinates (log2 of the value when
    ``log``) and its current step."""

    name: str
    value: float
    lo: float
    hi: float
    step: float
    log: bool = False

    def actual(self) -> float:
        v = 2.0 ** self.value if self.log else self.value
        return float(f"{v:.12g}")  # (no 1e-16 noise from the log2 round trip)


@dataclass(frozen=True)
class Event:
    round: int
    param: str
    value: float  # actual value in force during the round that earned ``metric``
    metric: float
    action: str  # baseline | keep | reverse | slight | next | target | done


@dataclass
class _Current:
    index: int = 0
    prev: float | None = None
    best: tuple[float, float] | None = None  # (metric, coordinate)
    direction: float = 1.0
    stall: int = 0
    rounds: int = 0


class GreedyTuner:
    def __init__(self, knobs: Sequence[Knob], config: TunerConfig | None = None) -> None:
        if not knobs:
            raise ConfigError("the tuner needs at least one parameter")
        self.knobs = list(knobs)
        self.config = config or TunerConfig()
        self.rounds = 0
        self.done = False
        self.stop_reason = ""
        self.history: list[Event] = []
        self._cur = _Current()

    @property
    def param(self) -> str | None:
        return None if self.done else self.knobs[self._cur.index].name

    def values(self) -> dict[str, float]:
        return {k.name: k.actual() for k in self.knobs}

    def _move(self, k: Knob, c: _Current) -> None:
        """v ± s (clamped; reversed if it cannot move), then s = λ·s."""
        for _ in range(2):
            new = min(k.hi, max(k.lo, k.value + c.direction * k.step))
            if new != k.value:
                k.value = new
                break
            c.direction = -c.direction
        k.step *= self.config.lam

    def step(self, metric: float) -> dict[str, float] | None:
        """The metric of the round just ended -> the settings of the next round, or None
        once the tuner has stopped (the settings in force stay)."""
        if self.done:
            return None
        cfg, c = self.config, self._cur
        k = self.knobs[c.index]
        self.rounds += 1
        m = float(metric)

        def log(action: str) -> None:
            self.history.append(Event(self.rounds, k.name, k.actual(), m, action))

        if c.best is None or m > c.best[0]:
            c.best = (m, k.value)
        if cfg.target is not None and m >= cfg.target:
            log("target")
            self.done, self.stop_reason = True, f"target {cfg.target:g} reached"
            return None
        if c.prev is None:  # baseline round of this parameter: first move up
            log("baseline")
        else:
            c.rounds += 1
            gain = (m - c.prev) / abs(c.prev) if c.prev else (1.0 if m > c.prev else 0.0)
            if gain >= cfg.beta:
                log("keep")
                c.stall = 0
            elif m < c.prev:
                log("reverse")
                c.direction = -c.direction
                c.stall += 1
            else:
                log("slight")
                c.stall += 1
            if c.stall >= cfg.patience or c.rounds >= cfg.max_rounds_per_param:
                return self._next(k, c)
        c.prev = m
        self._move(k, c)
        return self.values()

    def _next(self, k: Knob, c: _Current) -> dict[str, float] | None:
        assert c.best is not None
        k.value = c.best[1]
        if c.index + 1 >= len(self.knobs):
            self.history.append(Event(self.rounds, k.name, k.actual(), c.best[0], "done"))
            self.done, self.stop_reason = True, "every parameter traversed"
            return self.values()  # the last parameter's best value still has to go out
        self.history.append(Event(self.rounds, k.name, k.actual(), c.best[0], "next"))
        self._cur = _Current(index=c.index + 1)
        return self.values()
