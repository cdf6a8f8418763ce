"""Labs 5 and 6: their checks judge a run directory.  Fast tests build small run
directories with known contents (the run store's files: spec.resolved.yaml,
status.json, agent.csv; measure.py's result.json); slow ones make real simulator runs
with the lab's own commands and check the solution on them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

LABS = Path(__file__).resolve().parents[1] / "labs"
L5, L6 = "lab5-learning-threshold", "lab6-rlcc"


def check(lab: str, src: Path, run: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(LABS / lab / "check.py"), "--src", str(src),
                           "--run", str(run)], capture_output=True, text=True, timeout=300)


def solution_copy(lab: str, tmp: Path) -> Path:
    dst = tmp / "src"
    shutil.copytree(LABS / "solutions" / lab, dst)
    return dst


# -- lab 5 ---------------------------------------------------------------------------
def fake_lab5_run(run: Path) -> None:
    """Four variants; acc changes its setting after the switch at 10 s."""
    rows = {"secn1": [(0.25, 1000, 20000, 0.01)], "secn2": [(0.25, 10000, 40000, 0.2)],
            "acc": [(0.25, 4000, 100000, 0.9), (12.0, 8000, 200000, 0.5)],
            "pet": [(0.25, 4000, 64000, 0.1), (3.0, 2000, 64000, 0.1)]}
    spec = {"duration_s": 20.0, "workloads": [{"type": "websearch", "windows": [[0.0, 10.0]]},
                                              {"type": "datamining", "windows": [[10.0, 20.0]]}]}
    for v, decisions in rows.items():
        d = run / v
        d.mkdir(parents=True)
        (d / "spec.resolved.yaml").write_text(yaml.safe_dump(spec))
        (d / "status.json").write_text(json.dumps({"complete": True}))
        lines = ["t_s,switch,port,kmin_bytes,kmax_bytes,pmax"]
        lines += [f"{t},s1,{p},{a},{b},{c}" for t, a, b, c in decisions for p in (1, 2)]
        (d / "agent.csv").write_text("\n".join(lines) + "\n")


def analyse(src: Path, run: Path) -> None:
    subprocess.run([sys.executable, str(src / "analysis.py"), str(run)], check=True,
                   capture_output=True, text=True, timeout=120)


def test_lab5_check_on_a_known_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    fake_lab5_run(run)
    src = solution_copy(L5, tmp_path)
    missing = check(L5, src, run)  # decisions.yaml not written yet
    assert missing.returncode == 1 and "FAIL  decisions.yaml describes this run" in missing.stdout
    analyse(src, run)
    doc = yaml.safe_load((run / "decisions.yaml").read_text())
    # acc: Kmin 4 kB for 10 s before; after: 4 kB for 2 s, 8 kB for 8 s -> 7.2 kB
    assert doc["acc"]["before"]["kmin_kb"] == pytest.approx(4.0)
    assert doc["acc"]["after"] == pytest.approx({"kmin_kb": 7.2, "kmax_kb": 180.0,
                                                 "pmax": 0.58, "changes": 2})
    ok = check(L5, src, run)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "PASS  your analysis agrees with the run's agent.csv" in ok.stdout
    # a hand-edited number in decisions.yaml no longer describes the run
    doc["pet"]["after"]["kmin_kb"] = 4.0
    (run / "decisions.yaml").write_text(yaml.safe_dump(doc))
    stale = check(L5, src, run)
    assert stale.returncode == 1 and "FAIL  decisions.yaml describes this run" in stale.stdout
    # an analysis that is right on the small table but not on the run
    text = (src / "analysis.py").read_text()
    (src / "analysis.py").write_text(text.replace(
        'return {"before": window(d, t_sw - span, t_sw), "after": window(d, t_sw, t_sw + span)}',
        'return {"before": window(d, 0.0, t_sw), "after": window(d, t_sw, duration + span)}'))
    analyse(src, run)
    wrong = check(L5, src, run)
    assert "FAIL  your analysis agrees with the run's agent.csv" in wrong.stdout, wrong.stdout


def test_lab5_check_without_a_run_or_agents(tmp_path: Path) -> None:
    src = solution_copy(L5, tmp_path)
    none = check(L5, src, tmp_path / "nothing")
    assert none.returncode == 1 and "make run-sim" in none.stdout
    run = tmp_path / "run"
    fake_lab5_run(run)
    shutil.rmtree(run / "pet")
    res = check(L5, src, run)
    assert res.returncode == 1 and "FAIL  the run has the ACC and PET variants" in res.stdout


@pytest.mark.slow
def test_lab5_solution_on_a_simulator_run(tmp_path: Path) -> None:
    """The lab's own spec on the simulator with the shipped checkpoints (whatever they
    decide), the solution's analysis, the check."""
    run = tmp_path / "runs" / "lab5-switch"
    subprocess.run([sys.executable, "-m", "p4cc", "run", str(LABS / L5 / "switch.yaml"),
                    "--backend", "sim", "--out", str(run)], check=True, capture_output=True,
                   timeout=1200)
    src = solution_copy(L5, tmp_path)
    analyse(src, run)
    res = check(L5, src, run)
    assert res.returncode == 0, res.stdout + res.stderr
    starter = check(L5, LABS / L5, run)
    assert starter.returncode == 1 and "not implemented yet" in starter.stdout


