"""Commands that configure hosts and switch-side interfaces (pure functions, no root).

Each function returns argv lists; p4cc.topo.build runs them in the right namespace.

* Offloads off on both veth ends (tx/rx checksum, TSO, GSO, GRO): BMv2 reads frames
  with libpcap and must see MTU-sized packets with valid checksums, and the queue
  depth in packets only means something if a packet is a packet (REFERENCE §1).
* ECN on (``net.ipv4.tcp_ecn=1``) so TCP traffic is ECT and can be marked.
* Static ARP for every other host (their real MACs) and one route
  ``10.0.0.0/8 dev hX-eth0`` (docs/architecture.md, Addressing): no ARP or router is
  needed, because switches rewrite MAC addresses per hop.
* IPv6 off, so router solicitations and neighbour discovery do not enter the queues.
"""

from __future__ import annotations

from p4cc.topo.spec import HostSpec, TopoSpec

OFFLOADS = ("tx", "rx", "tso", "gso", "gro")
#: prefix of host addresses; the one route covers every host of every topology
HOST_PREFIX = "10.0.0.0/8"
HOST_PREFIX_LEN = 8

Command = list[str]


def host_intf(host: HostSpec) -> str:
    return f"{host.name}-eth0"


def switch_intf(switch: str, port: int) -> str:
    return f"{switch}-eth{port}"


def offload_cmd(ifname: str) -> Command:
    cmd = ["ethtool", "-K", ifname]
    for feature in OFFLOADS:
        cmd += [feature, "off"]
    return cmd


def ipv6_off_cmds(ifname: str | None = None) -> list[Command]:
    """Disable IPv6 for the whole namespace (hosts) or one interface (switch side)."""
    if ifname is None:
        return [["sysctl", "-q", "-w", f"net.ipv6.conf.{scope}.disable_ipv6=1"]
                for scope in ("all", "default", "lo")]
    return [["sysctl", "-q", "-w", f"net.ipv6.conf.{ifname}.disable_ipv6=1"]]


def host_commands(topo: TopoSpec, name: str) -> list[Command]:
    """Everything run inside host ``name``'s namespace after Mininet created it.

    Mininet has already set the interface's MAC and ``ip/8`` address.
    """
    host = topo.host(name)
    dev = host_intf(host)
    cmds: list[Command] = [
        ["ip", "link", "set", dev, "address", host.mac],
        ["ip", "addr", "replace", f"{host.ip}/{HOST_PREFIX_LEN}", "dev", dev],
        ["ip", "link", "set", dev, "up"],
        offload_cmd(dev),
        ["sysctl", "-q", "-w", "net.ipv4.tcp_ecn=1"],
        *ipv6_off_cmds(),
        ["ip", "route", "replace", HOST_PREFIX, "dev", dev],
    ]
    for other in topo.hosts:
        if other.name != name:
            cmds.append(["ip", "neigh", "replace", other.ip, "lladdr", other.mac, "dev", dev,
                         "nud", "permanent"])
    return cmds


def switch_commands(topo: TopoSpec, switch: str) -> list[Command]:
    """Run in the root namespace for each of ``switch``'s interfaces before BMv2 starts."""
    spec = topo.switch(switch)
    cmds: list[Command] = []
    for port in spec.ports:
        dev = switch_intf(switch, port)
        cmds += [
            ["ip", "link", "set", dev, "address", spec.port_mac(port)],
            ["ip", "link", "set", dev, "up"],
            offload_cmd(dev),
            *ipv6_off_cmds(dev),
        ]
    return cmds


def interface_names(topo: TopoSpec) -> list[str]:
    """Every interface a fabric built from ``topo`` creates (for leak checks)."""
    names = [host_intf(h) for h in topo.hosts]
    for s in topo.switches:
        names += [switch_intf(s.name, p) for p in s.ports]
    return names


def root_interface_names(topo: TopoSpec) -> list[str]:
    """The interfaces that live in the root namespace (the switch ends)."""
    return [switch_intf(s.name, p) for s in topo.switches for p in s.ports]
