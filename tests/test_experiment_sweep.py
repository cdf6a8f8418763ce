"""``p4cc sweep`` in the process pool: grid keys, run directories, resume, CIs, report."""

from __future__ import annotations

import io
import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from sweep_helpers import GRID, SEEDS, TINY, run_files, tree, write_spec

from p4cc.analysis.stats import mean_ci, t_quantile
from p4cc.cli import main
from p4cc.errors import ConfigError
from p4cc.experiment import sweep_exec
from p4cc.experiment.grid import expand, parse_grid, parse_seeds
from p4cc.experiment.runner import run_spec
from p4cc.experiment.spec import parse_spec
from p4cc.experiment.sweep import TaskResult, pending, plan_sweep, write_plan
from p4cc.experiment.sweep_exec import ProgressView, execute, pool_workers
from p4cc.experiment.sweep_report import METRICS, aggregate, build_sweep_report

MIXED: dict[str, Any] = {**TINY, "workloads": [
    {"type": "websearch", "load": 0.5},
    {"type": "incast", "load": 0.1, "senders": [2, 2], "size_bytes": [1000, 2000]},
    {"type": "storage", "pattern": "video", "io_depth": 2, "max_requests": 10},
]}


def _quiet(label: str, duration: float) -> Any:
    return lambda t: None


