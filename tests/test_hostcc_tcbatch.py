"""The pacer's ``tc -batch`` child (p4cc.hostcc.tcbatch) without root: the command
lines, and error counting and exit handling with a stand-in ``tc`` (the real one
changing real classes: tests/test_hostcc_pacing_root.py)."""

from __future__ import annotations

import shutil
import stat
import sys
import time
from pathlib import Path

import pytest

from p4cc.errors import P4ccError
from p4cc.hostcc.tcbatch import TcBatch, change_line, handle


def test_change_line_spells_what_the_pyroute2_call_sets() -> None:
    assert handle(0xCC0102) == "cc:102" and handle(0xCC0000) == "cc:0"
    assert change_line("h1-eth0", 0xCC0002, 0xCC0100, 8e3, 2.5e6, 1912, 1600, 1600) == (
        "class change dev h1-eth0 parent cc:2 classid cc:100 htb rate 8000bit "
        "ceil 2500000bit burst 1912 cburst 1912 mtu 1600 quantum 1600\n")
    line = change_line("v", 0xCC0000, 0xCC0101, 0.2, 0.4, 1600, 1600)
    assert "rate 1bit ceil 1bit" in line and "quantum" not in line  # at least 1 bit/s


def _fake_tc(tmp_path: Path, body: str) -> str:
    path = tmp_path / "tc"
    path.write_text(f"#!{sys.executable}\nimport sys\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


# echoes tc's failure report for every line holding "bad"; stops at end of input
FAKE = """for n, line in enumerate(sys.stdin, 1):
    if "bad" in line:
        print('RTNETLINK answers: No such file or directory', file=sys.stderr, flush=True)
        print(f'Command failed -:{n}', file=sys.stderr, flush=True)
"""


def test_failed_commands_are_counted_with_tcs_reason(tmp_path: Path) -> None:
    b = TcBatch(_fake_tc(tmp_path, FAKE))
    b.send("class change ok\n")
    b.send("class change bad\n")
    b.send("class change ok\n")
    b.close()  # waits for the child to read everything
    assert b.sent == 3 and b.errors == 1
    assert b.last_error == "RTNETLINK answers: No such file or directory"
    assert not b.alive()


def test_a_dead_tc_is_a_clear_error(tmp_path: Path) -> None:
    b = TcBatch(_fake_tc(tmp_path, "print('tc: boom', file=sys.stderr); sys.exit(3)"))
    end = time.monotonic() + 5.0
    while b.alive() and time.monotonic() < end:
        time.sleep(0.01)  # poll interval of the child's exit
    with pytest.raises(P4ccError, match="tc -batch exited"):
        for _ in range(1000):  # the pipe reports the dead reader once its buffer is read
            b.send("class change ok\n")
    b.close()


def test_no_tc_program_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises((P4ccError, OSError)):
        TcBatch(str(tmp_path / "missing-tc"))


def test_no_tc_on_path_names_the_program(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    with pytest.raises(P4ccError, match=r"no `tc` program on PATH \(iproute2\)"):
        TcBatch()


# as FAKE, and the sync marker fails as tc's does ("Cannot find device")
FAKE_SYNC = """for n, line in enumerate(sys.stdin, 1):
    if "p4cc/sync" in line:
        print('Cannot find device "p4cc/sync"', file=sys.stderr, flush=True)
        print(f'Command failed -:{n}', file=sys.stderr, flush=True)
    elif "bad" in line:
        print('RTNETLINK answers: File exists', file=sys.stderr, flush=True)
        print(f'Command failed -:{n}', file=sys.stderr, flush=True)
"""


def test_sync_reports_the_watched_lines_failures_only(tmp_path: Path) -> None:
    b = TcBatch(_fake_tc(tmp_path, FAKE_SYNC))
    try:
        good = b.send("class add ok\n")
        assert b.sync((good,)).wait(5.0) == []
        b.send("class change bad\n")  # a rate change: counted, not anyone's failure
        bad = b.send("class add bad\n")
        assert b.sync((bad,)).wait(5.0) == ["RTNETLINK answers: File exists"]
        assert b.sync().wait(5.0) == []  # markers are no errors
        assert b.errors == 2 and b.sent == 3
    finally:
        b.close()


def test_sync_after_tc_ended_is_a_clear_error(tmp_path: Path) -> None:
    # reads one line, then ends without running it
    b = TcBatch(_fake_tc(tmp_path, "sys.stdin.readline(); sys.exit(2)"))
    try:
        n = b.send("class add ok\n")
        with pytest.raises(P4ccError, match="tc -batch exited"):
            b.sync((n,)).wait(5.0)
    finally:
        b.close()


@pytest.mark.skipif(shutil.which("tc") is None, reason="needs iproute2 `tc`")
def test_the_sync_marker_fails_in_the_real_tc() -> None:
    """The marker must fail (tc acknowledges nothing else) and change nothing: the real
    tc refuses the device name, and the ack completes with no failure and no error."""
    b = TcBatch()
    try:
        for _ in range(3):
            assert b.sync().wait(5.0) == []
        assert b.errors == 0 and b.alive()
    finally:
        b.close()
