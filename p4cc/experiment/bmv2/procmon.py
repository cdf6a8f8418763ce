"""Per-switch process samples for the fidelity verdict (p4cc.experiment.bmv2.fidelity).

A thread samples, every ``period_s`` of the run clock, each BMv2 process's CPU time
(proc(5) ``/proc/<pid>/stat`` utime + stime), the time its threads waited on a run
queue (``/proc/<pid>/task/*/schedstat`` field 2, ns; Documentation/scheduler/
sched-stats.rst) and the packets the kernel delivered to its interfaces
(``/sys/class/net/<if>/statistics/rx_packets``) and sent from them (``tx_packets``).
All cumulative; the verdict takes
differences.  Reading a few small files per switch costs ~0.1 ms.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of all threads of ``pid`` (proc(5) stat fields 14, 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid``, of its children that ended (proc(5) stat fields
    16, 17: the ones it waited for) and of its live descendants: a host process's
    ``tc -batch`` child (p4cc.hostcc.tcbatch) does the pacer's netlink work, and its
    CPU would otherwise count nowhere until it ends.  A descendant that ends between
    two reads may be missed once (its parent has not waited for it yet)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    total = sum(int(f) for f in fields[11:15]) / CLK_TCK
    for child in _children(pid):
        try:
            total += tree_cpu_seconds(child)
        except (OSError, IndexError, ValueError):
            continue  # it ended meanwhile
    return total


def _children(pid: int) -> list[int]:
    """The live children of ``pid`` (``/proc/<pid>/task/<tid>/children``, Linux >= 4.2
    with CONFIG_PROC_CHILDREN; none where the kernel keeps no such file)."""
    out: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return out


def _schedstat_seconds(pid: int, field: int) -> float | None:
    """Sum of one schedstat field (ns) over the live threads of ``pid``, in seconds;
    None when no thread has a readable schedstat (a kernel without schedstats)."""
    total, found = 0, False
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[field])
            found = True
        except (OSError, IndexError, ValueError):
            continue  # a thread that just exited
    return total / 1e9 if found else None


def wait_seconds(pid: int) -> float:
    """Run-queue wait of all threads of ``pid`` so far (schedstat run_delay)."""
    return _schedstat_seconds(pid, 1) or 0.0


def run_seconds(pid: int) -> float:
    """CPU time of all live threads of ``pid`` so far, to the nanosecond (schedstat
    field 1, time on a CPU); ``cpu_seconds``' 10-ms clock ticks where the kernel keeps
    no schedstat."""
    ran = _schedstat_seconds(pid, 0)
    return cpu_seconds(pid) if ran is None else ran


def if_packets(ifnames: Sequence[str], counter: str = "rx_packets") -> int:
    """Sum of one kernel interface counter (``rx_packets``, ``tx_packets``) over
    ``ifnames``; an interface that is gone counts 0."""
    n = 0
    for name in ifnames:
        try:
            n += int(Path(f"/sys/class/net/{name}/statistics/{counter}").read_text())
        except (OSError, ValueError):
            continue
    return n


def rx_packets(ifnames: Sequence[str]) -> int:
    return if_packets(ifnames, "rx_packets")


def sample(switch: str, pid: int, ifnames: Sequence[str], t_s: float) -> dict[str, Any]:
    """``rx_pkts``: packets the kernel delivered to the switch's interfaces; ``tx_pkts``:
    packets the switch sent on them (data and control alike: the backlog check's
    "processed" side, which the P4 counters no longer give for control packets)."""
    return {"t_s": round(t_s, 4), "switch": switch, "pid": pid, "cpu_s": cpu_seconds(pid),
            "wait_s": wait_seconds(pid), "rx_pkts": rx_packets(ifnames),
            "tx_pkts": if_packets(ifnames, "tx_packets")}


class SwitchSampler:
    """Samples every switch until ``stop``; rows go to ``sink`` and stay in ``rows``."""

    def __init__(self, switches: Mapping[str, tuple[int, Sequence[str]]],
                 now: Callable[[], float], sink: Callable[[list[dict[str, Any]]], None],
                 period_s: float = 0.25) -> None:
        self.switches, self.now, self.sink, self.period_s = dict(switches), now, sink, period_s
        self.rows: list[dict[str, Any]] = []
        self.errors = 0
        #: called on every sample (the host processes' CPU: HostProcesses.sample_cpu)
        self.extra: Callable[[], None] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="p4cc-procmon", daemon=True)

    def start(self) -> SwitchSampler:
        self._thread.start()
        return self

    def baseline(self) -> list[dict[str, Any]]:
        """One sample before the traffic's t0 (run clock < 0), without ``extra``: the
        counters' zero for the switch drops (p4cc.analysis.losses).  The first periodic
        sample comes tens of ms after t0, when the first packets are inside the switches."""
        return self._sample()

    def sample_once(self) -> list[dict[str, Any]]:
        out = self._sample()
        if self.extra is not None:
            try:
                self.extra()
            except OSError:
                self.errors += 1
        return out

    def _sample(self) -> list[dict[str, Any]]:
        t = self.now()
        out = []
        for sw, (pid, ifs) in self.switches.items():
            try:
                out.append(sample(sw, pid, ifs, t))
            except OSError:
                self.errors += 1  # the switch died: the run's own check reports that
        self.rows += out
        self.sink(out)
        return out

    def _run(self) -> None:
        nxt = time.monotonic()
        while not self._stop.is_set():
            self.sample_once()
            nxt += self.period_s
            self._stop.wait(max(0.0, nxt - time.monotonic()))

    def stop(self) -> None:
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join(timeout=5.0)
            self.sample_once()  # the last window ends at the stop