@pytest.fixture(scope="module")
def pool_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny grid run once in a 2-worker process pool (shared by several tests)."""
    tmp = tmp_path_factory.mktemp("pool")
    plan = plan_sweep(write_spec(tmp), GRID, SEEDS, tmp / "sweep")
    write_plan(plan)
    results = execute(plan.tasks, "pool", 2, show=False)
    assert [r.ok for r in results] == [True] * 4, results
    return plan.root


# ------------------------------------------------------------------------------ grid
@pytest.mark.parametrize(("option", "message"), [
    ("nope=1,2", "--grid nope: no workload of the spec has a 'nope' key"),
    ("workloads[3].load=0.1", "--grid workloads[3].load: workloads[3] does not exist"),
    ("workloads[2].load=0.1", "--grid workloads[2].load: a storage workload has no key 'load'"),
    ("workloads[0].x-y=1", "--grid workloads[0].x-y: not a grid key"),
    ("seeds=1,2", "--grid seeds: cannot be swept; seeds come from --seeds"),
    ("load", "expected KEY=V1,V2"),
    ("load=", "--grid load=: empty value"),
    ("load=0.3,,0.5", "empty value"),
    ("load=0.3,0.3", "duplicate values"),
    ("load=[1],0.2", "'[1]' is not a scalar value"),
])
def test_bad_grid_keys_and_values_are_rejected(option: str, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_grid([option], MIXED)
    assert message in str(exc.value)


def test_same_field_twice_is_rejected() -> None:
    with pytest.raises(ConfigError, match=r"--grid workloads\[0\].load: sets the same field "
                                          r"as --grid load"):
        parse_grid(["load=0.2", "workloads[0].load=0.3"], MIXED)


@pytest.mark.parametrize(("option", "message"), [
    ("load=0.3,1.5", r"--grid load=1.5: workloads\[0\].load: 1.5 is outside"),
    ("workloads[1].load=0", r"--grid workloads\[1\].load=0: workloads\[1\].load: 0"),
    ("duration_s=-1", r"--grid duration_s=-1: duration_s: -1 must be > 0"),
    ("host_cc=cubic", r"--grid host_cc=cubic: host_cc: 'cubic'"),
    ("interval_s=fast", r"--grid interval_s=fast: interval_s:"),
])
def test_bad_values_name_the_field_path(option: str, message: str) -> None:
    axes = parse_grid([option], MIXED)
    with pytest.raises(ConfigError, match=message):
        expand(MIXED, axes)


def test_bare_key_sets_every_workload_that_has_it() -> None:
    axes = parse_grid(["load=0.2,0.4", "duration_s=0.5,1"], MIXED)
    assert axes[0].targets == ((0, "load"), (1, "load"))  # storage has no load
    points = expand(MIXED, axes, seeds=(3, 4))
    assert [p.name for p in points] == ["load=0.2__duration_s=0.5", "load=0.2__duration_s=1",
                                        "load=0.4__duration_s=0.5", "load=0.4__duration_s=1"]
    last = points[-1].spec
    assert [w.p.get("load") for w in last.workloads] == [0.4, 0.4, None]
    assert last.duration_s == 1.0 and last.seeds == (3, 4)
    assert MIXED["workloads"][0]["load"] == 0.5  # the base document is not changed


def test_values_with_commas_use_semicolons() -> None:
    axes = parse_grid(["topology=star,hosts=4;star,hosts=6"], MIXED)
    assert axes[0].values == ("star,hosts=4", "star,hosts=6")
    points = expand(MIXED, axes)
    assert [p.name for p in points] == ["topology=star_hosts=4", "topology=star_hosts=6"]
    assert len(points[1].spec.topo().hosts) == 6


def test_seeds_option() -> None:
    assert parse_seeds(None) is None
    assert parse_seeds("3") == (1, 2, 3)
    assert parse_seeds("4,7,9") == (4, 7, 9)
    for bad in ("0", "x", "1,1"):
        with pytest.raises(ConfigError, match="--seeds"):
            parse_seeds(bad)


def test_bmv2_runs_one_at_a_time_in_the_pool() -> None:
    assert pool_workers("bmv2", 4) == 1
    assert pool_workers("sim", 3) == 3
    assert pool_workers("sim", None) == max(1, os.cpu_count() or 1)
    with pytest.raises(ConfigError, match="--workers 0"):
        pool_workers("sim", 0)


def test_without_ray_it_says_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sweep_exec, "have_ray", lambda: False)
    spec = write_spec(tmp_path)
    assert main(["sweep", str(spec), "--grid", "load=0.3", "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "pip install 'p4cc[sweep]'" in err and "--local" in err
    assert not (tmp_path / "s" / "load=0.3" / "secn1").exists()  # nothing ran


# --------------------------------------------------------------------- run directories
def test_run_directories_are_what_p4cc_run_writes(pool_sweep: Path, tmp_path: Path) -> None:
    runs = tree(pool_sweep)
    assert sorted(runs) == ["load=0.3/secn1_seed1", "load=0.3/secn1_seed2",
                            "load=0.6/secn1_seed1", "load=0.6/secn1_seed2"]
    point_doc = yaml.safe_load((pool_sweep / "load=0.6" / "spec.yaml").read_text())
    assert point_doc["workloads"][0]["load"] == 0.6 and point_doc["seeds"] == [1, 2]
    source = yaml.safe_load((pool_sweep / "load=0.6" / "secn1_seed1" /
                             "spec.resolved.yaml").read_text())["source"]
    spec = parse_spec(point_doc, source, pool_sweep.parent)
    run_spec(spec, "sim", out=tmp_path / "direct", progress=_quiet)
    for variant in ("secn1_seed1", "secn1_seed2"):
        assert run_files(tmp_path / "direct" / variant) == runs[f"load=0.6/{variant}"]
    assert runs["load=0.3/secn1_seed1"] != runs["load=0.6/secn1_seed1"]  # the grid acts


def test_resume_skips_finished_runs(tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path)
    plan = plan_sweep(spec, GRID, SEEDS, tmp_path / "s")
    write_plan(plan)
    first = execute(plan.tasks[:3], "pool", 1, show=False)  # "interrupted" after 3 runs
    assert all(r.ok for r in first)
    broken = plan.tasks[2].path  # ... the third one died mid-run
    status = (broken / "status.json").read_text().replace('"complete": true',
                                                          '"complete": false')
    (broken / "status.json").write_text(status)
    assert [t.label for t in pending(plan)] == ["load=0.6/secn1_seed1", "load=0.6/secn1_seed2"]
    kept = {t.path: [(f.stat().st_ino, f.stat().st_mtime_ns) for f in sorted(
        t.path.iterdir())] for t in plan.tasks[:2]}
    argv = ["sweep", str(spec), "--grid", GRID[0], "--seeds", "2", "--local",
            "--out", str(tmp_path / "s")]
    assert main(argv) == 0
    assert "4 runs, 2 already complete" in capsys.readouterr().out
    for path, stats in kept.items():  # not rewritten
        assert [(f.stat().st_ino, f.stat().st_mtime_ns) for f in sorted(path.iterdir())] == stats
    moved = list(broken.parent.glob(f"{broken.name}.prev-*"))
    assert len(moved) == 1  # the incomplete run was moved aside, then run again
    assert not pending(plan)
    assert main(argv) == 0  # nothing left: only the report is written again
    assert "4 already complete" in capsys.readouterr().out
    write_spec(tmp_path, {**TINY, "duration_s": 0.4})  # the spec changed since
    assert main(argv) == 2
    assert "is a complete run of a different spec" in capsys.readouterr().err


def test_more_seeds_and_agents_keep_the_finished_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path)
    out = ["--grid", "load=0.3", "--local", "--out", str(tmp_path / "s")]
    assert main(["sweep", str(spec), "--seeds", "2", *out]) == 0
    first = tmp_path / "s" / "load=0.3" / "secn1_seed1"
    stats = [(f.stat().st_ino, f.stat().st_mtime_ns) for f in sorted(first.iterdir())]
    capsys.readouterr()
    write_spec(tmp_path, {**TINY, "agents": ["secn1", "secn2"]})
    assert main(["sweep", str(spec), "--seeds", "3", *out]) == 0
    assert "6 runs, 2 already complete" in capsys.readouterr().out
    assert [(f.stat().st_ino, f.stat().st_mtime_ns)
            for f in sorted(first.iterdir())] == stats  # kept, not rewritten
    assert (first.parent / "secn2_seed3" / "status.json").is_file()


# -------------------------------------------------------------------- CIs and report
def test_confidence_interval_by_hand() -> None:
    # t_{0.975} from the printed tables (e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2)
    for df, table in ((1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (10, 2.228),
                      (30, 2.042)):
        assert t_quantile(0.95, df) == pytest.approx(table, abs=1e-3)
    # [1, 2, 3, 4]: mean 2.5, s = sqrt(5/3) = 1.2910, half-width 3.1824 * 1.2910 / 2
    mean, half, n = mean_ci([1.0, 2.0, 3.0, 4.0, math.nan])
    assert (mean, n) == (2.5, 4)
    assert half == pytest.approx(3.1824 * 1.2910 / 2, rel=1e-4)
    assert math.isnan(mean_ci([7.0])[1]) and mean_ci([])[2] == 0
    runs = pd.DataFrame({"point": ["a"] * 3, "load": [0.3] * 3, "agent": ["x"] * 3,
                         "seed": [1, 2, 3], **{m: [1.0, 2.0, 6.0] for m in METRICS}})
    row = aggregate(runs, ["load"]).iloc[0]
    # mean 3, s = sqrt(((-2)^2 + (-1)^2 + 3^2) / 2) = sqrt(7), t_{0.975, 2} = 4.3027
    assert row["fct_all_p99_s_mean"] == 3.0 and row["fct_all_p99_s_n"] == 3
    assert row["fct_all_p99_s_ci95"] == pytest.approx(4.3027 * math.sqrt(7) / math.sqrt(3),
                                                      rel=1e-4)


def test_report_files_and_columns(pool_sweep: Path) -> None:
    md = build_sweep_report(pool_sweep)
    rep = pool_sweep / "report"
    agg = pd.read_csv(rep / "sweep.csv")
    assert list(agg.columns[:4]) == ["point", "load", "agent", "runs"]
    for m in ("fct_mice_avg_s", "fct_all_p99_s", "slowdown_p99", "qlen_avg_bytes",
              "utilization", "drops_pkts"):
        assert {f"{m}_mean", f"{m}_ci95", f"{m}_n"} <= set(agg.columns)
    assert list(agg["load"]) == [0.3, 0.6] and list(agg["runs"]) == [2, 2]
    runs = pd.read_csv(rep / "runs.csv")
    assert len(runs) == 4 and {"point", "load", "agent", "seed"} <= set(runs.columns)
    g = runs[runs["point"] == "load=0.6"]["fct_all_avg_s"]
    mean, half, _ = mean_ci(g.to_numpy())
    assert agg.loc[1, "fct_all_avg_s_mean"] == pytest.approx(mean)
    assert agg.loc[1, "fct_all_avg_s_ci95"] == pytest.approx(half)
    text = md.read_text()
    assert "## fct_all_avg_s" in text and "| load=0.6 |" in text and " ± " in text
    assert (rep / "fct_all_avg_s.png").stat().st_size > 1000
    assert (rep / "utilization.png").is_file()


def test_progress_line_counts_done_failed_running() -> None:
    out = io.StringIO()  # not a terminal: plain lines
    view = ProgressView(total=4, slots=2, stream=out)
    view.update(TaskResult("p/a", True))
    view.update(TaskResult("p/b", False, "RuntimeError: boom"))
    view.update(None)
    assert view.line().startswith("sweep: 1/4 done, 1 failed, 2 running, ")
    assert "ETA" in view.line()
    view.close()
    text = out.getvalue()
    assert "p/b FAILED: RuntimeError: boom" in text
    assert "sweep: 1/4 done, 1 failed, 2 running" in text.splitlines()[-1]


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == pid:
                out.append(int(d.name))
    return out


def test_sigterm_stops_the_sweep_and_its_workers_cleanly(tmp_path: Path) -> None:
    """`kill` of a running sweep: the workers are stopped with it and the sweep exits
    non-zero (before, the pool's worker kept running its run -- on bmv2 a whole
    fabric -- after the sweep died)."""
    import json
    import signal
    import subprocess
    import sys
    import time

    long = {**TINY, "duration_s": 600.0}  # minutes of simulated traffic: still running
    spec = write_spec(tmp_path, long)
    runs = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "p4cc", "sweep", str(spec), "--grid",
                             "load=0.5", "--seeds", "1", "--local", "--workers", "1",
                             "--runs", str(runs)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(runs.rglob("status.json")):
            time.sleep(0.02)  # poll: the run has started when its status.json exists
        assert list(runs.rglob("status.json")), "the run never started"
        workers = _children(proc.pid)
        assert workers
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{w}").exists() for w in workers):
        time.sleep(0.1)
    assert not any(Path(f"/proc/{w}").exists() for w in workers), "a worker outlived it"
    (status,) = [json.loads(f.read_text()) for f in runs.rglob("status.json")]
    assert status["complete"] is False, status
    # the reason is recorded every time, also when the SIGTERM comes right after
    # status.json appeared, while the worker still writes the run's schedule (until
    # session 7 that left "running" in about half of the tries: issue #12)
    assert status["reason"] == "interrupted (signal 15)", status


@pytest.mark.parametrize("how", ["sigterm", "ctrl-c"])
def test_an_interrupted_sweep_starts_no_further_run(tmp_path: Path, how: str) -> None:
    """Two runs, one worker: the pool has already queued the second run to the worker
    when the sweep is stopped (`kill`, or Ctrl-C reaching the whole process group); the
    worker records the first run's reason and does not start the second, so the sweep
    exits at once (before, the worker ran the queued run to its end, minutes here).  The
    workers ignore SIGINT: only the sweep's SIGTERM stops them, once."""
    import json
    import signal
    import subprocess
    import sys
    import time

    spec = write_spec(tmp_path, {**TINY, "duration_s": 600.0})
    runs = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "p4cc", "sweep", str(spec), "--grid",
                             "load=0.5", "--seeds", "2", "--local", "--workers", "1",
                             "--runs", str(runs)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            # as from a terminal: pytest started in the background (`&`)
                            # passes SIGINT on ignored, and Ctrl-C would do nothing
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(runs.rglob("link_events.csv")):
            time.sleep(0.05)  # poll: the first run is being played
        assert list(runs.rglob("link_events.csv")), "the run never started"
        workers = _children(proc.pid)
        assert workers
        if how == "sigterm":
            proc.send_signal(signal.SIGTERM)
        else:
            os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C at a terminal does
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{w}").exists() for w in workers):
        time.sleep(0.1)
    assert not any(Path(f"/proc/{w}").exists() for w in workers), "a worker outlived it"
    point = runs / "tiny-sweep" / "load=0.5"
    status = json.loads((point / "secn1_seed1" / "status.json").read_text())
    assert (status["complete"], status["reason"]) == (False, "interrupted (signal 15)")
    assert not (point / "secn1_seed2").exists()  # queued to the worker, never started


