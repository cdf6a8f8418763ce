"""Topologies: descriptions (no root needed) and the Mininet builder (root, BMv2)."""

from p4cc.topo.spec import HostSpec, LinkSpec, SwitchSpec, TopoSpec, parse_topo, topo_names

__all__ = ["HostSpec", "LinkSpec", "SwitchSpec", "TopoSpec", "parse_topo", "topo_names"]
