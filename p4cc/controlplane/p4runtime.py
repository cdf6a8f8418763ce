"""A P4Runtime client for one switch (no module globals; one object per switch).

Structure after p4runtime-shell's ``p4runtime.py`` (p4lang/p4runtime-shell): a gRPC
channel, a StreamChannel kept open by a reader thread, primary ("master") arbitration
with an election id, and Write errors decoded from the ``grpc-status-details-bin``
trailer: a ``google.rpc.Status`` whose ``details`` hold one ``p4.v1.Error`` per update
(P4Runtime spec §12.3, "Error reporting").
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.rpc import code_pb2

from p4cc.controlplane.grpc_deadline import Draining, StreamStuck
from p4cc.controlplane.p4info import P4Info, Value, decode_value, encode_value, prefix_mask
from p4cc.controlplane.p4rt_proto import P4RuntimeStub, p4info_pb2, p4runtime_pb2
from p4cc.controlplane.p4runtime_errors import (  # noqa: F401 (re-exported)
    P4RuntimeWriteError,
    UpdateError,
    decode_write_error,
)
from p4cc.errors import ConfigError, SwitchError

log = logging.getLogger(__name__)

#: a match value: exact value, (value, prefix_len) for LPM, (value, mask) for ternary;
#: None (or prefix 0 / mask 0) leaves a ternary/LPM field out (don't care).
MatchValue = Value | tuple[Value, int] | tuple[Value, Value] | None


@dataclass(frozen=True)
class PacketIn:
    payload: bytes
    metadata: dict[str, int]


class P4RuntimeClient:
    """P4Runtime session to one switch; call :meth:`connect` first."""

    def __init__(self, address: str, device_id: int, election_id: tuple[int, int] = (0, 1),
                 timeout_s: float = 5.0) -> None:
        self.address = address
        self.device_id = device_id
        self.election_id = election_id
        self.timeout_s = timeout_s
        self.p4info: P4Info | None = None
        self._channel: grpc.Channel | None = None
        self._stub: P4RuntimeStub | None = None
        self._requests: queue.Queue[Any] = queue.Queue()
        self._packet_ins: queue.Queue[PacketIn] = queue.Queue()
        self._arbitrated = threading.Event()
        self._stream_alive = threading.Event()
        self._arbitration_status: Any = None
        self._stream_error = ""
        self._reader: threading.Thread | None = None

    # -- session ---------------------------------------------------------------------
    def connect(self) -> None:
        """Open the channel and stream and become primary; SwitchError if unreachable."""
        self.close()
        self._channel = grpc.insecure_channel(self.address)
        try:
            grpc.channel_ready_future(self._channel).result(timeout=self.timeout_s)
        except grpc.FutureTimeoutError:
            self.close()
            raise SwitchError(
                f"no P4Runtime server at {self.address} (device {self.device_id}) within "
                f"{self.timeout_s:g} s; is simple_switch_grpc running with --grpc-server-addr "
                f"{self.address}?"
            ) from None
        self._stub = P4RuntimeStub(self._channel)
        self._requests = queue.Queue()
        self._arbitrated.clear()
        self._arbitration_status = None
        self._stream_error = "stream ended"
        self._stream_alive.set()
        stream = self._stub.StreamChannel(self._request_iter(self._requests))
        self._reader = threading.Thread(target=self._read_stream, args=(stream,),
                                        name=f"p4rt-{self.address}", daemon=True)
        self._reader.start()
        req = p4runtime_pb2.StreamMessageRequest()
        arb = req.arbitration
        arb.device_id = self.device_id
        arb.election_id.high, arb.election_id.low = self.election_id
        self._requests.put(req)
        if not self._arbitrated.wait(self.timeout_s):
            self.close()
            raise SwitchError(f"P4Runtime arbitration with {self.address} timed out")
        if not self._stream_alive.is_set():
            reason = self._stream_error
            self.close()
            raise SwitchError(f"{self.address}: the P4Runtime stream closed during arbitration "
                              f"({reason}); is device id {self.device_id} right?")
        status = self._arbitration_status
        if status is not None and status.code != code_pb2.OK:
            self.close()
            raise SwitchError(
                f"{self.address}: not primary for device {self.device_id} ({status.message}); "
                "another controller holds a higher election id"
            )

    @staticmethod
    def _request_iter(q: queue.Queue[Any]) -> Iterator[Any]:
        while True:
            item = q.get()
            if item is None:
                return
            yield item

    def _read_stream(self, stream: Any) -> None:
        try:
            for msg in stream:
                kind = msg.WhichOneof("update")
                if kind == "arbitration":
                    self._arbitration_status = msg.arbitration.status
                    self._arbitrated.set()
                elif kind == "packet":
                    self._packet_ins.put(self._decode_packet_in(msg.packet))
                elif kind == "error":
                    log.warning("%s: stream error %s", self.address, msg.error)
        except grpc.RpcError as exc:
            self._stream_error = f"{exc.code()} {exc.details()}"
            if exc.code() != grpc.StatusCode.CANCELLED:
                log.warning("%s: P4Runtime stream ended: %s", self.address, self._stream_error)
        finally:
            self._stream_alive.clear()
            self._arbitrated.set()  # wake a waiting connect()

    def _decode_packet_in(self, pkt: Any) -> PacketIn:
        names = self.p4info.packet_metadata("packet_in") if self.p4info else {}
        meta = {names.get(m.metadata_id, (str(m.metadata_id), 0))[0]: decode_value(m.value)
                for m in pkt.metadata}
        return PacketIn(bytes(pkt.payload), meta)

    @property
    def connected(self) -> bool:
        return self._stub is not None and self._stream_alive.is_set()

    def close(self) -> None:
        self._requests.put(None)
        if self._channel is not None:
            self._channel.close()
        if self._reader is not None:
            self._reader.join(timeout=self.timeout_s)
        self._channel = self._stub = self._reader = None
        self._stream_alive.clear()

    def __enter__(self) -> P4RuntimeClient:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- pipeline --------------------------------------------------------------------
    @property
    def stub(self) -> P4RuntimeStub:
        if self._stub is None or not self._stream_alive.is_set():
            raise SwitchError(f"P4Runtime session to {self.address} is not connected")
        return self._stub

    def _election(self, msg: Any) -> None:
        msg.election_id.high, msg.election_id.low = self.election_id

    def load_p4info(self, p4info_path: str | Path) -> P4Info:
        self.p4info = P4Info.from_file(p4info_path)
        return self.p4info

    def set_pipeline(self, p4info_path: str | Path, bmv2_json_path: str | Path,
                     device_config: bytes | None = None) -> None:
        """Push P4Info and the BMv2 JSON (or ``device_config``, its bytes as prepared by
        p4cc.controlplane.bmv2config, instead of the file's)."""
        info = self.load_p4info(p4info_path)
        json_path = Path(bmv2_json_path)
        if device_config is None and not json_path.is_file():
            raise ConfigError(f"BMv2 JSON {json_path} not found; build it with `make p4`")
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        self._election(req)
        req.config.p4info.CopyFrom(info.msg)
        req.config.p4_device_config = (json_path.read_bytes() if device_config is None
                                       else device_config)
        try:
            self.stub.SetForwardingPipelineConfig(req, timeout=self.timeout_s)
        except grpc.RpcError as exc:
            raise SwitchError(f"{self.address}: pipeline push failed: {exc.code()} "
                              f"{exc.details()}") from None

    def get_p4info(self) -> Any:
        """The switch's P4Info, or None if it has no pipeline (e.g. it was restarted)."""
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=self.device_id)
        try:
            resp = self.stub.GetForwardingPipelineConfig(req, timeout=self.timeout_s)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.FAILED_PRECONDITION:
                return None
            raise SwitchError(f"{self.address}: reading the pipeline failed: {exc.code()} "
                              f"{exc.details()}") from None
        return resp.config.p4info if resp.config.p4info.tables else None

    # -- writes ----------------------------------------------------------------------
    def write(self, updates: Sequence[Any]) -> None:
        if not updates:
            return
        req = p4runtime_pb2.WriteRequest(device_id=self.device_id)
        self._election(req)
        req.updates.extend(updates)
        try:
            self.stub.Write(req, timeout=self.timeout_s)
        except grpc.RpcError as exc:
            raise P4RuntimeWriteError(self.address, decode_write_error(exc),
                                      f"{exc.code()} {exc.details()}") from None

    def _info(self) -> P4Info:
        if self.p4info is None:
            raise ConfigError("no P4Info loaded: call set_pipeline() or load_p4info() first")
        return self.p4info

    def table_entry(self, table: str, match: Mapping[str, MatchValue], action: str | None,
                    params: Mapping[str, Value] | None = None, priority: int = 0) -> Any:
        """Build a ``p4.v1.TableEntry`` from short names and plain values."""
        info = self._info()
        t = info.table(table)
        entry = p4runtime_pb2.TableEntry(table_id=t.preamble.id, priority=priority)
        given = set()
        for key, value in match.items():
            mf = info.match_field(table, key)
            given.add(mf.name)
            fm = _field_match(mf, value, f"{t.preamble.name} {mf.name}")
            if fm is not None:
                entry.match.append(fm)
        exact = p4info_pb2.MatchField.MatchType.EXACT
        missing = [mf.name for mf in t.match_fields
                   if mf.match_type == exact and mf.name not in given]
        if match and missing:
            # an entry names all of its table's exact fields (P4Runtime has no wildcard
            # for them); only a default entry (empty match) names none
            raise ConfigError(f"table {t.preamble.name} needs key fields {missing}")
        if action is not None:
            info.check_action_of(table, action)
            entry.action.action.CopyFrom(self.action(action, params or {}))
        return entry

    def action(self, action: str, params: Mapping[str, Value]) -> Any:
        info = self._info()
        a = info.action(action)
        msg = p4runtime_pb2.Action(action_id=a.preamble.id)
        given = {info.action_param(action, k).name: v for k, v in params.items()}
        missing = [p.name for p in a.params if p.name not in given]
        if missing:
            raise ConfigError(f"action {a.preamble.name} needs parameters {missing}")
        for p in a.params:
            msg.params.add(param_id=p.id, value=encode_value(
                given[p.name], p.bitwidth, f"{a.preamble.name}({p.name})"))
        return msg

    @staticmethod
    def update(kind: str, entity_field: str, entity: Any) -> Any:
        upd = p4runtime_pb2.Update(type=p4runtime_pb2.Update.Type.Value(kind))
        getattr(upd.entity, entity_field).CopyFrom(entity)
        return upd

    def insert_entry(self, table: str, match: Mapping[str, MatchValue], action: str,
                     params: Mapping[str, Value] | None = None, priority: int = 0) -> None:
        self.write([self.update("INSERT", "table_entry",
                                self.table_entry(table, match, action, params, priority))])

    def modify_entry(self, table: str, match: Mapping[str, MatchValue], action: str,
                     params: Mapping[str, Value] | None = None, priority: int = 0) -> None:
        self.write([self.update("MODIFY", "table_entry",
                                self.table_entry(table, match, action, params, priority))])

    def delete_entry(self, table: str, match: Mapping[str, MatchValue],
                     priority: int = 0) -> None:
        self.write([self.update("DELETE", "table_entry",
                                self.table_entry(table, match, None, None, priority))])

    def set_default_action(self, table: str, action: str,
                           params: Mapping[str, Value] | None = None) -> None:
        entry = self.table_entry(table, {}, action, params)
        entry.is_default_action = True
        self.write([self.update("MODIFY", "table_entry", entry)])

    def add_clone_session(self, session_id: int, ports: Sequence[int]) -> None:
        """Create (or, if it exists, rewrite) clone session ``session_id`` to ``ports``."""
        pre = p4runtime_pb2.PacketReplicationEngineEntry()
        cs = pre.clone_session_entry
        cs.session_id = session_id
        for port in ports:
            cs.replicas.add(egress_port=port, instance=1)
        try:
            self.write([self.update("INSERT", "packet_replication_engine_entry", pre)])
        except P4RuntimeWriteError as exc:
            if not any(e.code == code_pb2.ALREADY_EXISTS for e in exc.errors):
                raise
            self.write([self.update("MODIFY", "packet_replication_engine_entry", pre)])

    # -- reads -----------------------------------------------------------------------
    def read(self, entities: Sequence[Any]) -> Iterator[Any]:
        yield from self.start_read(entities)()

    def start_read(self, entities: Sequence[Any]) -> Callable[[], list[Any]]:
        """Send a ReadRequest now; the returned function waits for its entities (or
        raises SwitchError).  The caller may do other work in between: the telemetry
        poll reads the Thrift registers while the counters are on their way."""
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        req.entities.extend(entities)
        try:  # (drained with a deadline of ours: p4cc.controlplane.grpc_deadline says why)
            pending = Draining(self.stub.Read(req, timeout=self.timeout_s), self.timeout_s)
        except grpc.RpcError as exc:
            raise SwitchError(f"{self.address}: Read failed: {exc.code()} "
                              f"{exc.details()}") from None

        def collect() -> list[Any]:
            try:
                responses = pending.result()
            except StreamStuck as exc:
                raise SwitchError(f"{self.address}: Read: {exc}") from None
            except grpc.RpcError as exc:
                raise SwitchError(f"{self.address}: Read failed: {exc.code()} "
                                  f"{exc.details()}") from None
            return [e for resp in responses for e in resp.entities]
        return collect

    def read_counters(self, name: str) -> dict[int, tuple[int, int]]:
        """All cells of counter ``name``: index -> (packets, bytes) (one wildcard read)."""
        return self.read_counters_many([name])[name]

    def read_counters_many(self, names: Sequence[str]) -> dict[str, dict[int, tuple[int, int]]]:
        """Several counters in one ReadRequest: name -> index -> (packets, bytes)."""
        return self.start_read_counters_many(names)()

    def start_read_counters_many(
            self, names: Sequence[str]) -> Callable[[], dict[str, dict[int, tuple[int, int]]]]:
        """:meth:`read_counters_many`, sent now and collected by the returned function
        (see :meth:`start_read`)."""
        info = self._info()
        ids = {info.counter_id(n): n for n in names}
        ents = []
        for cid in ids:
            ent = p4runtime_pb2.Entity()
            ent.counter_entry.counter_id = cid
            ents.append(ent)
        collect = self.start_read(ents)

        def counters() -> dict[str, dict[int, tuple[int, int]]]:
            out: dict[str, dict[int, tuple[int, int]]] = {n: {} for n in names}
            for e in collect():
                ce = e.counter_entry
                out[ids[ce.counter_id]][int(ce.index.index)] = (int(ce.data.packet_count),
                                                                int(ce.data.byte_count))
            return out
        return counters

    def read_table(self, table: str) -> list[Any]:
        ent = p4runtime_pb2.Entity()
        ent.table_entry.table_id = self._info().table_id(table)
        return [e.table_entry for e in self.read([ent])]

    def packet_ins(self) -> queue.Queue[PacketIn]:
        """The queue PacketIns arrive on (payload + metadata by name)."""
        return self._packet_ins


