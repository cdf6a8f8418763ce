"""Host-side processes of a BMv2 run: receivers, synchronised senders, iperf3, records.

Every process runs inside its Mininet host (``host.popen``) with this venv's Python and
writes under ``<run>/hosts/<host>/``.  Senders must start their schedules at one common
instant ``t0``, but a Python process needs a second or more to import p4cc on a busy
two-core machine, so each sender is started through this module's ``__main__``
(``python -m p4cc.traffic.bmv2_hosts --ready R --go G -- host send ...``): it imports
p4cc, creates ``R``, waits for ``G`` (written by the backend once every sender is
ready; it holds t0 as a Unix time), waits until t0 and then runs ``p4cc host send``
unchanged.  Flow start times in the ``--schedule`` file are therefore relative to t0.
"""

from __future__ import annotations

import argparse
import csv
import logging
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from p4cc.errors import P4ccError

#: give up waiting for the go file after this long (the backend died)
GO_TIMEOUT_S = 120.0
#: how often a waiting sender looks for the go file
GO_POLL_S = 0.01


@dataclass
class HostProc:
    """One process started in a host; stopped by PID."""

    host: str
    role: str  # recv | send | iperf3-server | iperf3-client
    proc: Any  # subprocess.Popen (Mininet's popen)
    out_dir: Path
    log_path: Path
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    def alive(self) -> bool:
        return bool(self.proc.poll() is None)


def spawn(node: Any, host: str, role: str, argv: list[str], out_dir: Path,
          log_name: str, **meta: Any) -> HostProc:
    """Start ``argv`` in Mininet host ``node``; stdout+stderr to ``out_dir/log_name``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    log_path = out_dir / log_name
    with open(log_path, "w") as fh:
        proc = node.popen(argv, stdout=fh, stderr=subprocess.STDOUT, cwd=str(out_dir))
    return HostProc(host, role, proc, out_dir, log_path, dict(meta))


def stop_all(procs: Sequence[HostProc], grace_s: float = 8.0) -> list[str]:
    """SIGTERM every live process, wait up to ``grace_s`` (they write their records),
    SIGKILL the rest.  Returns what needed killing."""
    for p in procs:
        if p.alive():
            try:
                p.proc.send_signal(signal.SIGTERM)
            except OSError:
                pass
    deadline = time.monotonic() + grace_s
    killed = []
    for p in procs:
        try:
            p.proc.wait(timeout=max(0.05, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.proc.kill()
            p.proc.wait(timeout=5)
            killed.append(f"{p.host}:{p.role} pid {p.pid}")
    return killed


def wait_for_text(path: Path, text: str, deadline: float, procs: Sequence[HostProc] = ()
                  ) -> bool:
    """Poll ``path`` until it contains ``text`` (or a process in ``procs`` died)."""
    while time.monotonic() < deadline:
        try:
            if text in path.read_text():
                return True
        except OSError:
            pass
        for p in procs:
            if not p.alive():
                return False
        time.sleep(0.02)  # poll interval of the readiness condition
    return False


# -- reading the records back ------------------------------------------------------------
def read_csv(path: Path) -> list[dict[str, str]]:
    if not path.is_file() or path.stat().st_size == 0:
        return []
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def num(v: Any, default: float = math.nan) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return default
    return x


def truthy(v: Any) -> bool:
    return str(v).strip().lower() in ("true", "1", "yes")


def iter_trace_rows(path: Path, host: str, offset_s: float,
                    flow_ids: Sequence[int]) -> Iterator[dict[str, Any]]:
    """trace.csv rows of one sender as hostcc rows: ``t_s`` on the run clock,
    ``flow_id`` the schedule's id (the sender numbers its flows 1..n in start order)."""
    for row in read_csv(path):
        local = int(num(row.get("flow_id"), 0))
        if not 1 <= local <= len(flow_ids):
            continue
        out: dict[str, Any] = {"t_s": num(row.get("t")) + offset_s, "host": host,
                               "flow_id": flow_ids[local - 1],
                               "rate_bps": num(row.get("rate_bps"))}
        for k, v in row.items():
            if k not in ("t", "flow_id", "rate_bps") and k is not None:
                out[k] = v
        yield out


# -- host NIC line rate ---------------------------------------------------------------
#: HTB minor number of the class that caps a host's aggregate at its link rate
NIC_CLASS_MINOR = 0x2


