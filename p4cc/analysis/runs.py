"""Stored runs read back for analysis: the reading side of the run store.

``p4cc.experiment.store.RunWriter`` writes ``runs/<name>/<variant>/`` (layout in its
docstring and docs/traffic.md); ``open_run``/``find_runs`` open such directories.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from p4cc.errors import P4ccError

#: Per-flow records (``flows.csv``, ``RunSink.flows``): one row per scheduled flow that
#: started, exactly these columns in this order from every backend (docs/traffic.md).
#: ``fct_s`` = end_s - start_s and ``end_s`` are NaN if the flow did not complete;
#: ``bytes_rx`` application bytes delivered; ``retransmissions`` packets sent again (bulk:
#: iperf3's TCP retransmits); ``base_rtt_s`` the flow's unloaded RTT, NaN where the backend
#: does not know it (the analysis then uses the scale's); ``cnps`` CNPs its sender got.
FLOW_RECORD_COLUMNS: tuple[str, ...] = (
    "flow_id", "src", "dst", "size_bytes", "cls", "tag", "start_s", "end_s", "fct_s",
    "bytes_rx", "retransmissions", "completed", "base_rtt_s", "cnps")


@dataclass
class Run:
    """A stored run, read back (lazily) for analysis."""

    path: Path
    meta: dict[str, Any]
    status: dict[str, Any]
    _cache: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)

    @property
    def label(self) -> str:
        info = self.meta.get("run", {})
        return str(info.get("variant") or self.path.name)

    @property
    def backend(self) -> str:
        """The backend that made the run (``sim``, ``bmv2``, ...; "" if not recorded)."""
        return str(self.meta.get("run", {}).get("backend") or self.meta.get("backend") or "")

    @property
    def complete(self) -> bool:
        return bool(self.status.get("complete"))

    def table(self, name: str) -> pd.DataFrame:
        """``<name>.csv`` as a DataFrame (empty if the run wrote none)."""
        if name not in self._cache:
            p = self.path / f"{name}.csv"
            try:
                df = pd.read_csv(p) if p.is_file() and p.stat().st_size else pd.DataFrame()
            except pd.errors.EmptyDataError:
                df = pd.DataFrame()
            self._cache[name] = df
        return self._cache[name]

    @property
    def flows(self) -> pd.DataFrame:
        return self.table("flows")

    @property
    def telemetry(self) -> pd.DataFrame:
        return self.table("telemetry")

    @property
    def schedule(self) -> pd.DataFrame:
        return self.table("schedule")


def open_run(path: str | Path) -> Run:
    p = Path(path)
    spec_file = p / "spec.resolved.yaml"
    if not spec_file.is_file():
        raise P4ccError(f"{p} is not a run directory (no spec.resolved.yaml); pass "
                        f"runs/<name>/<variant>")
    meta = yaml.safe_load(spec_file.read_text()) or {}
    status_file = p / "status.json"
    status = (json.loads(status_file.read_text()) if status_file.is_file()
              else {"complete": False, "reason": "no status.json"})
    return Run(p, meta, status)


def find_runs(paths: Iterable[str | Path]) -> list[Run]:
    """Open each path; a directory without spec.resolved.yaml is searched one level down
    (``runs/<name>`` -> all its variants)."""
    runs: list[Run] = []
    for raw in paths:
        p = Path(raw)
        if (p / "spec.resolved.yaml").is_file():
            runs.append(open_run(p))
        elif p.is_dir():
            subs = sorted(d for d in p.iterdir() if (d / "spec.resolved.yaml").is_file()
                          and ".prev-" not in d.name)  # runs moved aside by a re-run
            if not subs:
                raise P4ccError(f"{p} holds no runs (no */spec.resolved.yaml)")
            runs += [open_run(d) for d in subs]
        else:
            raise P4ccError(f"run directory {p} does not exist")
    return runs
