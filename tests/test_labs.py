"""Every lab's `make check` fails on its starter, with its message, and passes on its
solution (labs/solutions/<lab>), on the parts that need no root, p4c or BMv2 (labs 5
and 6 judge a run directory: tests/test_labs_runs.py); lab 1's BMv2 step separately."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

LABS = Path(__file__).resolve().parents[1] / "labs"
CASES = {
    "lab1-ecn-marking": "set_ecn has no TODO left",
    "lab2-queues-int": "not implemented yet",
    "lab3-static-thresholds": "fill in",
    "lab4-dcqcn": "names one DCQCN parameter",
}
#: labs whose solution needs a run (tests/test_labs_runs.py): the starter's message here
RUN_LABS = {
    "lab5-learning-threshold": "not implemented yet",
    "lab6-rlcc": "prediction.yaml sets target and",
}


def check(lab: str, src: Path, *extra: str, bmv2: bool = False
          ) -> subprocess.CompletedProcess[str]:
    """The lab's check, without its BMv2 steps unless ``bmv2``."""
    opts = [*extra] + ([] if bmv2 else ["--no-bmv2"])
    return subprocess.run([sys.executable, str(LABS / lab / "check.py"), "--src", str(src),
                           *opts], capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("lab", sorted(CASES))
def test_lab_check_fails_on_starter_and_passes_on_solution(lab: str) -> None:
    starter = check(lab, LABS / lab)
    assert starter.returncode == 1, starter.stdout + starter.stderr
    assert "FAIL" in starter.stdout and CASES[lab] in starter.stdout
    assert "step(s) FAILED" in starter.stdout
    solution = check(lab, LABS / "solutions" / lab)
    assert solution.returncode == 0, solution.stdout + solution.stderr
    assert "all checks passed" in solution.stdout and "FAIL" not in solution.stdout


@pytest.mark.parametrize("lab", sorted(RUN_LABS))
def test_run_lab_check_fails_on_starter(lab: str, tmp_path: Path) -> None:
    starter = check(lab, LABS / lab, "--run", str(tmp_path / "no-run"))
    assert starter.returncode == 1, starter.stdout + starter.stderr
    assert "FAIL" in starter.stdout and RUN_LABS[lab] in starter.stdout
    assert "step(s) FAILED" in starter.stdout


def test_every_lab_has_readme_makefile_and_solution() -> None:
    index = (LABS / "README.md").read_text()
    for lab in (*CASES, *RUN_LABS):
        text = (LABS / lab / "README.md").read_text()
        for part in ("Goals", "Background", "Steps", "Questions"):
            assert part in text, f"{lab}: README lacks {part}"
        assert "sim" in text, f"{lab}: README must say how to run without BMv2"
        assert (LABS / lab / "Makefile").is_file() and (LABS / "solutions" / lab).is_dir()
        assert f"({lab}/)" in index, f"labs/README.md does not list {lab}"
    assert "not written yet" not in index


@pytest.mark.p4c
def test_lab1_solution_compiles_with_p4c() -> None:
    import shutil

    if shutil.which("p4c") is None:
        pytest.skip("p4c not installed")
    res = check("lab1-ecn-marking", LABS / "solutions" / "lab1-ecn-marking")
    assert "PASS  p4c compiles the program" in res.stdout, res.stdout


@pytest.mark.p4c
@pytest.mark.bmv2
@pytest.mark.root
@pytest.mark.slow
def test_lab1_red_curve_on_bmv2() -> None:
    """Lab 1's BMv2 step: the starter (no marking) fails the RED curve with its hint, the
    solution passes it (tests/red_sweep.py's sweep, tests/red_bound.py's bound)."""
    import shutil

    if shutil.which("p4c") is None:
        pytest.skip("p4c not installed")
    sys.path.insert(0, str(LABS / "lab1-ecn-marking"))
    import redcurve

    why = redcurve.skip_reason()
    if why:
        pytest.skip(why)
    starter = check("lab1-ecn-marking", LABS / "lab1-ecn-marking", bmv2=True)
    assert "FAIL  RED curve on BMv2" in starter.stdout, starter.stdout + starter.stderr
    assert "must ALL be marked" in starter.stdout
    solution = check("lab1-ecn-marking", LABS / "solutions" / "lab1-ecn-marking", bmv2=True)
    assert solution.returncode == 0, solution.stdout + solution.stderr
    assert "PASS  RED curve on BMv2" in solution.stdout
