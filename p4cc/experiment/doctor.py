"""``p4cc doctor``: what this machine has for each backend, and how to get what is missing.

Never fails (``make setup`` runs it); ``bmv2_missing()`` is what ``p4cc testbed`` uses
to decide whether the emulated fabric can run.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from p4cc.paths import P4_BUILD_DIR

BUILD = P4_BUILD_DIR

BMV2_FIX = (
    "Ubuntu: install the p4lang project's prebuilt package p4lang-bmv2 (see README.md, "
    "or use the Vagrantfile); otherwise build p4lang/PI and p4lang/behavioral-model "
    "(configure --with-pi --with-thrift) from source and install under /usr/local"
)
P4C_FIX = ("Ubuntu: the p4lang project's prebuilt package p4lang-p4c; otherwise build "
           "p4lang/p4c (BMv2 backend) from source. Only needed to change p4src/ (`make p4`)")
APT = "apt-get install {}  (as root; `make setup` does this)"


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str  # path / version when present, what is wrong otherwise
    fix: str  # how to get it (empty when ok)
    needed_for: str  # "bmv2" (the emulated fabric), "p4" (recompiling), "traffic", ...


def _version(cmd: list[str]) -> str:
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"(cannot run: {exc})"
    text = (res.stdout or res.stderr).strip().splitlines()
    return text[0] if text else ""


def _tool(name: str, fix: str, needed_for: str, version_flag: str | None = "--version") -> Check:
    path = shutil.which(name)
    if path is None:
        return Check(name, False, "not on PATH", fix, needed_for)
    detail = path
    if version_flag:
        detail += f" ({_version([path, version_flag])})"
    return Check(name, True, detail, "", needed_for)


def _module(name: str, fix: str, needed_for: str) -> Check:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return Check(f"python module {name}", False, "not importable", fix, needed_for)
    return Check(f"python module {name}", True, str(spec.origin or "namespace package"), "",
                 needed_for)


def _runtime_modules() -> Check:
    """BMv2's generated Thrift clients, found the way p4cc.controlplane.thrift finds them."""
    name = "python modules bm_runtime, sswitch_runtime"
    try:
        from p4cc.controlplane.thrift import load_runtime_modules

        standard, _sswitch = load_runtime_modules()
    except Exception as exc:  # ToolMissingError, or a broken install: report only
        return Check(name, False, str(exc).split(";")[0],
                     "they come with BMv2 built --with-thrift (installed under "
                     "/usr/local/lib/python3*/site-packages, or dist-packages with the "
                     "p4lang-bmv2 package); set P4CC_BMV2_PYTHONPATH if elsewhere", "bmv2")
    return Check(name, True, str(getattr(standard, "__file__", "")), "", "bmv2")


def _thrift_support() -> Check | None:
    path = shutil.which("simple_switch_grpc")
    if path is None:
        return None
    from p4cc.topo.bmv2 import binary_options

    try:
        ok = "thrift-port" in binary_options(path)
    except Exception as exc:  # a broken binary: report, never raise
        return Check("simple_switch_grpc Thrift support", False, str(exc), BMV2_FIX, "bmv2")
    return Check("simple_switch_grpc Thrift support", ok,
                 "--thrift-port available" if ok else "built without Thrift",
                 "" if ok else "rebuild behavioral-model with --with-thrift", "bmv2")


def run_checks() -> list[Check]:
    checks = [
        _tool("simple_switch_grpc", BMV2_FIX, "bmv2"),
    ]
    thrift = _thrift_support()
    if thrift is not None:
        checks.append(thrift)
    checks += [
        _tool("simple_switch_CLI", BMV2_FIX + " (comes with BMv2)", "debugging", None),
        _module("thrift", APT.format("python3-thrift") + " or pip install thrift", "bmv2"),
        _runtime_modules(),
        _module("mininet", APT.format("mininet") + " and use the venv from `make venv` "
                "(--system-site-packages)", "bmv2"),
        _tool("mnexec", APT.format("mininet"), "bmv2", None),
        _tool("ethtool", APT.format("ethtool"), "bmv2", None),
        _tool("iperf3", APT.format("iperf3"), "traffic", "--version"),
        _tool("p4c", P4C_FIX, "p4", "--version"),
        Check("root", os.geteuid() == 0, f"euid {os.geteuid()}",
              "" if os.geteuid() == 0 else "run as root (sudo) to build the fabric", "bmv2"),
    ]
    for name in ("p4cc.json", "p4cc.p4info.txtpb"):
        path = BUILD / name
        checks.append(Check(f"p4cc/data/p4/{name}", path.is_file(),
                            str(path) if path.is_file() else "missing",
                            "" if path.is_file() else "run `make p4` (needs p4c) or restore "
                            "p4cc/data/p4/ from git", "bmv2"))
    return checks


def bmv2_missing(checks: list[Check] | None = None) -> list[Check]:
    """The failed checks that stop the emulated fabric (BMv2 backend) from running."""
    checks = run_checks() if checks is None else checks
    return [c for c in checks if not c.ok and c.needed_for == "bmv2"]


def format_report(checks: list[Check]) -> str:
    lines = ["p4cc doctor:"]
    width = max(len(c.name) for c in checks)
    for c in checks:
        mark = "ok     " if c.ok else "MISSING"
        lines.append(f"  [{mark}] {c.name:<{width}}  {c.detail}  ({c.needed_for})")
        if not c.ok:
            lines.append(f"            fix: {c.fix}")
    missing = bmv2_missing(checks)
    if missing:
        lines.append("BMv2 backend: NOT available (missing: "
                     + ", ".join(c.name for c in missing) + "); `p4cc testbed` uses the "
                     "simulator when it exists")
    else:
        lines.append("BMv2 backend: ready (`make testbed` runs the emulated fabric)")
    lines.append("simulator backend: needs nothing beyond the Python package")
    return "\n".join(lines)


def resolve_backend(requested: str, what: str = "the experiment") -> str:
    """``bmv2``/``sim`` for ``auto`` (saying why when it falls back to the simulator),
    else as asked; ToolMissingError for ``bmv2`` on a machine without a usable BMv2."""
    from p4cc.errors import ConfigError, ToolMissingError

    if requested not in ("auto", "bmv2", "sim"):
        raise ConfigError(f"backend {requested!r}: choose auto, bmv2 or sim")
    if requested == "sim":
        return "sim"
    checks = run_checks()
    missing = bmv2_missing(checks)
    if not missing:
        return "bmv2"
    names = ", ".join(f"{c.name} ({c.detail})" if c.detail else c.name for c in missing)
    if requested == "auto":
        print(f"p4cc: the BMv2 backend is not available here (missing: {names}); running "
              f"{what} on the SIMULATOR instead. `p4cc doctor` says how to get BMv2.",
              flush=True)
        return "sim"
    raise ToolMissingError(
        f"the BMv2 backend is not available on this machine (missing: {names}); use "
        "--backend sim, or install what `p4cc doctor` lists:\n" + format_report(checks))


def main(extra: Sequence[Check] = ()) -> int:
    """Print the report; ``extra``: checks of packages above this module (the machine
    budget's calibration, p4cc.experiment.bmv2.autocal.doctor_check)."""
    print(format_report([*run_checks(), *extra]))
    return 0