def install_nic_cap(link_rate_bps: float) -> None:
    """Make ``p4cc host send --dev`` cap the host's aggregate at ``link_rate_bps``.

    p4cc.hostcc.pacing.HtbPacer hangs every flow's class (rate = ceil = CC rate) directly
    under its HTB root, so the sum over a host's flows is unbounded; a new DCQCN flow
    starts at line rate, and a host with ten concurrent flows sent ~10x its link rate
    into its leaf (the fabric's links are unshaped veths: only switch egress queues
    have rates).  A real NIC serialises at line rate and its scheduler shares the line
    between QPs.  This subclass puts the flow classes under one parent class at the
    link rate (each flow's CC rate becomes its ``ceil``; HTB shares the line between
    them) and is swapped into the sender module of this process only.  Stop-gap until
    PacerConfig has a link-rate option (docs/emulation.md).
    """
    from p4cc.hostcc import pacing, sender

    class NicCappedPacer(pacing.HtbPacer):
        def _setup(self) -> None:
            super()._setup()
            self._nic = self._root | NIC_CLASS_MINOR
            burst = int(self.cfg.mtu + link_rate_bps / 8.0 * self.cfg.burst_s)
            self._ipr.tc("add-class", "htb", self._index, self._nic, parent=self._root,
                         rate=pacing._rate(link_rate_bps), ceil=pacing._rate(link_rate_bps),
                         mtu=self.cfg.mtu, burst=burst, cburst=burst)

        def _class(self, cmd: str, classid: int, bps: float) -> None:
            if classid & 0xFFFF < pacing.FIRST_FLOW_MINOR:  # the probe class stays at root
                super()._class(cmd, classid, bps)
                return
            # HTB sends a leaf below its `rate` without asking its parent, so the flow's
            # CC rate is its `ceil` (borrowed from the NIC class) and its `rate` the
            # pacer's floor: the NIC class then bounds the sum, shared round-robin.
            burst = int(self.cfg.mtu + bps / 8.0 * self.cfg.burst_s)
            self._ipr.tc(cmd, "htb", self._index, classid, parent=self._nic,
                         rate=pacing._rate(min(bps, self.cfg.min_rate_bps)),
                         ceil=pacing._rate(bps), mtu=self.cfg.mtu, burst=burst,
                         cburst=burst, quantum=self.cfg.mtu)

    sender.HtbPacer = NicCappedPacer  # type: ignore[misc]


# -- the synchronised sender wrapper (__main__) -----------------------------------------
def write_go(path: Path, t0_epoch: float) -> None:
    """Publish t0 atomically (a reader never sees a half-written file)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(repr(t0_epoch))
    tmp.replace(path)


def read_go(path: Path, deadline: float) -> float | None:
    """Poll for the go file until ``deadline`` (monotonic); its t0, or None."""
    while time.monotonic() < deadline:
        try:
            return float(path.read_text().strip())
        except (OSError, ValueError):
            pass
        time.sleep(GO_POLL_S)  # poll interval of the go condition
    return None


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m p4cc.traffic.bmv2_hosts")
    parser.add_argument("--ready", required=True, help="file to create once imported")
    parser.add_argument("--go", required=True, help="file holding t0 (Unix time)")
    parser.add_argument("--nic-rate", type=float, default=0.0,
                        help="cap the host's HTB-paced aggregate at this rate (b/s)")
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="-- p4cc arguments")
    args = parser.parse_args(argv)
    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    if args.nic_rate > 0:
        install_nic_cap(args.nic_rate)
    import p4cc.cli
    import p4cc.hostcc.cc
    import p4cc.hostcc.cli
    import p4cc.hostcc.pacing
    import p4cc.hostcc.sender  # noqa: F401

    try:  # the HTB pacer's netlink library, imported lazily by the sender
        import pyroute2  # noqa: F401
    except ImportError:
        pass

    from p4cc.cli import build_parser

    # parse now: building p4cc's parser imports every subcommand's module (~0.4 s)
    cmd = build_parser().parse_args(rest)
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    Path(args.ready).write_text(str(os.getpid()))
    go = Path(args.go)
    deadline = time.monotonic() + GO_TIMEOUT_S
    t0 = read_go(go, deadline)
    if t0 is None:
        print(f"bmv2_hosts: no go file {go} within {GO_TIMEOUT_S:g} s", file=sys.stderr)
        return 3
    delay = t0 - time.time()
    if delay > 0:
        time.sleep(delay)  # waiting for a wall-clock instant, not for a condition
    try:  # as p4cc.cli.main does
        return int(cmd.func(cmd) or 0)
    except P4ccError as exc:
        print(f"p4cc: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


class HostsError(P4ccError):
    """A host process failed to start."""


if __name__ == "__main__":
    sys.exit(_main())
