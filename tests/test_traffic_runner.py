"""Runner, run store and report end to end with the ReplayBackend; interrupted runs."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from replay_backend import ReplayBackend

from p4cc.analysis.metrics import run_labels
from p4cc.analysis.report import report
from p4cc.analysis.runs import find_runs, open_run
from p4cc.cli import main
from p4cc.errors import ConfigError
from p4cc.experiment.backend import BACKENDS, get_backend
from p4cc.experiment.runner import run_spec
from p4cc.experiment.spec import BACKENDS as SPEC_BACKENDS
from p4cc.experiment.spec import parse_spec

DOC: dict[str, Any] = {
    "name": "rt", "backend": "sim", "topology": "star,hosts=8", "scale": "testbed",
    "duration_s": 10, "interval_s": 0.5, "seed": 4, "agents": ["secn1", "secn2"],
    "workloads": [
        {"type": "fbhdp", "load": 0.4, "size_scale": "bdp"},
        {"type": "storage", "pattern": "video", "io_depth": 2, "max_requests": 500},
        {"type": "bulk", "pairs": [["h1", "h2"], ["h3", "h2"]]},
    ],
}


def _quiet(label: str, duration: float) -> Any:
    return lambda t: None


def test_run_and_report_end_to_end(tmp_path: Path) -> None:
    spec = parse_spec(DOC)
    paths = run_spec(spec, ReplayBackend(), out=tmp_path / "rt", progress=_quiet)
    assert [p.name for p in paths] == ["secn1", "secn2"]
    run = open_run(paths[0])
    assert run.complete and run.status["reason"] == "finished"
    for name in ("spec.resolved.yaml", "seeds.json", "versions.json", "schedule.csv",
                 "link_events.csv", "telemetry.csv", "flows.csv", "log.txt"):
        assert (paths[0] / name).is_file(), name
    versions = json.loads((paths[0] / "versions.json").read_text())
    assert {"python", "numpy", "pandas", "p4cc", "git_commit", "p4c"} <= versions.keys()
    assert run.meta["run"] == {"variant": "secn1", "agent": "secn1", "seed": 4,
                               "backend": "replay"}
    assert len(run.flows) == len(run.schedule)
    assert {"kmin_bytes", "qlen_avg_bytes", "mice_elephant_ratio"} <= set(run.telemetry.columns)
    out = report([tmp_path / "rt"], out=tmp_path / "rep", baseline="secn2")
    text = out.read_text()
    assert "Normalised to `secn2`" in text and "### IOPS" in text
    assert "mice < 10,000 B" not in text  # workloads with different size scales
    norm = pd.read_csv(tmp_path / "rep" / "normalised.csv", index_col=0)
    assert (norm["secn2"].dropna() == 1.0).all()
    assert (tmp_path / "rep" / "slowdown.png").stat().st_size > 1000
    assert (tmp_path / "rep" / "queue_secn1.png").is_file()


def test_single_size_scale_is_stated(tmp_path: Path) -> None:
    doc = {**DOC, "agents": ["secn1"], "workloads": [DOC["workloads"][0]]}
    paths = run_spec(parse_spec(doc), ReplayBackend(), out=tmp_path / "r", progress=_quiet)
    text = report(paths).read_text()
    assert "mice < 10,000 B (paper 100 KB)" in text  # x BDP factor 0.1
    assert "elephants >= 1,000,000 B (paper 10 MB)" in text


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_interrupted_run_keeps_partial_data(tmp_path: Path, exc: type[BaseException]) -> None:
    spec = parse_spec(DOC)
    with pytest.raises(exc):
        run_spec(spec, ReplayBackend(fail_at_s=5.0, fail_with=exc), out=tmp_path / "rt",
                 progress=_quiet)
    assert not (tmp_path / "rt" / "secn2").exists()  # stopped at the first variant
    run = open_run(tmp_path / "rt" / "secn1")
    assert run.status["complete"] is False
    assert ("interrupted" if exc is KeyboardInterrupt else "RuntimeError") in run.status["reason"]
    tel = run.telemetry
    assert len(tel) > 0 and tel["t_s"].max() < 5.0
    assert run.status["rows"]["telemetry"] == len(tel)
    text = report([run.path], out=tmp_path / "rep").read_text()
    assert "**Incomplete runs**" in text


class _SigtermBackend(ReplayBackend):
    def run(self, spec: Any, schedule: Any, link_events: Any, agent_name: str, sink: Any,
            progress: Any) -> None:
        sink.flows([{"flow_id": 0, "fct_s": 0.1}])
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM did not interrupt the run")


def test_sigterm_marks_run_incomplete(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):
        run_spec(parse_spec(DOC), _SigtermBackend(), out=tmp_path / "rt", progress=_quiet)
    assert signal.getsignal(signal.SIGTERM) is before
    run = open_run(tmp_path / "rt" / "secn1")
    assert not run.complete and "signal" in run.status["reason"]
    assert len(run.flows) == 1


def test_unknown_or_missing_backend() -> None:
    with pytest.raises(ConfigError, match="unknown backend 'ns3'"):
        get_backend("ns3")
    if importlib.util.find_spec("p4cc.experiment.sim_backend") is None:
        with pytest.raises(ConfigError, match="backend 'sim' is not available"):
            get_backend("sim")
    # the test backend is not a name users can pick: tests pass ReplayBackend() instances
    with pytest.raises(ConfigError, match="unknown backend 'replay'"):
        get_backend("replay")
    with pytest.raises(ConfigError, match=r"^backend: 'replay'; choose one of \['sim', 'bmv2'\]"):
        parse_spec({**DOC, "backend": "replay"})
    assert set(BACKENDS) == set(SPEC_BACKENDS)


def test_cli_run_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(BACKENDS, "sim", "replay_backend:ReplayBackend")  # fast, synthetic
    doc = {**DOC, "duration_s": 4, "agents": ["secn1"]}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(doc))
    assert main(["run", str(tmp_path / "s.yaml"), "--runs", str(tmp_path / "runs")]) == 0
    run_dir = tmp_path / "runs" / "rt" / "secn1"
    assert str(run_dir) in capsys.readouterr().out
    assert main(["report", str(run_dir), "--out", str(tmp_path / "rep")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "rep" / "report.md")
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert main(["report", str(run_dir), "--baseline", "zzz"]) == 2


def test_rerun_keeps_the_previous_run_aside(tmp_path: Path) -> None:
    doc = {**DOC, "duration_s": 2, "agents": ["secn1"]}
    run_spec(parse_spec(doc), ReplayBackend(), out=tmp_path / "x", progress=_quiet)
    (tmp_path / "x" / "secn1" / "hostcc.csv").write_text("t_s\n1\n")  # a stale table
    run_spec(parse_spec(doc), ReplayBackend(), out=tmp_path / "x", progress=_quiet)
    assert not (tmp_path / "x" / "secn1" / "hostcc.csv").exists()
    prev = [p for p in (tmp_path / "x").iterdir() if p.name.startswith("secn1.prev-")]
    assert len(prev) == 1 and (prev[0] / "hostcc.csv").is_file()
    runs = find_runs([tmp_path / "x"])
    assert [r.path.name for r in runs] == ["secn1"]
    both = find_runs([tmp_path / "x" / "secn1", prev[0]])
    assert len(set(run_labels(both))) == 2


def test_outputs_select_tables(tmp_path: Path) -> None:
    doc = {**DOC, "duration_s": 2, "agents": ["secn1"], "outputs": ["flows"]}
    paths = run_spec(parse_spec(doc), ReplayBackend(), out=tmp_path / "o", progress=_quiet)
    assert (paths[0] / "flows.csv").is_file() and not (paths[0] / "telemetry.csv").exists()
    assert "Busiest ports" not in report(paths).read_text()


def test_ctrl_c_is_recorded_as_sigint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bare KeyboardInterrupt (Ctrl-C) names SIGINT in status.json (it read
    "interrupted ()": the exception's empty text)."""
    be = ReplayBackend()

    def ctrl_c(*_a: object, **_k: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(be, "run", ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        run_spec(parse_spec(DOC), be, out=tmp_path / "rt", progress=_quiet)
    assert open_run(tmp_path / "rt" / "secn1").status["reason"] == "interrupted (SIGINT)"
