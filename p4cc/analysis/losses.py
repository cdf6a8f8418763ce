"""Where and when a run lost packets: ``p4cc report RUN... --losses`` prints a Markdown
table, one row per run: are the losses the start-up overflow of the bottleneck queue, or
do they continue after it (docs/emulation.md)?  For a BMv2 run (p4cc.experiment.bmv2):

* **switch drops**: per switch, ``rx_pkts - tx_pkts`` in ``switch_cpu.csv`` (kernel
  counters of all a switch's interfaces, p4cc.experiment.bmv2.procmon) at the last sample
  minus at the last sample before the traffic (``t_s`` < the first flow's start: the
  runner samples once before t0), summed over switches; exact when the queues are empty
  at both, as before t0 and after a run whose flows ended.  A run without a sample before
  its first flow (BMv2 runs before session 18: the first sample came 20-40 ms after t0,
  with the first packets still inside the switches, which the difference took for
  "sent but never received" -- -4 to -26 packets) has no switch drops (None, "–").
  (Telemetry's ``drops_pkts`` is only an estimate on BMv2, p4cc.controlplane.telemetry,
  and is not used.)
* **forward loss**: packets the senders sent (``hosts/*/send/fct.csv``: bytes_sent /
  payload + probes) minus datagrams the receivers read (``hosts/*/recv/
  rx_counters.json``); payload = Scale.pkt_bytes - 66 B
  (p4cc.hostcc.wire.DATA_FRAME_OVERHEAD_BYTES).  A short last packet counts as a fraction,
  so the count is rounded.  forward - switch = 0: every loss was a switch drop on the way
  to a receiver; > 0: losses at the hosts; < 0: the switches also dropped replies.
* **bottleneck**: the (switch, port) with the largest ``qlen_max_bytes`` (telemetry.csv).
* **start-up overflow** of the bottleneck: from the start of its first telemetry interval
  whose largest queue is >= 95 % of Scale.buffer_bytes to the end of the last interval
  before the first later one whose largest queue is < 50 %, i.e. until its largest queue
  first stays below 50 %.  Never below 50 % again: the window runs to the last interval
  ("not drained"); no interval >= 95 %: no window.  Printed in seconds after the first
  flow's start (flows.csv); resolution one interval, so it may begin slightly before.
* **NAKs** before / in / after the window: increments of the cumulative ``nacks`` in the
  senders' ``trace.csv`` rows (~10 ms apart; stale repeats included) at the row's run-clock
  time: sender clock + the host's offset (median flows.csv start_s of its flows - median
  fct.csv start_s).  The window's ends are inside.  Without a window all are "after".
* **rewinds**: nacks - stale_nacks + timeouts (fct.csv), whole run only: the trace rows
  count neither stale NAKs nor timeouts, so rewinds cannot be split by phase.
* **resent bytes** by phase: per trace row, d(bytes_sent) - d(max snd_nxt) * payload
  (>= 0); plus fct.csv's retx_bytes for the whole run (the trace misses the last resends).

A simulator run's telemetry has exact drops (``drops_pkts``): switch drops are their sum,
"drops after" the sum over intervals ending after the window; the simulator records no
forward loss, NAKs, rewinds or resent bytes ("–").  Other backends, and BMv2 runs
without the files above, raise P4ccError naming the cause.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from p4cc.analysis.report import markdown_table
from p4cc.analysis.runs import Run
from p4cc.errors import P4ccError
from p4cc.hostcc.wire import frame_payload_bytes

FULL_FRACTION = 0.95  #: an interval is "full" when its largest queue reaches this share
DRAINED_FRACTION = 0.5  #: the overflow ends when the largest queue stays below this share


@dataclass(frozen=True)
class Overflow:
    """The start-up overflow window of the bottleneck port, run clock (seconds)."""

    start_s: float
    end_s: float
    drained: bool


@dataclass(frozen=True)
class Phases:
    """A quantity split into before / in / after the overflow window."""

    before: float
    inside: float
    after: float


@dataclass(frozen=True)
class RunLosses:
    """One run's losses; None where the run's backend does not record the quantity."""

    backend: str
    host_cc: str
    first_start_s: float
    switch_drops: int | None
    forward_loss: int | None
    bottleneck: tuple[str, int]
    overflow: Overflow | None
    naks: Phases | None
    rewinds: int | None
    resent_bytes: Phases | None
    resent_total_bytes: int | None
    drops_after: int | None


TELEMETRY_COLUMNS = ("switch", "port", "t_s", "interval_s", "qlen_max_bytes")
CPU_COLUMNS = ("t_s", "switch", "rx_pkts", "tx_pkts")
FCT_COLUMNS = ("start_s", "bytes_sent", "retx_bytes", "nacks", "stale_nacks", "timeouts",
               "probes")
TRACE_COLUMNS = ("t", "flow_id", "nacks", "bytes_sent", "snd_nxt")


def require_columns(df: pd.DataFrame, columns: Sequence[str], where: str) -> None:
    """P4ccError naming ``where`` and the columns it lacks."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise P4ccError(f"{where} lacks the column(s) {missing}")


