"""Per-switch control: one P4Runtime session + one Thrift session, p4cc's settings on top.

``SwitchControl.setup()`` brings a freshly started simple_switch_grpc to p4cc's
configuration: pipeline, routes and ECMP groups (p4cc.controlplane.routes), the
``switch_config`` default action, ``int_sink`` on host-facing ports, the clone session
to the CPU port, and per-port egress queue rate/depth from the link specs (REFERENCE §1:
the rate is enforced by BMv2's queue, in packets/s).  ``switch_config`` leaves the INT
source lookup off until ``add_int_watch`` installs the switch's first watch.

``set_ecn_all`` is the one place an ECN setting is validated (``EcnConfig.validate``
against the scale's buffer, once per distinct setting) and written: only ports whose
setting changes are written, in one request, as INSERT the first time a port gets an
entry and MODIFY after (DELETE turns marking off).  Callers (the control loop, the
fabric session, the CLI) do not validate again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from google.rpc import code_pb2

from p4cc.constants import CPU_PORT, INT_MAX_HOPS, INT_REPORT_SESSION
from p4cc.controlplane.bmv2config import device_config
from p4cc.controlplane.ecn import EcnConfig
from p4cc.controlplane.p4runtime import P4RuntimeClient, P4RuntimeWriteError
from p4cc.controlplane.routes import compute_routes, host_facing_ports
from p4cc.controlplane.thrift import ThriftClient
from p4cc.errors import ConfigError
from p4cc.topo.spec import SwitchSpec, TopoSpec

log = logging.getLogger(__name__)

#: PET §4 ("elephant flows ... larger than 1 MB"): the paper's elephant size.
PAPER_ELEPHANT_BYTES = 1_000_000
#: int_watchlist actions (p4src/include/int_source.p4): INT with a report to the
#: control plane at the sink, or the summary for the receiver only.
INT_WATCH_REPORT = "int_source"
INT_WATCH_SUMMARY = "int_source_summary"
#: switch_config actions (p4src/include/forwarding.p4): the same settings with the
#: int_watchlist lookup on, or off (a keyed lookup per UDP packet that BMv2 with logging
#: macros pays even when the table is empty; used until the switch's first watch).
SWITCH_CONFIG_WATCH = "set_switch_config"
SWITCH_CONFIG_NO_WATCH = "set_switch_config_no_watch"


def int_watch_action(report: bool) -> str:
    """The int_watchlist action of a watch with (True) or without an INT report."""
    return INT_WATCH_REPORT if report else INT_WATCH_SUMMARY


@dataclass(frozen=True)
class CheckedEcn:
    """ECN settings that SwitchControl.validated has checked for switch ``switch``:
    set_ecn_all writes them without checking again."""

    switch: str
    settings: tuple[tuple[int, EcnConfig | None], ...]


class QueueAndRegisters(Protocol):
    """What SwitchControl and the poller need from Thrift (ThriftClient or a test fake)."""

    def connect(self) -> None: ...
    def close(self) -> None: ...
    def set_queue_rate(self, pps: float, port: int | None = None) -> None: ...
    def set_queue_depth(self, pkts: int, port: int | None = None) -> None: ...
    def register_read_all(self, name: str) -> list[int]: ...
    def register_reset(self, name: str) -> None: ...
    def register_write(self, name: str, index: int, value: int) -> None: ...


class SwitchControl:
    def __init__(self, spec: SwitchSpec, topo: TopoSpec, p4info_path: str | Path,
                 json_path: str | Path, *, host: str = "127.0.0.1", timeout_s: float = 5.0,
                 aggregate_routes: bool = False, p4rt: P4RuntimeClient | None = None,
                 thrift: QueueAndRegisters | None = None, source_info: bool = False) -> None:
        self.spec = spec
        self.topo = topo
        self.scale = topo.scale
        self.p4info_path = Path(p4info_path)
        self.json_path = Path(json_path)
        self.aggregate_routes = aggregate_routes
        #: push the JSON with p4c's source info (for trace logs; costs CPU per packet)
        self.source_info = source_info
        self.p4rt = p4rt or P4RuntimeClient(f"{host}:{spec.grpc_port}", spec.device_id,
                                            timeout_s=timeout_s)
        self.thrift: QueueAndRegisters = thrift or ThriftClient(
            f"{host}:{spec.thrift_port}", json_path, timeout_s=timeout_s)
        self._ecn: dict[int, EcnConfig | None] = dict.fromkeys(self.ports)
        self._installed: set[int] = set()  # ports with an ecn_config entry in the switch
        self._watching = False  # int_watchlist holds an entry (lookup turned on)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def ports(self) -> tuple[int, ...]:
        return self.spec.ports

    def port_rate_bps(self, port: int) -> float:
        return self.topo.link_at(self.name, port).rate_bps

    # -- session ---------------------------------------------------------------------
    def connect(self) -> None:
        self.p4rt.connect()
        if self.p4rt.p4info is None:
            self.p4rt.load_p4info(self.p4info_path)
        self.thrift.connect()

    def reconnect(self) -> None:
        """Reconnect; a switch that lost its pipeline (restarted) is set up again with the
        settings that were in force."""
        self.close()
        self.connect()
        if self.p4rt.get_p4info() is None:
            log.warning("%s: the switch has no pipeline (restarted?); setting it up again",
                        self.name)
            settings = {p: c for p, c in self._ecn.items() if c is not None}
            self.setup()
            self._write(settings)  # validated when they were first set

    def close(self) -> None:
        self.p4rt.close()
        self.thrift.close()

    # -- one-time setup --------------------------------------------------------------
    def setup(self, ecn: EcnConfig | None = None) -> None:
        """Push the pipeline and every static setting; ``ecn`` on all ports if given."""
        self.p4rt.set_pipeline(self.p4info_path, self.json_path, device_config(
            self.json_path, source_info=self.source_info))
        self._installed.clear()
        self._watching = False
        self.install_routes()
        self.set_switch_config()
        self.install_int_sink()
        self.p4rt.add_clone_session(INT_REPORT_SESSION, [CPU_PORT])
        self.configure_queues()
        if ecn is not None:
            self.set_ecn_all(dict.fromkeys(self.ports, ecn))

    def install_routes(self) -> None:
        routes = compute_routes(self.topo, self.aggregate_routes)[self.name]
        c = self.p4rt
        updates = []
        for group in routes.groups:
            for index, nh in enumerate(group.members):
                updates.append(c.update("INSERT", "table_entry", c.table_entry(
                    "ecmp_nhop", {"ecmp_group": group.group_id, "ecmp_index": index},
                    "set_nhop", {"port": nh.port, "dmac": nh.dmac, "smac": nh.smac})))
        for r in routes.routes:
            params: dict[str, int | str]
            if r.nhop is not None:
                action, params = "set_nhop", {"port": r.nhop.port, "dmac": r.nhop.dmac,
                                              "smac": r.nhop.smac}
            else:
                assert r.group is not None
                action = "set_ecmp"
                params = {"group": r.group, "size": len(routes.group(r.group).members)}
            updates.append(c.update("INSERT", "table_entry", c.table_entry(
                "ipv4_lpm", {"dst_addr": (r.prefix, r.prefix_len)}, action, params)))
        c.write(updates)

    def elephant_bytes(self) -> int:
        """PET's 1 MB elephant size scaled by the BDP factor (REFERENCE §5)."""
        return max(self.scale.pkt_bytes, round(self.scale.bytes(PAPER_ELEPHANT_BYTES)))

    def set_switch_config(self) -> None:
        """switch_config's default action: switch id and elephant size, with the INT
        source lookup on only once the switch has a watch (programs without the
        no-watch action, e.g. older builds, always look up)."""
        action = SWITCH_CONFIG_WATCH
        if not self._watching and SWITCH_CONFIG_NO_WATCH in self._switch_config_actions():
            action = SWITCH_CONFIG_NO_WATCH
        self.p4rt.set_default_action("switch_config", action, {
            "switch_id": self.spec.device_id, "elephant_bytes": self.elephant_bytes()})

    def _switch_config_actions(self) -> set[str]:
        info = self.p4rt.p4info
        if info is None:
            raise ConfigError("no P4Info loaded: connect() first")
        return {name.rsplit(".", 1)[-1] for name in info.table_actions("switch_config")}

    def install_int_sink(self) -> None:
        c = self.p4rt
        c.write([c.update("INSERT", "table_entry",
                          c.table_entry("int_sink", {"egress_port": port}, "int_sink_port"))
                 for port in host_facing_ports(self.topo, self.name)])

    def configure_queues(self) -> None:
        for port in self.ports:
            link = self.topo.link_at(self.name, port)
            self.thrift.set_queue_rate(self.scale.pps(link.rate_bps), port)
            self.thrift.set_queue_depth(link.queue_pkts, port)

    def add_int_watch(self, src: str | None = None, dst: str | None = None,
                      proto: int | None = None, dport: int | None = None,
                      max_hops: int = INT_MAX_HOPS,
                      priority: int = 1, report: bool = True) -> None:
        """Make UDP flows matching the given fields (None = any) carry INT.

        ``report``: the sink also sends every such packet to the control plane as an INT
        report (``int_source``); False: summary only, for the receiving host's CC
        (``int_source_summary``: no clone, no PacketIn; docs/dataplane.md "INT")."""
        wanted = (("src_addr", src, 0xFFFFFFFF), ("dst_addr", dst, 0xFFFFFFFF),
                  ("protocol", proto, 0xFF), ("dport", dport, 0xFFFF))
        match: dict[str, Any] = {self._watch_field(tail): (value, mask)
                                 for tail, value, mask in wanted if value is not None}
        self.p4rt.insert_entry("int_watchlist", match, int_watch_action(report),
                               {"max_hops": max_hops}, priority=priority)
        if not self._watching:  # the first watch turns the lookup on
            self._watching = True
            self.set_switch_config()

    def _watch_field(self, tail: str) -> str:
        """Full name of the int_watchlist key ending in ``tail`` (e.g. meta.l4_dport)."""
        info = self.p4rt.p4info
        if info is None:
            raise ConfigError("no P4Info loaded: connect() first")
        names = [mf.name for mf in info.table("int_watchlist").match_fields]
        found = [n for n in names if n.endswith("." + tail)] or [n for n in names
                                                                 if n.endswith(tail)]
        if len(found) != 1:
            raise ConfigError(f"int_watchlist has no unique key ending in {tail!r}: {names}")
        return found[0]

    # -- ECN -------------------------------------------------------------------------
    @property
    def ecn(self) -> dict[int, EcnConfig | None]:
        """The setting in force per port (None = marking off)."""
        return dict(self._ecn)

    def validated(self, settings: Mapping[int, EcnConfig | None]) -> CheckedEcn:
        """ConfigError unless every port exists and every setting is None or a valid
        EcnConfig for this switch's buffer (each distinct setting validated once)."""
        if not isinstance(settings, Mapping):
            raise ConfigError(f"{self.name}: ECN settings must be a mapping port -> "
                              f"EcnConfig, got {type(settings).__name__}")
        for port, cfg in settings.items():
            if port not in self.ports:
                raise ConfigError(f"{self.name} has no port {port}; ports are "
                                  f"{list(self.ports)}")
            if cfg is not None and not isinstance(cfg, EcnConfig):
                raise ConfigError(f"{self.name} port {port}: expected an EcnConfig, got "
                                  f"{cfg!r}")
        for cfg in {c for c in settings.values() if c is not None}:
            cfg.validate(self.scale.buffer_bytes)
        return CheckedEcn(self.name, tuple(settings.items()))

    def ecn_update(self, port: int, cfg: EcnConfig | None) -> Any:
        c = self.p4rt
        match = {"egress_port": port}
        if cfg is None:
            return c.update("DELETE", "table_entry", c.table_entry("ecn_config", match, None))
        pkt = self.scale.pkt_bytes
        entry = c.table_entry("ecn_config", match, "set_ecn", {
            "kmin": cfg.kmin_pkts(pkt), "kmax": cfg.kmax_pkts(pkt), "pmax": cfg.pmax_scaled})
        return c.update("MODIFY" if port in self._installed else "INSERT", "table_entry", entry)

    def set_ecn(self, port: int, cfg: EcnConfig | None) -> None:
        self.set_ecn_all({port: cfg})

    def set_ecn_all(self, settings: Mapping[int, EcnConfig | None] | CheckedEcn) -> None:
        """Validate every setting (the only validation on the way to the switch; skipped
        for this switch's CheckedEcn), then write the ports whose setting changes in one
        request."""
        if not isinstance(settings, CheckedEcn):
            settings = self.validated(settings)
        elif settings.switch != self.name:
            raise ConfigError(f"{self.name}: settings checked for {settings.switch}")
        self._write(dict(settings.settings))

    def _write(self, settings: Mapping[int, EcnConfig | None]) -> None:
        todo = {p: c for p, c in settings.items() if self._changes(p, c)}
        if not todo:
            return
        ports = list(todo)
        try:
            self.p4rt.write([self.ecn_update(p, todo[p]) for p in ports])
        except P4RuntimeWriteError as exc:
            # our view of what is installed was stale (switch restarted or kept state
            # across our reconnect): redo the failed updates with the other verb
            failed = {ports[e.index] for e in exc.errors
                      if e.code in (code_pb2.ALREADY_EXISTS, code_pb2.NOT_FOUND)}
            if not failed or len(failed) != len(exc.errors):
                raise
            for p in failed:
                self._installed.symmetric_difference_update({p})
            self._note(todo, ports, exclude=failed)
            self.p4rt.write([self.ecn_update(p, todo[p]) for p in sorted(failed)
                             if not (todo[p] is None and p not in self._installed)])
            self._note(todo, sorted(failed))
            return
        self._note(todo, ports)

    def _changes(self, port: int, cfg: EcnConfig | None) -> bool:
        """Whether writing ``cfg`` to ``port`` changes the switch (written once per change)."""
        if cfg is None:
            return port in self._installed
        return port not in self._installed or self._ecn.get(port) != cfg

    def _note(self, todo: Mapping[int, EcnConfig | None], ports: list[int],
              exclude: set[int] | frozenset[int] = frozenset()) -> None:
        for p in ports:
            if p in exclude:
                continue
            self._ecn[p] = todo[p]
            if todo[p] is None:
                self._installed.discard(p)
            else:
                self._installed.add(p)

