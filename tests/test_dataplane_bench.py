"""``p4cc bench dataplane`` (p4cc.bench.dataplane): skip records and one short real run."""

from __future__ import annotations

import os
import shutil
from typing import Any

import pytest

from p4cc.bench import controlloop as loopbench
from p4cc.bench import dataplane as bench


def _records(argv: list[str]) -> list[dict[str, Any]]:
    return list(bench.run(argv))


def test_skip_records_without_bmv2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    recs = _records([])
    assert [r["case"] for r in recs] == [*bench.CASES, loopbench.CASE]
    for r in recs:
        assert set(r) == {"case", "skipped"}
        assert "simple_switch_grpc" in r["skipped"]


def test_skip_records_without_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: f"/usr/bin/{name}")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    recs = _records(["--no-loop"])
    assert [r["case"] for r in recs] == list(bench.CASES)
    assert all(r["skipped"].startswith("needs root") for r in recs)


def test_build_flags_and_frame() -> None:
    flags = bench.bmv2_build_flags()
    assert isinstance(flags, str) and flags
    pytest.importorskip("scapy")
    frame = bench.build_frame()
    assert len(frame) == bench.FRAME_BYTES
    assert frame[12:14] == b"\x08\x00" and frame[15] & 3 == 2  # IPv4, ECT(0)


def test_cpu_seconds_counts_this_process_busy_time() -> None:
    """The switch's CPU time: schedstat run time of every thread, ns resolution."""
    import time

    pid = os.getpid()
    before, start = bench.cpu_seconds(pid), time.process_time()
    while time.process_time() - start < 0.05:  # burn 50 ms of this process's CPU
        sum(range(1000))
    spent = bench.cpu_seconds(pid) - before
    assert 0.045 <= spent < 1.0, spent


@pytest.mark.bmv2
@pytest.mark.root
@pytest.mark.slow
def test_short_real_run() -> None:
    reason = bench.skip_reason()
    if reason:
        pytest.skip(reason)
    recs = list(bench.run(["--reps", "1", "--seconds", "0.5", "--no-lossfree", "--no-loop",
                           "--eq-pps", "2000"]))
    by_case = {r["case"]: r for r in recs}
    assert set(by_case) == set(bench.CASES)
    for prog in bench.PROGRAMS:
        r = by_case[f"forward_{prog}"]
        assert r["sat_pps"] > 100, r
        assert r["cpu_us_per_pkt"] > 0 and r["eq_cpu_us_per_pkt"] > 0
        assert 0 <= r["eq_loss"] <= 1
    ratio = by_case["forward_ratio"]
    assert 0 < ratio["sat_ratio"] < 10 and isinstance(ratio["bmv2_build"], str)
    assert ratio["eq_cpu_factor"] > 0 and ratio["eq_pps"] == 2000
    assert isinstance(ratio["eq_lossfree"], bool)
