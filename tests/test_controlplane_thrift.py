"""Thrift client: locating BMv2's modules, and a switch that does not answer."""

from __future__ import annotations

import contextlib
import importlib
import json
import queue
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from p4cc.controlplane import thrift as thrift_mod
from p4cc.controlplane.int_collector import IntCollector
from p4cc.controlplane.p4runtime import PacketIn
from p4cc.errors import ConfigError, SwitchError, ToolMissingError

FAKE_CLIENT = '''
class Client:
    def __init__(self, proto):
        self.proto = proto
    def bm_mgmt_get_info(self):
        self.proto.writeMessageBegin("bm_mgmt_get_info", 1, 0)
        self.proto.writeMessageEnd()
        self.proto.trans.flush()
        return self.proto.readMessageBegin()
'''


@pytest.fixture()
def fake_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """BMv2-like module layout in a directory found through P4CC_BMV2_PYTHONPATH."""
    pytest.importorskip("thrift")
    for pkg, mod in (("bm_runtime/standard", "Standard"), ("sswitch_runtime", "SimpleSwitch")):
        d = tmp_path / pkg
        d.mkdir(parents=True)
        for parent in (d, d.parent):
            if parent != tmp_path:
                (parent / "__init__.py").touch()
        (d / f"{mod}.py").write_text(FAKE_CLIENT)
    saved = {k: v for k, v in sys.modules.items()
             if k.split(".")[0] in ("bm_runtime", "sswitch_runtime")}
    for k in saved:
        del sys.modules[k]
    monkeypatch.setattr(thrift_mod, "_MODULES", ("p4cc_test_absent.Standard",
                                                 "p4cc_test_absent2.SimpleSwitch"))
    monkeypatch.setenv("P4CC_BMV2_PYTHONPATH", str(tmp_path))
    # hide an installed BMv2's modules so that the fakes are found
    monkeypatch.setattr(sys, "path", [p for p in sys.path if not (Path(p) / "bm_runtime").is_dir()])
    yield tmp_path
    for k in [k for k in sys.modules if k.split(".")[0] in ("bm_runtime", "sswitch_runtime")]:
        del sys.modules[k]
    sys.modules.update(saved)
    if str(tmp_path) in sys.path:
        sys.path.remove(str(tmp_path))


def test_missing_modules_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(thrift_mod, "_MODULES", ("p4cc_test_absent.A", "p4cc_test_absent.B"))
    monkeypatch.setattr(thrift_mod, "_search_dirs", lambda: [])
    with pytest.raises(ToolMissingError, match=r"bm_runtime, sswitch_runtime.*--with-thrift"):
        thrift_mod.load_runtime_modules()


