"""What the control-loop and INT threads of a BMv2 run measure, on its way to the sink.

The threads only enqueue (one typed queue per kind of record); the main thread drains
the queues into the RunSink (the run store is not thread-safe), so records reach disk
while the run goes.
"""

from __future__ import annotations

import queue
from typing import Any, TypeVar

from p4cc.controlplane.int_collector import IntRecord
from p4cc.controlplane.loop import PollTiming
from p4cc.controlplane.records import PortTelemetry
from p4cc.experiment.backend import RunSink
from p4cc.experiment.bmv2.collect import int_rows
from p4cc.experiment.session import AgentAction

T = TypeVar("T")


def _take(q: queue.Queue[T]) -> list[T]:
    out = []
    while True:
        try:
            out.append(q.get_nowait())
        except queue.Empty:
            return out


class RecordQueues:
    """Thread-safe intake (``telemetry``, ``actions``, ``int_report``), main-thread
    ``drain``."""

    def __init__(self) -> None:
        self._telemetry: queue.Queue[list[PortTelemetry]] = queue.Queue()
        self._actions: queue.Queue[list[AgentAction]] = queue.Queue()
        self._int: queue.Queue[IntRecord] = queue.Queue()
        self._polls: queue.Queue[PollTiming] = queue.Queue()
        self._cpu: queue.Queue[list[dict[str, Any]]] = queue.Queue()
        #: what the fidelity verdict reads at the end (p4cc.experiment.bmv2.fidelity)
        self.kept_telemetry: list[dict[str, Any]] = []
        self.kept_polls: list[dict[str, Any]] = []
        self.kept_cpu: list[dict[str, Any]] = []

    # -- from the loop and collector threads -----------------------------------------
    def telemetry(self, records: list[PortTelemetry]) -> None:
        self._telemetry.put(records)

    def actions(self, actions: list[AgentAction]) -> None:
        self._actions.put(actions)

    def int_report(self, record: IntRecord) -> None:
        self._int.put(record)

    def poll(self, timing: PollTiming) -> None:
        self._polls.put(timing)

    def switch_cpu(self, rows: list[dict[str, Any]]) -> None:
        self._cpu.put(rows)

    # -- main thread -----------------------------------------------------------------
    def drain(self, sink: RunSink) -> None:
        """Write everything queued so far.  Telemetry of intervals that ended before t0
        (t_s <= 0: the switches idle before the traffic) is not kept; the switches'
        sample before t0 (t_s < 0, the baseline of p4cc.analysis.losses) is written but
        not kept for the verdict and the budget, which judge the run from t0."""
        tele = [r for batch in _take(self._telemetry) for r in batch if r.t_s > 0]
        if tele:
            sink.telemetry(tele)
            self.kept_telemetry += [r.to_row() for r in tele]
        polls = [p.to_row() for p in _take(self._polls) if p.end_s > 0]
        if polls:
            sink.table("polls", polls)
            self.kept_polls += polls
        cpu = [r for batch in _take(self._cpu) for r in batch]
        if cpu:
            sink.table("switch_cpu", cpu)
            self.kept_cpu += [r for r in cpu if r["t_s"] >= 0]
        for batch in _take(self._actions):
            sink.table("agent", [a.to_row() for a in batch])
        for rec in _take(self._int):
            sink.int_reports(int_rows(rec))
