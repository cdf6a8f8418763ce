"""Turn a spec into what backends play: the flow schedule and the link-event list.

Workloads are active in their ``windows`` (PET §5.5.4's WebSearch <-> DataMining switch
is two workloads with alternating windows); link failures become ``down``/``up`` events
(PET §5.5.5: 10 % of the switch links down from 3.1 s to 6.1 s).

Each workload draws from its own generator, ``default_rng([seed, index])``, so adding a
workload does not change the flows of the others and a (spec, seed) pair always yields
the same schedule.  Its type's generator (p4cc.traffic.kinds) makes the flows of each
active window.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from p4cc.experiment.spec import ExperimentSpec, LinkFailureSpec
from p4cc.topo.spec import TopoSpec
from p4cc.traffic import workloads as wl
from p4cc.traffic.kinds import Window

LINK_EVENT_COLUMNS = ["t_s", "action", "a", "a_port", "b", "b_port", "failure"]


def combine(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate generator outputs, order by start time, renumber ``flow_id`` 0..n-1
    and remap every ``after`` reference to the new numbers."""
    frames, offset = [], 0
    for df in parts:
        df = df.copy()
        local = df["flow_id"].to_numpy()
        df["flow_id"] = local + offset
        df["after"] = np.where(df["after"].to_numpy() >= 0, df["after"].to_numpy() + offset, -1)
        offset += len(df)
        frames.append(df)
    if not frames:
        return wl.frame()
    all_ = pd.concat(frames, ignore_index=True)
    all_ = all_.sort_values(["start_s", "flow_id"], kind="stable").reset_index(drop=True)
    new_id = np.empty(len(all_), dtype=np.int64)
    new_id[all_["flow_id"].to_numpy()] = np.arange(len(all_))
    after = all_["after"].to_numpy()
    all_["after"] = np.where(after >= 0, new_id[np.maximum(after, 0)], -1)
    all_["flow_id"] = np.arange(len(all_), dtype=np.int64)
    return wl.frame(all_.to_dict("list"))


def link_events(rng: np.random.Generator, failures: tuple[LinkFailureSpec, ...],
                topo: TopoSpec) -> pd.DataFrame:
    """``down``/``up`` rows for every failed link (random ones chosen with ``rng``)."""
    rows: list[dict[str, object]] = []
    for i, f in enumerate(failures):
        if f.links:
            chosen = []
            for name in f.links:
                a, _, b = name.partition(":")
                chosen += [lk for lk in topo.links if {lk.a, lk.b} == {a, b}][:1]
        else:
            trunks = [lk for lk in topo.links if not topo.is_host(lk.a)
                      and not topo.is_host(lk.b)]
            k = max(1, math.ceil((f.fraction or 0) * len(trunks) - 1e-9))
            chosen = [trunks[j] for j in sorted(rng.choice(len(trunks), size=k,
                                                            replace=False))]
        for lk in chosen:
            rows.append({"t_s": f.at_s, "action": "down", "a": lk.a, "a_port": lk.a_port,
                         "b": lk.b, "b_port": lk.b_port, "failure": i})
            if f.until_s is not None:
                rows.append({"t_s": f.until_s, "action": "up", "a": lk.a, "a_port": lk.a_port,
                             "b": lk.b, "b_port": lk.b_port, "failure": i})
    df = pd.DataFrame(rows, columns=LINK_EVENT_COLUMNS)
    return df.sort_values(["t_s", "failure"], kind="stable").reset_index(drop=True)


def build_schedule(spec: ExperimentSpec, seed: int,
                   topo: TopoSpec | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(schedule, link_events) for one seed of ``spec``."""
    topo = topo or spec.topo()
    rate = spec.scale_obj.link_rate_bps
    hosts = tuple(h.name for h in topo.hosts)
    parts = []
    for i, w in enumerate(spec.workloads):
        rng = np.random.default_rng([seed, i])
        for t0, t1 in w.windows:
            parts.append(w.kind.generate(rng, w.params,
                                         Window(hosts, t0, t1, rate, w.tag, w.size_scale)))
    events = link_events(np.random.default_rng([seed, 1_000_003]), spec.link_failures, topo)
    return combine(parts), events
