"""Topology descriptions: names, addresses, ports and link options, testable without root.

As in Mininet, a topology is a description; building it (p4cc.topo.build) is separate.
Variants are picked by name from a registry: ``parse_topo("leafspine,spines=2,leaves=4")``.

Conventions (shared by the data plane, control plane, host code and simulator):

* hosts ``h1..hN``, one interface ``hX-eth0``; IPv4 ``10.0.<edge>.<k>`` where ``edge`` is
  the 1-based index of the switch the host hangs off and ``k`` its 1-based slot there;
  MAC ``00:00:0a:00:<edge>:<k>``.
* switch ports are numbered from 1, interface ``<switch>-eth<port>``; the MAC of a
  switch port is ``00:aa:00:<device_id>:00:<port>`` (hex).
* every switch gets a distinct ``device_id`` (1-based), gRPC port 50050+id and Thrift
  port 9090+id (``SwitchSpec``); all control ports bind to 127.0.0.1.
* a link's ``rate_bps`` is enforced by BMv2's egress queue rate on each switch end
  (REFERENCE §1: never by tc on the veth, which would hide the queue from BMv2).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from p4cc.errors import ConfigError
from p4cc.scale import Scale, get_scale

GRPC_BASE_PORT = 50050
THRIFT_BASE_PORT = 9090


@dataclass(frozen=True)
class HostSpec:
    name: str
    ip: str
    mac: str
    switch: str
    switch_port: int


@dataclass(frozen=True)
class SwitchSpec:
    name: str
    device_id: int
    role: str  # "tor" | "leaf" | "spine" | "core"
    ports: tuple[int, ...]

    @property
    def grpc_port(self) -> int:
        return GRPC_BASE_PORT + self.device_id

    @property
    def thrift_port(self) -> int:
        return THRIFT_BASE_PORT + self.device_id

    def port_mac(self, port: int) -> str:
        return f"00:aa:00:{self.device_id:02x}:00:{port:02x}"


@dataclass(frozen=True)
class LinkSpec:
    """A full-duplex link; ``*_port`` is 0 on a host end (``hX-eth0``)."""

    a: str
    a_port: int
    b: str
    b_port: int
    rate_bps: float
    delay_s: float = 0.0
    queue_pkts: int = 100

    def ends(self) -> tuple[tuple[str, int], tuple[str, int]]:
        return (self.a, self.a_port), (self.b, self.b_port)


@dataclass(frozen=True)
class TopoSpec:
    name: str
    params: tuple[tuple[str, Any], ...]
    scale: Scale
    hosts: tuple[HostSpec, ...]
    switches: tuple[SwitchSpec, ...]
    links: tuple[LinkSpec, ...]

    # -- lookups ---------------------------------------------------------------------
    def host(self, name: str) -> HostSpec:
        for h in self.hosts:
            if h.name == name:
                return h
        raise ConfigError(f"topology {self.name!r} has no host {name!r}")

    def switch(self, name: str) -> SwitchSpec:
        for s in self.switches:
            if s.name == name:
                return s
        raise ConfigError(f"topology {self.name!r} has no switch {name!r}")

    def host_by_ip(self, ip: str) -> HostSpec:
        for h in self.hosts:
            if h.ip == ip:
                return h
        raise ConfigError(f"topology {self.name!r} has no host with address {ip}")

    def node_names(self) -> list[str]:
        return [h.name for h in self.hosts] + [s.name for s in self.switches]

    def peer(self, node: str, port: int) -> tuple[str, int]:
        """The (node, port) at the other end of ``node``'s ``port``."""
        for link in self.links:
            (a, ap), (b, bp) = link.ends()
            if (a, ap) == (node, port):
                return b, bp
            if (b, bp) == (node, port):
                return a, ap
        raise ConfigError(f"{node} port {port} is not connected in {self.name!r}")

    def link_at(self, node: str, port: int) -> LinkSpec:
        for link in self.links:
            if (node, port) in link.ends():
                return link
        raise ConfigError(f"{node} port {port} is not connected in {self.name!r}")

    def switch_links(self, switch: str) -> Iterator[tuple[int, str, int, LinkSpec]]:
        """(local port, peer node, peer port, link) for every port of ``switch``."""
        for link in self.links:
            (a, ap), (b, bp) = link.ends()
            if a == switch:
                yield ap, b, bp, link
            elif b == switch:
                yield bp, a, ap, link

    def is_host(self, name: str) -> bool:
        return any(h.name == name for h in self.hosts)

    def describe(self) -> str:
        lines = [f"topology {self.name} {dict(self.params)} scale={self.scale.name}"]
        for s in self.switches:
            lines.append(f"  switch {s.name} id={s.device_id} role={s.role} ports={list(s.ports)}")
        for h in self.hosts:
            lines.append(f"  host {h.name} {h.ip} {h.mac} -> {h.switch}:{h.switch_port}")
        for lk in self.links:
            lines.append(
                f"  link {lk.a}:{lk.a_port} <-> {lk.b}:{lk.b_port} "
                f"{lk.rate_bps / 1e6:g} Mb/s queue={lk.queue_pkts} pkts"
            )
        return "\n".join(lines)


