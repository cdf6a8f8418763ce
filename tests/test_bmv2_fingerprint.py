"""The calibration cache key's code fingerprint (p4cc.experiment.bmv2.fingerprint)."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from p4cc.experiment.bmv2 import budget, fingerprint

CODE = '''"""Module docstring."""
import math


def rate(x):
    """Docstring."""
    # a comment
    return math.sqrt(x) * 2
'''


def _tree(tmp_path: Path, code: str = CODE, extra: dict[str, str] | None = None) -> Path:
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True, exist_ok=True)
    (root / "sub" / "a.py").write_text(code)
    (root / "prog.json").write_text('{"x": 1}')
    for name, text in (extra or {}).items():
        (root / "sub" / name).write_text(text)
    return root


PATTERNS = ("sub/*.py", "prog.json")


def test_comments_docstrings_and_layout_keep_the_fingerprint(tmp_path: Path) -> None:
    base = fingerprint.fingerprint(_tree(tmp_path), PATTERNS)
    cosmetic = (CODE.replace("Docstring.", "Another docstring, longer.")
                .replace("# a comment", "# another comment\n\n")
                .replace('"""Module docstring."""', '"""Changed."""\n# new comment'))
    assert fingerprint.fingerprint(_tree(tmp_path, cosmetic), PATTERNS) == base
    # a function left with only its docstring stays a (different) valid body
    only_doc = CODE + '\n\ndef f():\n    """Only a docstring."""\n'
    assert fingerprint.fingerprint(_tree(tmp_path, only_doc), PATTERNS) != base


@pytest.mark.parametrize("change", [
    lambda c: c.replace("* 2", "* 3"),             # a constant
    lambda c: c.replace("sqrt", "log"),            # a call
    lambda c: c + "\nLIMIT = 5\n",                  # a new statement
    lambda c: c.replace("def rate(x)", "def rate(y)").replace("sqrt(x)", "sqrt(y)"),
])
def test_a_code_change_changes_it(tmp_path: Path, change: Callable[[str], str]) -> None:
    base = fingerprint.fingerprint(_tree(tmp_path), PATTERNS)
    assert fingerprint.fingerprint(_tree(tmp_path, change(CODE)), PATTERNS) != base


def test_files_added_removed_and_other_files(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    base = fingerprint.fingerprint(root, PATTERNS)
    (root / "sub" / "b.py").write_text("X = 1\n")
    added = fingerprint.fingerprint(root, PATTERNS)
    assert added != base
    (root / "sub" / "b.py").unlink()
    assert fingerprint.fingerprint(root, PATTERNS) == base
    (root / "prog.json").write_text('{"x": 2}')  # not Python: its bytes
    assert fingerprint.fingerprint(root, PATTERNS) != base
    (root / "prog.json").unlink()  # a pattern that matches nothing counts too
    gone = fingerprint.fingerprint(root, PATTERNS)
    assert gone != base and gone == fingerprint.fingerprint(root, PATTERNS)


def test_a_file_that_does_not_parse_is_hashed_by_its_bytes(tmp_path: Path) -> None:
    root = _tree(tmp_path, "def broken(:\n")
    one = fingerprint.file_digest(root / "sub" / "a.py")
    (root / "sub" / "a.py").write_text("def broken(:\n# comment\n")
    assert fingerprint.file_digest(root / "sub" / "a.py") != one


def test_every_measured_pattern_names_installed_files() -> None:
    pkg = fingerprint.PACKAGE_DIR
    for pattern in fingerprint.MEASURED:
        assert list(pkg.glob(pattern)), f"{pattern} matches nothing under {pkg}"
    assert len(fingerprint.measured_code()) == 12


def test_the_cache_key_follows_the_measured_code(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    monkeypatch.setenv("P4CC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(budget, "measured_code", lambda: "aaaaaaaaaaaa")
    cal = budget.Calibration(100.0, 19000.0, 60.0, 2, "build-x", 123.0, 0.5)
    budget.save(cal)
    assert budget.load("build-x") == cal
    monkeypatch.setattr(budget, "measured_code", lambda: "bbbbbbbbbbbb")
    # the hosts' code or the program changed: the cached figures no longer apply
    assert budget.load("build-x") == budget.UNCALIBRATED
    monkeypatch.setattr(budget, "measured_code", lambda: "aaaaaaaaaaaa")
    assert budget.load("build-x") == cal
