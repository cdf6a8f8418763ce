"""The default experiment of ``make testbed`` / ``p4cc testbed``: examples/testbed.yaml.

``run_default_experiment()`` picks the backend (``auto``: BMv2 when ``p4cc doctor`` says
it is usable, else the simulator, saying why), runs every agent variant of the spec
through p4cc.traffic.runner.run_spec, builds the comparison report and returns its
path (printed too).
"""

from __future__ import annotations

from pathlib import Path

from p4cc.errors import ConfigError, ToolMissingError
from p4cc.traffic.report import report
from p4cc.traffic.runner import run_spec
from p4cc.traffic.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
DEFAULT_SPEC = REPO / "examples" / "testbed.yaml"


def resolve_backend(requested: str = "auto") -> str:
    """``bmv2``/``sim`` for ``auto`` (printing why when it falls back), else as asked;
    ToolMissingError for ``bmv2`` on a machine without it."""
    if requested not in ("auto", "bmv2", "sim"):
        raise ConfigError(f"backend {requested!r}: choose auto, bmv2 or sim")
    if requested == "sim":
        return "sim"
    from p4cc.doctor import bmv2_missing, format_report, run_checks

    checks = run_checks()
    missing = bmv2_missing(checks)
    if not missing:
        return "bmv2"
    names = ", ".join(f"{c.name} ({c.detail})" for c in missing)
    if requested == "auto":
        print(f"p4cc: BMv2 is not usable here (missing: {names}); running the default "
              f"experiment on the SIMULATOR instead. `p4cc doctor` says how to get BMv2.",
              flush=True)
        return "sim"
    raise ToolMissingError(f"the BMv2 backend is not available (missing: {names}); use "
                           f"--backend sim, or install what `p4cc doctor` lists:\n"
                           + format_report(checks))


def run_default_experiment(backend: str = "auto", out: Path | None = None,
                           spec_path: Path = DEFAULT_SPEC) -> Path:
    """Run examples/testbed.yaml on ``backend`` into ``out`` (default ``runs/testbed``,
    or ``runs/testbed-sim`` on the simulator); return the report's path."""
    spec = load_spec(spec_path)
    chosen = resolve_backend(backend)
    base = Path(out) if out is not None else Path("runs") / (
        spec.name if chosen == "bmv2" else f"{spec.name}-{chosen}")
    print(f"p4cc: default experiment {spec.name} on {chosen}: {spec.topology}, "
          f"{spec.duration_s:g} s x agents {', '.join(spec.agents)} -> {base}", flush=True)
    runs = run_spec(spec, backend=chosen, out=base)
    path = report(runs, out=base / "report")
    print(path.read_text(), flush=True)
    print(f"\np4cc: report written to {path}", flush=True)
    return path
