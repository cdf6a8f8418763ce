"""``p4cc bench dataplane_ir``: BMv2's instructions per forwarded packet, l3min vs p4cc.

``p4cc bench dataplane`` measures CPU time per packet, which on a shared VM moves by
10-25 % between runs and days with nothing changed (docs/benchmarks.md, session 39).
This benchmark counts instructions instead, with valgrind's callgrind, which repeats to
a fraction of a percent and so shows a program change of a few percent in one run.
It counts user-space instructions only: the kernel's share (socket I/O, thread
wake-ups), the same for both programs, is not in it, so the factor it gives is larger
than the CPU-time factor issue 10 sets its bar on.  It is a tool for comparing program
variants, not a replacement for that figure.

One ``simple_switch_grpc`` (ports 1 and 2 on veth pairs, as in ``p4cc bench
dataplane``, whose rig and program set-up it reuses) runs under ``valgrind
--tool=callgrind --instr-atstart=no``: nothing is counted until ``callgrind_control -i
on``.  Per program (pushed over P4Runtime, configured as a run's switches are) and
traffic shape, a warm-up runs uncounted, then counting is switched on, the frames are
offered and delivered, counting is switched off and the counts are dumped:

* ``paced``: ``--pps`` frames/s for ``--seconds``; the switch forwards each frame before
  the next arrives, so every frame finds its queue empty;
* ``queued``: ``--burst`` frames at ``--burst-pps`` into port 2 slowed to
  ``--queue-pps`` (over Thrift), so the queue grows and every frame but the first finds one (p4cc's
  RED lookup runs for it).

Per case ``ir_per_pkt`` (instructions / frames delivered) and
``ir_per_pkt_no_phv_alloc``, the same without ``bm::PHVFactory::create``: BMv2
allocates a new packet header vector when its pool is empty, which under valgrind
happened for 0-100 % of the frames in repeated runs of the same program, so the second
figure is the one that repeats.  Without BMv2, root, valgrind or the compiled programs
each case yields ``{"case": ..., "skipped": reason}``.
"""
from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from p4cc.bench import dataplane as dp
from p4cc.errors import P4ccError
from p4cc.topo.veth import veth_pairs

SHAPES = ("paced", "queued")
CASES = (*(f"ir_{p}_{s}" for s in SHAPES for p in dp.PROGRAMS), "ir_ratio")
#: the function whose cost is BMv2's pool refill, not the program's per-packet work
PHV_ALLOC = "bm::PHVFactory::create"
#: valgrind slows the switch ~50x: P4Runtime calls and start-up get this much time
SLOW_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class IrConfig:
    """What ``p4cc bench dataplane_ir`` offers."""

    pps: float = 100.0          # paced rate, frames/s (the counted switch forwards ~300/s)
    seconds: float = 5.0        # length of the paced run
    burst: int = 200            # frames of the queued run
    burst_pps: float = 150.0    # their rate (below what the counted switch takes in)
    queue_pps: float = 50.0     # port 2's service rate in the queued run, packets/s
    warmup_s: float = 1.0       # uncounted paced traffic after each program load


def skip_reason() -> str | None:
    reason = dp.skip_reason()
    if reason is not None:
        return reason
    for tool in ("valgrind", "callgrind_control", "callgrind_annotate"):
        if shutil.which(tool) is None:
            return f"{tool} not installed (package valgrind)"
    return None


def parse_totals(text: str) -> int:
    """The ``totals:`` (or, in older files, ``summary:``) Ir count of a callgrind dump."""
    for key in ("totals:", "summary:"):
        for line in text.splitlines():
            if line.startswith(key):
                return int(line.split()[1])
    raise P4ccError("callgrind dump has no totals line")


def parse_inclusive(annotate_out: str, function: str) -> int:
    """Inclusive Ir of ``function`` in ``callgrind_annotate --inclusive=yes`` output
    (0 if it never ran)."""
    for line in annotate_out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and f":{function}(" in line:
            return int(parts[0].replace(",", ""))
    return 0


