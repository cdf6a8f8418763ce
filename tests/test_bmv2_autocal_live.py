"""On a real BMv2: the bmv2 backend's preflight measures an uncalibrated machine first
(p4cc.experiment.bmv2.autocal with p4cc.bench.calibrate's measurement), caches it, and
judges the default experiment against it."""

from __future__ import annotations

from pathlib import Path

import pytest

from p4cc.bench import dataplane as dp

pytestmark = [pytest.mark.bmv2, pytest.mark.root, pytest.mark.slow]

_REASON = dp.skip_reason()
if _REASON:
    pytest.skip(_REASON, allow_module_level=True)

from p4cc.bench import calibrate  # noqa: E402
from p4cc.experiment.bmv2 import autocal, budget  # noqa: E402
from p4cc.experiment.bmv2.backend import Bmv2Backend  # noqa: E402
from p4cc.experiment.default import DEFAULT_SPEC  # noqa: E402
from p4cc.experiment.spec import load_spec  # noqa: E402


def test_an_uncalibrated_machine_is_measured_once_before_its_first_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("P4CC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(autocal.ENV, raising=False)
    calls: list[int] = []

    def quick() -> budget.Calibration:  # the real measurement, shortened
        calls.append(1)
        return calibrate.measure(reps=1, seconds=1.0, host_ccs=("dcqcn",),
                                 host_seconds=2.0)[0]

    monkeypatch.setattr(autocal, "_calibrator", quick)
    assert not budget.load().calibrated
    spec = load_spec(DEFAULT_SPEC)
    Bmv2Backend().check(spec)  # measures, caches, then fits the default experiment
    cal = budget.load()
    assert calls == [1] and cal.calibrated and cal.build == budget.bmv2_build()
    assert 5.0 < cal.switch_us_per_pkt < 2000.0, cal
    assert cal.switch_sat_pps > 1000.0, cal
    assert cal.host_send_us_per_pkt["dcqcn"] > 0.0, cal
    assert list(tmp_path.glob("calibration-*.json"))
    Bmv2Backend().check(spec)  # the cache now answers
    assert calls == [1]
