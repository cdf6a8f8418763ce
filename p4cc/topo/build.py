"""A Mininet network of BMv2 switches built from a TopoSpec, torn down completely.

Links are plain veth pairs, **never** shaped with tc: the bottleneck must be BMv2's
egress queue, whose rate (pps) and depth (packets) the control plane sets over Thrift
from each LinkSpec and ``Scale.pps`` (REFERENCE §1: a tc/HTB ``bw=`` on the veth would
queue packets where BMv2 cannot see them, leaving ``enq_qdepth`` at ~0).

Switches run in the root namespace (as Mininet's usual BMv2 switches do), with their
veth ends there; hosts get their own namespaces.  Control ports bind to 127.0.0.1.
Teardown stops every switch by PID, lets Mininet delete its own links and hosts, then
removes any interface of this topology still present: it never runs ``mn -c`` (which
would kill other people's networks).
"""

from __future__ import annotations

import functools
import logging
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from p4cc.constants import MAX_PORTS
from p4cc.errors import ConfigError, SwitchError, ToolMissingError
from p4cc.topo import hosts as hostcfg
from p4cc.topo.bmv2 import Bmv2Process, find_binary
from p4cc.topo.spec import SwitchSpec, TopoSpec

log = logging.getLogger(__name__)

from p4cc.paths import P4_JSON, P4INFO  # noqa: E402  (re-exported)

MININET_HINT = ("install Mininet (Debian/Ubuntu: `apt-get install mininet`, or `make setup` "
                "as root) and use the venv made by `make venv`, which sees the "
                "distribution's Python modules")


@dataclass(frozen=True)
class FabricOptions:
    out_dir: Path | None = None  # switch output (and logs/pcaps if on); None = temp files
    bmv2_log: bool = False  # BMv2 packet log (slow: debug only)
    pcap: bool = False  # pcap per port (slow: debug only)
    auto_ports: bool = False  # free control ports instead of 50050+id / 9090+id
    start_timeout_s: float = 30.0
    p4_json: Path = P4_JSON
    p4info: Path = P4INFO
    check_artifacts: bool = True


def artifacts_missing(options: FabricOptions) -> list[Path]:
    return [p for p in (options.p4_json, options.p4info) if not p.is_file()]


def interface_exists(ifname: str) -> bool:
    return Path("/sys/class/net", ifname).exists()


@functools.lru_cache(maxsize=1)
def mininet_classes() -> tuple[Any, Any, Any, Any]:
    """(Mininet, Host, Switch, Link), or ToolMissingError naming the fix."""
    try:
        from mininet.link import Link
        from mininet.net import Mininet
        from mininet.node import Host, Switch
    except ImportError as exc:
        raise ToolMissingError(f"Mininet's Python module is not importable ({exc}): "
                               f"{MININET_HINT}") from exc
    return Mininet, Host, Switch, Link


@functools.lru_cache(maxsize=1)
def bmv2_switch_class() -> type:
    """The Mininet Switch subclass that runs one Bmv2Process (made lazily: Mininet is
    optional at import time)."""
    _net, _host, switch_base, _link = mininet_classes()

    class Bmv2Switch(switch_base):  # type: ignore[misc,valid-type]
        """Mininet switch node backed by ``simple_switch_grpc`` (no OpenFlow controller)."""

        def __init__(self, name: str, spec: SwitchSpec, fabric_options: FabricOptions,
                     **params: Any) -> None:
            super().__init__(name, dpid=f"{spec.device_id:016x}", **params)
            self.spec = spec
            self.fabric_options = fabric_options
            self.bmv2: Bmv2Process | None = None

        def start(self, controllers: list[Any]) -> None:
            opts = self.fabric_options
            out = opts.out_dir
            interfaces = {port: intf.name for intf, port in self.ports.items()
                          if port and intf.name != "lo"}
            self.bmv2 = Bmv2Process(
                self.name, self.spec.device_id, interfaces,
                grpc_port=None if opts.auto_ports else self.spec.grpc_port,
                thrift_port=None if opts.auto_ports else self.spec.thrift_port,
                log_file=(out / f"{self.name}.bmv2.log") if (out and opts.bmv2_log) else None,
                pcap_dir=(out / f"{self.name}-pcap") if (out and opts.pcap) else None,
                out_dir=out, start_timeout_s=opts.start_timeout_s,
            )
            self.bmv2.start()

        def connected(self) -> bool:
            return self.bmv2 is not None and self.bmv2.is_alive()

        def stop(self, deleteIntfs: bool = True) -> None:  # Mininet's parameter name
            if self.bmv2 is not None:
                self.bmv2.stop()
            super().stop(deleteIntfs)

    return Bmv2Switch


