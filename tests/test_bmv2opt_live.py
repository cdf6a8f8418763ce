"""p4cc.controlplane.bmv2opt on a live simple_switch_grpc: the JSON p4cc pushes (p4c's
temporaries folded) and p4c's JSON as compiled treat the same packets the same way.

One switch per program (tests/dataplane_rig.one_switch: h1/h2 routes), configured alike
over P4Runtime: an ECMP group of two members on port 2 that differ in their destination
MAC (so each frame shows the crc16 member it took), and an elephant threshold of 2 kB.
Three epochs are written over Thrift, the last one also moving the sketch window; in
each, frames of a pool of UDP and TCP flows (sources, ports, lengths and a control DSCP
drawn from a fixed seed) are sent one at a time, each after the previous one has
arrived, so every packet finds its queue empty and the run is deterministic.  Both
runs must deliver byte-identical frames in the same order and end with identical
telemetry registers (every cell but ``q_sojourn_sum``, the measured time in the queue)
and port counters.  The queue statistics under real queues are checked against
INT-derived figures by tests/test_epoch_live.py, which runs on the pushed (folded)
program too.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import pytest
from dataplane_rig import H1_MAC, H2_IP, JSON, SW_MAC, one_switch, poll, skip_reason
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from p4cc.controlplane import bmv2opt
from p4cc.controlplane.bmv2config import device_config

pytestmark = [pytest.mark.bmv2, pytest.mark.root]

PREFIX = "p4op"
ECMP_NET = "10.0.9.0"
MEMBER_MACS = ("00:00:0a:00:09:0a", "00:00:0a:00:09:0b")
#: sketch window (63:32) ++ epoch (31:0) written before each phase
EPOCH_WORDS = (1, 2, (1 << 32) | 3)
FRAMES_PER_EPOCH = 70
REGISTERS = ("tel_epoch", "q_enq_sum", "q_enq_cnt", "q_enq_max", "incast_bits",
             "flow_bits", "elephant_bits", "flow_bytes_r0", "flow_bytes_r1")
COUNTERS = ("port_offered", "port_tx", "port_marked")


@dataclass(frozen=True)
class Outcome:
    frames: list[bytes]
    registers: dict[str, list[int]]
    counters: dict[str, dict[int, tuple[int, int]]]


def schedule(seed: int = 41) -> list[list[bytes]]:
    """Frames per epoch: 12 flows (UDP and TCP, to h2 and into the ECMP prefix, some with
    the control DSCP), each frame of a random flow and length."""
    rng = random.Random(seed)
    flows = []
    for k in range(12):
        dst = H2_IP if k % 3 else f"10.0.9.{rng.randrange(1, 250)}"
        flows.append((f"10.0.{rng.randrange(1, 4)}.{rng.randrange(1, 250)}", dst,
                      rng.choice((UDP, TCP)), rng.randrange(1024, 65535),
                      rng.randrange(1024, 65535), 48 << 2 if k == 5 else 0))
    out = []
    for _ in EPOCH_WORDS:
        phase = []
        for _ in range(FRAMES_PER_EPOCH):
            src, dst, l4, sport, dport, tos = rng.choice(flows)
            phase.append(bytes(Ether(src=H1_MAC, dst=SW_MAC[1])
                               / IP(src=src, dst=dst, tos=tos | 0b10, ttl=64)
                               / l4(sport=sport, dport=dport)
                               / Raw(b"x" * rng.randrange(20, 900))))
        out.append(phase)
    return out


def play(config: bytes, phases: list[list[bytes]]) -> Outcome:
    """The schedule through one switch (tests/dataplane_rig.one_switch) running
    ``config``: every frame sent after the previous one arrived."""
    # INT source on dport 1, which no flow of the schedule uses
    with one_switch(PREFIX, 7, 1, config=config) as rig:
        rig.p4rt.set_default_action("switch_config", "set_switch_config_no_watch",
                                    {"switch_id": 7, "elephant_bytes": 2000})
        rig.p4rt.insert_entry("ipv4_lpm", {"dst_addr": (ECMP_NET, 24)}, "set_ecmp",
                              {"group": 1, "size": 2})
        for index, mac in enumerate(MEMBER_MACS):
            rig.p4rt.insert_entry("ecmp_nhop", {"ecmp_group": 1, "ecmp_index": index},
                                  "set_nhop", {"port": 2, "dmac": mac, "smac": SW_MAC[2]})
        rig.rx.keep_frames = True
        sent = 0
        for word, phase in zip(EPOCH_WORDS, phases, strict=True):
            rig.thrift.register_write("tel_epoch", 0, word)
            for data in phase:
                rig.tx.send(data)
                sent += 1
                assert poll(lambda n=sent: len(rig.rx.frames) >= n, 5.0), \
                    f"frame {sent - 1} not delivered"
        registers = {r: rig.thrift.register_read_all(r) for r in REGISTERS}
        counters = rig.p4rt.read_counters_many(COUNTERS)
        return Outcome(list(rig.rx.frames), registers, counters)


@pytest.fixture(scope="module")
def outcomes() -> tuple[Outcome, Outcome]:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    phases = schedule()
    return (play(Path(JSON).read_bytes(), phases), play(device_config(JSON), phases))


def test_the_pushed_program_is_the_folded_one() -> None:
    if not Path(JSON).is_file():
        pytest.skip(f"{JSON} not built (make p4)")
    pushed = json.loads(device_config(JSON))
    stats = bmv2opt.optimize(json.loads(Path(JSON).read_bytes()))
    assert stats.primitives_removed >= 20 and stats.fields_removed >= 20
    assert bmv2opt.optimize(pushed).primitives_removed == 0  # already folded


def test_same_frames_registers_and_counters(outcomes: tuple[Outcome, Outcome]) -> None:
    raw, folded = outcomes
    assert len(raw.frames) == len(EPOCH_WORDS) * FRAMES_PER_EPOCH
    assert folded.frames == raw.frames
    assert folded.registers == raw.registers
    assert folded.counters == raw.counters


def test_the_schedule_exercises_what_was_folded(outcomes: tuple[Outcome, Outcome]) -> None:
    """Not vacuous: both ECMP members, elephants, both banks, and the window restart."""
    raw, _ = outcomes
    dmacs = {f[:6] for f in raw.frames}
    assert {bytes.fromhex(m.replace(":", "")) for m in MEMBER_MACS} <= dmacs
    regs = raw.registers
    assert any(v & 0xFFFFFFFF for v in regs["elephant_bits"])
    banks = {i // (len(regs["flow_bits"]) // 2) for i, v in enumerate(regs["flow_bits"]) if v}
    assert banks == {0, 1}
    # the window moved before the last epoch: the sketch cells hold its bytes only
    last = sum(len(f) for f in schedule()[-1])
    for row in ("flow_bytes_r0", "flow_bytes_r1"):
        assert {v >> 32 for v in regs[row] if v} == {1}
        assert sum(v & 0xFFFFFFFF for v in regs[row]) == last
    assert sum(regs["q_enq_cnt"]) == len(raw.frames)
    assert raw.counters["port_tx"][0][0] > 0  # the control-DSCP flow, at index 0
