"""``p4cc run``: validate, build schedules, run every agent variant, store everything.

Order: parse + validate the spec, check the backend supports it, build every seed's
schedule (all before any fabric starts), then for each agent variant and seed: create the
run directory, play, and mark the run complete.  SIGINT/SIGTERM or an exception mark the
current run ``complete: false`` with the reason and keep what it wrote.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from p4cc.experiment.agents import check_agents
from p4cc.experiment.backend import Backend, Progress, get_backend
from p4cc.experiment.schedule import build_schedule
from p4cc.experiment.spec import ExperimentSpec, resolve
from p4cc.experiment.store import RunWriter

log = logging.getLogger(__name__)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C so the same cleanup runs."""


#: signals whose Terminated may have been lost: a handler that runs while C code is
#: calling back into Python through ctypes (numba compiling the simulator's kernels on
#: their first use, via llvmlite) has its exception printed and dropped ("Exception
#: ignored on calling ctypes callback function"), and the run would go on
_PENDING: list[int] = []


def raise_if_terminated() -> None:
    """Raise the :class:`Terminated` of a SIGTERM whose first raise may have been lost
    (see ``_PENDING``); once.  Long loops call it at their natural checkpoints."""
    if _PENDING:
        signum = _PENDING[0]
        _PENDING.clear()
        raise Terminated(f"signal {signum}")


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """In the main thread: SIGTERM raises :class:`Terminated` (a KeyboardInterrupt), so
    ``kill PID`` runs the same cleanup as Ctrl-C (fabric down, run marked partial)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        # once: a second SIGTERM (a sweep's executor stopping its workers at exit) must
        # not interrupt the cleanup the first one started; SIGKILL still ends it
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _PENDING.append(signum)
        raise Terminated(f"signal {signum}")

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    except Terminated:
        _PENDING.clear()  # it arrived: nothing to raise again
        raise
    else:
        if _PENDING:  # lost, and no checkpoint came before the end: raise it now
            raise_if_terminated()
    finally:
        _PENDING.clear()
        signal.signal(signal.SIGTERM, old)


def variant_dir_name(agent: str, seed: int, n_seeds: int) -> str:
    name = agent.replace(":", "_").replace("/", "_")
    return name if n_seeds == 1 else f"{name}_seed{seed}"


def console_progress(label: str, duration_s: float, stream: Any = None) -> Progress:
    """A progress callback printing ``label t/T s`` at most twice a second."""
    out = stream or sys.stderr
    last = [0.0, -1.0]  # wall time of the last print, run time printed last

    def progress(t_s: float) -> None:
        now = time.monotonic()
        if (now - last[0] >= 0.5 or t_s >= duration_s) and t_s != last[1]:
            last[0], last[1] = now, t_s
            pct = 100.0 * min(1.0, t_s / duration_s) if duration_s else 100.0
            out.write(f"\r{label}: {t_s:8.3f}/{duration_s:g} s ({pct:5.1f} %)")
            if t_s >= duration_s:
                out.write("\n")
            out.flush()

    return progress


def preflight(be: Backend, spec: ExperimentSpec) -> None:
    """Everything checked before any run directory is written (``p4cc run`` and
    ``p4cc sweep``): what the backend can run, and every agent name (online settings,
    torch)."""
    be.check(spec)
    check_agents(spec.agents)


def run_spec(spec: ExperimentSpec, backend: str | Backend | None = None,
             out: str | Path | None = None, runs_root: str | Path = "runs",
             progress: Callable[[str, float], Progress] | None = None) -> list[Path]:
    """Run every agent variant (and seed) of ``spec``; return the run directories.

    ``out`` replaces ``runs_root/<name>``; ``backend`` (a name or an instance)
    overrides ``spec.backend``.  ``progress(label, duration)`` makes a callback (default:
    ``console_progress``).
    """
    be = get_backend(backend or spec.backend) if not isinstance(backend, Backend) else backend
    preflight(be, spec)
    topo = spec.topo()
    schedules = {seed: build_schedule(spec, seed, topo) for seed in spec.seeds}
    resolved = resolve(spec)
    base = Path(out) if out else Path(runs_root) / spec.name
    done: list[Path] = []
    with sigterm_as_interrupt():
        for agent in spec.agents:
            for seed in spec.seeds:
                done.append(run_variant(spec, be, base, agent, seed, schedules[seed],
                                        resolved, progress))
    return done


def run_variant(spec: ExperimentSpec, be: Backend, base: Path, agent: str, seed: int,
                schedule_events: tuple[Any, Any], resolved: dict[str, Any],
                progress: Callable[[str, float], Progress] | None = None) -> Path:
    """One agent variant and seed of ``spec`` into ``base/<variant>`` (``run_spec``'s
    loop body; ``p4cc sweep`` runs each variant as a separate task through it)."""
    variant = variant_dir_name(agent, seed, len(spec.seeds))
    path = base / variant
    schedule, events = schedule_events
    writer = RunWriter(path, {**resolved, "backend": be.name}, variant=variant,
                       agent=agent, seed=seed, backend=be.name, outputs=spec.outputs)
    # from here on status.json exists ("running"): an interruption anywhere below, also
    # while the schedule is still being written, must record its reason (issue #12)
    try:
        writer.write_schedule(schedule, events)
        writer.log(f"start {spec.name}/{variant} backend={be.name} "
                   f"flows={len(schedule)} link_events={len(events)}")
        log.info("run %s/%s: %d flows, backend %s", spec.name, variant, len(schedule),
                 be.name)
        prog = (progress or console_progress)(f"{spec.name}/{variant}", spec.duration_s)
        be.run(spec, schedule, events, agent, writer, prog)
    except KeyboardInterrupt as exc:
        reason = f"interrupted ({str(exc) or 'SIGINT'})"
        writer.finish(False, reason)
        log.warning("%s: %s; partial results kept", path, reason)
        raise
    except BaseException as exc:
        writer.finish(False, f"{type(exc).__name__}: {exc}")
        log.error("%s failed: %s; partial results kept", path, exc)
        raise
    prog(spec.duration_s)  # the run reached its end
    writer.finish(True, "finished")
    return path
