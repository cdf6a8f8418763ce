"""Lab 6 check: prediction.yaml, results.yaml and answers.md against your runs.

1. prediction.yaml changes target and/or β and predicts the direction of the RTT
   inflation and the utilisation, and the inflation itself;
2. runs/lab6/compare (``make compare`` or ``make compare-bmv2``) exists and
   results.yaml's DCQCN and RL-CC rows are its numbers;
3. runs/lab6/change (``make change``) was measured with this prediction (measure.py
   keeps a copy of prediction.yaml from before the measurement) and results.yaml's
   ``changed`` row is its numbers;
4. the predictions against the measurement: directions (a change within 2 % is "same")
   and the inflation within 10 %;
5. answers.md answers the questions.
Nothing depends on a particular checkpoint: the numbers are those of your runs.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from labcheck import Report, checked_src, parser

from p4cc.hostcc.rlcc import DEFAULT_BETA, DEFAULT_TARGET

DIRECTIONS = ("higher", "lower", "same")
SAME_REL = 0.02  # as lab 4: |change| below 2 % counts as "same"
VALUE_REL = 0.10  # the predicted inflation must be within 10 % of the measured one
MATCH_REL = 0.01  # results.yaml must hold the run's numbers (rounding allowed)
COMPARE_KEYS = ("utilization", "jain", "queue_kb")
CHANGE_KEYS = ("utilization", "jain", "queue_kb", "rtt_inflation")
WORDS = 80


def number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def direction(new: float, old: float) -> str:
    if abs(new - old) <= SAME_REL * max(abs(old), 1e-12):
        return "same"
    return "higher" if new > old else "lower"


def matches(got: Any, want: float) -> bool:
    x = number(got)
    return x is not None and abs(x - want) <= MATCH_REL * max(abs(want), 0.01)


def load_yaml(path: Path, rep: Report) -> dict[str, Any] | None:
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        rep.fail(f"read {path.name}", f"it must be valid YAML ({exc})")
        return None
    return doc if isinstance(doc, dict) else {}


def check_prediction(doc: dict[str, Any], rep: Report) -> bool:
    target, beta = number(doc.get("target")), number(doc.get("beta"))
    if not rep.check(target is not None and target > 0 and beta is not None and beta >= 0,
                     "prediction.yaml sets target and β",
                     f"give numbers: `target:` > 0 (default {DEFAULT_TARGET}) and `beta:` >= 0 "
                     f"(default {DEFAULT_BETA}) -- README step 3"):
        return False
    changed = rep.check((target, beta) != (DEFAULT_TARGET, DEFAULT_BETA),
                        "target or β differs from the default",
                        f"change at least one of target {DEFAULT_TARGET}, β {DEFAULT_BETA}")
    pred = doc.get("prediction") or {}
    bad = [k for k in ("rtt_inflation", "utilization")
           if str(pred.get(k, "")).strip().lower() not in DIRECTIONS]
    ok = rep.check(not bad, "prediction: directions of RTT inflation and utilisation",
                   f"write one of {list(DIRECTIONS)} for {bad} under `prediction:` before "
                   "you measure (README step 4)")
    val = number(pred.get("rtt_inflation_value"))
    ok &= rep.check(val is not None and val > 0, "prediction: the RTT inflation value",
                    "write your number for RTT/base RTT with the new values "
                    "(`rtt_inflation_value:`), from the fixed point in the README")
    return changed and ok


def read_result(run: Path, step: str, rep: Report, how: str) -> dict[str, Any] | None:
    path = run / step / "result.json"
    if not rep.check(path.is_file(), f"{step} measured ({path})", how):
        return None
    return dict(json.loads(path.read_text()))


def check_rows(measured: dict[str, Any], name: str, want: dict[str, Any], keys: tuple[str, ...],
               rep: Report, where: str) -> None:
    row = measured.get(name) or {}
    wrong = {k: round(float(want[k]), 4) for k in keys if not matches(row.get(k), float(want[k]))}
    rep.check(not wrong, f"results.yaml measured.{name} holds your run's numbers",
              f"copy them from {where}: {wrong}")


def check_outcome(doc: dict[str, Any], res: dict[str, Any], rep: Report) -> None:
    pred = doc.get("prediction") or {}
    old, new = res["default"], res["changed"]
    hint = ("RL-CC drives δ = target − max(inflation − β, 0)·√rate to 0: with N equal flows "
            "(rate 1/N) the inflation settles at target·√N + β -- unless that is below 1, "
            "the inflation of an empty queue (README background); explain it in answers.md")
    for k in ("rtt_inflation", "utilization"):
        got = direction(float(new[k]), float(old[k]))
        guess = str(pred.get(k, "")).strip().lower()
        rep.check(guess == got, f"{k}: predicted {guess}",
                  f"measured {got} ({float(old[k]):.4g} -> {float(new[k]):.4g}). {hint}")
    val = number(pred.get("rtt_inflation_value")) or 0.0
    meas = float(new["rtt_inflation"])
    rep.check(abs(val - meas) <= VALUE_REL * meas, f"rtt_inflation_value {val:g} within 10 %",
              f"measured {meas:.3f} (target·√N + β = {float(new['formula']):.3f}). {hint}")


def main() -> int:
    lab = Path(__file__).resolve().parent
    p = parser(lab)
    p.add_argument("--run", type=Path, default=lab / "runs" / "lab6",
                   help="measure.py's run directory (default runs/lab6)")
    args = p.parse_args()
    src, run = checked_src(args.src), args.run.resolve()
    rep = Report("lab 6 (RL-CC)")
    doc = load_yaml(src / "prediction.yaml", rep)
    results = load_yaml(src / "results.yaml", rep)
    if doc is None or results is None:
        return rep.done()
    predicted = check_prediction(doc, rep)
    measured = results.get("measured") or {}
    cmp_ = read_result(run, "compare", rep, "run `make compare` (or `sudo make compare-bmv2`), "
                       "README step 2")
    if cmp_ is not None:
        for name, key in (("dcqcn", "dcqcn"), ("rlcc", "rlcc:adpg-mlp")):
            check_rows(measured, name, cmp_[key], COMPARE_KEYS, rep,
                       f"runs/lab6/compare/result.json ({key})")
    if not predicted:
        rep.skip("change measured", "predict first (prediction.yaml), then `make change`")
    else:
        res = read_result(run, "change", rep, "predict, then `make change` (README step 5)")
        if res is not None:
            snap = run / "change" / "prediction.yaml"
            before = yaml.safe_load(snap.read_text()) if snap.is_file() else None
            keys = ("target", "beta", "prediction")
            same = isinstance(before, dict) and all(before.get(k) == doc.get(k) for k in keys)
            rep.check(same, "the change was measured with this prediction",
                      "prediction.yaml changed after `make change`: a prediction is made "
                      "before measuring -- run `make change` again with it")
            check_rows(measured, "changed", res["changed"], CHANGE_KEYS, rep,
                       "runs/lab6/change/result.json (changed)")
            if same:
                check_outcome(doc, res, rep)
    ans = (src / "answers.md").read_text() if (src / "answers.md").is_file() else ""
    rep.check("TODO" not in ans and len(ans.split()) >= WORDS
              and all(k in ans.lower() for k in ("dcqcn", "target", "β")),
              "answers.md answers the questions",
              f"answer the README's questions in answers.md (>= {WORDS} words, about DCQCN, "
              "target and β, with your numbers)")
    return rep.done()


if __name__ == "__main__":
    sys.exit(main())
