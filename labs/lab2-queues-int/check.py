"""Lab 2 check: your analysis.py on telemetry and INT files in the CLI's formats.

The check writes a telemetry.csv (as ``p4cc cli`` does: p4cc.experiment.clistate) and an
int.csv (p4cc.experiment.clicmds.INT_COLUMNS) whose answers it knows, then calls your
``queue_series``, ``int_max_queue`` and ``plot_queue``.
"""

from __future__ import annotations

import csv
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from labcheck import Report, load_student, source_dir

from p4cc.controlplane.records import PortTelemetry
from p4cc.experiment.clicmds import INT_COLUMNS
from p4cc.experiment.clistate import TelemetryCsv


def sample(tmp: Path) -> tuple[Path, Path, list[float]]:
    tele = tmp / "telemetry.csv"
    sink = TelemetryCsv(tele)
    queue = [0, 2000, 8000, 15000, 22000, 18000, 9000, 3000, 0, 0]
    for i, q in enumerate(queue):
        t = 0.5 * (i + 1)
        sink([PortTelemetry("s1", p, t, 0.5, q if p == 3 else 100.0, 2 * q, 9e6, 1e6, 1100,
                            100, 0, None, 2, 2, 0) for p in (1, 2, 3)])
    sink.close()
    ints = tmp / "int.csv"
    with ints.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=INT_COLUMNS)
        w.writeheader()
        for i, (q1, q2) in enumerate([(3, 10), (5, 22), (1, 17)]):
            for hop, (sw, q) in enumerate([(2, q2), (1, q1)]):
                w.writerow({"t_s": i * 0.1, "switch": "leaf2", "src": "10.0.1.1",
                            "dst": "10.0.2.1", "sport": 5000, "dport": 4791, "hop": hop,
                            "hop_switch_id": sw, "ingress_port": 1, "egress_port": 3,
                            "hop_latency_us": 100, "qdepth_pkts": q, "sojourn_us": 50})
    return tele, ints, [float(q) for q in queue]


def main() -> int:
    src = source_dir(Path(__file__).resolve().parent)
    rep = Report("lab 2 (queues and INT)")
    mod = load_student(src / "analysis.py", rep)
    if mod is None:
        return rep.done()
    with tempfile.TemporaryDirectory() as d:
        tele, ints, queue = sample(Path(d))
        try:
            t, q = mod.queue_series(tele, "s1", 3)
            ok = list(map(float, q)) == queue and list(map(float, t)) == [
                0.5 * (i + 1) for i in range(len(queue))]
            rep.check(ok, "queue_series returns s1:3's times and average queue",
                      "return (t_s list, qlen_avg_bytes list) of the rows of that switch "
                      f"and port, in time order; expected q={queue}, got {list(q)[:10]}")
        except NotImplementedError:
            rep.fail("queue_series", "not implemented yet: README step 3")
        except Exception as exc:
            rep.fail("queue_series", f"raised {type(exc).__name__}: {exc}")
        try:
            got = mod.int_max_queue(ints)
            rep.check(dict(got) == {1: 5, 2: 22}, "int_max_queue: deepest queue per switch id",
                      f"expected {{1: 5, 2: 22}} (max qdepth_pkts per hop_switch_id), "
                      f"got {got}")
        except NotImplementedError:
            rep.fail("int_max_queue", "not implemented yet: README step 4")
        except Exception as exc:
            rep.fail("int_max_queue", f"raised {type(exc).__name__}: {exc}")
        png = Path(d) / "queue.png"
        try:
            mod.plot_queue(tele, "s1", 3, png)
            rep.check(png.is_file() and png.read_bytes()[:4] == b"\x89PNG",
                      "plot_queue writes a PNG", "save the figure with matplotlib to the path")
        except NotImplementedError:
            rep.fail("plot_queue", "not implemented yet: README step 5")
        except Exception as exc:
            rep.fail("plot_queue", f"raised {type(exc).__name__}: {exc}")
    return rep.done()


if __name__ == "__main__":
    sys.exit(main())
