"""What a spec's schedule asks of the bmv2 backend's machine (p4cc.experiment.bmv2.budget).

From the schedule alone (before anything runs): the data packets each host sends and
each switch forwards (each flow capped at what its hosts' links carry), how many host
processes run (a sender per host with flows leaving it, a receiver per host with flows
arriving: p4cc.experiment.bmv2.launch), how many flows are active on average (a fluid
processor-sharing estimate: RL-CC hosts pay per active flow, not per packet), and the
reverse-path packets (CNPs, ACKs, probes) that cross the switches too.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from p4cc.hostcc.rlcc_rule import decision_interval_s
from p4cc.hostcc.wire import frame_payload_bytes
from p4cc.topo.spec import TopoSpec

#: CNPs per data packet sent while the flow shares its destination's link (a standing
#: queue): the receivers' CNP share in the recorded session-7 N -> 1 BMv2 runs under
#: SECN1 (24 runs, every packet shared: median 0.44, 0.30-0.75).  A flow draws a CNP per
#: marked packet, at most one per CNP interval (1 ms at testbed scale).
CNP_SHARE = 0.45
#: DCQCN hosts ask an ACK every 16 data packets (hostcc SenderConfig.ack_every)
DCQCN_ACKS_PER_PKT = 1 / 16
#: RL-CC asks an ACK every 2 decision intervals (hostcc.cc.ACK_INTERVALS_PER_DECISION)
RLCC_ACK_INTERVALS = 2.0


@dataclass(frozen=True)
class Demand:
    """A spec's demand, per second of run time (``cpu`` prices it: budget.py)."""

    switch_pps: dict[str, float]  # packets each switch forwards (data + reverse path)
    host_pps: dict[str, float]  # data packets each host sends + receives
    polls_per_s: float
    cc: str = "dcqcn"  # the hosts' CC (host_cc)
    send_procs: int = 0  # host processes that send (one per source host)
    recv_procs: int = 0  # host processes that receive (one per destination host)
    data_pps: float = 0.0  # data packets sent by all hosts
    active_flows: float = 0.0  # flows active at once, on average (fluid estimate)
    cnp_pps: float = 0.0  # CNPs the senders receive
    reverse_pps: float = 0.0  # CNPs + ACKs + probes (each crosses the switches too)
    switches: tuple[str, ...] = field(default=())
    #: packets carrying INT each switch forwards (watched flows' data and probes)
    int_pps: dict[str, float] = field(default_factory=dict)
    report_pps: float = 0.0  # of those, reported by their sink (clone + PacketIn)
    #: flows sharing each receiver's link, on average while it receives (fluid estimate;
    #: time-weighted: a flow counts for as long as it is active)
    sharing: dict[str, float] = field(default_factory=dict)
    #: flows that start when another completes (``after``: closed-loop storage and
    #: query/response chains), whose concurrency is the workload's io_depth, not its load
    chained_flows: int = 0
    #: flows started per second of run time (each costs its sender and receiver a start
    #: and a completion beyond its packets: Calibration.host_*_us_per_flow)
    flows_per_s: float = 0.0

    def cpu(self, cal: Any) -> float:
        """CPU-seconds per second of run time under ``cal`` (a budget.Calibration)."""
        return float(sum(cal.terms(self).values()))


def switch_path(topo: TopoSpec, src: str, dst: str) -> list[str]:
    """Switches on one shortest path from host src to host dst (BFS; ECMP picks one of
    equal length, which does not change the total)."""
    a, b = topo.host(src).switch, topo.host(dst).switch
    prev: dict[str, str | None] = {a: None}
    todo = deque([a])
    while todo:
        sw = todo.popleft()
        if sw == b:
            break
        for _p, peer, _pp, _l in topo.switch_links(sw):
            if not topo.is_host(peer) and peer not in prev:
                prev[peer] = sw
                todo.append(peer)
    path: list[str] = []
    cur: str | None = b
    while cur is not None:
        path.append(cur)
        cur = prev.get(cur)
    return path[::-1]


