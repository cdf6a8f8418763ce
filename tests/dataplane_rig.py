"""A one-switch BMv2 rig for data-plane tests that need many packets (not a test module).

One ``simple_switch_grpc`` (p4cc/data/p4/p4cc.json) with port 1 on veth ``<prefix>1a``
(host side ``<prefix>1b``, the sender) and port 2 on ``<prefix>2a`` (host side
``<prefix>2b``, the receiver).  Pipeline, tables and clone session go over P4Runtime,
queue rate/depth and registers over Thrift, as in tests/test_dataplane_bmv2.py (whose
own fixture stays as it is).  The JSON is pushed as runs push it (``device_config``:
no source info, p4c's temporaries folded by p4cc.controlplane.bmv2opt).  Frames are
prebuilt once with Scapy and sent from a raw AF_PACKET socket; a background thread
records every frame delivered on port 2 with its arrival time, so a test can send
quickly and inspect the INT summary of each packet.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from p4cc.controlplane.bmv2config import device_config
from p4cc.controlplane.p4build import BUILD_DIR
from p4cc.packets.int import DSCP_INT_SUMMARY, parse_summary
from p4cc.topo.veth import veth_pairs

P4INFO = BUILD_DIR / "p4cc.p4info.txtpb"
JSON = BUILD_DIR / "p4cc.json"
H1_MAC, H2_MAC = "00:00:0a:00:01:01", "00:00:0a:00:01:02"
SW_MAC = {1: "00:aa:00:01:00:01", 2: "00:aa:00:01:00:02"}
H1_IP, H2_IP = "10.0.1.1", "10.0.1.2"
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
ECT0, CE = 0b10, 0b11
PAYLOAD_LEN = 64  # 4-byte sequence number + padding


def skip_reason() -> str | None:
    """Why the rig cannot run here (None if it can)."""
    if shutil.which("simple_switch_grpc") is None:
        return "simple_switch_grpc (BMv2) not installed"
    if os.geteuid() != 0:
        return "needs root (veth pairs)"
    if shutil.which("ethtool") is None:
        return "ethtool not installed (turns veth offloads off for BMv2)"
    if not (P4INFO.is_file() and JSON.is_file()):
        return "p4cc/data/p4 artifacts missing; run make p4"
    return None


@contextlib.contextmanager
def veths(prefix: str, ports: tuple[int, ...] = (1, 2)) -> Iterator[None]:
    """veth pairs ``<prefix><port>a`` (switch side) / ``<prefix><port>b`` (host side),
    offloads off as the topology builder does (33 of 200 burst frames reached BMv2 with
    them on)."""
    with veth_pairs(prefix, ports, offloads_off=True):
        yield


def raw_socket(ifname: str, rcvbuf: int = 8 << 20) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.bind((ifname, 0))
    s.settimeout(0.05)
    return s


def drain(*socks: socket.socket) -> None:
    """Read and drop whatever is queued on ``socks`` (until each one's timeout)."""
    for s in socks:
        with contextlib.suppress(TimeoutError):
            while True:
                s.recv(65535)


def incoming(data: bytes, addr: Any) -> bool:
    """A frame the wire delivered to this interface (not one we sent out of it)."""
    return bool(addr[2] != PACKET_OUTGOING)


def receive(s: socket.socket, n: int, timeout_s: float = 5.0,
            accept: Callable[[bytes, Any], bool] = incoming) -> list[bytes]:
    """Up to ``n`` frames that ``accept``, polling ``s`` until the deadline."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < n and time.monotonic() < deadline:
        try:
            data, addr = s.recvfrom(65535)
        except TimeoutError:
            continue
        if accept(data, addr):
            got.append(data)
    return got


def frame(seq: int, tos: int, dport: int, sport: int = 4000) -> bytes:
    """An Ethernet/IPv4/UDP frame from h1 to h2 whose payload starts with ``seq``."""
    body = seq.to_bytes(4, "big") + b"p" * (PAYLOAD_LEN - 4)
    return bytes(Ether(src=H1_MAC, dst=SW_MAC[1])
                 / IP(src=H1_IP, dst=H2_IP, tos=tos, ttl=64, id=seq & 0xFFFF)
                 / UDP(sport=sport, dport=dport) / Raw(body))


def frames(seqs: Iterable[int], tos_of: Mapping[int, int], dport: int) -> list[bytes]:
    """Frames like :func:`frame` for many sequence numbers, fast: one Scapy template per
    TOS with a constant IPv4 id and UDP checksum 0 (no checksum, legal over IPv4), so
    only the 4 sequence bytes of the payload differ."""
    templates: dict[int, bytes] = {}
    out = []
    for seq in seqs:
        tos = tos_of[seq]
        if tos not in templates:
            f = (Ether(src=H1_MAC, dst=SW_MAC[1])
                 / IP(src=H1_IP, dst=H2_IP, tos=tos, ttl=64, id=1)
                 / UDP(sport=4000, dport=dport, chksum=0) / Raw(b"p" * PAYLOAD_LEN))
            templates[tos] = bytes(f)
        t = templates[tos]
        out.append(t[:42] + seq.to_bytes(4, "big") + t[46:])
    return out


@dataclass(frozen=True)
class Delivered:
    """One frame received on port 2: its sequence number, ECN bits and INT summary."""

    seq: int
    ecn: int
    qdepth: int  # INT summary max_qdepth: on one switch, this packet's enq_qdepth
    hop_count: int
    t: float  # time.monotonic() at reception


def parse_delivered(data: bytes, t: float) -> Delivered | None:
    """Decode a received frame carrying an INT summary (None for anything else)."""
    if len(data) < 14 + 20 + 8 + 8 + 4 or data[12:14] != b"\x08\x00" or data[23] != 17:
        return None
    if data[14] != 0x45 or data[15] >> 2 != DSCP_INT_SUMMARY:
        return None
    summary, rest = parse_summary(data[42:])
    (seq,) = struct.unpack_from("!I", rest)
    return Delivered(seq, data[15] & 3, summary.max_qdepth_pkts, summary.hop_count, t)


@dataclass
class Receiver:
    """Background reader of one raw socket; keeps every decoded delivery (and, with
    ``keep_frames``, the bytes of every IPv4 frame, in arrival order)."""

    sock: socket.socket
    got: list[Delivered] = field(default_factory=list)
    other: int = 0  # IPv4/UDP frames without an INT summary
    keep_frames: bool = False
    frames: list[bytes] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Receiver:
        self._thread = threading.Thread(target=self._run, name="p4mk-rx", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data, addr = self.sock.recvfrom(65535)
            except (TimeoutError, OSError):
                continue
            t = time.monotonic()
            if addr[2] == PACKET_OUTGOING:
                continue
            d = parse_delivered(data, t)
            with self._lock:
                if self.keep_frames and data[12:14] == b"\x08\x00":
                    self.frames.append(data)
                if d is not None:
                    self.got.append(d)
                elif data[12:14] == b"\x08\x00":
                    self.other += 1

    def count(self) -> int:
        with self._lock:
            return len(self.got)

    def take(self) -> list[Delivered]:
        with self._lock:
            out, self.got = self.got, []
            self.other = 0
            return out

    def wait_for(self, n: int, timeout_s: float) -> bool:
        """Poll until ``n`` deliveries are recorded or the deadline passes."""
        return poll(lambda: self.count() >= n, timeout_s)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)


def poll(cond: Callable[[], bool], timeout_s: float, step_s: float = 0.005) -> bool:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(step_s)
    return True


@dataclass
class Rig:
    p4rt: Any  # P4RuntimeClient
    thrift: Any  # ThriftClient
    tx: socket.socket
    rx: Receiver
    pid: int


@contextlib.contextmanager
def one_switch(prefix: str, switch_id: int, int_dport: int,
               cpus: set[int] | None = None, p4info: Path = P4INFO, p4json: Path = JSON,
               config: bytes | None = None, **bmv2: Any) -> Iterator[Rig]:
    """Start the switch, route h1<->h2, make port 2 an INT sink and UDP ``int_dport`` an
    INT source.  No clone session is created (tests that want INT reports add session
    100 themselves), so a packet stream does not also load the CPU port.  ``cpus``
    pins every BMv2 thread (bounded CPU next to other jobs); ``bmv2``: more Bmv2Process
    options (e.g. ``log_file``).  ``p4info``/``p4json``: another compiled program with
    p4cc's tables (lab 1 checks a student's build); default p4cc/data/p4.  ``config``:
    the device config to push instead of ``device_config(p4json)`` (e.g. p4c's JSON as
    compiled)."""
    from p4cc.controlplane.p4runtime import P4RuntimeClient
    from p4cc.controlplane.thrift import ThriftClient
    from p4cc.topo.bmv2 import Bmv2Process

    with veths(prefix):
        proc = Bmv2Process(prefix, 1, {1: f"{prefix}1a", 2: f"{prefix}2a"}, **bmv2)
        proc.start()
        p4rt = P4RuntimeClient(proc.grpc_addr, 1)
        thrift = ThriftClient(f"127.0.0.1:{proc.thrift_port}", p4json)
        tx, rx = raw_socket(f"{prefix}1b"), raw_socket(f"{prefix}2b")
        receiver = Receiver(rx)
        try:
            assert proc.pid is not None
            if cpus:
                for tid in os.listdir(f"/proc/{proc.pid}/task"):
                    with contextlib.suppress(OSError):
                        os.sched_setaffinity(int(tid), cpus)
            p4rt.connect()
            # pushed as runs push it: without source info, p4c's temporaries folded
            p4rt.set_pipeline(p4info, p4json,
                              device_config(p4json) if config is None else config)
            thrift.connect()
            p4rt.set_default_action("switch_config", "set_switch_config",
                                    {"switch_id": switch_id, "elephant_bytes": 1 << 30})
            for port, prefix_ip, mac in ((1, H1_IP, H1_MAC), (2, H2_IP, H2_MAC)):
                p4rt.insert_entry("ipv4_lpm", {"dst_addr": (prefix_ip, 32)}, "set_nhop",
                                  {"port": port, "dmac": mac, "smac": SW_MAC[port]})
            p4rt.insert_entry("int_sink", {"egress_port": 2}, "int_sink_port")
            p4rt.insert_entry("int_watchlist", {"l4_dport": (int_dport, 0xFFFF)},
                              "int_source", {"max_hops": 8}, priority=1)
            receiver.start()
            yield Rig(p4rt, thrift, tx, receiver, proc.pid)
        finally:
            receiver.stop()
            tx.close()
            rx.close()
            p4rt.close()
            thrift.close()
            proc.stop()
