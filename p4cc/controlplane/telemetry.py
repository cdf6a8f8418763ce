"""Telemetry poller: switch counters and registers -> one PortTelemetry per port.

Each poll reads the cumulative counters ``port_offered``, ``port_tx``, ``port_marked``
over P4Runtime (one ReadRequest, a wildcard entity each) and the telemetry registers over
Thrift (REFERENCE §1, one whole-array read each); the counter read is sent first and
collected after the Thrift reads up to the epoch switch, so they overlap.  Two data-plane
programs are understood (p4src/include/telemetry.p4):

* the epoch program (default build; p4cc.controlplane.epoch): the queue sums are
  cumulative and the maxima/bitmaps banked by epoch; a poll reads the sums, writes the
  one-cell ``tel_epoch`` (the interval's end, one Thrift call) and then reads the closed
  bank.  No register is reset per poll;
* the read-and-reset program (-DP4CC_READ_RESET): the interval registers are read, then
  reset (7 Thrift calls); packets that arrive between a read and its reset are lost to
  both intervals.

Both give the same registers of the interval to the pure function :func:`port_records`
(tests/test_controlplane_epoch.py on a model, tests/test_epoch_live.py on BMv2).
``last_read`` keeps the spread of the latest poll's reads (first counter read to the
epoch switch, or to the last register read) for the fidelity check.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from p4cc.constants import BITMAP_WORDS
from p4cc.controlplane import epoch
from p4cc.controlplane.ecn import EcnConfig
from p4cc.controlplane.records import PortTelemetry
from p4cc.scale import Scale

COUNTERS = ("port_offered", "port_tx", "port_marked")
#: the read-and-reset program's registers (-DP4CC_READ_RESET): "since the last poll"
#: values, reset at every poll (the epoch program's are in p4cc.controlplane.epoch)
INTERVAL_REGISTERS = ("q_enq_sum", "q_enq_cnt", "q_enq_max", "q_sojourn_sum",
                      "incast_bits", "flow_bits", "elephant_bits")
#: count-min sketch rows of bytes per flow; restarted every ``sketch_window_s`` (the
#: epoch program: by its window tag, which moves with the epoch write; read-and-reset:
#: reset by the poller).  The window is longer than Δt on purpose: an elephant is a flow
#: whose bytes within the window reach ``elephant_bytes`` (PET's 1 MB, BDP-scaled);
#: restarted every 10 ms interval at 10 Mb/s a flow could never send more than 12.5 kB
#: and none would qualify.
SKETCH_REGISTERS = ("flow_bytes_r0", "flow_bytes_r1")
DEFAULT_SKETCH_WINDOW_S = 1.0
#: bitmap layout (docs/architecture.md): BITMAP_WORDS (from the compiled program: 4)
#: words of 64 bits per port
BITMAP_WORD_BITS = 64
BITMAP_BITS = BITMAP_WORDS * BITMAP_WORD_BITS


def linear_count(ones: int, m: int = BITMAP_BITS) -> int:
    """Distinct items hashed into an m-bit bitmap with ``ones`` bits set.

    Linear counting (Whang, Vander-Zanden, Taylor, "A linear-time probabilistic
    counting algorithm for database applications", ACM TODS 15(2), 1990):
    n = -m ln(V/m) with V the number of zero bits (hash collisions corrected).  A full
    bitmap (V = 0) is saturated; it is reported as m ln m, the estimate at V = 1.
    """
    if not 0 <= ones <= m:
        raise ValueError(f"{ones} ones in a {m}-bit bitmap")
    zeros = max(1, m - ones)
    return round(-m * math.log(zeros / m))


def bitmap_ones(words: Sequence[int], port: int) -> int:
    base = port * BITMAP_WORDS
    return sum(bin(w).count("1") for w in words[base:base + BITMAP_WORDS])


@dataclass(frozen=True)
class Snapshot:
    t_s: float  # when the snapshot was taken (seconds since the run started)
    counters: Mapping[str, Mapping[int, tuple[int, int]]]  # cumulative (packets, bytes)
    registers: Mapping[str, Sequence[int]] = field(default_factory=dict)  # interval values
    t_counters_s: float | None = None  # when the counters were read (midpoint of the read)


def _delta(cur: Snapshot, prev: Snapshot, name: str, port: int) -> tuple[int, int]:
    c = cur.counters.get(name, {}).get(port, (0, 0))
    p = prev.counters.get(name, {}).get(port, (0, 0))
    # a counter that went backwards was reset (switch restarted): count from zero
    return tuple(cv - pv if cv >= pv else cv for cv, pv in zip(c, p, strict=True))  # type: ignore[return-value]


def _reg(snap: Snapshot, name: str, index: int) -> int:
    values = snap.registers.get(name, ())
    return int(values[index]) if index < len(values) else 0


def _mean_depth(snap: Snapshot, port: int) -> float | None:
    """Mean enqueue depth (packets) of the interval ``snap`` closes; None if unknown."""
    if "q_enq_cnt" not in snap.registers:
        return None
    cnt = _reg(snap, "q_enq_cnt", port)
    return _reg(snap, "q_enq_sum", port) / cnt if cnt else 0.0


def _unsent(off_pkts: int, tx_pkts: int, prev: Snapshot, cur: Snapshot, port: int) -> float:
    """Offered - sent - queue growth of the interval: its tail drops plus an error.

    BMv2 drops silently at a full queue, so drops are inferred from the counters.
    Packets still queued are offered but not yet sent, so the growth of the queue
    (estimated by the change of the mean enqueue depth between this interval and the
    previous one) is subtracted; without it, a queue filling from 0 to 100 packets
    would count as 100 drops.  The error is the difference between the packets between
    ingress and the wire at the two reads and that estimate: either sign, at most a
    queue's worth, and it cancels between intervals (:class:`DropBalance`).
    """
    growth = 0.0
    q_prev, q_cur = _mean_depth(prev, port), _mean_depth(cur, port)
    if q_prev is not None and q_cur is not None:
        growth = q_cur - q_prev
    return off_pkts - tx_pkts - growth


class DropBalance:
    """Per-port drops from the intervals' ``_unsent`` without accumulating their errors.

    Clipping each interval at zero (before session 12) kept every positive error and
    dropped every negative one: on the default experiment telemetry reported 1,400-2,500
    drops per run where the kernel's interface counters (``p4cc report --losses``)
    showed -9 to 139 and the senders retransmitted 23-731 packets.  Here the running
    sum ``C`` of the residuals is the cumulative drops plus a bounded error; an
    interval reports the amount by which ``C`` exceeds its previous maximum, so the
    run's total is ``max C``: the true drops plus one error, not the sum of them."""

    def __init__(self) -> None:
        self._sum: dict[int, float] = {}
        self._max: dict[int, float] = {}

    def drops(self, port: int, unsent: float) -> int:
        c = self._sum.get(port, 0.0) + unsent
        m = self._max.get(port, 0.0)
        self._sum[port] = c
        if c <= m:
            return 0
        self._max[port] = c
        return round(c) - round(m)


def port_records(switch: str, ports: Sequence[int], prev: Snapshot, cur: Snapshot,
                 scale: Scale, ecn: Mapping[int, EcnConfig | None],
                 port_rate_bps: Mapping[int, float],
                 balance: DropBalance | None = None) -> dict[int, PortTelemetry]:
    """Records of the interval (prev.t_s, cur.t_s]; ``cur.registers`` cover that interval.
    Drops: through ``balance`` (a poller's, carried across intervals) when given, else
    this interval's residual clipped at zero."""
    interval = cur.t_s - prev.t_s
    if interval <= 0:
        raise ValueError(f"snapshots are not in time order ({prev.t_s} -> {cur.t_s})")
    # the counters' own interval (their reads), the registers' is the epoch switch's
    civ = (cur.t_counters_s - prev.t_counters_s
           if cur.t_counters_s is not None and prev.t_counters_s is not None else 0.0)
    c_iv = civ if civ > 0 else interval
    out = {}
    for port in ports:
        off_pkts, _ = _delta(cur, prev, "port_offered", port)
        tx_pkts, tx_bytes = _delta(cur, prev, "port_tx", port)
        mk_pkts, mk_bytes = _delta(cur, prev, "port_marked", port)
        unsent = _unsent(off_pkts, tx_pkts, prev, cur, port)
        cnt = _reg(cur, "q_enq_cnt", port)
        qsum = _reg(cur, "q_enq_sum", port)
        sojourn_us = _reg(cur, "q_sojourn_sum", port)
        tx_bps = tx_bytes * 8.0 / c_iv
        rate = port_rate_bps.get(port, 0.0)
        out[port] = PortTelemetry(
            switch=switch, port=port, t_s=cur.t_s, interval_s=interval,
            qlen_avg_bytes=(qsum / cnt) * scale.pkt_bytes if cnt else 0.0,
            qlen_max_bytes=float(_reg(cur, "q_enq_max", port) * scale.pkt_bytes),
            tx_bps=tx_bps, tx_marked_bps=mk_bytes * 8.0 / c_iv,
            tx_pkts=tx_pkts, tx_marked_pkts=mk_pkts,
            drops_pkts=(max(0, round(unsent)) if balance is None
                        else balance.drops(port, unsent)),
            ecn=ecn.get(port),
            incast_degree=linear_count(bitmap_ones(cur.registers.get("incast_bits", ()), port)),
            active_flows=linear_count(bitmap_ones(cur.registers.get("flow_bits", ()), port)),
            elephant_flows=linear_count(
                bitmap_ones(cur.registers.get("elephant_bits", ()), port)),
            sojourn_avg_s=(sojourn_us / cnt) * 1e-6 if cnt else 0.0,
            utilization=tx_bps / rate if rate > 0 else 0.0,
            counter_interval_s=civ if civ > 0 else 0.0,
        )
    return out


class CounterReader(Protocol):
    def read_counters(self, name: str) -> dict[int, tuple[int, int]]: ...


class RegisterAccess(Protocol):
    def register_read_all(self, name: str) -> list[int]: ...
    def register_reset(self, name: str) -> None: ...
    def register_write(self, name: str, index: int, value: int) -> None: ...


class TelemetryPoller:
    """Polls one switch; :meth:`poll` returns this interval's records by port."""

    def __init__(self, switch: str, ports: Sequence[int], counters: CounterReader,
                 registers: RegisterAccess, scale: Scale, port_rate_bps: Mapping[int, float],
                 ecn_source: Callable[[], Mapping[int, EcnConfig | None]],
                 t0: float | None = None, clock: Callable[[], float] = time.monotonic,
                 sketch_window_s: float = DEFAULT_SKETCH_WINDOW_S) -> None:
        self.switch = switch
        self.ports = tuple(ports)
        self.counters = counters
        self.registers = registers
        self.scale = scale
        self.port_rate_bps = dict(port_rate_bps)
        self.ecn_source = ecn_source
        self.clock = clock
        self.t0 = clock() if t0 is None else t0
        self.sketch_window_s = sketch_window_s
        self._prev: Snapshot | None = None
        self.last_read: tuple[float, float] = (0.0, 0.0)
        #: the program keeps epoch-tagged statistics (no resets; p4cc.controlplane.epoch)
        self.epoch_mode = epoch.is_epoch_program(getattr(registers, "registers", None) or ())
        self._epoch: int | None = None  # the data plane's epoch (read at the first poll)
        self._window = 0  # the sketch window (epoch program: tel_epoch's upper half)
        self._cum: dict[str, list[int]] | None = None
        self._window_start: float | None = None  # run clock
        self.drop_balance = DropBalance()

    def snapshot(self) -> Snapshot:
        t_first = self.clock() - self.t0
        collect = self._start_counters()
        registers: dict[str, Sequence[int]] = {}
        if self.epoch_mode:
            cum, closed = self._epoch_switch(t_first)
        else:
            registers = {name: self.registers.register_read_all(name)
                         for name in INTERVAL_REGISTERS}
        t = self.clock() - self.t0  # the interval's end: the epoch switch, the last read
        counters = collect()
        t_collected = self.clock() - self.t0
        t_counters = (t_first + t_collected) / 2.0
        #: (first read, last read) of the latest snapshot, run clock: the fidelity check
        #: wants one poll's reads close together in time.  The counters, read meanwhile,
        #: count as read when collected (an upper bound).
        self.last_read = (t_first, max(t, t_collected))
        if self.epoch_mode:
            registers = self._closed_bank(cum, closed)
        else:
            for name in INTERVAL_REGISTERS:
                self.registers.register_reset(name)
            if self._new_sketch_window(t_first):
                for name in SKETCH_REGISTERS:
                    self.registers.register_reset(name)
        return Snapshot(t, counters, registers, t_counters)

    def _start_counters(self) -> Callable[[], dict[str, dict[int, tuple[int, int]]]]:
        """Send the counter read and return its collector.  P4RuntimeClient sends it at
        once and the Thrift reads overlap it (measured in docs/benchmarks.md
        "controlloop": a shorter spread on a busy machine and in a run's tail, the same
        median on an idle one); a reader without ``start_read_counters_many`` is read
        here, before the registers."""
        start = getattr(self.counters, "start_read_counters_many", None)
        if start is not None:
            collect: Callable[[], dict[str, dict[int, tuple[int, int]]]] = start(COUNTERS)
            return collect
        many = getattr(self.counters, "read_counters_many", None)
        counters = (many(COUNTERS) if many is not None
                    else {name: self.counters.read_counters(name) for name in COUNTERS})
        return lambda: counters

    def _new_sketch_window(self, t: float) -> bool:
        """Whether the sketch restarts at this poll (the first, and the first after each
        ``sketch_window_s``); ``t``: the poll's start, run clock."""
        if self._window_start is None or t - self._window_start >= self.sketch_window_s:
            self._window_start = t
            return True
        return False

    def _epoch_switch(self, t_first: float) -> tuple[dict[str, list[int]], int]:
        """Epoch program (p4cc.controlplane.epoch): the cumulative sums, then the epoch
        switch (the interval's end).  Returns the sums and the epoch just closed."""
        if self._epoch is None:  # where the switch is (an earlier poller may have run)
            self._epoch, self._window = epoch.split_word(
                self.registers.register_read_all(epoch.EPOCH_REGISTER)[0])
        cum = {name: self.registers.register_read_all(name) for name in epoch.CUMULATIVE}
        closed = self._epoch
        self._epoch = (closed + 1) % epoch.EPOCH_MOD
        if self._new_sketch_window(t_first):  # the window moves with the epoch
            self._window = (self._window + 1) % epoch.EPOCH_MOD
        self.registers.register_write(epoch.EPOCH_REGISTER, 0,
                                      epoch.epoch_word(self._epoch, self._window))
        return cum, closed

    def _closed_bank(self, cum: dict[str, list[int]],
                     closed: int) -> dict[str, Sequence[int]]:
        """The interval's registers: the sums' differences and the closed bank, read at
        leisure (nothing writes it until the next switch)."""
        regs: dict[str, Sequence[int]] = dict(epoch.interval_sums(cum, self._cum))
        self._cum = cum
        regs.update(epoch.closed_interval(
            {name: self.registers.register_read_all(name) for name in epoch.TAGGED}, closed))
        return regs

    def prime(self) -> None:
        """Take the first snapshot (start of the first interval)."""
        self._prev = self.snapshot()

    def poll(self) -> dict[int, PortTelemetry]:
        """Records since the previous poll (primes and returns {} the first time)."""
        ecn = self.ecn_source()
        cur = self.snapshot()
        prev, self._prev = self._prev, cur
        if prev is None or cur.t_s <= prev.t_s:
            return {}
        return port_records(self.switch, self.ports, prev, cur, self.scale, ecn,
                            self.port_rate_bps, self.drop_balance)
