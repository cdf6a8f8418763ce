"""Routes and ECMP groups computed from topology descriptions."""

from __future__ import annotations

import pytest

from p4cc.controlplane.routes import compute_routes, host_facing_ports, switch_distances
from p4cc.topo.spec import parse_topo


def test_star_direct_host_routes() -> None:
    topo = parse_topo("star,hosts=4")
    r = compute_routes(topo)["s1"]
    assert len(r.routes) == 4 and r.groups == ()
    route = r.lookup("10.0.1.3")
    assert route.cidr == "10.0.1.3/32"
    assert route.nhop is not None
    assert (route.nhop.port, route.nhop.dmac, route.nhop.smac) == (
        3, "00:00:0a:00:01:03", "00:aa:00:01:00:03")
    assert host_facing_ports(topo, "s1") == [1, 2, 3, 4]


@pytest.mark.parametrize("aggregate", [False, True])
def test_dumbbell(aggregate: bool) -> None:
    topo = parse_topo("dumbbell,left=2,right=3")
    routes = compute_routes(topo, aggregate=aggregate)
    s1 = routes["s1"]
    remote = s1.lookup("10.0.2.3")
    assert remote.nhop is not None and remote.nhop.port == 3  # trunk is s1's port 3
    assert remote.nhop.dmac == topo.switch("s2").port_mac(4)
    assert remote.prefix_len == (24 if aggregate else 32)
    assert len(s1.routes) == 2 + (1 if aggregate else 3)
    assert routes["s2"].lookup("10.0.1.1").nhop.port == 4  # type: ignore[union-attr]
    assert host_facing_ports(topo, "s1") == [1, 2]


def test_leafspine_ecmp_over_all_spines() -> None:
    topo = parse_topo("leafspine,spines=3,leaves=3,hosts=2")
    routes = compute_routes(topo)
    leaf1 = routes["leaf1"]
    local = leaf1.lookup("10.0.1.2")
    assert local.nhop is not None and local.nhop.port == 2
    far = leaf1.lookup("10.0.3.1")
    assert far.group is not None
    group = leaf1.group(far.group)
    assert [m.port for m in group.members] == [3, 4, 5]  # one uplink per spine
    assert {m.dmac for m in group.members} == {
        topo.switch(f"spine{i}").port_mac(1) for i in (1, 2, 3)}
    # every remote destination shares the one group: deterministic id 1
    assert leaf1.groups == (group,) and group.group_id == 1
    assert leaf1.lookup("10.0.2.2").group == 1
    # a spine has one direct next hop per leaf
    spine2 = routes["spine2"]
    assert spine2.groups == ()
    assert spine2.lookup("10.0.3.2").nhop.port == 3  # type: ignore[union-attr]
    assert compute_routes(topo) == routes  # deterministic


def test_leafspine_single_spine_no_groups_and_distances() -> None:
    topo = parse_topo("leafspine,spines=1,leaves=4,hosts=1")
    routes = compute_routes(topo, aggregate=True)
    assert all(r.groups == () for r in routes.values())
    assert switch_distances(topo, "leaf1") == {"leaf1": 0, "spine1": 1, "leaf2": 2,
                                               "leaf3": 2, "leaf4": 2}
    assert len(routes["leaf2"].routes) == 4  # 1 local /32 + 3 remote /24
