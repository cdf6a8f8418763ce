"""Closed-loop calibration of a distilled RL-CC student: one constant output offset.

The queue an RL-CC policy holds is set by where its output crosses 0 (action 1): the fixed
point in δ of the closed loop, δ = target − (inflation − β)·√rate, so the queue latency is
≈ (β − 1 + (target − δ̄)·√N) base RTTs above the base RTT and an error of the mean δ̄
moves it by ∝ √N (docs/hostcc-cc.md "Distilled trees").  A 10-tree staircase puts its
crossing, and the asymmetry of its steps around it, slightly off the teacher's; the closed
loop then holds a limit cycle whose mean δ is off the teacher's δ*.  Adding a constant c to
the student's output (the tree file's ``base``) moves that mean continuously: the queue
grows with c at every N (a larger output raises the rate; measured on the session-7
student: −5.4 / −2.5 / +7.8 % at 256 flows for c = −0.02 / 0 / +0.02).

:func:`calibrate_offset` picks c on the closed loop itself: the relative queue error
e_N(c) = QL_student(N)/QL_teacher(N) − 1 on *validation* incasts (N values that are not
the Table-2 comparison's, so the comparison stays a held-out measurement), and bisection
on f(c) = max_N e_N(c) + min_N e_N(c), whose root (each e_N increasing in c) balances the
largest over- and under-estimate, i.e. minimises max_N |e_N|.  The offset returned is the
evaluated one with the smallest max_N |e_N| (c = 0, the uncalibrated student, included),
so a calibration never makes the validation error worse.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from p4cc.errors import ConfigError

#: The validation incasts of session 8 (none is a Table-2 N: 8, 32, …, 2,048).
VALIDATION_NS = (16, 64, 256, 1536)
#: (policy file, N) -> the closed loop's queue latency at N flows (µs).
QueueFn = Callable[[Path, int], float]


def many_to_one_queue(rtts: int) -> QueueFn:
    """QL (µs) of the Table-2 measurement (:func:`p4cc.learn.rlcc_scenarios.many_to_one`:
    N→1, flows together at the line rate, second half of ``rtts`` base RTTs)."""
    from p4cc.learn.rlcc_scenarios import many_to_one

    def ql(path: Path, n: int) -> float:
        return float(many_to_one(f"rlcc:{path}", n, rtts=rtts)["ql_us"])

    return ql


def with_offset(doc: dict[str, Any], offset: float) -> dict[str, Any]:
    """A copy of a ``p4cc-trees`` document whose output is ``offset`` larger."""
    if doc.get("format") != "p4cc-trees":
        raise ConfigError("the offset applies to a p4cc-trees document")
    out = copy.deepcopy(doc)
    out["base"] = float(doc.get("base", 0.0)) + float(offset)
    return out


@dataclass(frozen=True)
class Calibration:
    """The chosen offset and every closed-loop evaluation behind it."""

    offset: float = field(metadata={"help": "constant added to the student's output"})
    max_abs_error: float = field(metadata={"help": "max_N |e_N| at the chosen offset"})
    teacher_ql: dict[int, float] = field(metadata={"help": "teacher's QL (µs) per N"})
    trials: tuple[tuple[float, dict[int, float]], ...] = field(metadata={
        "help": "(offset, {N: relative queue error}) in the order evaluated"})

    def summary(self) -> dict[str, Any]:
        return {"offset": self.offset, "max_abs_error": self.max_abs_error,
                "teacher_ql_us": {str(n): q for n, q in self.teacher_ql.items()},
                "trials": [{"offset": c, "errors": {str(n): e for n, e in errs.items()}}
                           for c, errs in self.trials]}


def calibrate_offset(doc: dict[str, Any], teacher: Path, ns: tuple[int, ...],
                     queue: QueueFn, workdir: Path, span: float = 0.02,
                     steps: int = 4) -> Calibration:
    """The offset in [−span, span] that brings the student's closed-loop queue closest to
    the teacher's at every N of ``ns`` (module docstring); ``steps`` bisection steps after
    c = 0 and the end of the half-interval f(0) points to (resolution span / 2^steps)."""
    if not ns or span <= 0 or steps < 0:
        raise ConfigError("calibration needs validation N values, span > 0, steps >= 0")
    teacher_ql = {n: queue(teacher, n) for n in ns}
    if min(teacher_ql.values()) <= 0:
        raise ConfigError(f"the teacher holds no queue at some N: {teacher_ql}")
    workdir.mkdir(parents=True, exist_ok=True)
    trials: list[tuple[float, dict[int, float]]] = []

    def f(c: float) -> float:
        path = workdir / f"calibrate-{len(trials)}.json"
        path.write_text(json.dumps(with_offset(doc, c)) + "\n")
        errs = {n: queue(path, n) / teacher_ql[n] - 1.0 for n in ns}
        trials.append((c, errs))
        return max(errs.values()) + min(errs.values())

    f0 = f(0.0)
    lo, hi = (0.0, span) if f0 < 0 else (-span, 0.0)
    if f0 != 0 and (f(hi) < 0 if f0 < 0 else f(lo) > 0):
        steps = 0  # no sign change within the span: keep the better end
    for _ in range(steps if f0 != 0 else 0):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    best = min(trials, key=lambda t: max(abs(e) for e in t[1].values()))
    return Calibration(best[0], max(abs(e) for e in best[1].values()), teacher_ql,
                       tuple(trials))
