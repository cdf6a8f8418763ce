"""How-to example: a workload type (docs/howto.md, "Add a workload").

``permutation``: every ``period_s`` each host sends one flow of ``size_bytes`` to the host
``shift`` places after it (h_i -> h_(i+shift) mod N), all starting together: the
permutation pattern of datacenter-fabric evaluations, where every host sends and
receives exactly one flow per round.

A workload type is one p4cc.traffic.kinds.WorkloadKind: a frozen parameter dataclass
(its fields are the type's spec keys), a parser (errors name the field path) and a
generator (one DataFrame of flows per active window, p4cc.traffic.workloads.frame).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from p4cc.topo.spec import TopoSpec
from p4cc.traffic import kinds
from p4cc.traffic import workloads as wl
from p4cc.traffic.fields import Ctx, err, integer, time_value


@dataclass(frozen=True)
class PermutationParams:
    """Every host sends one flow to the host ``shift`` places after it, every period."""

    size_bytes: int = field(metadata={"help": "bytes of every flow"})
    period_s: float = field(metadata={"help": "time between rounds (a time value)"})
    shift: int = field(default=1, metadata={"help": "h_i sends to h_(i+shift) mod N"})


def parse(ctx: Ctx, path: str, w: Mapping[str, Any], topo: TopoSpec) -> PermutationParams:
    """Validate the spec mapping ``w`` (at ``path``, e.g. ``workloads[0]``)."""
    n = len(topo.hosts)
    size = integer(f"{path}.size_bytes", w.get("size_bytes", 50_000), 1, 10**10)
    period = time_value(ctx, f"{path}.period_s", w.get("period_s", 0.5))
    if period <= 0:
        raise err(f"{path}.period_s", "must be > 0")
    shift = integer(f"{path}.shift", w.get("shift", 1), 1, max(1, n - 1))
    return PermutationParams(size, period, shift)


def generate(rng: np.random.Generator, p: PermutationParams,
             win: kinds.Window) -> pd.DataFrame:
    """The flows of one active window ``[win.t0, win.t1)`` (``rng`` unused: no randomness)."""
    hosts = list(win.hosts)
    n = len(hosts)
    rounds = np.arange(win.t0, win.t1, p.period_s)
    size = max(1, round(p.size_bytes * win.size_scale))
    rows: dict[str, list[Any]] = {k: [] for k in ("start_s", "src", "dst", "size_bytes",
                                                  "cls", "tag")}
    for t in rounds:
        for i, src in enumerate(hosts):
            rows["start_s"].append(float(t))
            rows["src"].append(src)
            rows["dst"].append(hosts[(i + p.shift) % n])
            rows["size_bytes"].append(size)
            rows["cls"].append("flow")
            rows["tag"].append(win.tag)
    return wl.frame(rows)


PERMUTATION = kinds.WorkloadKind("permutation", PermutationParams, parse, generate,
                                 mean_size=lambda p: float(p.size_bytes))


def register() -> None:
    """Make ``type: permutation`` a workload that specs accept."""
    kinds.KINDS["permutation"] = PERMUTATION
