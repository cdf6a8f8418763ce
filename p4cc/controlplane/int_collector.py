"""INT reports: PacketIns cloned to the CPU port -> decoded INT records.

The last switch on an INT path clones the packet to CPU port 510 (docs/architecture.md);
the switch's P4RuntimeClient receives it as a PacketIn.  Decoding is the Scapy layers'
job (``p4cc.packets.int.decode_report(payload, metadata) -> IntReport``); this module only
drains the PacketIn queue, stamps each report with the switch and receive time, and
counts undecodable payloads instead of failing.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from p4cc.controlplane.p4runtime import PacketIn
from p4cc.errors import ConfigError

log = logging.getLogger(__name__)

#: decode(payload, metadata by name) -> IntReport
Decoder = Callable[[bytes, Mapping[str, int]], Any]


def default_decoder() -> Decoder:
    try:
        from p4cc.packets.int import decode_report
    except ImportError as exc:
        raise ConfigError(
            f"INT decoding needs p4cc.packets.int.decode_report, which is missing ({exc})"
        ) from None
    return decode_report


@dataclass(frozen=True)
class IntRecord:
    switch: str  # the reporting (sink) switch
    t_s: float  # receive time, seconds since the run started
    ingress_port: int | None  # PacketIn metadata, when the program sends it
    report: Any  # p4cc.packets.int.IntReport


class IntCollector:
    """``IntCollector("s1", client.packet_ins()).drain()`` -> records so far."""

    def __init__(self, switch: str, packet_ins: queue.Queue[PacketIn],
                 decode: Decoder | None = None, sink: Callable[[IntRecord], None] | None = None,
                 t0: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.switch = switch
        self.packet_ins = packet_ins
        self.decode = decode or default_decoder()
        self.sink = sink
        self.clock = clock
        self.t0 = clock() if t0 is None else t0
        self.decode_errors = 0
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def handle(self, pin: PacketIn) -> IntRecord | None:
        try:
            report = self.decode(pin.payload, pin.metadata)
        except Exception as exc:  # malformed or non-INT packet: count, never crash
            self.decode_errors += 1
            log.debug("%s: undecodable PacketIn (%d B): %s", self.switch, len(pin.payload), exc)
            return None
        rec = IntRecord(self.switch, self.clock() - self.t0,
                        pin.metadata.get("ingress_port"), report)
        if self.sink is not None:
            self.sink(rec)
        return rec

    def drain(self, max_items: int | None = None) -> list[IntRecord]:
        out: list[IntRecord] = []
        while max_items is None or len(out) < max_items:
            try:
                pin = self.packet_ins.get_nowait()
            except queue.Empty:
                break
            rec = self.handle(pin)
            if rec is not None:
                out.append(rec)
        return out

    def start(self) -> None:
        """Handle PacketIns on a background thread until :meth:`stop`."""
        def run() -> None:
            while not self._stop.is_set():
                try:
                    pin = self.packet_ins.get(timeout=0.1)
                except queue.Empty:
                    continue
                self.handle(pin)

        self._stop.clear()
        self._thread = threading.Thread(target=run, name=f"int-{self.switch}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
