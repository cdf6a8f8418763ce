"""``p4cc bench calibrate``: measure this machine's BMv2 budget and cache it.

The bmv2 backend refuses specs that need more than the cached calibration allows
(p4cc.experiment.bmv2.budget).  Two measurements (root, BMv2; ~30 s):

* the switch: one simple_switch_grpc running p4cc's program, configured as in a run
  (the rig of ``p4cc bench dataplane``), at the priority runs give their switches: its
  CPU at two light loads (``cpu_pps`` and 3x) fitted as idle CPU + marginal µs per
  forwarded packet, and the delivered packets/s when saturated; medians of ``reps``;
* the hosts, as runs run them (p4cc.bench.calibrate_hosts: ``host send`` and
  ``host run`` processes in two network namespaces over a veth, HTB pacing, ~30 s): a
  sender's and a receiver's idle CPU, per host CC (``--host-cc``) the sender's µs per
  data packet and CPU-s/s per active flow, the receiver's µs per packet, and the CPU of
  one HTB rate change;
* ``host_us_per_pkt`` (the first calibrations' loopback number, kept for old cache
  files): p4cc's sender and receiver in one process over loopback at ``host_pps``.

The result is written to ``~/.cache/p4cc/calibration-<build>.json`` keyed by the BMv2
build, and printed.  ``--dry-run`` prints without caching.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Iterator, Sequence
from typing import Any

from p4cc.bench import calibrate_hosts
from p4cc.bench import dataplane as dp
from p4cc.bench.hostcc import StepRate
from p4cc.errors import ToolMissingError
from p4cc.experiment.bmv2 import budget
from p4cc.experiment.bmv2.control import set_autogroup_nice
from p4cc.experiment.bmv2.limits import SWITCH_NICE
from p4cc.hostcc import wire
from p4cc.hostcc.flow import FlowSpec
from p4cc.hostcc.receiver import Receiver, ReceiverConfig
from p4cc.hostcc.sender import Sender, SenderConfig


def switch_cost(reps: int, seconds: float, cpu_pps: float, offer_pps: float
                ) -> dict[str, float]:
    """(µs per packet, saturated pps) of p4cc's program on one BMv2 switch."""
    from p4cc.controlplane.p4runtime import P4RuntimeClient
    from p4cc.topo.veth import veth_pairs

    cfg = dp.BenchConfig(reps=reps, seconds=seconds, offer_pps=offer_pps, cpu_pps=cpu_pps,
                         lossfree=False, eq_pps=0.0, ifprefix="p4cal", log_level="off")
    runs = []
    with veth_pairs(cfg.ifprefix) as pairs:
        proc = dp.make_switch(f"{cfg.ifprefix}sw", {p: a for p, (a, _) in pairs.items()},
                              cfg.log_level)
        proc.start()
        # the priority a run gives its switches (p4cc.experiment.bmv2.limits.SWITCH_NICE)
        set_autogroup_nice(proc.pid, SWITCH_NICE)
        p4rt = P4RuntimeClient(proc.grpc_addr, 1, timeout_s=20.0)
        rig = None
        try:
            p4rt.connect()
            rig = dp.Rig(proc, p4rt, pairs[1][1], pairs[2][1])
            for _ in range(reps):
                r = dp.measure_program(rig, "p4cc", cfg)
                # a second light rate: CPU = idle + pps x marginal (BMv2's threads cost
                # CPU without packets too, which a single rate would spread over them)
                _s, got1, _p = rig.offer(cpu_pps, seconds)
                cpu1 = rig.last_cpu_s
                _s, got3, _p = rig.offer(3 * cpu_pps, seconds)
                cpu3 = rig.last_cpu_s
                marginal = (cpu3 - cpu1) / max(1, got3 - got1)
                r["marginal_us"] = max(0.0, marginal) * 1e6
                r["idle_cpu"] = max(0.0, (cpu1 - marginal * got1) / seconds)
                runs.append(r)
        finally:
            if rig is not None:
                rig.close()
            p4rt.close()
            proc.stop()
    return {"us_per_pkt": statistics.median(r["marginal_us"] for r in runs),
            "idle_cpu": statistics.median(r["idle_cpu"] for r in runs),
            "light_us_per_pkt": statistics.median(r["cpu_us_per_pkt"] for r in runs),
            "sat_pps": statistics.median(r["sat_pps"] for r in runs)}


