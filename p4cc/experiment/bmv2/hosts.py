"""Host-side processes of a BMv2 run: synchronised host processes, iperf3, records.

Every process runs inside its Mininet host (``host.popen``) with this venv's Python and
writes under ``<run>/hosts/<host>/``.  Senders must start their schedules at one common
instant ``t0``, but a Python process needs a second or more to import p4cc on a busy
two-core machine, so each host process is started through this module's ``__main__``
(``python -m p4cc.experiment.bmv2.hosts --ready R --go G -- host run|send ...``): it
imports p4cc, creates ``R``, waits for ``G`` (written by the backend once every host is
ready; it holds t0 as a Unix time), waits until t0 and then runs the ``p4cc host``
command unchanged.  ``host run`` (a host's receiver and sender in one process,
p4cc.hostcc.cli_run) binds its receiver first and calls this wait as its ``gate``, so
``R`` also says that the host listens.  Flow start times in the ``--schedule`` file are
relative to t0.
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

from p4cc.errors import P4ccError, SwitchError
from p4cc.hostcc import sched

#: give up waiting for the go file after this long (the backend died)
GO_TIMEOUT_S = 120.0
#: how often a waiting sender looks for the go file
GO_POLL_S = 0.01
#: a host process leaves the gate this long before t0 (less than the backend's lead
#: between the go file and t0, limits.GO_LEAD_S): the sender sets itself up (netns,
#: records, HTB qdisc, its first flows' classes: 30-76 ms on a loaded run when it
#: left at t0) before its first flows are due
SETUP_LEAD_S = 0.25
#: how often readiness conditions (a log line, a listening port) are checked
LISTEN_POLL_S = 0.02


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
        time.sleep(LISTEN_POLL_S)  # poll interval of the readiness condition
    return False


def wait_listening(node: Any, host: str, ports: Sequence[int], timeout_s: float,
                   what: str = "iperf3 servers") -> None:
    """Poll ``ss -ltn`` in Mininet host ``node`` until TCP ``ports`` all listen;
    SwitchError naming the ports if they do not within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        out = node.cmd("ss -ltn")
        if all(f":{p} " in out for p in ports):
            return
        if time.monotonic() >= deadline:
            break
        time.sleep(LISTEN_POLL_S)  # poll interval of the readiness condition
    raise SwitchError(f"{what} on {host} did not listen on ports {min(ports)}..{max(ports)} "
                      f"within {timeout_s:g} s; is another iperf3 using them?")


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
            # "t_s" of a controller's trace() is its own clock (the sender's, from its
            # start): copied over, it moved every row ~30-40 ms off the run clock
            if k not in ("t", "t_s", "flow_id", "rate_bps") and k is not None:
                out[k] = v
        yield out


# -- host NIC line rate ---------------------------------------------------------------
def with_nic_rate(argv: Sequence[str], link_rate_bps: float) -> list[str]:
    """``p4cc host send`` (or ``host run --dev``) arguments capping the host's paced
    aggregate at its link rate.

    The fabric's links are unshaped veths (only switch egress queues have rates), so
    without a cap a host with ten new DCQCN flows (each starting at line rate) sent
    ~10x its link rate into its switch.  ``--nic-rate`` makes the HTB pacer put the flow
    classes under one class at the link rate (``PacerConfig.link_rate_bps``)."""
    out = list(argv)
    sends = out[:2] == ["host", "send"] or (out[:2] == ["host", "run"] and "--dev" in out)
    if link_rate_bps > 0 and sends and "--nic-rate" not in out:
        out += ["--nic-rate", f"{link_rate_bps:g}"]
    return out


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


def wait_for_go(ready: Path, go: Path, lead_s: float = SETUP_LEAD_S) -> float:
    """Say ready, wait for the go file, then until ``lead_s`` before its t0; returns t0
    (Unix time).  The caller's flows count from t0 (SenderConfig.t0_epoch), so leaving
    early costs nothing and gives the sender time to set up before they are due."""
    ready.write_text(str(os.getpid()))
    t0 = read_go(go, time.monotonic() + GO_TIMEOUT_S)
    if t0 is None:
        raise NoGo(f"bmv2_hosts: no go file {go} within {GO_TIMEOUT_S:g} s")
    delay = t0 - lead_s - time.time()
    if delay > 0:
        time.sleep(delay)  # waiting for a wall-clock instant, not for a condition
    return t0


