"""How a sender sets its flows up before they start (a mixin of p4cc.hostcc.sender.Sender).

A flow's local id, controller, socket (ECN, ``SO_SNDBUF``, source port, TX timestamps)
and HTB class are made either when it starts or, for the scheduled flows and the chained
flows standing by, ``prepare_ahead_s`` before (``_prepare``), so that the set-up does not
delay its start; the sender's loop starts them (``Sender._start_due``).
"""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Callable

from p4cc.constants import ECN_ECT0
from p4cc.errors import ConfigError
from p4cc.hostcc.chain import FlowChain
from p4cc.hostcc.flow import FlowSpec, RateController
from p4cc.hostcc.pacing import HtbPacer
from p4cc.hostcc.rtt_samples import TxStamps
from p4cc.hostcc.sender_config import SenderConfig
from p4cc.topo.ecmp import flow_sport

#: the Sender's logger: these are its messages
log = logging.getLogger("p4cc.hostcc.sender")

ControllerFactory = Callable[[FlowSpec], RateController]
#: a flow set up before it starts: local id, socket, controller, and a call that waits
#: until its HTB class exists (p4cc.hostcc.pacing.HtbPacer.add_flow_async)
SetUp = tuple[int, socket.socket, RateController, Callable[[], object]]


def prepared_key(spec: FlowSpec) -> tuple[str, int]:
    """A prepared flow's key: its schedule id (the chain hands a released flow back as a
    copy that carries its release time), else the spec object's identity."""
    return ("ref", spec.ref) if spec.ref >= 0 else ("id", id(spec))


def _ready() -> None:
    return None


class FlowSetUp:
    """The set-up methods of a Sender; it provides these attributes."""

    cfg: SenderConfig
    make_ctl: ControllerFactory
    chain: FlowChain
    sport_fallbacks: int
    _pacer: HtbPacer | None
    _stamps: TxStamps
    _timed: list[FlowSpec]  # flows with a start time, in start order
    _prep_next: int
    _prepared: dict[tuple[str, int], SetUp]
    _next_fid: int

    def _prepare(self, t: float) -> None:
        """Set up the scheduled flows that start within ``prepare_ahead_s`` of ``t`` (those
        due by ``t`` have just been started, or skipped, by ``_start_due``), and the
        chained flows standing by for one of this sender's running flows
        (FlowChain.standing_by)."""
        timed, ahead = self._timed, self.cfg.prepare_ahead_s
        if ahead <= 0:
            return
        while self._prep_next < len(timed) and timed[self._prep_next].start_s <= t + ahead:
            spec = timed[self._prep_next]
            self._prep_next += 1
            if t < spec.start_s <= spec.stop_s:  # (the chain skips one after its stop)
                self._prepared[prepared_key(spec)] = self._set_up(spec, spec.start_s)
        for spec in self.chain.standing_by(t, ahead):
            if spec.start_s <= spec.stop_s:
                self._prepared[prepared_key(spec)] = self._set_up(spec, max(t, spec.start_s))

    def _set_up(self, spec: FlowSpec, t: float) -> SetUp:
        """A flow's local id, socket and controller, and its HTB class at the controller's
        rate at ``t``, which the pacer's thread makes while the loop goes on (the last item
        waits for it)."""
        fid, self._next_fid = self._next_fid, self._next_fid + 1
        ctl = self.make_ctl(spec)
        sock = self._open(fid, spec)
        class_made: Callable[[], object] = _ready
        try:
            if self._pacer is not None:
                class_made = self._pacer.add_flow_async(sock.getsockname()[1],
                                                        max(ctl.rate_bps(t), 1.0))
        except BaseException:
            sock.close()
            raise
        return fid, sock, ctl, class_made

    def _open(self, i: int, spec: FlowSpec) -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            if self.cfg.ecn:
                s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, ECN_ECT0)
            if self.cfg.dev:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.cfg.sndbuf_bytes)
            self._bind(s, i, spec)
            s.connect((spec.dst, spec.port))
        except OSError as exc:
            s.close()
            raise ConfigError(f"cannot open the socket of flow {i} to {spec.dst}:{spec.port}"
                              f" ({exc}); check --dst and the route") from exc
        s.setblocking(False)
        if self.cfg.dev:  # HTB holds the packets: time timed ones when they leave
            self._stamps.enable(i, s)
        return s

    def _bind(self, s: socket.socket, i: int, spec: FlowSpec) -> None:
        """Bind flow ``i``'s source port: ``sport_base + i`` if set; else, for a scheduled
        flow, the port its schedule id names (p4cc.topo.ecmp.flow_sport), so the switches'
        ECMP hash puts it on the same path in every run and in the simulator; else any.
        A scheduled flow whose port is taken falls back to any port (logged; its
        ``fct.csv`` row records the port it used)."""
        if self.cfg.sport_base:
            s.bind(("0.0.0.0", self.cfg.sport_base + i))
            return
        if spec.ref >= 0:
            port = flow_sport(spec.ref)
            try:
                s.bind(("0.0.0.0", port))
                return
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    raise
                self.sport_fallbacks += 1
                log.warning("flow %d: source port %d is taken; any port instead, so its "
                            "ECMP path is not the simulator's", spec.ref, port)
        s.bind(("0.0.0.0", 0))
