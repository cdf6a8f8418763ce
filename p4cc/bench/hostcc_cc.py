"""Benchmark cases of the CC cores (included by ``p4cc bench hostcc``).

A *decision* is one flow's reaction to one feedback event: for DCQCN a CNP followed by
the decrease check that cuts the rate (``on_cnp`` + ``advance`` by one check period);
for RL-CC one :func:`p4cc.hostcc.rlcc.step` (δ, policy inference, rate update).  Each
case times whole vectorized calls over N flows and reports µs per flow-decision,
µs per call and flow-decisions per second.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from p4cc.errors import P4ccError
from p4cc.hostcc import dcqcn, rlcc
from p4cc.hostcc.cc import RlccController, make_controller
from p4cc.hostcc.rlcc_names import DEFAULT_POLICY
from p4cc.hostcc.rlcc_policies import Policy, ReferencePolicy, data_dir, load_policy
from p4cc.scale import get_scale

SIZES = (1, 8192)
#: The PI baseline written into each policy file format (``rlcc:pi-<format>``; hand-made,
#: not learned; cases ``rlcc_pi-<format>_decision``, before issue 11 ``rlcc_<format>_...``)
POLICY_FILES = {"pi-lstm": "rlcc-lstm-ref.npz", "pi-mlp": "rlcc-mlp-ref.npz",
                "pi-trees": "rlcc-trees-ref.json", "pi-catboost": "rlcc-catboost-ref.json"}


#: RL-CC policies timed as a host flow's controller (``rlcc:<shortcut>``): the default
#: trained MLP and the hand-made PI baseline
HOST_SHORTCUTS = (DEFAULT_POLICY, "pi")


def _time(call: Callable[[], None], min_time_s: float) -> tuple[float, int]:
    call()  # warm up
    reps, start = 0, time.perf_counter()
    while True:
        call()
        reps += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time_s and reps >= 3:
            return elapsed / reps, reps


def _row(case: str, n: int, per_call_s: float, reps: int, **extra: Any) -> dict[str, Any]:
    return {"case": case, "flows": n, "us_per_decision": per_call_s * 1e6 / n,
            "us_per_call": per_call_s * 1e6, "decisions_per_s": n / per_call_s,
            "reps": reps, **extra}


def _dcqcn_case(n: int, min_time_s: float) -> dict[str, Any]:
    p = dcqcn.dcqcn_params("hpcc-ns3", 25e9)
    period = p.decrease_period_s or 4e-6
    box = {"s": dcqcn.init_state(n, p), "t": 0.0}

    def call() -> None:
        t = box["t"] + 50e-6  # type: ignore[operator]
        s = dcqcn.on_cnp(box["s"], p, t)  # type: ignore[arg-type]
        box["s"], box["t"] = dcqcn.advance(s, p, t + period), t

    per, reps = _time(call, min_time_s)
    return _row("dcqcn_decision", n, per, reps, params="hpcc-ns3")


def _rlcc_case(kind: str, policy: Policy, n: int, min_time_s: float) -> dict[str, Any]:
    p = rlcc.RlccParams(line_rate_bps=25e9, base_rtt_s=8e-6)
    rng = np.random.default_rng(0)
    infl = rng.uniform(1.0, 4.0, n)
    box = {"s": rlcc.init_state(n, p, policy)}

    def call() -> None:
        box["s"] = rlcc.step(box["s"], p, policy, infl)

    per, reps = _time(call, min_time_s)
    return _row(f"rlcc_{kind}_decision", n, per, reps)


def _rlcc_host_case(shortcut: str, min_time_s: float) -> dict[str, Any]:
    """A host flow's RL-CC controller (``rlcc:<shortcut>`` on the testbed scale) fed one
    RTT sample per decision interval, alternating below and far above the operating
    point: µs per sample and per decision (a cut whose signal left before the last cut
    is held back, so some samples decide nothing).  What a BMv2 sender's flow costs per
    decision, beside its packets."""
    ctl = make_controller(f"rlcc:{shortcut}", get_scale("testbed"))
    if not isinstance(ctl, RlccController):
        raise P4ccError(f"rlcc:{shortcut} did not make an RL-CC controller")
    iv = ctl.interval or ctl.params.base_rtt_s
    base = ctl.params.base_rtt_s
    box = {"t": 0.0, "k": 0}

    def call() -> None:
        box["t"] += iv
        box["k"] += 1
        ctl.on_rtt_sample(box["t"], base * (1.2 if box["k"] % 2 else 3.0))

    per, _reps = _time(call, min_time_s)
    samples = box["k"]
    decisions = ctl.one.decisions
    if decisions < 1:
        raise P4ccError(f"rlcc:{shortcut}: {samples} samples made no decision")
    return {"case": f"rlcc_host_{shortcut}_sample", "flows": 1, "us_per_sample": per * 1e6,
            "us_per_decision": per * 1e6 * samples / decisions,
            "decisions_per_sample": decisions / samples, "samples": samples}


def cases(sizes: tuple[int, ...] = SIZES, min_time_s: float = 0.2) -> Iterator[dict[str, Any]]:
    """One dict per (core, N): DCQCN, then the RL-CC core with the PI baseline
    (``reference``) and each of its policy files."""
    policies: dict[str, Policy] = {"reference": ReferencePolicy()}
    policies.update({k: load_policy(data_dir() / f) for k, f in POLICY_FILES.items()})
    for n in sizes:
        yield _dcqcn_case(n, min_time_s)
        for kind, pol in policies.items():
            yield _rlcc_case(kind, pol, n, min_time_s)
    for shortcut in HOST_SHORTCUTS:
        yield _rlcc_host_case(shortcut, min_time_s)


def run(argv: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """Entry point with the ``p4cc bench`` signature (argv is ignored)."""
    return cases()
