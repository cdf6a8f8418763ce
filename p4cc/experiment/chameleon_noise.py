"""How noisy CHAMELEON's objective is under a FIXED setting (docs/results.md, CHAMELEON,
"The objective's noise").

The greedy tuner (poster §2.2) keeps a direction when a round's metric gains at least β
over the previous round's, ``(m_i - m_{i-1}) / m_{i-1} >= β``, and reverses when it
falls.  If the metric moves from round to round by more than β while nothing changes,
the tuner walks on noise: a "gain" is chance.  This command plays the tuning workload
(the all-to-all repeated every long period, as :mod:`p4cc.experiment.chameleon_sim_eval`'s
tuning runs do) under one setting that never changes -- served by the same controller
with ``tune=0``, so the objective is computed exactly as in a tuning run -- and reports,
per seed, the metric's mean, standard deviation and coefficient of variation over the
rounds, the spread of the round-to-round gain, and how often a round would "improve"
by at least each β of :data:`BETAS` or "worsen" by chance.

    python -m p4cc.experiment.chameleon_noise --backend sim \\
        --topology leafspine,spines=2,leaves=2,hosts=4 --size 1500000 --rounds 40
    sudo python -m p4cc.experiment.chameleon_noise --backend bmv2 --scale testbed \\
        --topology dumbbell,left=2,right=1,bottleneck=0.5 --size 100000 --rounds 40

Each seed is one run directory under ``--out`` (``<setting>_seed<k>``; on bmv2 with its
fidelity verdict) and one ``noise-<setting>-seed<k>.json``; the table over seeds is
printed at the end.  The first ``--skip`` rounds (default 1: reporters connect and the
first collective starts in it) are left out of the figures.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from p4cc.analysis.stats import mean_ci
from p4cc.errors import ConfigError, P4ccError
from p4cc.experiment import chameleon_eval_bmv2 as bm
from p4cc.experiment.chameleon_workload import BASELINES, all_to_all, play, run_spec
from p4cc.scale import get_scale
from p4cc.topo.spec import parse_topo

#: the tuner thresholds the report counts chance "gains" for (the simulator evaluation's
#: β = 0.01, the BMv2 evaluation's 0.2, and two between)
BETAS = (0.01, 0.05, 0.1, 0.2)


def noise_stats(metric: Sequence[float] | np.ndarray,
                betas: Sequence[float] = BETAS) -> dict[str, float]:
    """Figures of a metric observed round after round under a fixed setting.

    ``cv`` = sd / mean over the rounds; ``gain_*`` describe the tuner's gain
    ``(m_i - m_{i-1}) / m_{i-1}`` between consecutive rounds (pairs whose earlier round
    is not positive are left out: no gain is defined); ``p_gain_ge_<β>`` is the share of
    pairs that gain at least β (a tuner with that β would keep a direction by chance)
    and ``p_worse`` the share that fall (it would reverse by chance).  Non-finite values
    are dropped; fewer than three left is a ValueError.
    """
    m = np.asarray(metric, dtype=float)
    m = m[np.isfinite(m)]
    if len(m) < 3:
        raise ValueError(f"need at least 3 finite rounds, got {len(m)}")
    prev, cur = m[:-1], m[1:]
    ok = prev > 0
    gain = (cur[ok] - prev[ok]) / prev[ok]
    mean, sd = float(m.mean()), float(m.std(ddof=1))
    out = {"rounds": float(len(m)), "mean": mean, "sd": sd,
           "cv": sd / mean if mean > 0 else float("nan"),
           "gain_pairs": float(len(gain)),
           "gain_mean": float(gain.mean()) if len(gain) else float("nan"),
           "gain_sd": float(gain.std(ddof=1)) if len(gain) > 1 else float("nan"),
           "p_worse": float(np.mean(gain < 0)) if len(gain) else float("nan")}
    for b in betas:
        out[f"p_gain_ge_{b:g}"] = float(np.mean(gain >= b)) if len(gain) else float("nan")
    return out


def fixed_rounds(run: Path, skip: int = 1) -> pd.DataFrame:
    """The rounds of a ``tune=0`` run's ``chameleon`` table (rows ``param == fixed``),
    without the first ``skip``; a ConfigError if the run has none (not a fixed run)."""
    rows = pd.read_csv(run / "chameleon.csv")
    fixed = rows[rows["param"] == "fixed"]
    if not len(fixed):
        raise ConfigError(f"{run / 'chameleon.csv'} has no 'fixed' rows: not a tune=0 run")
    return fixed.iloc[skip:]


def agent_name(setting: str, long_s: float, short_s: float) -> str:
    """The controller that serves ``setting`` (a name of BASELINES) and never steps."""
    if setting not in BASELINES:
        raise ConfigError(f"unknown setting {setting!r}; choose one of {sorted(BASELINES)}")
    host_set, ecn = BASELINES[setting]
    return f"chameleon:long={long_s:g},short={short_s:g},tune=0,initial={host_set},ecn={ecn}"


def run_seed(backend: str, topology: str, setting: str, seed: int, size_bytes: int,
             rounds: int, out: Path, long_s: float | None = None, scale: str = "testbed",
             skip: int = 1, closed: bool = True) -> dict[str, Any]:
    """One run of ``rounds`` long periods under ``setting`` and its :func:`noise_stats`."""
    if rounds < skip + 3:
        raise ConfigError(f"--rounds {rounds}: need at least {skip + 3} (skip + 3)")
    run_scale = "paper" if backend == "sim" else scale
    long_s = long_s or get_scale(run_scale).time(bm.PAPER_LONG_S)
    short_s = long_s / 10
    # the sim evaluation's switches poll every short period, the BMv2 one's every
    # POLL_FRACTION of the long period (chameleon_eval_bmv2: the read spread of a poll)
    interval_s = short_s if backend == "sim" else long_s * bm.POLL_FRACTION
    agent = agent_name(setting, long_s, short_s)
    spec = run_spec(f"chameleon_noise_{setting}", backend, topology, run_scale, seed,
                    (rounds + 1) * long_s, agent, BASELINES[setting][0], interval_s)
    sched = all_to_all(parse_topo(topology, run_scale), size_bytes, rounds + 1, long_s,
                       jitter_s=long_s / 100, seed=seed, closed=closed)
    path = play(spec, out / f"{setting}_seed{seed}", sched)
    rows = fixed_rounds(path, skip)
    res: dict[str, Any] = {"seed": seed, "setting": setting, "backend": backend,
                           "long_s": long_s, "skip": skip, "closed": closed,
                           "run": str(path),
                           **noise_stats(rows["metric"].to_numpy(dtype=float))}
    if backend == "bmv2":
        res.update(bm.verdict(path))
    return res


def table(results: Sequence[dict[str, Any]]) -> str:
    """Mean ± 95 % CI over seeds of the figures that decide a β."""
    df = pd.DataFrame(results)
    cols = ["mean", "cv", "gain_sd", "p_worse"] + [f"p_gain_ge_{b:g}" for b in BETAS]
    lines = ["| figure | mean ± 95 % CI over seeds |", "|---|---|"]
    for c in cols:
        m, half, n = mean_ci(df[c].to_numpy(dtype=float))
        lines.append(f"| {c} | {m:.3g} ± {half:.2g} (n={n}) |")
    if "faithful" in df.columns:
        lines.append(f"\nfaithful runs: {int(df['faithful'].sum())} of {len(df)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=("sim", "bmv2"), default="sim",
                    help="sim: paper scale; bmv2: --scale, a real run per seed")
    ap.add_argument("--topology", default="leafspine,spines=2,leaves=2,hosts=4")
    ap.add_argument("--setting", default="default",
                    help=f"the fixed setting: one of {sorted(BASELINES)}")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--size", type=int, default=1_500_000,
                    help="bytes per flow of the all-to-all (testbed bytes on bmv2)")
    ap.add_argument("--rounds", type=int, default=40, help="long periods (rounds) to play")
    ap.add_argument("--long", type=float, default=None,
                    help="long period (s); default 5 ms paper time (scaled on bmv2)")
    ap.add_argument("--scale", default="testbed", help="bmv2: the scale of the runs")
    ap.add_argument("--skip", type=int, default=1, help="first rounds left out")
    ap.add_argument("--open-loop", action="store_true",
                    help="the all-to-all every long period whatever is still running "
                         "(as tuning runs did before session 16)")
    ap.add_argument("--out", default="runs/chameleon_noise")
    a = ap.parse_args(argv)
    get_scale(a.scale)  # an unknown scale is refused before anything runs
    agent_name(a.setting, 1.0, 0.1)  # likewise an unknown setting
    if a.skip < 0:
        raise ConfigError(f"--skip {a.skip}: must be >= 0")
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for seed in a.seeds:
        res = run_seed(a.backend, a.topology, a.setting, seed, a.size, a.rounds, out,
                       a.long, a.scale, a.skip, not a.open_loop)
        (out / f"noise-{a.setting}-seed{seed}.json").write_text(
            json.dumps({"args": vars(a), **res}, indent=1, default=float))
        print(json.dumps(res, default=float), flush=True)
        results.append(res)
    print(table(results))
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except P4ccError as exc:  # bad arguments: the reason, no traceback
        print(f"chameleon_noise: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
