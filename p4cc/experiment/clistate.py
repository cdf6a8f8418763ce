"""What a running ``p4cc cli`` publishes for other processes (``p4cc top``, ``p4cc shell``).

The CLI writes a state directory ``runs/cli/<time>/``:

* ``session.json``: the CLI's PID, topology, scale, agent, host CC, poll interval and
  every switch's device id, gRPC address and Thrift port;
* ``telemetry.csv``: every PortTelemetry record, appended per poll (the columns of
  ``PortTelemetry.to_row``, as in a run's telemetry.csv).

and a pointer to it, ``<tmp>/p4cc-cli/current``.  ``p4cc top`` tails the CSV.  A file
rather than a socket: the CLI never blocks on (or serves) a slow or crashed viewer,
nothing listens on a port, any number of viewers (and a student's own pandas or plot
script, lab 2) read the same data after the fact, a viewer may start before, during or
after the CLI, and the CLI runs as root while the viewer need not.  A viewer knows the
CLI is gone when its PID no longer exists.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from p4cc.controlplane.ecn import EcnConfig
from p4cc.controlplane.records import PortKey, PortTelemetry
from p4cc.errors import ConfigError

#: where ``p4cc cli`` writes its state directories (relative to the working directory,
#: like the other commands' runs/)
CLI_RUNS = Path("runs") / "cli"
_FIELDS = [f.name for f in fields(PortTelemetry) if f.name != "ecn"]
COLUMNS = [*_FIELDS, "kmin_bytes", "kmax_bytes", "pmax", "mice_elephant_ratio"]


def pointer_path() -> Path:
    """``<tmp>/p4cc-cli/current``: the state directory of the CLI running now."""
    return Path(tempfile.gettempdir()) / "p4cc-cli" / "current"


def pid_alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


@dataclass(frozen=True)
class CliSession:
    """``session.json`` of a running CLI."""

    pid: int
    topo: str
    scale: str
    agent: str
    cc: str
    interval_s: float
    pkt_bytes: int
    switches: Mapping[str, Mapping[str, Any]]  # name -> device_id, grpc, thrift
    directory: Path

    @property
    def telemetry_csv(self) -> Path:
        return self.directory / "telemetry.csv"

    def running(self) -> bool:
        return pid_alive(self.pid)

    def endpoint(self, switch: str) -> tuple[int, str]:
        """(device id, gRPC address) of ``switch``."""
        sw = self.switches.get(switch)
        if sw is None:
            raise ConfigError(f"no switch {switch!r} in the running fabric; switches are "
                              f"{sorted(self.switches)}")
        return int(sw["device_id"]), str(sw["grpc"])


def write_session(directory: Path, *, topo: str, scale: str, agent: str, cc: str,
                  interval_s: float, pkt_bytes: int,
                  endpoints: Mapping[str, tuple[int, str, int]]) -> CliSession:
    """Create ``directory`` with session.json and point ``pointer_path()`` at it."""
    directory.mkdir(parents=True, exist_ok=True)
    doc = {"pid": os.getpid(), "topo": topo, "scale": scale, "agent": agent, "cc": cc,
           "interval_s": interval_s, "pkt_bytes": pkt_bytes, "started": time.time(),
           "switches": {n: {"device_id": d, "grpc": g, "thrift": t}
                        for n, (d, g, t) in endpoints.items()}}
    (directory / "session.json").write_text(json.dumps(doc, indent=2) + "\n")
    ptr = pointer_path()
    ptr.parent.mkdir(parents=True, exist_ok=True)
    tmp = ptr.with_name(f"current.{os.getpid()}")
    tmp.write_text(str(directory.resolve()) + "\n")
    tmp.replace(ptr)
    return read_session(directory)


def read_session(directory: Path) -> CliSession:
    path = directory / "session.json"
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a p4cc cli state directory ({exc})") from None
    return CliSession(int(doc["pid"]), str(doc["topo"]), str(doc["scale"]), str(doc["agent"]),
                      str(doc["cc"]), float(doc["interval_s"]), int(doc["pkt_bytes"]),
                      dict(doc["switches"]), directory)


def find_session(directory: Path | None = None) -> CliSession:
    """The CLI state directory given, else the one ``pointer_path()`` names if its CLI
    runs, else the newest under ``runs/cli`` whose CLI runs; ConfigError if none."""
    if directory is not None:
        return read_session(directory)
    candidates: list[Path] = []
    try:
        candidates.append(Path(pointer_path().read_text().strip()))
    except OSError:
        pass
    if CLI_RUNS.is_dir():
        candidates += sorted((p for p in CLI_RUNS.iterdir() if (p / "session.json").is_file()),
                             reverse=True)
    for d in candidates:
        try:
            s = read_session(d)
        except ConfigError:
            continue
        if s.running():
            return s
    raise ConfigError("no running `p4cc cli` found: start one (`make cli`) or give its "
                      "state directory (runs/cli/<time>) with --dir")


class TelemetryCsv:
    """Appends PortTelemetry records to a CSV (thread-safe: the loops call it)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        new = not path.exists() or path.stat().st_size == 0
        self._fh = path.open("a", newline="")
        self._writer = csv.DictWriter(self._fh, fieldnames=COLUMNS, extrasaction="ignore")
        if new:
            self._writer.writeheader()
            self._fh.flush()

    def __call__(self, records: list[PortTelemetry]) -> None:
        with self._lock:
            if self._fh.closed:
                return
            for r in records:
                self._writer.writerow(r.to_row())
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            self._fh.close()


def _num(v: str | None) -> float:
    return float(v) if v not in (None, "") else 0.0


def record_from_row(row: Mapping[str, str]) -> PortTelemetry:
    """One CSV row (all strings) back as a PortTelemetry."""
    ecn = None
    if row.get("kmin_bytes") not in (None, ""):
        ecn = EcnConfig(int(float(row["kmin_bytes"])), int(float(row["kmax_bytes"])),
                        float(row["pmax"]))
    kw: dict[str, Any] = {}
    for f in fields(PortTelemetry):
        if f.name == "ecn":
            continue
        v = row.get(f.name)
        if f.name == "switch":
            kw[f.name] = str(v)
        elif f.type in ("int", int):
            kw[f.name] = int(_num(v))
        else:
            kw[f.name] = _num(v)
    return PortTelemetry(**kw, ecn=ecn)


class TelemetryTail:
    """Reads what was appended to a telemetry CSV since the last call (complete lines
    only: a line being written is read next time)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._header: list[str] | None = None
        self.latest: dict[PortKey, PortTelemetry] = {}

    def poll(self) -> list[PortTelemetry]:
        try:
            with self.path.open("rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read()
        except OSError:
            return []
        end = chunk.rfind(b"\n")
        if end < 0:
            return []
        self._offset += end + 1
        lines = chunk[:end + 1].decode(errors="replace").splitlines()
        if self._header is None and lines:
            self._header = next(csv.reader([lines.pop(0)]))
        out = []
        for row in csv.DictReader(io.StringIO("\n".join(lines)), fieldnames=self._header):
            if None in row or None in row.values():
                continue  # too few or too many fields: a damaged line
            try:
                rec = record_from_row(row)
            except (KeyError, ValueError, TypeError):
                continue  # a damaged line: skip it
            out.append(rec)
            self.latest[rec.key] = rec
        return out