#: Highest usable switch port: per-port registers and counters have MAX_PORTS entries
#: indexed by port number (read from the compiled program; docs/architecture.md).
BMV2_MAX_PORT = MAX_PORTS - 1


def check_ports(topo: TopoSpec) -> None:
    """Raise ConfigError if a switch has a port the data plane's per-port arrays lack."""
    for s in topo.switches:
        if s.ports and max(s.ports) > BMV2_MAX_PORT:
            raise ConfigError(
                f"switch {s.name} of topology {topo.name!r} needs {max(s.ports)} ports; the "
                f"P4 program indexes per-port registers by port, ports 1..{BMV2_MAX_PORT} "
                "only: use fewer hosts per switch or fewer spines/leaves")


def preflight(topo: TopoSpec, options: FabricOptions) -> None:
    """Check everything a fabric needs before creating anything; raise with the fix."""
    if not topo.hosts or not topo.switches:
        raise ConfigError(f"topology {topo.name!r} needs at least one host and one switch")
    check_ports(topo)
    if os.geteuid() != 0:
        raise SwitchError("building a fabric needs root (network namespaces, veth pairs): "
                          "run as root, e.g. `sudo make testbed`")
    find_binary()
    mininet_classes()
    if shutil.which("mnexec") is None:
        raise ToolMissingError(f"mnexec (Mininet's helper) not found on PATH: {MININET_HINT}")
    if shutil.which("ethtool") is None:
        raise ToolMissingError("ethtool not found: install it (`apt-get install ethtool`); "
                               "it turns veth offloads off so BMv2 sees real packets")
    if options.check_artifacts:
        missing = artifacts_missing(options)
        if missing:
            raise ToolMissingError(
                "compiled P4 program missing: " + ", ".join(str(p) for p in missing)
                + "; run `make p4` (needs p4c) or restore p4cc/data/p4/ from git"
            )
    taken = [i for i in hostcfg.root_interface_names(topo) if interface_exists(i)]
    if taken:
        raise SwitchError(
            f"interface(s) {', '.join(taken)} already exist: another p4cc fabric or Mininet "
            "network is running, or a crashed run left them behind; stop it, or if nothing "
            f"uses them remove them with `ip link del {taken[0]}` (for each)"
        )


def _run_root(cmd: list[str]) -> None:
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise SwitchError(f"`{shlex.join(cmd)}` failed: {res.stderr.strip() or res.stdout}")


