"""p4cc.analysis.losses (``p4cc report --losses``) on small synthetic run directories
whose answers are known.  The files have the real runs' columns (headers copied from a
BMv2 run of examples/rlcc_bmv2_4to1.yaml)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from p4cc.analysis import losses
from p4cc.analysis.runs import FLOW_RECORD_COLUMNS, open_run
from p4cc.cli import main
from p4cc.errors import P4ccError

TELEMETRY = ("switch,port,t_s,interval_s,qlen_avg_bytes,qlen_max_bytes,tx_bps,tx_marked_bps,"
             "tx_pkts,tx_marked_pkts,drops_pkts,incast_degree,active_flows,elephant_flows,"
             "sojourn_avg_s,utilization,counter_interval_s,kmin_bytes,kmax_bytes,pmax,"
             "mice_elephant_ratio").split(",")
SWITCH_CPU = "t_s,switch,pid,cpu_s,wait_s,rx_pkts,tx_pkts".split(",")
FCT = ("flow_id,dst,sport,cc,size,sched_start_s,start_s,end_s,fct_s,start_epoch,completed,"
       "bytes_sent,retx_bytes,nacks,cnps,timeouts,probes,bad_replies,unknown_cnps,srtt_s,"
       "stale_nacks,ref,ack_rtt_samples").split(",")
TRACE = ("t,flow_id,rate_bps,rtt_s,max_qdepth,cnps,nacks,bytes_sent,snd_una,snd_nxt,"
         "rtt_ctl_s,srtt_s,t_s,action,delta,inflation,reward,decisions").split(",")
RX_COUNTERS = {"datagrams": 0, "malformed": 0, "unknown_opcode": 0, "data_bytes": 0,
               "cnps_sent": 0, "send_errors": 0, "refused_new": 0, "refused_full": 0,
               "expired": 0, "records_dropped": 0}
PAYLOAD = 934  # 1000-B frame - 66 B (p4cc.hostcc.wire.DATA_FRAME_OVERHEAD_BYTES)
BUFFER = 100_000
#: receiver port 2 (not the highest number: the bottleneck is found by its queue)
QMAX = [0, 96_000, 99_000, 70_000, 40_000, 60_000, 30_000]  # full at 0.5, drains at 1.25


def _csv(path: Path, header: list[str], rows: list[dict[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame([{c: r.get(c, 0) for c in header} for r in rows], columns=header).to_csv(
        path, index=False)


def _spec(run: Path, backend: str) -> None:
    run.mkdir(parents=True, exist_ok=True)
    meta = {"name": "t", "backend": backend, "host_cc": "rlcc:adpg-trees",
            "scale": {"name": "testbed-5m", "pkt_bytes": 1000, "buffer_bytes": BUFFER},
            "run": {"variant": "secn1_seed1", "agent": "secn1", "seed": 1, "backend": backend}}
    (run / "spec.resolved.yaml").write_text(yaml.safe_dump(meta))
    (run / "status.json").write_text(json.dumps({"complete": True, "reason": "finished"}))


def _telemetry(run: Path, qmax: list[int], drops: list[int] | None = None) -> None:
    rows = []
    for i, q in enumerate(qmax):
        t = 0.25 * (i + 1)
        rows.append({"switch": "s1", "port": 1, "t_s": t, "interval_s": 0.25,
                     "qlen_max_bytes": 5_000.0})
        rows.append({"switch": "s1", "port": 2, "t_s": t, "interval_s": 0.25,
                     "qlen_max_bytes": float(q), "drops_pkts": (drops or [0] * len(qmax))[i]})
    _csv(run / "telemetry.csv", TELEMETRY, rows)


def _bmv2_run(root: Path) -> Path:
    """Two senders.  h1's clock is 0.05 s behind the run clock; h2's is the run's.
    Window [0.25, 1.0].  NAKs (run clock): h1 1 at 0.20 (before), 2 at 0.65 (in),
    1 at 1.02 (after: 0.97 on h1's clock, inside without the offset); h2 1 at 1.0 (in,
    the end is inclusive).  7 switch drops, all on the way to the receiver."""
    run = root / "host_cc=rlcc_adpg-trees" / "secn1_seed1"
    _spec(run, "bmv2")
    _telemetry(run, QMAX)
    _csv(run / "switch_cpu.csv", SWITCH_CPU, [
        {"t_s": 0.01, "switch": "s1", "rx_pkts": 12, "tx_pkts": 10},
        {"t_s": 1.0, "switch": "s1", "rx_pkts": 80, "tx_pkts": 40},  # 28 queued at 1.0
        {"t_s": 2.0, "switch": "s1", "rx_pkts": 100, "tx_pkts": 91}])
    flows = [{"flow_id": 0, "src": "h1", "dst": "h3", "start_s": 0.20},
             {"flow_id": 1, "src": "h2", "dst": "h3", "start_s": 0.30}]
    _csv(run / "flows.csv", list(FLOW_RECORD_COLUMNS), flows)
    h1 = run / "hosts" / "h1" / "send"
    _csv(h1 / "fct.csv", FCT, [{"flow_id": 1, "start_s": 0.15, "bytes_sent": 40 * PAYLOAD,
                                "retx_bytes": 9 * PAYLOAD, "nacks": 4, "stale_nacks": 1,
                                "timeouts": 2, "probes": 2, "ref": 0}])
    # (t, nacks, bytes_sent pkts, snd_nxt): a rewind at 0.60 (snd_nxt 20 -> 18) resends 5,
    # the row at 0.97 resends 3 (5 sent, 2 new)
    rows = [(0.15, 1, 10, 10), (0.40, 1, 20, 20), (0.60, 3, 25, 18), (0.97, 4, 30, 22),
            (1.50, 4, 40, 32)]
    _csv(h1 / "trace.csv", TRACE, [{"t": t, "t_s": t, "flow_id": 1, "nacks": n,
                                    "bytes_sent": b * PAYLOAD, "snd_nxt": s}
                                   for t, n, b, s in rows])
    h2 = run / "hosts" / "h2" / "send"
    _csv(h2 / "fct.csv", FCT, [{"flow_id": 1, "start_s": 0.30, "bytes_sent": 10 * PAYLOAD,
                                "nacks": 1, "probes": 0, "ref": 1}])
    _csv(h2 / "trace.csv", TRACE, [{"t": 0.5, "flow_id": 1, "bytes_sent": 5 * PAYLOAD,
                                    "snd_nxt": 5},
                                   {"t": 1.0, "flow_id": 1, "nacks": 1,
                                    "bytes_sent": 10 * PAYLOAD, "snd_nxt": 10}])
    recv = run / "hosts" / "h3" / "recv"
    recv.mkdir(parents=True)
    # sent: 40 + 2 probes + 10 = 52 packets; 7 lost
    (recv / "rx_counters.json").write_text(json.dumps({**RX_COUNTERS, "datagrams": 45}))
    return run


def test_overflow_window_from_first_full_interval_until_below_half() -> None:
    rows = pd.DataFrame({"t_s": 0.25 * np.arange(1, 8), "interval_s": 0.25,
                         "qlen_max_bytes": QMAX})
    # first >= 95 % interval ends at 0.5 (starts 0.25); first < 50 % one ends at 1.25
    assert losses.overflow_window(rows, BUFFER) == losses.Overflow(0.25, 1.0, True)
    # a refill later (60 KB at 1.5 s) does not extend it; never below 50 %: to the end
    high = rows.assign(qlen_max_bytes=[0, 96_000, 99_000, 70_000, 60_000, 55_000, 51_000])
    assert losses.overflow_window(high, BUFFER) == losses.Overflow(0.25, 1.75, False)
    # 94 % is not full: no window
    assert losses.overflow_window(rows.assign(qlen_max_bytes=94_000.0), BUFFER) is None
    with pytest.raises(P4ccError, match="buffer_bytes"):
        losses.overflow_window(rows, 0)


def test_bmv2_run_drops_equal_forward_loss_and_naks_split(tmp_path: Path) -> None:
    r = losses.run_losses(open_run(_bmv2_run(tmp_path)))
    assert r.backend == "bmv2" and r.host_cc == "rlcc:adpg-trees"
    assert r.switch_drops == 7 and r.forward_loss == 7
    assert r.bottleneck == ("s1", 2)
    assert r.overflow == losses.Overflow(0.25, 1.0, True)
    assert r.naks == losses.Phases(1, 3, 1)  # h1 1 / 2 / 1 (offset), h2 0 / 1 / 0
    assert r.rewinds == 4 - 1 + 2 + 1  # h1 nacks - stale + timeouts, h2 one NAK
    assert r.resent_bytes == losses.Phases(0, 5 * PAYLOAD, 3 * PAYLOAD)
    assert r.resent_total_bytes == 9 * PAYLOAD
    assert r.first_start_s == pytest.approx(0.20) and r.drops_after is None


def test_host_loss_shows_as_forward_minus_switch(tmp_path: Path) -> None:
    run = _bmv2_run(tmp_path)
    (run / "hosts" / "h3" / "recv" / "rx_counters.json").write_text(
        json.dumps({**RX_COUNTERS, "datagrams": 43}))  # 2 more lost outside the switch
    r = losses.run_losses(open_run(run))
    assert (r.forward_loss, r.switch_drops) == (9, 7)


def test_switch_drops_sum_over_switches() -> None:
    cpu = pd.DataFrame({"t_s": [0, 0, 1, 1], "switch": ["s1", "s2", "s1", "s2"],
                        "rx_pkts": [5, 100, 50, 300], "tx_pkts": [5, 90, 45, 280]})
    assert losses.switch_drops(cpu, 0.5) == 5 + 10


#: leaf2 of runs/testbed_s17/acc_seed5 (switch_cpu.csv; the other switches' rx - tx did
#: not change; forward loss 0): the first sample, 33 ms after t0, held 12 packets of the
#: first flows (started at 0.3 ms) that leaf2 had received and not yet sent
ACC_SEED5_LEAF2 = [(0.0332, 43, 29), (0.2833, 45, 43), (5.0341, 334, 325),
                   (5.2834, 392, 390), (125.0065, 33091, 33089)]


def _leaf2(rows: list[tuple[float, int, int]]) -> pd.DataFrame:
    return pd.DataFrame([{"t_s": t, "switch": "leaf2", "rx_pkts": rx, "tx_pkts": tx}
                         for t, rx, tx in rows])


def test_switch_drops_need_a_sample_before_the_traffic() -> None:
    # the old difference from the first sample said -12 (docs/benchmarks.md, session 17)
    assert losses.switch_drops(_leaf2(ACC_SEED5_LEAF2), 0.00028) is None
    # with the runner's sample before t0 (switches idle, 2 packets of rx - tx from
    # before the run): no drops, as the receivers said
    before_t0 = [(-0.4996, 41, 39), *ACC_SEED5_LEAF2]
    assert losses.switch_drops(_leaf2(before_t0), 0.00028) == 0
    # drops during the run count from that baseline, not from the first in-run sample
    dropped = [*before_t0[:-1], (125.0065, 33091, 33010)]
    assert losses.switch_drops(_leaf2(dropped), 0.00028) == 79
    # traffic from 0.1 s: the idle sample at 33 ms is the baseline (run before t0 or not)
    late = [(0.0332, 41, 39), *dropped[2:]]
    assert losses.switch_drops(_leaf2(late), 0.1) == 79


def test_run_without_a_sample_before_the_traffic_has_no_switch_drops(
        tmp_path: Path) -> None:
    run = _bmv2_run(tmp_path)
    cpu = pd.read_csv(run / "switch_cpu.csv")
    # the first sample after the first flow (0.20), 10 of its packets inside the switch:
    # from there rx - tx changes by 9 - 10 = -1 over the run (7 drops really)
    cpu.loc[0, ["t_s", "rx_pkts", "tx_pkts"]] = [0.25, 12, 2]
    cpu.to_csv(run / "switch_cpu.csv", index=False)
    r = losses.run_losses(open_run(run))
    assert r.switch_drops is None and r.forward_loss == 7
    row = losses.table_row("x", r)
    assert row["switch drops"] == "–" and row["forward − switch"] == "–"


def test_cli_prints_one_markdown_row_per_run(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    _bmv2_run(tmp_path)
    assert main(["report", "--losses", str(tmp_path / "host_cc=rlcc_adpg-trees")]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3 and lines[0].startswith("| run |")
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    row = dict(zip(head, cells, strict=True))
    assert row["switch drops"] == "7" and row["forward − switch"] == "0"
    assert row["overflow (s after first start)"] == "0.05–0.80"
    assert row["NAKs before / in / after"] == "1 / 3 / 1"
    assert row["drops after"] == "–"


def test_sim_run_uses_exact_telemetry_drops(tmp_path: Path) -> None:
    run = tmp_path / "sim" / "secn1_seed1"
    _spec(run, "sim")
    _telemetry(run, QMAX, drops=[0, 40, 30, 0, 0, 2, 0])
    _csv(run / "flows.csv", list(FLOW_RECORD_COLUMNS), [{"src": "h1", "start_s": 0.3}])
    r = losses.run_losses(open_run(run))
    assert (r.switch_drops, r.drops_after) == (72, 2)  # the 2 at 1.5 s are after 1.0
    assert r.naks is None and r.forward_loss is None and r.rewinds is None


def test_not_a_run_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["report", "--losses", str(tmp_path / "empty")]) == 2
    assert "holds no runs" in capsys.readouterr().err


@pytest.mark.parametrize(("remove", "cause"), [
    ("switch_cpu.csv", "switch_cpu.csv is missing"),
    ("hosts", "hosts/\\*/send is missing"),
    ("hosts/h3/recv/rx_counters.json", "rx_counters.json is missing"),
    ("hosts/h1/send/trace.csv", "trace.csv is missing"),
])
def test_bmv2_run_without_its_files(tmp_path: Path, remove: str, cause: str) -> None:
    run = _bmv2_run(tmp_path)
    target = run / remove
    if target.is_dir():
        shutil.rmtree(target)
    else:
        target.unlink()
    with pytest.raises(P4ccError, match=cause):
        losses.run_losses(open_run(run))


def test_bad_columns_and_backend(tmp_path: Path) -> None:
    run = _bmv2_run(tmp_path)
    pd.read_csv(run / "switch_cpu.csv").drop(columns="tx_pkts").to_csv(
        run / "switch_cpu.csv", index=False)
    with pytest.raises(P4ccError, match=r"switch_cpu.csv lacks the column\(s\) \['tx_pkts'\]"):
        losses.run_losses(open_run(run))
    other = tmp_path / "other"
    _spec(other, "replay")
    with pytest.raises(P4ccError, match="backend 'replay'"):
        losses.run_losses(open_run(other))
    empty = tmp_path / "notel"
    _spec(empty, "sim")
    with pytest.raises(P4ccError, match="no telemetry rows"):
        losses.run_losses(open_run(empty))
