"""CHAMELEON on the BMv2 fabric: the controller beside the FabricSession.

Transport: a Unix domain socket in a fresh directory under /tmp.  Mininet hosts are
network namespaces of one machine that share its filesystem (Mininet gives them no
mount namespace), so every ``p4cc host send/recv`` process reaches the socket by path,
and so do the switch proxies in the session's loop threads -- without any route
through the P4 data plane and without a management veth, an address plan or a TCP
listener exposed to the fabric: the simplest option that is the management side by
construction (docs/chameleon.md).

:class:`Bmv2Chameleon`: ``start`` listens (before the hosts start: they connect then,
and retry if they come first); ``begin`` (at t0) dispatches the vendor defaults to
everyone and starts the round thread, which every long period steps the controller and
broadcasts the settings to every live reporter, hosts and switches alike; ``stop`` ends
both and writes the ``chameleon`` table.  The switch proxies (agent ``chameleon``) link
through :meth:`link`.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from p4cc.chameleon.server import MonitorServer
from p4cc.controlplane.agents.chameleon import SocketLink
from p4cc.experiment.chameleon import ChameleonController, own_controller, parse_options
from p4cc.topo.spec import TopoSpec

log = logging.getLogger(__name__)


class Bmv2Chameleon:
    def __init__(self, topo: TopoSpec, options: str = "") -> None:
        self.topo = topo
        cfg = parse_options(options)
        self.dir = Path(tempfile.mkdtemp(prefix="p4cc-cham-"))  # short: AF_UNIX <= 108 B
        probe = ChameleonController(topo.scale, cfg)
        self.server = MonitorServer(f"unix:{self.dir}/monitor.sock", probe.expiry_s)
        self.ctl = ChameleonController(topo.scale, cfg, state=self.server.state)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._rounds, name="p4cc-chameleon",
                                        daemon=True)
        self._t0 = 0.0

    @property
    def address(self) -> str:
        return self.server.address

    def host_args(self, host: str, role: str) -> list[str]:
        """The options that make ``p4cc host <role>`` in ``host`` report and listen."""
        p = self.ctl.periods
        return ["--monitor", self.address, "--monitor-id", f"{host}/{role}",
                "--monitor-periods", f"{p.short_s:g},{p.long_s:g}"]

    def link(self, switch: str) -> SocketLink:
        return SocketLink(self.address, switch, self.topo.scale, self.ctl.periods)

    def start(self) -> Bmv2Chameleon:
        self.server.start()
        return self

    def begin(self, t0_mono: float) -> None:
        """At t0: everyone gets the starting setting; rounds every long period."""
        self._t0 = t0_mono
        # from now on a reporter that connects late (a switch proxy links when its loop
        # starts) is answered with the settings in force: with tune=0 no later round
        # would ever send them (such a run had no ECN marking at all)
        self.server.welcome = self.ctl.message
        self.server.broadcast(self.ctl.message())
        self._thread.start()

    def _rounds(self) -> None:
        k = 1
        while not self._stop.wait(max(0.0, self._t0 + k * self.ctl.periods.long_s
                                      - time.monotonic())):
            k += 1
            try:
                msg = self.ctl.decide(time.monotonic() - self._t0)
                if msg is not None:
                    n = self.server.broadcast(msg)
                    log.info("chameleon round %d: settings to %d reporters", msg.round, n)
            except Exception as exc:  # the controller must not take the run down
                log.error("chameleon round failed: %s", exc)

    def stop(self, sink: Any) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5.0)
        self.server.stop()
        if self.ctl.rows:
            sink.table("chameleon", self.ctl.rows)
        c = self.server.state.counters
        sink.log(f"chameleon: {self.ctl.round} rounds, tuner "
                 f"{self.ctl.tuner.stop_reason or 'still running'}; monitor {vars(c)}")
        shutil.rmtree(self.dir, ignore_errors=True)


def for_bmv2(agent_name: str, topo: TopoSpec) -> Bmv2Chameleon | None:
    """The run's controller (listening) when the agent is ``chameleon[:options]``."""
    opts = own_controller(agent_name)
    return None if opts is None else Bmv2Chameleon(topo, opts).start()


