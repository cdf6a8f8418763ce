"""The combined report of a sweep: means and 95 % CIs over seeds per grid point and agent.

Reads ``sweep.json`` (p4cc.experiment.sweep) and every complete run's headline metrics
(``p4cc.analysis.metrics.summary``), and writes into ``<sweep>/report/``:

* ``runs.csv``: one row per complete run: point, the grid values, agent, seed, its
  fidelity verdict (``faithful``: true / false, empty for a run without one, such as the
  simulator's; p4cc.analysis.fidelity), the commit it ran (``git_commit``,
  ``git_dirty``: its ``versions.json``) and metrics;
* ``sweep.csv``: one row per (point, agent): the grid values, ``runs``, ``unfaithful``
  and for each metric ``<metric>_mean``, ``<metric>_ci95`` (half-width, Student t over
  seeds, p4cc.analysis.stats.mean_ci) and ``<metric>_n``, **over the runs not judged
  unfaithful** (issue 10: a run whose emulation fell behind is not a result);
* ``sweep.md``: the fidelity of the runs first, then the commits the runs ran (a
  warning when there is more than one, or a modified tree: a sweep's runs should come
  from one commit), then a table per metric (points x agents, "mean ± half-width") and
  its plot;
* ``<metric>.png``: the metric against the first grid key, one line per agent (and per
  value of the other grid keys) with CI error bars.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from p4cc.analysis.fidelity import fidelity
from p4cc.analysis.metrics import summary
from p4cc.analysis.report import markdown_table
from p4cc.analysis.runs import open_run
from p4cc.analysis.stats import mean_ci
from p4cc.errors import P4ccError
from p4cc.experiment.sweep import SWEEP_FILE, is_complete

#: the metrics aggregated (keys of p4cc.analysis.metrics.summary), in report order
METRICS = ("fct_all_avg_s", "fct_all_p99_s", "fct_mice_avg_s", "fct_mice_p99_s",
           "fct_elephant_avg_s", "fct_elephant_p99_s", "slowdown_p50", "slowdown_p99",
           "qlen_avg_bytes", "qlen_std_bytes", "utilization", "drops_pkts", "marked_pkts",
           "pfc_pause_s", "pfc_host_pause_s")
LEVEL = 0.95


def load_sweep(root: Path) -> dict[str, Any]:
    path = root / SWEEP_FILE
    if not path.is_file():
        raise P4ccError(f"{root} is not a sweep directory (no {SWEEP_FILE})")
    info: dict[str, Any] = json.loads(path.read_text())
    return info


def run_table(root: Path, info: dict[str, Any]) -> pd.DataFrame:
    """Per complete run: point, grid values, agent, seed and the METRICS."""
    values = {p["name"]: p["values"] for p in info["points"]}
    rows = []
    for r in info["runs"]:
        path = root / r["dir"]
        if not is_complete(path):
            continue
        run = open_run(path)
        verdict = fidelity(run)
        s = summary(run)
        commit, dirty = run_commit(path)
        rows.append({"point": r["point"], **values[r["point"]], "agent": r["agent"],
                     "seed": r["seed"],
                     "faithful": None if verdict is None else bool(verdict.get("faithful")),
                     "fidelity": "" if verdict is None else str(verdict.get("summary", "")),
                     "git_commit": commit, "git_dirty": dirty,
                     **{m: s.get(m, math.nan) for m in METRICS}})
    keys = [g["key"] for g in info["grid"]]
    return pd.DataFrame(rows, columns=["point", *keys, "agent", "seed", "faithful",
                                       "fidelity", "git_commit", "git_dirty", *METRICS])


def run_commit(path: Path) -> tuple[str, bool | None]:
    """The git commit a run ran and whether its tree was modified (its versions.json;
    ``("", None)`` when the run has none or it names no commit)."""
    try:
        v = json.loads((path / "versions.json").read_text())
    except (OSError, ValueError):
        return "", None
    dirty = v.get("git_dirty")
    return str(v.get("git_commit") or ""), None if dirty is None else bool(dirty)


def _runs(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"


def provenance_section(runs: pd.DataFrame) -> list[str]:
    """Markdown lines: the commits the runs ran, and a warning when a sweep mixes
    commits or ran from a modified tree (its numbers may then not come from one code)."""
    if "git_commit" not in runs or runs.empty:
        return []
    named = runs[runs["git_commit"].fillna("").astype(str) != ""]
    counts = named["git_commit"].astype(str).value_counts()
    dirty = int(named["git_dirty"].map(lambda v: str(v).strip().lower() == "true").sum())
    lines = ["## Software", ""]
    if counts.empty:
        return [*lines, "No run names its git commit (no `versions.json`, or no git).", ""]
    lines.append(", ".join(f"`{str(c)[:10]}` ({_runs(int(n))})" for c, n in counts.items())
                 + (f"; {_runs(len(runs) - len(named))} without one"
                    if len(named) < len(runs) else "") + ".")
    if len(counts) > 1:
        lines += ["", f"**Warning:** the runs come from {len(counts)} commits; compare "
                      "them only if the code they ran is the same (`runs.csv`, "
                      "`git_commit`)."]
    if dirty:
        lines += ["", f"**Warning:** {_runs(dirty)} ran from a modified tree "
                      "(`git_dirty`); their code is not a commit's."]
    return [*lines, ""]


def _unfaithful(runs: pd.DataFrame) -> pd.Series:
    """True where a run's verdict says unfaithful (no verdict, no column: False)."""
    if "faithful" not in runs:
        return pd.Series(False, index=runs.index)
    return runs["faithful"].map(_said_unfaithful).astype(bool)


