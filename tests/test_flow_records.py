"""Every backend writes flow records with exactly p4cc.analysis.runs.FLOW_RECORD_COLUMNS."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from replay_backend import ReplayBackend

from p4cc.analysis.runs import FLOW_RECORD_COLUMNS, open_run
from p4cc.experiment.bmv2 import collect as bmv2_collect
from p4cc.experiment.bmv2.hosts import HostProc
from p4cc.experiment.runner import run_spec
from p4cc.experiment.sim_backend import SimBackend
from p4cc.experiment.spec import parse_spec
from p4cc.topo.spec import parse_topo

DOC: dict[str, Any] = {
    "name": "fr", "backend": "sim", "topology": "star,hosts=3", "duration_s": 0.2,
    "interval_s": 0.05, "agents": ["secn1"],
    "workloads": [{"type": "incast", "receiver": "h3", "senders": [2, 2], "sizes": [20_000],
                   "load": 0.3},
                  {"type": "bulk", "pairs": [["h1", "h2"]]}],
}


def _quiet(label: str, duration: float) -> Any:
    return lambda t: None


def _stored_columns(path: Path) -> list[str]:
    return list(pd.read_csv(path / "flows.csv", nrows=0).columns)


def test_sim_backend_writes_the_flow_record_columns(tmp_path: Path) -> None:
    paths = run_spec(parse_spec(DOC), SimBackend(), out=tmp_path / "fr", progress=_quiet)
    assert _stored_columns(paths[0]) == list(FLOW_RECORD_COLUMNS)
    flows = open_run(paths[0]).flows
    assert len(flows) > 2 and set(flows["cls"]) == {"incast", "bulk"}
    assert flows["base_rtt_s"].notna().all()  # the simulator knows each path's RTT


def test_replay_backend_writes_the_flow_record_columns(tmp_path: Path) -> None:
    paths = run_spec(parse_spec(DOC), ReplayBackend(), out=tmp_path / "fr", progress=_quiet)
    assert _stored_columns(paths[0]) == list(FLOW_RECORD_COLUMNS)


def _csv(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(path, index=False)


class _Exited:
    pid = 1

    def poll(self) -> int:
        return 0


def test_bmv2_collect_writes_the_flow_record_columns(tmp_path: Path) -> None:
    """Records of a fake host directory as the bmv2 hosts leave them."""
    topo = parse_topo("star,hosts=3")
    sched = pd.DataFrame({"flow_id": [0, 1, 2], "start_s": [0.0, 0.0, 0.0],
                          "src": ["h1", "h2", "h1"], "dst": ["h3", "h3", "h2"],
                          "size_bytes": [5000, 5000, 0], "cls": ["incast", "incast", "bulk"],
                          "tag": ["i", "i", "b"]})
    t0 = 1000.0
    for h, sport in (("h1", 4000), ("h2", 4001)):
        _csv(tmp_path / h / "send" / "fct.csv", [
            {"flow_id": 1, "sport": sport, "start_s": 0.01, "fct_s": 0.5,
             "start_epoch": t0 + 0.03, "completed": True, "retx_bytes": 0, "cnps": 2,
             "nacks": 0, "timeouts": 0}])
    _csv(tmp_path / "h3" / "recv" / "rx_flows.csv", [
        {"src": topo.host("h1").ip, "sport": 4000, "rx_bytes": 5000}])
    rows, _ = bmv2_collect.sender_records(sched.iloc[:2], {"h1": [0], "h2": [1]}, tmp_path,
                                          topo, t0)
    iperf_log = tmp_path / "h1" / "iperf3-client.json"  # never written: the client failed
    proc = HostProc("h1", "iperf3-client", _Exited(), tmp_path / "h1", iperf_log,
                    {"flow_id": 2, "dst": "h2", "start_s": 0.0})
    table, bulk_rows = bmv2_collect.bulk_records([proc], sched.iloc[2:])
    assert len(rows) == 2 and len(bulk_rows) == 1 and table[0]["error"]
    for row in [*rows, *bulk_rows]:
        assert list(row) == list(FLOW_RECORD_COLUMNS)


def test_bmv2_collect_counts_retransmitted_packets_of_the_senders_payload(
        tmp_path: Path) -> None:
    """Scale.pkt_bytes is the frame: a sender's full packet carries pkt_bytes - 66 B of
    payload (14 B Ethernet + 52 B datagram overhead), and flows.csv counts resent
    packets of that size (it once divided by pkt_bytes - 52)."""
    from p4cc.hostcc import api
    from p4cc.hostcc.flow import Flow, FlowSpec

    topo = parse_topo("star,hosts=3")
    sender_payload = Flow(1, FlowSpec("10.0.0.3", 10**6), None,  # type: ignore[arg-type]
                          api.datagram_bytes(topo.scale), 0.01).payload
    assert bmv2_collect._payload(topo) == sender_payload
    sched = pd.DataFrame({"flow_id": [0], "start_s": [0.0], "src": ["h1"], "dst": ["h3"],
                          "size_bytes": [10**6], "cls": ["incast"], "tag": ["i"]})
    _csv(tmp_path / "h1" / "send" / "fct.csv", [
        {"flow_id": 1, "sport": 4000, "start_s": 0.0, "fct_s": 1.0, "start_epoch": 1000.0,
         "completed": True, "retx_bytes": 100 * sender_payload, "cnps": 0}])
    rows, _ = bmv2_collect.sender_records(sched, {"h1": [0]}, tmp_path, topo, 1000.0)
    assert rows[0]["retransmissions"] == 100


def test_bmv2_hostcc_rows_are_on_the_run_clock_whatever_the_controller_traces(
        tmp_path: Path) -> None:
    """A controller's trace() carries its own ``t_s`` (the sender's clock); the hostcc
    row's t_s must stay the trace time plus the sender's offset to the run clock."""
    from p4cc.experiment.bmv2.hosts import iter_trace_rows

    _csv(tmp_path / "trace.csv", [
        {"t": 0.5, "flow_id": 1, "rate_bps": 1e6, "t_s": 0.5, "alpha": 0.25},
        {"t": 0.6, "flow_id": 2, "rate_bps": 2e6, "t_s": 0.6, "alpha": 0.5}])
    rows = list(iter_trace_rows(tmp_path / "trace.csv", "h1", 0.035, [7, 9]))
    assert [r["t_s"] for r in rows] == [0.535, 0.635]
    assert [r["flow_id"] for r in rows] == [7, 9]
    assert [float(r["alpha"]) for r in rows] == [0.25, 0.5]


def test_traffic_bench_stores_its_synthetic_run_through_the_run_store() -> None:
    from p4cc.bench import traffic as bench

    cases = {c["case"]: c for c in bench.run(["--flows", "300"])}
    assert set(cases) == {"schedule_websearch", "schedule_fbhdp", "schedule_alistorage",
                          "report_synthetic_run"}
    synthetic = cases["report_synthetic_run"]
    assert synthetic["flows"] > 200 and synthetic["telemetry_intervals"] == bench.INTERVALS


def test_synthetic_run_is_a_complete_run(tmp_path: Path) -> None:
    from p4cc.bench.traffic import store_synthetic_run

    path = store_synthetic_run(parse_spec({**DOC, "duration_s": 2}), tmp_path / "secn1")
    run = open_run(path)
    assert run.complete and run.meta["run"]["backend"] == "synthetic"
    assert _stored_columns(path) == list(FLOW_RECORD_COLUMNS)
    assert len(run.flows) == len(run.schedule) and len(run.telemetry) > 0
