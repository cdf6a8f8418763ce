"""Per-flow pacing through a Linux HTB qdisc, driven over netlink (pyroute2).

Layout on the host interface (handle major ``cc`` by default)::

    root qdisc  cc:    htb, default 0 (unclassified traffic is not shaped)
    class       cc:1   control class at ``ctrl_rate_bps`` (RTT probes, opcode 0xC0)
    class       cc:N   one per flow, rate = ceil = the flow's CC rate  (N >= 0x100)

With ``link_rate_bps`` (the host's NIC rate) the flow classes hang under one parent::

    class       cc:2   rate = ceil = link rate
    class       cc:N   parent cc:2, rate = min_rate_bps, ceil = the flow's CC rate

HTB sends a leaf below its ``rate`` without asking the parent, so the CC rate must be
the ``ceil`` (borrowed from cc:2) for the parent to bound the sum; HTB then shares the
line round-robin (quantum = one MTU), like a NIC's QP scheduler.  Without it a host
with ten new DCQCN flows (each starting at line rate) put ~10x its link rate on an
unshaped veth (docs/emulation.md).
    filter u32  prio 1 UDP dport 4791 and BTH opcode 0xC0          -> cc:1

A flow's packets find their class by the socket's priority, not by a filter: HTB takes
``skb->priority`` as the class id when it names one of its leaf classes, before it runs
any filter (Linux net/sched/sch_htb.c: htb_classify), so :meth:`HtbPacer.classify` sets
the flow socket's ``SO_PRIORITY`` to its class and the probes it sends are classified
into cc:1 the same way (:meth:`HtbPacer.control`).  Until session 38 every flow had a
u32 filter on its source port (0.45 ms of CPU to create through pyroute2, and one more
rule every packet of the host walked past).  Classes are created through the pacer's
``tc -batch`` child, acknowledged (p4cc.hostcc.tcbatch.TcBatch.sync): ~0.3 ms of tc's
CPU instead of pyroute2's 0.7 ms; pyroute2 where there is no tc.

HTB charges each frame against its class's ceiling at the ceiling in force and keeps
the debt in time units; ``tc class change`` does not reset it (Linux
net/sched/sch_htb.c: htb_accnt_ctokens, htb_change_class).  A 1000-B frame charged at
8 kb/s blocks its class for a second, whatever its new ceiling.  ``ceil_floor_bps``
keeps every ceiling at or above a rate whose frame costs little; the sender paces
slower flows in userspace (``SenderConfig.max_token_debt_s``).

HTB counts the whole frame (Ethernet header included), so a class at R bit/s puts R
bit/s of frames on the wire.  All netlink traffic happens on one background thread:
``set_rate`` only records the latest wanted rate per class and wakes the thread, which
applies the newest value (older requests that arrive faster than the kernel takes
them are coalesced).  ``close`` deletes the root qdisc it created, which removes its
classes and filters with it; nothing else is touched.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from p4cc.constants import ROCE_PORT
from p4cc.errors import ConfigError, P4ccError
from p4cc.hostcc.pacing_config import PacerConfig, PacerStats, enter_netns, htb_rate
from p4cc.hostcc.tcbatch import TcAck, TcBatch, change_line, handle

log = logging.getLogger(__name__)

TC_H_ROOT = 0xFFFFFFFF
ETH_P_IP = 0x0800
FIRST_FLOW_MINOR = 0x100
#: minor number of the class at the host's link rate (``PacerConfig.link_rate_bps``)
LINK_CLASS_MINOR = 0x2
#: how long a caller waits for the pacer thread to run a netlink command
CALL_TIMEOUT_S = 10.0


class HtbPacer:
    """HTB classes per flow; ``set_rate`` never blocks."""

    def __init__(self, cfg: PacerConfig) -> None:
        self.cfg = cfg
        self.stats = PacerStats()
        self._root = cfg.major << 16
        self._cmds: queue.Queue[tuple[Callable[[], Any], queue.Queue[Any]] | None] = (
            queue.Queue()
        )
        self._pending: dict[int, float] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._classes: dict[int, int] = {}  # sport -> classid
        self._wanted: dict[int, float] = {}  # classid -> latest rate requested (clamped)
        self._next_minor = FIRST_FLOW_MINOR
        self._ipr: Any = None
        self._tc: TcBatch | None = None  # rate changes (p4cc.hostcc.tcbatch)
        self._index = 0
        self._created = False
        self._thread: threading.Thread | None = None

    # -- public API (any thread) --------------------------------------------------------
    @property
    def thread_id(self) -> int | None:
        """The kernel's id of the pacer's thread (None before ``start``)."""
        return self._thread.native_id if self._thread is not None else None

    def start(self) -> HtbPacer:
        self._thread = threading.Thread(target=self._run, name="p4cc-pacer", daemon=True)
        self._thread.start()
        self._call(self._setup)
        return self

    def add_flow(self, sport: int, rate_bps: float) -> int:
        """Create the class and filter of a flow (blocks until the kernel has them)."""
        return self.add_flow_async(sport, rate_bps)()

    def add_flow_async(self, sport: int, rate_bps: float) -> Callable[[], int]:
        """Queue the class of a flow for the pacer's thread and return at once (a sender
        sets up its next flows without stalling the running ones); the returned function
        waits until the kernel has it (raising what creating it raised) and returns its
        class id.  ``set_rate`` and :meth:`classify` for ``sport`` only after that."""
        box = self._submit(lambda: self._add_flow(sport, rate_bps))
        return lambda: self._class_made(sport, box)

    def classify(self, sock: socket.socket) -> None:
        """Put the packets ``sock`` sends from now on in its flow's class (the socket's
        source port was given to ``add_flow``): ``SO_PRIORITY`` = the class id."""
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY, self._flow_class(sock))

    @contextlib.contextmanager
    def control(self, sock: socket.socket) -> Iterator[None]:
        """Within the block, ``sock`` sends into the control class (cc:1: RTT probes,
        which must not wait behind the flow's data); its flow's class again after."""
        classid = self._flow_class(sock)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY, self._root | 1)
        try:
            yield
        finally:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY, classid)

    def _flow_class(self, sock: socket.socket) -> int:
        sport = sock.getsockname()[1]
        classid = self._classes.get(sport)
        if classid is None:
            raise ConfigError(f"no pacing class for UDP source port {sport}; add_flow first")
        return classid

    @property
    def floor_bps(self) -> float:
        """The lowest rate a flow class is ever set to; below it the owner must pace."""
        return max(self.cfg.min_rate_bps, self.cfg.ceil_floor_bps)

    def set_rate(self, sport: int, rate_bps: float) -> None:
        """Ask for a flow's new rate (clamped to :attr:`floor_bps`); a rate equal to the
        one last asked for costs no netlink call."""
        classid = self._classes.get(sport)
        if classid is None:
            raise ConfigError(f"no pacing class for UDP source port {sport}; add_flow first")
        bps = max(rate_bps, self.floor_bps)
        with self._lock:
            self.stats.requested += 1
            if self._wanted.get(classid) == bps:
                self.stats.unchanged += 1
                return
            self._wanted[classid] = bps
            if classid in self._pending:
                self.stats.coalesced += 1
            self._pending[classid] = bps
        self._wake.set()

    def close(self) -> None:
        if self._thread is None:
            return
        try:
            if self._thread.is_alive():
                self._call(self._teardown)
        finally:
            self._cmds.put(None)
            self._wake.set()
            self._thread.join(5.0)
            self._thread = None

    def __enter__(self) -> HtbPacer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- updater thread -----------------------------------------------------------------
    def _call(self, fn: Callable[[], Any]) -> Any:
        return self._result(self._submit(fn))

    def _submit(self, fn: Callable[[], Any]) -> queue.Queue[Any]:
        if self._thread is None or not self._thread.is_alive():
            raise P4ccError("pacer thread is not running")
        box: queue.Queue[Any] = queue.Queue(1)
        self._cmds.put((fn, box))
        self._wake.set()
        return box

    def _result(self, box: queue.Queue[Any]) -> Any:
        try:
            ok, value = box.get(timeout=CALL_TIMEOUT_S)
        except queue.Empty:
            raise P4ccError(f"{self.cfg.dev}: the pacer thread did not answer within "
                            f"{CALL_TIMEOUT_S:g} s (netlink stuck?)") from None
        if not ok:
            raise value
        return value

    def _run(self) -> None:
        try:
            if self.cfg.netns:
                enter_netns(self.cfg.netns)
            from pyroute2 import IPRoute

            self._ipr = IPRoute()
        except BaseException as exc:
            self._fail_commands(exc)
            return
        if self.cfg.batch_tc:
            try:  # started here: in this thread's network namespace
                self._tc = TcBatch()
                self.stats.batch = True
            except (OSError, P4ccError) as exc:
                log.info("%s: rate changes through pyroute2 (%s)", self.cfg.dev, exc)
        try:
            while True:
                self._wake.wait(0.1)
                self._wake.clear()
                while True:
                    try:
                        item = self._cmds.get_nowait()
                    except queue.Empty:
                        break
                    if item is None:
                        return
                    fn, box = item
                    try:
                        box.put((True, fn()))
                    except BaseException as exc:
                        box.put((False, exc))
                self._apply_pending()
        finally:
            try:
                self._close_batch()
                if self._created:
                    self._teardown()
            except P4ccError as exc:
                log.error("%s", exc)
            finally:
                self._ipr.close()

    def _close_batch(self) -> None:
        """Let tc finish the changes it was handed, before the classes go."""
        if self._tc is not None:
            self._tc.close()
            self.stats.errors += self._tc.errors
            self._tc = None

    def _fail_commands(self, exc: BaseException) -> None:
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            try:
                item = self._cmds.get(timeout=0.1)
            except queue.Empty:
                continue
            if item is None:
                return
            item[1].put((False, exc))

    def _apply_pending(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, {}
        for classid, bps in pending.items():
            t0 = time.monotonic()
            try:
                self._class("change-class", classid, bps)
            except Exception as exc:  # keep pacing the other flows
                self.stats.errors += 1
                log.warning("HTB rate change of %#x failed: %s", classid, exc)
                with self._lock:  # not in force: the same rate asked again is retried
                    if self._wanted.get(classid) == bps:
                        del self._wanted[classid]
                continue
            dt = time.monotonic() - t0
            self.stats.applied += 1
            self.stats.last_apply_s = dt
            self.stats.max_apply_s = max(self.stats.max_apply_s, dt)

    def _class(self, cmd: str, classid: int, bps: float) -> TcAck | None:
        """Create or change a class: a flow class through tc when there is one (an
        ``add-class`` returns the ack to wait for), else through pyroute2 (done)."""
        burst = int(self.cfg.mtu + bps / 8.0 * self.cfg.burst_s)
        flow = classid & 0xFFFF >= FIRST_FLOW_MINOR
        if flow and self._tc is not None:
            under = self.cfg.link_rate_bps is not None
            try:
                n = self._tc.send(change_line(
                    self.cfg.dev, self._root | (LINK_CLASS_MINOR if under else 0), classid,
                    min(bps, self.cfg.min_rate_bps) if under else bps, bps, burst,
                    self.cfg.mtu, self.cfg.mtu if under else None,
                    verb="add" if cmd == "add-class" else "change"))
                return self._tc.sync((n,)) if cmd == "add-class" else None
            except P4ccError as exc:  # tc is gone: this command and the next by netlink
                log.warning("%s: %s; classes through pyroute2 from now on",
                            self.cfg.dev, exc)
                self._close_batch()
                self.stats.batch = False
        if flow and self.cfg.link_rate_bps is not None:
            # under the link class: the CC rate is the ceil, the rate a floor (see top)
            self._ipr.tc(cmd, "htb", self._index, classid,
                         parent=self._root | LINK_CLASS_MINOR,
                         rate=htb_rate(min(bps, self.cfg.min_rate_bps)), ceil=htb_rate(bps),
                         mtu=self.cfg.mtu, burst=burst, cburst=burst, quantum=self.cfg.mtu)
            return None
        self._ipr.tc(cmd, "htb", self._index, classid, parent=self._root,
                     rate=htb_rate(bps), ceil=htb_rate(bps), mtu=self.cfg.mtu, burst=burst,
                     cburst=burst)
        return None

    def _setup(self) -> None:
        links = self._ipr.link_lookup(ifname=self.cfg.dev)
        if not links:
            raise ConfigError(f"no interface {self.cfg.dev!r} here; pass the host's "
                              "interface (e.g. h1-eth0) with --dev")
        self._index = links[0]
        for q in self._ipr.get_qdiscs(index=self._index):
            if q.get("parent") == TC_H_ROOT and q.get("handle", 0) != 0:
                raise ConfigError(
                    f"{self.cfg.dev} already has a root qdisc "
                    f"({q.get_attr('TCA_KIND')} {q['handle'] >> 16:x}:); p4cc will not "
                    f"replace it. Remove it (`tc qdisc del dev {self.cfg.dev} root`) if it "
                    "is stale, or run without --dev")
        self._ipr.tc("add", "htb", self._index, self._root, default=0)
        self._created = True
        ctrl = self._root | 1
        self._class("add-class", ctrl, self.cfg.ctrl_rate_bps)
        if self.cfg.link_rate_bps is not None:
            self._class("add-class", self._root | LINK_CLASS_MINOR, self.cfg.link_rate_bps)
        self._ipr.tc("add-filter", "u32", self._index, parent=self._root, prio=1,
                     protocol=ETH_P_IP, target=ctrl,
                     keys=[f"0x{ROCE_PORT:08x}/0x0000ffff+20", "0xc0000000/0xff000000+28"])

    def _add_flow(self, sport: int, rate_bps: float) -> tuple[int, TcAck | None]:
        """(pacer thread) Create a flow's class: handed to tc with a sync marker (the
        ack to wait for), or through pyroute2 (no ack: done)."""
        if sport in self._classes:
            return self._classes[sport], None
        if self._next_minor > 0xFFFF:  # a tc class minor is 16 bits; classes are not reused
            raise P4ccError(f"{self.cfg.dev}: more than {0xFFFF - FIRST_FLOW_MINOR + 1} paced "
                            "flows in one sender; split the schedule over several senders")
        classid = self._root | self._next_minor
        self._next_minor += 1
        bps = max(rate_bps, self.floor_bps)
        ack = self._class("add-class", classid, bps)
        with self._lock:
            self._wanted[classid] = bps
        self._classes[sport] = classid
        return classid, ack

    def _class_made(self, sport: int, box: queue.Queue[Any]) -> int:
        """(caller's thread) Wait until a flow's class exists; its class id."""
        classid, ack = self._result(box)
        if ack is None:
            return int(classid)
        try:
            failures = ack.wait(CALL_TIMEOUT_S)
        except P4ccError as exc:  # tc ended before it got there: pyroute2 makes it
            log.warning("%s: %s; class %s through pyroute2", self.cfg.dev, exc,
                        handle(classid))
            self._call(lambda: self._remake(classid))
            return int(classid)
        if failures:
            raise P4ccError(f"{self.cfg.dev}: tc could not create the pacing class "
                            f"{handle(classid)} of UDP source port {sport}: {failures[0]}")
        return int(classid)

    def _remake(self, classid: int) -> None:
        """(pacer thread) Create a class over netlink that a dead tc may or may not have
        created, at the rate last asked for."""
        self._close_batch()
        self.stats.batch = False
        with self._lock:
            bps = self._wanted.get(classid, self.floor_bps)
        try:
            self._class("add-class", classid, bps)
        except Exception as exc:  # NetlinkError(EEXIST): tc made it before it ended
            if "exists" not in str(exc).lower():
                raise
            self._class("change-class", classid, bps)

    def _teardown(self) -> None:
        self._close_batch()
        if not self._created:
            return
        self._created = False
        try:
            self._ipr.tc("del", "htb", self._index, self._root)
        except Exception as exc:
            if "No such" not in str(exc) and "Invalid" not in str(exc):
                raise P4ccError(f"could not remove HTB qdisc from {self.cfg.dev}: {exc}; "
                                f"remove it with `tc qdisc del dev {self.cfg.dev} root`") from exc
