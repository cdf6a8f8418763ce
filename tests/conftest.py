"""Shared pytest configuration.

Hypothesis: under CI (``CI`` set) examples are derandomized, so a red build is
reproducible from the commit alone; locally they stay random to keep finding cases.

The bmv2 backend's automatic calibration (p4cc.experiment.bmv2.autocal) is off in every
test: a test that goes through ``p4cc run``/``sweep`` registers the real measurement for
the rest of the session, and on a machine with BMv2 a later preflight would then
measure the machine under the test suite's load and cache it in the user's
``~/.cache/p4cc``.  The tests of autocal itself turn it back on (with a private cache).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(autouse=True)
def _no_autocalibration(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("P4CC_AUTOCALIBRATE", "0")
    yield
