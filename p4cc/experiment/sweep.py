"""``p4cc sweep``: a spec plus a grid, expanded into runs (docs/sweeps.md).

A sweep is grid points (p4cc.experiment.grid) × the spec's agents × seeds.  Each run is
one task, executed by ``run_task`` in a worker (a Ray task or a process of a pool,
p4cc.experiment.sweep_exec) through ``p4cc.experiment.runner.run_variant``, so its run
directory is exactly what ``p4cc run`` writes for that point's spec.  Layout::

    runs/<name>-sweep/sweep.json                 the grid, seeds, agents, points
    runs/<name>-sweep/<point>/spec.yaml          the point's spec (``p4cc run`` takes it)
    runs/<name>-sweep/<point>/<agent>[_seed<n>]/ one run directory
    runs/<name>-sweep/report/                    p4cc.experiment.sweep_report

Resume: a run whose ``status.json`` says ``complete: true`` is skipped; any other run
directory is run again (RunWriter moves the old one aside to ``<dir>.prev-<time>``).
Resuming with more seeds or agents than the runs were made with keeps them (a run's
results depend on its own agent and seed only); any other change of the spec is an
error.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from p4cc.errors import ConfigError
from p4cc.experiment.backend import get_backend
from p4cc.experiment.grid import GridAxis, GridPoint, expand, parse_grid, read_doc
from p4cc.experiment.runner import (
    preflight,
    run_variant,
    sigterm_as_interrupt,
    variant_dir_name,
)
from p4cc.experiment.schedule import build_schedule
from p4cc.experiment.spec import ExperimentSpec, resolve

log = logging.getLogger(__name__)

SWEEP_FILE = "sweep.json"


@dataclass(frozen=True)
class SweepTask:
    """One run of a sweep: a point's spec, one agent, one seed."""

    point: str
    agent: str
    seed: int
    path: Path  # the run directory (absolute)
    spec: ExperimentSpec  # the point's spec (all its agents and seeds, as ``p4cc run``)
    backend: str

    @property
    def label(self) -> str:
        return f"{self.point}/{self.path.name}"


@dataclass(frozen=True)
class TaskResult:
    label: str
    ok: bool
    error: str = ""
    elapsed_s: float = 0.0  # wall-clock time of the run in its worker
    cpu_s: float = 0.0  # CPU time the worker process spent on it


@dataclass(frozen=True)
class SweepPlan:
    name: str
    root: Path
    source: str
    backend: str
    axes: tuple[GridAxis, ...]
    points: tuple[GridPoint, ...]
    tasks: tuple[SweepTask, ...]


def is_complete(run_dir: Path) -> bool:
    """True if ``run_dir/status.json`` says the run finished (``complete: true``)."""
    try:
        return bool(json.loads((run_dir / "status.json").read_text()).get("complete"))
    except (OSError, ValueError):
        return False


def plan_sweep(spec_path: str | Path, grid: Sequence[str], seeds: Sequence[int] | None = None,
               out: str | Path | None = None, runs_root: str | Path = "runs",
               backend: str | None = None) -> SweepPlan:
    """Validate the spec, the grid and every point's spec (and what the backend can run)
    and list the runs; nothing is written or started."""
    doc, source, base_dir = read_doc(spec_path)
    axes = parse_grid(grid, doc)
    points = expand(doc, axes, source, base_dir, seeds)
    be_name = backend or points[0].spec.backend
    be = get_backend(be_name)
    for p in points:
        preflight(be, p.spec)
    name = points[0].spec.name
    root = (Path(out) if out else Path(runs_root) / f"{name}-sweep").absolute()
    tasks = tuple(
        SweepTask(p.name, agent, seed,
                  root / p.name / variant_dir_name(agent, seed, len(p.spec.seeds)),
                  p.spec, be_name)
        for p in points for agent in p.spec.agents for seed in p.spec.seeds)
    return SweepPlan(name, root, source, be_name, axes, points, tasks)


#: Keys of a resolved spec that say which runs a sweep holds, not what one run does (a
#: run's own agent and seed are its ``run:`` block and its directory name): a sweep
#: resumed with more seeds or agents keeps the runs it has.
_SET_KEYS = ("seeds", "agents")


