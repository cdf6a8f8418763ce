"""Veth pairs for a BMv2 switch on plain interfaces (no Mininet): benchmarks and tests.

Pair ``<name>a`` (switch side) / ``<name>b`` (host side) per port, up, IPv6 off; a stale
pair of the same name (ours, from an interrupted run) is replaced; all are deleted on
exit.  Needs root.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator, Mapping

from p4cc.topo.hosts import offload_cmd


def _run(*args: str, check: bool = True) -> None:
    subprocess.run(list(args), check=check, capture_output=True)


@contextlib.contextmanager
def veth_pairs(names: str | Mapping[int, str], ports: tuple[int, ...] = (1, 2),
               offloads_off: bool = False) -> Iterator[dict[int, tuple[str, str]]]:
    """``{port: (switch side, host side)}``; ``names`` is a prefix (``<prefix><port>``)
    or a ``{port: name}`` map.  ``offloads_off`` turns the switch side's offloads off, as
    the topology builder does (with offloads on, libpcap sizes BMv2's capture ring for
    64 KB frames and longer bursts are dropped before BMv2 sees them)."""
    base = ({p: f"{names}{p}" for p in ports} if isinstance(names, str) else dict(names))
    pairs = {p: (f"{n}a", f"{n}b") for p, n in base.items()}
    made: list[str] = []
    try:
        for a, b in pairs.values():
            _run("ip", "link", "del", a, check=False)  # stale, ours
            _run("ip", "link", "add", a, "type", "veth", "peer", "name", b)
            made.append(a)
            for dev in (a, b):
                _run("sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1", check=False)
                _run("ip", "link", "set", dev, "up")
            if offloads_off:
                _run(*offload_cmd(a))
        yield pairs
    finally:
        for a in made:
            _run("ip", "link", "del", a, check=False)
