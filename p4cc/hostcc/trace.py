"""Incremental CSV records: per-flow traces and FCT / receiver records.

Rows are written (and flushed) as they come, so an interrupted run keeps what it
measured.  The header is fixed by the first row plus ``fields``; keys that appear
only later are dropped (counted in ``dropped_keys``), missing ones are left empty.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from p4cc.errors import ConfigError

#: Columns every trace row has first (the controller's own trace() keys follow).
TRACE_FIELDS = ("t", "flow_id", "rate_bps", "rtt_s", "max_qdepth", "cnps", "nacks",
                "bytes_sent", "snd_una", "snd_nxt", "rtt_ctl_s", "srtt_s")
FCT_FIELDS = ("flow_id", "dst", "sport", "cc", "size", "sched_start_s", "start_s", "end_s",
              "fct_s", "start_epoch", "completed", "bytes_sent", "retx_bytes", "nacks",
              "cnps", "timeouts", "probes", "bad_replies", "unknown_cnps", "srtt_s",
              "stale_nacks", "ref")


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float) and not math.isfinite(v):
        return ""
    return v


class RecordWriter:
    """Append dict rows to one CSV file."""

    def __init__(self, path: str | Path, fields: Sequence[str] = (), flush_every: int = 64):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh: io.TextIOWrapper | None = open(self.path, "w", newline="")
        except OSError as exc:
            raise ConfigError(f"cannot write records to {self.path}: {exc}; choose a "
                              "writable --out directory") from exc
        self._fields = list(fields)
        self._writer: csv.DictWriter[str] | None = None
        self._flush_every = max(1, flush_every)
        self._n = 0
        self.rows = 0
        self.dropped_keys: set[str] = set()

    def write(self, row: Mapping[str, Any]) -> None:
        if self._fh is None:
            raise ConfigError(f"record file {self.path} is already closed")
        if self._writer is None:
            names = self._fields + [k for k in row if k not in self._fields]
            self._writer = csv.DictWriter(self._fh, fieldnames=names, extrasaction="ignore")
            self._writer.writeheader()
        extra = set(row) - set(self._writer.fieldnames)
        if extra:
            self.dropped_keys |= extra
        self._writer.writerow({k: _cell(v) for k, v in row.items()})
        self.rows += 1
        self._n += 1
        if self._n >= self._flush_every:
            self._fh.flush()
            self._n = 0

    def write_all(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for row in rows:
            self.write(row)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_records(path: str | Path) -> list[dict[str, str]]:
    """Read a record file back (values as strings)."""
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))
