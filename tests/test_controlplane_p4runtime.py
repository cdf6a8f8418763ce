"""P4Runtime protobufs, P4Info helper and the client against the fake server."""

from __future__ import annotations

import queue
from pathlib import Path

import pytest
from fake_switch import FakeP4RuntimeServer
from google.rpc import code_pb2

from p4cc.controlplane.p4info import P4Info, canonical, encode_value
from p4cc.controlplane.p4rt_proto import p4runtime_pb2, parse_p4info, serialized_descriptor
from p4cc.controlplane.p4runtime import P4RuntimeClient, P4RuntimeWriteError
from p4cc.errors import ConfigError, SwitchError

FIXTURE = Path(__file__).parent / "data" / "controlplane_p4info.txtpb"
REAL = Path(__file__).parent.parent / "p4cc" / "data" / "p4" / "p4cc.p4info.txtpb"


@pytest.fixture()
def info() -> P4Info:
    return P4Info.from_file(FIXTURE)


def test_protos_build_and_parse_text() -> None:
    req = p4runtime_pb2.WriteRequest(device_id=3)
    req.updates.add(type=p4runtime_pb2.Update.INSERT)
    assert p4runtime_pb2.WriteRequest.FromString(req.SerializeToString()).device_id == 3
    msg = parse_p4info('tables { preamble { id: 7 name: "X.t" } size: 4 }')
    assert msg.tables[0].preamble.name == "X.t"


def test_serialized_descriptor_missing(tmp_path: Path) -> None:
    f = tmp_path / "x_pb2.py"
    f.write_text("x = 1\n")
    with pytest.raises(Exception, match="no serialized descriptor"):
        serialized_descriptor(f)


def test_lookup_by_suffix(info: P4Info) -> None:
    assert info.table("ipv4_lpm").preamble.name == "MyIngress.ipv4_lpm"
    assert info.table("MyEgress.ecn_config").preamble.id == 33554437
    assert info.action_param("set_ecn", "kmin").bitwidth == 19
    assert info.match_field("ecn_config", "egress_port").bitwidth == 32  # meta.port_idx
    assert info.counter_id("port_tx") == 302000002
    assert info.register("q_enq_max").size == 64


def test_lookup_errors_list_candidates(info: P4Info) -> None:
    with pytest.raises(ConfigError, match=r"ambiguous.*MyEgress.drop.*MyIngress.drop"):
        info.action("drop")
    assert info.action("MyIngress.drop").preamble.id == 16777219
    with pytest.raises(ConfigError, match=r"no table named 'nope'.*ipv4_lpm"):
        info.table("nope")
    with pytest.raises(ConfigError, match="not an action of table"):
        info.check_action_of("ecn_config", "set_nhop")
    # a suffix must start at a dot
    with pytest.raises(ConfigError):
        info.table("lpm")


def test_encode_values() -> None:
    assert encode_value("10.0.1.2", 32) == bytes([10, 0, 1, 2])
    assert encode_value("00:aa:00:01:00:02", 48) == bytes([0xAA, 0, 1, 0, 2])
    assert encode_value(0, 9) == b"\x00"
    assert encode_value(511, 9) == b"\x01\xff"
    assert encode_value(b"\x00\x05", 16) == b"\x05"
    assert encode_value("0x10", 8) == b"\x10"
    assert canonical(256) == b"\x01\x00"
    for bad, width in ((512, 9), (-1, 8), ("10.0.0.256", 32), ("zz", 8), (True, 1), (1.5, 8)):
        with pytest.raises(ConfigError):
            encode_value(bad, width)  # type: ignore[arg-type]


def test_real_p4info_has_architecture_names() -> None:
    if not REAL.is_file():
        pytest.skip(f"{REAL} not built yet (make p4)")
    real = P4Info.from_file(REAL)
    for t in ("ipv4_lpm", "ecmp_nhop", "switch_config", "int_watchlist", "ecn_config",
              "int_sink"):
        real.table(t)
    for c in ("port_offered", "port_tx", "port_marked"):
        real.counter(c)
    for a, p in (("set_ecn", "kmin"), ("set_ecn", "kmax"), ("set_ecn", "pmax"),
                 ("set_nhop", "dmac"), ("set_switch_config", "elephant_bytes")):
        real.action_param(a, p)


@pytest.fixture()
def server():
    with FakeP4RuntimeServer(device_id=1) as srv:
        yield srv


@pytest.fixture()
def client(server: FakeP4RuntimeServer, tmp_path: Path):
    js = tmp_path / "p.json"
    js.write_text("{}")
    c = P4RuntimeClient(server.address, 1, timeout_s=3.0)
    c.connect()
    c.set_pipeline(FIXTURE, js)
    yield c
    c.close()


def test_unreachable_names_address() -> None:
    c = P4RuntimeClient("127.0.0.1:1", 1, timeout_s=0.3)
    with pytest.raises(SwitchError, match=r"127\.0\.0\.1:1"):
        c.connect()


def test_arbitration_backup_is_refused(server: FakeP4RuntimeServer,
                                       client: P4RuntimeClient) -> None:
    backup = P4RuntimeClient(server.address, 1, election_id=(0, 0), timeout_s=2.0)
    # election (0,0) is lower than the primary's (0,1)
    with pytest.raises(SwitchError, match="not primary"):
        backup.connect()
    assert client.connected
    wrong = P4RuntimeClient(server.address, 7, timeout_s=2.0)
    with pytest.raises(SwitchError, match="device id 7"):
        wrong.connect()
    assert server.servicer.config.p4_device_config == b"{}"


