"""Issue "Workloads" end to end on BMv2: a 30-second spec, its report, and a killed run.

* ``p4cc run`` of a 30 s WebSearch + incast spec on a star finishes, and the report
  built from it has every table filled (no table without rows, no NaN in the summary).
* SIGINT / SIGTERM to a ``p4cc run`` process mid-run leaves a readable run marked
  incomplete with the signal as the reason, and none of the processes the backend
  started (switches, host senders/receivers) nor any switch interface survives.
"""

from __future__ import annotations

import math
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from p4cc.experiment.bmv2 import checks as chk

pytestmark = [pytest.mark.mininet, pytest.mark.bmv2, pytest.mark.root, pytest.mark.slow]

_REASON = chk.skip_reason()
if _REASON:
    pytest.skip(_REASON, allow_module_level=True)

from p4cc.analysis.report import report  # noqa: E402
from p4cc.analysis.runs import open_run  # noqa: E402
from p4cc.topo.hosts import interface_names  # noqa: E402

SPEC = {
    "name": "e2e_workloads", "backend": "bmv2", "topology": "star,hosts=4",
    "scale": "testbed-5m", "duration_s": 30, "seed": 3, "interval_s": 0.25, "agents": ["secn1"],
    "host_cc": "dcqcn",
    "workloads": [
        {"type": "websearch", "tag": "websearch", "load": 0.4, "size_scale": "bdp"},
        {"type": "incast", "tag": "incast", "receiver": "h4", "senders": [3, 3],
         "flows_per_sender": [1, 1], "size_bytes": [20_000, 200_000], "load": 0.1},
    ],
}


def _write(tmp: Path, **over: object) -> Path:
    path = tmp / "spec.yaml"
    path.write_text(yaml.safe_dump({**SPEC, **over}))
    return path


def _p4cc(*args: str) -> list[str]:
    return [sys.executable, "-m", "p4cc", *args]


def _tables(md: str) -> list[list[str]]:
    """Each markdown table of the report as its list of lines."""
    tables, cur = [], []
    for line in md.splitlines():
        if line.startswith("|"):
            cur.append(line)
        elif cur:
            tables.append(cur)
            cur = []
    if cur:
        tables.append(cur)
    return tables


def test_thirty_second_run_report_filled(tmp_path: Path) -> None:
    spec = _write(tmp_path)
    out = tmp_path / "runs"
    t0 = time.monotonic()
    res = subprocess.run(_p4cc("run", str(spec), "--out", str(out)), capture_output=True,
                         text=True, timeout=240)
    wall = time.monotonic() - t0
    assert res.returncode == 0, res.stderr[-2000:]
    run = open_run(out / "secn1")
    assert run.complete
    for name in ("telemetry", "flows", "hostcc", "agent"):
        assert len(run.table(name)) > 0, f"{name}.csv is empty"
    path = report([out])
    md = path.read_text()
    tables = _tables(md)
    assert len(tables) >= 6
    for t in tables:
        assert len(t) >= 3, f"table without data rows:\n{chr(10).join(t)}"
    summary = md.split("## Summary", 1)[1].split("###", 1)[0]
    for line in summary.splitlines()[4:]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            assert all(c not in ("nan", "–", "") for c in cells[1:]), f"unfilled: {line}"
    f = run.flows
    done = (f["completed"].astype(str).str.lower() == "true").sum()
    print(f"\n30 s run: wall {wall:.1f} s, {len(f)} flows started, {done} completed; "
          f"report {path}")
    assert done >= 0.5 * len(f)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_killed_run_is_partial_and_clean(tmp_path: Path, sig: signal.Signals) -> None:
    spec = _write(tmp_path, duration_s=60)
    out = tmp_path / "runs"
    # (SIGINT as a terminal sends it: a pytest started in the background by a shell
    # without job control has SIGINT ignored, and a child inherits that, so the run
    # would never see the signal this test sends)
    proc = subprocess.Popen(_p4cc("run", str(spec), "--out", str(out)),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=_default_sigint)
    log = out / "secn1" / "log.txt"
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline:  # until the traffic has run a few seconds
            text = log.read_text() if log.is_file() else ""
            m = re.search(r"t0 = ([0-9.]+)", text)
            if m and time.time() > float(m.group(1)) + 4:
                break
            assert proc.poll() is None, proc.communicate()[0][-2000:]
            time.sleep(0.1)
        else:
            pytest.fail("the run did not start its traffic within 90 s")
        proc.send_signal(sig)
        output, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0, output[-2000:]
    run = open_run(out / "secn1")
    assert not run.complete
    assert "interrupted" in run.status["reason"], run.status
    assert len(run.telemetry) > 0
    assert "flows" in run.status["rows"] or (out / "secn1" / "hosts").is_dir()
    topo = __import__("p4cc.topo.spec", fromlist=["parse_topo"]).parse_topo("star,hosts=4")
    left = chk.run_leftovers(out / "secn1", interface_names(topo))
    assert not left, f"left behind after {sig.name}: {left}"
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert not re.search(r"\bs1-eth\d", links), links
    # the partial run is readable by the report
    assert report([out / "secn1"], out=tmp_path / "report").is_file()
    assert not math.isnan(len(run.flows))
