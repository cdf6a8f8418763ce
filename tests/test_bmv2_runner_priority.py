"""The runner's control loops run with its autogroup raised for the run, then restored."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from p4cc.experiment.bmv2 import control


def _has_autogroup() -> bool:
    return Path(f"/proc/{os.getpid()}/autogroup").is_file()


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (lowering a nice value)")
@pytest.mark.skipif(not _has_autogroup(), reason="kernel without autogroup scheduling")
def test_runner_priority_is_raised_for_the_block_and_restored() -> None:
    pid = os.getpid()
    before = control.autogroup_nice(pid)
    assert before is not None
    lines: list[str] = []
    with control.runner_priority(-7 if before != -7 else -6, lines.append):
        inside = control.autogroup_nice(pid)
        assert inside in (-7, -6) and inside != before
    assert control.autogroup_nice(pid) == before
    assert "control loops" in lines[0]


def test_autogroup_nice_of_a_missing_process_is_none() -> None:
    assert control.autogroup_nice(2 ** 22 + 12345) is None
