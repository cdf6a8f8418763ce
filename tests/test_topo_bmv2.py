"""Bmv2Process without BMv2: command line, ports, error messages."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from p4cc.errors import SwitchError, ToolMissingError
from p4cc.topo import bmv2
from p4cc.topo.bmv2 import Bmv2Process, free_port


def test_command_line_has_ports_interfaces_and_no_p4() -> None:
    p = Bmv2Process("s1", 3, {2: "s1-eth2", 1: "s1-eth1"}, grpc_port=50053, thrift_port=9093)
    cmd = p.command("/usr/local/bin/simple_switch_grpc", frozenset({"thrift-port"}))
    assert cmd[0] == "/usr/local/bin/simple_switch_grpc"
    assert cmd[cmd.index("--device-id") + 1] == "3"
    assert cmd[cmd.index("--thrift-port") + 1] == "9093"
    # interfaces in port order, as port@ifname
    ifs = [cmd[i + 1] for i, a in enumerate(cmd) if a == "-i"]
    assert ifs == ["1@s1-eth1", "2@s1-eth2"]
    assert "--no-p4" in cmd
    # target options after "--"
    tail = cmd[cmd.index("--"):]
    assert tail == ["--", "--grpc-server-addr", "127.0.0.1:50053", "--cpu-port", "510"]
    # logging and pcap off unless asked
    assert "--log-file" not in cmd and "--pcap" not in cmd and "--log-console" not in cmd
    # and BMv2's default trace level (formatted even with no sink) switched off
    assert cmd[cmd.index("--log-level") + 1] == "off"
    assert "--notifications-addr" not in cmd  # the binary does not support it


def test_command_line_options(tmp_path: Path) -> None:
    p = Bmv2Process("s2", 2, {1: "veth1"}, grpc_port=1, thrift_port=2,
                    log_file=tmp_path / "s2.log", pcap_dir=tmp_path / "pcap", netns_pid=42)
    cmd = p.command("ssg", frozenset({"thrift-port", "notifications-addr"}))
    assert cmd[:3] == ["nsenter", "--net=/proc/42/ns/net", "--"]
    assert cmd[cmd.index("--log-file") + 1] == str(tmp_path / "s2.log")
    assert cmd[cmd.index("--pcap") + 1] == str(tmp_path / "pcap")
    assert cmd[cmd.index("--notifications-addr") + 1].endswith("-2-notifications.ipc")
    assert cmd.index("--no-p4") < len(cmd) - 1 - cmd[::-1].index("--")


def test_free_ports_are_distinct_and_bindable() -> None:
    a = Bmv2Process("s1", 1, {1: "x"})
    b = Bmv2Process("s1", 1, {1: "x"})
    ports = {a.grpc_port, a.thrift_port}
    assert len(ports) == 2
    assert b.grpc_port != b.thrift_port
    p = free_port({a.grpc_port})
    with socket.socket() as s:
        s.bind(("127.0.0.1", p))


def test_bad_ports_rejected() -> None:
    with pytest.raises(SwitchError, match="CPU port"):
        Bmv2Process("s1", 1, {510: "s1-eth510"})
    with pytest.raises(SwitchError, match=r"1\.\.510"):
        Bmv2Process("s1", 1, {0: "s1-eth0"})


def test_missing_binary_names_it_and_the_fix(monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    p = Bmv2Process("s1", 1, {1: "s1-eth1"})
    with pytest.raises(ToolMissingError) as err:
        p.start()
    msg = str(err.value)
    assert "simple_switch_grpc" in msg and "p4lang-bmv2" in msg and "doctor" in msg
    assert not p.is_alive()
    p.stop()  # idempotent, nothing to stop


def _fake_switch(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "simple_switch_grpc"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    bmv2.binary_options.cache_clear()
    return path


def test_binary_without_thrift_is_refused(tmp_path: Path) -> None:
    fake = _fake_switch(tmp_path, 'echo "  --device-id arg  --no-p4"\n')
    p = Bmv2Process("s1", 1, {1: "s1-eth1"}, binary=str(fake), out_dir=tmp_path / "out")
    with pytest.raises(SwitchError, match="without Thrift"):
        p.start()


def test_switch_dying_at_start_reports_its_output(tmp_path: Path) -> None:
    body = ('case "$1" in --help) echo "--thrift-port --device-id --priority-queues"; '
            'exit 0;; esac\n'
            'echo "Error: interface s1-eth9 does not exist" >&2; exit 1\n')
    fake = _fake_switch(tmp_path, body)
    p = Bmv2Process("s1", 1, {1: "s1-eth1"}, binary=str(fake), out_dir=tmp_path / "out")
    with pytest.raises(SwitchError) as err:
        p.start()
    msg = str(err.value)
    assert "exited with code 1" in msg and "s1-eth9 does not exist" in msg
    assert not p.is_alive()
    assert (tmp_path / "out" / "s1.out").exists()  # evidence kept


def test_stop_kills_only_its_pid_and_is_idempotent(tmp_path: Path) -> None:
    # a fake switch that never listens: start times out quickly, and stop cleans up
    body = ('case "$1" in --help) echo "--thrift-port --priority-queues"; exit 0;; esac\n'
            'exec sleep 30\n')
    fake = _fake_switch(tmp_path, body)
    p = Bmv2Process("s1", 1, {1: "s1-eth1"}, binary=str(fake), start_timeout_s=0.5,
                    out_dir=tmp_path / "out")  # the kept evidence stays in tmp_path
    with pytest.raises(SwitchError, match="did not listen"):
        p.start()
    assert p.pid is not None
    assert not p.is_alive()
    with pytest.raises(ProcessLookupError):
        os.kill(p.pid, 0)
    p.stop()
    p.stop()


def _fake_thrift_server(reply_value: int) -> tuple[int, list[str]]:
    """A one-shot server speaking Thrift's binary protocol like BMv2's multiplexed one."""
    import threading

    from thrift.protocol import TBinaryProtocol
    from thrift.Thrift import TMessageType, TType
    from thrift.transport import TSocket, TTransport

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    seen: list[str] = []

    def serve() -> None:
        conn, _ = server.accept()
        sock = TSocket.TSocket()
        sock.setHandle(conn)
        trans = TTransport.TBufferedTransport(sock)
        proto = TBinaryProtocol.TBinaryProtocol(trans)
        name, _mtype, seqid = proto.readMessageBegin()
        seen.append(name)
        proto.skip(TType.STRUCT)
        proto.readMessageEnd()
        proto.writeMessageBegin(name.split(":")[-1], TMessageType.REPLY, seqid)
        proto.writeStructBegin("result")
        proto.writeFieldBegin("success", TType.I64, 0)
        proto.writeI64(reply_value)
        proto.writeFieldEnd()
        proto.writeFieldStop()
        proto.writeStructEnd()
        proto.writeMessageEnd()
        trans.flush()
        conn.close()
        server.close()

    threading.Thread(target=serve, daemon=True).start()
    return int(server.getsockname()[1]), seen


def test_thrift_ping_speaks_bmv2s_multiplexed_protocol() -> None:
    port, seen = _fake_thrift_server(123456)
    assert bmv2.thrift_ping(port) == 123456
    assert seen == ["simple_switch:get_time_elapsed_us"]


def test_thrift_ping_fails_on_a_non_thrift_listener() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with pytest.raises(Exception):  # noqa: B017 (any transport error)
            bmv2.thrift_ping(int(server.getsockname()[1]), timeout_s=0.3)


def test_priority_queues_are_asked_for_as_a_target_option() -> None:
    p = Bmv2Process("s1", 1, {1: "s1-eth1"}, grpc_port=1, thrift_port=2)
    cmd = p.command("ssg", frozenset({"thrift-port", "priority-queues"}))
    tail = cmd[cmd.index("--"):]
    assert tail[tail.index("--priority-queues") + 1] == str(bmv2.PRIORITY_QUEUES) == "2"


def test_a_build_without_priority_queues_is_refused(tmp_path: Path) -> None:
    body = ('case "$1" in --help) echo "--thrift-port --device-id"; exit 0;; esac\n'
            'exec sleep 30\n')
    fake = _fake_switch(tmp_path, body)
    p = Bmv2Process("s1", 1, {1: "s1-eth1"}, binary=str(fake), out_dir=tmp_path / "out")
    with pytest.raises(SwitchError, match="priority-queues"):
        p.start()
    assert p.pid is None  # refused before anything started