# -- pure parts (tested on small frames) --------------------------------------------
def bottleneck_rows(telemetry: pd.DataFrame) -> tuple[tuple[str, int], pd.DataFrame]:
    """((switch, port), its telemetry rows in time order) of the port whose largest
    queue is the largest of the run."""
    if telemetry.empty:
        raise P4ccError("the run has no telemetry rows (telemetry.csv empty or missing; "
                        "the spec's outputs must include telemetry)")
    require_columns(telemetry, TELEMETRY_COLUMNS, "telemetry.csv")
    peak = telemetry.groupby(["switch", "port"])["qlen_max_bytes"].max()
    key: tuple[Any, Any] = peak.idxmax()  # type: ignore[assignment]
    rows = telemetry[(telemetry["switch"] == key[0]) & (telemetry["port"] == key[1])]
    return (str(key[0]), int(key[1])), rows.sort_values("t_s").reset_index(drop=True)


def overflow_window(port_rows: pd.DataFrame, buffer_bytes: float) -> Overflow | None:
    """The start-up overflow in one port's telemetry rows (time order; ``t_s`` is an
    interval's end); None if no interval is >= 95 % full."""
    if buffer_bytes <= 0:
        raise P4ccError(f"buffer_bytes must be positive, got {buffer_bytes}")
    qmax = port_rows["qlen_max_bytes"].to_numpy(float)
    ends = port_rows["t_s"].to_numpy(float)
    full = np.flatnonzero(qmax >= FULL_FRACTION * buffer_bytes)
    if not len(full):
        return None
    first = int(full[0])
    start = float(ends[first] - port_rows["interval_s"].to_numpy(float)[first])
    low = np.flatnonzero(qmax[first:] < DRAINED_FRACTION * buffer_bytes)
    if not len(low):
        return Overflow(start, float(ends[-1]), False)
    return Overflow(start, float(ends[first + int(low[0]) - 1]), True)


def split_phases(t: np.ndarray, values: np.ndarray, window: Overflow | None) -> Phases:
    """Sum of ``values`` at times ``t`` before, in ([start, end]) and after the window."""
    if window is None:
        return Phases(0.0, 0.0, float(values.sum()))
    before = t < window.start_s
    after = t > window.end_s
    return Phases(float(values[before].sum()), float(values[~before & ~after].sum()),
                  float(values[after].sum()))


def switch_drops(cpu: pd.DataFrame, traffic_start_s: float) -> int | None:
    """Per switch, rx - tx at its last sample minus at its last sample before
    ``traffic_start_s`` (switch_cpu.csv rows, run clock), summed; None if a switch has no
    sample before the traffic (a later first sample counts the packets then inside the
    switch as sent without being received)."""
    total = 0
    for _, g in cpu.sort_values("t_s", kind="stable").groupby("switch"):
        d = (g["rx_pkts"] - g["tx_pkts"]).to_numpy()
        before = np.flatnonzero(g["t_s"].to_numpy(float) < traffic_start_s)
        if not len(before):
            return None
        total += int(d[-1] - d[before[-1]])
    return total


