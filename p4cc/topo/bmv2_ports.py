"""A BMv2 switch's control ports on 127.0.0.1 (gRPC, Thrift), seen from outside it.

Used by p4cc.topo.bmv2.Bmv2Process: :func:`free_port` picks ports nothing listens on,
:func:`owns_listener` tells whether the switch's process itself listens on one (from
``/proc``), and :func:`thrift_ping` makes the one real Thrift call that shows the
``simple_switch`` service answers.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from p4cc.errors import SwitchError

#: the address the switches' control ports listen on
LOCAL = "127.0.0.1"


def free_port(avoid: set[int] | None = None) -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (kernel-chosen)."""
    avoid = avoid or set()
    for _ in range(64):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((LOCAL, 0))
            port = int(s.getsockname()[1])
        if port not in avoid:
            return port
    raise SwitchError("could not find a free TCP port on 127.0.0.1")


def listen_inodes(pid: int, port: int) -> set[str]:
    """Socket inodes in LISTEN state on ``port`` in the network namespace of ``pid``."""
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(cols[9])
    return inodes


def owns_listener(pid: int, port: int) -> bool:
    """True if process ``pid`` itself holds a listening socket on ``port``."""
    inodes = listen_inodes(pid, port)
    if not inodes:
        return False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:[") and link[8:-1] in inodes:
            return True
    return False


def thrift_ping(port: int, host: str = LOCAL, timeout_s: float = 2.0) -> int:
    """Call ``simple_switch:get_time_elapsed_us`` over Thrift; return the switch's clock (µs).

    Hand-written with the ``thrift`` runtime's binary protocol so that the check needs
    neither BMv2's generated Python modules nor the control-plane client (the method
    is in behavioral-model ``targets/simple_switch/thrift/simple_switch.thrift``).
    """
    from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
    from thrift.Thrift import TApplicationException, TMessageType, TType
    from thrift.transport import TSocket, TTransport

    sock = TSocket.TSocket(host, port)
    sock.setTimeout(int(timeout_s * 1000))
    trans = TTransport.TBufferedTransport(sock)
    trans.open()
    try:
        base = TBinaryProtocol.TBinaryProtocol(trans)
        proto = TMultiplexedProtocol.TMultiplexedProtocol(base, "simple_switch")
        proto.writeMessageBegin("get_time_elapsed_us", TMessageType.CALL, 1)
        proto.writeStructBegin("get_time_elapsed_us_args")
        proto.writeFieldStop()
        proto.writeStructEnd()
        proto.writeMessageEnd()
        trans.flush()
        _name, mtype, _seq = base.readMessageBegin()
        if mtype == TMessageType.EXCEPTION:
            exc = TApplicationException()
            exc.read(base)
            raise SwitchError(f"Thrift call on port {port} failed: {exc}")
        value: int | None = None
        base.readStructBegin()
        while True:
            _fname, ftype, fid = base.readFieldBegin()
            if ftype == TType.STOP:
                break
            if fid == 0 and ftype == TType.I64:
                value = int(base.readI64())
            else:
                base.skip(ftype)
            base.readFieldEnd()
        base.readStructEnd()
        base.readMessageEnd()
    finally:
        trans.close()
    if value is None:
        raise SwitchError(f"Thrift on port {port} answered without a result")
    return value
