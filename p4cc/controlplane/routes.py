"""Routes and ECMP groups for every switch of a TopoSpec (pure; no switch needed).

Shortest paths by breadth-first search over the switch graph (hosts never forward).
A switch reaches a destination through every port whose peer switch is one hop closer
to the destination's edge switch; one such port gives a direct next hop, several give
an ECMP group (in a leaf-spine fabric a leaf reaches a remote leaf through every spine).
Next hops rewrite MACs per hop (docs/architecture.md): ``smac`` is the egress port's MAC,
``dmac`` the MAC of the peer (the host's MAC, or the peer switch port's MAC).
Group ids are deterministic: distinct member sets, sorted, numbered from 1 per switch.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from p4cc.errors import ConfigError
from p4cc.topo.spec import HostSpec, TopoSpec


@dataclass(frozen=True, order=True)
class NextHop:
    port: int
    dmac: str
    smac: str


@dataclass(frozen=True)
class EcmpGroup:
    group_id: int
    members: tuple[NextHop, ...]  # index i of ecmp_nhop -> members[i]


@dataclass(frozen=True)
class Route:
    prefix: str  # network address, e.g. "10.0.2.0"
    prefix_len: int
    nhop: NextHop | None = None  # exactly one of nhop / group is set
    group: int | None = None

    @property
    def cidr(self) -> str:
        return f"{self.prefix}/{self.prefix_len}"


@dataclass(frozen=True)
class SwitchRoutes:
    switch: str
    routes: tuple[Route, ...]
    groups: tuple[EcmpGroup, ...]

    def group(self, group_id: int) -> EcmpGroup:
        for g in self.groups:
            if g.group_id == group_id:
                return g
        raise ConfigError(f"{self.switch} has no ECMP group {group_id}")

    def lookup(self, ip: str) -> Route:
        """The route a destination address takes (longest prefix)."""
        best: Route | None = None
        for r in self.routes:
            if _in_prefix(ip, r.prefix, r.prefix_len) and (best is None
                                                           or r.prefix_len > best.prefix_len):
                best = r
        if best is None:
            raise ConfigError(f"{self.switch} has no route to {ip}")
        return best


def _ip_int(ip: str) -> int:
    a, b, c, d = (int(x) for x in ip.split("."))
    return (a << 24) | (b << 16) | (c << 8) | d


def _in_prefix(ip: str, prefix: str, plen: int) -> bool:
    mask = ((1 << plen) - 1) << (32 - plen)
    return (_ip_int(ip) & mask) == (_ip_int(prefix) & mask)


def switch_distances(topo: TopoSpec, target: str) -> dict[str, int]:
    """Hop count from every switch to switch ``target`` (BFS over switch-switch links)."""
    dist = {target: 0}
    todo = deque([target])
    while todo:
        sw = todo.popleft()
        for _port, peer, _pp, _link in topo.switch_links(sw):
            if not topo.is_host(peer) and peer not in dist:
                dist[peer] = dist[sw] + 1
                todo.append(peer)
    return dist


def _toward(topo: TopoSpec, sw: str, edge: str, dist: dict[str, int]) -> tuple[NextHop, ...]:
    spec = topo.switch(sw)
    hops = []
    for port, peer, peer_port, _link in topo.switch_links(sw):
        if topo.is_host(peer) or dist.get(peer, -1) != dist[sw] - 1:
            continue
        hops.append(NextHop(port, topo.switch(peer).port_mac(peer_port), spec.port_mac(port)))
    return tuple(sorted(hops))


def _subnet(host: HostSpec) -> str:
    a, b, c, _ = host.ip.split(".")
    return f"{a}.{b}.{c}.0"


def compute_routes(topo: TopoSpec, aggregate: bool = False) -> dict[str, SwitchRoutes]:
    """Routes of every switch.  ``aggregate``: one /24 per remote edge switch instead of
    one /32 per remote host (local hosts always get /32 routes)."""
    by_edge: dict[str, list[HostSpec]] = {}
    for h in topo.hosts:
        by_edge.setdefault(h.switch, []).append(h)
    dists = {edge: switch_distances(topo, edge) for edge in by_edge}
    result: dict[str, SwitchRoutes] = {}
    for spec in topo.switches:
        sw = spec.name
        pending: list[tuple[str, int, tuple[NextHop, ...]]] = []
        for edge, hosts in by_edge.items():
            if edge == sw:
                for h in hosts:
                    nh = NextHop(h.switch_port, h.mac, spec.port_mac(h.switch_port))
                    pending.append((h.ip, 32, (nh,)))
                continue
            if sw not in dists[edge]:
                continue  # not connected: no route, the default action drops
            hops = _toward(topo, sw, edge, dists[edge])
            if aggregate:
                pending.append((_subnet(hosts[0]), 24, hops))
            else:
                pending.extend((h.ip, 32, hops) for h in hosts)
        member_sets = sorted({hops for _, _, hops in pending if len(hops) > 1})
        group_ids = {members: i + 1 for i, members in enumerate(member_sets)}
        routes = tuple(
            Route(prefix, plen, nhop=hops[0]) if len(hops) == 1
            else Route(prefix, plen, group=group_ids[hops])
            for prefix, plen, hops in sorted(pending, key=lambda p: (_ip_int(p[0]), p[1]))
        )
        groups = tuple(EcmpGroup(gid, members) for members, gid in group_ids.items())
        result[sw] = SwitchRoutes(sw, routes, groups)
    return result


def host_facing_ports(topo: TopoSpec, switch: str) -> list[int]:
    """Ports of ``switch`` that lead to a host (where INT is sunk)."""
    return sorted(p for p, peer, _pp, _l in topo.switch_links(switch) if topo.is_host(peer))