class Fabric:
    """``with Fabric(parse_topo("star,hosts=5")) as fab: ...`` — switches up, hosts set up.

    After ``start()`` each switch listens on its gRPC and Thrift ports with no
    pipeline; the control plane (p4cc.controlplane) pushes the program, routes and
    queue settings.  ``stop()`` always tears everything down and is idempotent.
    """

    def __init__(self, topo: TopoSpec, options: FabricOptions | None = None) -> None:
        self.topo = topo
        self.options = options or FabricOptions()
        self.net: Any = None
        self._switch_nodes: dict[str, Any] = {}
        self._procs: list[Bmv2Process] = []
        #: root-namespace interfaces this fabric made (kept after stop for leftovers())
        self._created: set[str] = set()

    # -- lookups ---------------------------------------------------------------------
    def bmv2(self, switch: str) -> Bmv2Process:
        node = self._switch_nodes.get(switch)
        if node is None or node.bmv2 is None:
            raise SwitchError(f"switch {switch!r} is not running in this fabric")
        bmv2: Bmv2Process = node.bmv2
        return bmv2

    def endpoints(self) -> dict[str, tuple[int, str, int]]:
        """switch name -> (device_id, gRPC address, Thrift port) actually in use."""
        out: dict[str, tuple[int, str, int]] = {}
        for name in self._switch_nodes:
            p = self.bmv2(name)
            out[name] = (p.device_id, p.grpc_addr, p.thrift_port)
        return out

    def host(self, name: str) -> Any:
        """The Mininet host node ``name`` (run commands with ``.cmd``/``.popen``)."""
        self.topo.host(name)  # ConfigError for unknown names
        if self.net is None:
            raise SwitchError(f"fabric {self.topo.name!r} is not running: start() it first")
        return self.net.get(name)

    def check(self) -> None:
        """Raise SwitchError if any switch process has exited (mid-run failure)."""
        for name in self._switch_nodes:
            self.bmv2(name).check_alive("during the run")

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> Fabric:
        preflight(self.topo, self.options)
        mininet_cls, host_cls, _switch, link_cls = mininet_classes()
        from mininet.log import setLogLevel

        setLogLevel("info" if log.isEnabledFor(logging.DEBUG) else "warning")
        if self.options.out_dir is not None:
            self.options.out_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._build(mininet_cls, host_cls, link_cls)
            self._configure()
            self.net.start()  # starts each Bmv2Switch: waits for gRPC + Thrift
            self._procs = [self.bmv2(s.name) for s in self.topo.switches]
        except BaseException:
            self.stop()
            raise
        log.info("fabric %s up: %s", self.topo.name,
                 {n: e[1:] for n, e in self.endpoints().items()})
        return self

    def _build(self, mininet_cls: Any, host_cls: Any, link_cls: Any) -> None:
        self.net = mininet_cls(topo=None, switch=bmv2_switch_class(), host=host_cls,
                               controller=None, link=link_cls, build=False,
                               autoSetMacs=False, autoStaticArp=False)
        for h in self.topo.hosts:
            self.net.addHost(h.name, ip=f"{h.ip}/{hostcfg.HOST_PREFIX_LEN}", mac=h.mac)
        for s in self.topo.switches:
            self._switch_nodes[s.name] = self.net.addSwitch(
                s.name, spec=s, fabric_options=self.options)
            self._created.update(hostcfg.switch_intf(s.name, p) for p in s.ports)
        for lk in self.topo.links:
            a, b = self.net.get(lk.a), self.net.get(lk.b)
            self.net.addLink(
                a, b, port1=lk.a_port, port2=lk.b_port,
                intfName1=self._intf(lk.a, lk.a_port), intfName2=self._intf(lk.b, lk.b_port),
                addr1=self._mac(lk.a, lk.a_port), addr2=self._mac(lk.b, lk.b_port),
            )
        self.net.build()

    def _intf(self, node: str, port: int) -> str:
        if self.topo.is_host(node):
            return hostcfg.host_intf(self.topo.host(node))
        return hostcfg.switch_intf(node, port)

    def _mac(self, node: str, port: int) -> str:
        if self.topo.is_host(node):
            return self.topo.host(node).mac
        return self.topo.switch(node).port_mac(port)

    def _configure(self) -> None:
        for s in self.topo.switches:
            for cmd in hostcfg.switch_commands(self.topo, s.name):
                _run_root(cmd)
        for h in self.topo.hosts:
            node = self.net.get(h.name)
            for cmd in hostcfg.host_commands(self.topo, h.name):
                out, err, code = node.pexec(*cmd)
                if code != 0:
                    raise SwitchError(f"{h.name}: `{shlex.join(cmd)}` failed ({code}): "
                                      f"{(err or out).strip()}")

    def stop(self) -> None:
        """Stop switches (by PID), hosts and links; remove leftovers. Idempotent."""
        problems: list[str] = []
        for node in self._switch_nodes.values():
            if node.bmv2 is not None:
                node.bmv2.stop()
        if self.net is not None:
            try:
                self.net.stop()
            except Exception as exc:  # keep tearing down
                problems.append(f"Mininet stop: {exc}")
            for node in list(self.net.hosts) + list(self.net.switches):
                try:
                    node.terminate()
                except Exception as exc:
                    problems.append(f"{node.name}: {exc}")
            self.net = None
        for ifname in hostcfg.root_interface_names(self.topo):
            if interface_exists(ifname) and ifname in self._created_names():
                res = subprocess.run(["ip", "link", "del", ifname], capture_output=True,
                                     text=True)
                if res.returncode != 0 and interface_exists(ifname):
                    problems.append(f"could not delete {ifname}: {res.stderr.strip()}")
        self._switch_nodes.clear()
        if problems:
            log.warning("fabric teardown: %s", "; ".join(problems))

    def _created_names(self) -> set[str]:
        # only interfaces this fabric created: those of switch nodes we added
        return set(self._created)

    def leftovers(self) -> list[str]:
        """Interfaces or switch PIDs of this fabric still present (empty after stop).
        Interfaces of the same names made by another fabric are not this one's."""
        left = [i for i in hostcfg.root_interface_names(self.topo)
                if i in self._created and interface_exists(i)]
        left += [f"pid {p.pid}" for p in self._procs
                 if p.pid is not None and Path(f"/proc/{p.pid}").exists()
                 and p.is_alive()]
        return left

    def __enter__(self) -> Fabric:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
