"""Shared pytest configuration.

Hypothesis: under CI (``CI`` set) examples are derandomized, so a red build is
reproducible from the commit alone; locally they stay random to keep finding cases.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