def _field_match(mf: Any, value: MatchValue, what: str) -> Any | None:
    mt = p4info_pb2.MatchField.MatchType
    bw = mf.bitwidth
    fm = p4runtime_pb2.FieldMatch(field_id=mf.id)
    kind = mf.match_type
    if value is None:
        if kind == mt.Value("EXACT"):
            raise ConfigError(f"{what}: an exact match field needs a value")
        return None
    if kind == mt.Value("EXACT"):
        if isinstance(value, tuple):
            raise ConfigError(f"{what}: exact match takes a plain value, got {value!r}")
        fm.exact.value = encode_value(value, bw, what)
    elif kind == mt.Value("LPM"):
        if not (isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], int)):
            raise ConfigError(f"{what}: LPM match takes (value, prefix_len), got {value!r}")
        plen = value[1]
        if plen == 0:
            return None  # P4Runtime: a zero-length prefix is expressed by omitting the field
        number = decode_value(encode_value(value[0], bw, what)) & prefix_mask(plen, bw)
        fm.lpm.value = encode_value(number, bw, what)
        fm.lpm.prefix_len = plen
    elif kind == mt.Value("TERNARY"):
        if not (isinstance(value, tuple) and len(value) == 2):
            raise ConfigError(f"{what}: ternary match takes (value, mask), got {value!r}")
        mask = decode_value(encode_value(value[1], bw, what))
        if mask == 0:
            return None
        number = decode_value(encode_value(value[0], bw, what)) & mask
        fm.ternary.value = encode_value(number, bw, what)
        fm.ternary.mask = encode_value(mask, bw, what)
    else:
        raise ConfigError(f"{what}: match type {mt.Name(kind)} is not supported by p4cc")
    return fm
