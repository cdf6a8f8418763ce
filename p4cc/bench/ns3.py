"""Optional ``p4cc bench sim`` cases: ns-3 (the ``ns3`` package on PyPI) on the incast
and on the 288-host leaf-spine (see :func:`ns3_leafspine` for that one).

The scenario mirrors the simulator's ``incast_8to1`` case: 8 senders and 1 receiver
on one switch, 25 Gb/s point-to-point links, 8 µs RTT (2 µs per link), 1000 B packets
(946 B of payload), a 1000-packet (1 MB) egress buffer marking ECN with the VENDOR
curve (Kmin 30 / Kmax 270 packets, Pmax 0.1, on the instantaneous queue: RED with
QW = 1, LInterm = 10, not gentle), 8 long flows for the same simulated time.  ns-3
mainline has no RoCE/DCQCN, so its senders run DCTCP (ECN-reacting TCP); the
congestion control differs, the fabric and the load do not.

ns-3 runs in a child process (its bindings JIT-compile C++ through cppyy at import,
~10 s, and keep global simulator state); the case reports both rates and their ratio
(the simulator's: the better of two runs).
Without the bindings it yields a record with ``skipped`` and the reason.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd


def _dctcp_red(min_th: int, max_th: int, l_interm: int) -> str:
    """Script lines shared by both scenarios: DCTCP senders with 946-B segments, RED
    marking ECN on the instantaneous queue (QW 1, not gentle) of a 1000-packet buffer,
    thresholds in packets, Pmax = 1/l_interm (ns-3's RedQueueDisc attributes)."""
    return f"""sd, S, V = ns.Config.SetDefault, ns.StringValue, ns.UintegerValue
sd("ns3::TcpL4Protocol::SocketType", S("ns3::TcpDctcp"))
sd("ns3::TcpSocket::SegmentSize", V(946))
sd("ns3::RedQueueDisc::UseEcn", ns.BooleanValue(True))
sd("ns3::RedQueueDisc::UseHardDrop", ns.BooleanValue(False))
sd("ns3::RedQueueDisc::Gentle", ns.BooleanValue(False))
sd("ns3::RedQueueDisc::MeanPktSize", V(1000))
sd("ns3::RedQueueDisc::MaxSize", ns.QueueSizeValue(ns.QueueSize("1000p")))
sd("ns3::RedQueueDisc::QW", ns.DoubleValue(1.0))
sd("ns3::RedQueueDisc::MinTh", ns.DoubleValue({min_th}))
sd("ns3::RedQueueDisc::MaxTh", ns.DoubleValue({max_th}))
sd("ns3::RedQueueDisc::LInterm", ns.DoubleValue({l_interm}))
"""


#: Child-process script: argv[1] = simulated seconds; prints one JSON line.
NS3_INCAST_SCRIPT = r"""
import json, sys, time
from ns import ns
sim_s = float(sys.argv[1])
""" + _dctcp_red(30, 270, 10) + r"""senders = ns.NodeContainer(); senders.Create(8)
sw = ns.NodeContainer(); sw.Create(1)
rx = ns.NodeContainer(); rx.Create(1)
p2p = ns.PointToPointHelper()
p2p.SetDeviceAttribute("DataRate", S("25Gbps"))
p2p.SetChannelAttribute("Delay", S("2us"))
stack = ns.InternetStackHelper()
for c in (senders, sw, rx):
    stack.Install(c)
tch = ns.TrafficControlHelper()
tch.SetRootQueueDisc("ns3::RedQueueDisc")
addr = ns.Ipv4AddressHelper()
for i in range(8):
    d = p2p.Install(senders.Get(i), sw.Get(0))
    tch.Install(d)
    addr.SetBase(ns.Ipv4Address(f"10.1.{i + 1}.0"), ns.Ipv4Mask("255.255.255.0"))
    addr.Assign(d)
d = p2p.Install(sw.Get(0), rx.Get(0))
tch.Install(d)
addr.SetBase(ns.Ipv4Address("10.2.1.0"), ns.Ipv4Mask("255.255.255.0"))
ifs = addr.Assign(d)
ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()
any_addr = ns.InetSocketAddress(ns.Ipv4Address.GetAny(), 5000).ConvertTo()
sapp = ns.PacketSinkHelper("ns3::TcpSocketFactory", any_addr).Install(rx.Get(0))
sapp.Start(ns.Seconds(0.0))
bulk = ns.BulkSendHelper("ns3::TcpSocketFactory",
                         ns.InetSocketAddress(ifs.GetAddress(1), 5000).ConvertTo())
bulk.SetAttribute("MaxBytes", V(0))
bulk.Install(senders).Start(ns.Seconds(0.0))
ns.Simulator.Stop(ns.Seconds(sim_s))
t = time.perf_counter()
ns.Simulator.Run()
wall = time.perf_counter() - t
got = ns.DynamicCast[ns.PacketSink](sapp.Get(0)).GetTotalRx()
ns.Simulator.Destroy()
print(json.dumps({"sim_s": sim_s, "wall_s": wall, "rx_bps": got * 8 / sim_s}))
"""


#: Child-process script: argv = simulated s, schedule CSV (start_s, src index, dst
#: index, size), leaves, hosts per leaf, spines; prints one JSON line.
NS3_LEAFSPINE_SCRIPT = r"""import csv, json, sys, time
from ns import ns
sim_s, path = float(sys.argv[1]), sys.argv[2]
leaves, per, spines = (int(x) for x in sys.argv[3:6])
""" + _dctcp_red(5, 200, 100) + r"""
sd("ns3::Ipv4GlobalRouting::RandomEcmpRouting", ns.BooleanValue(True))
t_setup = time.perf_counter()
hosts = ns.NodeContainer(); hosts.Create(leaves * per)
lv = ns.NodeContainer(); lv.Create(leaves)
sp = ns.NodeContainer(); sp.Create(spines)
stack = ns.InternetStackHelper()
for c in (hosts, lv, sp):
    stack.Install(c)
edge = ns.PointToPointHelper()
edge.SetDeviceAttribute("DataRate", S("25Gbps")); edge.SetChannelAttribute("Delay", S("1us"))
core = ns.PointToPointHelper()
core.SetDeviceAttribute("DataRate", S("100Gbps")); core.SetChannelAttribute("Delay", S("1us"))
tch = ns.TrafficControlHelper(); tch.SetRootQueueDisc("ns3::RedQueueDisc")
addr = ns.Ipv4AddressHelper()
hip = []
nets = iter(range(1 << 16))
def link(helper, a, b):
    d = helper.Install(a, b)
    tch.Install(d)
    n = next(nets)
    addr.SetBase(ns.Ipv4Address(f"10.{n // 250}.{n % 250}.0"), ns.Ipv4Mask("255.255.255.0"))
    return addr.Assign(d)
for l in range(leaves):
    for h in range(per):
        hip.append(link(edge, hosts.Get(l * per + h), lv.Get(l)).GetAddress(0))
    for s in range(spines):
        link(core, lv.Get(l), sp.Get(s))
ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()
flows = list(csv.reader(open(path)))
for i, (start, src, dst, size) in enumerate(flows):
    port = 10000 + i
    any_addr = ns.InetSocketAddress(ns.Ipv4Address.GetAny(), port).ConvertTo()
    sink = ns.PacketSinkHelper("ns3::TcpSocketFactory", any_addr)
    sink.Install(hosts.Get(int(dst))).Start(ns.Seconds(0.0))
    to = ns.InetSocketAddress(hip[int(dst)], port).ConvertTo()
    b = ns.BulkSendHelper("ns3::TcpSocketFactory", to)
    b.SetAttribute("MaxBytes", V(int(size)))
    b.Install(hosts.Get(int(src))).Start(ns.Seconds(float(start)))
setup = time.perf_counter() - t_setup
ns.Simulator.Stop(ns.Seconds(sim_s))
t = time.perf_counter()
ns.Simulator.Run()
wall = time.perf_counter() - t
ns.Simulator.Destroy()
print(json.dumps({"sim_s": sim_s, "wall_s": wall, "setup_s": setup, "flows": len(flows)}))
"""


def ns3_missing() -> str | None:
    """Why ns-3 cannot run here, or None if its Python bindings are importable."""
    if importlib.util.find_spec("ns") is None:
        return ("ns-3 Python bindings not installed (module 'ns'); install them with "
                "pip install 'p4cc[ns3]' (the ns3 wheel, CPython 3.8+ on x86-64 Linux)")
    return None


def _best_of_two(case: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The faster of two runs of the simulator's case (the machine may be shared)."""
    return max((case(), case()), key=lambda r: float(r["sim_s_per_wall_s"]))


def _run(script: str, args: list[str], timeout_s: float) -> tuple[dict[str, Any] | None, str]:
    """Run a child script; (its JSON result, "") or (None, why it failed)."""
    proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                          text=True, timeout=timeout_s, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"ns-3 run failed (exit {proc.returncode}): {tail}"
    res: dict[str, Any] = json.loads(lines[-1])
    return res, ""


def _compare(out: dict[str, Any], res: dict[str, Any], p4cc_record: dict[str, Any]
             ) -> dict[str, Any]:
    rate = res["sim_s"] / res["wall_s"]
    out.update({"sim_s_per_wall_s": rate, "wall_s": round(res["wall_s"], 3), "cc": "dctcp",
                "p4cc_case": p4cc_record["case"],
                "p4cc_sim_s_per_wall_s": p4cc_record["sim_s_per_wall_s"],
                "ratio_p4cc_over_ns3": p4cc_record["sim_s_per_wall_s"] / rate})
    return out


def ns3_leafspine(sim_s: float, schedule: pd.DataFrame, hosts: list[str],
                  shape: tuple[int, int, int], p4cc_case: Callable[[], dict[str, Any]],
                  timeout_s: float = 3600.0) -> dict[str, Any]:
    """ns-3 on a leaf-spine (``shape`` = leaves, hosts per leaf, spines; hosts in
    leaf order) playing ``schedule`` for ``sim_s``, compared with ``p4cc_case()``.

    Same fabric as the simulator's leaf-spine (25 Gb/s edge, 100 Gb/s core, 8 µs RTT,
    1000-packet buffers, SECN1 marking: RED 5/200 packets, 1 %), DCTCP senders, and
    ECMP per packet (ns-3's global routing has no per-flow hashing).
    """
    out: dict[str, Any] = {"case": "ns3_leafspine288_websearch60", "sim_s": sim_s}
    why = ns3_missing()
    if why is not None:
        out["skipped"] = why
        return out
    p4cc_record = _best_of_two(p4cc_case)
    index = {h: i for i, h in enumerate(hosts)}
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        for t0, src, dst, size in zip(schedule["start_s"].to_numpy(float),
                                      schedule["src"].astype(str), schedule["dst"].astype(str),
                                      schedule["size_bytes"].to_numpy(np.int64), strict=True):
            f.write(f"{float(t0)!r},{index[src]},{index[dst]},{int(size)}\n")
    try:
        res, err = _run(NS3_LEAFSPINE_SCRIPT, [repr(sim_s), f.name, *map(str, shape)],
                        timeout_s)
    finally:
        os.unlink(f.name)
    if res is None:
        out["skipped"] = err
        return out
    out["flows"] = res["flows"]
    return _compare(out, res, p4cc_record)


def ns3_incast(sim_s: float, p4cc_case: Callable[[], dict[str, Any]],
               timeout_s: float = 900.0) -> dict[str, Any]:
    """Run the ns-3 incast for ``sim_s`` and compare with the simulator's record
    (``p4cc_case()``, run first, only when ns-3 is there)."""
    out: dict[str, Any] = {"case": "ns3_incast_8to1", "sim_s": sim_s}
    why = ns3_missing()
    if why is not None:
        out["skipped"] = why
        return out
    p4cc_record = _best_of_two(p4cc_case)
    res, err = _run(NS3_INCAST_SCRIPT, [repr(sim_s)], timeout_s)
    if res is None:
        out["skipped"] = err
        return out
    out["rx_gbps"] = round(res["rx_bps"] / 1e9, 3)
    return _compare(out, res, p4cc_record)