# -- lab 6 ---------------------------------------------------------------------------
def rl_row(util: float, infl: float, target: float = 0.064, beta: float = 1.5) -> dict:
    return {"utilization": util, "jain": 0.999, "queue_kb": max(infl - 1, 0) * 50.0,
            "rtt_inflation": infl, "lost_bytes": 0.0, "target": target, "beta": beta,
            "formula": target * 8 ** 0.5 + beta}


def fake_lab6_run(run: Path, prediction: Path, changed: dict) -> None:
    (run / "compare").mkdir(parents=True)
    (run / "compare" / "result.json").write_text(json.dumps(
        {"step": "compare", "backend": "sim", "n": 8, "rlcc:adpg-mlp": rl_row(1.0, 1.70),
         "dcqcn": {"utilization": 0.998, "jain": 0.9987, "queue_kb": 76.75,
                   "lost_bytes": 0.0}}))
    (run / "change").mkdir(parents=True)
    shutil.copy(prediction, run / "change" / "prediction.yaml")
    (run / "change" / "result.json").write_text(json.dumps(
        {"step": "change", "backend": "sim", "n": 8, "default": rl_row(1.0, 1.70),
         "changed": changed}))


def write_results(src: Path, run: Path) -> None:
    """What a student copies into results.yaml from the run's result.json files."""
    cmp_ = json.loads((run / "compare" / "result.json").read_text())
    ch = json.loads((run / "change" / "result.json").read_text())["changed"]
    keys = ("utilization", "jain", "queue_kb")
    doc = {"measured": {"dcqcn": {k: round(cmp_["dcqcn"][k], 4) for k in keys},
                        "rlcc": {k: round(cmp_["rlcc:adpg-mlp"][k], 4) for k in keys},
                        "changed": {k: round(ch[k], 4) for k in (*keys, "rtt_inflation")}}}
    (src / "results.yaml").write_text(yaml.safe_dump(doc))


def test_lab6_check_on_a_known_run(tmp_path: Path) -> None:
    src = solution_copy(L6, tmp_path)
    run = tmp_path / "run"
    fake_lab6_run(run, src / "prediction.yaml", rl_row(0.044, 1.0, beta=0.0))
    write_results(src, run)
    ok = check(L6, src, run)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # the measurement disagrees with the prediction: the check says so
    shutil.rmtree(run)
    fake_lab6_run(run, src / "prediction.yaml", rl_row(1.0, 1.70, beta=0.0))
    write_results(src, run)
    wrong = check(L6, src, run)
    assert wrong.returncode == 1
    assert "FAIL  utilization: predicted lower" in wrong.stdout
    assert "FAIL  rtt_inflation_value 1 within 10 %" in wrong.stdout
    # numbers not from the run
    doc = yaml.safe_load((src / "results.yaml").read_text())
    doc["measured"]["dcqcn"]["queue_kb"] = 10.0
    (src / "results.yaml").write_text(yaml.safe_dump(doc))
    res = check(L6, src, run)
    assert "FAIL  results.yaml measured.dcqcn holds your run's numbers" in res.stdout
    # a prediction edited after the measurement
    pred = yaml.safe_load((src / "prediction.yaml").read_text())
    pred["prediction"]["utilization"] = "same"
    (src / "prediction.yaml").write_text(yaml.safe_dump(pred))
    late = check(L6, src, run)
    assert "FAIL  the change was measured with this prediction" in late.stdout


def test_lab6_measure_refuses_without_a_prediction(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, str(LABS / L6 / "measure.py"), "change", "--runs",
                          str(tmp_path), "--prediction", str(LABS / L6 / "prediction.yaml")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode != 0 and "predict, then measure" in res.stderr
    assert not (tmp_path / "change").exists()


@pytest.mark.slow
def test_lab6_solution_on_simulator_runs(tmp_path: Path) -> None:
    """measure.py compare and change (the learned policy rlcc:adpg-mlp on the simulator),
    a student's copy of the numbers, the check -- whatever the shipped policy does."""
    src = solution_copy(L6, tmp_path)
    run = tmp_path / "runs"
    for step in ("compare", "change"):
        subprocess.run([sys.executable, str(LABS / L6 / "measure.py"), step, "--runs", str(run),
                        "--prediction", str(src / "prediction.yaml")], check=True,
                       capture_output=True, timeout=1200)
    write_results(src, run)
    res = check(L6, src, run)
    assert res.returncode == 0, res.stdout + res.stderr
    starter = check(L6, LABS / L6, run)
    assert starter.returncode == 1 and "prediction.yaml sets target and" in starter.stdout
