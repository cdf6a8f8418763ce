"""The bmv2 backend measures the machine budget once per BMv2 build (autocal)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from p4cc import cli
from p4cc.errors import P4ccError
from p4cc.experiment import doctor
from p4cc.experiment.bmv2 import autocal, budget
from p4cc.experiment.bmv2.backend import Bmv2Backend
from p4cc.experiment.spec import load_spec

BUILD = "/opt/fake/simple_switch_grpc 123 456"
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "testbed.yaml"


def measured(build: str = BUILD) -> budget.Calibration:
    return budget.Calibration(95.0, 21_000.0, 50.0, 2, build, time.time(), 0.5, 0.05)


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A root machine with a BMv2 build and an empty cache; the list counts the
    calibrator's calls."""
    calls: list[int] = []

    def calibrator() -> budget.Calibration:
        calls.append(1)
        return measured()

    monkeypatch.setenv("P4CC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(autocal.ENV, raising=False)
    monkeypatch.setattr(budget, "bmv2_build", lambda: BUILD)
    monkeypatch.setattr(autocal.os, "geteuid", lambda: 0)
    monkeypatch.setattr(autocal, "_calibrator", calibrator)
    return calls


def test_measures_once_then_reads_the_cache(machine: list[int]) -> None:
    first = autocal.ensure_calibrated()
    assert first.calibrated and first.build == BUILD and machine == [1]
    assert budget.load(BUILD) == first  # cached for the budget's own check
    again = autocal.ensure_calibrated()
    assert again == first and machine == [1]


def test_a_new_build_is_measured_again(machine: list[int],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    autocal.ensure_calibrated()
    monkeypatch.setattr(budget, "bmv2_build", lambda: "/opt/rebuilt 9 9")
    autocal.ensure_calibrated()
    assert machine == [1, 1]


@pytest.mark.parametrize("why", ["env", "not root", "no bmv2", "no calibrator"])
def test_nothing_is_measured_when_it_cannot_or_must_not_be(
        machine: list[int], monkeypatch: pytest.MonkeyPatch, why: str) -> None:
    if why == "env":
        monkeypatch.setenv(autocal.ENV, "0")
    elif why == "not root":
        monkeypatch.setattr(autocal.os, "geteuid", lambda: 1000)
    elif why == "no bmv2":
        monkeypatch.setattr(budget, "bmv2_build", lambda: "none")
    else:
        monkeypatch.setattr(autocal, "_calibrator", None)
    assert autocal.why_not() is not None
    assert autocal.ensure_calibrated() == budget.UNCALIBRATED
    assert machine == []


def test_a_failed_measurement_names_the_cause_and_caches_nothing(
        machine: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> budget.Calibration:
        raise OSError("simple_switch_grpc exited with status 1")

    monkeypatch.setattr(autocal, "_calibrator", broken)
    with pytest.raises(P4ccError, match=r"calibrating this machine's BMv2 budget failed: "
                       r"simple_switch_grpc exited.*P4CC_AUTOCALIBRATE=0"):
        autocal.ensure_calibrated()
    assert budget.load(BUILD) == budget.UNCALIBRATED


def test_concurrent_preflights_measure_once(machine: list[int],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    started = threading.Event()
    release = threading.Event()

    def slow() -> budget.Calibration:
        machine.append(1)
        started.set()
        assert release.wait(10)
        return measured()

    monkeypatch.setattr(autocal, "_calibrator", slow)
    results: list[budget.Calibration] = []
    first = threading.Thread(target=lambda: results.append(autocal.ensure_calibrated()))
    first.start()
    assert started.wait(10)
    # the second preflight starts while the first one measures: it must wait on the lock
    second = threading.Thread(target=lambda: results.append(autocal.ensure_calibrated()))
    second.start()
    second.join(0.3)
    assert second.is_alive()  # blocked on the lock, not measuring
    release.set()
    first.join(10)
    second.join(10)
    assert machine == [1] and len(results) == 2 and results[0] == results[1]


def test_the_backend_preflight_calibrates_only_within_the_budget(
        machine: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor, "bmv2_missing", lambda checks=None: [])  # tools "present"
    spec = load_spec(EXAMPLE)
    Bmv2Backend(within_budget=False).check(spec)
    assert machine == []
    Bmv2Backend().check(spec)
    assert machine == [1]


def test_the_command_line_registers_the_calibrator_for_run_commands(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(autocal, "_calibrator", None)
    cli.main(["topo", "star,hosts=2"])
    assert autocal._calibrator is None
    assert cli.main(["run", "--check", "--backend", "sim", str(EXAMPLE)]) == 0
    from p4cc.bench import calibrate

    assert autocal._calibrator is calibrate.calibrator


def test_doctor_reports_the_calibration(machine: list[int],
                                        monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(autocal.shutil, "which", lambda name: None)
    assert autocal.doctor_check() is None  # no BMv2: nothing to calibrate
    monkeypatch.setattr(autocal.shutil, "which", lambda name: "/usr/local/bin/" + name)
    missing = autocal.doctor_check()
    assert missing is not None and not missing.ok and "first bmv2 run" in missing.fix
    assert f"code {autocal.measured_code()}" in missing.detail  # which code it keys
    budget.save(measured())
    ok = autocal.doctor_check()
    assert ok is not None and ok.ok and "95 µs/packet" in ok.detail
    assert "calibrated" in ok.detail
    assert cli.main(["doctor"]) == 0
    assert "machine budget calibration" in capsys.readouterr().out


def test_the_test_suite_itself_never_calibrates() -> None:
    # conftest's autouse fixture: no test measures the machine into the user's cache
    assert autocal.why_not() == f"{autocal.ENV}=0"


def test_a_spec_the_backend_cannot_run_is_refused_before_any_measurement(
        machine: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    from p4cc.errors import ConfigError
    from p4cc.experiment.spec import parse_spec

    monkeypatch.setattr(doctor, "bmv2_missing", lambda checks=None: [])
    bad = parse_spec({"name": "t", "backend": "bmv2", "topology": "star,hosts=12",
                      "duration_s": 5, "workloads": [{"type": "incast", "receiver": "h12",
                                                      "senders": [2, 2], "sizes": [1000],
                                                      "load": 0.1}]})
    with pytest.raises(ConfigError, match="12 hosts"):
        Bmv2Backend().check(bad)
    assert machine == []  # refused in a moment, not after a minute of calibration