def _ctl(*args: str) -> None:
    subprocess.run(["callgrind_control", *args], check=True, capture_output=True, timeout=60)


class CallgrindSwitch:
    """A bench switch (a Bmv2Process, as dp.make_switch's) whose command runs under
    callgrind, counting off."""

    def __init__(self, name: str, interfaces: dict[int, str], out_dir: Path) -> None:
        from p4cc.topo.bmv2 import Bmv2Process

        prefix = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                  f"--callgrind-out-file={out_dir}/callgrind.%p"]

        class _Switch(Bmv2Process):
            def command(self, binary_path: str | None = None,
                        options: frozenset[str] | None = None) -> list[str]:
                return prefix + super().command(binary_path, options)

        self.proc = _Switch(name, 1, interfaces, start_timeout_s=SLOW_TIMEOUT_S)
        self.out_dir = out_dir

    def count(self, label: str, traffic: Callable[[], int]) -> tuple[int, int, int]:
        """Run ``traffic()`` (-> frames delivered) counted: (frames, Ir, Ir of PHV_ALLOC)."""
        pid = str(self.proc.pid)
        _ctl("-z", pid)
        _ctl("-i", "on", pid)
        try:
            delivered = traffic()
        finally:
            _ctl("-i", "off", pid)
        _ctl("-d", label, pid)
        dump = self._dump(label)
        ann = subprocess.run(["callgrind_annotate", "--inclusive=yes", str(dump)],
                             check=True, capture_output=True, text=True, timeout=120).stdout
        return delivered, parse_totals(dump.read_text()), parse_inclusive(ann, PHV_ALLOC)

    def _dump(self, label: str) -> Path:
        for path in sorted(self.out_dir.glob(f"callgrind.{self.proc.pid}.*")):
            if dump_label(path.read_text(errors="replace")[:4000]) == label:
                return path
        raise P4ccError(f"callgrind wrote no dump for {label!r} in {self.out_dir}")


def dump_label(head: str) -> str | None:
    """The label a dump was made with (``callgrind_control -d LABEL``), from its header
    line ``desc: Trigger: dump LABEL``."""
    for line in head.splitlines():
        if line.startswith("desc: Trigger:") and " dump " in line:
            return line.split(" dump ", 1)[1].strip()
    return None


def paced(rig: dp.Rig, cfg: IrConfig) -> int:
    _, delivered, _ = rig.offer(cfg.pps, cfg.seconds)
    return delivered


def queued(rig: dp.Rig, thrift: Any, cfg: IrConfig) -> int:
    """``burst`` frames at ``burst_pps`` into port 2 slowed to ``queue_pps``: frames
    delivered (all of them, or it raises)."""
    thrift.set_queue_depth(max(cfg.burst * 2, 64), 2)
    thrift.set_queue_rate(cfg.queue_pps, 2)
    try:
        sent, got, _ = rig.offer(cfg.burst_pps, cfg.burst / cfg.burst_pps)
    finally:
        thrift.set_queue_rate(1_000_000, 2)
    if got != sent:
        raise P4ccError(f"queued run delivered {got} of {sent} frames (input drops under "
                        "valgrind: lower --burst-pps)")
    return got


