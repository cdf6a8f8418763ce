"""How-to example: a topology (docs/howto.md, "Add a topology").

``chain,switches=3,hosts=1``: switches s1..sN in a line, ``hosts`` hosts on each end
switch, so every end-to-end flow crosses all N switches (a multi-hop path for INT and
for per-hop marking).  A topology is only a *description* (p4cc.topo.spec.TopoSpec:
hosts, switches, ports, links, addresses); p4cc.topo.build.Fabric builds any
description on Mininet + BMv2, p4cc.controlplane.routes computes its routes, and the
simulator plays it, so a new topology needs no other code.
"""

from __future__ import annotations

import itertools

from p4cc.scale import Scale
from p4cc.topo import spec as topo_spec
from p4cc.topo.spec import TopoSpec


def chain(scale: Scale, switches: int = 3, hosts: int = 1) -> TopoSpec:
    """``switches`` switches in a line, ``hosts`` hosts on each end switch."""
    if not 2 <= switches <= 8 or not 1 <= hosts <= 16:
        raise topo_spec.ConfigError(
            f"chain: switches={switches} must be in [2, 8] and hosts={hosts} in [1, 16]")
    # _Builder keeps the address plan of docs/architecture.md (IPs, MACs, port numbers,
    # device ids) so every description follows it; ports are numbered in call order.
    b = topo_spec._Builder(scale)
    names = [b.switch(f"s{i + 1}", "tor" if i in (0, switches - 1) else "core")
             for i in range(switches)]
    for edge in (names[0], names[-1]):
        for _ in range(hosts):
            b.host(edge, scale.link_rate_bps)
    for a, c in itertools.pairwise(names):
        b.trunk(a, c, scale.link_rate_bps)
    return b.done("chain", {"switches": switches, "hosts": hosts})


def register() -> None:
    """Make ``chain,...`` a topology string that specs and ``p4cc topo`` accept.

    parse_topo reads the factory's parameter names (``switches``, ``hosts``) from its
    signature and converts ``key=value`` to int (names in ``_FLOAT_PARAMS`` to float)."""
    topo_spec.TOPOLOGIES["chain"] = chain
