"""Epoch telemetry (p4cc.controlplane.epoch): the poller gives the same per-interval
figures from the epoch program as from read-and-reset, on a model of both data planes
(p4src/include/telemetry.p4 and its -DP4CC_READ_RESET build, packet by packet).

The live version on simple_switch_grpc is tests/test_epoch_live.py.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest

from p4cc.constants import BITMAP_WORDS
from p4cc.controlplane import epoch
from p4cc.controlplane.telemetry import INTERVAL_REGISTERS, TelemetryPoller
from p4cc.scale import Scale

PORTS = 8
ELEPHANT_BYTES = 12_000  # 12 packets of 1000 B within a sketch window
#: the clock below moves 1 s per call, 3 calls per poll: the sketch restarts at the
#: prime (t = 0) and at every second poll (t = 6, 12, 18)
SKETCH_WINDOW_S = 5.0
BM = PORTS * BITMAP_WORDS
CELLS = PORTS * BITMAP_WORDS * 2  # epoch program: 32-bit bitmap cells, 8 per port


class ModelPlane:
    """Registers of either program, updated per packet as the P4 would."""

    def __init__(self, epoch_program: bool) -> None:
        self.ep = epoch_program
        self.registers: dict[str, list[int]] = {
            "q_enq_sum": [0] * PORTS, "q_enq_cnt": [0] * PORTS, "q_sojourn_sum": [0] * PORTS,
            "flow_bytes_r0": [0] * 64, "flow_bytes_r1": [0] * 64}
        if epoch_program:  # two banks of tagged cells
            self.registers.update({"tel_epoch": [0], "q_enq_max": [0] * PORTS * 2,
                                   "incast_bits": [0] * CELLS * 2,
                                   "flow_bits": [0] * CELLS * 2,
                                   "elephant_bits": [0] * CELLS * 2})
        else:
            self.registers.update({"q_enq_max": [0] * PORTS, "incast_bits": [0] * BM,
                                   "flow_bits": [0] * BM, "elephant_bits": [0] * BM})
        self.resets = 0

    # -- the control plane's view (RegisterAccess) -----------------------------------
    def register_read_all(self, name: str) -> list[int]:
        return list(self.registers[name])

    def register_reset(self, name: str) -> None:
        self.resets += 1
        self.registers[name] = [0] * len(self.registers[name])

    def register_write(self, name: str, index: int, value: int) -> None:
        self.registers[name][index] = value

    # -- one packet at egress ----------------------------------------------------------
    def packet(self, port: int, depth: int, sojourn: int, src_bit: int, flow_bit: int,
               rows: tuple[int, int], size: int) -> None:
        """One packet of ``size`` bytes whose flow hashes to sketch cells ``rows``."""
        r = self.registers
        elephant = self._sketch(rows, size) >= ELEPHANT_BYTES
        r["q_enq_sum"][port] += depth
        r["q_enq_cnt"][port] += 1
        r["q_sojourn_sum"][port] += sojourn
        if not self.ep:
            si, sb = port * BITMAP_WORDS + src_bit // 64, 1 << (src_bit % 64)
            fi, fb = port * BITMAP_WORDS + flow_bit // 64, 1 << (flow_bit % 64)
            r["q_enq_max"][port] = max(r["q_enq_max"][port], depth)
            r["incast_bits"][si] |= sb
            r["flow_bits"][fi] |= fb
            r["elephant_bits"][fi] |= fb if elephant else 0
            return
        e = epoch.split_word(r["tel_epoch"][0])[0]
        b = e & 1

        def restart(name: str, i: int) -> int:
            """The cell's value, 0 if another epoch wrote it (the P4's tag test)."""
            c = r[name][i]
            return c & epoch.VALUE_MASK if c >> 32 == e else 0

        pi = b * PORTS + port
        old = r["q_enq_max"][pi]
        r["q_enq_max"][pi] = epoch.cell(e, depth if old >> 32 != e else max(old & 0xFFFFFFFF,
                                                                             depth))
        si, sb = b * CELLS + port * 8 + src_bit // 32, 1 << (src_bit % 32)
        fi, fb = b * CELLS + port * 8 + flow_bit // 32, 1 << (flow_bit % 32)
        r["incast_bits"][si] = epoch.cell(e, restart("incast_bits", si) | sb)
        r["flow_bits"][fi] = epoch.cell(e, restart("flow_bits", fi) | fb)
        r["elephant_bits"][fi] = epoch.cell(e, restart("elephant_bits", fi)
                                            | (fb if elephant else 0))


    def _sketch(self, rows: tuple[int, int], size: int) -> int:
        """Add ``size`` to the flow's cell in both count-min rows; the estimate (the min).
        The epoch program restarts a cell whose window tag is not the current window."""
        est = []
        for name, i in zip(("flow_bytes_r0", "flow_bytes_r1"), rows, strict=True):
            c = self.registers[name][i]
            if self.ep:
                w = epoch.split_word(self.registers["tel_epoch"][0])[1]
                c = epoch.cell(w, (c & epoch.VALUE_MASK if c >> 32 == w else 0) + size)
            else:
                c += size
            self.registers[name][i] = c
            est.append(c & epoch.VALUE_MASK)
        return min(est)


class NoCounters:
    def read_counters(self, name: str) -> dict[int, tuple[int, int]]:
        return {}


def _records(plane: ModelPlane, seed: int) -> list[Any]:
    clock = iter(float(i) for i in range(10_000))
    poller = TelemetryPoller("s1", range(1, PORTS), NoCounters(), plane, Scale(), {},
                             dict, t0=0.0, clock=lambda: next(clock),
                             sketch_window_s=SKETCH_WINDOW_S)
    assert poller.epoch_mode is plane.ep
    rng = random.Random(seed)
    poller.prime()
    out = []
    for _interval in range(6):
        for _ in range(rng.randrange(0, 300)):
            flow = min(rng.randrange(40), rng.randrange(40))  # a flow (skewed sizes): its
            plane.packet(rng.randrange(1, PORTS), rng.randrange(0, 100),  # bit, sketch cells
                         rng.randrange(0, 5000), rng.randrange(256), flow * 6 % 256,
                         (flow, (flow * 7 + 3) % 64), 1000)
        out.append(poller.poll())
    return out


def test_epoch_and_read_reset_give_the_same_intervals() -> None:
    for seed in range(5):
        old, new = ModelPlane(False), ModelPlane(True)
        a, b = _records(old, seed), _records(new, seed)
        assert a == b
        assert any(r.qlen_max_bytes > 0 and r.active_flows > 0 for recs in a
                   for r in recs.values())
        # elephants are counted, and the sketch restarted, in some intervals
        assert any(r.elephant_flows > 0 for recs in a for r in recs.values())
        assert any(r.elephant_flows == 0 and r.active_flows > 0 for recs in a[1:]
                   for r in recs.values())
        # the epoch program needs no resets at all: neither per interval nor per window
        assert old.resets >= 6 * len(INTERVAL_REGISTERS) + 2 * 2 and new.resets == 0


def test_tags_matter(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader that ignores the tags (or a data plane that never restarts a cell)
    reports stale maxima and bits from two epochs back: the equivalence above fails."""
    def untagged(cells: list[int], ep: int) -> list[int]:
        size = len(cells) // 2
        return [c & epoch.VALUE_MASK for c in cells[(ep & 1) * size:(ep & 1) * size + size]]

    monkeypatch.setattr(epoch, "closed_bank", untagged)
    assert any(_records(ModelPlane(False), seed) != _records(ModelPlane(True), seed)
               for seed in range(5))