def test_report_leaves_unfaithful_runs_out_and_says_so(pool_sweep: Path,
                                                       tmp_path: Path) -> None:
    # issue 10: "the report never mixes unfaithful numbers into a comparison silently"
    root = tmp_path / "sweep"
    shutil.copytree(pool_sweep, root)
    info = json.loads((root / "sweep.json").read_text())
    at_06 = [r for r in info["runs"] if r["point"] == "load=0.6"]
    bad, good = at_06[0], at_06[1]
    (root / bad["dir"] / "fidelity.json").write_text(json.dumps(
        {"faithful": False, "summary": "UNFAITHFUL: switch_cpu (9/100)"}))
    (root / good["dir"] / "fidelity.json").write_text(json.dumps(
        {"faithful": True, "summary": "faithful"}))
    md = build_sweep_report(root).read_text()
    rep = root / "report"
    runs = pd.read_csv(rep / "runs.csv")
    assert runs["faithful"].isna().sum() == 2  # the load=0.3 runs carry no verdict
    assert sorted(runs["faithful"].dropna().astype(str)) == ["False", "True"]
    agg = pd.read_csv(rep / "sweep.csv").set_index("point")
    kept = runs[(runs["point"] == "load=0.6") & (runs["seed"] == good["seed"])]
    assert agg.loc["load=0.6", "unfaithful"] == 1 and agg.loc["load=0.3", "unfaithful"] == 0
    assert agg.loc["load=0.6", "fct_all_avg_s_n"] == 1
    assert agg.loc["load=0.6", "fct_all_avg_s_mean"] == pytest.approx(
        float(kept["fct_all_avg_s"].iloc[0]))
    assert agg.loc["load=0.3", "fct_all_avg_s_n"] == 2
    fid = md.index("## Fidelity")
    assert fid < md.index("## fct_all_avg_s")
    assert "1 of 2 runs with a verdict are faithful" in md
    assert f"seed {bad['seed']}: UNFAITHFUL: switch_cpu (9/100)" in md
    assert "(n = 1)" in md


