"""Compile the P4 programs in p4src/ into the committed artifacts in p4cc/data/p4/.

    python -m p4cc.controlplane.p4build [--p4c PATH] [--check]

Runs ``p4c --target bmv2 --arch v1model --p4runtime-files NAME.p4info.txtpb`` for
p4src/p4cc.p4 and p4src/bench/l3min.p4 and keeps ``NAME.json`` and
``NAME.p4info.txtpb`` (not p4c's preprocessed ``.p4i``).  p4c is run from p4src/ with
relative paths, so the source file names recorded in the JSON do not depend on where the
repository lives and the artifacts are reproducible.  ``--check`` compiles into a
temporary directory and reports every artifact that differs from the committed one
(exit status 1), for CI and the ``p4c``-marked test.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from p4cc.errors import P4ccError, ToolMissingError
from p4cc.paths import P4_BUILD_DIR, P4SRC_DIR

P4SRC = P4SRC_DIR
BUILD_DIR = P4_BUILD_DIR
ARTIFACT_SUFFIXES = (".json", ".p4info.txtpb")
P4C_HINT = (
    "p4c (the P4_16 reference compiler, with its BMv2 backend) is not installed: "
    "it is not packaged on Debian/PyPI; build it from https://github.com/p4lang/p4c "
    "(release v1.2.4.x with Debian 12's protobuf 3.21) and install it under /usr/local, "
    "or on Ubuntu install the p4lang-p4c package (see docs/developing.md); "
    "or pass --p4c PATH / P4C=PATH to make"
)


class P4CompileError(P4ccError):
    """p4c rejected a program."""


@dataclass(frozen=True)
class P4Program:
    """One program: artifacts are ``<name>.json`` and ``<name>.p4info.txtpb``."""

    name: str
    source: str  # relative to p4src/

    def artifacts(self, directory: Path) -> list[Path]:
        return [directory / f"{self.name}{suffix}" for suffix in ARTIFACT_SUFFIXES]


PROGRAMS: tuple[P4Program, ...] = (
    P4Program("p4cc", "p4cc.p4"),
    P4Program("l3min", "bench/l3min.p4"),
)


def find_p4c(p4c: str | None = None) -> str:
    """The p4c executable (``p4c`` on PATH by default); ToolMissingError if absent."""
    name = p4c or "p4c"
    found = shutil.which(name)
    if found is None:
        raise ToolMissingError(f"{name!r} not found. {P4C_HINT}")
    return found


def compile_program(prog: P4Program, out_dir: Path, p4c: str | None = None) -> list[Path]:
    """Compile ``prog`` and copy its two artifacts into ``out_dir``; return their paths."""
    exe = find_p4c(p4c)
    src = P4SRC / prog.source
    if not src.is_file():
        raise P4CompileError(f"P4 source {src} is missing; restore it from git")
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="p4cc-p4build-") as tmp:
        tmp_dir = Path(tmp)
        info = tmp_dir / f"{prog.name}.p4info.txtpb"
        cmd = [
            exe, "--target", "bmv2", "--arch", "v1model",
            "--p4runtime-files", str(info), "-o", str(tmp_dir), prog.source,
        ]
        res = subprocess.run(cmd, cwd=P4SRC, capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise P4CompileError(
                f"p4c failed on p4src/{prog.source} (exit {res.returncode}):\n"
                f"{res.stderr.strip() or res.stdout.strip()}"
            )
        built = tmp_dir / f"{Path(prog.source).stem}.json"
        if not built.is_file():
            raise P4CompileError(f"p4c produced no {built.name} for p4src/{prog.source}")
        json_out, info_out = prog.artifacts(out_dir)
        # The p4c driver compiles its preprocessed copy (<out>/<stem>.p4i) and records
        # that temporary path as "program"; record the source path instead so that the
        # artifact is the same on every run and machine.
        text = built.read_text()
        p4i = f'"program" : "{tmp_dir / Path(prog.source).stem}.p4i"'
        json_out.write_text(text.replace(p4i, f'"program" : "{prog.source}"', 1))
        shutil.copyfile(info, info_out)
    return [json_out, info_out]


def build(out_dir: Path = BUILD_DIR, p4c: str | None = None) -> list[Path]:
    """Compile every program in PROGRAMS into ``out_dir``."""
    paths: list[Path] = []
    for prog in PROGRAMS:
        paths += compile_program(prog, out_dir, p4c)
    return paths


def check(p4c: str | None = None, committed: Path = BUILD_DIR) -> list[str]:
    """Recompile into a temporary directory; one line per artifact that differs."""
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="p4cc-p4check-") as tmp:
        for fresh in build(Path(tmp), p4c):
            old = committed / fresh.name
            if not old.is_file():
                problems.append(f"{old} is missing (run make p4)")
            elif not filecmp.cmp(fresh, old, shallow=False):
                problems.append(f"{old} is stale: differs from a fresh compile (run make p4)")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m p4cc.controlplane.p4build", description=__doc__
                                 and __doc__.splitlines()[0])
    ap.add_argument("--p4c", default=None, help="p4c executable (default: p4c on PATH)")
    ap.add_argument("--check", action="store_true",
                    help="compile to a temp dir and compare with p4cc/data/p4/")
    args = ap.parse_args(argv)
    try:
        if args.check:
            problems = check(args.p4c)
            for line in problems:
                print(line, file=sys.stderr)
            if not problems:
                print("p4cc/data/p4/ matches the sources")
            return 1 if problems else 0
        for path in build(p4c=args.p4c):
            print(path)
        return 0
    except P4ccError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
