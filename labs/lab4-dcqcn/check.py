"""Lab 4 check: your prediction.yaml against p4cc's DCQCN model (p4cc.hostcc.dcqcn).

The episode: one flow at line rate gets a CNP every 3 α-periods for 30 periods, then none.
Three numbers describe it: α 10 periods after the episode, the lowest rate, and the rate
40 periods after the episode.  The check runs the episode with the default parameters
(``dcqcn-paper`` at the testbed scale) and with your one change, and compares the
directions with what you predicted.
"""

from __future__ import annotations

import sys
from dataclasses import fields, replace
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from labcheck import Report, source_dir

from p4cc.hostcc import dcqcn
from p4cc.hostcc.dcqcn_core import init_state
from p4cc.hostcc.dcqcn_params import DcqcnParams, dcqcn_params
from p4cc.scale import get_scale

METRICS = {"alpha_after": ("higher", "lower", "same"), "rate_min": ("higher", "lower", "same"),
           "rate_recovered": ("higher", "lower", "same")}
SAME_REL = 0.02  # |change| below 2 % counts as "same"


def episode(p: DcqcnParams) -> dict[str, float]:
    period = p.alpha_period_s
    cnps = [3 * period * k for k in range(1, 11)]
    s = init_state(1, p)
    rates, alpha_after, rate_recovered = [], 0.0, 0.0
    for i in range(4 * 80):
        t = i * period / 4
        while cnps and cnps[0] <= t:
            s = dcqcn.on_cnp(s, p, cnps.pop(0))
        s = dcqcn.advance(s, p, t)
        row = dcqcn.trace_row(s)
        rates.append(row["rate_bps"])
        if t <= 43 * period:
            alpha_after = row["alpha"]
        if t <= 73 * period:
            rate_recovered = row["rate_bps"]
    return {"alpha_after": alpha_after, "rate_min": min(rates),
            "rate_recovered": rate_recovered}


def direction(new: float, old: float) -> str:
    if abs(new - old) <= SAME_REL * max(abs(old), 1e-12):
        return "same"
    return "higher" if new > old else "lower"


def main() -> int:
    src = source_dir(Path(__file__).resolve().parent)
    rep = Report("lab 4 (DCQCN)")
    path = src / "prediction.yaml"
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        rep.fail(f"read {path.name}", f"it must be valid YAML ({exc})")
        return rep.done()
    names = {f.name for f in fields(DcqcnParams)} - {"name", "line_rate_bps"}
    param = doc.get("parameter")
    if not rep.check(param in names, "prediction.yaml names one DCQCN parameter",
                     f"set `parameter:` to one of {sorted(names)} (README step 2)"):
        return rep.done()
    scale = get_scale("testbed")
    base = dcqcn_params("dcqcn-paper", scale.link_rate_bps, scale)
    try:
        changed = replace(base, **{param: type(getattr(base, param))(doc.get("new_value"))})
    except Exception as exc:
        rep.fail("new_value is a valid value", f"`new_value: {doc.get('new_value')}` for "
                 f"{param} (default {getattr(base, param)}): {exc}")
        return rep.done()
    rep.check(getattr(changed, param) != getattr(base, param), f"{param} actually changes",
              f"choose a new_value different from the default {getattr(base, param)}")
    predicted = doc.get("prediction") or {}
    old, new = episode(base), episode(changed)
    for m, allowed in METRICS.items():
        guess = str(predicted.get(m, "TODO")).lower()
        if guess not in allowed:
            rep.fail(f"prediction for {m}", f"write one of {list(allowed)} under "
                     "`prediction:` before you measure (README step 3)")
            continue
        got = direction(new[m], old[m])
        rep.check(guess == got, f"{m}: predicted {guess}",
                  f"the model gives {got} ({old[m]:.4g} -> {new[m]:.4g}); re-read the "
                  "α and rate-increase formulas in the README and explain why in answers.md")
    ans = (src / "answers.md").read_text() if (src / "answers.md").is_file() else ""
    rep.check("TODO" not in ans and len(ans.split()) >= 40, "answers.md answers the questions",
              "answer the README's questions in answers.md (at least a few sentences each)")
    return rep.done()


if __name__ == "__main__":
    sys.exit(main())
