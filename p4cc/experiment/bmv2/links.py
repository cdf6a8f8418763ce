"""Link failures of a BMv2 run: black-hole both switch ends of a link with ``tc``.

Not ``ip link set down``: BMv2's libpcap ports stopped forwarding for good after one
down/up (measured: no packet crossed leaf1 again, even on its other ports).  Instead an
HTB root whose only class runs at ``BLACKHOLE_RATE`` into a one-packet pfifo eats
everything BMv2 sends on the port (the kernel here lacks netem and matchall); ``up``
deletes that root qdisc.  ``LinkFailures`` remembers every interface it black-holed,
so ``restore_all`` (teardown) undoes exactly what it changed.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from p4cc.topo.hosts import switch_intf
from p4cc.topo.spec import TopoSpec

#: HTB handle of the black hole (any unused one; "e2" for "events")
HANDLE = "e2:"
#: HTB's smallest useful rate: one 1000-byte packet every ~17 minutes
BLACKHOLE_RATE = "8bit"

Runner = Callable[[list[str]], "subprocess.CompletedProcess[str]"]


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def blackhole_cmds(dev: str) -> list[list[str]]:
    """``tc`` commands that make ``dev`` drop (almost) everything sent on it."""
    return [["tc", "qdisc", "replace", "dev", dev, "root", "handle", HANDLE, "htb",
             "default", "1"],
            ["tc", "class", "add", "dev", dev, "parent", HANDLE, "classid", f"{HANDLE}1",
             "htb", "rate", BLACKHOLE_RATE, "ceil", BLACKHOLE_RATE, "burst", "1",
             "cburst", "1"],
            ["tc", "qdisc", "add", "dev", dev, "parent", f"{HANDLE}1", "pfifo", "limit",
             "1"]]


def restore_cmds(dev: str) -> list[list[str]]:
    return [["tc", "qdisc", "del", "dev", dev, "root"]]


@dataclass(frozen=True)
class LinkChange:
    """One applied link event (the run's ``link_events_applied`` table)."""

    t_s: float
    action: str  # down | up
    a: str
    b: str
    failure: Any  # the link_failures entry it came from

    def to_row(self) -> dict[str, Any]:
        return {"t_s": self.t_s, "action": self.action, "a": self.a, "b": self.b,
                "failure": self.failure}


class LinkFailures:
    """Applies link events (p4cc.experiment.schedule.LINK_EVENT_COLUMNS) to a fabric."""

    def __init__(self, topo: TopoSpec, log: Callable[[str], None],
                 run: Runner = _run) -> None:
        self.topo, self.log, self.run = topo, log, run
        self.down: set[str] = set()  # interfaces black-holed now

    def _devs(self, ev: Mapping[str, Any]) -> list[str]:
        """The switch-side interfaces of the event's link (host ends are left alone)."""
        return [switch_intf(str(node), int(port))
                for node, port in ((ev["a"], ev["a_port"]), (ev["b"], ev["b_port"]))
                if not self.topo.is_host(str(node))]

    def _tc(self, cmds: list[list[str]]) -> None:
        for cmd in cmds:
            res = self.run(cmd)
            if res.returncode != 0:
                self.log(f"link event: `{' '.join(cmd)}` failed: {res.stderr.strip()}")

    def apply(self, ev: Mapping[str, Any], t_s: float) -> LinkChange:
        """Fail (``action`` down) or restore the link of one event."""
        action = "down" if ev["action"] == "down" else "up"
        for dev in self._devs(ev):
            if action == "down":
                self._tc(blackhole_cmds(dev))
                self.down.add(dev)
            elif dev in self.down:
                self._tc(restore_cmds(dev))
                self.down.discard(dev)
        return LinkChange(t_s, action, str(ev["a"]), str(ev["b"]), ev["failure"])

    def restore_all(self) -> None:
        """Undo every black hole still in place (teardown)."""
        for dev in sorted(self.down):
            self._tc(restore_cmds(dev))
        self.down.clear()
