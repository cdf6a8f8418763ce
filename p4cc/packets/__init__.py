"""Scapy layers for p4cc's custom headers.

* :mod:`p4cc.packets.int` — INT shim, metadata, hop records, summary, packet_in report
  header, and the report/summary decoders (formats of p4src/include/headers.p4).
* :mod:`p4cc.packets.transport` — the RoCEv2-style host transport (BTH/CNP).
"""