# -- builders --------------------------------------------------------------------------
class _Builder:
    """Accumulates nodes and links while a registry function lays out a topology."""

    def __init__(self, scale: Scale) -> None:
        self.scale = scale
        self.hosts: list[HostSpec] = []
        self.switches: dict[str, list[int]] = {}
        self.roles: dict[str, str] = {}
        self.links: list[LinkSpec] = []
        self._edge_index: dict[str, int] = {}

    def switch(self, name: str, role: str) -> str:
        self.switches[name] = []
        self.roles[name] = role
        return name

    def _next_port(self, sw: str) -> int:
        port = len(self.switches[sw]) + 1
        self.switches[sw].append(port)
        return port

    def host(self, sw: str, rate_bps: float) -> str:
        edge = self._edge_index.setdefault(sw, len(self._edge_index) + 1)
        k = sum(1 for h in self.hosts if h.switch == sw) + 1
        if edge > 255 or k > 254:
            raise ConfigError("topology too large for the 10.0.<edge>.<k> address plan")
        name = f"h{len(self.hosts) + 1}"
        port = self._next_port(sw)
        self.hosts.append(HostSpec(name, f"10.0.{edge}.{k}", f"00:00:0a:00:{edge:02x}:{k:02x}",
                                   sw, port))
        self.links.append(LinkSpec(name, 0, sw, port, rate_bps, 0.0, self.scale.buffer_pkts))
        return name

    def trunk(self, a: str, b: str, rate_bps: float) -> None:
        self.links.append(LinkSpec(a, self._next_port(a), b, self._next_port(b), rate_bps, 0.0,
                                   self.scale.buffer_pkts))

    def done(self, name: str, params: dict[str, Any]) -> TopoSpec:
        switches = tuple(
            SwitchSpec(sw, i + 1, self.roles[sw], tuple(ports))
            for i, (sw, ports) in enumerate(self.switches.items())
        )
        return TopoSpec(name, tuple(sorted(params.items())), self.scale, tuple(self.hosts),
                        switches, tuple(self.links))


def _positive(name: str, value: int, lo: int = 1, hi: int = 1024) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ConfigError(f"topology parameter {name}={value!r} must be an integer in [{lo}, {hi}]")
    return value


def star(scale: Scale, hosts: int = 5) -> TopoSpec:
    """N hosts on one switch: the incast case (h1..h{N-1} -> hN, or any pattern)."""
    _positive("hosts", hosts, 2, 64)
    b = _Builder(scale)
    s1 = b.switch("s1", "tor")
    for _ in range(hosts):
        b.host(s1, scale.link_rate_bps)
    return b.done("star", {"hosts": hosts})