def test_insert_modify_delete(server: FakeP4RuntimeServer, client: P4RuntimeClient) -> None:
    client.insert_entry("ecn_config", {"egress_port": 2}, "set_ecn",
                        {"kmin": 5, "kmax": 20, "pmax": 655})
    client.modify_entry("ecn_config", {"egress_port": 2}, "set_ecn",
                        {"kmin": 6, "kmax": 20, "pmax": 655})
    (entry,) = server.table_entries("ecn_config")
    assert entry.action.action.params[0].value == b"\x06"
    client.insert_entry("ipv4_lpm", {"dst_addr": ("10.0.1.7", 24)}, "set_nhop",
                        {"port": 1, "dmac": "00:00:0a:00:01:01", "smac": "00:aa:00:01:00:01"})
    (lpm,) = server.table_entries("ipv4_lpm")
    assert lpm.match[0].lpm.value == bytes([10, 0, 1, 0])  # host bits masked
    assert len(client.read_table("ipv4_lpm")) == 1
    client.insert_entry("int_watchlist", {"src_addr": None, "dst_addr": ("10.0.2.1", 0xFFFFFFFF),
                                          "protocol": (17, 0xFF)}, "int_source",
                        {"max_hops": 8}, priority=10)
    assert len(server.table_entries("int_watchlist")[0].match) == 2
    client.delete_entry("ecn_config", {"egress_port": 2})
    assert server.table_entries("ecn_config") == []
    client.set_default_action("switch_config", "set_switch_config",
                              {"switch_id": 1, "elephant_bytes": 400})
    assert server.default_action("switch_config").is_default_action


def test_duplicate_insert_carries_per_update_errors(client: P4RuntimeClient) -> None:
    e1 = client.table_entry("int_sink", {"egress_port": 1}, "int_sink_port")
    e2 = client.table_entry("int_sink", {"egress_port": 2}, "int_sink_port")
    client.write([client.update("INSERT", "table_entry", e1)])
    with pytest.raises(P4RuntimeWriteError) as ei:
        client.write([client.update("INSERT", "table_entry", e2),
                      client.update("INSERT", "table_entry", e1)])
    errs = ei.value.errors
    assert [(e.index, e.code) for e in errs] == [(1, code_pb2.ALREADY_EXISTS)]
    assert "ALREADY_EXISTS" in str(ei.value)
    with pytest.raises(P4RuntimeWriteError) as ei:
        client.modify_entry("int_sink", {"egress_port": 9}, "int_sink_port")
    assert ei.value.errors[0].code == code_pb2.NOT_FOUND
    with pytest.raises(P4RuntimeWriteError):
        client.delete_entry("int_sink", {"egress_port": 9})


def test_bad_entries_rejected_locally(client: P4RuntimeClient) -> None:
    with pytest.raises(ConfigError, match=r"needs key fields \['meta.ecmp_index'\]"):
        client.insert_entry("ecmp_nhop", {"ecmp_group": 1}, "set_nhop",
                            {"port": 1, "dmac": "00:00:0a:00:01:01", "smac": "00:aa:00:01:00:01"})
    with pytest.raises(ConfigError, match="needs key fields"):
        client.delete_entry("ecmp_nhop", {"ecmp_index": 0})
    with pytest.raises(ConfigError, match="needs parameters"):
        client.insert_entry("ecn_config", {"egress_port": 2}, "set_ecn", {"kmin": 1})
    with pytest.raises(ConfigError, match="does not fit"):
        client.insert_entry("int_sink", {"egress_port": 600}, "int_sink_port")
    with pytest.raises(ConfigError, match="LPM match takes"):
        client.insert_entry("ipv4_lpm", {"dst_addr": "10.0.0.1"}, "MyIngress.drop")


def test_counters_clone_and_packet_in(server: FakeP4RuntimeServer,
                                      client: P4RuntimeClient) -> None:
    server.set_counter("port_tx", {1: (10, 10_000), 2: (3, 3_000)})
    assert client.read_counters("port_tx") == {1: (10, 10_000), 2: (3, 3_000)}
    assert client.read_counters("port_marked") == {}
    server.set_counter("port_marked", {1: (1, 100)})
    assert client.read_counters_many(["port_tx", "port_marked"]) == {
        "port_tx": {1: (10, 10_000), 2: (3, 3_000)}, "port_marked": {1: (1, 100)}}
    collect = client.start_read_counters_many(["port_tx", "port_marked"])  # sent now
    assert collect() == {"port_tx": {1: (10, 10_000), 2: (3, 3_000)},
                         "port_marked": {1: (1, 100)}}
    client.add_clone_session(100, [510])
    client.add_clone_session(100, [510])  # second time -> MODIFY
    server.send_packet_in(b"abc", {1: b"\x00\x03"})
    pin = client.packet_ins().get(timeout=3)
    assert pin.payload == b"abc" and pin.metadata == {"ingress_port": 3}
    with pytest.raises(queue.Empty):
        client.packet_ins().get_nowait()