def _said_unfaithful(v: Any) -> bool:
    """A ``faithful`` cell as written here or read back from runs.csv."""
    if isinstance(v, str):
        return v.strip().lower() == "false"
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return False
    return not bool(v)


def aggregate(runs: pd.DataFrame, keys: list[str], level: float = LEVEL) -> pd.DataFrame:
    """Mean, CI half-width and count of each metric per (point, agent), in run order,
    over the runs not judged unfaithful (``unfaithful`` counts the others)."""
    out = []
    bad = _unfaithful(runs)
    for (point, agent), g in runs.groupby(["point", "agent"], sort=False):
        kept = g[~bad[g.index]]
        row: dict[str, Any] = {"point": point, **{k: g[k].iloc[0] for k in keys},
                               "agent": agent, "runs": len(g),
                               "unfaithful": int(bad[g.index].sum())}
        for m in METRICS:
            mean, half, n = mean_ci(kept[m].to_numpy(float), level)
            row |= {f"{m}_mean": mean, f"{m}_ci95": half, f"{m}_n": n}
        out.append(row)
    cols = ["point", *keys, "agent", "runs", "unfaithful"] + [f"{m}_{s}" for m in METRICS
                                                for s in ("mean", "ci95", "n")]
    return pd.DataFrame(out, columns=cols)


def fidelity_section(runs: pd.DataFrame) -> list[str]:
    """Markdown lines: how many runs carry a verdict and are faithful, and every
    unfaithful run with its failed checks (left out of every table below)."""
    judged = runs["faithful"].notna() if "faithful" in runs else pd.Series(False)
    if not judged.any():
        return ["## Fidelity", "", "No run carries a fidelity verdict (simulator runs, or "
                "runs from before issue 10).", ""]
    bad = _unfaithful(runs)
    lines = ["## Fidelity", "",
             f"{int(judged.sum() - bad.sum())} of {int(judged.sum())} runs with a verdict "
             f"are faithful.", ""]
    if bad.any():
        lines += ["**Left out of every table below** (their emulation fell behind; "
                  "`runs.csv` keeps them, with `faithful` = false):", ""]
        for _, r in runs[bad].iterrows():
            lines.append(f"* `{r['point']}` / `{r['agent']}` seed {r['seed']}: "
                         f"{r['fidelity']}")
        lines.append("")
    return lines