def test_modules_found_on_search_path(fake_modules: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(thrift_mod, "_MODULES", ("bm_runtime.standard.Standard",
                                                 "sswitch_runtime.SimpleSwitch"))
    std, ss = thrift_mod.load_runtime_modules()
    assert str(std.__file__).startswith(str(fake_modules)) and hasattr(ss, "Client")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_switch_not_answering(fake_modules: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(thrift_mod, "_MODULES", ("bm_runtime.standard.Standard",
                                                 "sswitch_runtime.SimpleSwitch"))
    port = _closed_port()
    client = thrift_mod.ThriftClient(f"127.0.0.1:{port}", timeout_s=0.5)
    with pytest.raises(SwitchError, match=r"does not answer on its Thrift port.*--with-thrift"):
        client.connect()
    # a port that accepts and hangs up (not BMv2's Thrift server)
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        client = thrift_mod.ThriftClient(f"127.0.0.1:{srv.getsockname()[1]}", timeout_s=0.5)
        with pytest.raises(SwitchError, match="Thrift port"):
            client.connect()
    assert not client.connected
    with pytest.raises(SwitchError, match="not connected"):
        client.register_read_all("x")


def test_register_names_from_bmv2_json(tmp_path: Path) -> None:
    js = tmp_path / "p.json"
    js.write_text(json.dumps({"register_arrays": [
        {"name": "MyEgress.q_enq_max", "id": 0, "size": 64, "bitwidth": 32},
        {"name": "MyEgress.flow_bits", "id": 1, "size": 256, "bitwidth": 64}]}))
    client = thrift_mod.ThriftClient("127.0.0.1:9090", js)
    assert client.register_name("q_enq_max") == "MyEgress.q_enq_max"
    with pytest.raises(ConfigError, match="no register named"):
        client.register_name("nope")
    with pytest.raises(ConfigError, match="does not fit"):
        client.register_write("q_enq_max", 0, 1 << 32)


def test_int_collector_counts_bad_payloads() -> None:
    q: queue.Queue[PacketIn] = queue.Queue()

    def decode(payload: bytes, meta: object) -> int:
        if not payload:
            raise ValueError("empty")
        return len(payload)

    got: list[object] = []
    col = IntCollector("s1", q, decode=decode, sink=got.append, t0=0.0, clock=lambda: 2.5)
    q.put(PacketIn(b"abcd", {"ingress_port": 3}))
    q.put(PacketIn(b"", {}))
    recs = col.drain()
    assert [(r.switch, r.t_s, r.ingress_port, r.report) for r in recs] == [("s1", 2.5, 3, 4)]
    assert col.decode_errors == 1 and got == recs


def test_int_collector_with_real_decoder() -> None:
    pytest.importorskip("scapy")
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    from p4cc.packets.int import HopRecord, add_int

    hops = [HopRecord(2, 3, 1, 40, 7, 1000, 30), HopRecord(1, 1, 4, 10, 2, 900, 5)]
    frame = add_int(Ether() / IP(src="10.0.1.1", dst="10.0.2.1") / UDP(sport=5, dport=4791)
                    / (b"x" * 20), hops)
    q: queue.Queue[PacketIn] = queue.Queue()
    q.put(PacketIn(bytes(frame), {"ingress_port": 3, "egress_port": 1, "switch_id": 2}))
    q.put(PacketIn(b"junk", {}))
    col = IntCollector("leaf2", q)
    (rec,) = col.drain()
    assert rec.report.path == (1, 2) and rec.report.max_qdepth_pkts == 7
    assert rec.report.dst == "10.0.2.1" and rec.ingress_port == 3
    assert col.decode_errors == 1


def test_client_against_python_thrift_server() -> None:
    """ThriftClient against BMv2's generated Thrift stubs served by a Python handler."""
    pytest.importorskip("thrift")
    try:
        std_mod, ss_mod = thrift_mod.load_runtime_modules()
    except ToolMissingError as exc:
        pytest.skip(str(exc))
    import threading

    from thrift.protocol import TBinaryProtocol
    from thrift.server import TServer
    from thrift.TMultiplexedProcessor import TMultiplexedProcessor
    from thrift.transport import TSocket, TTransport

    regs: dict[str, list[int]] = {"E.q_enq_max": [0] * 4}
    calls: list[tuple[str, tuple[object, ...]]] = []

    class Handler:
        def __getattr__(self, name: str):
            def call(*args: object) -> object:
                calls.append((name, args))
                return 0
            return call

        def bm_mgmt_get_info(self) -> object:
            ttypes = importlib.import_module(std_mod.__name__.rsplit(".", 1)[0] + ".ttypes")
            return ttypes.BmConfig()

        def bm_register_read_all(self, cxt: int, name: str) -> list[int]:
            return regs[name]

        def bm_register_write(self, cxt: int, name: str, index: int, value: int) -> None:
            regs[name][index] = value

        def bm_register_reset(self, cxt: int, name: str) -> None:
            regs[name] = [0] * len(regs[name])

    proc = TMultiplexedProcessor()
    proc.registerProcessor("standard", std_mod.Processor(Handler()))
    proc.registerProcessor("simple_switch", ss_mod.Processor(Handler()))
    port = _closed_port()
    sock = TSocket.TServerSocket(host="127.0.0.1", port=port)
    server = TServer.TSimpleServer(proc, sock, TTransport.TBufferedTransportFactory(),
                                   TBinaryProtocol.TBinaryProtocolFactory())
    def serve() -> None:
        with contextlib.suppress(Exception):  # ends when the socket is closed
            server.serve()

    threading.Thread(target=serve, daemon=True).start()
    deadline = time.monotonic() + 5
    while True:  # wait until the server listens
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
    client = thrift_mod.ThriftClient(f"127.0.0.1:{port}", timeout_s=2.0)
    client.registers = {"E.q_enq_max": 32}
    with client:
        client.set_queue_rate(1250.4, 3)
        client.set_queue_depth(100)
        client.register_write("q_enq_max", 2, 9)
        assert client.register_read_all("q_enq_max") == [0, 0, 9, 0]
        client.register_reset("q_enq_max")
        assert client.register_read_all("q_enq_max") == [0, 0, 0, 0]
    assert ("set_egress_queue_rate", (3, 1250)) in calls
    assert ("set_all_egress_queue_depths", (100,)) in calls
    sock.close()
