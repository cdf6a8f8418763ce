"""Where a sweep's tasks run: Ray tasks or a local process pool, with a progress view.

``EXECUTORS`` maps a name to a generator ``(tasks, workers, address) -> results``; each
yields a :class:`~p4cc.experiment.sweep.TaskResult` per finished task and ``None`` about
twice a second (to refresh the progress view).

* ``ray``: ``ray.init()`` starts a local instance with ``workers`` CPUs (or joins the
  cluster at ``address``); each run is a task asking for one CPU.  A bmv2 run also asks
  for the custom resource ``bmv2: 1``, which a local instance declares when
  ``p4cc doctor``'s BMv2 checks pass and cluster nodes declare with
  ``ray start --resources='{"bmv2": 1}'``: one bmv2 run at a time per node.
* ``pool``: ``concurrent.futures.ProcessPoolExecutor`` with spawn-started workers
  (``--local``); a bmv2 sweep uses one worker.
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, TextIO

from p4cc.errors import ConfigError, P4ccError
from p4cc.experiment.runner import sigterm_as_interrupt
from p4cc.experiment.sweep import SweepTask, TaskResult, run_task

Results = Generator[TaskResult | None, None, None]
Executor = Callable[[Sequence[Any], int, str | None], Results]
TICK_S = 0.5  # progress refresh period
#: the custom Ray resource a bmv2 run needs (one per node that has BMv2)
BMV2_RESOURCE = "bmv2"
RAY_MISSING = ("Ray is not installed: install the optional extra (pip install 'p4cc[sweep]' "
               "or pip install 'ray>=2.9'), or add --local to run the grid in a process "
               "pool on this machine")


def have_ray() -> bool:
    return importlib.util.find_spec("ray") is not None


def default_workers() -> int:
    return max(1, os.cpu_count() or 1)


def pool_workers(backend: str, workers: int | None) -> int:
    """bmv2 runs need the whole machine: one at a time; sim runs one per CPU."""
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers {workers} must be >= 1")
    if backend == "bmv2":
        return 1
    return max(1, workers or default_workers())


def run_one(task: Any) -> TaskResult:
    """In a worker: a sweep's run (:func:`~p4cc.experiment.sweep.run_task`), or any task
    that runs itself (``task.run()``, e.g. a seed of chameleon_eval: chameleon_tasks)."""
    return run_task(task) if isinstance(task, SweepTask) else task.run()


def _failed(task: Any, exc: BaseException) -> TaskResult:
    return TaskResult(task.label, False, f"{type(exc).__name__}: {exc}")


def _pool_worker_init() -> None:
    """A pool worker ignores SIGINT: Ctrl-C at a terminal reaches the whole process
    group, and a worker already cleaning up after its own KeyboardInterrupt would then be
    interrupted again by the SIGTERM the sweep sends it (its run's reason lost).  The
    sweep's process alone handles Ctrl-C and stops the workers with one SIGTERM each."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_pool(tasks: Sequence[Any], workers: int, address: str | None = None) -> Results:
    ctx = multiprocessing.get_context("spawn")
    n = pool_workers(tasks[0].backend if tasks else "sim", workers)
    with ProcessPoolExecutor(max_workers=n, mp_context=ctx,
                             initializer=_pool_worker_init) as ex:
        futs: dict[Future[TaskResult], Any] = {ex.submit(run_one, t): t for t in tasks}
        todo = set(futs)
        try:
            while todo:
                done, todo = wait(todo, timeout=TICK_S, return_when=FIRST_COMPLETED)
                for f in done:
                    exc = f.exception()
                    yield f.result() if exc is None else _failed(futs[f], exc)
                yield None
        except BaseException:
            # interrupted (Ctrl-C, or SIGTERM via sigterm_as_interrupt): stop the queued
            # runs and SIGTERM the workers, whose runs then tear down their fabric and
            # record "interrupted" (run_task; a task already queued to a worker is not
            # started); leaving them would leave a BMv2 fabric and its hosts running.
            # The `with` then waits for the workers to exit.
            for f in todo:
                f.cancel()
            for proc in list(getattr(ex, "_processes", {}).values()):
                if proc.is_alive():
                    proc.terminate()
            raise
        finally:
            for f in todo:
                f.cancel()


def _ray_init(ray: Any, workers: int, address: str | None, bmv2: bool) -> bool:
    """Start or join Ray unless already initialised; True if this call started it."""
    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        from p4cc.experiment.doctor import bmv2_missing

        resources = {BMV2_RESOURCE: 1} if bmv2 and not bmv2_missing() else {}
        ray.init(num_cpus=workers, resources=resources, include_dashboard=False,
                 log_to_driver=False)
    return True


def run_ray(tasks: Sequence[Any], workers: int, address: str | None = None) -> Results:
    if not have_ray():
        raise ConfigError(RAY_MISSING)
    import ray

    bmv2 = any(t.backend == "bmv2" for t in tasks)
    started = _ray_init(ray, max(1, workers), address, bmv2)
    try:
        if bmv2 and ray.cluster_resources().get(BMV2_RESOURCE, 0) < 1:
            raise P4ccError(f"no Ray node offers the {BMV2_RESOURCE!r} resource for bmv2 runs; "
                            f"start nodes that pass `p4cc doctor` with ray start "
                            f"--resources='{{\"{BMV2_RESOURCE}\": 1}}'")
        opts: dict[str, Any] = {"num_cpus": 1, "max_retries": 0}
        if bmv2:
            opts["resources"] = {BMV2_RESOURCE: 1}
        remote = ray.remote(run_one).options(**opts)
        refs = {remote.remote(t): t for t in tasks}
        todo = list(refs)
        try:
            while todo:
                done, todo = ray.wait(todo, num_returns=1, timeout=TICK_S)
                for ref in done:
                    try:
                        yield ray.get(ref)
                    except Exception as exc:  # a worker that died (ray.exceptions.*)
                        yield _failed(refs[ref], exc)
                yield None
        finally:
            for ref in todo:
                ray.cancel(ref, force=True)
    finally:
        if started:
            ray.shutdown()


EXECUTORS: dict[str, Executor] = {"ray": run_ray, "pool": run_pool}


class ProgressView:
    """runs done / failed / running, elapsed and ETA: a rich bar when rich is installed
    and the stream is a terminal, else a plain line (rewritten in place on a terminal,
    every 5 s otherwise)."""

    def __init__(self, total: int, slots: int, stream: TextIO | None = None) -> None:
        self.total, self.slots = total, slots
        self.done = self.failed = 0
        self.out = stream or sys.stderr
        self.t0 = time.monotonic()
        self._last = 0.0
        self._tty = bool(getattr(self.out, "isatty", lambda: False)())
        self._rich: Any = None
        if self._tty and importlib.util.find_spec("rich") is not None:
            from rich.progress import Progress

            self._rich = Progress(transient=False)
            self._rich.start()
            self._task = self._rich.add_task("sweep", total=total)

    def line(self) -> str:
        elapsed = time.monotonic() - self.t0
        finished = self.done + self.failed
        running = min(self.slots, self.total - finished)
        eta = (f"{elapsed / finished * (self.total - finished):.0f} s" if finished
               else "?")
        return (f"sweep: {self.done}/{self.total} done, {self.failed} failed, {running} "
                f"running, {elapsed:.0f} s elapsed, ETA {eta}")

    def update(self, result: TaskResult | None) -> None:
        if result is not None:
            if result.ok:
                self.done += 1
            else:
                self.failed += 1
                self.out.write(f"\nsweep: {result.label} FAILED: {result.error}\n")
        self._show(final=False)

    def _show(self, final: bool) -> None:
        if self._rich is not None:
            self._rich.update(self._task, completed=self.done + self.failed,
                              description=self.line())
            return
        now = time.monotonic()
        if not final and now - self._last < (TICK_S if self._tty else 5.0):
            return
        self._last = now
        self.out.write(("\r" if self._tty else "") + self.line() + ("\n" if final or not
                                                                      self._tty else ""))
        self.out.flush()

    def close(self) -> None:
        self._show(final=True)
        if self._rich is not None:
            self._rich.stop()


def choose_executor(local: bool, address: str | None) -> str:
    """``pool`` with --local; else ``ray`` (an error saying how to get it if missing)."""
    if local:
        if address:
            raise ConfigError("--local and --address exclude each other")
        return "pool"
    if not have_ray():
        raise ConfigError(RAY_MISSING)
    return "ray"


def execute(tasks: Sequence[Any], executor: str = "pool", workers: int | None = None,
            address: str | None = None, stream: TextIO | None = None,
            show: bool = True) -> list[TaskResult]:
    """Run ``tasks`` on the named executor with a progress view; the results in the
    order the runs finished."""
    if executor not in EXECUTORS:
        raise ConfigError(f"unknown executor {executor!r}; choose one of {sorted(EXECUTORS)}")
    if not tasks:
        return []
    n = pool_workers(tasks[0].backend, workers)
    view = ProgressView(len(tasks), n, stream) if show else None
    results: list[TaskResult] = []
    with sigterm_as_interrupt():
        _execute(tasks, executor, n, address, view, results)
    return results


def _execute(tasks: Sequence[Any], executor: str, n: int, address: str | None,
             view: ProgressView | None, results: list[TaskResult]) -> None:
    runs = EXECUTORS[executor](tasks, n, address)
    try:
        for r in runs:
            if r is not None:
                results.append(r)
            if view is not None:
                view.update(r)
    finally:
        # now, not whenever the generator is collected: on an interruption its cleanup
        # (stop the workers, wait for their runs to tear down) must run before we exit
        runs.close()
        if view is not None:
            view.close()
