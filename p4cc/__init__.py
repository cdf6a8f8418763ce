"""p4cc: an open testbed for datacenter congestion-control research and teaching."""

__version__ = "0.1.0"
