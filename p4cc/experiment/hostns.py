"""Processes started inside a fabric's hosts, found by network namespace, ended by PID.

Whatever a student starts in a Mininet host (``h3 iperf3 -s -D``) daemonises and so is
no child of anything p4cc holds; Mininet's own teardown kills the host shells, not what
they started.  Every process inside a host shares the host shell's network namespace,
so ``/proc/<pid>/ns/net`` (a link such as ``net:[4026532561]``) names the host a process
belongs to.  ``sweep`` ends exactly those processes: SIGTERM, wait by polling ``/proc``,
then SIGKILL; it never touches a process in any other namespace — not the root
namespace (guarded explicitly, in case a host were not namespaced), not other fabrics.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
#: how often /proc is polled while waiting for TERMed processes to exit
POLL_S = 0.05
#: a process gets this long after SIGTERM before SIGKILL
GRACE_S = 3.0


def netns(pid: int | str, proc: Path = PROC) -> str | None:
    """The network namespace of ``pid`` (``net:[4026532561]``), None if it is gone or
    not readable."""
    try:
        return os.readlink(proc / str(pid) / "ns" / "net")
    except OSError:
        return None


def alive(pid: int, proc: Path = PROC) -> bool:
    """True while ``pid`` exists and is not a zombie (a zombie has exited already)."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return False
    # /proc/<pid>/stat: "pid (comm) state ..."; comm may contain spaces and parentheses
    state = stat.rpartition(")")[2].split()[:1]
    return state != ["Z"] and state != ["X"]


def host_namespaces(shell_pids: Mapping[str, int], proc: Path = PROC,
                    own_pid: int | None = None) -> dict[str, str]:
    """namespace -> host for the hosts' shells; a host whose namespace is p4cc's own (not
    namespaced) or unreadable is left out, so a sweep can never reach the root
    namespace."""
    own = netns(own_pid if own_pid is not None else os.getpid(), proc)
    init = netns(1, proc)
    out: dict[str, str] = {}
    for host, pid in shell_pids.items():
        ns = netns(pid, proc)
        if ns is not None and ns not in (own, init):
            out[ns] = host
    return out


def processes_in(namespaces: Mapping[str, str], proc: Path = PROC,
                 exclude: Collection[int] = ()) -> dict[int, str]:
    """pid -> host of every live process in one of ``namespaces`` (from host_namespaces),
    except ``exclude`` (the host shells, this process)."""
    out: dict[int, str] = {}
    try:
        entries = list(proc.iterdir())
    except OSError:
        return out
    for entry in entries:
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if pid in exclude:
            continue
        ns = netns(pid, proc)
        if ns is not None and ns in namespaces and alive(pid, proc):
            out[pid] = namespaces[ns]
    return out


@dataclass(frozen=True)
class SweepResult:
    terminated: tuple[int, ...]  # exited after SIGTERM
    killed: tuple[int, ...]  # needed SIGKILL

    def describe(self) -> str:
        n = len(self.terminated) + len(self.killed)
        if n == 0:
            return "no processes left in the hosts"
        return (f"stopped {n} process(es) left in the hosts"
                + (f" ({len(self.killed)} needed SIGKILL)" if self.killed else ""))


Signaller = Callable[[int, int], None]


def sweep(shell_pids: Mapping[str, int], proc: Path = PROC, grace_s: float = GRACE_S,
          send: Signaller = os.kill) -> SweepResult:
    """End every process in the hosts' namespaces except the shells themselves."""
    namespaces = host_namespaces(shell_pids, proc)
    exclude = {*shell_pids.values(), os.getpid()}
    found = processes_in(namespaces, proc, exclude)
    return stop_pids(found, namespaces, proc, grace_s, send)


def stop_pids(found: Mapping[int, str], namespaces: Mapping[str, str], proc: Path = PROC,
              grace_s: float = GRACE_S, send: Signaller = os.kill) -> SweepResult:
    """SIGTERM ``found``, poll until they are gone or ``grace_s`` passed, SIGKILL the
    rest.  Before each signal the PID is checked to still be in one of ``namespaces``
    (a PID reused meanwhile by an unrelated process is left alone)."""

    def still_ours(pid: int) -> bool:
        return netns(pid, proc) in namespaces and alive(pid, proc)

    def signal_(pid: int, sig: int) -> None:
        if still_ours(pid):
            try:
                send(pid, sig)
            except ProcessLookupError:
                pass

    for pid in found:
        signal_(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    left = [p for p in found if still_ours(p)]
    while left and time.monotonic() < deadline:
        time.sleep(POLL_S)  # poll interval of the "exited" condition
        left = [p for p in left if still_ours(p)]
    for pid in left:
        signal_(pid, signal.SIGKILL)
    terminated = tuple(p for p in found if p not in left)
    return SweepResult(terminated, tuple(left))