def host_cost(pps: float, seconds: float, pkt_bytes: int = 986) -> float:
    """CPU µs per data packet of p4cc's sender + receiver (one process, loopback)."""
    rx = Receiver(ReceiverConfig(port=0, bind="127.0.0.1")).start()
    rate = pps * (pkt_bytes + wire.ETH_LEN) * 8.0
    ctl = StepRate(rate)
    cpu0, t0 = time.process_time(), time.monotonic()
    tx = Sender([FlowSpec("127.0.0.1", 10**9, cc="bench", port=rx.port, ref=1)],
                lambda _s: ctl, SenderConfig(pkt_bytes=pkt_bytes, probe_interval_s=0.1))
    tx.start()
    try:
        tx.wait(seconds)
    finally:
        tx.stop()
        rx.stop()
    cpu = time.process_time() - cpu0
    sent = sum(int(r.get("bytes_sent") or 0) for r in tx.records()) / max(
        1, pkt_bytes - wire.data_overhead())
    wall = time.monotonic() - t0
    return cpu * 1e6 / max(1.0, sent) if wall > 0 else float("nan")


#: host CCs whose sender costs a calibration measures: DCQCN, plain RL-CC (the default
#: policy) and the dearest shipped RL-CC policy, the trees, which prices every other
#: RL-CC variant (budget.Calibration.per_cc)
HOST_CCS = ("dcqcn", "rlcc", "rlcc:adpg-trees")


def measure(reps: int = 3, seconds: float = 2.0, cpu_pps: float = 1000.0,
            offer_pps: float = 45_000.0, host_pps: float = 2000.0,
            host_ccs: Sequence[str] = HOST_CCS,
            host_seconds: float = 3.0) -> tuple[budget.Calibration, dict[str, float]]:
    """Measure this machine (root, BMv2; ~1 min): the Calibration, and the switch's
    figures (``switch_cost``).  ToolMissingError when BMv2, root or the program is
    missing.  Also the calibrator the bmv2 backend runs once per build
    (p4cc.experiment.bmv2.autocal, registered by p4cc.cli)."""
    reason = dp.skip_reason()
    if reason is not None:
        raise ToolMissingError(f"cannot calibrate the bmv2 budget: {reason}")
    load = dp.loadavg()
    sw = switch_cost(reps, seconds, cpu_pps, offer_pps)
    host = host_cost(host_pps, seconds * 2)
    hc = calibrate_hosts.host_costs(list(host_ccs), host_seconds)
    cal = budget.Calibration(round(sw["us_per_pkt"], 1), round(sw["sat_pps"]),
                             round(host, 1), os.cpu_count() or 1, budget.bmv2_build(),
                             time.time(), load, round(sw["idle_cpu"], 3),
                             host_send_idle_cpu=hc["send_idle_cpu"],
                             host_recv_idle_cpu=hc["recv_idle_cpu"],
                             host_recv_us_per_pkt=hc["recv_us_per_pkt"],
                             host_send_us_per_pkt=hc["send_us_per_pkt"],
                             host_send_flow_cpu=hc["send_cpu_per_flow"],
                             host_rate_change_us=hc["rate_change_us"],
                             host_send_us_per_flow=hc["send_us_per_flow"],
                             host_recv_us_per_flow=hc["recv_us_per_flow"])
    return cal, sw


def calibrator() -> budget.Calibration:
    """``measure`` with its defaults (what ``p4cc bench calibrate`` caches)."""
    return measure()[0]


def run(argv: Sequence[str]) -> Iterator[dict[str, Any]]:
    ap = argparse.ArgumentParser(prog="p4cc bench calibrate")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0, help="per measurement point")
    ap.add_argument("--cpu-pps", type=float, default=1000.0)
    ap.add_argument("--offer-pps", type=float, default=45_000.0)
    ap.add_argument("--host-pps", type=float, default=2000.0)
    ap.add_argument("--host-cc", default=",".join(HOST_CCS),
                    help="host CCs whose sender costs are measured (comma-separated)")
    ap.add_argument("--host-seconds", type=float, default=3.0,
                    help="per host measurement window")
    ap.add_argument("--dry-run", action="store_true", help="print, do not cache")
    args = ap.parse_args(list(argv))
    reason = dp.skip_reason()
    if reason is not None:
        yield {"case": "calibrate", "skipped": reason}
        return
    cal, sw = measure(args.reps, args.seconds, args.cpu_pps, args.offer_pps, args.host_pps,
                      [c for c in args.host_cc.split(",") if c], args.host_seconds)
    rec: dict[str, Any] = {"case": "calibrate", **budget.describe(cal),
                           "switch_light_us_per_pkt": round(sw["light_us_per_pkt"], 1),
                           "bmv2_build_flags": dp.bmv2_build_flags()}
    if not args.dry_run:
        rec["cached"] = str(budget.save(cal))
    yield rec
