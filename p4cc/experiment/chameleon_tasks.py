"""CHAMELEON's evaluation, one task per seed, on the sweep's executors.

Each seed of ``python -m p4cc.experiment.chameleon_eval`` (tune, then evaluate every
setting: p4cc.experiment.chameleon_sim_eval / chameleon_eval_bmv2) is one :class:`SeedTask`
run by the executors ``p4cc sweep`` uses (p4cc.experiment.sweep_exec): processes of a
local pool (``--executor pool``, the default) or Ray tasks (``--executor ray``, a
cluster with ``--address``), with the sweep's progress view.  A ``sim`` evaluation runs
its seeds side by side (one per CPU), a ``bmv2`` one a seed at a time (it needs the
whole machine; on Ray one per node that offers the ``bmv2`` resource).

Every task writes ``results-seed<k>.json`` (the arguments that produced it, the tuning
run's figures, one row per evaluated setting) into the output directory; a seed whose
file exists with the same arguments is not run again (an interrupted evaluation
resumes), and one with different arguments is refused (another ``--out``).  The table
is then made from the files of every seed asked for.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from p4cc.errors import ConfigError
from p4cc.experiment.sweep import TaskResult

#: the arguments that decide a seed's results (a stored seed with others is refused)
RESULT_ARGS = ("backend", "topology", "size", "long", "rounds", "options", "scale",
               "iterations", "open_loop")


def seed_file(out: Path, seed: int) -> Path:
    return out / f"results-seed{seed}.json"


@dataclass(frozen=True)
class SeedTask:
    """One seed of the evaluation: tune, then evaluate every setting."""

    seed: int
    out: Path
    args: tuple[tuple[str, Any], ...]  # RESULT_ARGS and their values

    @property
    def backend(self) -> str:
        return str(dict(self.args)["backend"])

    @property
    def label(self) -> str:
        return f"seed {self.seed}"

    def run(self) -> TaskResult:
        """In a worker: the seed's runs, its results file; failures as a TaskResult."""
        t0, c0 = time.monotonic(), time.process_time()
        error = ""
        try:
            res = run_seed(dict(self.args), self.seed, self.out)
            seed_file(self.out, self.seed).write_text(json.dumps(
                {"args": dict(self.args), "seed": self.seed, **res}, indent=1,
                default=float))
        except Exception as exc:  # reported by the executor's caller
            error = f"{type(exc).__name__}: {exc}"
        return TaskResult(self.label, not error, error, time.monotonic() - t0,
                          time.process_time() - c0)


def run_seed(a: dict[str, Any], seed: int, out: Path) -> dict[str, Any]:
    """The tuning run and the evaluations of one seed: ``{"tune": [..], "eval": [..]}``."""
    if a["backend"] == "bmv2":
        from p4cc.experiment import chameleon_eval_bmv2 as bm

        return bm.run_seed(a["topology"], seed, a["size"], a["rounds"], out, a["options"],
                           a["iterations"], a["long"], a["scale"], not a["open_loop"])
    from p4cc.experiment import chameleon_sim_eval as ev

    long_s = a["long"] or ev.PAPER_LONG_S
    tuned = ev.tune(a["topology"], seed, a["size"], long_s, a["rounds"], out, a["options"],
                    not a["open_loop"])
    arms = {n: ev.fixed_settings(n) for n in ev.BASELINES}
    arms["chameleon"] = (tuned["settings"], "nvidia")
    rows = [{"seed": seed, "setting": name,
             **ev.evaluate(a["topology"], st, base, seed, a["size"], jitter_s=long_s / 100)}
            for name, (st, base) in arms.items()]
    return {"tune": [tuned], "eval": rows}


def plan(args: dict[str, Any], seeds: list[int], out: Path) -> tuple[list[SeedTask],
                                                                     list[int]]:
    """The tasks still to run and the seeds already done (their files kept)."""
    key = tuple((k, args[k]) for k in RESULT_ARGS)
    todo, done = [], []
    for s in seeds:
        f = seed_file(out, s)
        if f.exists():
            stored = json.loads(f.read_text()).get("args", {})
            differ = [k for k in RESULT_ARGS if stored.get(k) != args[k]]
            if differ:
                raise ConfigError(f"{f} holds seed {s} run with other arguments "
                                  f"({', '.join(f'{k}={stored.get(k)!r}' for k in differ)}); "
                                  f"use another --out or remove it")
            done.append(s)
        else:
            todo.append(SeedTask(s, out, key))
    return todo, done


def gather(out: Path, seeds: list[int]) -> dict[str, Any]:
    """The results of ``seeds`` from their files (those that exist)."""
    res: dict[str, Any] = {"tune": [], "eval": []}
    for s in seeds:
        f = seed_file(out, s)
        if f.exists():
            part = json.loads(f.read_text())
            res["tune"] += part["tune"]
            res["eval"] += part["eval"]
    return res