@dataclass
class _Flow:
    start_s: float
    pkts: float
    src: str
    dst: str
    after: int = -1  # index of the flow this one waits for (-1: none)
    stop_s: float = math.inf  # not started if released later
    active_s: float = 0.0  # out: seconds active before the run's end
    sent: float = 0.0  # out: packets sent before the run's end
    shared: float = 0.0  # out: of those, sent while sharing the destination's link


def fluid(flows: list[_Flow], cap: dict[str, float], duration_s: float) -> dict[str, float]:
    """Fill in each flow's active seconds and packets before ``duration_s``; return,
    per destination, the flows sharing its link on average while it receives.  A fluid
    model where each active flow gets min(its source's, its destination's link
    packets/s divided by the flows sharing it); a flow with ``after`` starts when that
    flow completes (closed-loop storage), one released after its ``stop_s`` is skipped.
    Packets sent while other flows share the destination's link meet a queue there and
    get marked (``shared``).  It ignores loss and CC dynamics; on the recorded runs it
    gave 0.7-0.95 of the measured flow-seconds (less where a run collapsed into
    retransmissions)."""
    waiting: dict[int, list[int]] = {}
    ready: list[tuple[float, int]] = []
    for i, f in enumerate(flows):
        if f.after >= 0:
            waiting.setdefault(f.after, []).append(i)
        else:
            heapq.heappush(ready, (f.start_s, i))
    left = [f.pkts for f in flows]
    n_src: dict[str, int] = {}
    n_dst: dict[str, int] = {}
    active: list[int] = []
    busy_s: dict[str, float] = {}  # per destination: seconds with >= 1 flow toward it
    flow_s: dict[str, float] = {}  # ... and flow-seconds
    t = 0.0

    def release(i: int, now: float) -> None:
        for j in waiting.pop(i, []):
            heapq.heappush(ready, (max(flows[j].start_s, now), j))

    while t < duration_s and (ready or active):
        if not active:
            t = max(t, ready[0][0])
        while ready and ready[0][0] <= t and t < duration_s:
            _s, i = heapq.heappop(ready)
            if t > flows[i].stop_s or left[i] <= 0:
                release(i, t)  # skipped: what waits for it goes on
                continue
            active.append(i)
            n_src[flows[i].src] = n_src.get(flows[i].src, 0) + 1
            n_dst[flows[i].dst] = n_dst.get(flows[i].dst, 0) + 1
        if not active or t >= duration_s:
            continue
        rate = [min(cap[flows[i].src] / n_src[flows[i].src],
                    cap[flows[i].dst] / n_dst[flows[i].dst]) for i in active]
        nxt = ready[0][0] if ready else math.inf
        dt = min(min(left[i] / r for i, r in zip(active, rate, strict=True)), nxt - t,
                 duration_s - t)
        still = []
        sharing = [n_dst[flows[i].dst] > 1 for i in active]  # before any completes
        for dst, n in n_dst.items():
            if n > 0:
                busy_s[dst] = busy_s.get(dst, 0.0) + dt
                flow_s[dst] = flow_s.get(dst, 0.0) + n * dt
        for i, r, shares in zip(active, rate, sharing, strict=True):
            f = flows[i]
            left[i] -= r * dt
            f.active_s += dt
            f.sent += r * dt
            if shares:
                f.shared += r * dt
            if left[i] > 1e-9:
                still.append(i)
            else:
                n_src[f.src] -= 1
                n_dst[f.dst] -= 1
                release(i, t + dt)
        t += dt
        active = still
    return {d: flow_s[d] / b for d, b in busy_s.items() if b > 0}


def _flows(topo: TopoSpec, schedule: pd.DataFrame, duration_s: float) -> list[_Flow]:
    """The schedule's flows (packets: data packets of a sized flow, or what a bulk flow's
    link carries until its stop)."""
    scale = topo.scale
    payload = frame_payload_bytes(scale.pkt_bytes)
    rows = schedule.to_dict("records")
    index = {int(r["flow_id"]): i for i, r in enumerate(rows)} if "flow_id" in schedule \
        else {}
    out = []
    for r in rows:
        start = float(r["start_s"])
        stop = float(r.get("stop_s", math.nan))
        stop = math.inf if math.isnan(stop) else stop
        if r["cls"] == "bulk":
            pkts = scale.pps(topo.link_at(str(r["src"]), 0).rate_bps) * \
                max(0.0, min(stop, duration_s) - start)
        else:
            pkts = float(math.ceil(int(r["size_bytes"]) / payload))
        after = int(r.get("after", -1))
        out.append(_Flow(start, pkts, str(r["src"]), str(r["dst"]),
                         index.get(after, -1) if after >= 0 else -1, stop))
    return out


