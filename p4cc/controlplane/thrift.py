"""BMv2's Thrift runtime API: what simple_switch_grpc serves only over Thrift.

REFERENCE §1: queue rate (packets/s) and depth (packets) and register read/write are
Thrift-only on BMv2; simple_switch_grpc built without Thrift accepts ``--thrift-port``
and ignores it.  The Thrift client modules are generated and installed by BMv2
(``bm_runtime.standard.Standard``, ``sswitch_runtime.SimpleSwitch``, multiplexed as
services ``"standard"`` and ``"simple_switch"``, as in BMv2's runtime_CLI); the
``thrift`` package provides the transport.  Nothing of BMv2 is vendored here.
"""

from __future__ import annotations

import glob
import importlib
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from p4cc.controlplane.p4info import pick
from p4cc.errors import ConfigError, SwitchError, ToolMissingError

_MODULES = ("bm_runtime.standard.Standard", "sswitch_runtime.SimpleSwitch")


def _search_dirs() -> list[str]:
    dirs = []
    extra = os.environ.get("P4CC_BMV2_PYTHONPATH", "")
    dirs += [d for d in extra.split(os.pathsep) if d]
    for pattern in ("/usr/local/lib/python3*/site-packages",
                    "/usr/local/lib/python3*/dist-packages",
                    "/usr/lib/python3/dist-packages"):
        dirs += sorted(glob.glob(pattern))
    return dirs


def load_runtime_modules() -> tuple[ModuleType, ModuleType]:
    """Import BMv2's generated Thrift clients; ToolMissingError names what is missing."""
    try:
        return importlib.import_module(_MODULES[0]), importlib.import_module(_MODULES[1])
    except ImportError:
        pass
    for d in _search_dirs():
        if (Path(d) / "bm_runtime").is_dir() and (Path(d) / "sswitch_runtime").is_dir():
            if d not in sys.path:
                sys.path.append(d)
            try:
                return (importlib.import_module(_MODULES[0]),
                        importlib.import_module(_MODULES[1]))
            except ImportError:
                continue
    raise ToolMissingError(
        "BMv2's Thrift runtime modules (bm_runtime, sswitch_runtime) were not found in "
        f"sys.path or {_search_dirs()}; install BMv2 configured --with-thrift "
        "(or point P4CC_BMV2_PYTHONPATH at the directory holding them)"
    )


def register_arrays(bmv2_json: str | Path) -> dict[str, int]:
    """Register array name -> bitwidth from a BMv2 JSON."""
    data = json.loads(Path(bmv2_json).read_text(encoding="utf-8"))
    return {r["name"]: int(r["bitwidth"]) for r in data.get("register_arrays", [])}


def register_sizes(bmv2_json: str | Path) -> dict[str, int]:
    """Register array name -> number of cells from a BMv2 JSON."""
    data = json.loads(Path(bmv2_json).read_text(encoding="utf-8"))
    return {r["name"]: int(r["size"]) for r in data.get("register_arrays", [])}


