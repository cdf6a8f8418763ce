"""The control plane against a real simple_switch_grpc (no interfaces, no root needed)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from p4cc.controlplane import epoch
from p4cc.controlplane.ecn import EcnConfig, static_setting
from p4cc.controlplane.switch import SwitchControl
from p4cc.controlplane.telemetry import INTERVAL_REGISTERS, TelemetryPoller
from p4cc.topo.spec import parse_topo
from tests.live_switch import live_switch

pytestmark = pytest.mark.bmv2


@pytest.fixture(scope="module")
def ctl() -> Iterator[SwitchControl]:
    topo = "leafspine,spines=2,leaves=2,hosts=2"
    secn1 = static_setting("secn1", parse_topo(topo).scale)
    with live_switch(topo, "leaf1", secn1) as control:
        yield control


def test_setup_and_tables(ctl: SwitchControl) -> None:
    assert len(ctl.p4rt.read_table("ipv4_lpm")) == 4
    assert len(ctl.p4rt.read_table("ecmp_nhop")) == 2
    assert len(ctl.p4rt.read_table("ecn_config")) == 4


def test_set_ecn_modify_and_reads(ctl: SwitchControl) -> None:
    ctl.set_ecn(3, EcnConfig(5000, 20000, 0.5))
    ctl.set_ecn(3, EcnConfig(6000, 20000, 0.5))
    assert ctl.p4rt.read_counters("port_tx") == {i: (0, 0) for i in range(64)}
    for name in INTERVAL_REGISTERS:
        values = ctl.thrift.register_read_all(name)
        # 64 per-port cells, 256 bitmap words; the epoch program banks q_enq_max (128)
        # and the bitmaps (1024 32-bit cells with tags), docs/dataplane.md
        assert len(values) in (64, 256, 128, 1024) and not any(values)
    ctl.thrift.register_write("q_enq_max", 3, 7)
    assert ctl.thrift.register_read_all("q_enq_max")[3] == 7
    ticks = iter(range(100))
    poller = TelemetryPoller(ctl.name, ctl.ports, ctl.p4rt, ctl.thrift, ctl.scale,
                             {p: ctl.port_rate_bps(p) for p in ctl.ports}, lambda: ctl.ecn,
                             clock=lambda: float(next(ticks)))
    poller.prime()
    if poller.epoch_mode:  # nothing is reset: the epoch moved on, cell 3 is epoch 0's,
        # and so did the sketch window (tel_epoch = window ++ epoch)
        assert [epoch.split_word(v) for v in ctl.thrift.register_read_all("tel_epoch")] == [
            (1, 1)]
    else:
        assert ctl.thrift.register_read_all("q_enq_max")[3] == 0
    recs = poller.poll()
    assert set(recs) == set(ctl.ports) and recs[3].ecn == EcnConfig(6000, 20000, 0.5)
    assert recs[3].qlen_max_bytes == 0  # the 7 written before prime is not this interval's