def _cell(mean: float, half: float) -> str:
    if math.isnan(mean):
        return "–"
    return f"{mean:.4g}" if math.isnan(half) else f"{mean:.4g} ± {half:.2g}"


def metric_table(agg: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Points x agents, cells "mean ± half-width" ("(n = k)" after it where unfaithful
    runs were left out)."""
    left_out = agg["unfaithful"] if "unfaithful" in agg else pd.Series(0, index=agg.index)
    t = agg.assign(cell=[_cell(a, b) + (f" (n = {n})" if lo else "") for a, b, n, lo in zip(
        agg[f"{metric}_mean"], agg[f"{metric}_ci95"], agg[f"{metric}_n"], left_out,
        strict=True)])
    return t.pivot(index="point", columns="agent", values="cell").reindex(
        pd.unique(agg["point"]))


def _x_values(agg: pd.DataFrame, key: str) -> tuple[list[float], list[str] | None]:
    vals = list(agg[key])
    try:
        return [float(v) for v in vals], None
    except (TypeError, ValueError):
        labels = [str(v) for v in pd.unique(agg[key])]
        return [float(labels.index(str(v))) for v in vals], labels


def plot_metric(agg: pd.DataFrame, keys: list[str], metric: str, path: Path) -> Path | None:
    """``metric`` against the first grid key; a line (with CI bars) per agent and value
    of the other keys."""
    if not keys or agg[f"{metric}_mean"].notna().sum() == 0:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs, labels = _x_values(agg, keys[0])
    data = agg.assign(_x=xs)
    fig, ax = plt.subplots(figsize=(6, 4))
    for group, g in data.groupby(["agent", *keys[1:]], sort=False):
        parts = group if isinstance(group, tuple) else (group,)
        name = ", ".join([str(parts[0])] + [f"{k}={v}" for k, v in
                                            zip(keys[1:], parts[1:], strict=True)])
        g = g.sort_values("_x")
        ax.errorbar(g["_x"], g[f"{metric}_mean"], yerr=g[f"{metric}_ci95"].fillna(0.0),
                    marker="o", capsize=3, label=name)
    if labels is not None:
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels)
    ax.set_xlabel(keys[0])
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} (mean, {LEVEL:.0%} CI over seeds)")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def build_sweep_report(root: str | Path, out: str | Path | None = None) -> Path:
    """Write runs.csv, sweep.csv, sweep.md and a PNG per metric; return sweep.md."""
    root = Path(root)
    info = load_sweep(root)
    keys = [g["key"] for g in info["grid"]]
    out_dir = Path(out) if out else root / "report"
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = run_table(root, info)
    runs.to_csv(out_dir / "runs.csv", index=False)
    agg = aggregate(runs, keys)
    agg.to_csv(out_dir / "sweep.csv", index=False)
    grid = ", ".join(f"`{g['key']}` = {', '.join(g['texts'])}" for g in info["grid"])
    md = [f"# p4cc sweep: {info['name']}", "",
          f"Spec `{info['source']}`, backend `{info['backend']}`; grid {grid or '(none)'}; "
          f"agents {', '.join(info['agents'])}; seeds {info['seeds']}.", "",
          f"{len(runs)} of {len(info['runs'])} runs complete.  Cells: mean ± half-width of "
          f"the {LEVEL:.0%} confidence interval over seeds (Student t, n-1 degrees of "
          f"freedom); no ± with one seed; over the runs not judged unfaithful.", ""]
    md += fidelity_section(runs)
    md += provenance_section(runs)
    for m in METRICS:
        if agg.empty or agg[f"{m}_mean"].notna().sum() == 0:
            continue
        md += [f"## {m}", "", markdown_table(metric_table(agg, m))]
        png = plot_metric(agg, keys, m, out_dir / f"{m}.png")
        if png is not None:
            md += [f"![{m}]({png.name})", ""]
    path = out_dir / "sweep.md"
    path.write_text("\n".join(md))
    return path
