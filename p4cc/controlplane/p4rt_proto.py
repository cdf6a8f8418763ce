"""P4Runtime protobuf message classes and gRPC stubs, without importing p4runtime's modules.

The PyPI ``p4runtime==1.6.0`` wheel ships ``*_pb2.py`` files generated for protobuf 3.x
(``_descriptor.FileDescriptor(..., serialized_pb=b'...')``); with protobuf >= 4 they
fail to import (REFERENCE §1).  The serialized ``FileDescriptorProto`` inside them is
still valid, so this module reads that literal with :mod:`ast` (the files are parsed,
never executed), adds the descriptors to protobuf's default pool after their
dependencies (``google/protobuf/any.proto``, ``google/rpc/status.proto``), and builds
message classes with ``message_factory.GetMessageClass``.

The gRPC service ``p4.v1.P4Runtime`` is small; its stub is written out by hand below
with ``channel.unary_unary`` etc., method paths as in ``p4/v1/p4runtime.proto``.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc
from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory
from google.rpc import code_pb2, status_pb2

from p4cc.errors import ToolMissingError

# Load order matters: each file after the files it imports.
_DEPENDENCIES = (any_pb2, status_pb2, code_pb2)
_FILES = (
    ("p4/config/v1/p4types.proto", "config/v1/p4types_pb2.py"),
    ("p4/config/v1/p4info.proto", "config/v1/p4info_pb2.py"),
    ("p4/v1/p4data.proto", "v1/p4data_pb2.py"),
    ("p4/v1/p4runtime.proto", "v1/p4runtime_pb2.py"),
)


def _p4_package_dir() -> Path:
    spec = importlib.util.find_spec("p4")  # imports only p4/__init__.py (empty)
    if spec is None or not spec.submodule_search_locations:
        raise ToolMissingError(
            "the P4Runtime protobuf definitions are missing; install them with "
            "`.venv/bin/pip install p4runtime==1.6.0`"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def serialized_descriptor(py_file: Path) -> bytes:
    """The ``serialized_pb=b'...'`` literal of a protoc-generated module (not executed)."""
    tree = ast.parse(py_file.read_text(encoding="utf-8"), filename=str(py_file))
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "serialized_pb":
            value = node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, bytes):
                return value.value
        # protobuf >= 3.20 generators use AddSerializedFile(b'...') instead
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "AddSerializedFile" and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, bytes)):
            return node.args[0].value
    raise ToolMissingError(f"no serialized descriptor found in {py_file}; reinstall p4runtime")


def _load_pool() -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.Default()
    # the dependencies were registered in this pool by importing their generated modules
    for dep in _DEPENDENCIES:
        pool.FindFileByName(dep.DESCRIPTOR.name)
    base = _p4_package_dir()
    for proto_name, rel in _FILES:
        try:
            pool.FindFileByName(proto_name)
            continue  # already present (e.g. loaded by another copy of this module)
        except KeyError:
            pass
        fdp = descriptor_pb2.FileDescriptorProto.FromString(serialized_descriptor(base / rel))
        pool.Add(fdp)
    return pool


_POOL = _load_pool()


def message_class(full_name: str) -> Any:
    """The message class of ``full_name`` (e.g. ``"p4.v1.WriteRequest"``)."""
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(full_name))


def _namespace(proto_name: str) -> SimpleNamespace:
    fd = _POOL.FindFileByName(proto_name)
    ns = SimpleNamespace(DESCRIPTOR=fd)
    for name, desc in fd.message_types_by_name.items():
        setattr(ns, name, message_factory.GetMessageClass(desc))
    for name, enum in fd.enum_types_by_name.items():
        setattr(ns, name, enum)
        for value in enum.values:
            setattr(ns, value.name, value.number)
    return ns


#: ``p4runtime_pb2.WriteRequest`` etc., like the generated module would offer.
p4runtime_pb2: Any = _namespace("p4/v1/p4runtime.proto")
p4data_pb2: Any = _namespace("p4/v1/p4data.proto")
p4info_pb2: Any = _namespace("p4/config/v1/p4info.proto")
p4types_pb2: Any = _namespace("p4/config/v1/p4types.proto")

_SERVICE = "/p4.v1.P4Runtime/"

#: name -> (kind, request type, response type); from ``service P4Runtime`` in p4runtime.proto
METHODS: dict[str, tuple[str, str, str]] = {
    "Write": ("unary_unary", "WriteRequest", "WriteResponse"),
    "Read": ("unary_stream", "ReadRequest", "ReadResponse"),
    "SetForwardingPipelineConfig": (
        "unary_unary", "SetForwardingPipelineConfigRequest", "SetForwardingPipelineConfigResponse"
    ),
    "GetForwardingPipelineConfig": (
        "unary_unary", "GetForwardingPipelineConfigRequest", "GetForwardingPipelineConfigResponse"
    ),
    "StreamChannel": ("stream_stream", "StreamMessageRequest", "StreamMessageResponse"),
    "Capabilities": ("unary_unary", "CapabilitiesRequest", "CapabilitiesResponse"),
}


class P4RuntimeStub:
    """Client stub of ``p4.v1.P4Runtime`` (hand-written, same calls as the generated one)."""

    def __init__(self, channel: grpc.Channel) -> None:
        for name, (kind, req, resp) in METHODS.items():
            factory = getattr(channel, kind)
            setattr(self, name, factory(
                _SERVICE + name,
                request_serializer=getattr(p4runtime_pb2, req).SerializeToString,
                response_deserializer=getattr(p4runtime_pb2, resp).FromString,
            ))

    # declared for type checkers; set in __init__
    Write: Any
    Read: Any
    SetForwardingPipelineConfig: Any
    GetForwardingPipelineConfig: Any
    StreamChannel: Any
    Capabilities: Any


def service_handler(servicer: Any) -> grpc.GenericRpcHandler:
    """A generic handler serving ``servicer``'s methods named as in :data:`METHODS`."""
    handlers = {}
    for name, (kind, req, resp) in METHODS.items():
        fn = getattr(servicer, name, None)
        if fn is None:
            continue
        make = getattr(grpc, f"{kind}_rpc_method_handler")
        handlers[name] = make(
            fn,
            request_deserializer=getattr(p4runtime_pb2, req).FromString,
            response_serializer=getattr(p4runtime_pb2, resp).SerializeToString,
        )
    return grpc.method_handlers_generic_handler("p4.v1.P4Runtime", handlers)


def parse_p4info(text: str) -> Any:
    """Parse a P4Info in protobuf text format (``*.p4info.txtpb``)."""
    from google.protobuf import text_format

    msg = p4info_pb2.P4Info()
    text_format.Parse(text, msg)
    return msg
