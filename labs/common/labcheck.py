"""Tiny reporting helper shared by the labs' ``make check`` (not part of p4cc).

Each check prints one line per step, ``PASS``/``FAIL``/``SKIP`` with a message that says
what to do, and exits 0 only if no step failed (skips do not fail a check).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType


class Report:
    def __init__(self, lab: str) -> None:
        self.lab = lab
        self.failed = 0
        self.skipped = 0
        print(f"== {lab}: checking")

    def ok(self, what: str) -> None:
        print(f"PASS  {what}")

    def fail(self, what: str, hint: str) -> None:
        self.failed += 1
        print(f"FAIL  {what}\n      -> {hint}")

    def skip(self, what: str, why: str) -> None:
        self.skipped += 1
        print(f"SKIP  {what}: {why}")

    def check(self, cond: bool, what: str, hint: str) -> bool:
        (self.ok(what) if cond else self.fail(what, hint))
        return cond

    def done(self) -> int:
        if self.failed:
            print(f"== {self.lab}: {self.failed} step(s) FAILED; fix them and run `make check` "
                  "again")
            return 1
        extra = f" ({self.skipped} step(s) skipped, see above)" if self.skipped else ""
        print(f"== {self.lab}: all checks passed{extra}")
        return 0


def parser(default: Path) -> argparse.ArgumentParser:
    """The common options of every check; a lab adds its own before parsing."""
    p = argparse.ArgumentParser()
    p.add_argument("--src", type=Path, default=default,
                   help="directory with the student's files (default: this lab)")
    p.add_argument("--no-bmv2", action="store_true",
                   help="skip the steps that start BMv2 (the test suite's quick run)")
    return p


def checked_src(src: Path) -> Path:
    if not src.is_dir():
        sys.exit(f"no such directory: {src}")
    return src.resolve()


def source_dir(default: Path) -> Path:
    """``--src DIR``: check the files in DIR (a teacher's solution) instead of the lab's."""
    return checked_src(parser(default).parse_args().src)


def load_student(path: Path, rep: Report) -> ModuleType | None:
    """Import the student's ``path`` (e.g. ``analysis.py``); a FAIL line naming the
    exception and None if importing it raises."""
    spec = importlib.util.spec_from_file_location(f"student_{path.stem}", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as exc:
        rep.fail(f"import {path.name}", f"it raised {type(exc).__name__}: {exc}")
        return None
    return mod