def measure(cfg: IrConfig, ifprefix: str = "p4ir") -> dict[str, dict[str, tuple[int, int, int]]]:
    from p4cc.controlplane.p4runtime import P4RuntimeClient
    from p4cc.controlplane.thrift import ThriftClient

    out: dict[str, dict[str, tuple[int, int, int]]] = {p: {} for p in dp.PROGRAMS}
    with tempfile.TemporaryDirectory(prefix="p4cc-ir-") as tmp, veth_pairs(ifprefix) as pairs:
        sw = CallgrindSwitch(f"{ifprefix}sw", {p: a for p, (a, _) in pairs.items()}, Path(tmp))
        sw.proc.start()
        p4rt = P4RuntimeClient(sw.proc.grpc_addr, 1, timeout_s=SLOW_TIMEOUT_S)
        thrift = ThriftClient(f"127.0.0.1:{sw.proc.thrift_port}")
        rig: dp.Rig | None = None
        try:
            p4rt.connect()
            thrift.connect()
            rig = dp.Rig(sw.proc, p4rt, pairs[1][1], pairs[2][1])
            for prog in dp.PROGRAMS:
                rig.load(prog)
                rig.offer(cfg.pps, cfg.warmup_s)
                out[prog]["paced"] = sw.count(f"{prog}-paced", partial(paced, rig, cfg))
                out[prog]["queued"] = sw.count(f"{prog}-queued",
                                               partial(queued, rig, thrift, cfg))
        finally:
            if rig is not None:
                rig.close()
            thrift.close()
            p4rt.close()
            sw.proc.stop(timeout_s=30.0)
    return out


def cases(cfg: IrConfig) -> Iterator[dict[str, Any]]:
    reason = skip_reason()
    if reason is not None:
        for case in CASES:
            yield {"case": case, "skipped": reason}
        return
    t0 = time.monotonic()
    res = measure(cfg)
    per: dict[tuple[str, str], float] = {}
    for shape in SHAPES:
        for prog in dp.PROGRAMS:
            n, ir, alloc = res[prog][shape]
            per[prog, shape] = (ir - alloc) / max(n, 1)
            yield {"case": f"ir_{prog}_{shape}", "frames": n, "frame_bytes": dp.FRAME_BYTES,
                   "ir_per_pkt": round(ir / max(n, 1)),
                   "ir_per_pkt_no_phv_alloc": round(per[prog, shape]),
                   "phv_alloc_share": round(alloc / max(ir, 1), 3)}
    yield {"case": "ir_ratio",
           **{f"{s}_ir_factor": round(per["p4cc", s] / max(per["l3min", s], 1.0), 2)
              for s in SHAPES},
           "paced_pps": cfg.pps, "burst": cfg.burst, "burst_pps": cfg.burst_pps,
           "queue_pps": cfg.queue_pps,
           "wall_s": round(time.monotonic() - t0, 1), "host": socket.gethostname(),
           "bmv2_build": dp.bmv2_build_flags(), "valgrind": _valgrind_version()}


def _valgrind_version() -> str:
    res = subprocess.run(["valgrind", "--version"], capture_output=True, text=True, check=False)
    return res.stdout.strip()


def run(argv: Sequence[str]) -> Iterator[dict[str, Any]]:
    parser = argparse.ArgumentParser(prog="p4cc bench dataplane_ir")
    parser.add_argument("--pps", type=float, default=IrConfig.pps,
                        help="frames/s of the paced run (each frame finds an empty queue)")
    parser.add_argument("--seconds", type=float, default=IrConfig.seconds,
                        help="length of the paced run")
    parser.add_argument("--burst", type=int, default=IrConfig.burst,
                        help="frames of the queued run")
    parser.add_argument("--burst-pps", type=float, default=IrConfig.burst_pps,
                        help="frames/s of the queued run (below what the counted switch "
                             "takes in, or it drops at its input)")
    parser.add_argument("--queue-pps", type=float, default=IrConfig.queue_pps,
                        help="port 2's service rate in the queued run (packets/s)")
    args = parser.parse_args(list(argv))
    if min(args.pps, args.seconds, args.burst_pps, args.queue_pps) <= 0 or args.burst < 2:
        raise P4ccError("--pps, --seconds, --burst-pps and --queue-pps must be > 0 and "
                        "--burst >= 2")
    yield from cases(IrConfig(pps=args.pps, seconds=args.seconds, burst=args.burst,
                              burst_pps=args.burst_pps, queue_pps=args.queue_pps))