def test_sketch_window_matters(monkeypatch: pytest.MonkeyPatch) -> None:
    """A poller that never moves the window in tel_epoch leaves the epoch program's
    sketch counting from the start, and its elephant counts differ from read-and-reset."""
    monkeypatch.setattr(epoch, "epoch_word", lambda e, w: e % epoch.EPOCH_MOD)
    assert any(_records(ModelPlane(False), seed) != _records(ModelPlane(True), seed)
               for seed in range(5))


def test_epoch_word() -> None:
    assert epoch.epoch_word(5, 2) == 2 << 32 | 5
    assert epoch.split_word(epoch.epoch_word(2**32 + 5, 2**32 + 2)) == (5, 2)  # both wrap
    assert epoch.split_word(-1) == (2**32 - 1, 2**32 - 1)  # Thrift's i64 is signed


def test_detection_and_bank_selection() -> None:
    assert epoch.is_epoch_program(["MyEgress.telemetry.tel_epoch", "x"])
    assert not epoch.is_epoch_program(["MyEgress.telemetry.q_enq_max"])
    cells = [epoch.cell(3, 5), epoch.cell(1, 6), epoch.cell(3, 7), epoch.cell(2, 8)]
    assert epoch.closed_bank(cells, 3) == [7, 0]  # epoch 3 wrote bank 1 (cells 2-3)
    assert epoch.closed_bank(cells, 2) == [0, 0]
    assert epoch.closed_bank([epoch.cell(2**32 + 4, 9), 0], 4) == [9]  # 32-bit tags wrap
    # cells 2w, 2w+1 -> word w: bit b of the bitmap is bit b % 64 of word b // 64
    assert epoch.join_cells([1, 1 << 31, 0, 2]) == [1 | 1 << 63, 1 << 33]
    assert epoch.interval_sums({"q": [5, 2]}, None) == {"q": [5, 2]}
    assert epoch.interval_sums({"q": [5, 2]}, {"q": [3, 4]}) == {"q": [2, 2]}


