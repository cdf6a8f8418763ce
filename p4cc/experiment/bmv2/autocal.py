"""The machine budget's calibration, measured once per BMv2 build when a run needs it.

``p4cc bench calibrate`` measures what this machine's BMv2 and hosts carry and caches it
per build (p4cc.experiment.bmv2.budget).  So that a new user's first ``make testbed`` or
``p4cc run --backend bmv2`` is judged against *this* machine and not the reference
machine's stand-in numbers, the bmv2 backend's preflight (``Bmv2Backend.check``) calls
``ensure_calibrated``: when no calibration is cached for the installed build, it runs
the measurement once (~1 min; root and BMv2, which a bmv2 run needs anyway), caches it
and goes on.

The measurement lives in the bench layer (``p4cc.bench.calibrate.measure``: the rig of
``p4cc bench dataplane`` and real host processes), above this package, so it is handed
in with ``set_calibrator`` by the command line (``p4cc.cli``) rather than imported.
Without a registered calibrator (library use, tests), or without root or BMv2, nothing
is measured and ``budget.UNCALIBRATED`` stands in as before.  ``P4CC_AUTOCALIBRATE=0``
turns the automatic measurement off.

Concurrent preflights (two ``p4cc run`` at once) measure once: the measurement holds an
exclusive lock on ``<cache dir>/calibrate.lock`` and the waiting process then reads the
cache the first one wrote.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
from collections.abc import Callable

from p4cc.errors import P4ccError
from p4cc.experiment.bmv2 import budget
from p4cc.experiment.bmv2.fingerprint import measured_code
from p4cc.experiment.doctor import Check

log = logging.getLogger(__name__)

#: ``P4CC_AUTOCALIBRATE``: "0" turns the automatic measurement off
ENV = "P4CC_AUTOCALIBRATE"

Calibrator = Callable[[], budget.Calibration]
_calibrator: Calibrator | None = None


def set_calibrator(fn: Calibrator | None) -> None:
    """Register the function that measures this machine (None: unregister)."""
    global _calibrator
    _calibrator = fn


def why_not() -> str | None:
    """Why nothing would be measured now (None: it would be, if nothing is cached)."""
    if os.environ.get(ENV, "1").strip() in ("0", "false", "no", "off"):
        return f"{ENV}=0"
    if _calibrator is None:
        return "no calibrator registered (library use)"
    if budget.bmv2_build() == "none":
        return "no simple_switch_grpc on PATH"
    if os.geteuid() != 0:
        return "not root"
    return None


def ensure_calibrated() -> budget.Calibration:
    """This build's cached calibration; measured and cached first if there is none and
    ``why_not()`` is None; otherwise whatever ``budget.load`` gives (UNCALIBRATED)."""
    build = budget.bmv2_build()
    cal = budget.load(build)
    if cal.calibrated or why_not() is not None:
        return cal
    assert _calibrator is not None  # why_not() checked it
    lock_path = budget.cache_dir() / "calibrate.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # blocks while another process measures
        cal = budget.load(build)  # that process may have cached it meanwhile
        if cal.calibrated:
            return cal
        log.warning("no machine-budget calibration is cached for this BMv2 build (%s) "
                    "and code (%s: the hosts' code and the P4 program it measures); "
                    "measuring this machine once (~1 min, `p4cc bench calibrate`), "
                    "then caching it in %s", build, measured_code(), budget.cache_path(build))
        try:
            cal = _calibrator()
        except Exception as exc:  # a dead switch, a missing program, a gRPC error...
            raise P4ccError(f"calibrating this machine's BMv2 budget failed: {exc} "
                            f"(`sudo p4cc bench calibrate` measures it alone; {ENV}=0 "
                            f"runs on the reference machine's numbers instead)") from exc
        path = budget.save(cal)
        log.warning("calibration cached in %s: %s", path, budget.summary(cal))
    return cal


def doctor_check() -> Check | None:
    """``p4cc doctor``'s line on the calibration of the installed BMv2 build and code (None
    without BMv2); informational: a bmv2 run measures it first when none is cached."""
    if shutil.which("simple_switch_grpc") is None:
        return None
    cal = budget.load()
    name = "machine budget calibration"
    if cal.calibrated:
        return Check(name, True, budget.summary(cal), "", "budget")
    return Check(name, False, "none cached for this BMv2 build and code "
                 f"(code {measured_code()}: a change to the hosts or the program "
                 "measures the machine again)",
                 "the first bmv2 run measures it (~1 min) and caches it; or now: "
                 "`sudo p4cc bench calibrate`", "budget")
