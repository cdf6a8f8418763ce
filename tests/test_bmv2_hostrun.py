"""Host processes on BMv2 (``p4cc host run``): a 2-host star run in which both hosts send
and receive.  With ``one_process_per_host`` each host runs exactly one process (its
receiver and sender in one loop); by default a receiving and a sending one.  Either way
the flows complete and the records are where the former ``host send``/``host recv``
wrote them."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from p4cc.experiment.bmv2 import checks as chk

pytestmark = [pytest.mark.mininet, pytest.mark.bmv2, pytest.mark.root, pytest.mark.slow]

_REASON = chk.skip_reason()
if _REASON:
    pytest.skip(_REASON, allow_module_level=True)

from p4cc.analysis.runs import open_run  # noqa: E402
from p4cc.experiment.bmv2.backend import Bmv2Backend  # noqa: E402
from p4cc.experiment.runner import run_spec  # noqa: E402
from p4cc.experiment.spec import parse_spec  # noqa: E402
from p4cc.topo.hosts import interface_names  # noqa: E402
from p4cc.topo.spec import parse_topo  # noqa: E402

SPEC = {
    "name": "hostrun", "backend": "bmv2", "topology": "star,hosts=2", "scale": "testbed",
    "duration_s": 10, "seed": 2, "interval_s": 0.25, "agents": ["secn1"],
    "host_cc": "dcqcn", "outputs": ["telemetry", "flows", "hostcc"],
    "workloads": [{"type": "websearch", "tag": "websearch", "load": 0.3,
                   "size_scale": "bdp", "windows": [[0, 6]]}],
}


def _quiet(label: str, duration: float) -> Callable[[float], None]:
    return lambda t: None


@pytest.mark.parametrize("one", [True, False], ids=["one-process", "split"])
def test_two_host_star_host_processes(tmp_path: Path, one: bool) -> None:
    paths = run_spec(parse_spec(SPEC), Bmv2Backend(one_process_per_host=one),
                     out=tmp_path / "runs", progress=_quiet)
    run_dir = paths[0]
    run = open_run(run_dir)
    assert run.complete
    log = (run_dir / "log.txt").read_text()
    pids = re.findall(r"bmv2: (h\d+) (\S+) pid (\d+)", log)
    roles = ["host"] if one else ["recv", "send"]
    assert sorted((h, r) for h, r, _pid in pids) == [(h, r) for h in ("h1", "h2")
                                                       for r in roles]
    assert f"bmv2: {2 * len(roles)} host processes (2 hosts receive, 2 send)" in log
    cpu = pd.read_csv(run_dir / "host_cpu.csv")  # processes alive at the stop
    assert set(cpu["role"]) <= set(roles) and (cpu["cpu_run_s"] >= 0).all()
    if one:  # the receivers keep the processes alive to the end
        assert sorted(cpu["host"]) == ["h1", "h2"] and cpu["sends"].all()
        assert cpu["receives"].all()
    # the flows completed, and the records are where analysis code reads them
    flows = run.flows
    assert len(flows) == len(run.schedule) > 4
    assert set(flows["src"]) == {"h1", "h2"} and set(flows["dst"]) == {"h1", "h2"}
    assert flows["completed"].all(), flows.loc[~flows["completed"]]
    for h in ("h1", "h2"):
        for f in ("send/fct.csv", "send/trace.csv", "recv/rx_flows.csv",
                  "recv/rx_counters.json"):
            assert (run_dir / "hosts" / h / f).is_file(), f
    assert len(run.table("hostcc")) > 0
    left = chk.run_leftovers(run_dir, interface_names(parse_topo("star,hosts=2")))
    assert not left, left