def trace_events(trace: pd.DataFrame, offset_s: float, payload: int) -> pd.DataFrame:
    """Per trace row of one sender: run-clock ``t``, new ``naks`` and ``resent`` bytes."""
    parts = []
    for _, g in trace.sort_values("t").groupby("flow_id"):
        nacks = g["nacks"].to_numpy(float)
        sent = np.diff(g["bytes_sent"].to_numpy(float), prepend=0.0)
        new = np.diff(np.maximum.accumulate(g["snd_nxt"].to_numpy(float)), prepend=0.0)
        parts.append(pd.DataFrame({
            "t": g["t"].to_numpy(float) + offset_s,
            "naks": np.diff(nacks, prepend=0.0),
            "resent": np.clip(sent - new * payload, 0.0, None)}))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=["t", "naks", "resent"])


def host_offset(flows: pd.DataFrame, host: str, fct: pd.DataFrame) -> float:
    """Run clock minus the sender's clock: median flows.csv start_s of the host's flows
    minus median fct.csv start_s (0 if either has none)."""
    run_starts = flows.loc[flows["src"] == host, "start_s"].to_numpy(float)
    own = fct["start_s"].to_numpy(float)
    if not len(run_starts) or not len(own):
        return 0.0
    return float(np.median(run_starts) - np.median(own))


# -- reading a run --------------------------------------------------------------------
def _csv(path: Path, why: str, columns: Sequence[str]) -> pd.DataFrame:
    if not path.is_file():
        raise P4ccError(f"{path} is missing: {why}")
    try:
        df = pd.read_csv(path)
    except pd.errors.EmptyDataError as exc:
        raise P4ccError(f"{path} is empty: {why}") from exc
    require_columns(df, columns, str(path))
    return df


def _scale(run: Run, key: str) -> float:
    value = run.meta.get("scale", {}).get(key)
    if value is None:
        raise P4ccError(f"{run.path}/spec.resolved.yaml has no scale.{key}")
    return float(value)


def _senders(run: Run) -> list[Path]:
    dirs = sorted(d for d in (run.path / "hosts").glob("*/send") if d.is_dir())
    if not dirs:
        raise P4ccError(f"{run.path}/hosts/*/send is missing: the userspace senders' "
                        "fct.csv and trace.csv are needed (iperf3 bulk flows have none)")
    return dirs


def _datagrams(run: Run) -> int:
    files = sorted((run.path / "hosts").glob("*/recv/rx_counters.json"))
    if not files:
        raise P4ccError(f"{run.path}/hosts/*/recv/rx_counters.json is missing: the "
                        "receivers' counters are needed for the forward loss")
    try:
        return sum(int(json.loads(p.read_text())["datagrams"]) for p in files)
    except (ValueError, KeyError) as exc:
        raise P4ccError(f"a receiver's rx_counters.json under {run.path}/hosts is not "
                        f"valid ({exc})") from exc


def _window(run: Run) -> tuple[tuple[str, int], Overflow | None]:
    where, rows = bottleneck_rows(run.telemetry)
    return where, overflow_window(rows, _scale(run, "buffer_bytes"))


def _first_start(run: Run) -> float:
    """The first flow's start (run clock); 0 for a run without flows."""
    starts = run.flows.get("start_s", pd.Series(dtype=float)).dropna()
    return float(starts.min()) if len(starts) else 0.0