def test_report_names_the_commits_and_warns_when_a_sweep_mixes_them(
        pool_sweep: Path, tmp_path: Path) -> None:
    # a sweep whose worktree moved mid-way mixes code (session 30's runs/ws60_s30)
    root = tmp_path / "sweep"
    shutil.copytree(pool_sweep, root)
    info = json.loads((root / "sweep.json").read_text())
    dirs = [root / r["dir"] for r in info["runs"]]
    for d, (commit, dirty) in zip(dirs, [("a" * 40, False), ("a" * 40, False),
                                         ("b" * 40, True), (None, None)], strict=True):
        v = json.loads((d / "versions.json").read_text())
        (d / "versions.json").write_text(json.dumps({**v, "git_commit": commit,
                                                     "git_dirty": dirty}))
    md = build_sweep_report(root).read_text()
    runs = pd.read_csv(root / "report" / "runs.csv", dtype={"git_commit": str})
    assert sorted(runs["git_commit"].fillna("")) == ["", "a" * 40, "a" * 40, "b" * 40]
    sw = md.index("## Software")
    assert md.index("## Fidelity") < sw < md.index("## fct_all_avg_s")
    assert "`aaaaaaaaaa` (2 runs), `bbbbbbbbbb` (1 run); 1 run without one." in md
    assert "the runs come from 2 commits" in md and "1 run ran from a modified tree" in md
    # one clean commit: named, no warning
    for d in dirs:
        v = json.loads((d / "versions.json").read_text())
        (d / "versions.json").write_text(json.dumps({**v, "git_commit": "c" * 40,
                                                     "git_dirty": False}))
    md = build_sweep_report(root).read_text()
    assert "`cccccccccc` (4 runs)." in md and "Warning" not in md