def dumbbell(scale: Scale, left: int = 2, right: int = 2, bottleneck: float = 1.0) -> TopoSpec:
    """Two switches joined by one link of ``bottleneck`` x the host link rate."""
    _positive("left", left, 1, 64)
    _positive("right", right, 1, 64)
    if not 0 < bottleneck <= 16:
        raise ConfigError(f"topology parameter bottleneck={bottleneck!r} must be in (0, 16]")
    b = _Builder(scale)
    s1, s2 = b.switch("s1", "tor"), b.switch("s2", "tor")
    for _ in range(left):
        b.host(s1, scale.link_rate_bps)
    for _ in range(right):
        b.host(s2, scale.link_rate_bps)
    b.trunk(s1, s2, scale.link_rate_bps * bottleneck)
    return b.done("dumbbell", {"left": left, "right": right, "bottleneck": bottleneck})


def leafspine(scale: Scale, spines: int = 2, leaves: int = 2, hosts: int = 2,
              oversub: float = 1.0) -> TopoSpec:
    """Two-tier Clos: every leaf to every spine; ``hosts`` per leaf.

    Uplink rate = hosts x host rate / (spines x oversub), so ``oversub`` is the ratio of
    host-facing to spine-facing capacity at a leaf (1 = non-blocking).
    """
    _positive("spines", spines, 1, 64)
    _positive("leaves", leaves, 1, 128)
    _positive("hosts", hosts, 1, 64)
    if not 0.25 <= oversub <= 64:
        raise ConfigError(f"topology parameter oversub={oversub!r} must be in [0.25, 64]")
    b = _Builder(scale)
    leaf_names = [b.switch(f"leaf{i + 1}", "leaf") for i in range(leaves)]
    spine_names = [b.switch(f"spine{i + 1}", "spine") for i in range(spines)]
    for leaf in leaf_names:
        for _ in range(hosts):
            b.host(leaf, scale.link_rate_bps)
    uplink = hosts * scale.link_rate_bps / (spines * oversub)
    for leaf in leaf_names:
        for spine in spine_names:
            b.trunk(leaf, spine, uplink)
    return b.done("leafspine", {"spines": spines, "leaves": leaves, "hosts": hosts,
                                "oversub": oversub})


TopoFactory = Callable[..., TopoSpec]

#: Registry of topology variants by name.
TOPOLOGIES: dict[str, TopoFactory] = {"star": star, "dumbbell": dumbbell, "leafspine": leafspine}

_FLOAT_PARAMS = {"bottleneck", "oversub"}


def topo_names() -> list[str]:
    return sorted(TOPOLOGIES)


def _parse_value(key: str, raw: str) -> int | float:
    try:
        return float(raw) if key in _FLOAT_PARAMS else int(raw)
    except ValueError:
        kind = "a number" if key in _FLOAT_PARAMS else "an integer"
        raise ConfigError(f"topology parameter {key}={raw!r} is not {kind}") from None


def parse_topo(text: str, scale: Scale | str = "testbed") -> TopoSpec:
    """Build a description from ``name[,key=value...]``, e.g. ``leafspine,spines=2,leaves=4``."""
    if isinstance(scale, str):
        scale = get_scale(scale)
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise ConfigError(f"empty topology string; choose one of {topo_names()}")
    name, *rest = parts
    factory = TOPOLOGIES.get(name)
    if factory is None:
        raise ConfigError(f"unknown topology {name!r}; choose one of {topo_names()}")
    kwargs: dict[str, Any] = {}
    allowed = set(factory.__code__.co_varnames[1 : factory.__code__.co_argcount])
    for item in rest:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep:
            raise ConfigError(f"topology parameter {item!r} must look like key=value")
        if key not in allowed:
            raise ConfigError(
                f"topology {name!r} has no parameter {key!r}; it takes {sorted(allowed)}"
            )
        kwargs[key] = _parse_value(key, raw.strip())
    return factory(scale, **kwargs)


