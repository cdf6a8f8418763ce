"""MTU-size data packets: a padded flow's every datagram is full size, and the
receiver counts the message's bytes, not the padding (SenderConfig.pad_data)."""

from __future__ import annotations

import socket

from test_hostcc_transport_logic import ECT0, SRC, Fixed

from p4cc.hostcc import wire
from p4cc.hostcc.flow import Flow, FlowSpec
from p4cc.hostcc.receiver import ReceiverConfig, ReceiverCore, open_rx_socket

PKT = 1000  # IPv4 datagram bytes, as SenderConfig.pkt_bytes
FULL = PKT - wire.IP_UDP_LEN  # the UDP payload a full-size datagram carries


def _datagrams(size: int, pad: bool) -> list[bytes]:
    f = Flow(1, FlowSpec("10.0.0.2", size, 0.0), Fixed(1e6), PKT, 0.05, pad=pad)
    out = []
    while f.has_data():
        d = f.next_datagram(0.0)
        f.sent(0.0, len(d))
        out.append(d)
    return out


def test_padded_flow_sends_full_size_datagrams_only() -> None:
    size = 2 * (PKT - wire.data_overhead()) + 10  # two full packets and a 10-B tail
    plain, padded = _datagrams(size, pad=False), _datagrams(size, pad=True)
    assert [len(d) for d in padded] == [FULL] * 3
    assert [len(d) for d in plain][:2] == [FULL] * 2 and len(plain[2]) < FULL // 10
    one_byte = _datagrams(1, pad=True)
    assert [len(d) for d in one_byte] == [FULL]


def test_receiver_counts_the_message_not_the_padding() -> None:
    size = 2 * (PKT - wire.data_overhead()) + 10
    core = ReceiverCore(ReceiverConfig())
    out: list[bytes] = []
    for i, d in enumerate(_datagrams(size, pad=True)):
        out = core.handle(d, ECT0, SRC, 0.1 * i)
    assert wire.decode_ack(out[0]).complete
    assert core.records()[0]["rx_bytes"] == size


def test_receiver_sends_control_packets_with_dscp_48() -> None:
    sock = open_rx_socket(ReceiverConfig(bind="127.0.0.1", port=0))
    try:
        tos = sock.getsockopt(socket.IPPROTO_IP, socket.IP_TOS)
        assert tos == wire.TOS_CONTROL == 48 << 2 and tos & 3 == 0  # not ECN-capable
    finally:
        sock.close()