def test_poller_continues_from_the_switchs_epoch() -> None:
    """A second poller on the same switch (e.g. after a control-loop restart) takes up
    the epoch the data plane is in instead of assuming 0."""
    old, new = ModelPlane(False), ModelPlane(True)
    assert _records(old, 1) == _records(new, 1)
    assert epoch.split_word(new.registers["tel_epoch"][0]) == (7, 4)  # prime + 6 polls
    a, b = _records(old, 2), _records(new, 2)  # new pollers, same switches
    # the first interval's drop estimate subtracts the queue's growth since the primed
    # mean depth: since the old poller's last reset (read-and-reset) or since the switch
    # started (epoch, which has no "last reset"), and the poller's DropBalance carries
    # that difference into the later intervals; everything else agrees
    assert [{p: replace(r, drops_pkts=0) for p, r in x.items()} for x in a] == [
        {p: replace(r, drops_pkts=0) for p, r in x.items()} for x in b]


class LoggedPlane(ModelPlane):
    """The epoch program's registers, logging each Thrift call in order."""

    def __init__(self, log: list[str]) -> None:
        super().__init__(True)
        self.log = log

    def register_read_all(self, name: str) -> list[int]:
        self.log.append(f"read {name}")
        return super().register_read_all(name)

    def register_write(self, name: str, index: int, value: int) -> None:
        self.log.append(f"write {name}")
        super().register_write(name, index, value)


class StartedCounters:
    """A counter reader that sends its read at once and is collected later, as
    P4RuntimeClient.start_read_counters_many does."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def read_counters(self, name: str) -> dict[int, tuple[int, int]]:
        raise AssertionError("the poller should start the read, not wait for it")

    def start_read_counters_many(self, names: Any) -> Any:
        self.log.append("counters sent")

        def collect() -> dict[str, dict[int, tuple[int, int]]]:
            self.log.append("counters collected")
            return {n: {1: (7, 7000)} for n in names}
        return collect


def test_the_counter_read_overlaps_the_thrift_calls() -> None:
    """The poll sends the P4Runtime counter read first, makes its Thrift calls up to the
    epoch switch while it is on its way, and collects it before reading the closed
    bank; ``last_read`` spans to the collection."""
    log: list[str] = []
    clock = iter(float(i) for i in range(100))
    poller = TelemetryPoller("s1", range(1, PORTS), StartedCounters(log), LoggedPlane(log),
                             Scale(), {}, dict, t0=0.0, clock=lambda: next(clock))
    poller.prime()
    log.clear()
    rec = poller.poll()
    # sent first, collected right after the epoch switch, before the closed bank's reads
    k = log.index("counters collected")
    assert log[0] == "counters sent" and log[k - 1] == "write tel_epoch"
    assert [x for x in log[1:k - 1] if not x.startswith("read ")] == []
    assert sorted(log[k + 1:]) == sorted(f"read {n}" for n in epoch.TAGGED)
    # clock calls per snapshot: first read (3), epoch write (4), collection (5)
    assert poller.last_read == (3.0, 5.0)
    assert rec[1].tx_pkts == 0  # the counters did not move between the two polls
