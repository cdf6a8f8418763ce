"""What CHAMELEON's evaluations play and compare (docs/results.md, "CHAMELEON"), shared
by the simulator evaluation (p4cc.experiment.chameleon_eval) and the BMv2 one
(p4cc.experiment.chameleon_eval_bmv2)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from p4cc.topo.spec import TopoSpec
from p4cc.traffic.workloads import frame

#: the settings compared: DCQCN parameter set and static ECN setting they start from
BASELINES = {"default": ("nvidia", "VENDOR"), "expert": ("hpcc-ns3", "SECN2")}


def all_to_all(topo: TopoSpec, size_bytes: int, iterations: int = 1, period_s: float = 0.0,
               jitter_s: float = 0.0, seed: int = 0) -> pd.DataFrame:
    """Every host sends ``size_bytes`` to every other host, all starting together; with
    ``iterations`` > 1 the collective repeats every ``period_s`` (a training job's
    all-to-all), each flow's start shifted by up to ``jitter_s`` (seeded)."""
    hosts = [h.name for h in topo.hosts]
    pairs = [(s, d) for s in hosts for d in hosts if s != d]
    rng = np.random.default_rng(seed)
    starts = [k * period_s + float(rng.uniform(0, jitter_s)) if jitter_s else k * period_s
              for k in range(iterations) for _ in pairs]
    return frame({"start_s": starts, "src": [s for _ in range(iterations) for s, _d in pairs],
                  "dst": [d for _ in range(iterations) for _s, d in pairs],
                  "size_bytes": size_bytes, "cls": "a2a",
                  "tag": [f"a2a{k}" for k in range(iterations) for _ in pairs]})
