"""Wire formats: struct encoders vs the Scapy layers, both directions."""

from __future__ import annotations

import pytest

from p4cc.hostcc import wire

scapy_all = pytest.importorskip("scapy.all")
IP, UDP, Raw = scapy_all.IP, scapy_all.UDP, scapy_all.Raw
from p4cc.packets import transport as tp  # noqa: E402


def _dissect(payload: bytes, sport: int = 5000, dport: int = 4791, tos: int = 2):
    pkt = IP(src="10.0.1.1", dst="10.0.1.2", tos=tos) / UDP(sport=sport, dport=dport) / Raw(
        payload
    )
    return IP(bytes(pkt))


def test_data_roundtrip_and_dissect() -> None:
    buf = wire.encode_data(7, 123, 5000, b"x" * 100, last=True, ackreq=False, retx=True)
    bth = wire.decode_bth(buf)
    assert (bth.opcode, bth.qpn, bth.psn, bth.ackreq) == (wire.OP_DATA, 7, 123, True)
    assert wire.decode_data(buf) == (wire.DATA_LAST | wire.DATA_RETX, 5000, 100)
    p = _dissect(buf)
    assert p[tp.BTH].opcode == tp.OP_DATA and p[tp.BTH].dqpn == 7 and p[tp.BTH].psn == 123
    assert p[tp.P4ccData].msg_len == 5000 and p[tp.P4ccData].flags == 3
    assert bytes(p[tp.P4ccData].payload) == b"x" * 100
    assert p[tp.BTH].icrc == 0


def test_scapy_build_matches_struct() -> None:
    for built, ours in [
        (tp.BTH(opcode=tp.OP_DATA, dqpn=9, psn=77, ackreq=1, icrc=0)
         / tp.P4ccData(flags="LAST", msg_len=1000) / Raw(b"ab"),
         wire.encode_data(9, 77, 1000, b"ab", last=True, ackreq=True, retx=False)),
        (tp.BTH(opcode=tp.OP_ACK, dqpn=3, psn=55, icrc=0)
         / tp.AETH(syndrome=tp.SYNDROME_NAK_SEQ, msn=0)
         / tp.P4ccAckInfo(flags="QDEPTH", max_qdepth=17, rx_bytes=4096),
         wire.encode_ack(3, 55, nak=True, max_qdepth=17, rx_bytes=4096)),
        (tp.BTH(opcode=tp.OP_ACK, dqpn=3, psn=56, icrc=0)
         / tp.AETH(syndrome=tp.SYNDROME_ACK, msn=1)
         / tp.P4ccAckInfo(flags="COMPLETE", rx_bytes=10),
         wire.encode_ack(3, 56, msn=1, complete=True, rx_bytes=10)),
        (tp.BTH(opcode=tp.CNP_OPCODE, becn=1, dqpn=4, icrc=0) / tp.CNPPadding(),
         wire.encode_cnp(4)),
        (tp.BTH(opcode=tp.OP_PROBE_REPLY, dqpn=2, icrc=0)
         / tp.P4ccProbe(seq=5, flags="QDEPTH", max_qdepth=3, t_send_ns=11, t_recv_ns=22),
         wire.encode_probe(2, 5, 11, reply=True, t_recv_ns=22, max_qdepth=3)),
    ]:
        assert bytes(built) == ours


def test_ack_nak_cnp_probe_decode() -> None:
    a = wire.decode_ack(wire.encode_ack(3, 55, nak=True, max_qdepth=17, rx_bytes=4096))
    assert a.nak and a.max_qdepth == 17 and a.rx_bytes == 4096 and not a.complete
    a = wire.decode_ack(wire.encode_ack(3, 56, complete=True))
    assert not a.nak and a.complete and a.max_qdepth is None
    cnp = wire.encode_cnp(12)
    b = wire.decode_bth(cnp)
    assert b.opcode == wire.OP_CNP and b.qpn == 12 and b.becn
    wire.check_cnp(cnp)
    p = wire.decode_probe(wire.encode_probe(1, 2, 3))
    assert p == wire.Probe(2, None, 3, 0)
    d = _dissect(cnp, sport=4791, dport=5000)
    assert d[tp.BTH].opcode == tp.CNP_OPCODE and d.haslayer(tp.CNPPadding)
    d = _dissect(wire.encode_ack(1, 2), sport=4791, dport=6000)
    assert d[tp.AETH].syndrome == tp.SYNDROME_ACK and d.haslayer(tp.P4ccAckInfo)


def test_int_summary_strip() -> None:
    inner = wire.encode_data(1, 0, 10, b"0" * 10, last=True, ackreq=True, retx=False)
    summ, rest = wire.strip_int_summary(wire.encode_int_summary(3, 42, 900) + inner)
    assert summ == wire.IntSummary(3, 42, 900) and bytes(rest) == inner


@pytest.mark.parametrize("n", [0, 3, 11, 15])
def test_truncated_raise_wire_error(n: int) -> None:
    for buf in (wire.encode_data(1, 0, 10, b"", last=True, ackreq=True, retx=False),
                wire.encode_ack(1, 0), wire.encode_probe(1, 0, 0), wire.encode_cnp(1)):
        with pytest.raises(wire.WireError):
            b = wire.decode_bth(buf[:n])
            if b.opcode == wire.OP_ACK:
                wire.decode_ack(buf[:n])
    with pytest.raises(wire.WireError):
        wire.decode_ack(wire.encode_ack(1, 0)[:20])
    with pytest.raises(wire.WireError):
        wire.strip_int_summary(b"1234")
