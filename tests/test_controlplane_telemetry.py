"""Snapshot -> PortTelemetry arithmetic, linear counting, static agents, EcnConfig."""

from __future__ import annotations

import itertools
import math

import pytest

from p4cc.controlplane.agents.static import StaticAgent, agent_names, make_agent
from p4cc.controlplane.ecn import EcnConfig, static_setting
from p4cc.controlplane.telemetry import (
    BITMAP_BITS,
    DropBalance,
    Snapshot,
    linear_count,
    port_records,
)
from p4cc.errors import ConfigError
from p4cc.scale import Scale

SCALE = Scale()  # 1000 B packets, 100 kB buffer


def _regs(port: int, **values: int) -> dict[str, list[int]]:
    regs = {name: [0] * 64 for name in ("q_enq_sum", "q_enq_cnt", "q_enq_max",
                                        "q_sojourn_sum")}
    regs.update({name: [0] * 256 for name in ("incast_bits", "flow_bits", "elephant_bits")})
    for name, v in values.items():
        regs[name][port] = v
    return regs


def test_linear_counting() -> None:
    assert linear_count(0) == 0
    assert linear_count(1) == 1
    # 100 ones in 256 bits: -256 ln(156/256) = 126.8 distinct items
    assert linear_count(100) == round(-256 * math.log(156 / 256)) == 127
    assert linear_count(BITMAP_BITS) == round(256 * math.log(256))  # saturated
    with pytest.raises(ValueError):
        linear_count(257)



def test_counter_rates_use_the_counters_own_read_times() -> None:
    """The epoch switch ends the interval (0.5 s here) but the counters were read at
    0.99 s and 1.39 s: 400 packets in 0.4 s is 1000 pps, not the 800 pps the interval
    would say (and a slow read in the previous poll would read as more than the port
    can send)."""
    prev = Snapshot(1.0, {"port_tx": {1: (0, 0)}}, t_counters_s=0.99)
    cur = Snapshot(1.5, {"port_tx": {1: (400, 400_000)}}, _regs(1), t_counters_s=1.39)
    r = port_records("s1", [1], prev, cur, SCALE, {}, {1: 8e6})[1]
    assert r.interval_s == pytest.approx(0.5) and r.counter_interval_s == pytest.approx(0.4)
    assert r.tx_bps == pytest.approx(400_000 * 8 / 0.4)
    assert r.utilization == pytest.approx(1.0)
    # snapshots without the counters' time (older pollers, tests): the interval
    old = port_records("s1", [1], Snapshot(1.0, {"port_tx": {1: (0, 0)}}),
                       Snapshot(1.5, {"port_tx": {1: (400, 400_000)}}, _regs(1)), SCALE, {},
                       {1: 8e6})[1]
    assert old.counter_interval_s == 0.0 and old.tx_bps == pytest.approx(400_000 * 8 / 0.5)

def test_port_records_from_snapshots() -> None:
    prev = Snapshot(1.0, {"port_offered": {2: (100, 100_000)}, "port_tx": {2: (90, 90_000)},
                          "port_marked": {2: (5, 5_000)}})
    regs = _regs(2, q_enq_sum=300, q_enq_cnt=30, q_enq_max=25, q_sojourn_sum=60_000)
    regs["incast_bits"][8] = 0b111  # port 2, word 0: 3 senders
    regs["flow_bits"][8], regs["flow_bits"][9] = 0xFF, 0x3  # 10 bits
    regs["elephant_bits"][11] = 1 << 63  # word 3 of port 2
    cur = Snapshot(1.5, {"port_offered": {2: (160, 160_000)}, "port_tx": {2: (140, 140_000)},
                         "port_marked": {2: (15, 15_000)}}, regs)
    cfg = EcnConfig(5_000, 20_000, 0.1)
    rec = port_records("s1", [2, 3], prev, cur, SCALE, {2: cfg}, {2: 10e6, 3: 10e6})
    r = rec[2]
    assert r.interval_s == pytest.approx(0.5) and r.t_s == 1.5
    assert r.qlen_avg_bytes == pytest.approx(10 * 1000)
    assert r.qlen_max_bytes == 25_000
    assert r.tx_pkts == 50 and r.tx_bps == pytest.approx(50_000 * 8 / 0.5)
    assert r.tx_marked_pkts == 10 and r.tx_marked_bps == pytest.approx(10_000 * 8 / 0.5)
    assert r.drops_pkts == 60 - 50
    assert r.ecn == cfg
    assert r.incast_degree == 3 and r.active_flows == 10 and r.elephant_flows == 1
    assert r.sojourn_avg_s == pytest.approx(2e-3)
    assert r.utilization == pytest.approx(0.8 / 10)
    idle = rec[3]
    assert (idle.tx_pkts, idle.drops_pkts, idle.qlen_avg_bytes, idle.ecn) == (0, 0, 0.0, None)


def test_queue_growth_is_not_counted_as_drops() -> None:
    """A queue that grows (mean depth 0 -> 40 packets) with no loss is not a loss."""
    empty = _regs(2, q_enq_sum=0, q_enq_cnt=10, q_enq_max=0, q_sojourn_sum=0)
    prev = Snapshot(1.0, {"port_offered": {2: (100, 100_000)}, "port_tx": {2: (100, 100_000)}},
                    empty)
    filling = _regs(2, q_enq_sum=80 * 40, q_enq_cnt=80, q_enq_max=80, q_sojourn_sum=0)
    cur = Snapshot(1.5, {"port_offered": {2: (240, 240_000)}, "port_tx": {2: (200, 200_000)}},
                   filling)
    r = port_records("s1", [2], prev, cur, SCALE, {}, {2: 10e6})[2]
    assert r.drops_pkts == 0  # 140 offered - 100 sent - (40 - 0) mean-depth growth
    # the same interval with 25 packets really lost is still reported
    lossy = Snapshot(1.5, {"port_offered": {2: (265, 265_000)}, "port_tx": {2: (200, 200_000)}},
                     filling)
    assert port_records("s1", [2], prev, lossy, SCALE, {}, {2: 10e6})[2].drops_pkts == 25


