"""Scapy layers for p4cc's custom headers.

* :mod:`p4cc.packets.int` — INT shim, metadata, hop records, summary, packet_in report
  header, and the report/summary decoders (formats of p4src/include/headers.p4).
* :mod:`p4cc.packets.transport` — the RoCEv2-style host transport (BTH/CNP).
"""

import logging

# Scapy prints WARNING lines (routes, interfaces, MAC lookups) on import and use, which
# ended up in run logs; p4cc only builds and parses packets with it.  Scapy keeps a
# level set before its import (scapy/error.py: "override the level if not already set").
logging.getLogger("scapy").setLevel(logging.ERROR)
