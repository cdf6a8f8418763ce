"""The fidelity verdicts of stored runs (``fidelity.json``, written by the bmv2 backend:
p4cc.experiment.bmv2.fidelity), as the first section of ``p4cc report``.

A run without a verdict (the simulator, older runs) is "not checked"; an unfaithful run
is listed with its failed checks and first intervals, and its columns in every
comparison table carry ``UNFAITHFUL_MARK`` so its numbers are never mixed in silently.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from p4cc.analysis.runs import Run

UNFAITHFUL_MARK = " (UNFAITHFUL)"
#: violations quoted per unfaithful run (all are in its fidelity.csv)
QUOTED = 5


def fidelity(run: Run) -> dict[str, Any] | None:
    path = run.path / "fidelity.json"
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data


def unfaithful(runs: Sequence[Run], labels: Sequence[str]) -> set[str]:
    out = set()
    for lab, r in zip(labels, runs, strict=True):
        f = fidelity(r)
        if f is not None and not f.get("faithful", False):
            out.add(lab)
    return out


def section(runs: Sequence[Run], labels: Sequence[str]) -> list[str]:
    """Markdown lines: one line per run, then the reasons of the unfaithful ones."""
    lines = ["## Fidelity", ""]
    bad = []
    for lab, r in zip(labels, runs, strict=True):
        f = fidelity(r)
        if f is None:
            what = ("simulator: no emulation to check" if r.backend == "sim"
                    else "no verdict (run before issue 10, or not bmv2)")
            lines.append(f"* `{lab}`: {what}")
            continue
        lines.append(f"* `{lab}`: **{f.get('summary', '?')}**")
        if not f.get("faithful", False):
            bad.append((lab, f))
    for lab, f in bad:
        lines += ["", f"### `{lab}` is unfaithful", "",
                  "| check | intervals checked | violated | fraction |", "|---|---|---|---|"]
        for name, c in f.get("checks", {}).items():
            if not c.get("ok", True):
                lines.append(f"| {name} | {c['checked']} | {c['violations']} | "
                             f"{c['fraction']:.3f} |")
        lines += ["", "First intervals (all in its `fidelity.csv`):", ""]
        for v in f.get("violations", [])[:QUOTED]:
            lines.append(f"* t = {float(v['t_s']):.2f} s, {v['check']} at {v['where']}: "
                         f"{v['reason']}")
    if bad:
        lines += ["", f"Columns of unfaithful runs are marked `{UNFAITHFUL_MARK.strip()}` in "
                  "every table below: their numbers are not a faithful emulation and must "
                  "not be compared as if they were."]
    return [*lines, ""]
