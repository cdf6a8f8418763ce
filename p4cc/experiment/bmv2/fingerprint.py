"""What a cached machine calibration measured: a fingerprint of the code behind it.

``p4cc bench calibrate`` measures p4cc's program on this machine's BMv2 and p4cc's own
host processes (p4cc.bench.calibrate_hosts).  A calibration is only valid for the code
it measured: a change to the hosts' sender, pacer or CC, or to the P4 program, changes
the CPU they cost.  Until session 39 the cache key held a hand-kept revision number
(``HOST_CODE_REVISION``) that had to be bumped by whoever changed that code; now the
key holds this fingerprint, so a change re-measures the machine by itself on the next
bmv2 run (docs/emulation.md "Machine budget").

Python sources are fingerprinted by their syntax tree without docstrings
(``ast.dump`` carries no comments, line numbers or formatting), so editing a comment
or a docstring keeps the calibration; any change to what the code does re-measures.
Other files (the compiled P4 program) by their bytes.
"""
from __future__ import annotations

import ast
import functools
import hashlib
from collections.abc import Iterable
from pathlib import Path

from p4cc.paths import PACKAGE_DIR

#: the code a calibration measures, relative to the p4cc package: the hosts' processes
#: (every module of p4cc.hostcc, its shipped RL-CC policies, and the wrapper that starts
#: them), the CPU accounting, the calibration rigs, and the P4 program the switch part
#: forwards with, as pushed (bmv2config and its bmv2opt passes rewrite it)
MEASURED: tuple[str, ...] = (
    "hostcc/*.py",
    "hostcc/data/*",
    "experiment/bmv2/hosts.py",
    "experiment/bmv2/procmon.py",
    "bench/calibrate.py",
    "bench/calibrate_hosts.py",
    "bench/dataplane.py",
    "data/p4/p4cc.json",
    "controlplane/bmv2config.py",
    "controlplane/bmv2opt.py",
)


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                             ast.AsyncFunctionDef)):
            body = node.body
            if (body and isinstance(body[0], ast.Expr)
                    and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                node.body = body[1:] or [ast.Pass()]
    return tree


def file_digest(path: Path) -> str:
    """sha1 of a Python file's syntax tree without docstrings, or of another file's
    bytes.  A Python file that does not parse is hashed by its bytes."""
    data = path.read_bytes()
    if path.suffix == ".py":
        try:
            tree = _strip_docstrings(ast.parse(data, filename=str(path)))
        except SyntaxError:
            pass
        else:
            data = ast.dump(tree).encode()
    return hashlib.sha1(data).hexdigest()


def fingerprint(root: Path, patterns: Iterable[str]) -> str:
    """12 hex digits over the files under ``root`` that ``patterns`` match (glob
    patterns, in sorted order of their relative paths; a pattern that matches nothing
    counts as missing, so removing a file changes the fingerprint too)."""
    h = hashlib.sha1()
    for pattern in patterns:
        paths = sorted(root.glob(pattern))
        if not paths:
            h.update(f"{pattern} missing\n".encode())
        for p in paths:
            h.update(f"{p.relative_to(root).as_posix()} {file_digest(p)}\n".encode())
    return h.hexdigest()[:12]


@functools.cache
def measured_code() -> str:
    """The fingerprint of this installation's MEASURED code (computed once per
    process)."""
    return fingerprint(PACKAGE_DIR, MEASURED)
