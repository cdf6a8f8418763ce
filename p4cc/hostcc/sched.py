"""How soon a host process runs when it wakes: the scheduler attributes the BMv2 backend
gives its host processes (p4cc.experiment.bmv2.limits.HOST_SLICE_S, HOST_RT_PRIO).

A host process sleeps until its next flow is due or a reply comes; on two cores shared
with four BMv2 switches at higher priority (limits.SWITCH_NICE) it then waited for a CPU:
on session 13's default runs 6.4 % of the flows started more than one base RTT (4 ms)
late, and the verdict's ``flow_start`` check failed every run (docs/emulation.md).

Two remedies, both per thread and inherited by the threads a process starts later:

* a short **EEVDF slice** (Linux >= 6.12 reads ``sched_attr.sched_runtime`` of a
  SCHED_OTHER task as its requested slice, 0.1-100 ms; a shorter slice gives an earlier
  virtual deadline, so the task preempts on wake-up: kernel commit 857b158dc5e8,
  "sched/eevdf: Use sched_attr::sched_runtime to set request/slice suggestion").  Older
  kernels accept the field and ignore it.
* **SCHED_RR** at a low real-time priority: the task runs as soon as it wakes, ahead of
  every SCHED_OTHER task.  The kernel's real-time throttling (kernel.sched_rt_runtime_us,
  95 % by default) keeps a runaway process from freezing the machine.

``sched_setattr`` has no wrapper in Python's os module: called through libc's
``syscall`` (the struct layout is include/uapi/linux/sched/types.h, SCHED_ATTR_SIZE_VER1).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import threading
from pathlib import Path

#: struct sched_attr, version 1 (56 bytes): size, policy, flags, nice, priority,
#: runtime, deadline, period (ns), util_min, util_max
_ATTR = struct.Struct("IIQiIQQQII")
#: the syscall numbers of sched_setattr / sched_getattr (arch/*/syscall tables)
_NR = {"x86_64": (314, 315), "aarch64": (274, 275)}
SCHED_OTHER = 0
#: the kernel's clamp of a requested slice (kernel/sched/syscalls.c: 0.1-100 ms)
MIN_SLICE_S, MAX_SLICE_S = 1e-4, 0.1


class SchedError(OSError):
    """The kernel refused a scheduler attribute (or this machine has no sched_setattr)."""


def _syscall(which: int, *args: object) -> None:
    nrs = _NR.get(platform.machine())
    if nrs is None:
        raise SchedError(f"sched_setattr: no syscall number known for {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(nrs[which], *args) != 0:
        err = ctypes.get_errno()
        raise SchedError(err, f"sched_{'sg'[which]}etattr: {os.strerror(err)}")


def get_slice_ns(tid: int = 0) -> tuple[int, int]:
    """(policy, sched_runtime in ns) of thread ``tid`` (0: the calling thread)."""
    buf = ctypes.create_string_buffer(_ATTR.size)
    _syscall(1, ctypes.c_int(tid), buf, ctypes.c_uint(_ATTR.size), ctypes.c_uint(0))
    fields = _ATTR.unpack(buf.raw)
    return int(fields[1]), int(fields[5])


def request_slice(slice_s: float, tid: int = 0) -> None:
    """Ask for an EEVDF slice of ``slice_s`` for thread ``tid`` (0: the calling thread),
    keeping it SCHED_OTHER at its nice value.  Raises SchedError when refused."""
    if not MIN_SLICE_S <= slice_s <= MAX_SLICE_S:
        raise ValueError(f"slice {slice_s:g} s outside the kernel's "
                         f"{MIN_SLICE_S:g}-{MAX_SLICE_S:g} s")
    _set_other(os.getpriority(os.PRIO_PROCESS, tid), int(slice_s * 1e9), tid)


def set_round_robin(priority: int, tid: int = 0) -> None:
    """Make thread ``tid`` SCHED_RR at real-time ``priority`` (1-99).  Raises SchedError."""
    try:
        os.sched_setscheduler(tid, os.SCHED_RR, os.sched_param(priority))
    except OSError as exc:
        raise SchedError(exc.errno, f"SCHED_RR priority {priority}: {exc.strerror}") from exc


def slice_of(pid: int | str = "thread-self") -> float | None:
    """The slice the kernel gives ``pid`` (``se.slice`` of /proc/PID/sched), in s; None
    where the kernel does not show it."""
    try:
        for line in Path(f"/proc/{pid}/sched").read_text().splitlines():
            if line.startswith("se.slice"):
                return float(line.split(":")[1]) / 1e9
    except (OSError, ValueError, IndexError):
        pass
    return None


def apply_host_sched(slice_s: float, rt_prio: int) -> str:
    """What a host process does first: SCHED_RR at ``rt_prio`` if > 0, else the EEVDF
    slice ``slice_s`` if > 0, for the calling thread (the threads it starts inherit it).
    Returns a line for the process log; raises SchedError when the kernel refuses."""
    if rt_prio > 0:
        set_round_robin(rt_prio)
        return f"scheduling: SCHED_RR priority {rt_prio}"
    if slice_s > 0:
        request_slice(slice_s)
        got = slice_of("thread-self")
        return (f"scheduling: slice {slice_s * 1e3:g} ms requested, kernel "
                + (f"slice {got * 1e3:g} ms" if got is not None else "shows none"))
    return "scheduling: kernel defaults"


def _set_other(nice: int, runtime_ns: int, tid: int = 0) -> None:
    attr = _ATTR.pack(_ATTR.size, SCHED_OTHER, 0, nice, 0, runtime_ns, 0, 0, 0, 0)
    _syscall(0, ctypes.c_int(tid), ctypes.create_string_buffer(attr, _ATTR.size),
             ctypes.c_uint(0))


class StartBoost:
    """SCHED_RR for the calling thread only while a scheduled flow start is near
    (SenderConfig.start_rt_prio, start_rt_lead_s): from the lead before the start until
    the pass that starts it.

    A sender whose whole process runs SCHED_RR starts every flow on time but takes the
    CPU from the switches whenever it runs (session 14: 12-17 % of the switches' CPU
    windows starved, docs/emulation.md); at SCHED_OTHER it wakes late for a start when
    the switches are busy.  Boosted near starts only, the real-time share is the passes
    in those windows.  ``set`` changes the
    policy only when the wanted state changes (a syscall, ~2 us); ``set(False)`` puts
    back the policy, nice and slice the thread had before.  A refusal by the kernel
    switches the boost off for good and is kept in ``error``."""

    def __init__(self, priority: int) -> None:
        if not 0 <= priority <= 99:
            raise ValueError(f"real-time priority {priority} outside 1-99 (0: off)")
        self.priority = priority
        self.boosted = False
        self.boosts = 0  # how often the threads went real-time
        self.error: str | None = None
        self._saved: dict[int, tuple[int, int]] = {}  # tid -> (nice, slice ns) to restore
        self._others: list[int] = []  # threads boosted with the caller (``also``)
        self._tids: list[int] = []  # the threads boosted now

    def also(self, tid: int | None) -> None:
        """Boost thread ``tid`` together with the caller: a thread the caller may wait for
        (the HTB pacer's, which makes a flow's class before its start and holds the GIL
        while it does) must not be left behind at its own priority."""
        if tid is not None and tid not in self._others:
            self._others.append(tid)

    def set(self, boost: bool) -> None:
        if self.priority == 0 or self.error is not None or boost == self.boosted:
            return
        try:
            if boost:  # the calling thread and ``also``'s; restored by id from any thread
                self._tids = [threading.get_native_id(), *self._others]
                for tid in self._tids:
                    if tid not in self._saved:
                        self._saved[tid] = (os.getpriority(os.PRIO_PROCESS, tid),
                                            get_slice_ns(tid)[1])
                    set_round_robin(self.priority, tid)
                self.boosts += 1
            else:
                for tid in self._tids:
                    try:
                        _set_other(*self._saved[tid], tid)
                    except SchedError as exc:
                        if exc.errno != errno.ESRCH:  # (a thread that ended: nothing to do)
                            raise
        except (SchedError, OSError) as exc:
            self.error = str(exc)
            return
        self.boosted = boost
