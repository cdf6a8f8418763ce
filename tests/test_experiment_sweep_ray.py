"""``p4cc sweep`` on a local multi-worker Ray instance: the same run directories as the
process pool for the same seeds.  Needs the optional ``sweep`` extra (``make venv``
installs it); Ray starts once for the module (a few seconds)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sweep_helpers import GRID, SEEDS, tree, write_spec

from p4cc.experiment.sweep import plan_sweep, write_plan
from p4cc.experiment.sweep_exec import execute

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def ray_instance() -> Iterator[Any]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def _sweep(spec: Path, out: Path, executor: str) -> Path:
    plan = plan_sweep(spec, GRID, SEEDS, out)
    write_plan(plan)
    results = execute(plan.tasks, executor, 2, show=False)
    assert sorted(r.label for r in results if r.ok) == sorted(t.label for t in plan.tasks)
    return plan.root


def test_ray_and_pool_write_identical_run_directories(ray_instance: Any,
                                                      tmp_path: Path) -> None:
    assert ray_instance.cluster_resources()["CPU"] == 2  # two workers side by side
    spec = write_spec(tmp_path)  # one spec file: its path is stored with every run
    on_ray = tree(_sweep(spec, tmp_path / "ray", "ray"))
    in_pool = tree(_sweep(spec, tmp_path / "pool", "pool"))
    assert len(on_ray) == 4
    assert on_ray == in_pool
    assert ray_instance.is_initialized()  # the sweep did not stop an instance it joined


def test_a_failing_run_is_reported_not_raised(ray_instance: Any, tmp_path: Path) -> None:
    plan = plan_sweep(write_spec(tmp_path), GRID, SEEDS, tmp_path / "sweep")
    task = plan.tasks[0]
    task.path.parent.mkdir(parents=True)
    task.path.write_text("a file where the run directory should be")
    results = execute(plan.tasks[:2], "ray", 2, show=False)
    by_label = {r.label: r for r in results}
    assert not by_label[task.label].ok and by_label[task.label].error
    assert by_label[plan.tasks[1].label].ok
