"""What CHAMELEON's evaluations play and compare (docs/results.md, "CHAMELEON"), shared
by the simulator evaluation (p4cc.experiment.chameleon_sim_eval), the BMv2 one
(p4cc.experiment.chameleon_eval_bmv2) and the noise measurement
(p4cc.experiment.chameleon_noise): the settings compared, the all-to-all, and one run
of it (:func:`run_spec`, :func:`play`) through ``p4cc run``'s run_variant."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from p4cc.experiment.backend import get_backend
from p4cc.experiment.runner import run_variant, sigterm_as_interrupt
from p4cc.experiment.schedule import build_schedule
from p4cc.experiment.spec import ExperimentSpec, parse_spec, resolve
from p4cc.topo.spec import TopoSpec
from p4cc.traffic.workloads import frame

#: the settings compared: DCQCN parameter set and static ECN setting they start from
BASELINES = {"default": ("nvidia", "VENDOR"), "expert": ("hpcc-ns3", "SECN2")}


def all_to_all(topo: TopoSpec, size_bytes: int, iterations: int = 1, period_s: float = 0.0,
               jitter_s: float = 0.0, seed: int = 0, closed: bool = False) -> pd.DataFrame:
    """Every host sends ``size_bytes`` to every other host, all starting together; with
    ``iterations`` > 1 the collective repeats every ``period_s`` (a training job's
    all-to-all), each flow's start shifted by up to ``jitter_s`` (seeded).

    ``closed``: a pair's flow of iteration k also waits until that pair's flow of
    iteration k-1 has completed (``after``; it starts at the later of the two).  A
    setting too slow to finish a collective within the period then cannot pile
    collectives up -- at most one flow per pair is outstanding, the pairs' streams run
    back to back -- while a fast one keeps the period.  Open loop, a slow setting's
    backlog grows round after round, and so does every later round's metric drift,
    whatever the tuner does (docs/results.md, CHAMELEON, session 16)."""
    hosts = [h.name for h in topo.hosts]
    pairs = [(s, d) for s in hosts for d in hosts if s != d]
    rng = np.random.default_rng(seed)
    starts = [k * period_s + float(rng.uniform(0, jitter_s)) if jitter_s else k * period_s
              for k in range(iterations) for _ in pairs]
    n = len(pairs)
    after = [i - n if closed and i >= n else -1 for i in range(iterations * n)]
    return frame({"start_s": starts, "src": [s for _ in range(iterations) for s, _d in pairs],
                  "dst": [d for _ in range(iterations) for _s, d in pairs],
                  "size_bytes": size_bytes, "cls": "a2a",
                  "tag": [f"a2a{k}" for k in range(iterations) for _ in pairs],
                  "after": after})


def run_spec(name: str, backend: str, topology: str, scale: str, seed: int,
             duration_s: float, agent: str, host_set: str, interval_s: float,
             outputs: Sequence[str] = ("telemetry", "flows")) -> ExperimentSpec:
    """The spec of one CHAMELEON run; its workload is a placeholder that the schedule
    given to :func:`play` replaces."""
    return parse_spec({
        "name": name, "backend": backend, "topology": topology, "scale": scale,
        "duration_s": duration_s, "seeds": [seed], "interval_s": interval_s,
        "agents": [agent], "host_cc": f"dcqcn:{host_set}", "outputs": list(outputs),
        "workloads": [{"type": "bulk", "pairs": [["h1", "h2"]]}]})


def play(spec: ExperimentSpec, out: Path, sched: pd.DataFrame, quiet: bool = False) -> Path:
    """``spec``'s one agent and seed on its backend with ``sched`` as the schedule: a run
    directory under ``out`` as ``p4cc run`` writes it (``quiet``: no progress line)."""
    _, events = build_schedule(spec, spec.seeds[0], spec.topo())
    progress = (lambda label, d: (lambda t: None)) if quiet else None
    with sigterm_as_interrupt():  # `kill` tears a fabric down and marks the run partial
        return run_variant(spec, get_backend(spec.backend), out, spec.agents[0],
                           spec.seeds[0], (sched, events), resolve(spec), progress)