def bmv2_losses(run: Run) -> RunLosses:
    """Losses of a BMv2 run (module docstring)."""
    cpu = _csv(run.path / "switch_cpu.csv", "the switches' interface counters "
               "(p4cc.experiment.bmv2.procmon) give the switch drops", CPU_COLUMNS)
    require_columns(run.flows, ("src", "start_s"), f"{run.path}/flows.csv (run clock)")
    payload = frame_payload_bytes(int(_scale(run, "pkt_bytes")))
    where, win = _window(run)
    fcts, events = [], []
    for d in _senders(run):
        fct = _csv(d / "fct.csv", "the sender's per-flow counters", FCT_COLUMNS)
        trace = _csv(d / "trace.csv", "the sender's trace gives the NAK times", TRACE_COLUMNS)
        fcts.append(fct)
        events.append(trace_events(trace, host_offset(run.flows, d.parent.name, fct),
                                   payload))
    fct, ev = pd.concat(fcts, ignore_index=True), pd.concat(events, ignore_index=True)
    sent = float((fct["bytes_sent"] / payload).sum() + fct["probes"].sum())
    t, first = ev["t"].to_numpy(float), _first_start(run)
    return RunLosses(
        backend="bmv2", host_cc=str(run.meta.get("host_cc", "")),
        first_start_s=first, switch_drops=switch_drops(cpu, first),
        forward_loss=round(sent - _datagrams(run)), bottleneck=where, overflow=win,
        naks=split_phases(t, ev["naks"].to_numpy(float), win),
        rewinds=int((fct["nacks"] - fct["stale_nacks"] + fct["timeouts"]).sum()),
        resent_bytes=split_phases(t, ev["resent"].to_numpy(float), win),
        resent_total_bytes=int(fct["retx_bytes"].sum()), drops_after=None)


def sim_losses(run: Run) -> RunLosses:
    """Losses of a simulator run: exact drops from its telemetry, nothing host-side."""
    where, win = _window(run)
    require_columns(run.telemetry, ("drops_pkts",), f"{run.path}/telemetry.csv")
    drops = run.telemetry["drops_pkts"].to_numpy(float)
    after = run.telemetry["t_s"].to_numpy(float) > (-math.inf if win is None else win.end_s)
    return RunLosses(
        backend="sim", host_cc=str(run.meta.get("host_cc", "")),
        first_start_s=_first_start(run), switch_drops=int(drops.sum()), forward_loss=None,
        bottleneck=where, overflow=win, naks=None, rewinds=None, resent_bytes=None,
        resent_total_bytes=None, drops_after=int(drops[after].sum()))


def run_losses(run: Run) -> RunLosses:
    """Dispatch on the run's backend; P4ccError for a backend without the records."""
    backend = run.backend
    if backend == "bmv2":
        return bmv2_losses(run)
    if backend == "sim":
        return sim_losses(run)
    raise P4ccError(f"{run.path}: backend {backend or 'unknown'!r}; --losses reads bmv2 "
                    "and sim runs only")


# -- output -----------------------------------------------------------------------------
def _phases(p: Phases | None, scale: float = 1.0, fmt: str = ".0f") -> str:
    if p is None:
        return "–"
    return " / ".join(format(v * scale, fmt) for v in (p.before, p.inside, p.after))


def _opt(v: int | None) -> str:
    return "–" if v is None else str(v)


def table_row(label: str, r: RunLosses) -> dict[str, Any]:
    """One table row of formatted cells."""
    w, t0 = r.overflow, r.first_start_s
    span = ("none" if w is None else
            f"{w.start_s - t0:.2f}–{w.end_s - t0:.2f}" + ("" if w.drained else " (not drained)"))
    diff = (None if r.forward_loss is None or r.switch_drops is None
            else r.forward_loss - r.switch_drops)
    return {
        "run": label, "backend": r.backend, "host CC": r.host_cc or "–",
        "switch drops": _opt(r.switch_drops), "forward loss": _opt(r.forward_loss),
        "forward − switch": _opt(diff),
        "bottleneck": f"{r.bottleneck[0]}:{r.bottleneck[1]}",
        "overflow (s after first start)": span,
        "drops after": _opt(r.drops_after),
        "NAKs before / in / after": _phases(r.naks), "rewinds": _opt(r.rewinds),
        "resent MB before / in / after": _phases(r.resent_bytes, 1e-6, ".2f"),
        "resent MB (fct.csv)": ("–" if r.resent_total_bytes is None
                                else f"{r.resent_total_bytes / 1e6:.2f}")}


def losses_markdown(runs: Sequence[Run]) -> str:
    """The Markdown table of ``p4cc report --losses``: one row per run, labelled by its
    path as given."""
    if not runs:
        raise P4ccError("no runs to analyse")
    rows = [table_row(str(r.path), run_losses(r)) for r in runs]
    return markdown_table(pd.DataFrame(rows), index=False)

