"""Helpers of the BMv2 backend around its FabricSession: switch priority, signals."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from p4cc.topo.spec import TopoSpec


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Cleanup must not be cut short by a second Ctrl-C/SIGTERM (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def prioritise_switches(fabric: Any, topo: TopoSpec, nice: int) -> list[str]:
    """Give every thread of every BMv2 process of ``fabric`` the nice value ``nice``
    (p4cc.experiment.bmv2.limits.SWITCH_NICE explains why); return log lines."""
    lines, done = [], 0
    for sw in topo.switches:
        pid = fabric.bmv2(sw.name).pid
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                os.setpriority(os.PRIO_PROCESS, int(task.name), nice)
                done += 1
            except OSError as exc:
                lines.append(f"bmv2: cannot renice {sw.name} thread {task.name}: {exc}")
    lines.append(f"bmv2: {done} switch threads at nice {nice}")
    groups = [sw.name for sw in topo.switches
              if set_autogroup_nice(fabric.bmv2(sw.name).pid, nice)]
    if groups:
        lines.append(f"bmv2: autogroups of {', '.join(groups)} at nice {nice}")
    return lines


def autogroup_nice(pid: int) -> int | None:
    """The nice value of ``pid``'s autogroup (``/autogroup-N nice K``), None without one."""
    try:
        return int(Path(f"/proc/{pid}/autogroup").read_text().split()[-1])
    except (OSError, ValueError, IndexError):
        return None


@contextmanager
def runner_priority(nice: int, log: Any = None) -> Iterator[None]:
    """Run the block with this process's autogroup at ``nice``, then restore it.

    The runner's control loops (one poller thread per switch) live in the process that
    started the run, i.e. in the user's session and its autogroup at nice 0, while the
    switches (SWITCH_NICE) and hosts (HOST_NICE) have groups of their own above it: on
    two busy cores the polls waited for a CPU and started late or read counters and
    registers 60-300 ms apart (docs/emulation.md).  The loops use little CPU, so
    raising their group to the switches' level costs the switches little."""
    pid = os.getpid()
    old = autogroup_nice(pid)
    changed = old is not None and old != nice and set_autogroup_nice(pid, nice)
    if log is not None:
        log(f"bmv2: runner (control loops) autogroup at nice {nice}" if changed else
            f"bmv2: runner autogroup unchanged ({old})")
    try:
        yield
    finally:
        if changed and old is not None:
            set_autogroup_nice(pid, old)


def set_autogroup_nice(pid: int, nice: int) -> bool:
    """Set the nice value of ``pid``'s scheduler autogroup (sched(7), "The autogroup
    feature"; /proc/<pid>/autogroup).  With autogroup on (kernel.sched_autogroup_enabled,
    the default of most distributions), CPU is first shared between autogroups -- one
    per session -- and thread nice values only arbitrate inside a group.  Each BMv2
    switch is started in its own session (p4cc.topo.bmv2), so renicing its threads alone
    left it one equal share among every other session on the machine (measured: a switch
    at nice -10 waited 3.7 s/s for a CPU and served 337 of 1250 pps while other sessions
    compiled).  False if there is no autogroup (feature off) or it cannot be set."""
    path = Path(f"/proc/{pid}/autogroup")
    try:
        if not path.is_file():
            return False
        path.write_text(str(nice))
        return True
    except OSError:
        return False
