"""p4build: a clear error without p4c; with p4c, the committed artifacts are current."""

from __future__ import annotations

import shutil

import pytest

from p4cc.controlplane import p4build
from p4cc.errors import ToolMissingError


def test_missing_p4c_names_tool_and_fix():
    with pytest.raises(ToolMissingError, match=r"p4c.*github.com/p4lang/p4c"):
        p4build.find_p4c("p4c-definitely-not-installed")


def test_cli_exit_code_without_p4c(capsys):
    assert p4build.main(["--p4c", "p4c-definitely-not-installed"]) == 2
    assert "not found" in capsys.readouterr().err


def test_programs_exist():
    for prog in p4build.PROGRAMS:
        assert (p4build.P4SRC / prog.source).is_file()


@pytest.mark.p4c
def test_committed_artifacts_match_sources():
    if shutil.which("p4c") is None:
        pytest.skip("p4c is not installed (build it from p4lang/p4c; see docs/developing.md)")
    problems = p4build.check()
    assert problems == [], "\n".join(problems)


@pytest.mark.p4c
def test_compile_error_is_reported(tmp_path, monkeypatch):
    if shutil.which("p4c") is None:
        pytest.skip("p4c is not installed (build it from p4lang/p4c; see docs/developing.md)")
    bad = tmp_path / "bad.p4"
    bad.write_text("this is not P4;\n")
    monkeypatch.setattr(p4build, "P4SRC", tmp_path)
    with pytest.raises(p4build.P4CompileError, match=r"p4c failed on p4src/bad\.p4"):
        p4build.compile_program(p4build.P4Program("bad", "bad.p4"), tmp_path / "out")
