"""RL-CC hosts at the default rate floor (NVIDIA's 1 Mb/s per 25 Gb/s: 400 b/s on the
10 Mb/s testbed), over loopback with the host sender's userspace pacing (no root)."""

from __future__ import annotations

import pytest

from p4cc.hostcc import api, rlcc
from p4cc.hostcc.cc import RlccController
from p4cc.hostcc.flow import FlowSpec
from p4cc.hostcc.receiver import Receiver, ReceiverConfig
from p4cc.hostcc.sender import Sender, SenderConfig
from p4cc.scale import get_scale


def test_flow_starting_at_the_floor_recovers_and_completes() -> None:
    """A flow at 400 b/s has a 20 s gap between packets.  Its controller still decides on
    the probes' RTT samples (every 8 ms) and raises the rate in an empty network; the
    sender must then not wait out the gap it scheduled at the floor rate."""
    sc = get_scale("testbed")
    made: list[RlccController] = []
    factory = api.controller_factory(sc, initial_rate_frac=rlcc.MIN_RATE_FRAC)

    def make(spec: FlowSpec) -> RlccController:
        ctl = factory(spec)
        assert isinstance(ctl, RlccController)
        made.append(ctl)
        return ctl

    rx = Receiver(ReceiverConfig(bind="127.0.0.1", port=0)).start()
    try:
        spec = FlowSpec("127.0.0.1", 50_000, port=rx.port, cc="rlcc")
        tx = Sender([spec], make, SenderConfig(pkt_bytes=1000)).start()
        done = tx.wait(8.0)  # 50 kB: 40 ms at the line rate, 1000 s at the floor
        tx.stop()
    finally:
        rx.stop()
    rec = tx.records()[0]
    assert made and made[0].params.floor_bps == pytest.approx(sc.rate(1e6)) == 400.0
    assert done and rec["completed"], rec
    assert made[0].trace(0.0)["decisions"] >= 10
