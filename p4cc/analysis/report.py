"""``p4cc report RUN... [--out DIR] [--baseline NAME]``: Markdown + PNG + CSV tables."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from p4cc.analysis import fidelity, plots
from p4cc.analysis import metrics as an
from p4cc.analysis.runs import Run, find_runs
from p4cc.errors import P4ccError

HEADLINE = ["fct_all_avg_s", "fct_all_p99_s", "fct_mice_avg_s", "fct_mice_p99_s",
            "fct_elephant_avg_s", "slowdown_p50", "slowdown_p99", "qlen_avg_bytes",
            "qlen_std_bytes", "utilization", "iops"]


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
            return f"{v:.3e}"
        return f"{v:.4g}"
    return str(v)


def markdown_table(df: pd.DataFrame, index: bool = True) -> str:
    """A GitHub-flavoured Markdown table (pandas' to_markdown needs tabulate)."""
    if df.empty:
        return "_(no data)_\n"
    cols = ([str(df.index.name or "")] if index else []) + [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for idx, row in df.iterrows():
        cells = ([_fmt(idx if not isinstance(idx, tuple) else ":".join(map(str, idx)))]
                 if index else []) + [_fmt(v) for v in row.tolist()]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def _scale_section(run: Run) -> list[str]:
    s = run.meta.get("scale", {})
    mice, eleph = an.class_thresholds(run)
    size_scale = an.size_scale_of(run)
    scales = {float(w.get("size_scale", 1.0)) for w in run.meta.get("workloads", [])
              if w.get("type") != "bulk"}
    lines = [
        f"Scale `{s.get('name')}`: host link {float(s.get('link_rate_bps', 0)) / 1e6:g} Mb/s "
        f"(paper {float(s.get('paper_link_rate_bps', 0)) / 1e9:g} Gb/s), base RTT "
        f"{float(s.get('base_rtt_s', 0)) * 1e3:g} ms (paper "
        f"{float(s.get('paper_base_rtt_s', 0)) * 1e6:g} µs); rate x{_fmt(s.get('rate_factor'))}, "
        f"time x{_fmt(s.get('time_factor'))}, BDP x{_fmt(s.get('bdp_factor'))}.",
        "",
        (f"Flow sizes were multiplied by {size_scale:g}, so the paper's size classes are "
         f"scaled the same way: mice < {mice:,.0f} B (paper 100 KB), elephants >= "
         f"{eleph:,.0f} B (paper 10 MB)." if len(scales) <= 1 else
         f"Workloads used different flow-size scales {sorted(scales)}; the size classes keep "
         f"the paper's thresholds: mice < {mice:,.0f} B, elephants >= {eleph:,.0f} B."),
    ]
    pv = run.meta.get("paper_values") or []
    if pv:
        lines += ["", "Times given at paper scale (paper value -> value used):", ""]
        lines += [f"* `{p['field']}`: {p['paper_s']:g} s -> {p['used_s']:g} s" for p in pv]
    return lines


def build_report(runs: Sequence[Run], out: Path, baseline: str | None = None,
                 groups: int = 20) -> Path:
    """Write ``report.md``, PNGs and CSV tables into ``out``; return the report path."""
    if not runs:
        raise P4ccError("no runs to report on")
    out.mkdir(parents=True, exist_ok=True)
    labels = an.run_labels(runs)
    base = baseline or labels[0]
    if base not in labels:
        raise P4ccError(f"--baseline {base!r} is not one of the runs {labels}")
    values, norm = an.compare(runs, base)
    values.to_csv(out / "summary.csv")
    norm.to_csv(out / "normalised.csv")
    md = [f"# p4cc report: {', '.join(sorted({str(r.meta.get('name')) for r in runs}))}", "",
          f"Generated {time.strftime('%Y-%m-%d %H:%M:%S')} from {len(runs)} run(s); "
          f"baseline `{base}`.", ""]
    md += fidelity.section(runs, labels)  # first: whether the numbers below can be trusted
    bad = fidelity.unfaithful(runs, labels)
    shown = {lab: lab + fidelity.UNFAITHFUL_MARK for lab in bad}
    info = pd.DataFrame([{
        "run": lab, "path": str(r.path), "backend": r.backend or None,
        "agent": r.meta.get("run", {}).get("agent"), "seed": r.meta.get("run", {}).get("seed"),
        "complete": r.complete, "reason": r.status.get("reason", "")}
        for lab, r in zip(labels, runs, strict=True)]).set_index("run")
    md += ["## Runs", "", markdown_table(info)]
    incomplete = [lab for lab, r in zip(labels, runs, strict=True) if not r.complete]
    if incomplete:
        md += [f"**Incomplete runs** (partial data, read with care): {', '.join(incomplete)}",
               ""]
    md += ["## Scale", "", *_scale_section(runs[0]), ""]
    desc = runs[0].meta.get("description")
    if desc:
        md += ["## What this reproduces", "", str(desc), ""]
    md += ["## Summary", "", markdown_table(values.rename(columns=shown)), "",
           f"### Normalised to `{base}` (1 = same as baseline; lower FCT/queue is better)", "",
           markdown_table(norm.rename(columns=shown)), ""]
    figs: list[tuple[str, Path | None]] = [
        ("Headline metrics, normalised", plots.normalised_bars(norm, HEADLINE,
                                                               out / "normalised.png", base))]
    sd_groups: dict[str, pd.DataFrame] = {}
    fcts: dict[str, pd.Series] = {}
    sections: list[str] = []
    for lab, r in zip(labels, runs, strict=True):
        scale = r.meta.get("scale", {})
        mice, eleph = an.class_thresholds(r)
        flows = an.sized_flows(r)
        fct = an.fct_by_class(flows, mice, eleph)
        fct.to_csv(out / f"fct_{_slug(lab)}.csv")
        sections += [f"## Run `{shown.get(lab, lab)}`", "", "### FCT by size class (seconds)", "",
                     markdown_table(fct)]
        by_size = an.fct_by_size(flows)
        if not by_size.empty:
            sections += ["### FCT by message size (seconds)", "", markdown_table(by_size)]
        if len(flows):
            sd = an.slowdown(flows, float(scale.get("link_rate_bps", 1e7)),
                             float(scale.get("base_rtt_s", 0)), int(scale.get("pkt_bytes", 1000)))
            g = an.slowdown_groups(flows, sd, groups)
            g.to_csv(out / f"slowdown_{_slug(lab)}.csv", index=False)
            sd_groups[lab] = g
            fcts[lab] = flows["fct_s"]
            sections += [f"### Slowdown by size group ({100 // groups} % of flows each)", "",
                         markdown_table(g.set_index("group"))]
        q = an.queue_stats(r.telemetry)
        if not q.empty:
            q.to_csv(out / f"queues_{_slug(lab)}.csv")
            top = q.sort_values("qlen_avg_bytes", ascending=False).head(8)
            sections += ["### Busiest ports", "", markdown_table(top)]
            figs.append((f"Queue and thresholds, `{lab}`", plots.queue_timeseries(
                r.telemetry, out / f"queue_{_slug(lab)}.png", lab)))
        io = an.iops(r)
        if not io.empty:
            sections += ["### IOPS", "", markdown_table(io, index=False)]
    figs.insert(1, ("Slowdown by size group", plots.slowdown_curves(sd_groups,
                                                                    out / "slowdown.png")))
    figs.insert(2, ("FCT CDF", plots.fct_cdf(fcts, out / "fct_cdf.png")))
    md += ["## Figures", ""]
    md += [f"### {title}\n\n![{title}]({p.name})\n" for title, p in figs if p is not None]
    md += sections
    path = out / "report.md"
    path.write_text("\n".join(md))
    return path


def report(paths: Sequence[str | Path], out: str | Path | None = None,
           baseline: str | None = None) -> Path:
    """Open the runs under ``paths`` and write the report (default: ``<first>/report``
    for one experiment dir, else ``report/`` in the current directory)."""
    runs = find_runs(paths)
    if out is None:
        first = Path(paths[0])
        out = (first if not (first / "spec.resolved.yaml").is_file() else first.parent) / "report"
    return build_report(runs, Path(out), baseline)