def test_counter_reset_counts_from_zero_and_bad_order() -> None:
    prev = Snapshot(0.0, {"port_tx": {1: (1000, 1_000_000)}})
    cur = Snapshot(0.1, {"port_tx": {1: (7, 7000)}})
    assert port_records("s", [1], prev, cur, SCALE, {}, {})[1].tx_pkts == 7
    with pytest.raises(ValueError):
        port_records("s", [1], cur, prev, SCALE, {}, {})


def test_ecn_config_validation() -> None:
    buf = SCALE.buffer_bytes
    assert EcnConfig(5000, 20000, 0.5).validate(buf).kmax_pkts(1000) == 20
    for bad in (EcnConfig(0, 10, 0.1), EcnConfig(20, 10, 0.1), EcnConfig(10, buf + 1, 0.1),
                EcnConfig(10, 20, 0.0), EcnConfig(10, 20, 1.5), EcnConfig(10, 20, math.nan),
                EcnConfig(1.5, 20, 0.1)):  # type: ignore[arg-type]
        with pytest.raises(ConfigError):
            bad.validate(buf)
    cfg = EcnConfig(15_000, 45_000, 0.5)
    assert cfg.marking_probability(14, 1000) == 0.0
    assert cfg.marking_probability(30, 1000) == pytest.approx(0.25, abs=1e-4)
    assert cfg.marking_probability(45, 1000) == 1.0
    assert EcnConfig(1, 1, 1e-9).pmax_scaled == 1


def test_static_agents() -> None:
    assert {"secn0", "secn1", "secn2"} <= set(agent_names())
    agent = make_agent("SECN1", SCALE)
    assert isinstance(agent, StaticAgent)
    want = static_setting("secn1", SCALE)
    agent.reset({1: None, 2: want})
    assert agent.act({}) == {1: want}
    assert agent.act({}) == {}
    with pytest.raises(ConfigError, match="unknown agent"):
        make_agent("nope", SCALE)


def test_poller_resets_interval_registers_and_sketch_window() -> None:
    from fake_switch import FakeThrift

    from p4cc.controlplane.telemetry import TelemetryPoller

    regs = FakeThrift({"q_enq_sum": 64, "q_enq_cnt": 64, "q_enq_max": 64, "q_sojourn_sum": 64,
                       "incast_bits": 256, "flow_bits": 256, "elephant_bits": 256,
                       "flow_bytes_r0": 16, "flow_bytes_r1": 16})
    regs.connect()

    class Counters:
        tx = 0

        def read_counters(self, name: str) -> dict[int, tuple[int, int]]:
            return {1: (self.tx, self.tx * 1000)} if name == "port_tx" else {}

    t = [0.0]
    counters = Counters()
    poller = TelemetryPoller("s1", [1], counters, regs, SCALE, {1: 10e6}, dict,
                             t0=0.0, clock=lambda: t[0], sketch_window_s=1.0)
    assert poller.poll() == {}  # primes
    regs.register_write("q_enq_cnt", 1, 4)
    regs.register_write("q_enq_sum", 1, 8)
    regs.register_write("flow_bytes_r0", 3, 500)
    counters.tx = 25
    t[0] = 0.5
    rec = poller.poll()[1]
    assert rec.qlen_avg_bytes == 2000 and rec.tx_pkts == 25 and rec.t_s == 0.5
    assert regs.registers["q_enq_cnt"][1] == 0  # reset after the read
    assert regs.registers["flow_bytes_r0"][3] == 500  # sketch kept within the window
    t[0] = 1.1
    assert poller.poll()[1].qlen_avg_bytes == 0.0
    assert regs.registers["flow_bytes_r0"][3] == 0  # window elapsed


def test_drop_estimate_does_not_accumulate_read_skew() -> None:
    """The offered counter read while 8 packets are between it and the sent counter at
    every other poll: the intervals' residuals are +8, -8, +8, ...  Clipping each at
    zero (before session 12) kept every +8; the balance reports the 30 real drops plus
    at most one error."""
    real = {40: 10, 41: 20}  # packets really dropped in intervals 40 and 41

    def snap(i: int, offered: int, sent: int) -> Snapshot:
        return Snapshot(float(i), {"port_offered": {1: (offered, offered * 1000)},
                                   "port_tx": {1: (sent, sent * 1000)}}, _regs(1))

    reads, dropped = [snap(0, 0, 0)], 0
    for i in range(1, 101):
        dropped += real.get(i, 0)
        reads.append(snap(i, 100 * i + dropped + (8 if i % 2 else 0), 100 * i))
    balance = DropBalance()
    clipped = sum(port_records("s", [1], a, b, SCALE, {}, {})[1].drops_pkts
                  for a, b in itertools.pairwise(reads))
    balanced = [port_records("s", [1], a, b, SCALE, {}, {}, balance)[1].drops_pkts
                for a, b in itertools.pairwise(reads)]
    assert clipped >= 8 * 50  # (every +8 kept)
    assert 30 <= sum(balanced) <= 30 + 8 and min(balanced) >= 0
    assert sum(balanced[:39]) <= 8  # nothing but one error before the real drops
