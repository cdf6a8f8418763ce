"""Benchmark: BMv2's CPU per forwarded packet with INT off, summary-only, and reported.

The rig of ``p4cc bench dataplane`` (one ``simple_switch_grpc`` at ``--log-level off``,
1000-B UDP frames from a raw socket, port 1 -> port 2, the switch's own CPU from
/proc): p4cc's program with its INT sink on port 2, and an ``int_watchlist`` entry for
the frames' UDP port that is absent (``off``), ``int_source_summary`` (the sink writes
the summary only) or ``int_source`` (it also clones a report to the CPU port; a thread
drains the PacketIns as the runner's collector does).  The modes alternate within each
repetition; medians over repetitions.  The machine budget's ``switch_int_us_per_pkt``
and ``switch_report_us_per_pkt`` come from these numbers
(p4cc.experiment.bmv2.budget).  Needs root and BMv2; without them one record per case
says why it was skipped.
"""

from __future__ import annotations

import argparse
import queue
import statistics
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from p4cc.bench import dataplane as dp
from p4cc.constants import CPU_PORT, INT_REPORT_SESSION
from p4cc.controlplane.switch import int_watch_action
from p4cc.topo.veth import veth_pairs

MODES = ("off", "summary", "report")
CASES = (*(f"int_{m}" for m in MODES), "int_cost")


def set_mode(rig: dp.Rig, mode: str) -> None:
    """A fresh pipeline (no watch entry), then the mode's watch entry (the clone session,
    set once, outlives pipeline loads and clones only packets without no_report)."""
    rig.load("p4cc")
    if mode == "off":
        return
    rig.p4rt.insert_entry("int_watchlist", {"l4_dport": (dp.UDP_DPORT, 0xFFFF)},
                          int_watch_action(mode == "report"), {"max_hops": 8}, priority=1)


def summarise(runs: dict[str, dict[float, list[float]]]) -> dict[str, Any]:
    """The per-mode medians and what INT adds per packet (means over the offered rates)."""
    med = {m: {r: statistics.median(v) for r, v in d.items()} for m, d in runs.items()}
    rates = sorted(med["off"])
    mean = {m: statistics.mean(med[m][r] for r in rates) for m in MODES}
    return {"case": "int_cost", "rates_pps": rates,
            "int_us_per_pkt": round(mean["summary"] - mean["off"], 1),
            "report_us_per_pkt": round(mean["report"] - mean["summary"], 1)}


def measure(reps: int, rates: Sequence[float], seconds: float
            ) -> dict[str, dict[float, list[float]]]:
    from p4cc.controlplane.p4runtime import P4RuntimeClient

    runs: dict[str, dict[float, list[float]]] = {m: {r: [] for r in rates} for m in MODES}
    with veth_pairs("p4ic") as pairs:
        proc = dp.make_switch("p4icsw", {p: a for p, (a, _) in pairs.items()}, "off")
        proc.start()
        p4rt = P4RuntimeClient(proc.grpc_addr, 1, timeout_s=20.0)
        stop = threading.Event()
        rig: dp.Rig | None = None
        try:
            p4rt.connect()
            rig = dp.Rig(proc, p4rt, pairs[1][1], pairs[2][1])
            rig.load("p4cc")  # a pipeline first: BMv2 keeps the session across reloads
            p4rt.add_clone_session(INT_REPORT_SESSION, [CPU_PORT])
            pins = p4rt.packet_ins()

            def drain() -> None:  # what the runner's INT collector does with reports
                while not stop.is_set():
                    try:
                        pins.get(timeout=0.2)
                    except queue.Empty:
                        continue

            threading.Thread(target=drain, daemon=True).start()
            for rep in range(reps):
                for mode in MODES if rep % 2 == 0 else MODES[::-1]:
                    set_mode(rig, mode)
                    for rate in rates:
                        _sent, got, _pps = rig.offer(rate, seconds)
                        runs[mode][rate].append(rig.last_cpu_s * 1e6 / max(got, 1))
        finally:
            stop.set()
            if rig is not None:
                rig.close()
            p4rt.close()
            proc.stop()
    return runs


def run(argv: Sequence[str]) -> Iterator[dict[str, Any]]:
    parser = argparse.ArgumentParser(prog="p4cc bench intcost")
    parser.add_argument("--reps", type=int, default=5, help="alternating repetitions")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per point")
    parser.add_argument("--rates", default="1000,2000", help="offered frames/s, comma-separated")
    args = parser.parse_args(list(argv))
    reason = dp.skip_reason()
    if reason is not None:
        for case in CASES:
            yield {"case": case, "skipped": reason}
        return
    rates = [float(x) for x in args.rates.split(",")]
    runs = measure(args.reps, rates, args.seconds)
    for mode in MODES:
        for rate, v in runs[mode].items():
            yield {"case": f"int_{mode}", "offered_pps": rate, "reps": args.reps,
                   "median_us_per_pkt": round(statistics.median(v), 1),
                   "runs_us_per_pkt": [round(x, 1) for x in v], "loadavg_1m": dp.loadavg()}
    yield summarise(runs)
