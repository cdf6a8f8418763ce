"""``p4cc host run``: a host's receiver and sender in one process and one event loop.

The options are those of ``host send`` (the flows; none: receive only) plus the
receiver's (``--listen-port``, ``--recv-out``, ``--no-recv``, ...); the records are the
files the two commands write.  The receiver binds before anything else, then
``args.gate`` (if the caller set one: the BMv2 backend's wrapper waits there for the
run's t0, p4cc.experiment.bmv2.hosts, and returns it) and the sender's clock starts, at
that t0 (SenderConfig.t0_epoch): all hosts of a run count flow start times from the
same instant however long each took to set up.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from p4cc.chameleon.client import Sample
from p4cc.errors import ConfigError
from p4cc.hostcc import api, tuning
from p4cc.hostcc.cli_config import controllers, flow_specs, receiver_config, sender_config
from p4cc.hostcc.hostloop import HostLoop, HostLoopConfig, HostLoopResult
from p4cc.hostcc.receiver import Receiver
from p4cc.hostcc.sender import Sender
from p4cc.scale import get_scale


class Interrupted(Exception):
    """SIGINT/SIGTERM before the loop ran (while binding or waiting at the gate)."""


class _Signals:
    """SIGINT/SIGTERM set ``event`` (the loop ends at its next pass); before the loop
    runs they interrupt (a wait at the gate must not outlive a stop)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.looping = False
        self.name = ""

    def __call__(self, signum: int, _frame: FrameType | None) -> None:
        self.name = signal.Signals(signum).name
        self.event.set()
        if not self.looping:
            raise Interrupted(self.name)

    def install(self) -> _Signals:
        signal.signal(signal.SIGTERM, self)
        signal.signal(signal.SIGINT, self)
        return self


def _sampler(tx: Sender | None, rx: Receiver | None) -> Callable[[float], Sample]:
    """One reporter for the host: the sender's and the receiver's samples together."""
    parts = ([tuning.sender_sampler(tx)] if tx is not None else []) + (
        [tuning.receiver_sampler(rx)] if rx is not None else [])

    def sample(t: float) -> Sample:
        out: Sample = {}
        for part in parts:
            out.update(part(t))
        return out
    return sample


def _print(role: str, records: list[dict[str, Any]]) -> None:
    for r in records:
        print(json.dumps({"role": role, **r}, default=str), flush=True)


def run(args: argparse.Namespace) -> int:
    scale = get_scale(args.scale)
    sending = bool(args.schedule or args.dst or args.size)
    if not sending and args.no_recv:
        raise ConfigError("nothing to run: give --dst and --size (or --schedule), or drop "
                          "--no-recv")
    specs = flow_specs(args) if sending else []
    tx_cfg = sender_config(args, scale) if sending else None
    make = controllers(args, scale, specs) if sending else None
    rx = None if args.no_recv else Receiver(
        receiver_config(args, scale, args.listen_port), netns=args.netns)
    params = tuning.RuntimeParams(scale, rx)
    sig = _Signals().install()
    tx: Sender | None = None
    rep = None
    res = HostLoopResult()
    status = 0
    try:
        if rx is not None:
            if args.recv_thread:
                rx.start()
            else:
                rx.open()
            print(json.dumps({"listening": rx.port, "cnp_interval_s": rx.cfg.cnp_interval_s}),
                  flush=True)
        gate = getattr(args, "gate", None)
        if gate is not None and tx_cfg is not None:  # the run's t0: every host's clock,
            args.t0_epoch = gate()  # read by sender_config as for ``host send``
            tx_cfg = sender_config(args, scale)
        elif gate is not None:
            gate()
        if make is not None:
            tx = Sender(specs, params.wrap(make), tx_cfg, args.out)
        if args.monitor:
            rep = tuning.start_reporter(args.monitor, args.monitor_id or f"run-{os.getpid()}",
                                        _sampler(tx, rx), params, args.monitor_periods)
        sig.looping = True
        loop = HostLoop(tx, rx, HostLoopConfig(tx_deadline_s=args.deadline,
                                               duration_s=args.duration,
                                               until_flows=args.until_flows), sig.event)
        res = loop.run()
    except Interrupted as exc:
        print(f"p4cc host run: stopped by {exc}", file=sys.stderr)
        status = 130
    finally:
        if rep is not None:
            rep.stop()
        rx_recs = _stop_receiver(rx, args.recv_out or args.out)
    if res.reason == "stop" and res.sender == "stopped":
        print(f"p4cc host run: stopped by {sig.name} while sending", file=sys.stderr)
        status = 130
    elif res.sender == "deadline":
        print(f"p4cc host run: deadline of {args.deadline} s passed", file=sys.stderr)
        status = 1
    tx_recs = tx.records() if tx is not None else []
    _print("send", tx_recs)
    _print("recv", rx_recs)
    if status == 0 and not all(r["completed"] for r in tx_recs):
        status = 1
    return status


def _stop_receiver(rx: Receiver | None, out: str | None) -> list[dict[str, Any]]:
    if rx is None:
        return []
    recs = api.stop_receiver(rx, out)
    if out:
        (Path(out) / "rx_counters.json").write_text(json.dumps(rx.counters()))
    return recs
