"""Named workloads started from ``p4cc cli`` (``workload websearch 0.6``, ``incast
h1,h2,h3 h4``): p4cc's own host senders and receivers with the CLI's host CC.

A job is one flow schedule played by the BMv2 backend's host launcher
(p4cc.experiment.bmv2.launch.HostProcesses: ``p4cc host recv`` per destination, one
synchronised ``p4cc host send`` per source, every process kept by PID), under
``<cli state dir>/jobs/<id>-<name>/hosts/<host>/`` (send/fct.csv, send/trace.csv with
the sender's rate and DCQCN α, recv/...).  A job is running while any of its senders
runs; ``reap`` stops the receivers of finished jobs; ``stop`` ends a job by PID.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from p4cc.errors import ConfigError
from p4cc.experiment.spec import ExperimentSpec, parse_spec
from p4cc.topo.spec import TopoSpec
from p4cc.traffic import workloads as wl
from p4cc.traffic.kinds import KINDS

#: default length of a ``workload`` job (s)
DEFAULT_WORKLOAD_S = 10.0
#: ``incast``'s default flow size: what one sender's link carries in this long
DEFAULT_INCAST_FLOW_S = 2.0
#: workload types ``workload`` accepts: the flow-size CDFs (one load parameter)
CDF_KINDS = tuple(k for k, v in KINDS.items() if v.name != "cdf"
                  and v.params_type.__name__ == "PoissonParams")
_SIZE_RE = re.compile(r"^(\d+(?:\.\d+)?)([kKmMgG]?)[bB]?$")
_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}


def parse_size(text: str) -> int:
    """``2500000``, ``500k``, ``2.5M`` -> bytes."""
    m = _SIZE_RE.match(text.strip())
    if not m:
        raise ConfigError(f"size {text!r}: give bytes, e.g. 2500000, 500k or 2.5M")
    return max(1, round(float(m.group(1)) * _UNITS[m.group(2).lower()]))


@dataclass(frozen=True)
class JobPlan:
    """What a job plays: its spec (host CC, duration) and flow schedule."""

    name: str
    spec: ExperimentSpec
    schedule: pd.DataFrame

    def describe(self) -> str:
        n = len(self.schedule)
        hosts = sorted(set(self.schedule["src"]) | set(self.schedule["dst"]))
        return (f"{self.name}: {n} flow(s) among {','.join(hosts)} over "
                f"{self.spec.duration_s:g} s, host CC {self.spec.host_cc}")


def _spec(topo_text: str, scale: str, cc: str, duration_s: float,
          workload: dict[str, Any], name: str) -> ExperimentSpec:
    return parse_spec({"name": name, "backend": "bmv2", "topology": topo_text, "scale": scale,
                       "duration_s": duration_s, "seeds": [1], "interval_s": 0.5,
                       "host_cc": cc, "workloads": [workload]}, source=f"cli {name}")


def plan_workload(args: Sequence[str], topo_text: str, scale: str, cc: str,
                  seed: int = 1) -> JobPlan:
    """``workload <cdf> <load> [seconds]``: Poisson flows of a built-in flow-size CDF at
    ``load`` (of each sender's link) among all hosts."""
    from p4cc.experiment.schedule import build_schedule

    if len(args) not in (2, 3):
        raise ConfigError(f"usage: workload <{'|'.join(CDF_KINDS)}> <load 0..1> [seconds]")
    kind = args[0].lower()
    if kind not in CDF_KINDS:
        raise ConfigError(f"unknown workload {args[0]!r}; choose one of {list(CDF_KINDS)}")
    try:
        load = float(args[1])
        duration = float(args[2]) if len(args) == 3 else DEFAULT_WORKLOAD_S
    except ValueError:
        raise ConfigError(f"load {args[1]!r} and seconds must be numbers") from None
    if not 0.5 <= duration <= 3600:
        raise ConfigError(f"seconds {duration:g} must be in [0.5, 3600]")
    spec = _spec(topo_text, scale, cc, duration, {"type": kind, "load": load}, kind)
    schedule, _events = build_schedule(spec, seed)
    if schedule.empty:
        raise ConfigError(f"{kind} at load {load:g} over {duration:g} s drew no flows; "
                          "raise the load or the time")
    return JobPlan(f"{kind}-{load:g}", spec, schedule)


def plan_incast(args: Sequence[str], topo: TopoSpec, topo_text: str, scale: str,
                cc: str) -> JobPlan:
    """``incast <src,src,...> <dst> [size]``: one flow from each sender to ``dst``, all
    starting together (size default: DEFAULT_INCAST_FLOW_S of a sender's link)."""
    if len(args) not in (2, 3):
        raise ConfigError("usage: incast <src1,src2,...> <dst> [flow size, e.g. 2M]")
    senders = [s for s in args[0].split(",") if s]
    dst = args[1]
    for h in [*senders, dst]:
        topo.host(h)  # ConfigError naming the hosts
    if not senders or dst in senders or len(set(senders)) != len(senders):
        raise ConfigError("give distinct senders, none of them the receiver")
    rate = topo.link_at(senders[0], 0).rate_bps
    size = parse_size(args[2]) if len(args) == 3 else round(rate * DEFAULT_INCAST_FLOW_S / 8)
    # every flow alone at line rate would take size*8/rate; together they share dst's link
    duration = max(1.0, 2 * len(senders) * size * 8 / topo.link_at(dst, 0).rate_bps)
    spec = _spec(topo_text, scale, cc, duration,
                 {"type": "incast", "load": 1.0, "senders": [len(senders), len(senders)],
                  "sizes": [size], "receiver": dst, "windows": [[0.0, 1e-3]]}, "incast")
    schedule = wl.frame({"start_s": [0.0] * len(senders), "src": senders,
                         "dst": [dst] * len(senders), "size_bytes": [size] * len(senders),
                         "cls": "incast", "tag": "incast"})
    return JobPlan(f"incast {','.join(senders)}->{dst}", spec, schedule)


@dataclass
class Job:
    id: int
    plan: JobPlan
    directory: Path
    hosts: Any  # p4cc.experiment.bmv2.launch.HostProcesses
    started: float = field(default_factory=time.monotonic)
    stopped: bool = False

    def running(self) -> bool:
        return not self.stopped and any(p.alive() for p in self.hosts.sender_procs.values())

    def describe(self) -> str:
        state = "running" if self.running() else "stopped" if self.stopped else "done"
        age = time.monotonic() - self.started
        return (f"[{self.id}] {state:<7} {age:6.1f} s  {self.plan.describe()}  "
                f"({self.directory})")


class Jobs:
    """The CLI's workload jobs: start, list, stop (by PID), stop all at exit."""

    def __init__(self, fabric: Any, topo: TopoSpec, base_dir: Path,
                 log: Callable[[str], None] = lambda s: None) -> None:
        self.fabric, self.topo, self.base_dir, self.log = fabric, topo, base_dir, log
        self.jobs: dict[int, Job] = {}
        self._ids = itertools.count(1)

    def start(self, plan: JobPlan) -> Job:
        from p4cc.experiment.bmv2.launch import HostProcesses

        busy = {h for j in self.jobs.values() if j.running()
                for h in j.hosts.sender_procs} & set(plan.schedule["src"])
        if busy:
            raise ConfigError(f"host(s) {sorted(busy)} already send for another job: "
                              "stop it first (`jobs`, `stop <id>`)")
        job_id = next(self._ids)
        d = self.base_dir / f"{job_id}-{plan.name.split()[0]}"
        hosts = HostProcesses(self.fabric, plan.spec, self.topo, plan.schedule,
                              d / "hosts", self.log)
        job = Job(job_id, plan, d, hosts)
        self.jobs[job_id] = job
        try:
            hosts.start()
        except BaseException:
            hosts.stop()
            job.stopped = True
            raise
        return job

    def reap(self) -> None:
        """Stop the receivers of jobs whose senders all finished."""
        for job in self.jobs.values():
            if not job.stopped and not job.running():
                job.hosts.stop()
                job.stopped = True

    def stop(self, which: str) -> list[str]:
        """``stop <id>`` or ``stop all``; returns a line per job stopped."""
        if which == "all":
            ids = [i for i, j in self.jobs.items() if not j.stopped]
        else:
            try:
                ids = [int(which)]
            except ValueError:
                raise ConfigError("usage: stop <job id>|all (see `jobs`)") from None
            if ids[0] not in self.jobs:
                raise ConfigError(f"no job {which}; jobs are {sorted(self.jobs)}")
        out = []
        for i in ids:
            job = self.jobs[i]
            killed = job.hosts.stop()
            job.stopped = True
            out.append(f"[{i}] stopped" + (f" (killed {', '.join(killed)})" if killed else ""))
        return out

    def describe(self) -> str:
        self.reap()
        if not self.jobs:
            return "no jobs; start one with `workload websearch 0.6` or `incast h1,h2 h3`"
        return "\n".join(j.describe() for j in self.jobs.values())
