"""A TopoSpec compiled to arrays: one queue per switch egress port, routes and ECMP paths.

Queues: every switch end of a link is an egress FIFO of the link's rate with a buffer of
``queue_pkts x pkt_bytes`` bytes (BMv2 limits its queues in packets, REFERENCE §1).
Host NICs are not queues: a host sends at its congestion-control rate, at most the
host link rate (as the userspace hosts pace with HTB).

Routing: equal-cost shortest paths over the links that are up, the same next-hop sets
p4cc.controlplane.routes installs (ECMP groups of every port on a shortest path).  A
flow takes member ``hash mod group size`` at each switch, with the data plane's hash of
the 5-tuple its packets carry on BMv2 (p4cc.topo.ecmp: the hosts send flow ``i`` from
source port ``flow_sport(i)``), so a flow takes the same path on both backends; its
replies hash their own, reversed 5-tuple.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

import numpy as np

from p4cc.controlplane.ecn import PMAX_ONE, EcnConfig
from p4cc.errors import ConfigError
from p4cc.topo.ecmp import flow_hash
from p4cc.topo.spec import TopoSpec

PortKey = tuple[str, int]
#: Threshold of a queue with marking off (never reached).
OFF = 1e30


def shortest_next_hops(spec: TopoSpec, down: Iterable[frozenset[str]] = ()
                       ) -> dict[str, dict[str, tuple[int, ...]]]:
    """switch -> destination host -> sorted egress ports on a shortest path (ECMP group).

    Links in ``down`` (as frozenset of the two node names) are ignored.  A switch with
    no path to a host has no entry for it.  Swappable for p4cc.controlplane.routes.
    """
    dead = set(down)
    adj: dict[str, list[tuple[int, str]]] = {n: [] for n in spec.node_names()}
    for link in spec.links:
        if frozenset((link.a, link.b)) in dead:
            continue
        adj[link.a].append((link.a_port, link.b))
        adj[link.b].append((link.b_port, link.a))
    table: dict[str, dict[str, tuple[int, ...]]] = {s.name: {} for s in spec.switches}
    is_host = {h.name for h in spec.hosts}.__contains__
    for host in spec.hosts:
        dist = {host.name: 0}
        todo = deque([host.name])
        while todo:  # BFS from the destination; hosts do not forward
            node = todo.popleft()
            if node != host.name and is_host(node):
                continue
            for _, peer in adj[node]:
                if peer not in dist:
                    dist[peer] = dist[node] + 1
                    todo.append(peer)
        for sw in table:
            if sw not in dist:
                continue
            ports = sorted(p for p, peer in adj[sw]
                           if peer in dist and dist[peer] == dist[sw] - 1
                           and (not is_host(peer) or peer == host.name))
            if ports:
                table[sw][host.name] = tuple(ports)
    return table


class Fabric:
    """Queues (switch egress ports) as arrays, plus path lookup under link failures."""

    def __init__(self, spec: TopoSpec) -> None:
        self.spec = spec
        self.scale = spec.scale
        keys: list[PortKey] = []
        rate: list[float] = []
        buf: list[float] = []
        delay: list[float] = []
        for sw in spec.switches:
            for port, _peer, _pp, link in sorted(spec.switch_links(sw.name), key=lambda x: x[0]):
                keys.append((sw.name, port))
                rate.append(link.rate_bps)
                buf.append(link.queue_pkts * self.scale.pkt_bytes)
                delay.append(link.delay_s)
        self.keys: list[PortKey] = keys
        self.index: dict[PortKey, int] = {k: i for i, k in enumerate(keys)}
        self.switch_names = [k[0] for k in keys]
        self.port_numbers = [k[1] for k in keys]
        self.n_ports = len(keys)
        # index n_ports is a dummy queue (padding of short paths): never holds bytes
        self.rate_bps = np.array([*rate, 1e30])
        self.buffer_bytes = np.array([*buf, 1e30])
        self.delay_s = np.array([*delay, 0.0])
        self.hosts = [h.name for h in spec.hosts]
        self.host_index = {h: i for i, h in enumerate(self.hosts)}
        self._peer = {}
        for link in spec.links:
            self._peer[(link.a, link.a_port)] = link.b
            self._peer[(link.b, link.b_port)] = link.a
        self._host_switch = {h.name: h.switch for h in spec.hosts}
        self._ip = {h.name: h.ip for h in spec.hosts}
        self._host_delay = {h.name: spec.link_at(h.name, 0).delay_s for h in spec.hosts}
        self._has_delay = any(lk.delay_s for lk in spec.links)
        self.down: set[frozenset[str]] = set()
        self._set_next_hops(shortest_next_hops(spec))
        # ECN per queue in the data plane's packet form (kmin/kmax in packets, pmax/65535)
        self.kmin_pkts = np.full(self.n_ports + 1, OFF)
        self.kmax_pkts = np.full(self.n_ports + 1, OFF)
        self.pmax = np.zeros(self.n_ports + 1)
        self._span = np.ones(self.n_ports + 1)
        self._slope = np.zeros(self.n_ports + 1)  # pmax / span
        self.ecn: dict[PortKey, EcnConfig | None] = {k: None for k in keys}

    # -- ECN -------------------------------------------------------------------------
    def set_ecn(self, key: PortKey, cfg: EcnConfig | None) -> None:
        """Write one queue's marking setting (validated against its buffer first)."""
        i = self.port(key)
        if cfg is None:
            self.kmin_pkts[i] = self.kmax_pkts[i] = OFF
            self.pmax[i] = 0.0
            self._span[i] = 1.0
            self._slope[i] = 0.0
        else:
            cfg.validate(int(self.buffer_bytes[i]))
            pkt = self.scale.pkt_bytes
            self.kmin_pkts[i] = cfg.kmin_pkts(pkt)
            self.kmax_pkts[i] = cfg.kmax_pkts(pkt)
            self.pmax[i] = cfg.pmax_scaled / PMAX_ONE
            self._span[i] = max(self.kmax_pkts[i] - self.kmin_pkts[i], 1.0)
            self._slope[i] = self.pmax[i] / self._span[i]
            if self.kmax_pkts[i] * pkt >= self.buffer_bytes[i]:
                # A switch compares the depth a packet finds on arrival, at most one
                # packet below the buffer (BMv2's enq_qdepth counts the packets already
                # queued; a packet that finds the queue full is dropped), so a Kmax at
                # the buffer is never reached: marking stays on the RED line up to Pmax.
                # The fluid queue reaches the buffer itself when full and would mark
                # everything there (the engine's rule before session 8).
                self.kmax_pkts[i] = OFF
        self.ecn[key] = cfg

    def mark_probability(self, qdepth_bytes: np.ndarray) -> np.ndarray:
        """EcnConfig.marking_probability per queue, vectorized, at a depth in bytes.

        The data plane compares depth in packets; the fluid depth in bytes is converted
        to a (fractional) packet count with the scale's packet size.
        """
        q = qdepth_bytes * (1.0 / self.scale.pkt_bytes)
        # below Kmax the ramp stays under pmax <= 1 (span >= Kmax - Kmin), so only Kmax
        # needs the explicit 1
        p = np.maximum((q - self.kmin_pkts) * self._slope, 0.0)
        return np.where(q >= self.kmax_pkts, 1.0, p)

    def port(self, key: PortKey) -> int:
        try:
            return self.index[key]
        except KeyError:
            raise ConfigError(f"{key[0]} port {key[1]} is not a switch egress port of "
                              f"{self.spec.name!r}") from None

    # -- links -----------------------------------------------------------------------
    def set_link(self, a: str, b: str, up: bool) -> None:
        """Fail or restore the link between nodes ``a`` and ``b`` (both directions)."""
        if not any({lk.a, lk.b} == {a, b} for lk in self.spec.links):
            raise ConfigError(f"no link between {a!r} and {b!r} in {self.spec.name!r}")
        pair = frozenset((a, b))
        if up:
            self.down.discard(pair)
        else:
            self.down.add(pair)
        self._set_next_hops(shortest_next_hops(self.spec, self.down))

    def _set_next_hops(self, table: dict[str, dict[str, tuple[int, ...]]]) -> None:
        self.next_hops = table
        # switch -> destination -> ECMP members as (queue index, next node)
        self._members = {sw: {dst: tuple((self.index[(sw, port)], self._peer[(sw, port)])
                                         for port in group) for dst, group in t.items()}
                         for sw, t in table.items()}
        self._cache: dict[tuple[str, str, int], tuple[int, ...] | None] = {}

    def path(self, src: str, dst: str, flow_id: int, reply: bool = False) -> list[int] | None:
        """Queue indices from src to dst for flow ``flow_id``'s data (or, with ``reply``,
        for its receiver's replies: src is then the flow's receiver), or None if dst is
        unreachable."""
        h = flow_hash(self._ip[src], self._ip[dst], flow_id, reply)
        key = (src, dst, h)  # < 2**16: the cache holds every path
        if key in self._cache:
            hit = self._cache[key]
            return None if hit is None else list(hit)
        p = self._walk(src, dst, h)
        self._cache[key] = None if p is None else tuple(p)
        return p

    def _walk(self, src: str, dst: str, h: int) -> list[int] | None:
        sw = self._host_switch[src]
        if self.down and frozenset((src, sw)) in self.down:
            return None
        out: list[int] = []
        members = self._members
        while True:
            group = members.get(sw, {}).get(dst)
            if not group or len(out) > 64:
                return None
            q, peer = group[h % len(group)]
            out.append(q)
            if peer == dst:
                return out
            sw = peer

    def longest_path(self) -> int:
        """Most queues on any current shortest path (at least 1)."""
        longest = 1
        for src in {h.switch: h.name for h in self.spec.hosts}.values():
            for dst in self.hosts:
                if dst != src:
                    p = self.path(src, dst, 0)
                    longest = max(longest, len(p) if p else 1)
        return longest

    def path_delay_s(self, src: str, dst: str, path: list[int]) -> float:
        """One-way propagation delay of a path (links' delay_s; 0 for the built-ins)."""
        if not self._has_delay:  # the built-in topologies
            return 0.0
        return float(self._host_delay[src] + self.delay_s[path].sum())
