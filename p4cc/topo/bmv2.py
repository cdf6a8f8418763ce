"""One BMv2 ``simple_switch_grpc`` process: start, wait until it serves, stop by PID.

Used by the Mininet builder (p4cc.topo.build) and, without Mininet, by data-plane
tests on plain veth pairs.  The switch starts with ``--no-p4``: the pipeline is pushed
later over P4Runtime (p4cc.controlplane).  Facts this relies on (REFERENCE §1):

* ``--thrift-port`` is silently ignored by a build without Thrift, and queue rate/depth
  and registers are Thrift-only, so after start we make one real Thrift call.
* logging and pcap slow BMv2 down by an order of magnitude, so both are off unless asked.
* the CPU port (PacketIn/PacketOut) is 510 (docs/architecture.md).

The checks ``start()`` waits on (the process listens on its ports, Thrift answers) and
the choice of free ports are in p4cc.topo.bmv2_ports.

Command-line options are those of behavioral-model's ``OptionsParser``
(``src/bm_sim/options_parse.cpp``) and ``targets/simple_switch_grpc/main.cpp``: general
options first, then ``--`` and the target's own (``--grpc-server-addr``, ``--cpu-port``).
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from p4cc.constants import CPU_PORT
from p4cc.errors import SwitchError, ToolMissingError
from p4cc.topo.bmv2_ports import LOCAL as _LOCAL
from p4cc.topo.bmv2_ports import free_port, thrift_ping
from p4cc.topo.bmv2_ports import owns_listener as _owns_listener

BINARY = "simple_switch_grpc"
INSTALL_HINT = (
    "install BMv2 with P4Runtime and Thrift support: on Ubuntu the p4lang project's "
    "prebuilt package p4lang-bmv2 (the Vagrantfile does this), elsewhere build "
    "p4lang/PI and p4lang/behavioral-model from source (configure --with-pi --with-thrift, "
    "then targets/simple_switch_grpc) and install under /usr/local; see README.md. "
    "`p4cc doctor` shows what is present"
)
#: egress priority queues per port: 0 data, 1 control packets (p4src forwarding.p4).
#: BMv2 gives each its own rate limiter; the Thrift queue rate/depth calls without a
#: priority set both (bm_sim queueing.h, QueueingLogicPriRL::set_rate/set_capacity).
PRIORITY_QUEUES = 2


def find_binary(name: str = BINARY) -> str:
    """Absolute path of ``name`` on PATH (or ``name`` itself if it is a path)."""
    if os.sep in name and os.access(name, os.X_OK):
        return name
    path = shutil.which(name)
    if path is None:
        raise ToolMissingError(f"{name} not found on PATH: {INSTALL_HINT}")
    return path


@functools.lru_cache(maxsize=8)
def binary_options(path: str) -> frozenset[str]:
    """The long options ``path --help`` lists (tells whether Thrift/nanomsg are built in)."""
    try:
        out = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SwitchError(f"cannot run {path} --help: {exc}; reinstall BMv2 ({INSTALL_HINT})") \
            from exc
    words = (out.stdout + out.stderr).replace(",", " ").split()
    return frozenset(w[2:].split("=")[0] for w in words if w.startswith("--"))


class Bmv2Process:
    """One ``simple_switch_grpc``; ``start()`` returns once gRPC and Thrift both serve.

    ``interfaces`` maps BMv2 port numbers to interface names.  Ports left as ``None``
    are picked free on 127.0.0.1 (useful to tests running in parallel).  With
    ``netns_pid`` the switch runs in that process's network namespace (``nsenter``);
    its control ports are then only reachable from inside it, and the Thrift check is
    skipped (the listen check still runs).
    """

    def __init__(
        self,
        name: str,
        device_id: int,
        interfaces: Mapping[int, str],
        *,
        grpc_port: int | None = None,
        thrift_port: int | None = None,
        cpu_port: int = CPU_PORT,
        log_file: str | Path | None = None,
        log_level: str = "info",
        pcap_dir: str | Path | None = None,
        netns_pid: int | None = None,
        out_dir: str | Path | None = None,
        binary: str = BINARY,
        start_timeout_s: float = 30.0,
    ) -> None:
        if not isinstance(device_id, int) or device_id < 0:
            raise SwitchError(f"{name}: device_id must be a non-negative integer, got {device_id}")
        for port, ifname in interfaces.items():
            if not 0 < port < 511 or port == cpu_port:
                raise SwitchError(
                    f"{name}: port {port} ({ifname}) must be in 1..510 and not the CPU port "
                    f"{cpu_port}"
                )
        self.name = name
        self.device_id = device_id
        self.interfaces = dict(sorted(interfaces.items()))
        self._auto_ports = grpc_port is None or thrift_port is None
        self.grpc_port = grpc_port if grpc_port is not None else free_port()
        self.thrift_port = (
            thrift_port if thrift_port is not None else free_port({self.grpc_port})
        )
        self.cpu_port = cpu_port
        self.log_file = Path(log_file) if log_file else None
        self.log_level = log_level
        self.pcap_dir = Path(pcap_dir) if pcap_dir else None
        self.netns_pid = netns_pid
        self.out_dir = Path(out_dir) if out_dir else None
        self.binary = binary
        self.start_timeout_s = start_timeout_s
        self.out_path: Path | None = None  # the process's stdout+stderr
        self._proc: subprocess.Popen[bytes] | None = None
        self._keep_out = False

    # -- command line ----------------------------------------------------------------
    @property
    def grpc_addr(self) -> str:
        return f"{_LOCAL}:{self.grpc_port}"

    def command(self, binary_path: str | None = None,
                options: frozenset[str] | None = None) -> list[str]:
        """The argv that ``start()`` runs (``options``: what the binary supports)."""
        cmd: list[str] = []
        if self.netns_pid is not None:
            cmd += ["nsenter", f"--net=/proc/{self.netns_pid}/ns/net", "--"]
        cmd += [binary_path or self.binary, "--device-id", str(self.device_id)]
        for port, ifname in self.interfaces.items():
            cmd += ["-i", f"{port}@{ifname}"]
        cmd += ["--thrift-port", str(self.thrift_port)]
        if options is not None and "notifications-addr" in options:
            # default is ipc:///tmp/bmv2-<device-id>-notifications.ipc, shared by every
            # switch with the same id (parallel tests): make it unique per process.
            cmd += ["--notifications-addr",
                    f"ipc:///tmp/p4cc-bmv2-{self.thrift_port}-notifications.ipc"]
        if self.log_file is not None:
            cmd += ["--log-file", str(self.log_file), "--log-level", self.log_level,
                    "--log-flush"]
        else:
            # BMv2's default level is trace even with no log sink: it formats every
            # per-packet message and drops it, costing 2-3x throughput (docs/dataplane.md).
            cmd += ["--log-level", "off"]
        if self.pcap_dir is not None:
            cmd += ["--pcap", str(self.pcap_dir)]
        cmd += ["--no-p4", "--", "--grpc-server-addr", self.grpc_addr,
                "--cpu-port", str(self.cpu_port)]
        if options is not None and "priority-queues" in options:  # a target option
            # control packets (DSCP 48) in their own queue per port (p4src forwarding.p4)
            cmd += ["--priority-queues", str(PRIORITY_QUEUES)]
        return cmd

    # -- lifecycle -------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def is_alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> Bmv2Process:
        if self._proc is not None:
            raise SwitchError(f"{self.name}: already started (pid {self.pid})")
        path = find_binary(self.binary)
        options = binary_options(path)
        if "thrift-port" not in options:
            raise SwitchError(
                f"{path} was built without Thrift (no --thrift-port option): p4cc sets queue "
                "rate/depth and reads registers over Thrift; rebuild behavioral-model with "
                f"`configure --with-thrift --with-pi` ({INSTALL_HINT})"
            )
        if "priority-queues" not in options:
            raise SwitchError(
                f"{path} has no --priority-queues option: p4cc's program puts control "
                "packets (DSCP 48) in priority queue 1, which such a build would drop; "
                f"install behavioral-model 1.13 or newer ({INSTALL_HINT})")
        for attempt in range(3):
            try:
                self._spawn(path, options)
                self._wait_ready()
                return self
            except SwitchError as exc:
                in_use = "already in use" in str(exc) or "bind" in str(exc).lower()
                self.stop(keep_output=True)
                if not (self._auto_ports and in_use and attempt < 2):
                    raise
                self._proc = None
                self.grpc_port = free_port()
                self.thrift_port = free_port({self.grpc_port})
            except BaseException:  # Ctrl-C: the switch has its own session, stop it here
                self.stop(keep_output=True)
                raise
        raise AssertionError("unreachable")

    def _spawn(self, path: str, options: frozenset[str]) -> None:
        for d in (self.out_dir, self.pcap_dir, self.log_file.parent if self.log_file else None):
            if d is not None:
                d.mkdir(parents=True, exist_ok=True)
        if self.out_dir is not None:
            self.out_path = self.out_dir / f"{self.name}.out"
            self._keep_out = True
        else:
            fd, tmp = tempfile.mkstemp(prefix=f"p4cc-bmv2-{self.name}-", suffix=".out")
            os.close(fd)
            self.out_path = Path(tmp)
        cmd = self.command(path, options)
        with open(self.out_path, "wb") as out:
            try:
                self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                              stderr=subprocess.STDOUT, start_new_session=True)
            except FileNotFoundError as exc:
                raise ToolMissingError(f"cannot run {cmd[0]}: {exc}; {INSTALL_HINT}") from exc

    def _wait_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.start_timeout_s
        pending = {"gRPC": self.grpc_port, "Thrift": self.thrift_port}
        while pending:
            self.check_alive("while starting")
            for what, port in list(pending.items()):
                if _owns_listener(self._proc.pid, port):
                    del pending[what]
            if pending and time.monotonic() > deadline:
                raise SwitchError(
                    f"{self.name}: simple_switch_grpc (pid {self._proc.pid}) did not listen on "
                    + ", ".join(f"{w} port {p}" for w, p in pending.items())
                    + f" within {self.start_timeout_s:g} s; the machine may be overloaded "
                    "(raise start_timeout_s) or a port is taken. Output:\n" + self.output_tail()
                )
            if pending:
                time.sleep(0.05)  # poll interval of the readiness condition
        if self.netns_pid is None:
            self._check_thrift(deadline)

    def _check_thrift(self, deadline: float) -> None:
        last: Exception | None = None
        while time.monotonic() <= deadline:
            self.check_alive("while starting")
            try:
                thrift_ping(self.thrift_port)
                return
            except SwitchError:
                raise
            except ImportError as exc:  # not a switch problem: do not wait for the deadline
                raise ToolMissingError(f"Python module missing ({exc}): install python3-thrift "
                                       "(`make setup`); `p4cc doctor` checks it") from exc
            except Exception as exc:  # thrift transport errors: retry until the deadline
                last = exc
                time.sleep(0.1)
        raise SwitchError(
            f"{self.name}: a process listens on Thrift port {self.thrift_port} but the "
            f"simple_switch Thrift service does not answer ({last}); BMv2 must be built "
            f"--with-thrift and the port must be this switch's. Output:\n" + self.output_tail()
        )

    def check_alive(self, when: str = "") -> None:
        """Raise SwitchError (with the tail of the switch's output) if the process exited."""
        if self._proc is None:
            raise SwitchError(f"{self.name}: simple_switch_grpc is not running (never started)")
        code = self._proc.poll()
        if code is not None:
            self._keep_out = True
            raise SwitchError(
                f"{self.name}: simple_switch_grpc (pid {self._proc.pid}) exited with code {code}"
                f"{' ' + when if when else ''}; output ({self.out_path}):\n" + self.output_tail()
                + "\nfix the cause above (a missing interface, a port in use, a bad option) "
                "and start again"
            )

    def output_tail(self, lines: int = 20) -> str:
        if self.out_path is None:
            return "(no output captured)"
        try:
            text = self.out_path.read_text(errors="replace")
        except OSError:
            return "(output file missing)"
        if self.log_file is not None and self.log_file.exists():
            text += "\n" + self.log_file.read_text(errors="replace")[-4000:]
        tail = text.strip().splitlines()[-lines:]
        return "\n".join("    " + t for t in tail) or "    (empty)"

    def stop(self, timeout_s: float = 5.0, keep_output: bool = False) -> None:
        """Terminate this switch's own PID (SIGTERM, then SIGKILL); safe to call twice."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                os.kill(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                try:
                    os.kill(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=timeout_s)
        if proc is not None and proc.returncode is not None and proc.returncode > 0:
            keep_output = True  # it died on its own: keep the evidence
        if (self.out_path is not None and not (keep_output or self._keep_out)
                and self.out_path.exists()):
            self.out_path.unlink()
        sock = Path(f"/tmp/p4cc-bmv2-{self.thrift_port}-notifications.ipc")
        if sock.exists():
            sock.unlink(missing_ok=True)

    def __enter__(self) -> Bmv2Process:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        return (f"Bmv2Process({self.name!r}, device_id={self.device_id}, pid={self.pid}, "
                f"grpc={self.grpc_port}, thrift={self.thrift_port})")
