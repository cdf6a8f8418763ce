"""Lab 5 check: your analysis.py, on a table whose answers are known and on your run's
agent.csv files, its decisions.yaml, and answers.md.

1. ``setting_at`` and ``window`` on a small decision table (known answers);
2. the run (``--run``, default runs/lab5-switch: `make run` or `make run-sim`) is
   complete and has the ACC and PET variants, each with decisions;
3. your ``summarize`` agrees, on every variant of the run, with the check's own
   computation from agent.csv (the same definitions, written independently), and
   decisions.yaml (`make analysis`) holds those numbers for this run;
4. answers.md answers the questions.
Nothing depends on a particular trained checkpoint: whatever ``acc``/``pet`` decided
in your run is what the numbers must describe.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from labcheck import Report, checked_src, load_student, parser

AGENTS = ("acc", "pet")
KEYS = ("kmin_kb", "kmax_kb", "pmax", "changes")
WORDS = 100


def sample() -> pd.DataFrame:
    rows = [(0.0, "s1", 1, 10_000, 100_000, 0.1), (5.0, "s1", 1, 20_000, 200_000, 0.3),
            (2.0, "s1", 2, 30_000, 300_000, 0.5)]
    return pd.DataFrame(rows, columns=["t_s", "switch", "port", "kmin_bytes", "kmax_bytes",
                                       "pmax"])


SAMPLE_AT = {("s1", 1, 4.9): (10_000.0, 100_000.0, 0.1), ("s1", 1, 5.0): (20_000.0, 200_000.0,
             0.3), ("s1", 2, 1.0): None, ("s1", 2, 9.0): (30_000.0, 300_000.0, 0.5)}
SAMPLE_WINDOWS = {(0.0, 10.0): {"kmin_kb": 22.5, "kmax_kb": 225.0, "pmax": 0.35, "changes": 3},
                  (6.0, 10.0): {"kmin_kb": 25.0, "kmax_kb": 250.0, "pmax": 0.4, "changes": 0}}


# -- the check's own computation (same definitions as analysis.py's docstrings) ----------
def ref_window(d: pd.DataFrame, t0: float, t1: float) -> dict[str, float]:
    sums = np.zeros(3)
    ports = 0
    for _, rows in d.groupby(["switch", "port"]):
        rows = rows.sort_values("t_s", kind="stable")
        recs = list(rows[["t_s", "kmin_bytes", "kmax_bytes", "pmax"]].itertuples(index=False))
        num, den = np.zeros(3), np.zeros(3)
        for i, r in enumerate(recs):
            nxt = recs[i + 1][0] if i + 1 < len(recs) else math.inf
            w = max(0.0, min(nxt, t1) - max(r[0], t0))
            for j, v in enumerate(r[1:]):
                if w > 0 and not math.isnan(float(v)):
                    num[j] += w * float(v)
                    den[j] += w
        if den.max() > 0:
            ports += 1
            sums += np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)
    means = sums / ports if ports else np.full(3, np.nan)
    changes = int(((d["t_s"] >= t0) & (d["t_s"] < t1)).sum())
    return {"kmin_kb": means[0] / 1000, "kmax_kb": means[1] / 1000, "pmax": means[2],
            "changes": changes}


def close(a: Any, b: Any, tol: float = 1e-6) -> bool:
    try:
        x, y = float(a), float(b)
    except (TypeError, ValueError):
        return False
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return abs(x - y) <= tol * max(1.0, abs(y))


def same(got: Any, want: dict[str, float], tol: float = 1e-6) -> bool:
    return isinstance(got, dict) and all(close(got.get(k), want[k], tol) for k in KEYS)


def _attempt(rep: Report, name: str, step: str, fn: Callable[[], bool]) -> bool:
    """``fn()``'s verdict; a FAIL naming the README step if the student's function is
    not implemented yet, or naming the exception it raised."""
    try:
        return fn()
    except NotImplementedError:
        rep.fail(name, f"not implemented yet: README step {step}")
    except Exception as exc:
        rep.fail(name, f"raised {type(exc).__name__}: {exc}")
    return False


def known_answers(mod: ModuleType, rep: Report) -> bool:
    d = sample()

    def setting_at() -> bool:
        got = {k: mod.setting_at(d, *k) for k in SAMPLE_AT}
        return rep.check(all((g is None and w is None) or (g is not None and w is not None and all(
            close(a, b) for a, b in zip(g, w, strict=True))) for g, w in
            ((got[k], SAMPLE_AT[k]) for k in SAMPLE_AT)),
            "setting_at: the setting in force at a time",
            f"on the table\n{d}\n      expected {SAMPLE_AT}, got {got}")

    def window() -> bool:
        gotw = {k: mod.window(d, *k) for k in SAMPLE_WINDOWS}
        return rep.check(all(same(gotw[k], w) for k, w in SAMPLE_WINDOWS.items()),
                         "window: time-weighted settings and changes in a window",
                         f"on the table\n{d}\n      expected {SAMPLE_WINDOWS}, got {gotw}")

    ok1 = _attempt(rep, "setting_at", "3", setting_at)
    ok2 = _attempt(rep, "window", "4", window)
    return ok1 and ok2


def variants(run: Path) -> dict[str, Path]:
    return {v.name: v for v in sorted(run.iterdir()) if (v / "spec.resolved.yaml").is_file()}


def check_run(mod: ModuleType, run: Path, rep: Report) -> None:
    how = ("run the comparison first: `sudo make run` (BMv2) or `make run-sim` (simulator), "
           "README step 2")
    if not rep.check(run.is_dir() and bool(variants(run)), f"run directory {run}", how):
        return
    vs = variants(run)
    missing = [a for a in AGENTS if a not in vs]
    if not rep.check(not missing, "the run has the ACC and PET variants",
                     f"{missing} missing: keep `agents: [secn1, secn2, acc, pet]` in switch.yaml "
                     "and run it again"):
        return
    incomplete = [n for n, v in vs.items()
                  if not json.loads((v / "status.json").read_text()).get("complete")]
    rep.check(not incomplete, "every variant ran to the end",
              f"{incomplete} stopped early (see their log.txt); run again")
    silent = [a for a in AGENTS if mod.load_decisions(vs[a]).empty]
    rep.check(not silent, "ACC and PET made decisions",
              f"{silent} never set a threshold: see log.txt of that variant (a missing or "
              "broken checkpoint p4cc/data/agents/<agent>.npz?) and tell your teacher")
    ref: dict[str, dict[str, dict[str, float]]] = {}
    for name, v in vs.items():
        t_sw, duration = mod.switch_time(v)
        span = min(t_sw, duration - t_sw)
        csv = v / "agent.csv"
        d = pd.read_csv(csv) if csv.is_file() and csv.stat().st_size else sample()[:0]
        ref[name] = {"before": ref_window(d, t_sw - span, t_sw),
                     "after": ref_window(d, t_sw, t_sw + span)}
    try:
        got = {name: mod.summarize(v) for name, v in vs.items()}
    except Exception as exc:
        rep.fail("summarize on your run", f"raised {type(exc).__name__}: {exc}")
        return
    wrong = [f"{n}.{w}" for n in vs for w in ("before", "after")
             if not same((got.get(n) or {}).get(w), ref[n][w])]
    first = wrong[0].split(".")[0] if wrong else ""
    rep.check(not wrong, "your analysis agrees with the run's agent.csv",
              f"{wrong} differ from the check's computation: for {first} it expects "
              f"{ref.get(first)}, your summarize gave {got.get(first)}")
    out = run / "decisions.yaml"
    try:
        doc = yaml.safe_load(out.read_text()) if out.is_file() else None
    except yaml.YAMLError:
        doc = None
    stale = [f"{n}.{w}" for n in vs for w in ("before", "after")
             if not same(((doc or {}).get(n) or {}).get(w), ref[n][w], tol=1e-3)]
    rep.check(doc is not None and not stale, "decisions.yaml describes this run",
              f"make analysis (python analysis.py {run}) after your last run"
              + (f"; differing: {stale}" if doc is not None else ""))
    for a in AGENTS:
        b, f = ref[a]["before"], ref[a]["after"]
        print(f"      {a}: before Kmin {b['kmin_kb']:.1f} kB Kmax {b['kmax_kb']:.1f} kB "
              f"Pmax {b['pmax']:.2f} ({b['changes']} changes); after Kmin {f['kmin_kb']:.1f} "
              f"Kmax {f['kmax_kb']:.1f} Pmax {f['pmax']:.2f} ({f['changes']} changes)")


def main() -> int:
    lab = Path(__file__).resolve().parent
    p = parser(lab)
    p.add_argument("--run", type=Path, default=lab / "runs" / "lab5-switch",
                   help="the run directory of switch.yaml (default: runs/lab5-switch)")
    args = p.parse_args()
    src = checked_src(args.src)
    rep = Report("lab 5 (learning the threshold)")
    mod = load_student(src / "analysis.py", rep)
    if mod is None:
        return rep.done()
    if known_answers(mod, rep):
        check_run(mod, args.run.resolve(), rep)
    else:
        rep.skip("your run", "complete analysis.py first (the steps above)")
    ans = (src / "answers.md").read_text() if (src / "answers.md").is_file() else ""
    low = ans.lower()
    rep.check("TODO" not in ans and len(ans.split()) >= WORDS
              and all(k in low for k in ("acc", "pet", "kmin")),
              "answers.md answers the questions",
              f"answer the README's questions in answers.md (>= {WORDS} words, naming ACC, "
              "PET and the thresholds (Kmin ...) they chose before and after the switch)")
    return rep.done()


if __name__ == "__main__":
    sys.exit(main())
