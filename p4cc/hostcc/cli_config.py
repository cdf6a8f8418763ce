"""What the options of ``p4cc host send|recv|run`` configure (p4cc.hostcc.cli)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from p4cc.chameleon.stats import Periods
from p4cc.errors import ConfigError
from p4cc.hostcc import api
from p4cc.hostcc.flow import FlowSpec
from p4cc.hostcc.receiver import DEFAULT_CNP_INTERVAL_S, ReceiverConfig
from p4cc.hostcc.rtt_samples import default_probe_quiet_s
from p4cc.hostcc.sender import ControllerFactory, SenderConfig
from p4cc.scale import Scale

_DEFAULT_LEAD_S = SenderConfig().start_rt_lead_s

#: default RTO cap of ``p4cc host send`` (``--rto-max``): an RTO backs off from
#: max(2·srtt, --rto) by doubling up to this.
RTO_MAX_S = 0.5


def default_rto_s(scale: Scale) -> float:
    """The RTO floor of ``host send``/``host run`` without ``--rto``: max(20 base RTTs,
    the drain time of a full port buffer + one base RTT, 20 ms).

    A packet that joins a full bottleneck queue is acknowledged only after the queue
    drains (160 ms at ``testbed-5m``: 100 kB at 5 Mb/s); a floor below that fired on
    mice queued behind an incast and resent them although nothing was lost (session 20,
    docs/emulation.md).  RoCE NICs likewise set their ACK timeout far above the fabric's
    queueing delay (InfiniBand: 4.096 µs x 2^timeout; timeout 14 gives 67 ms against µs RTTs).
    """
    drain_s = scale.buffer_bytes * 8.0 / scale.link_rate_bps
    return max(20 * scale.base_rtt_s, drain_s + scale.base_rtt_s, 0.02)


def flow_specs(args: argparse.Namespace) -> list[FlowSpec]:
    """The flows of ``--schedule FILE`` or of ``--dst``/``--size``/``--flows``."""
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


def periods_arg(text: str) -> Periods:
    """``--monitor-periods SHORT,LONG``."""
    try:
        short, long = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected SHORT,LONG in seconds") \
            from None
    if not 0 < short <= long:
        raise argparse.ArgumentTypeError(f"{text!r}: need 0 < SHORT <= LONG")
    return Periods(short, long)


def sender_config(args: argparse.Namespace, scale: Scale) -> SenderConfig:
    """The SenderConfig of ``host send`` / ``host run`` options."""
    if args.nic_rate and not args.dev:
        raise ConfigError("--nic-rate caps the HTB pacing of --dev; give --dev too")
    return SenderConfig(pkt_bytes=args.pkt_bytes or api.datagram_bytes(scale), dev=args.dev,
                        netns=args.netns, sport_base=args.sport_base,
                        probe_interval_s=args.probe_interval or 4 * scale.base_rtt_s,
                        probe_quiet_s=_probe_quiet(args),
                        probe_max_pps=float(getattr(args, "probe_max_pps", 0.0) or 0.0),
                        rto_s=args.rto or default_rto_s(scale),
                        rto_max_s=max(args.rto_max or RTO_MAX_S, args.rto or 0.0),
                        link_rate_bps=args.nic_rate or None, rtt_window=args.rtt_window,
                        ack_interval_s=args.ack_interval, completions=args.completions,
                        ack_every=_ack_every(args),
                        pad_data=bool(getattr(args, "pad", False)),
                        start_rt_prio=int(getattr(args, "start_rt_prio", 0) or 0),
                        start_rt_lead_s=_lead(args),
                        chain_rt=bool(getattr(args, "chain_rt", True)),
                        # the run's t0 when the BMv2 wrapper set it (p4cc.experiment.bmv2.hosts)
                        t0_epoch=getattr(args, "t0_epoch", None))


def _ack_every(args: argparse.Namespace) -> int:
    """--ack-every (SenderConfig checks its range), or SenderConfig's default."""
    n = getattr(args, "ack_every", None)
    return SenderConfig().ack_every if n is None else int(n)


def _lead(args: argparse.Namespace) -> float:
    """``--start-rt-lead`` if given, else SenderConfig's default."""
    lead = getattr(args, "start_rt_lead", None)
    return _DEFAULT_LEAD_S if lead is None else float(lead)


def _probe_quiet(args: argparse.Namespace) -> float | None:
    """``--probe-quiet``, else the default of ``--cc`` (rtt_samples.default_probe_quiet_s)."""
    q = getattr(args, "probe_quiet", None)
    return default_probe_quiet_s(str(getattr(args, "cc", "") or "")) if q is None else q


def controllers(args: argparse.Namespace, scale: Scale,
                specs: list[FlowSpec]) -> ControllerFactory:
    """The flows' controller factory; a bad ``--cc`` fails here, before any set-up."""
    make = api.controller_factory(scale, args.line_rate or None)
    for spec in {s.cc: s for s in specs}.values():
        make(spec)
    return make


def receiver_config(args: argparse.Namespace, scale: Scale, port: int) -> ReceiverConfig:
    """The ReceiverConfig of ``host recv`` / ``host run`` options."""
    cnp = args.cnp_interval_us * 1e-6 if args.cnp_interval_us is not None else scale.time(
        DEFAULT_CNP_INTERVAL_S)
    return ReceiverConfig(port=port, bind=args.bind, cnp_interval_s=cnp,
                          nack_interval_s=scale.base_rtt_s,
                          nack_max_interval_s=64 * scale.base_rtt_s, drop_prob=args.loss,
                          seed=args.seed)
