"""Epoch telemetry (p4cc.controlplane.epoch): the poller gives the same per-interval
figures from the epoch program as from read-and-reset, on a model of both data planes.

The live version of this test (a ``bmv2`` test on simple_switch_grpc) needs the epoch
P4 program compiled; until then the model below is the data plane's specification.
"""

from __future__ import annotations

import random
from typing import Any

from p4cc.constants import BITMAP_WORDS
from p4cc.controlplane import epoch
from p4cc.controlplane.telemetry import INTERVAL_REGISTERS, TelemetryPoller
from p4cc.scale import Scale

PORTS = 8
BM = PORTS * BITMAP_WORDS


class ModelPlane:
    """Registers of either program, updated per packet as the P4 would."""

    def __init__(self, epoch_program: bool) -> None:
        self.ep = epoch_program
        bank = 2 if epoch_program else 1
        self.registers: dict[str, list[int]] = {
            "q_enq_sum": [0] * PORTS, "q_enq_cnt": [0] * PORTS, "q_sojourn_sum": [0] * PORTS,
            "q_enq_max": [0] * PORTS * bank, "incast_bits": [0] * BM * bank,
            "flow_bits": [0] * BM * bank, "elephant_bits": [0] * BM * bank,
            "flow_bytes_r0": [0] * 16, "flow_bytes_r1": [0] * 16}
        if epoch_program:
            self.registers.update({"tel_epoch": [0], "q_max_tag": [0] * PORTS * 2,
                                   "incast_tag": [0] * BM * 2, "flow_tag": [0] * BM * 2})
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
               elephant: bool) -> None:
        r = self.registers
        r["q_enq_sum"][port] += depth
        r["q_enq_cnt"][port] += 1
        r["q_sojourn_sum"][port] += sojourn
        si, sb = port * BITMAP_WORDS + src_bit // 64, 1 << (src_bit % 64)
        fi, fb = port * BITMAP_WORDS + flow_bit // 64, 1 << (flow_bit % 64)
        if not self.ep:
            r["q_enq_max"][port] = max(r["q_enq_max"][port], depth)
            r["incast_bits"][si] |= sb
            r["flow_bits"][fi] |= fb
            r["elephant_bits"][fi] |= fb if elephant else 0
            return
        e = r["tel_epoch"][0]
        b = e & 1
        pi = b * PORTS + port
        fresh = r["q_max_tag"][pi] != e
        r["q_enq_max"][pi] = depth if fresh else max(r["q_enq_max"][pi], depth)
        r["q_max_tag"][pi] = e
        si2, fi2 = b * BM + si, b * BM + fi
        fresh = r["incast_tag"][si2] != e
        r["incast_bits"][si2] = sb if fresh else r["incast_bits"][si2] | sb
        r["incast_tag"][si2] = e
        fresh = r["flow_tag"][fi2] != e
        eb = fb if elephant else 0
        r["flow_bits"][fi2] = fb if fresh else r["flow_bits"][fi2] | fb
        r["elephant_bits"][fi2] = eb if fresh else r["elephant_bits"][fi2] | eb
        r["flow_tag"][fi2] = e


class NoCounters:
    def read_counters(self, name: str) -> dict[int, tuple[int, int]]:
        return {}


def _records(plane: ModelPlane, seed: int) -> list[Any]:
    clock = iter(float(i) for i in range(10_000))
    poller = TelemetryPoller("s1", range(1, PORTS), NoCounters(), plane, Scale(), {},
                             dict, t0=0.0, clock=lambda: next(clock))
    assert poller.epoch_mode is plane.ep
    rng = random.Random(seed)
    poller.prime()
    out = []
    for _interval in range(6):
        for _ in range(rng.randrange(0, 300)):
            plane.packet(rng.randrange(1, PORTS), rng.randrange(0, 100), rng.randrange(0, 5000),
                         rng.randrange(256), rng.randrange(256), rng.random() < 0.2)
        out.append(poller.poll())
    return out


def test_epoch_and_read_reset_give_the_same_intervals() -> None:
    for seed in range(5):
        old, new = ModelPlane(False), ModelPlane(True)
        a, b = _records(old, seed), _records(new, seed)
        assert a == b
        assert any(r.qlen_max_bytes > 0 and r.active_flows > 0 for recs in a
                   for r in recs.values())
        # the epoch program needs no interval resets (the sketch's once per window only)
        assert old.resets >= 6 * len(INTERVAL_REGISTERS) and new.resets <= 2 * 7


def test_detection_and_bank_selection() -> None:
    assert epoch.is_epoch_program(["MyEgress.telemetry.tel_epoch", "x"])
    assert not epoch.is_epoch_program(["MyEgress.telemetry.q_enq_max"])
    values, tags = [5, 6, 7, 8], [3, 1, 3, 2]  # bank 0: cells 0-1, bank 1: cells 2-3
    assert epoch.closed_bank(values, tags, 3) == [7, 0]  # epoch 3 wrote bank 1
    assert epoch.closed_bank(values, tags, 2) == [0, 0]
