"""An in-process FAKE P4Runtime server, for unit tests of the client logic only.

It speaks the real protocol (the real protobufs over real gRPC on 127.0.0.1) and keeps
the semantics the client relies on (P4Runtime spec §9, §12): primary arbitration by
highest election id; a pipeline must be set before writes; INSERT of an existing key
-> ALREADY_EXISTS, MODIFY/DELETE of a missing key -> NOT_FOUND, reported per update as
``p4.v1.Error`` in the ``google.rpc.Status`` details (the write continues on error, like
BMv2's PI server); wildcard counter reads from a dict the test sets.  It is not a
switch: nothing is forwarded and actions are not checked against the program.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Mapping
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from google.rpc import code_pb2, status_pb2

from p4cc.controlplane.p4info import P4Info
from p4cc.controlplane.p4rt_proto import p4runtime_pb2, service_handler
from p4cc.errors import ConfigError


def _key(entity_field: str, msg: Any) -> tuple[Any, ...]:
    if entity_field == "table_entry":
        match = tuple(sorted(fm.SerializeToString(deterministic=True) for fm in msg.match))
        return ("table", msg.table_id, match, msg.priority, msg.is_default_action)
    if entity_field == "packet_replication_engine_entry":
        kind = msg.WhichOneof("type")
        inner = getattr(msg, kind)
        ident = inner.session_id if kind == "clone_session_entry" else inner.multicast_group_id
        return ("pre", kind, ident)
    return (entity_field, msg.SerializeToString(deterministic=True))


class FakeP4RuntimeServicer:
    def __init__(self, device_id: int) -> None:
        self.device_id = device_id
        self.lock = threading.Lock()
        self.config: Any = None
        self.p4info: P4Info | None = None
        self.entries: dict[tuple[Any, ...], Any] = {}
        self.defaults: dict[int, Any] = {}
        self.counters: dict[int, dict[int, tuple[int, int]]] = {}
        self.streams: dict[int, tuple[tuple[int, int], queue.Queue[Any]]] = {}
        self.writes = 0
        #: every update applied, in order: (type, entity kind, table id or 0)
        self.updates: list[tuple[str, str, int]] = []
        self.fail_writes: int = 0  # next N writes fail with UNAVAILABLE (fault injection)
        self._next_stream = 0

    # -- arbitration -----------------------------------------------------------------
    def primary_election(self) -> tuple[int, int] | None:
        return max((e for e, _ in self.streams.values()), default=None)

    def _check_primary(self, msg: Any, context: grpc.ServicerContext) -> None:
        election = (msg.election_id.high, msg.election_id.low)
        if msg.device_id != self.device_id:
            context.abort(grpc.StatusCode.NOT_FOUND, f"unknown device id {msg.device_id}")
        if election != self.primary_election():
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "not the primary controller")

    def StreamChannel(self, request_iterator: Iterator[Any],
                      context: grpc.ServicerContext) -> Iterator[Any]:
        out: queue.Queue[Any] = queue.Queue()
        with self.lock:
            sid = self._next_stream
            self._next_stream += 1

        def reader() -> None:
            try:
                for req in request_iterator:
                    if req.WhichOneof("update") == "arbitration":
                        arb = req.arbitration
                        if arb.device_id != self.device_id:
                            break  # a real server aborts the stream (NOT_FOUND)
                        election = (arb.election_id.high, arb.election_id.low)
                        with self.lock:
                            self.streams[sid] = (election, out)
                            primary = self.primary_election() == election
                        resp = p4runtime_pb2.StreamMessageResponse()
                        resp.arbitration.CopyFrom(arb)
                        resp.arbitration.status.code = (
                            code_pb2.OK if primary else code_pb2.ALREADY_EXISTS)
                        out.put(resp)
            except grpc.RpcError:
                pass
            finally:
                with self.lock:
                    self.streams.pop(sid, None)
                out.put(None)

        threading.Thread(target=reader, daemon=True).start()
        while True:
            item = out.get()
            if item is None or not context.is_active():
                return
            yield item

    # -- pipeline --------------------------------------------------------------------
    def SetForwardingPipelineConfig(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._check_primary(request, context)
        with self.lock:
            self.config = request.config
            self.p4info = P4Info(request.config.p4info)
            self.entries.clear()
            self.defaults.clear()
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request: Any, context: grpc.ServicerContext) -> Any:
        resp = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        if self.config is not None:
            resp.config.CopyFrom(self.config)
        return resp

    # -- write -----------------------------------------------------------------------
    def Write(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._check_primary(request, context)
        if self.fail_writes > 0:
            self.fail_writes -= 1
            context.abort(grpc.StatusCode.UNAVAILABLE, "injected failure")
        if self.config is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no forwarding pipeline set")
        results = []
        with self.lock:
            self.writes += 1
            for upd in request.updates:
                results.append(self._apply(upd))
        if all(code == code_pb2.OK for code, _ in results):
            return p4runtime_pb2.WriteResponse()
        status = status_pb2.Status(code=code_pb2.UNKNOWN, message="write failed")
        for code, message in results:
            status.details.add().Pack(p4runtime_pb2.Error(canonical_code=code, message=message))
        context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
        context.set_code(grpc.StatusCode.UNKNOWN)
        context.set_details("write failed")
        return p4runtime_pb2.WriteResponse()

    def _apply(self, upd: Any) -> tuple[int, str]:
        field = upd.entity.WhichOneof("entity")
        msg = getattr(upd.entity, field)
        kind = p4runtime_pb2.Update.Type.Name(upd.type)
        self.updates.append((kind, field, msg.table_id if field == "table_entry" else 0))
        if field == "table_entry" and msg.is_default_action:
            if kind != "MODIFY":
                return code_pb2.INVALID_ARGUMENT, "default entries can only be modified"
            self.defaults[msg.table_id] = msg
            return code_pb2.OK, ""
        key = _key(field, msg)
        exists = key in self.entries
        if kind == "INSERT":
            if exists:
                return code_pb2.ALREADY_EXISTS, "Match entry exists, use MODIFY"
            self.entries[key] = msg
        elif kind == "MODIFY":
            if not exists:
                return code_pb2.NOT_FOUND, "cannot modify a missing entry"
            self.entries[key] = msg
        elif kind == "DELETE":
            if not exists:
                return code_pb2.NOT_FOUND, "cannot delete a missing entry"
            del self.entries[key]
        else:
            return code_pb2.INVALID_ARGUMENT, f"bad update type {kind}"
        return code_pb2.OK, ""

    # -- read ------------------------------------------------------------------------
    def Read(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        resp = p4runtime_pb2.ReadResponse()
        with self.lock:
            for ent in request.entities:
                field = ent.WhichOneof("entity")
                if field == "table_entry":
                    tid = ent.table_entry.table_id
                    for key, msg in self.entries.items():
                        if key[0] == "table" and (tid == 0 or msg.table_id == tid):
                            resp.entities.add().table_entry.CopyFrom(msg)
                elif field == "counter_entry":
                    cid = ent.counter_entry.counter_id
                    for index, (pkts, nbytes) in sorted(self.counters.get(cid, {}).items()):
                        ce = resp.entities.add().counter_entry
                        ce.counter_id = cid
                        ce.index.index = index
                        ce.data.packet_count, ce.data.byte_count = pkts, nbytes
                else:
                    context.abort(grpc.StatusCode.UNIMPLEMENTED, f"read of {field}")
        yield resp


class FakeP4RuntimeServer:
    """``with FakeP4RuntimeServer(device_id=1) as srv: P4RuntimeClient(srv.address, 1)``."""

    def __init__(self, device_id: int = 1, port: int = 0) -> None:
        self.servicer = FakeP4RuntimeServicer(device_id)
        self._port = port
        self._server: grpc.Server | None = None
        self.address = ""

    def start(self) -> FakeP4RuntimeServer:
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        self._server.add_generic_rpc_handlers((service_handler(self.servicer),))
        port = self._server.add_insecure_port(f"127.0.0.1:{self._port}")
        self._port = port  # a restart reuses the same port
        self.address = f"127.0.0.1:{port}"
        self._server.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None).wait()
            self._server = None
        with self.servicer.lock:
            self.servicer.streams.clear()

    def __enter__(self) -> FakeP4RuntimeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- test controls ---------------------------------------------------------------
    def wipe(self) -> None:
        """Forget the pipeline and every entry, as a restarted switch would."""
        with self.servicer.lock:
            self.servicer.config = self.servicer.p4info = None
            self.servicer.entries.clear()
            self.servicer.defaults.clear()
            self.servicer.counters.clear()

    def set_counter(self, name: str, cells: Mapping[int, tuple[int, int]]) -> None:
        info = self.servicer.p4info
        if info is None:
            raise ConfigError("set the pipeline before setting counters")
        self.servicer.counters[info.counter_id(name)] = dict(cells)

    def table_entries(self, table: str) -> list[Any]:
        info = self.servicer.p4info
        if info is None:
            return []
        tid = info.table_id(table)
        entries = self.servicer.entries.items()
        return [m for k, m in entries if k[0] == "table" and m.table_id == tid]

    def update_types(self, table: str) -> list[str]:
        """The types (INSERT, MODIFY, DELETE) of every update written to ``table``."""
        info = self.servicer.p4info
        if info is None:
            return []
        tid = info.table_id(table)
        return [kind for kind, field, t in self.servicer.updates
                if field == "table_entry" and t == tid]

    def default_action(self, table: str) -> Any:
        info = self.servicer.p4info
        return None if info is None else self.servicer.defaults.get(info.table_id(table))

    def send_packet_in(self, payload: bytes, metadata: Mapping[int, bytes] | None = None) -> None:
        resp = p4runtime_pb2.StreamMessageResponse()
        resp.packet.payload = payload
        for mid, value in (metadata or {}).items():
            resp.packet.metadata.add(metadata_id=mid, value=value)
        with self.servicer.lock:
            for _, out in self.servicer.streams.values():
                out.put(resp)


class FakeThrift:
    """Stands in for ThriftClient in unit tests: queue settings and register arrays."""

    def __init__(self, registers: Mapping[str, int] | None = None) -> None:
        self.sizes = dict(registers or {})
        self.registers: dict[str, list[int]] = {k: [0] * n for k, n in self.sizes.items()}
        self.queue_rate: dict[int | None, float] = {}
        self.queue_depth: dict[int | None, int] = {}
        self.is_connected = False
        self.fail = False  # when True every call raises SwitchError (a dead switch)

    def _guard(self) -> None:
        from p4cc.errors import SwitchError

        if self.fail or not self.is_connected:
            raise SwitchError("fake thrift: not connected")

    def connect(self) -> None:
        from p4cc.errors import SwitchError

        if self.fail:
            raise SwitchError("fake thrift: switch does not answer")
        self.is_connected = True

    def close(self) -> None:
        self.is_connected = False

    def set_queue_rate(self, pps: float, port: int | None = None) -> None:
        self._guard()
        self.queue_rate[port] = pps

    def set_queue_depth(self, pkts: int, port: int | None = None) -> None:
        self._guard()
        self.queue_depth[port] = pkts

    def register_read_all(self, name: str) -> list[int]:
        self._guard()
        return list(self.registers[name])

    def register_reset(self, name: str) -> None:
        self._guard()
        self.registers[name] = [0] * self.sizes[name]

    def register_write(self, name: str, index: int, value: int) -> None:
        self._guard()
        self.registers[name][index] = value


#: P4Info of the control-plane test fixture and the register sizes FakeThrift serves for it
FIXTURE_P4INFO = Path(__file__).parent / "data" / "controlplane_p4info.txtpb"
FIXTURE_REGS = {"q_enq_sum": 64, "q_enq_cnt": 64, "q_enq_max": 64, "q_sojourn_sum": 64,
                "incast_bits": 256, "flow_bits": 256, "elephant_bits": 256,
                "flow_bytes_r0": 1024, "flow_bytes_r1": 1024}


def fake_fabric_controls(stack: Any, topo: Any, tmp_path: Path) -> tuple[
        dict[str, FakeP4RuntimeServer], dict[str, Any]]:
    """One FakeP4RuntimeServer (entered on ``stack``) and one SwitchControl over it and a
    FakeThrift per switch of ``topo``: a fabric's control plane without BMv2."""
    from p4cc.controlplane.p4runtime import P4RuntimeClient
    from p4cc.controlplane.switch import SwitchControl

    js = tmp_path / "p4cc.json"
    js.write_text("{}")
    servers: dict[str, FakeP4RuntimeServer] = {}
    controls: dict[str, Any] = {}
    for sw in topo.switches:
        srv = stack.enter_context(FakeP4RuntimeServer(device_id=sw.device_id))
        servers[sw.name] = srv
        controls[sw.name] = SwitchControl(
            sw, topo, FIXTURE_P4INFO, js, thrift=FakeThrift(FIXTURE_REGS),
            p4rt=P4RuntimeClient(srv.address, sw.device_id, timeout_s=0.5))
    return servers, controls
