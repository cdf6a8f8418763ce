"""iperf3 for ``cls="bulk"`` schedule rows: the command line and its JSON output.

The BMv2 backend starts ``iperf3 -s`` on the receiver and ``iperf3_client_argv`` on the
sender and hands the client's stdout (``--json``) to ``parse_iperf3_json``.  Field names
follow iperf3's JSON output (iperf3 ``src/iperf_api.c``: ``start``, ``intervals``,
``end.sum_sent``/``end.sum_received``, ``error``).
"""

from __future__ import annotations

import json
import math
from typing import Any

from p4cc.constants import ETH_HEADER_BYTES, IPV4_HEADER_BYTES, TCP_HEADER_BYTES
from p4cc.errors import ConfigError, P4ccError

IPERF3_PORT = 5201


class Iperf3Error(P4ccError):
    """iperf3's output could not be parsed, or iperf3 reported an error."""


#: Bytes a full TCP data frame carries beyond the MSS given to TCP_MAXSEG (``iperf3 -M``):
#: Ethernet 14 + IPv4 20 + TCP 20.  Linux fits the TCP options into that MSS (with the
#: timestamps option, on by default (net.ipv4.tcp_timestamps; RFC 7323 §3), a segment
#: carries MSS − 12 B of data).  Measured with tcpdump across a veth with the fabric's
#: offloads off: ``iperf3 -M 946`` gave 387-388 of 396 data frames of 1000 B, ``-M 446``
#: 389 of 397 of 500 B (docs/emulation.md "Bulk TCP at the packet size the rate assumes").
TCP_WIRE_OVERHEAD = ETH_HEADER_BYTES + IPV4_HEADER_BYTES + TCP_HEADER_BYTES
#: The smallest MSS Linux takes through TCP_MAXSEG (net/ipv4/tcp.c: TCP_MIN_MSS 88)
MIN_MSS = 88


def tcp_mss(frame_bytes: int) -> int:
    """The MSS whose full data segments are ``frame_bytes`` on the wire."""
    mss = int(frame_bytes) - TCP_WIRE_OVERHEAD
    if mss < MIN_MSS:
        raise ConfigError(f"frames of {frame_bytes} B leave a TCP MSS of {mss} B; Linux "
                          f"takes at least {MIN_MSS}: use packets of at least "
                          f"{MIN_MSS + TCP_WIRE_OVERHEAD} B")
    return mss


def iperf3_client_argv(server_ip: str, duration_s: float, port: int = IPERF3_PORT,
                       interval_s: float = 1.0, cc: str | None = None,
                       mss: int | None = None) -> list[str]:
    """``iperf3 -c`` for a bulk row lasting ``duration_s`` (rounded up to whole seconds
    only by iperf3 releases older than 3.1, which took an integer ``-t``); ``mss`` sets
    the segments' MSS (``-M``: :func:`tcp_mss` of the packet size a link's rate assumes,
    so its packet rate serves its byte rate)."""
    argv = ["iperf3", "-c", server_ip, "-p", str(port), "-J", "-t", f"{duration_s:g}",
            "-i", f"{interval_s:g}"]
    if mss is not None:
        argv += ["-M", str(int(mss))]
    if cc:
        argv += ["-C", cc]
    return argv


def _num(d: dict[str, Any], key: str, default: float = math.nan) -> float:
    v = d.get(key, default)
    return float(v) if isinstance(v, (int, float)) else default


def parse_iperf3_json(text: str) -> dict[str, Any]:
    """Summarise one iperf3 ``-J`` run.

    Returns ``protocol``, ``duration_s``, ``bytes_sent``, ``bytes_received``,
    ``bps_sent``, ``bps_received``, ``retransmits`` (TCP; -1 if absent), ``lost_packets``
    and ``jitter_ms`` (UDP; NaN if absent), ``remote_host``, ``intervals`` (a list of
    ``{"start_s", "end_s", "bytes", "bps", "retransmits"}``) and ``error`` (None or
    iperf3's message, e.g. when the server was unreachable).  Raises Iperf3Error if the
    text is not iperf3 JSON.
    """
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise Iperf3Error(f"iperf3 output is not JSON ({exc}); run iperf3 with -J") from None
    if not isinstance(doc, dict) or not ({"start", "end", "error"} & doc.keys()):
        raise Iperf3Error("iperf3 JSON lacks 'start'/'end'/'error'; is this iperf3 -J output?")
    start = doc.get("start") or {}
    end = doc.get("end") or {}
    test = start.get("test_start") or {}
    connected = start.get("connected") or [{}]
    sent = end.get("sum_sent") or end.get("sum") or {}
    received = end.get("sum_received") or end.get("sum") or {}
    intervals = []
    for iv in doc.get("intervals") or []:
        s = iv.get("sum") or {}
        intervals.append({"start_s": _num(s, "start"), "end_s": _num(s, "end"),
                          "bytes": int(_num(s, "bytes", 0)),
                          "bps": _num(s, "bits_per_second", 0.0),
                          "retransmits": int(_num(s, "retransmits", -1))})
    return {
        "protocol": test.get("protocol", "TCP"),
        "duration_s": _num(sent, "seconds", _num(test, "duration")),
        "bytes_sent": int(_num(sent, "bytes", 0)),
        "bytes_received": int(_num(received, "bytes", 0)),
        "bps_sent": _num(sent, "bits_per_second", 0.0),
        "bps_received": _num(received, "bits_per_second", 0.0),
        "retransmits": int(_num(sent, "retransmits", -1)),
        "lost_packets": _num(end.get("sum") or {}, "lost_packets"),
        "jitter_ms": _num(end.get("sum") or {}, "jitter_ms"),
        "remote_host": connected[0].get("remote_host") if connected else None,
        "intervals": intervals,
        "error": doc.get("error"),
    }
