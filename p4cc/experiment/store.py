"""The run store, writing side (``p4cc.analysis.runs`` reads runs back).

One directory per (experiment, agent variant[, seed]).

Layout of ``runs/<name>/<variant>/`` (docs/traffic.md):

* ``spec.resolved.yaml`` full resolved config (``p4cc.experiment.spec.resolve``) + run info
* ``seeds.json``, ``versions.json`` (python, numpy, pandas, p4cc, BMv2/p4c, git commit)
* ``schedule.csv``, ``link_events.csv`` what was played
* ``telemetry.csv`` (``PortTelemetry.to_row``), ``flows.csv``, ``hostcc.csv``,
  ``int.csv``, ``<table>.csv``: appended and flushed on every write, so a crash or an
  interrupt keeps what was measured
* ``log.txt`` and ``status.json`` (``complete``, ``reason``, times); a run is
  ``complete: false`` until the backend returned normally.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import platform
import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd
import yaml

from p4cc.controlplane.records import PortTelemetry
from p4cc.errors import P4ccError
from p4cc.paths import REPO_ROOT

log = logging.getLogger(__name__)



def _tool_version(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0] if text else None


def software_versions() -> dict[str, Any]:
    """Versions stored with every run (tools absent on this machine are null)."""
    try:
        p4cc_version = metadata.version("p4cc")
    except metadata.PackageNotFoundError:
        p4cc_version = None
    commit = dirty = None
    if shutil.which("git") and (REPO_ROOT / ".git").exists():
        try:  # a slow or broken git must not fail the run: the versions say null
            res = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"],
                                 capture_output=True, text=True, timeout=10, check=False)
            commit = res.stdout.strip() or None
            res = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain"],
                                 capture_output=True, text=True, timeout=10, check=False)
            dirty = bool(res.stdout.strip()) if res.returncode == 0 else None
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("git version lookup failed: %s", exc)
    return {
        "python": platform.python_version(), "numpy": np.__version__,
        "pandas": pd.__version__, "p4cc": p4cc_version,
        "simple_switch_grpc": _tool_version(["simple_switch_grpc", "--version"]),
        "p4c": _tool_version(["p4c", "--version"]),
        "iperf3": _tool_version(["iperf3", "--version"]),
        "git_commit": commit, "git_dirty": dirty, "platform": platform.platform(),
    }


def _cell(v: Any) -> Any:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, (np.generic,)):
        return v.item()
    return v


class _Table:
    """An append-only CSV whose header is fixed by the first row written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.columns: list[str] | None = None
        self._fh: IO[str] | None = None
        self._writer: Any = None
        self.rows = 0

    def append(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for row in rows:
            if self._writer is None:
                self.columns = list(row.keys())
                self._fh = self.path.open("w", newline="")
                self._writer = csv.writer(self._fh)
                self._writer.writerow(self.columns)
            assert self.columns is not None
            extra = set(row) - set(self.columns)
            if extra:
                raise P4ccError(f"{self.path.name}: row has columns {sorted(extra)} that the "
                                f"first row did not; write every column in every row")
            self._writer.writerow([_cell(row.get(c)) for c in self.columns])
            self.rows += 1
        if self._fh is not None:
            self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class RunWriter:
    """Creates a run directory and implements ``p4cc.experiment.backend.RunSink``."""

    def __init__(self, path: Path, resolved: Mapping[str, Any], *, variant: str, agent: str,
                 seed: int, backend: str, outputs: Iterable[str] | None = None) -> None:
        self.path = Path(path)
        self.seed = seed
        self.moved_previous: Path | None = None
        #: tables the spec asked for (``outputs``); None = all.  Others are not written.
        self.outputs = None if outputs is None else set(outputs)
        if self.path.exists() and any(self.path.iterdir()):
            # Never mix two runs' files, never delete results: keep the old run aside.
            stamp = time.strftime("%Y%m%d-%H%M%S")
            self.moved_previous = self.path.with_name(f"{self.path.name}.prev-{stamp}")
            n = 1
            while self.moved_previous.exists():
                n += 1
                self.moved_previous = self.path.with_name(f"{self.path.name}.prev-{stamp}-{n}")
            self.path.rename(self.moved_previous)
            log.warning("%s existed; the previous run was moved to %s", self.path,
                        self.moved_previous)
        self.path.mkdir(parents=True, exist_ok=True)
        self._tables: dict[str, _Table] = {}
        self._started = time.time()
        info = {"variant": variant, "agent": agent, "seed": seed, "backend": backend}
        meta = {**resolved, "run": info}
        (self.path / "spec.resolved.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
        (self.path / "seeds.json").write_text(json.dumps({"seed": seed, "workload_rngs":
                                                          "numpy default_rng([seed, index])"}))
        (self.path / "versions.json").write_text(json.dumps(software_versions(), indent=1))
        self._log = (self.path / "log.txt").open("a")
        self._status(complete=False, reason="running")

    def _status(self, complete: bool, reason: str, **extra: Any) -> None:
        status = {"complete": complete, "reason": reason, "started_unix": self._started,
                  "updated_unix": time.time(),
                  "rows": {k: t.rows for k, t in self._tables.items()}, **extra}
        tmp = self.path / "status.json.tmp"
        tmp.write_text(json.dumps(status, indent=1))
        tmp.replace(self.path / "status.json")

    def write_schedule(self, schedule: pd.DataFrame, link_events: pd.DataFrame) -> None:
        schedule.to_csv(self.path / "schedule.csv", index=False)
        link_events.to_csv(self.path / "link_events.csv", index=False)

    # -- RunSink -------------------------------------------------------------------------
    def table(self, name: str, rows: Iterable[Mapping[str, Any]]) -> None:
        if not name.isidentifier():
            raise P4ccError(f"table name {name!r} must be an identifier")
        t = self._tables.get(name)
        if t is None:
            t = self._tables[name] = _Table(self.path / f"{name}.csv")
        t.append(rows)

    def _wanted(self, output: str) -> bool:
        return self.outputs is None or output in self.outputs

    def telemetry(self, records: Iterable[PortTelemetry]) -> None:
        if self._wanted("telemetry"):
            self.table("telemetry", (r.to_row() for r in records))

    def flows(self, rows: Iterable[Mapping[str, Any]]) -> None:
        if self._wanted("flows"):
            self.table("flows", rows)

    def hostcc(self, rows: Iterable[Mapping[str, Any]]) -> None:
        if self._wanted("hostcc"):
            self.table("hostcc", rows)

    def int_reports(self, rows: Iterable[Mapping[str, Any]]) -> None:
        if self._wanted("int"):
            self.table("int", rows)

    def log(self, message: str) -> None:
        self._log.write(f"{time.strftime('%H:%M:%S')} {message}\n")
        self._log.flush()

    def finish(self, complete: bool, reason: str, **extra: Any) -> None:
        for t in self._tables.values():
            t.close()
        self.log(f"finished: complete={complete} reason={reason}")
        self._log.close()
        self._status(complete, reason, elapsed_s=time.time() - self._started, **extra)
