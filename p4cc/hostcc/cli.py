"""``p4cc host send`` and ``p4cc host recv`` (usable by hand inside a Mininet host).

Both print one JSON object per flow on stdout when they finish and write CSV records
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

from p4cc.chameleon.stats import Periods
from p4cc.constants import ROCE_PORT
from p4cc.errors import ConfigError
from p4cc.hostcc import api, tuning
from p4cc.hostcc.flow import FlowSpec
from p4cc.hostcc.receiver import DEFAULT_CNP_INTERVAL_S, ReceiverConfig
from p4cc.hostcc.sender import SenderConfig
from p4cc.scale import get_scale

#: default RTO cap of ``p4cc host send`` (``--rto-max``): an RTO backs off from
#: max(2·srtt, --rto) by doubling up to this.
RTO_MAX_S = 0.5


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


def _schedule(args: argparse.Namespace) -> list[FlowSpec]:
    if args.schedule:
        try:
            rows = json.loads(Path(args.schedule).read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read --schedule {args.schedule}: {exc}; give a JSON "
                              'list of {"dst", "size", "start_s", "cc"} objects') from exc
        if not isinstance(rows, list) or not rows:
            raise ConfigError(f"--schedule {args.schedule}: expected a non-empty JSON list of "
                              '{"dst", "size", "start_s", "cc"} objects')
        specs = []
        for i, r in enumerate(rows):
            try:
                stop = r.get("stop_s")
                specs.append(FlowSpec(str(r["dst"]), int(r["size"]),
                                      float(r.get("start_s", 0.0)), str(r.get("cc", args.cc)),
                                      int(r.get("port", args.port)), ref=int(r.get("ref", -1)),
                                      after=int(r.get("after", -1)),
                                      stop_s=float("inf") if stop is None else float(stop)))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                if isinstance(exc, ConfigError):
                    raise ConfigError(f"--schedule {args.schedule} row {i}: {exc}") from None
                raise ConfigError(f"--schedule {args.schedule} row {i} ({r!r}): {exc!r}; each "
                                  'row is {"dst": IP, "size": bytes[, "start_s": s, "cc": '
                                  'name, "port": n]}') from None
        return specs
    if not args.dst or not args.size:
        raise ConfigError("give --dst and --size (or --schedule FILE)")
    return [FlowSpec(args.dst, args.size, i * args.stagger, args.cc, args.port)
            for i in range(args.flows)]


def _periods(text: str) -> Periods:
    try:
        short, long = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected SHORT,LONG in seconds") \
            from None
    if not 0 < short <= long:
        raise argparse.ArgumentTypeError(f"{text!r}: need 0 < SHORT <= LONG")
    return Periods(short, long)


def _send(args: argparse.Namespace) -> int:
    scale = get_scale(args.scale)
    specs = _schedule(args)
    if args.nic_rate and not args.dev:
        raise ConfigError("--nic-rate caps the HTB pacing of --dev; give --dev too")
    cfg = SenderConfig(pkt_bytes=args.pkt_bytes or api.datagram_bytes(scale), dev=args.dev,
                       netns=args.netns, sport_base=args.sport_base,
                       probe_interval_s=args.probe_interval or 4 * scale.base_rtt_s,
                       rto_s=args.rto or max(20 * scale.base_rtt_s, 0.02),
                       rto_max_s=max(args.rto_max or RTO_MAX_S, args.rto or 0.0),
                       link_rate_bps=args.nic_rate or None, rtt_window=args.rtt_window,
                       ack_interval_s=args.ack_interval, completions=args.completions)
    make = api.controller_factory(scale, args.line_rate or None)
    for spec in {s.cc: s for s in specs}.values():
        make(spec)  # a bad --cc fails here, before anything is set up
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
    cnp = args.cnp_interval_us * 1e-6 if args.cnp_interval_us is not None else scale.time(
        DEFAULT_CNP_INTERVAL_S)
    cfg = ReceiverConfig(port=args.port, bind=args.bind, cnp_interval_s=cnp,
                         nack_interval_s=scale.base_rtt_s,
                         nack_max_interval_s=64 * scale.base_rtt_s, drop_prob=args.loss,
                         seed=args.seed)
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
    p.add_argument("--dst", help="receiver IPv4 address")
    p.add_argument("--size", type=int, help="bytes per flow")
    p.add_argument("--flows", type=int, default=1, help="number of flows (default 1)")
    p.add_argument("--stagger", type=float, default=0.0, help="seconds between flow starts")
    p.add_argument("--cc", default="dcqcn", help="dcqcn | rlcc | fixed:<bps>")
    p.add_argument("--dev", help="pace with HTB on this interface (needs root)")
    p.add_argument("--netns", help="run inside this named network namespace")
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
    p.add_argument("--rto", type=float, default=0.0,
                   help="RTO floor s (default max(20 x the scale's RTT, 20 ms))")
    p.add_argument("--rto-max", type=float, default=0.0,
                   help=f"RTO cap s (default {RTO_MAX_S:g}); RTO = min(max(2 srtt, floor) "
                        "x 2^timeouts-in-a-row, cap)")
    p.add_argument("--rtt-window", type=int, default=1,
                   help="controller RTT = median of the last N probe RTTs (default 1: raw)")
    p.add_argument("--ack-interval", type=float, default=None,
                   help="s: also ask for an ACK (an RTT sample) this long after the last "
                        "AckReq (default: the controller's; RL-CC 2 x its decision "
                        "interval, DCQCN none; 0: off)")
    p.add_argument("--monitor", help="CHAMELEON controller address (unix:<path> or "
                   "tcp:<host>:<port>): report metrics, take DCQCN parameters at run time")
    p.add_argument("--monitor-id", help="reporter id (default send-<pid> / recv-<pid>)")
    p.add_argument("--monitor-periods", type=_periods, default=None, metavar="SHORT,LONG",
                   help="sample and upload periods, s (default 10 ms, 100 ms x Scale.time)")
    p.add_argument("--deadline", type=float, default=300.0, help="give up after s")
    p.set_defaults(func=_send)

    p = sub.add_parser("recv", help="receive flows; CNPs on CE, NAKs on gaps")
    p.add_argument("--port", type=int, default=ROCE_PORT,
                   help=f"UDP port (default {ROCE_PORT})")
    p.add_argument("--bind", default="0.0.0.0", help="address to bind")
    p.add_argument("--out", help="directory for rx_flows.csv")
    p.add_argument("--netns", help="run inside this named network namespace")
    p.add_argument("--scale", default="testbed", help="scale preset (p4cc.scale.SCALES)")
    p.add_argument("--cnp-interval-us", type=float, help="default: 50 µs × Scale.time")
    p.add_argument("--duration", type=float, default=0.0, help="stop after s (0: never)")
    p.add_argument("--until-flows", type=int, default=0, help="stop after N flows complete")
    p.add_argument("--loss", type=float, default=0.0,
                   help="TEST OPTION: drop this fraction of data packets on arrival")
    p.add_argument("--monitor", help="CHAMELEON controller address (unix:<path> or "
                   "tcp:<host>:<port>): report metrics, take DCQCN parameters at run time")
    p.add_argument("--monitor-id", help="reporter id (default send-<pid> / recv-<pid>)")
    p.add_argument("--monitor-periods", type=_periods, default=None, metavar="SHORT,LONG",
                   help="sample and upload periods, s (default 10 ms, 100 ms x Scale.time)")
    p.add_argument("--seed", type=int, default=0, help="seed of --loss")
    p.set_defaults(func=_recv)
