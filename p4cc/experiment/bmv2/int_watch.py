"""Which flows of a BMv2 run carry INT, in which sink mode, and whether they got it.

Two reasons to put a source host's p4cc flows (UDP to port 4791) on the switches'
``int_watchlist`` (p4src/include/int_source.p4):

* the spec's outputs include ``int``: the sink reports every watched packet to the
  control plane (one clone + PacketIn per packet, decoded with Scapy in the runner), so
  only the sized flows of the first ``INT_SOURCES`` sources in the schedule are
  reported;
* the hosts' CC reads the INT path-maximum queue depth (an RL-CC policy trained on it:
  ``RlccRule`` switches ``params.signal`` to ``qdepth`` for ``policy.signal ==
  "qdepth"``): then every sized flow's source is watched, summary-only
  (``int_source_summary``: the sink writes the 8-byte summary the receiver echoes to
  the sender, and clones nothing) where it is not one of the reported sources.

A flow whose controller got an RTT sample without a queue depth fell back to the RTT
(``RlccRule.inflation``: a NaN depth means "from the RTT").  ``coverage`` counts such
flows from the senders' traces after the run, and the backend logs them loudly; a plan
that cannot watch every source raises ConfigError before anything starts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from p4cc.constants import IPPROTO_UDP, ROCE_PORT
from p4cc.errors import ConfigError
from p4cc.experiment.bmv2 import hosts as hp
from p4cc.topo.spec import TopoSpec

#: INT reports are one clone + PacketIn per watched packet, decoded with Scapy in the
#: runner (~0.1-0.2 ms each): the flows of this many source hosts (the first in the
#: schedule) only.
INT_SOURCES = 1
#: int_watchlist entries per switch (``size = 64`` in p4src/include/int_source.p4;
#: tests/test_bmv2_int_watch.py ties the two): one entry per watched source host
INT_WATCHLIST_SIZE = 64


class IntWatchControl(Protocol):
    """What ``install`` needs of a switch (p4cc.controlplane.switch.SwitchControl)."""

    def add_int_watch(self, src: str | None = None, dst: str | None = None,
                      proto: int | None = None, dport: int | None = None,
                      max_hops: int = ..., priority: int = 1,
                      report: bool = True) -> None: ...


@dataclass(frozen=True)
class IntWatch:
    """One watched source host: its p4cc flows carry INT from their first switch on."""

    host: str
    ip: str
    #: True: the sink also reports every packet (``int_source``); False: summary only
    report: bool


def host_cc_reads_qdepth(host_cc: str, topo: TopoSpec) -> bool:
    """True when the hosts' controllers for ``host_cc`` feed their rule the INT queue
    depth (RL-CC with a policy trained on it, p4cc.hostcc.rlcc_rule.RlccRule)."""
    from p4cc.hostcc.cc import host_cc_kind, make_controller

    if host_cc_kind(host_cc).make is None:
        return False  # kernel TCP (iperf3): no p4cc controller
    ctl = make_controller(host_cc, topo.scale)
    rule = getattr(ctl, "rule", None)
    return rule is not None and getattr(rule.params, "signal", "rtt") == "qdepth"


def sized_sources(schedule: pd.DataFrame) -> list[str]:
    """Source hosts of the p4cc (non-bulk) flows, in schedule order."""
    return list(dict.fromkeys(str(s) for s in schedule.loc[schedule["cls"] != "bulk", "src"]))


def watch_plan(topo: TopoSpec, schedule: pd.DataFrame, *, reports: bool,
               qdepth_cc: bool) -> tuple[IntWatch, ...]:
    """The watched sources: the first ``INT_SOURCES`` with reports when ``reports`` (the
    spec's outputs include ``int``), and with ``qdepth_cc`` every other source summary-
    only.  ConfigError when the switches' watchlist cannot hold them all."""
    sources = sized_sources(schedule)
    reported = sources[:INT_SOURCES] if reports else []
    summary = [s for s in sources if s not in reported] if qdepth_cc else []
    if len(reported) + len(summary) > INT_WATCHLIST_SIZE:
        raise ConfigError(
            f"{len(reported) + len(summary)} source hosts need an INT watch but "
            f"int_watchlist holds {INT_WATCHLIST_SIZE} entries per switch: the flows of "
            f"the others would run without the INT queue depth their CC reads")
    return tuple(IntWatch(h, topo.host(h).ip, True) for h in reported) + tuple(
        IntWatch(h, topo.host(h).ip, False) for h in summary)


def spec_plan(outputs: Sequence[str], host_cc: str, topo: TopoSpec, schedule: pd.DataFrame
              ) -> tuple[IntWatch, ...]:
    """``watch_plan`` of a run: reports when its ``outputs`` include ``int``, summary-only
    watches when its ``host_cc`` reads the INT queue depth."""
    return watch_plan(topo, schedule, reports="int" in outputs,
                      qdepth_cc=host_cc_reads_qdepth(host_cc, topo))


def install(plan: Sequence[IntWatch], controls: Mapping[str, IntWatchControl]) -> None:
    """One int_watchlist entry per watched source on every switch (a flow gets INT at
    its first switch; later switches see it carry INT and do not match it again)."""
    for w in plan:
        for ctl in controls.values():
            ctl.add_int_watch(src=w.ip, proto=IPPROTO_UDP, dport=ROCE_PORT, report=w.report)


def describe(plan: Sequence[IntWatch]) -> str:
    rep = [w.host for w in plan if w.report]
    summ = [w.host for w in plan if not w.report]
    parts = ([f"with reports on the p4cc flows of {rep}"] if rep else []) + (
        [f"summary only (no report) on the p4cc flows of {summ}"] if summ else [])
    return "bmv2: INT " + "; ".join(parts) if parts else "bmv2: no INT watch"


@dataclass(frozen=True)
class IntCoverage:
    """After a run: which flows' controllers got RTT samples without an INT depth."""

    flows: int  # flows whose controller got at least one RTT sample
    without_int: tuple[tuple[str, int], ...]  # (host, sender-local flow id) that fell back

    @property
    def ok(self) -> bool:
        return not self.without_int

    def summary(self) -> str:
        if self.ok:
            return f"INT queue depth in every controlled flow ({self.flows})"
        return (f"WARNING: {len(self.without_int)} of {self.flows} flows ran their CC on "
                f"the RTT, not the INT queue depth (no INT summary reached their sender): "
                f"{list(self.without_int)[:10]}")

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "flows": self.flows,
                "without_int": [list(x) for x in self.without_int]}


def coverage(hosts_dir: Path, senders: Sequence[str]) -> IntCoverage:
    """From each sender's ``send/trace.csv``: a trace row with a controller RTT
    (``rtt_ctl_s``) but no ``max_qdepth`` is a sample the rule took from the RTT (the
    sender keeps the last depth it saw, so an empty one means none had arrived)."""
    seen: set[tuple[str, int]] = set()
    missing: set[tuple[str, int]] = set()
    for h in senders:
        for row in hp.read_csv(hosts_dir / h / "send" / "trace.csv"):
            if not math.isfinite(hp.num(row.get("rtt_ctl_s"))):
                continue
            key = (h, int(hp.num(row.get("flow_id"), 0)))
            seen.add(key)
            if not math.isfinite(hp.num(row.get("max_qdepth"))):
                missing.add(key)
    return IntCoverage(len(seen), tuple(sorted(missing)))