#: RTT probe interval per flow when the caller does not give the backend's
#: (p4cc.experiment.bmv2.limits.probe_interval_s): the hostcc default, 4 base RTTs
DEFAULT_PROBE_RTTS = 4.0


def demand(topo: TopoSpec, schedule: pd.DataFrame, duration_s: float, interval_s: float,
           host_cc: str = "dcqcn", probe_s: float | None = None,
           int_watch: Mapping[str, bool] | None = None) -> Demand:
    """What the spec asks (module doc); ``probe_s``: the hosts' RTT probe interval per
    flow (the backend's limits.probe_interval_s; default 4 base RTTs); ``int_watch``:
    source hosts whose sized flows carry INT -> with reports (the backend's
    int_watch.watch_plan): their data packets and probes carry INT through every switch
    of their path, and a reported one is cloned to the controller at the last."""
    scale = topo.scale
    dur = max(duration_s, 1e-9)
    flows = _flows(topo, schedule, duration_s)
    nic = {h.name: scale.pps(topo.link_at(h.name, 0).rate_bps) for h in topo.hosts}
    sharing = fluid(flows, nic, duration_s)  # no host sends or receives beyond its link
    flows_all = flows  # in schedule order (which rows are sized flows)
    flows = [f for f in flows if f.active_s > 0]
    rlcc = host_cc.partition(":")[0] == "rlcc"
    probe = probe_s if probe_s else DEFAULT_PROBE_RTTS * scale.base_rtt_s
    # reverse packets per data packet and per second of an active flow
    acks_per_pkt = 0.0 if rlcc else DCQCN_ACKS_PER_PKT
    per_flow_s = 1.0 / probe + (
        1.0 / (RLCC_ACK_INTERVALS * decision_interval_s(scale)) if rlcc else 0.0)
    sw: dict[str, float] = {s.name: 0.0 for s in topo.switches}
    host: dict[str, float] = dict.fromkeys(nic, 0.0)
    int_sw: dict[str, float] = {}
    watch = dict(int_watch or {})
    data = rev = cnp = reports = 0.0
    sized = [str(c) != "bulk" for c in schedule["cls"]]  # _flows' order
    for f, is_sized in zip(flows_all, sized, strict=True):
        if f.active_s <= 0:
            continue
        pps = f.sent / dur
        cnps = CNP_SHARE * f.shared / dur
        back = pps * acks_per_pkt + cnps + f.active_s / dur * per_flow_s
        # INT rides the flow's data packets and its probes (UDP to 4791), not the reverse
        int_pps = pps + f.active_s / dur / probe if is_sized and f.src in watch else 0.0
        for s in switch_path(topo, f.src, f.dst):
            sw[s] += pps + back
            if int_pps:
                int_sw[s] = int_sw.get(s, 0.0) + int_pps
        if int_pps and watch[f.src]:
            reports += int_pps
        host[f.src] += pps
        host[f.dst] += pps
        data += pps
        rev += back
        cnp += cnps
    return Demand(sw, host, len(topo.switches) / interval_s, cc=host_cc,
                  send_procs=len({f.src for f in flows}),
                  recv_procs=len({f.dst for f in flows}), data_pps=data,
                  active_flows=sum(f.active_s for f in flows) / dur, cnp_pps=cnp,
                  reverse_pps=rev, switches=tuple(s.name for s in topo.switches),
                  int_pps=int_sw, report_pps=reports, sharing=sharing,
                  chained_flows=sum(f.after >= 0 for f in flows_all),
                  flows_per_s=len(flows) / dur)
