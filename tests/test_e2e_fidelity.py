"""Issue 10 on a live fabric: the fidelity verdict, the budget, ``after`` chains.

* A deliberately overloaded run (8 hosts at 20 Mb/s all sending at full load through
  one switch: far more packets/s than one BMv2 forwards here) is refused by the budget,
  and when forced past it (``Bmv2Backend(within_budget=False)``) its verdict is
  unfaithful -- never faithful.
* A run well within budget (two constant-rate senders at 60 % of the bottleneck) is
  judged faithful.  This needs the machine not to be saturated by other work: the
  verdict is right to fail a run whose switch was starved by other sessions.
* Storage IO (each request starts when the previous one of its chain completes) runs on
  BMv2: every chained flow starts after its predecessor ended.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from p4cc.experiment.bmv2 import checks as chk

pytestmark = [pytest.mark.mininet, pytest.mark.bmv2, pytest.mark.root, pytest.mark.slow]

_REASON = chk.skip_reason()
if _REASON:
    pytest.skip(_REASON, allow_module_level=True)

from p4cc.errors import ConfigError  # noqa: E402
from p4cc.experiment.bmv2.backend import Bmv2Backend  # noqa: E402
from p4cc.experiment.runner import run_spec  # noqa: E402
from p4cc.experiment.spec import parse_spec  # noqa: E402

BASE: dict[str, Any] = {"name": "fid", "backend": "bmv2", "scale": "testbed", "seed": 2,
                        "interval_s": 0.25, "agents": ["secn1"], "host_cc": "dcqcn"}
OVERLOAD = {**BASE, "topology": "star,hosts=8", "scale": "testbed-fast", "duration_s": 6,
            "workloads": [{"type": "websearch", "load": 1.0, "size_scale": "bdp"},
                          {"type": "incast", "receiver": "h8", "senders": [7, 7],
                           "flows_per_sender": [1, 1], "size_bytes": [300_000, 300_000],
                           "load": 0.5}]}
LIGHT = {**BASE, "topology": "star,hosts=3", "duration_s": 6, "host_cc": "fixed:3e6",
         "workloads": [{"type": "incast", "receiver": "h3", "senders": [2, 2],
                        "flows_per_sender": [1, 1], "size_bytes": [1_500_000, 1_500_000],
                        "load": 0.05}]}


def _quiet(label: str, duration: float) -> Any:
    return lambda t: None


def _verdict(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((path / "fidelity.json").read_text())
    return data


def test_overloaded_spec_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"bmv2 backend|BMv2 switch"):
        Bmv2Backend().check(parse_spec(OVERLOAD))


def test_overloaded_run_is_never_faithful(tmp_path: Path) -> None:
    paths = run_spec(parse_spec(OVERLOAD), Bmv2Backend(within_budget=False),
                     out=tmp_path / "over", progress=_quiet)
    v = _verdict(paths[0])
    print(f"\noverloaded run (load {os.getloadavg()[0]:.1f}): {v['summary']}")
    assert v["faithful"] is False
    assert (paths[0] / "fidelity.csv").stat().st_size > 0


def test_run_within_budget_is_faithful(tmp_path: Path) -> None:
    paths = run_spec(parse_spec(LIGHT), Bmv2Backend(), out=tmp_path / "light",
                     progress=_quiet)
    v = _verdict(paths[0])
    print(f"\nlight run (load {os.getloadavg()[0]:.1f}): {v['summary']}")
    assert v["faithful"] is True, v["violations"][:5]


def test_after_chains_on_a_live_fabric(tmp_path: Path) -> None:
    spec = parse_spec({**BASE, "topology": "star,hosts=4", "duration_s": 6,
                       "workloads": [{"type": "storage", "tag": "vdi", "pattern": "vdi",
                                      "io_depth": 2, "size_scale": 0.25}]})
    paths = run_spec(spec, Bmv2Backend(within_budget=False), out=tmp_path / "chain",
                     progress=_quiet)
    flows = pd.read_csv(paths[0] / "flows.csv")
    sched = pd.read_csv(paths[0] / "schedule.csv")
    done = flows[flows["completed"].astype(str).str.lower() == "true"]
    print(f"\nchains: {len(flows)} flows started, {len(done)} completed")
    chained = flows.merge(sched[["flow_id", "after"]], on="flow_id")
    chained = chained[chained["after"] >= 0]
    assert len(chained) >= 20, "few chained requests started"
    ends = flows.set_index("flow_id")["end_s"]
    gap = chained["start_s"].to_numpy() - ends.reindex(chained["after"]).to_numpy()
    assert (gap >= -0.01).all(), "a chained request started before its predecessor ended"
    # a request follows its predecessor promptly (same or other host: completions file)
    assert pd.Series(gap).median() < 0.1
    assert len(done) >= 0.8 * len(flows)
