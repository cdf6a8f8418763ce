"""The receiver under garbage: bounded state, refusals counted, no NAKs drawn, no Scapy."""

from __future__ import annotations

import random
import socket
import subprocess
import sys
import time

from p4cc.hostcc import wire
from p4cc.hostcc.receiver import Receiver, ReceiverConfig, ReceiverCore


def _garbage(rng: random.Random, n: int) -> list[bytes]:
    out = []
    for i in range(n):
        if i % 2:
            out.append(rng.randbytes(rng.randint(1, 1200)))  # random bytes
        else:  # a well-formed data BTH naming a random QP, PSN and message length
            out.append(wire.encode_data(rng.randrange(1 << 24), rng.randrange(1 << 24),
                                        rng.randrange(1 << 32), rng.randbytes(64),
                                        last=False, ackreq=rng.random() < 0.5, retx=False))
    return out


def test_garbage_on_a_real_socket_creates_no_state_and_no_naks() -> None:
    rx = Receiver(ReceiverConfig(port=0, bind="127.0.0.1")).start()
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.bind(("127.0.0.1", 0))
    tx.setblocking(False)
    try:
        rng = random.Random(7)
        sent = 0
        for buf in _garbage(rng, 10_000):
            tx.sendto(buf, ("127.0.0.1", rx.port))
            sent += 1
            if sent % 200 == 0:
                time.sleep(0.002)  # let the receiver drain its socket (lossless here)
        # then one real flow of 3 packets
        for psn in range(3):
            tx.sendto(wire.encode_data(1, psn, 3 * 100, b"x" * 100, last=psn == 2,
                                       ackreq=psn == 2, retx=False), ("127.0.0.1", rx.port))
        deadline = time.monotonic() + 10
        while rx.counters()["datagrams"] < 10_003 and time.monotonic() < deadline:
            time.sleep(0.01)  # poll the condition
        c = rx.counters()
        assert c["datagrams"] == 10_003
        # random bytes that happen to parse as a probe get their (stateless) echo
        assert c["refused_new"] + c["malformed"] + c["unknown_opcode"] >= 9_900
        replies = []
        deadline = time.monotonic() + 1
        while time.monotonic() < deadline:
            try:
                replies.append(wire.decode_bth(tx.recv(2048)))
            except BlockingIOError:
                time.sleep(0.01)
        recs = rx.stop()
    finally:
        tx.close()
    assert len(recs) <= 2  # the real flow (+ at most a garbage packet that looked real)
    real = [r for r in recs if r["qpn"] == 1]
    assert real and real[0]["rx_bytes"] == 300 and real[0]["complete_t"] is not None
    assert all(r["msg_len"] <= ReceiverConfig().max_msg_bytes for r in recs)
    assert [b.qpn for b in replies if b.opcode == wire.OP_ACK] == [1]  # no NAK to garbage
    assert sum(1 for b in replies if b.opcode != wire.OP_PROBE_REPLY) == 1


def test_state_is_bounded_and_idle_flows_expire() -> None:
    core = ReceiverCore(ReceiverConfig(max_flows=100, flow_idle_s=5.0))
    addr = ("10.0.0.1", 1000)
    for q in range(1, 301):  # plausible new flows (PSN 0), three times the bound
        core.handle(wire.encode_data(q, 0, 10_000, b"y" * 100, last=False, ackreq=False,
                                     retx=False), 0, addr, now=0.0)
    assert len(core.flows) == 100 and core.counters.refused_full == 200
    # 6 s later the 100 are idle: they expire, their records are kept (they had data)
    core.handle(wire.encode_data(999, 0, 10_000, b"y" * 100, last=False, ackreq=False,
                                 retx=False), 0, addr, now=6.0)
    assert core.counters.expired == 100 and len(core.flows) == 1
    assert len(core.records()) == 101


def test_implausible_first_packets_are_refused() -> None:
    core = ReceiverCore(ReceiverConfig())
    addr = ("10.0.0.1", 1000)

    def send(qpn: int, psn: int, msg_len: int) -> list[bytes]:
        return core.handle(wire.encode_data(qpn, psn, msg_len, b"z" * 10, last=False,
                                            ackreq=True, retx=False), 0, addr, now=1.0)

    assert send(1, 5_000_000, 1000) == [] and not core.flows  # PSN far from a start
    assert send(1, 0, 4 << 30 - 1) == [] and not core.flows  # a 2 GB message
    assert send(0, 0, 1000) == [] and not core.flows  # QPN 0 is never a p4cc flow
    assert core.counters.refused_new == 3
    assert len(send(1, 3, 1000)) == 1 and len(core.flows) == 1  # lost PSN 0: NAK to 0


def test_receiver_process_imports_no_scapy() -> None:
    code = ("import sys, p4cc.hostcc.receiver, p4cc.hostcc.sender, p4cc.hostcc.cli; "
            "print(any(m.startswith('scapy') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False" and "WARNING" not in out.stderr