def host_parser() -> argparse.ArgumentParser:
    """``host send|recv`` exactly as ``p4cc`` parses them (p4cc.hostcc.cli registers the
    subcommand; the root CLI is not imported)."""
    from p4cc.hostcc import cli as hostcc_cli

    parser = argparse.ArgumentParser(prog="p4cc")
    hostcc_cli.register(parser.add_subparsers(dest="command", required=True))
    return parser


def _schedule_self(slice_s: float, rt_prio: int, switch_interval_s: float) -> None:
    """Scheduler attributes first, so every thread started later inherits them; a kernel
    that refuses them costs a line in the log, not the run (the verdict's flow_start
    check says whether flows then started on time)."""
    if switch_interval_s > 0:
        sys.setswitchinterval(switch_interval_s)
    try:
        print(sched.apply_host_sched(slice_s, rt_prio), file=sys.stderr, flush=True)
    except sched.SchedError as exc:
        print(f"scheduling: kept the kernel's defaults: {exc}", file=sys.stderr, flush=True)


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m p4cc.experiment.bmv2.hosts")
    parser.add_argument("--ready", required=True, help="file to create once imported")
    parser.add_argument("--go", required=True, help="file holding t0 (Unix time)")
    parser.add_argument("--nic-rate", type=float, default=0.0,
                        help="cap the host's HTB-paced aggregate at this rate (b/s): "
                        "passed to `host send --nic-rate`")
    parser.add_argument("--slice-ms", type=float, default=0.0,
                        help="request this EEVDF slice (ms, 0.1-100; 0: the kernel's) so "
                        "the process runs soon after it wakes (p4cc.hostcc.sched)")
    parser.add_argument("--rt-prio", type=int, default=0,
                        help="run SCHED_RR at this real-time priority (1-99; 0: no)")
    parser.add_argument("--switch-interval-ms", type=float, default=0.0,
                        help="Python's GIL switch interval (ms; 0: Python's 5 ms): how "
                        "long the sending loop may wait for the pacer's thread")
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="-- p4cc host arguments")
    args = parser.parse_args(argv)
    if args.slice_ms and not sched.MIN_SLICE_S <= args.slice_ms / 1e3 <= sched.MAX_SLICE_S:
        parser.error(f"--slice-ms {args.slice_ms:g}: the kernel takes 0.1-100 ms")
    if not 0 <= args.rt_prio <= 99:
        parser.error(f"--rt-prio {args.rt_prio}: real-time priorities are 1-99 (0: none)")
    _schedule_self(args.slice_ms / 1e3, args.rt_prio, args.switch_interval_ms / 1e3)
    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    rest = with_nic_rate(rest, args.nic_rate)
    import p4cc.hostcc.cc
    import p4cc.hostcc.pacing
    import p4cc.hostcc.sender  # noqa: F401

    try:  # the HTB pacer's netlink library, imported lazily by the sender
        import pyroute2  # noqa: F401
    except ImportError:
        pass

    # parse now, before the go file: a bad argument fails at once
    cmd = host_parser().parse_args(rest)
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    go = Path(args.go)

    def gate() -> float:
        return wait_for_go(Path(args.ready), go)

    try:  # the exit codes of p4cc's main: 2 for a P4ccError, 130 when interrupted
        if cmd.host_command == "run":
            cmd.gate = gate  # called once its receiver listens
        else:  # (host send: its flows count from t0 too, host recv ignores it)
            cmd.t0_epoch = gate()
        return int(cmd.func(cmd) or 0)
    except NoGo as exc:
        print(exc, file=sys.stderr)
        return 3
    except P4ccError as exc:
        print(f"p4cc: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


class HostsError(P4ccError):
    """A host process failed to start."""


class NoGo(HostsError):
    """The go file did not come (the backend died)."""


if __name__ == "__main__":
    sys.exit(_main())
