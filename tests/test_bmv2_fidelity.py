"""The fidelity verdict of BMv2 runs on synthetic records, and how reports show it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
from replay_backend import ReplayBackend

from p4cc.analysis.report import report
from p4cc.experiment.bmv2 import fidelity as fid
from p4cc.experiment.runner import run_spec
from p4cc.experiment.spec import parse_spec

PKT = 1000
RATE = 10e6  # 1250 pps of 1000-B packets
FACTS = fid.RunFacts({("s1", 1): RATE, ("s1", 2): RATE}, PKT, 0.25, {"h1": RATE, "h2": RATE})


def _tele(n: int = 40, pps: float = 1250.0, pkt: int = PKT, depth_pkts: float = 30,
          port: int = 1, iv: float = 0.25) -> pd.DataFrame:
    return pd.DataFrame([{"switch": "s1", "port": port, "t_s": (i + 1) * iv, "interval_s": iv,
                          "qlen_avg_bytes": depth_pkts * PKT, "tx_pkts": round(pps * iv),
                          "tx_bps": pps * pkt * 8.0, "drops_pkts": 0} for i in range(n)])


def _empty() -> pd.DataFrame:
    return pd.DataFrame()


def _judge(tele: pd.DataFrame | None = None, cpu: pd.DataFrame | None = None,
           polls: pd.DataFrame | None = None, traces: pd.DataFrame | None = None
           ) -> fid.Verdict:
    return fid.evaluate(FACTS, _empty() if tele is None else tele,
                        _empty() if cpu is None else cpu, _empty() if polls is None else polls,
                        _empty() if traces is None else traces)


def test_busy_port_at_its_rate_is_faithful() -> None:
    v = _judge(_tele(pps=1220))  # 2.4 % below nominal: inside the 10 % tolerance
    assert v.faithful, v.summary()
    assert v.checks["port_rate"]["checked"] == 40 and v.checks["byte_rate"]["violations"] == 0


def test_slow_port_with_standing_queue_is_unfaithful() -> None:
    v = _judge(_tele(pps=1000))  # the switch fell behind: 20 % below its queue rate
    assert not v.faithful
    assert v.checks["port_rate"]["violations"] == 40
    row = v.violations[v.violations["check"] == "port_rate"].iloc[0]
    assert row["where"] == "s1:1" and "1000 pps of the configured 1250" in row["reason"]



def test_served_rate_over_the_counters_interval() -> None:
    """At its rate (1250 pps) a port sent 312 packets between two counter reads 0.25 s
    apart, but the polls' interval came out 0.21 s (the previous poll's reads took 40 ms
    longer): over the interval that reads 1486 pps, "more than the port can send"."""
    tele = _tele(pps=1250).assign(interval_s=0.21)
    assert _judge(tele).checks["port_rate"]["violations"] == 40
    assert _judge(tele.assign(counter_interval_s=0.25)).checks["port_rate"]["violations"] == 0

def test_idle_port_is_not_judged() -> None:
    v = _judge(_tele(pps=100, depth_pkts=0.5))  # no standing queue: nothing to check
    assert v.faithful and v.checks["port_rate"]["checked"] == 0


def test_large_packets_are_caught_by_the_byte_rate() -> None:
    # iperf3's 1448-B datagrams: the port serves its 1250 pps, i.e. 14.9 Mb/s on 10 Mb/s
    v = _judge(_tele(pps=1250, pkt=1490))
    assert v.checks["port_rate"]["violations"] == 0
    assert v.checks["byte_rate"]["violations"] == 40 and not v.faithful
    reason = v.violations.iloc[0]["reason"]
    assert "14.90 Mb/s on a 10 Mb/s link: mean packet 149" in reason
    assert "the rate assumes 1000 B" in reason and "(+49." in reason


def test_small_packets_count_by_the_link_time_they_took() -> None:
    """ACKs and CNPs (mean packet 541 B) are 46 % short of the slot the queue serves them
    in.  A port serving them at its packet rate lost 46 % of its byte rate: caught.  A
    port that served 4 of them in 0.5 s after a queue had drained (a CHAMELEON tuning
    run, session 9: depth 8.7 packets at enqueue) lost 4 x 0.46 slots of 156: not."""
    busy = _judge(_tele(pps=1250, pkt=541))
    assert busy.checks["byte_rate"]["violations"] == 40 and not busy.faithful
    quiet = _judge(_tele(pps=8, pkt=541, depth_pkts=8.7, iv=0.5))
    assert quiet.checks["byte_rate"]["checked"] == 40
    assert quiet.checks["byte_rate"]["violations"] == 0
    half = _judge(_tele(pps=625, pkt=700))  # half busy, 30 % short: 15 % of the link
    assert half.checks["byte_rate"]["violations"] == 40


def test_one_glitch_is_tolerated_a_pattern_is_not() -> None:
    ok = _tele(n=100)
    ok.loc[50, "tx_pkts"] = 200
    assert _judge(ok).faithful  # 1 of 100 intervals <= allowed 2 %
    bad = ok.copy()
    bad.loc[10:20, "tx_pkts"] = 200
    assert not _judge(bad).faithful


def _cpu(wait_per_s: float, rx_extra_per_s: float = 0.0, n: int = 41) -> pd.DataFrame:
    return pd.DataFrame([{"t_s": i * 0.25, "switch": "s1", "pid": 1, "cpu_s": 0.3 * i * 0.25,
                          "wait_s": wait_per_s * i * 0.25,
                          "rx_pkts": (1250 + rx_extra_per_s) * i * 0.25} for i in range(n)])


def test_starved_switch_is_unfaithful() -> None:
    tele = _tele(depth_pkts=0)  # sent 1250 pps, nothing queued
    # 0.6 s/s of run-queue wait over 1250 pps: 0.48 ms per packet < 0.8 ms packet time
    assert _judge(tele, cpu=_cpu(0.6)).faithful
    v = _judge(tele, cpu=_cpu(2.0))  # 1.6 ms per packet: two packet times
    assert not v.faithful and v.checks["switch_cpu"]["violations"] == 40
    assert "waited 1.60 ms for a CPU per packet (2.00 s/s" in v.violations.iloc[0]["reason"]
    assert _judge(tele, cpu=_cpu(2.0).assign(rx_pkts=0)).checks["switch_cpu"]["checked"] == 0


def test_ingress_backlog_is_unfaithful() -> None:
    tele = _tele(depth_pkts=0)
    assert _judge(tele, cpu=_cpu(0.0)).checks["switch_backlog"]["violations"] == 0
    # the kernel hands the switch 400 pps more than it ever processes: backlog grows
    v = _judge(tele, cpu=_cpu(0.0, rx_extra_per_s=400))
    assert v.checks["switch_backlog"]["violations"] > 20 and not v.faithful


def test_control_packets_do_not_count_as_backlog_when_the_kernel_tx_is_sampled() -> None:
    """Control packets (ACK, CNP) are accounted at P4 index 0, not in a port's telemetry;
    the kernel's tx counter on the switch's interfaces shows the switch sent them."""
    tele = _tele(depth_pkts=0)  # data: 1250 pps in and out
    ctl = 400.0  # and 400 pps of control packets in and out, invisible to the telemetry
    cpu = _cpu(0.0, rx_extra_per_s=ctl)
    sent = cpu.assign(tx_pkts=(1250 + ctl) * cpu["t_s"])
    assert _judge(tele, cpu=sent).checks["switch_backlog"]["violations"] == 0
    # the switch really kept 200 pps of them: a backlog, caught from the kernel counters
    kept = cpu.assign(tx_pkts=(1250 + ctl - 200) * cpu["t_s"])
    assert _judge(tele, cpu=kept).checks["switch_backlog"]["violations"] > 20
    # without tx_pkts (runs sampled before it existed) the telemetry's tx is used
    assert _judge(tele, cpu=cpu).checks["switch_backlog"]["violations"] > 20


def _traces(sent_bps: float, asked_bps: float, flows: int = 2, secs: int = 6) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for f in range(1, flows + 1):
        for k in range(secs * 100 + 1):
            t = k * 0.01
            rows.append({"t_s": t, "host": "h1", "flow_id": f, "rate_bps": asked_bps,
                         "bytes_sent": sent_bps / 8.0 * t})
    return pd.DataFrame(rows)


def test_hosts_that_send_what_cc_asks_are_faithful() -> None:
    assert _judge(traces=_traces(4e6, 4e6)).faithful
    # two flows asking 8 Mb/s each on a 10 Mb/s NIC: 5 Mb/s each is what HTB can give
    assert _judge(traces=_traces(4.8e6, 8e6)).faithful


def test_hosts_that_fall_behind_are_unfaithful() -> None:
    v = _judge(traces=_traces(1e6, 4e6))
    assert not v.faithful and v.checks["host_rate"]["violations"] >= 4
    assert "sent 2.00 Mb/s of the 8.00 Mb/s" in v.violations.iloc[0]["reason"]


def test_a_window_may_hold_one_packet_less_per_flow() -> None:
    """Two flows held at 20 kb/s each (2.5 packets per 1-s window) that send one packet
    a second: packets are whole, not a host falling behind (without the packet's slack,
    16 of 40 kb/s is below the 70 % bar); at 30 kb/s, or at 1 Mb/s each, sending a
    third or half is still caught."""
    slow = _judge(traces=_traces(PKT * 8.0, 20e3))  # 1 packet/s per flow, asked 2.5
    assert slow.checks["host_rate"]["checked"] >= 4
    assert slow.checks["host_rate"]["violations"] == 0
    assert _judge(traces=_traces(PKT * 8.0, 30e3)).checks["host_rate"]["violations"] >= 4
    assert _judge(traces=_traces(0.5e6, 1e6)).checks["host_rate"]["violations"] >= 4


def test_new_flows_sharing_the_nic_are_not_a_host_falling_behind() -> None:
    """Two long flows ask 8 Mb/s each on a 10 Mb/s NIC; every second three short flows
    start every second and take most of the NIC.  The long ones send 1.5 Mb/s each: what
    the NIC had left for them, not a host that fell behind.  (Seen on BMv2: "2 flows sent
    2.97 Mb/s of the 5.00 Mb/s their CC asked" while three new flows sent 1.9 Mb/s.)"""
    long = _traces(1.5e6, 8e6)
    rows: list[dict[str, Any]] = []
    for start in range(0, 6):
        for j in range(3):  # each short flow lives [start + 0.1, start + 0.9], 2.3 Mb/s
            fid_ = 100 + 10 * start + j
            for k in range(10, 91):
                rows.append({"t_s": start + k * 0.01, "host": "h1", "flow_id": fid_,
                             "rate_bps": 8e6, "bytes_sent": 2.3e6 / 8.0 * (k - 10) * 0.01 / 0.8})
    shared = pd.concat([long, pd.DataFrame(rows)], ignore_index=True)
    assert _judge(traces=shared).checks["host_rate"]["violations"] == 0
    # the same long flows without anyone else on the NIC did fall behind
    assert _judge(traces=long).checks["host_rate"]["violations"] >= 4


def _cut_then_shared(slow: float = 1.0, secs: int = 6) -> pd.DataFrame:
    """Per second on a 10 Mb/s NIC: flow 1 alone for half a second, cut by CNPs to ask
    2 Mb/s; then it asks 8 Mb/s while two new flows start and the three share the NIC
    (3.33 Mb/s each).  Flow 1 sends ``slow`` × that.  (Seen on BMv2, seed 5 of the
    default experiment: "1 flows sent 2.12 Mb/s of the 3.17 Mb/s their CC asked".)"""
    rows: list[dict[str, Any]] = []
    sent = 0.0
    for k in range(secs * 100 + 1):
        t = k * 0.01
        second_half = (t % 1.0) >= 0.5
        rows.append({"t_s": t, "host": "h1", "flow_id": 1,
                     "rate_bps": 8e6 if second_half else 2e6, "bytes_sent": sent})
        sent += slow * (10e6 / 3 if second_half else 2e6) / 8.0 * 0.01
    for start in range(secs):
        for j in (2, 3):
            fid_ = 100 * start + j
            for k in range(50, 100):
                rows.append({"t_s": start + k * 0.01, "host": "h1", "flow_id": fid_,
                             "rate_bps": 8e6, "bytes_sent": 10e6 / 3 / 8.0 * (k - 50) * 0.01})
    return pd.DataFrame(rows).sort_values("t_s", kind="stable", ignore_index=True)


def test_room_on_the_nic_is_judged_when_the_flow_asked_for_it() -> None:
    """Flow 1 sends all it could (2 Mb/s alone, its third of the NIC once shared): 2.67
    Mb/s of a window in which it asked 5 Mb/s on average and the other flows left 6.7
    Mb/s on average.  Capping the window's mean ask at the window's mean room (the check
    until session 15) flags every window; per slice nothing is missing.  A host that
    sends half of that in each part of the window is still flagged."""
    assert _judge(traces=_cut_then_shared()).checks["host_rate"]["violations"] == 0
    v = _judge(traces=_cut_then_shared(slow=0.5))
    assert v.checks["host_rate"]["violations"] >= 4
    assert "sent 1.33 Mb/s of the 2.7" in v.violations.iloc[0]["reason"]  # (2.67 + edges)


def _polls(late_s: float, span_s: float, n: int = 50) -> pd.DataFrame:
    return pd.DataFrame([{"switch": "s1", "deadline_s": 0.25 * i, "start_s": 0.25 * i + late_s,
                          "end_s": 0.25 * i + late_s + span_s + 0.002, "read_span_s": span_s}
                         for i in range(1, n + 1)])


def test_late_or_spread_polls_are_unfaithful() -> None:
    assert _judge(polls=_polls(0.01, 0.01)).faithful
    late = _judge(polls=_polls(0.2, 0.01))
    assert not late.faithful and "after its deadline" in late.violations.iloc[0]["reason"]
    spread = _judge(polls=_polls(0.0, 0.15))
    assert not spread.faithful and "150 ms apart" in spread.violations.iloc[0]["reason"]


def test_verdict_files(tmp_path: Path) -> None:
    v = _judge(_tele(pps=900))
    v.write(tmp_path)
    data = json.loads((tmp_path / "fidelity.json").read_text())
    assert data["faithful"] is False and data["checks"]["port_rate"]["ok"] is False
    assert data["checks"]["byte_rate"]["violations"] == 0
    assert data["tolerances"]["port_rate"] == 0.10
    assert len(pd.read_csv(tmp_path / "fidelity.csv")) == 40  # pps (the mix is right)


def test_report_flags_unfaithful_runs_first(tmp_path: Path) -> None:
    doc = {"name": "fr", "backend": "sim", "topology": "star,hosts=4", "scale": "testbed",
           "duration_s": 4, "interval_s": 0.5, "seed": 1, "agents": ["secn1", "secn2"],
           "workloads": [{"type": "fbhdp", "load": 0.3, "size_scale": "bdp"}]}
    paths = run_spec(parse_spec(doc), ReplayBackend(), out=tmp_path / "fr",
                     progress=lambda label, d: (lambda t: None))
    _judge(_tele()).write(paths[0])
    _judge(_tele(pps=900)).write(paths[1])
    text = report([tmp_path / "fr"], out=tmp_path / "rep").read_text()
    first_section = text.split("\n## ")[1]
    assert first_section.startswith("Fidelity")
    assert "`secn1`: **faithful**" in text and "`secn2`: **UNFAITHFUL: port_rate" in text
    summary = text.split("## Summary")[1]
    assert "secn2 (UNFAITHFUL)" in summary and "secn1 (UNFAITHFUL)" not in summary


def _bursty(n: int = 40, pps: float = 500.0, depth_pkts: float = 25.0,
            wait_per_pkt_s: float = 1 / 1250) -> pd.DataFrame:
    """A port whose queue builds in bursts and drains within each interval: it sends
    less than its packet rate, and its packets wait ``wait_per_pkt_s`` per packet ahead."""
    t = _tele(n=n, pps=pps, depth_pkts=depth_pkts)
    t["sojourn_avg_s"] = (depth_pkts + 1) * wait_per_pkt_s  # + the packet in service
    return t


def test_bursty_port_dequeuing_at_its_rate_is_faithful() -> None:
    # 500 of 1250 pps with a mean enqueue depth of 25: the queue drained between
    # bursts; each packet waited ~0.8 ms (one packet time) per packet ahead of it
    v = _judge(_bursty(wait_per_pkt_s=1.03 / 1250))
    assert v.faithful, v.summary()
    assert v.checks["port_rate"]["checked"] == 40


def test_port_dequeuing_slower_than_its_rate_is_unfaithful() -> None:
    v = _judge(_bursty(wait_per_pkt_s=1.25 / 1250))  # 1 ms per packet: 1000 pps
    assert not v.faithful and v.checks["port_rate"]["violations"] == 40
    reason = v.violations[v.violations["check"] == "port_rate"].iloc[0]["reason"]
    assert "dequeued at 1000 pps of the configured 1250 (-20.0 %)" in reason


def test_port_serving_more_than_its_rate_is_unfaithful() -> None:
    v = _judge(_bursty(pps=1500))  # +20 %: the interval's reads were far apart
    assert v.checks["port_rate"]["violations"] == 40
    assert "more than the port can send" in v.violations.iloc[0]["reason"]


def test_a_short_queue_counts_the_packet_in_service() -> None:
    # 8 packets queued + the one being sent: 9 slots of 0.8 ms, 5 % late in all -- the
    # switch kept up (8 slots alone would read 18 % slow)
    t = _tele(pps=200, depth_pkts=8)
    t["sojourn_avg_s"] = 9 * 1.05 / 1250
    assert _judge(t).faithful
    t["sojourn_avg_s"] = 9 * 1.2 / 1250
    assert not _judge(t).faithful


def test_one_glitch_is_tolerated_in_a_short_run_two_are_not() -> None:
    short = _tele(n=30)  # 2 % of 30 intervals is less than one
    short.loc[5, "tx_pkts"] = 200
    assert _judge(short).faithful
    short.loc[20, "tx_pkts"] = 200
    assert not _judge(short).faithful
