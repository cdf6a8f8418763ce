"""Lab 1, the BMv2 step: the RED curve of the student's compiled program.

One simple_switch_grpc runs build/p4cc.json (the student's program) on the rig of
tests/dataplane_rig.py; tests/red_sweep.py drives a standing queue on port 2 in cycles
(the same sweep as tests/test_dataplane_marking.py::test_red_marking_curve), and
tests/red_bound.py judges the marked fraction per queue depth against
    P(mark) = pmax (q - kmin) / (kmax - kmin)  for kmin <= q < kmax,  0 below,  1 above
(DCQCN §3, ACC §2.1) with a Bonferroni bound (family-wise false failure <= 0.1 %).
Needs root (veth pairs) and BMv2; nothing here is copied from the tests, it imports them.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2] / "tests"
PREFIX = "l1rc"  # veths l1rc1a/b, l1rc2a/b (the marking test uses p4mk)
SWITCH_ID = 0x1AB1
INT_DPORT = 5000
PKT = 1000  # bytes per packet for the EcnConfig <-> packets conversion
KMIN, KMAX, PMAX = 10, 40, 0.5  # the marking test's curve, in packets
NON_ECT_EVERY = 5  # every 5th packet is non-ECT: it must never be marked
ECT_WANTED = 6000


@dataclass(frozen=True)
class CurveResult:
    """What the sweep measured: one line per depth bin and the bound's failures."""

    lines: list[str]
    failures: list[str]
    non_ect_marked: int
    delivered: int


def _imports() -> None:
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))


def skip_reason() -> str | None:
    """Why the BMv2 step cannot run here (None if it can)."""
    _imports()
    from dataplane_rig import skip_reason as rig_skip

    return rig_skip()


def measure(p4info: Path, p4json: Path) -> CurveResult:
    """Run the student's program on one switch and sweep the queue of port 2."""
    _imports()
    from dataplane_rig import CE, ECT0, one_switch
    from red_bound import curve_failures
    from red_sweep import PORT, sweep

    from p4cc.controlplane.ecn import EcnConfig

    curve = EcnConfig(KMIN * PKT, KMAX * PKT, PMAX)
    n_total = ECT_WANTED * NON_ECT_EVERY // (NON_ECT_EVERY - 1) + 200
    tos_of = {s: 0 if s % NON_ECT_EVERY == NON_ECT_EVERY - 1 else ECT0 for s in range(n_total)}
    with one_switch(PREFIX, SWITCH_ID, INT_DPORT, p4info=p4info, p4json=p4json) as rig:
        rig.thrift.set_queue_depth(1000, PORT)
        rig.p4rt.insert_entry("ecn_config", {"egress_port": PORT, "qid": 0}, "set_ecn",
                              {"kmin": KMIN, "kmax": KMAX, "pmax": curve.pmax_scaled})
        t0 = time.monotonic()
        got = sweep(rig, n_total, cycle=110, pps_in=1200, pps_out=600, tos_of=tos_of,
                    dport=INT_DPORT)
        elapsed = time.monotonic() - t0
    ect = [(d.qdepth, d.ecn == CE) for d in got if tos_of[d.seq] == ECT0]
    non = [d for d in got if tos_of[d.seq] == 0]
    lines = [f"sent {n_total}, delivered {len(got)} ({len(ect)} ECT) in {elapsed:.0f} s; "
             f"kmin {KMIN} kmax {KMAX} pkts, pmax {PMAX}"]
    lines += table(ect, lambda q: curve.marking_probability(q, PKT))
    failures = curve_failures(ect, lambda q: curve.marking_probability(q, PKT), KMIN, KMAX)
    return CurveResult(lines, failures, sum(d.ecn != 0 for d in non), len(got))


def table(samples: Sequence[tuple[int, bool]], prob: Callable[[int], float]) -> list[str]:
    """Measured and RED marked fraction per 5-packet bin of queue depth."""
    bins = [(0, KMIN)] + [(q, q + 5) for q in range(KMIN, KMAX, 5)] + [(KMAX, 10**6)]
    out = ["   queue (pkts)      n   marked   RED"]
    for lo, hi in bins:
        rows = [(q, m) for q, m in samples if lo <= q < hi]
        n = max(len(rows), 1)
        red = sum(prob(q) for q, _ in rows) / n
        out.append(f"   {lo:>4}-{min(hi, 1000) - 1:<4}   {len(rows):6d}   "
                   f"{sum(m for _, m in rows) / n:6.3f}  {red:6.3f}")
    return out


def hint(failures: Sequence[str]) -> str:
    """What the failures mean for the student's set_ecn."""
    text = "\n      ".join(failures)
    if any(f.startswith(f"q>={KMAX}") for f in failures):
        tip = ("packets at q >= kmax must ALL be marked: set hdr.ipv4.ecn = ECN_CE when "
               "enq_qdepth >= kmax")
    elif any(f.startswith(f"q<{KMIN}") for f in failures):
        tip = "packets below kmin must never be marked"
    else:
        tip = ("between kmin and kmax the marked fraction must follow pmax (q - kmin) / "
               "(kmax - kmin): check the comparison u * (kmax - kmin) < pmax * (q - kmin) "
               "and the widths (bit<48>)")
    return f"{text}\n      {tip}"
