"""p4cc bench dataplane_ir: parsing callgrind's output, input checks, and (with BMv2,
root and valgrind) one short real run."""
from __future__ import annotations

import shutil

import pytest

from p4cc.bench import dataplane_ir as ir
from p4cc.errors import P4ccError

DUMP_HEAD = """# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 4530
part: 4


desc: I1 cache:
desc: Trigger: dump p4cc-queued

summary: 0
"""

ANNOTATE = """--------------------------------------------------------------------------------
Ir                    file:function
--------------------------------------------------------------------------------
200,952,578 (100.0%)  PROGRAM TOTALS
116,221,944 (57.84%)  ???:bm::PHVFactory::create() const [/usr/local/bin/simple_switch_grpc]
 54,897,000 (27.3%)  ???:bm::PHV::reset_metadata() [/usr/local/bin/simple_switch_grpc]
"""


def test_totals_line_wins_over_summary() -> None:
    assert ir.parse_totals(DUMP_HEAD + "fn=(1)\n16 3\ntotals: 200952578\n") == 200952578
    assert ir.parse_totals("version: 1\nsummary: 1234\n") == 1234


def test_dump_without_totals_is_an_error() -> None:
    with pytest.raises(P4ccError, match="no totals"):
        ir.parse_totals(DUMP_HEAD.replace("summary: 0\n", ""))


def test_inclusive_count_of_a_function() -> None:
    assert ir.parse_inclusive(ANNOTATE, ir.PHV_ALLOC) == 116_221_944
    assert ir.parse_inclusive(ANNOTATE, "bm::PHV::reset_metadata") == 54_897_000
    assert ir.parse_inclusive(ANNOTATE, "bm::Deparser::deparse") == 0


def test_dump_label() -> None:
    assert ir.dump_label(DUMP_HEAD) == "p4cc-queued"
    assert ir.dump_label(DUMP_HEAD.replace("desc: Trigger: dump p4cc-queued\n", "")) is None


@pytest.mark.parametrize("argv", [["--pps", "0"], ["--seconds", "-1"], ["--burst", "1"],
                                  ["--burst-pps", "0"], ["--queue-pps", "0"]])
def test_bad_arguments_are_refused(argv: list[str]) -> None:
    with pytest.raises(P4ccError, match="must be"):
        list(ir.run(argv))


def test_every_case_says_why_it_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ir.dp, "skip_reason", lambda: None)
    real = shutil.which
    monkeypatch.setattr(ir.shutil, "which",
                        lambda name: None if name == "valgrind" else real(name))
    out = list(ir.run([]))
    assert [c["case"] for c in out] == list(ir.CASES)
    assert all("valgrind not installed" in c["skipped"] for c in out)


@pytest.mark.bmv2
@pytest.mark.root
@pytest.mark.slow
def test_short_run_counts_both_programs_and_both_shapes() -> None:
    reason = ir.skip_reason()
    if reason is not None:
        pytest.skip(reason)
    out = {c["case"]: c for c in ir.cases(ir.IrConfig(pps=100, seconds=1.0, burst=40))}
    assert set(out) == set(ir.CASES)
    for shape in ir.SHAPES:
        l3, p4 = out[f"ir_l3min_{shape}"], out[f"ir_p4cc_{shape}"]
        assert l3["frames"] > 0 and p4["frames"] > 0
        # p4cc does strictly more per packet than the minimal router (measured 3-4x)
        assert 2 * l3["ir_per_pkt_no_phv_alloc"] < p4["ir_per_pkt_no_phv_alloc"]
        assert l3["ir_per_pkt_no_phv_alloc"] > 50_000
    # a packet that finds a queue takes p4cc's RED lookup; one that finds none does not
    assert (out["ir_p4cc_queued"]["ir_per_pkt_no_phv_alloc"]
            > out["ir_p4cc_paced"]["ir_per_pkt_no_phv_alloc"])
    assert out["ir_ratio"]["queued_ir_factor"] > 2


class _Thrift:
    def __init__(self) -> None:
        self.calls: list[tuple[str, float, int]] = []

    def set_queue_depth(self, pkts: int, port: int) -> None:
        self.calls.append(("depth", pkts, port))

    def set_queue_rate(self, pps: float, port: int) -> None:
        self.calls.append(("rate", pps, port))


class _Rig:
    def __init__(self, delivered: int) -> None:
        self.delivered = delivered

    def offer(self, pps: float, seconds: float) -> tuple[int, int, float]:
        return round(pps * seconds), self.delivered, 0.0


def test_queued_batch_must_arrive_whole_and_the_port_is_restored() -> None:
    cfg = ir.IrConfig(burst=200, burst_pps=150.0, queue_pps=50.0)
    thrift = _Thrift()
    assert ir.queued(_Rig(200), thrift, cfg) == 200  # type: ignore[arg-type]
    assert thrift.calls == [("depth", 400, 2), ("rate", 50.0, 2), ("rate", 1_000_000, 2)]
    thrift = _Thrift()
    with pytest.raises(P4ccError, match=r"delivered 187 of 200 frames .*--burst-pps"):
        ir.queued(_Rig(187), thrift, cfg)  # type: ignore[arg-type]
    assert thrift.calls[-1] == ("rate", 1_000_000, 2)  # port 2 served at full rate again
