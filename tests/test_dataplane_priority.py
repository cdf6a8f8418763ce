"""Control packets (DSCP 48: ACK, NAK, CNP, probe replies) overtake a standing data
queue on a live BMv2 (p4src/include/forwarding.p4, simple_switch --priority-queues 2)."""

from __future__ import annotations

import pytest
from dataplane_rig import frames, one_switch, skip_reason

from p4cc.hostcc.wire import TOS_CONTROL

pytestmark = [pytest.mark.bmv2, pytest.mark.root]

PREFIX = "p4pq"
SWITCH_ID = 7
INT_DPORT = 4791
PORT = 2  # toward the receiver
DATA = 40  # data frames queued ahead of the control frame
PPS = 100  # port 2's queue rate: 40 frames wait up to 0.4 s
CONTROL_SEQ, LAST_DATA_SEQ = 1000, 2000


@pytest.fixture(scope="module")
def rig():  # type: ignore[no-untyped-def]
    why = skip_reason()
    if why:
        pytest.skip(why)
    with one_switch(PREFIX, SWITCH_ID, INT_DPORT) as r:
        yield r


def _order(rig, control_tos: int) -> list[int]:  # type: ignore[no-untyped-def]
    """Send DATA data frames, one frame with ``control_tos``, one more data frame into
    a slow port; the sequence numbers in the order they came out."""
    seqs = [*range(DATA), CONTROL_SEQ, LAST_DATA_SEQ]
    tos = dict.fromkeys(seqs, 0) | {CONTROL_SEQ: control_tos}
    rig.rx.take()
    rig.thrift.set_queue_rate(PPS, PORT)
    try:
        for f in frames(seqs, tos, INT_DPORT):
            rig.tx.send(f)
        assert rig.rx.wait_for(len(seqs), timeout_s=10), f"{rig.rx.count()} of {len(seqs)}"
        return [d.seq for d in rig.rx.take()]
    finally:
        rig.thrift.set_queue_rate(1_000_000, PORT)


def test_control_packet_overtakes_the_data_queue(rig) -> None:  # type: ignore[no-untyped-def]
    order = _order(rig, TOS_CONTROL)
    # it left within a few packet times, ahead of >= 35 data frames queued before it
    assert order.index(CONTROL_SEQ) <= 4, order
    assert order[-1] == LAST_DATA_SEQ and sorted(order[:-1]) == sorted(
        [*range(DATA), CONTROL_SEQ])


def test_a_data_packet_waits_its_turn(rig) -> None:  # type: ignore[no-untyped-def]
    order = _order(rig, 0)  # the same frame without DSCP 48: FIFO behind the data
    assert order.index(CONTROL_SEQ) == DATA, order


def test_control_packets_are_accounted_at_index_0(rig) -> None:  # type: ignore[no-untyped-def]
    """A port's counters describe its data queue (the one the configured rate applies
    to): a DSCP-48 frame is counted at the unused index 0, a data frame at its port."""
    before = rig.p4rt.read_counters_many(["port_offered", "port_tx"])
    _order(rig, TOS_CONTROL)  # DATA + 1 data frames and one control frame to port 2
    after = rig.p4rt.read_counters_many(["port_offered", "port_tx"])
    for name in ("port_offered", "port_tx"):
        d_port = after[name].get(PORT, (0, 0))[0] - before[name].get(PORT, (0, 0))[0]
        d_zero = after[name].get(0, (0, 0))[0] - before[name].get(0, (0, 0))[0]
        assert (d_port, d_zero) == (DATA + 1, 1), (name, d_port, d_zero)