class ThriftClient:
    """Thrift session to one simple_switch(_grpc): queues and registers."""

    def __init__(self, address: str = "127.0.0.1:9090", bmv2_json: str | Path | None = None,
                 timeout_s: float = 5.0) -> None:
        host, _, port = address.rpartition(":")
        self.host, self.port = host or "127.0.0.1", int(port)
        self.address = f"{self.host}:{self.port}"
        self.timeout_s = timeout_s
        self.registers: dict[str, int] = register_arrays(bmv2_json) if bmv2_json else {}
        self.register_sizes: dict[str, int] = register_sizes(bmv2_json) if bmv2_json else {}
        self._transport: Any = None
        self.standard: Any = None
        self.sswitch: Any = None

    def connect(self) -> None:
        standard_mod, sswitch_mod = load_runtime_modules()
        from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
        from thrift.transport import TSocket, TTransport

        sock = TSocket.TSocket(self.host, self.port)
        sock.setTimeout(int(self.timeout_s * 1000))
        transport = TTransport.TBufferedTransport(sock)
        # The accelerated protocol decodes BMv2's generated structs in C (the `thrift`
        # package's fastbinary; it falls back to pure Python without it): a whole-array
        # read of 1024 cells took 0.33 instead of 0.66 ms (epoch telemetry reads three
        # such bitmaps per poll; docs/benchmarks.md, controlloop).
        proto = TBinaryProtocol.TBinaryProtocolAccelerated(transport)
        try:
            transport.open()
            self.standard = standard_mod.Client(
                TMultiplexedProtocol.TMultiplexedProtocol(proto, "standard"))
            self.sswitch = sswitch_mod.Client(
                TMultiplexedProtocol.TMultiplexedProtocol(proto, "simple_switch"))
            self.standard.bm_mgmt_get_info()  # proves the server speaks BMv2's API
        except Exception as exc:  # TTransportException, socket errors
            transport.close()
            self.standard = self.sswitch = None
            raise SwitchError(
                f"the switch does not answer on its Thrift port {self.address} ({exc}); "
                "either it is not running, or simple_switch_grpc was built without Thrift "
                "(it then ignores --thrift-port, REFERENCE §1): rebuild BMv2 configured "
                "--with-thrift to set queue rate/depth and read registers"
            ) from None
        self._transport = transport

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
        self._transport = self.standard = self.sswitch = None

    def __enter__(self) -> ThriftClient:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        return self._transport is not None

    def _call(self, what: str, service: str, method: str, *args: Any) -> Any:
        if self._transport is None:
            raise SwitchError(f"Thrift session to {self.address} is not connected")
        try:
            return getattr(getattr(self, service), method)(*args)
        except Exception as exc:
            if type(exc).__name__.startswith("Invalid"):  # InvalidRegisterOperation etc.
                raise SwitchError(f"{self.address}: {what} refused: {exc!r}") from None
            self.close()
            raise SwitchError(f"{self.address}: Thrift {what} failed: {exc}") from None

    # -- queues ----------------------------------------------------------------------
    def set_queue_rate(self, pps: float, port: int | None = None) -> None:
        """Egress queue service rate in packets/s (all ports if ``port`` is None)."""
        rate = max(1, round(pps))
        if port is None:
            self._call("set_all_egress_queue_rates", "sswitch", "set_all_egress_queue_rates", rate)
        else:
            self._call("set_egress_queue_rate", "sswitch", "set_egress_queue_rate", port, rate)

    def set_queue_depth(self, pkts: int, port: int | None = None) -> None:
        """Egress queue capacity in packets (all ports if ``port`` is None)."""
        if pkts < 1:
            raise ConfigError(f"queue depth must be >= 1 packet, got {pkts}")
        if port is None:
            self._call("set_all_egress_queue_depths",
                       "sswitch", "set_all_egress_queue_depths", int(pkts))
        else:
            self._call("set_egress_queue_depth", "sswitch", "set_egress_queue_depth", port,
                       int(pkts))

    # -- registers -------------------------------------------------------------------
    def register_name(self, name: str) -> str:
        return pick("register", self.registers, name) if self.registers else name

    def register_read_all(self, name: str) -> list[int]:
        full = self.register_name(name)
        values = self._call(f"register_read_all({full})", "standard", "bm_register_read_all",
                            0, full)
        # BmRegisterValue is a signed i64 in the IDL: undo the sign for wide registers
        width = min(64, self.registers.get(full, 64))
        mask = (1 << width) - 1
        return [int(v) & mask for v in values]

    def register_reset(self, name: str) -> None:
        full = self.register_name(name)
        size = self.register_sizes.get(full)
        if size:
            # Not bm_register_reset: BMv2's RegisterArray::reset_state() swaps in a new
            # array without holding the register lock (src/bm_sim/stateful.cpp:
            # `auto lock = UniqueLock();` owns no mutex), racing the data plane; under
            # traffic simple_switch_grpc aborted in gmp_int::str or segfaulted in libgmp.
            # register_write_range holds the lock (src/bm_sim/context.cpp).
            self._call(f"register_reset({full})", "standard", "bm_register_write_range", 0,
                       full, 0, size, 0)
            return
        self._call(f"register_reset({full})", "standard", "bm_register_reset", 0, full)

    def register_write(self, name: str, index: int, value: int) -> None:
        full = self.register_name(name)
        width = self.registers.get(full, 64)
        if not 0 <= value < (1 << width):
            raise ConfigError(f"value {value} does not fit register {full} ({width} bits)")
        if value >= 1 << 63:
            value -= 1 << 64  # the IDL's i64
        self._call(f"register_write({full})", "standard", "bm_register_write", 0, full,
                   index, value)
