"""host_cpu.csv counts host processes that exit before the run stops (budget.json used
to undercount the hosts of runs whose flows finish early): the switch sampler makes the
hosts remember each process's last CPU sample."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass

from p4cc.experiment.bmv2.launch import HostProcesses
from p4cc.experiment.bmv2.procmon import SwitchSampler

BURN = ("import sys, time\nt = time.process_time()\n"
        "while time.process_time() - t < 0.3: pass\nsys.stdin.read()")


@dataclass
class _Proc:
    pid: int
    host: str
    role: str = "send"


def _hosts(procs: list[_Proc]) -> HostProcesses:
    h = HostProcesses.__new__(HostProcesses)  # only the CPU bookkeeping is exercised
    h.host_procs, h.sender_procs, h.receivers = list(procs), {}, set()  # type: ignore[assignment]
    h.cpu_at_t0 = {p.pid: 0.0 for p in procs}
    h.cpu_last = {}
    return h


def test_an_exited_host_process_keeps_its_last_sampled_cpu() -> None:
    burn = subprocess.Popen([sys.executable, "-c", BURN], stdin=subprocess.PIPE)
    quick = subprocess.Popen([sys.executable, "-c", "pass"])
    quick.wait()  # gone before any sample: nothing to report
    try:
        hosts = _hosts([_Proc(burn.pid, "h1"), _Proc(quick.pid, "h2")])
        sampler = SwitchSampler({}, lambda: 0.0, lambda rows: None)
        sampler.extra = hosts.sample_cpu
        # poll until the burner has used its CPU, sampling it as the run's sampler does
        for _ in range(2000):
            sampler.sample_once()
            if hosts.cpu_last.get(burn.pid, (0.0, 0.0))[0] >= 0.25:
                break
            time.sleep(0.01)  # poll interval of the condition
        live = {r["pid"]: r for r in hosts.cpu_rows()}
        assert live[burn.pid]["exited"] is False and live[burn.pid]["cpu_s"] >= 0.25
        assert quick.pid not in live
    finally:
        assert burn.stdin is not None
        burn.stdin.close()
        burn.wait()
    rows = {r["pid"]: r for r in hosts.cpu_rows()}  # the burner is gone (reaped) now
    assert rows[burn.pid]["exited"] is True and rows[burn.pid]["cpu_run_s"] >= 0.25
