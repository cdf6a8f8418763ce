"""Python API the experiment runner drives: receivers, flows, deadlines, records.

Typical use (inside one host's network namespace, or with ``netns=`` set)::

    rx = start_receiver(ReceiverConfig(cnp_interval_s=scale.time(50e-6)))
    tx = start_flows([("10.0.1.2", 200_000, 0.0, "dcqcn")], SenderConfig(dev="h1-eth0"),
                     scale=scale, out_dir="runs/x/h1")
    fcts = wait_flows(tx, deadline_s=30.0)   # FCT records, incomplete flows included
    rx_records = stop_receiver(rx, out_dir="runs/x/h2")
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from p4cc.errors import ConfigError
from p4cc.hostcc import cc
from p4cc.hostcc.flow import FlowSpec, RateController
from p4cc.hostcc.receiver import Receiver, ReceiverConfig
from p4cc.hostcc.rlcc_rule import DECISION_RTTS
from p4cc.hostcc.sender import ControllerFactory, Sender, SenderConfig
from p4cc.hostcc.trace import RecordWriter
from p4cc.hostcc.wire import ETH_LEN
from p4cc.scale import Scale

FlowLike = FlowSpec | tuple[Any, ...]
_RX_DEFAULT = ReceiverConfig()
_TX_DEFAULT = SenderConfig()


def as_spec(f: FlowLike) -> FlowSpec:
    """A FlowSpec from a FlowSpec or a tuple (dst, size[, start_s[, cc[, port]]])."""
    if isinstance(f, FlowSpec):
        return f
    if not 2 <= len(f) <= 5:
        raise ConfigError(f"flow {f!r}: expected (dst, size[, start_s[, cc[, port]]])")
    return FlowSpec(str(f[0]), int(f[1]), *(f[2:]))


def datagram_bytes(scale: Scale) -> int:
    """The data datagram size (``SenderConfig.pkt_bytes``) for ``scale``.

    ``Scale.pkt_bytes`` is the data packet ON THE WIRE (Ethernet frame): BMv2 queue
    rates are ``Scale.pps(link rate)`` packets/s of that size, and HTB counts frames.
    The IPv4 datagram is the frame minus the 14-byte Ethernet header (a 1000-B
    datagram made 1014-B frames, 1.4 % over the packets/s budget)."""
    return int(scale.pkt_bytes) - ETH_LEN


#: RL-CC decision interval of the host sender (and of the simulator), in base RTTs of the
#: scale: :data:`p4cc.hostcc.rlcc_rule.DECISION_RTTS` (the measurements are there).
RLCC_DECISION_RTTS = DECISION_RTTS


def controller_factory(scale: Scale, line_rate_bps: float | None = None,
                       **opts: Any) -> ControllerFactory:
    """Build each flow's controller with :func:`p4cc.hostcc.cc.make_controller`, adding the
    options the host sender uses for that kind (``HostCcKind.sender_opts``: RL-CC's
    decision interval) unless ``opts`` set them."""
    line = line_rate_bps or scale.link_rate_bps

    def make(spec: FlowSpec) -> RateController:
        kw = {**cc.host_cc_kind(spec.cc).sender_opts(scale), **opts}
        ctl: RateController = cc.make_controller(spec.cc, scale, line, **kw)
        return ctl

    return make


def start_receiver(cfg: ReceiverConfig = _RX_DEFAULT, netns: str | None = None) -> Receiver:
    """Start a receiver thread (returns once its socket is bound)."""
    return Receiver(cfg, netns=netns).start()


def stop_receiver(rx: Receiver, out_dir: str | Path | None = None) -> list[dict[str, Any]]:
    """Stop a receiver; write ``rx_flows.csv`` under out_dir; return its flow records."""
    recs = rx.stop()
    if out_dir is not None:
        with RecordWriter(Path(out_dir) / "rx_flows.csv") as w:
            w.write_all(recs)
    return recs


def start_flows(flows: Sequence[FlowLike], cfg: SenderConfig = _TX_DEFAULT, *,
                scale: Scale | None = None, out_dir: str | Path | None = None,
                make_ctl: ControllerFactory | None = None) -> Sender:
    """Start a sender running ``flows`` (start times are seconds after this call)."""
    specs = [as_spec(f) for f in flows]
    if make_ctl is None:
        make_ctl = controller_factory(scale or Scale())
        for spec in {s.cc: s for s in specs}.values():
            make_ctl(spec)  # fail now, naming the bad --cc, not when the flow starts
    return Sender(specs, make_ctl, cfg, out_dir).start()


def wait_flows(tx: Sender, deadline_s: float) -> list[dict[str, Any]]:
    """Wait until every flow completes or ``deadline_s`` passes; then stop the sender
    (tearing down its pacing) and return the FCT records (``completed`` says which)."""
    try:
        tx.wait(deadline_s)
    finally:
        tx.stop()
    if tx.error is not None:
        raise tx.error
    return tx.records()


def run_flows(flows: Sequence[FlowLike], deadline_s: float, cfg: SenderConfig = _TX_DEFAULT,
              **kw: Any) -> list[dict[str, Any]]:
    """``start_flows`` then ``wait_flows``."""
    return wait_flows(start_flows(flows, cfg, **kw), deadline_s)
