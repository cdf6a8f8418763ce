"""``p4cc host send``, ``p4cc host recv`` and ``p4cc host run`` (both in one process,
p4cc.hostcc.cli_run); usable by hand inside a Mininet host.

Each prints one JSON object per flow on stdout when it finishes and writes CSV records
under ``--out``.  SIGINT/SIGTERM stop them cleanly: records are written and the HTB
qdisc the sender created is removed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from p4cc.constants import ROCE_PORT
from p4cc.hostcc import api, tuning
from p4cc.hostcc.cli_config import (
    RTO_MAX_S,
    controllers,
    flow_specs,
    periods_arg,
    receiver_config,
    sender_config,
)
from p4cc.hostcc.cli_run import run as _run
from p4cc.hostcc.sender_config import SenderConfig
from p4cc.scale import get_scale


class _Stop(Exception):
    pass


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    raise _Stop(signal.Signals(signum).name)


def _install_signals() -> None:
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)


def _print(records: list[dict[str, Any]]) -> None:
    for r in records:
        print(json.dumps(r, default=str), flush=True)


def _send(args: argparse.Namespace) -> int:
    scale = get_scale(args.scale)
    specs = flow_specs(args)
    cfg = sender_config(args, scale)
    make = controllers(args, scale, specs)
    params = tuning.RuntimeParams(scale)
    _install_signals()
    tx = api.start_flows(specs, cfg, out_dir=args.out, make_ctl=params.wrap(make))
    rep = (tuning.start_reporter(args.monitor, args.monitor_id or f"send-{os.getpid()}",
                                 tuning.sender_sampler(tx), params, args.monitor_periods)
           if args.monitor else None)
    deadline = time.monotonic() + args.deadline
    status = 0
    try:
        while not tx.wait(0.2):
            if time.monotonic() > deadline:
                print(f"p4cc host send: deadline of {args.deadline} s passed", file=sys.stderr)
                status = 1
                break
    except _Stop as exc:
        print(f"p4cc host send: stopped by {exc}", file=sys.stderr)
        status = 130
    finally:
        tx.stop()
        if rep is not None:
            rep.stop()
    recs = tx.records()
    _print(recs)
    if status == 0 and not all(r["completed"] for r in recs):
        status = 1
    return status


def _recv(args: argparse.Namespace) -> int:
    scale = get_scale(args.scale)
    cfg = receiver_config(args, scale, args.port)
    cnp = cfg.cnp_interval_s
    _install_signals()
    rx = api.start_receiver(cfg, netns=args.netns)
    rep = (tuning.start_reporter(args.monitor, args.monitor_id or f"recv-{os.getpid()}",
                                 tuning.receiver_sampler(rx), tuning.RuntimeParams(scale, rx),
                                 args.monitor_periods) if args.monitor else None)
    print(json.dumps({"listening": rx.port, "cnp_interval_s": cnp}), flush=True)
    end = time.monotonic() + args.duration if args.duration else float("inf")
    status = 0
    try:
        while time.monotonic() < end:
            time.sleep(0.05)  # waiting for a signal or the duration, not for a condition
            if args.until_flows and sum(
                    r["complete_t"] is not None for r in rx.records()) >= args.until_flows:
                break
    except _Stop as exc:
        print(f"p4cc host recv: stopped by {exc}", file=sys.stderr)
    finally:
        if rep is not None:
            rep.stop()
        recs = api.stop_receiver(rx, args.out)
        if args.out:
            (Path(args.out) / "rx_counters.json").write_text(json.dumps(rx.counters()))
    _print(recs)
    return status


def register(subparsers: Any) -> None:
    host = subparsers.add_parser("host", help="userspace RoCEv2-style sender/receiver")
    sub = host.add_subparsers(dest="host_command", required=True, metavar="ROLE")

    p = sub.add_parser("send", help="send flows; prints one FCT record per flow")
    _send_options(p)
    p.add_argument("--netns", help="run inside this named network namespace")
    _monitor_options(p)
    p.set_defaults(func=_send)

    p = sub.add_parser("recv", help="receive flows; CNPs on CE, NAKs on gaps")
    p.add_argument("--port", type=int, default=ROCE_PORT,
                   help=f"UDP port (default {ROCE_PORT})")
    p.add_argument("--out", help="directory for rx_flows.csv")
    p.add_argument("--netns", help="run inside this named network namespace")
    p.add_argument("--scale", default="testbed", help="scale preset (p4cc.scale.SCALES)")
    _recv_options(p)
    _monitor_options(p)
    p.set_defaults(func=_recv)

    p = sub.add_parser(
        "run", help="one process for a host's receiver and sender (one event loop)",
        description="The receiver (unless --no-recv) and, with --dst/--size or --schedule, "
        "the sender of one host in one process and one thread.  Records: fct.csv and "
        "trace.csv under --out, rx_flows.csv and rx_counters.json under --recv-out "
        "(default --out); stdout: one JSON line per flow, with role send or recv.  Runs "
        "until SIGINT/SIGTERM, --duration or --until-flows; without a receiver, until the "
        "flows end.")
    _send_options(p)
    p.add_argument("--netns", help="run inside this named network namespace")
    p.add_argument("--listen-port", type=int, default=ROCE_PORT,
                   help=f"the receiver's UDP port (default {ROCE_PORT})")
    p.add_argument("--recv-out", help="directory for rx_flows.csv (default --out)")
    p.add_argument("--no-recv", action="store_true", help="no receiver (send only)")
    p.add_argument("--recv-thread", action="store_true",
                   help="serve the receiver from a thread of its own instead of the one "
                   "event loop (its replies do not wait for the sender's passes)")
    _recv_options(p)
    _monitor_options(p)
    p.set_defaults(func=_run)


def _send_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dst", help="receiver IPv4 address")
    p.add_argument("--size", type=int, help="bytes per flow")
    p.add_argument("--flows", type=int, default=1, help="number of flows (default 1)")
    p.add_argument("--stagger", type=float, default=0.0, help="seconds between flow starts")
    p.add_argument("--cc", default="dcqcn", help="dcqcn | rlcc | fixed:<bps>")
    p.add_argument("--dev", help="pace with HTB on this interface (needs root)")
    p.add_argument("--out", help="directory for fct.csv and trace.csv")
    p.add_argument("--port", type=int, default=ROCE_PORT, help="receiver UDP port")
    p.add_argument("--schedule", help="JSON file: list of {dst, size, start_s, cc[, ref, "
                   "after, stop_s]}; a row with after=R starts when the flow with ref R "
                   "completes")
    p.add_argument("--completions", help="file shared with the run's other senders: the "
                   "refs of completed flows (for rows with 'after' on other hosts)")
    p.add_argument("--scale", default="testbed", help="scale preset (p4cc.scale.SCALES)")
    p.add_argument("--line-rate", type=float, default=0.0, help="line rate b/s (scale's)")
    p.add_argument("--pkt-bytes", type=int, default=0,
                   help="IPv4 datagram size of data (default: the scale's pkt_bytes, the "
                        "frame on the wire, minus the 14-B Ethernet header)")
    p.add_argument("--nic-rate", type=float, default=0.0,
                   help="cap the sum of the flows at this host link rate, b/s (needs --dev)")
    p.add_argument("--sport-base", type=int, default=0, help="flow i uses this + i")
    p.add_argument("--probe-interval", type=float, default=0.0,
                   help="s (default 4 × the scale's RTT)")
    p.add_argument("--probe-quiet", type=float, default=None,
                   help="probe a flow only after this long (s) without an ACK RTT sample "
                        "(default: the probe interval; 0: probe every interval)")
    p.add_argument("--probe-max-pps", type=float, default=0.0,
                   help="cap of all this sender's probes, probes/s: with n flows each is "
                        "probed at most every n / cap s (default 0: no cap)")
    p.add_argument("--start-rt-prio", type=int, default=0,
                   help="SCHED_RR at this priority (1-99) while waiting for a flow's start "
                        "time, so the flow starts on time on a busy CPU (needs root; "
                        "default 0: off)")
    p.add_argument("--start-rt-lead", type=float, default=None,
                   help="s before a flow's start the boost of --start-rt-prio begins "
                        "(default: SenderConfig's)")
    p.add_argument("--no-chain-rt", dest="chain_rt", action="store_false",
                   help="with --start-rt-prio: no boost while a chained flow stands by for "
                        "its predecessor's completion (default: boosted)")
    p.add_argument("--pad", action="store_true",
                   help="pad every data packet to the full size, a flow's last one too "
                        "(the bmv2 backend does: BMv2 queues serve packets/s)")
    p.add_argument("--rto", type=float, default=0.0,
                   help="RTO floor s (default max(20 x the scale's RTT, a full buffer's "
                        "drain time + 1 RTT, 20 ms))")
    p.add_argument("--rto-max", type=float, default=0.0,
                   help=f"RTO cap s (default {RTO_MAX_S:g}); RTO = min(max(2 srtt, floor) "
                        "x 2^timeouts-in-a-row, cap)")
    p.add_argument("--rtt-window", type=int, default=1,
                   help="controller RTT = median of the last N probe RTTs (default 1: raw)")
    p.add_argument("--ack-interval", type=float, default=None,
                   help="s: also ask for an ACK (an RTT sample) this long after the last "
                        "AckReq (default: the controller's; RL-CC 2 x its decision "
                        "interval, DCQCN none; 0: off)")
    p.add_argument("--ack-every", type=int, default=SenderConfig().ack_every,
                   help="ask for an ACK every N data packets, as RoCE NICs coalesce them "
                        "(default %(default)s; 1: every packet)")
    p.add_argument("--deadline", type=float, default=300.0, help="give up after s")


def _recv_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bind", default="0.0.0.0", help="address to bind")
    p.add_argument("--cnp-interval-us", type=float,
                   help="default: NVIDIA's 4 µs × Scale.time")
    p.add_argument("--duration", type=float, default=0.0, help="stop after s (0: never)")
    p.add_argument("--until-flows", type=int, default=0, help="stop after N flows complete")
    p.add_argument("--loss", type=float, default=0.0,
                   help="TEST OPTION: drop this fraction of data packets on arrival")
    p.add_argument("--seed", type=int, default=0, help="seed of --loss")


def _monitor_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--monitor", help="CHAMELEON controller address (unix:<path> or "
                   "tcp:<host>:<port>): report metrics, take DCQCN parameters at run time")
    p.add_argument("--monitor-id",
                   help="reporter id (default send-<pid> / recv-<pid> / run-<pid>)")
    p.add_argument("--monitor-periods", type=periods_arg, default=None, metavar="SHORT,LONG",
                   help="sample and upload periods, s (default 10 ms, 100 ms x Scale.time)")
