"""The default experiment of ``make testbed`` / ``p4cc testbed``: examples/testbed.yaml.

``run_default_experiment()`` picks the backend (``auto``: BMv2 when ``p4cc doctor`` says
it is usable, else the simulator, saying why), runs every agent variant of the spec
through p4cc.experiment.runner.run_spec, builds the comparison report and returns its
path (printed too).
"""

from __future__ import annotations

from pathlib import Path

from p4cc.analysis.report import report
from p4cc.experiment.doctor import resolve_backend as doctor_resolve_backend
from p4cc.experiment.runner import run_spec
from p4cc.experiment.spec import load_spec
from p4cc.paths import DATA_DIR

DEFAULT_SPEC = DATA_DIR / "testbed.yaml"


def resolve_backend(requested: str = "auto") -> str:
    """p4cc.experiment.doctor.resolve_backend for the default experiment."""
    return doctor_resolve_backend(requested, "the default experiment")


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
