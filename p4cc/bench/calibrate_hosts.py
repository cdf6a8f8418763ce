"""Host costs for the machine budget, measured the way bmv2 runs run their hosts.

``p4cc bench calibrate`` (root) calls :func:`host_costs`: two network namespaces joined
by one veth pair, a receive-only ``p4cc host run`` in one and ``p4cc host send`` in the
other, each started through the backend's own wrapper (``python -m
p4cc.experiment.bmv2.hosts``: imports first, then waits for the go file), with the
options the backend gives them (``--dev`` HTB pacing, ``--nic-rate``, ``--pad``, the
CC's probe options).  Measured from ``/proc/<pid>/stat``, children included (the
pacer's ``tc -batch``; p4cc.experiment.bmv2.procmon.tree_cpu_seconds):

* the idle cost of a sender and of a receiver process (the sender loop wakes every
  5 ms with nothing to send; p4cc.hostcc.sender.Sender.step);
* per host CC (``dcqcn``, ``rlcc:<policy>``): the sender's CPU with 1 flow and with
  :data:`MANY_FLOWS` flows sharing the link rate for ``seconds``, solved for µs per data
  packet and CPU-s per second of one active flow (RL-CC decides per flow every decision
  interval and probes every interval, whatever the packet rate);
* the receiver's µs per data packet;
* the sender's and the receiver's µs per flow beyond its packets (what a flow costs to
  start, pace and complete: its HTB class, its state, its completion record), from
  ``SHORT_FLOWS_PER_S`` flows of ``SHORT_FLOW_PKTS`` packets a second, started one after
  another in the window (closed-loop storage starts 30-35 a second on BMv2);
* one HTB rate change over netlink (p4cc.hostcc.pacing.HtbPacer.set_rate, what a DCQCN
  sender does on every CNP): this process's CPU for ``rounds`` x ``flows`` changes.

No switch is involved, so there are no ECN marks and no CNPs: the runs' extra cost of
congestion (CNPs, go-back-N, contention for two cores) is a factor on top, derived from
recorded runs in p4cc.experiment.bmv2.budget.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from p4cc.errors import P4ccError
from p4cc.experiment.bmv2.hosts import LISTEN_POLL_S, write_go
from p4cc.experiment.bmv2.launch import quiet_args
from p4cc.experiment.bmv2.limits import probe_interval_s
from p4cc.experiment.bmv2.procmon import tree_cpu_seconds
from p4cc.scale import get_scale

#: the namespaces and veth of the rig, named after this process (created and deleted
#: here; a stale one of the same name is ours, from an interrupted calibration)
_TAG = f"p4c{os.getpid() % 10**7}"
NS_SEND, NS_RECV, DEV_SEND, DEV_RECV = f"{_TAG}S", f"{_TAG}R", f"{_TAG}s", f"{_TAG}r"
IP_SEND, IP_RECV = "10.79.1.1", "10.79.1.2"
#: flows start this long after t0: the idle costs are measured before
LEAD_S = 3.0
#: seconds after the flows' start before the busy window (HTB classes set up, rates up)
SETTLE_S = 0.3
STARTUP_TIMEOUT_S = 60.0
#: the per-flow window: short flows started evenly through it (a storage run of
#: examples/acc_storage_bmv2.yaml starts 30-35 flows a second, the default experiment 7-9)
SHORT_FLOWS_PER_S = 30.0
#: flows sharing the link in the second window of the per-flow solve: the CPU of one
#: active flow is (CPU(N) - CPU(1) - packets' CPU) / (N - 1).  With 4 (until session 42)
#: the difference was within the windows' noise: plain RL-CC's per-flow cost came out
#: 0-0.034 CPU-s/s from one calibration to the next, which decided whether a spec fit
#: (docs/emulation.md "Session 42").
MANY_FLOWS = 16
SHORT_FLOW_PKTS = 2


def _ip(*args: str, check: bool = True) -> None:
    subprocess.run(["ip", *args], check=check, capture_output=True)


@contextlib.contextmanager
def netns_pair() -> Iterator[None]:
    """Two namespaces joined by a veth (sender side, receiver side), removed on exit."""
    for ns in (NS_SEND, NS_RECV):
        _ip("netns", "del", ns, check=False)
    try:
        for ns in (NS_SEND, NS_RECV):
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        _ip("link", "add", DEV_SEND, "type", "veth", "peer", "name", DEV_RECV)
        for ns, dev, ip in ((NS_SEND, DEV_SEND, IP_SEND), (NS_RECV, DEV_RECV, IP_RECV)):
            _ip("link", "set", dev, "netns", ns)
            _ip("-n", ns, "addr", "add", f"{ip}/24", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
        yield
    finally:
        for ns in (NS_SEND, NS_RECV):
            _ip("netns", "del", ns, check=False)


class _Proc:
    """One host process through the backend's wrapper, in a namespace; stopped by PID."""

    def __init__(self, ns: str, d: Path, tag: str, cmd: list[str], nic_rate: float = 0.0):
        self.ready = d / f"ready-{tag}"
        argv = [sys.executable, "-m", "p4cc.experiment.bmv2.hosts", "--ready",
                str(self.ready), "--go", str(d / f"go-{tag}")]
        if nic_rate:
            argv += ["--nic-rate", f"{nic_rate:g}"]
        self.go = d / f"go-{tag}"
        self.log = (d / f"{tag}.log").open("w")
        # `ip netns exec` execs the command: the PID is the host process's
        self.proc = subprocess.Popen(["ip", "netns", "exec", ns, *argv, "--", *cmd],
                                     stdout=subprocess.DEVNULL, stderr=self.log)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not self.ready.is_file():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise P4ccError(f"calibration host process did not start: {self.log.name}")
            time.sleep(LISTEN_POLL_S)  # poll interval of the readiness condition

    def cpu(self) -> float:
        """The process's CPU seconds with its children's (its pacer's ``tc -batch``)."""
        return tree_cpu_seconds(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def _sleep_until(t_mono: float) -> None:
    while (left := t_mono - time.monotonic()) > 0:
        time.sleep(min(left, 0.05))  # waiting for an instant, not for a condition


def _sent_in(trace: Path, t_a: float, t_b: float) -> float:
    """Bytes the sender's flows sent between run times t_a and t_b (trace.csv rows)."""
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    with trace.open() as f:
        for r in csv.DictReader(f):
            t, fid, b = float(r["t"]), r["flow_id"], float(r["bytes_sent"] or 0)
            if t <= t_a:
                first[fid] = b
            if t <= t_b:
                last[fid] = b
    return sum(last[k] - first.get(k, 0.0) for k in last)


def _one(d: Path, rx: _Proc, cc: str, flows: int, seconds: float, scale_name: str
         ) -> dict[str, float]:
    """One sender with ``flows`` flows at the link rate: CPU and packets in the window."""
    rate = get_scale(scale_name).link_rate_bps
    size = int(rate / 8 * (seconds + 5.0) / flows)  # still running at the window's end
    sched = [{"dst": IP_RECV, "size": size, "start_s": LEAD_S, "cc": cc, "ref": i}
             for i in range(flows)]
    return _window(d, rx, cc, f"{cc.replace(':', '_')}-{flows}", sched, seconds, scale_name)


def _short(d: Path, rx: _Proc, cc: str, seconds: float, scale_name: str
           ) -> dict[str, float]:
    """One sender starting SHORT_FLOWS_PER_S flows of SHORT_FLOW_PKTS packets a second
    through the window: CPU, packets and the flows started in the window."""
    payload = get_scale(scale_name).pkt_bytes - 14  # padded datagrams (--pad)
    n = max(1, round(SHORT_FLOWS_PER_S * seconds))
    a = LEAD_S + SETTLE_S
    sched = [{"dst": IP_RECV, "size": SHORT_FLOW_PKTS * payload, "cc": cc, "ref": i,
              "start_s": a + (i + 0.5) * seconds / n} for i in range(n)]
    out = _window(d, rx, cc, f"{cc.replace(':', '_')}-short", sched, seconds, scale_name)
    # every flow starts and (two packets at the link rate: ~2 ms) ends in the window; the
    # trace's periodic rows may miss a flow this short, so count its packets, not bytes
    return {**out, "pkts": float(n * SHORT_FLOW_PKTS), "flows": float(n)}


def _window(d: Path, rx: _Proc, cc: str, tag: str, sched: list[dict[str, Any]],
            seconds: float, scale_name: str) -> dict[str, float]:
    """Run one sender on ``sched`` (flows from LEAD_S on): its and the receiver's idle
    CPU-s/s before the flows, their CPU in the window [LEAD_S + SETTLE_S, + seconds]
    and the data packets sent in it."""
    scale = get_scale(scale_name)
    rate = scale.link_rate_bps
    (d / f"{tag}.json").write_text(json.dumps(sched))
    probe = probe_interval_s(cc, 1, scale.pps(rate), scale.base_rtt_s)
    tx = _Proc(NS_SEND, d, tag, ["host", "send", "--schedule", str(d / f"{tag}.json"),
                                 "--cc", cc, "--dev", DEV_SEND, "--out", str(d / tag),
                                 "--probe-interval", f"{probe:g}", "--pad", "--scale",
                                 scale_name, "--deadline", f"{LEAD_S + seconds + 30:g}",
                                 *quiet_args(cc)], nic_rate=rate)
    try:
        tx.wait_ready()
        t0 = time.time() + 0.3
        t0_mono = time.monotonic() + 0.3
        write_go(tx.go, t0)
        _sleep_until(t0_mono + 0.5)
        idle0, ridle0 = tx.cpu(), rx.cpu()
        _sleep_until(t0_mono + LEAD_S - 0.2)
        idle1, ridle1 = tx.cpu(), rx.cpu()
        idle_s = LEAD_S - 0.7
        a = LEAD_S + SETTLE_S
        _sleep_until(t0_mono + a)
        c0, r0 = tx.cpu(), rx.cpu()
        _sleep_until(t0_mono + a + seconds)
        c1, r1 = tx.cpu(), rx.cpu()
    finally:
        tx.stop()
    sent = _sent_in(d / tag / "trace.csv", a, a + seconds)
    pkts = sent / max(1, scale.pkt_bytes - 14)  # padded datagrams (--pad)
    return {"send_idle": (idle1 - idle0) / idle_s, "recv_idle": (ridle1 - ridle0) / idle_s,
            "send_cpu": c1 - c0, "recv_cpu": r1 - r0, "pkts": pkts,
            "flow_s": len(sched) * seconds}


def _children_cpu() -> float:
    """CPU seconds of this process's children that have ended (and been waited for)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def rate_change_us(flows: int = 20, rounds: int = 20, batch_tc: bool = True) -> float:
    """CPU µs of one HTB rate change (the pacer's thread, the caller and the pacer's
    ``tc -batch`` child, counted when it ends at ``close``), on the sender side of
    :func:`netns_pair`; changes to different classes are not coalesced."""
    from p4cc.hostcc.pacing import HtbPacer, PacerConfig

    pacer = HtbPacer(PacerConfig(dev=DEV_SEND, netns=NS_SEND, link_rate_bps=10e6,
                                 batch_tc=batch_tc)).start()
    closed = False
    try:
        ports = [40000 + i for i in range(flows)]
        for p in ports:
            pacer.add_flow(p, 5e6)
        c0, k0 = time.process_time(), _children_cpu()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        for k in range(rounds):
            want = pacer.stats.applied + pacer.stats.errors + flows
            for p in ports:
                pacer.set_rate(p, 2e6 + 1e4 * (k % 7) + p)
            while pacer.stats.applied + pacer.stats.errors < want:
                if time.monotonic() > deadline:
                    raise P4ccError("the HTB pacer did not apply the rate changes")
                time.sleep(0.001)  # poll interval of the applied-count condition
        c1 = time.process_time()
        pacer.close()  # (the tc child finishes its changes and ends)
        closed = True
        return (c1 - c0 + _children_cpu() - k0) / (flows * rounds) * 1e6
    finally:
        if not closed:
            pacer.close()


def host_costs(ccs: Sequence[str], seconds: float = 3.0, scale_name: str = "testbed"
               ) -> dict[str, Any]:
    """Idle CPU-s/s of a sender and a receiver process, the receiver's µs per packet,
    per CC the sender's µs per data packet and CPU-s/s per active flow, and the sender's
    and receiver's µs per flow (with the first CC; module doc)."""
    out: dict[str, Any] = {"send_us_per_pkt": {}, "send_cpu_per_flow": {}}
    idles_s: list[float] = []
    idles_r: list[float] = []
    rx_us: list[float] = []
    per_pkt_of: dict[str, float] = {}
    if not ccs:
        raise P4ccError("host_costs needs at least one host CC")
    with netns_pair(), tempfile.TemporaryDirectory(prefix="p4cc-cal-") as tmp:
        d = Path(tmp)
        rx = _Proc(NS_RECV, d, "recv", ["host", "run", "--recv-out", str(d / "recv"),
                                       "--scale", scale_name])
        try:
            rx.wait_ready()
            write_go(rx.go, time.time())
            for cc in ccs:
                one = _one(d, rx, cc, 1, seconds, scale_name)
                many = _one(d, rx, cc, MANY_FLOWS, seconds, scale_name)
                for m in (one, many):
                    idles_s.append(m["send_idle"])
                    idles_r.append(m["recv_idle"])
                # net CPU = pkts x per_pkt + flow_s x per_flow, two equations
                n1 = one["send_cpu"] - one["send_idle"] * seconds
                n_many = many["send_cpu"] - many["send_idle"] * seconds
                per_pkt = n1 / max(one["pkts"], 1.0)
                per_flow = max(0.0, (n_many - per_pkt * many["pkts"])
                               / (many["flow_s"] - one["flow_s"]))
                per_pkt = max(0.0, (n1 - per_flow * one["flow_s"]) / max(one["pkts"], 1.0))
                per_pkt_of[cc] = per_pkt
                out["send_us_per_pkt"][cc] = round(per_pkt * 1e6, 1)
                out["send_cpu_per_flow"][cc] = round(per_flow, 4)
                for m in (one, many):
                    if m["pkts"] > 0:
                        rx_us.append((m["recv_cpu"] - m["recv_idle"] * seconds) / m["pkts"])
            # per flow: with the first CC's sender (dcqcn by default)
            short = _short(d, rx, ccs[0], seconds, scale_name)
            recv_pkt = max(0.0, sorted(rx_us)[len(rx_us) // 2]) if rx_us else 0.0
            out.update(per_flow_us(short, seconds, per_pkt_of[ccs[0]], recv_pkt))
        finally:
            rx.stop()
        out["rate_change_us"] = round(rate_change_us(), 1)
    med = sorted
    out["send_idle_cpu"] = round(med(idles_s)[len(idles_s) // 2], 4)
    out["recv_idle_cpu"] = round(med(idles_r)[len(idles_r) // 2], 4)
    out["recv_us_per_pkt"] = round(recv_pkt * 1e6, 1)
    return out


def per_flow_us(short: dict[str, float], seconds: float, send_pkt_s: float,
                recv_pkt_s: float) -> dict[str, float]:
    """The sender's and the receiver's µs per flow from the short-flow window: its CPU
    beyond idle and beyond its packets (at the long flows' cost per packet), per flow
    started in the window; never below 0."""
    flows = max(short.get("flows", 0.0), 1.0)
    send = short["send_cpu"] - short["send_idle"] * seconds - short["pkts"] * send_pkt_s
    recv = short["recv_cpu"] - short["recv_idle"] * seconds - short["pkts"] * recv_pkt_s
    return {"send_us_per_flow": round(max(0.0, send) / flows * 1e6, 1),
            "recv_us_per_flow": round(max(0.0, recv) / flows * 1e6, 1)}


if __name__ == "__main__":  # scratch use: python -m p4cc.bench.calibrate_hosts dcqcn,rlcc
    print(json.dumps(host_costs(sys.argv[1].split(",") if len(sys.argv) > 1 else ["dcqcn"]),
                     indent=1))
    os._exit(0)