def _run_content(doc: dict[str, Any]) -> dict[str, Any]:
    """What decides one run's results: the resolved spec without the sweep's set of
    runs, the run's own ``run:`` block and ``source`` (the file may have moved; its
    content is what counts)."""
    return {k: v for k, v in doc.items() if k not in (*_SET_KEYS, "run", "source")}


def _stored_spec(task: SweepTask) -> dict[str, Any]:
    meta = yaml.safe_load((task.path / "spec.resolved.yaml").read_text()) or {}
    return _run_content(dict(meta))


def pending(plan: SweepPlan) -> list[SweepTask]:
    """The tasks whose run is not complete yet (resume skips the others).  A complete
    run made from a different spec (another duration, topology, ...) is an error: its
    results would be mixed into this sweep's report."""
    todo: list[SweepTask] = []
    expected: dict[str, dict[str, Any]] = {}
    for t in plan.tasks:
        if not is_complete(t.path):
            todo.append(t)
            continue
        if t.point not in expected:
            doc = {**resolve(t.spec), "backend": t.backend}
            expected[t.point] = _run_content(yaml.safe_load(yaml.safe_dump(doc,
                                                                           sort_keys=False)))
        if _stored_spec(t) != expected[t.point]:
            raise ConfigError(f"{t.path} is a complete run of a different spec than this "
                              f"sweep's point {t.point}; sweep into another --out, or move "
                              f"that run away")
    return todo


def write_plan(plan: SweepPlan) -> Path:
    """``sweep.json`` and each point's ``spec.yaml``; the report reads them back."""
    plan.root.mkdir(parents=True, exist_ok=True)
    spec = plan.points[0].spec
    info: dict[str, Any] = {
        "name": plan.name, "source": plan.source, "backend": plan.backend,
        "grid": [{"key": a.key, "values": list(a.values), "texts": list(a.texts)}
                 for a in plan.axes],
        "agents": list(spec.agents), "seeds": list(spec.seeds),
        "points": [{"name": p.name, "values": dict(p.values)} for p in plan.points],
        "runs": [{"point": t.point, "agent": t.agent, "seed": t.seed,
                  "dir": str(t.path.relative_to(plan.root))} for t in plan.tasks],
    }
    for p in plan.points:
        (plan.root / p.name).mkdir(exist_ok=True)
        (plan.root / p.name / "spec.yaml").write_text(yaml.safe_dump(dict(p.doc),
                                                                     sort_keys=False))
    path = plan.root / SWEEP_FILE
    path.write_text(json.dumps(info, indent=1))
    return path


def _quiet(label: str, duration_s: float) -> Any:
    return lambda t_s: None


#: set in a worker once it was told to stop (SIGTERM/Ctrl-C during a run): the tasks
#: already queued to it are then not started (see run_task)
_stopped: list[str] = []


def run_task(task: SweepTask) -> TaskResult:
    """Run one task (in a worker): build the seed's schedule and play the variant.
    Failures come back as a TaskResult; the run directory keeps what was written.

    A worker told to stop (the sweep was interrupted, or ``kill`` of the worker) tears
    its fabric down, marks its run partial with the reason, as ``p4cc run`` does, and
    starts no further run: a process pool has already handed it the next task, which
    would otherwise run to its end while the interrupted sweep waits for it."""
    if _stopped:
        return TaskResult(task.label, False, f"not started: the worker was {_stopped[0]}")
    t0, c0 = time.monotonic(), time.process_time()
    error = ""
    try:
        with sigterm_as_interrupt():
            spec = task.spec
            schedule = build_schedule(spec, task.seed, spec.topo())
            run_variant(spec, get_backend(task.backend), task.path.parent, task.agent,
                        task.seed, schedule, resolve(spec), _quiet)
    except KeyboardInterrupt as exc:
        _stopped.append(f"interrupted ({str(exc) or 'SIGINT'})")
        raise
    except Exception as exc:  # reported by the sweep, recorded in the run's status.json
        error = f"{type(exc).__name__}: {exc}"
    return TaskResult(task.label, not error, error, time.monotonic() - t0,
                      time.process_time() - c0)
