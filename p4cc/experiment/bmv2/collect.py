"""Host records of a BMv2 run -> the sink's tables (flows, hostcc, bulk, int).

Senders number their flows 1..n in start order (p4cc.hostcc.sender); the backend
keeps, per source host, the schedule's flow ids in that order.  Times are moved onto
the run clock (seconds since t0) with the Unix times the senders record.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from p4cc.experiment.bmv2 import hosts as hp
from p4cc.topo.spec import TopoSpec


def _payload(topo: TopoSpec) -> int:
    """Payload of a full data packet: ``Scale.pkt_bytes`` is the frame on the wire
    (Ethernet included), so it is frame - 66 B, not datagram - 52 B."""
    from p4cc.hostcc.wire import frame_payload_bytes

    return frame_payload_bytes(topo.scale.pkt_bytes)


def _started_order(fct: Sequence[Mapping[str, str]], ids: Sequence[int]) -> list[int]:
    """Schedule ids by the sender's local flow number (1..n in the order the flows
    started).  Senders record each flow's ``ref`` (its schedule id): flows that start
    ``after`` another do not start in schedule order.  Without refs (older senders),
    the schedule's order."""
    by_local: dict[int, int] = {}
    for r in fct:
        local, ref = int(hp.num(r.get("flow_id"), 0)), int(hp.num(r.get("ref"), -1))
        if local >= 1 and ref >= 0:
            by_local[local] = ref
    if not by_local:
        return [int(x) for x in ids]
    return [by_local.get(k, -1) for k in range(1, max(by_local) + 1)]


def sender_records(schedule: pd.DataFrame, senders: Mapping[str, Sequence[int]],
                   hosts_dir: Path, topo: TopoSpec, t0_epoch: float
                   ) -> tuple[list[dict[str, Any]], list[Iterator[dict[str, Any]]]]:
    """(flow rows for RunSink.flows, one hostcc row iterator per sender).  The host's
    other per-flow counters (NAKs, timeouts, ...) stay in its ``send/fct.csv``."""
    rx: dict[tuple[str, int], dict[str, str]] = {}
    for h in {str(x) for x in schedule["dst"]}:
        for r in hp.read_csv(hosts_dir / h / "recv" / "rx_flows.csv"):
            rx[(r.get("src", ""), int(hp.num(r.get("sport"), -1)))] = r
    payload = _payload(topo)
    sched: dict[int, Any] = {int(r["flow_id"]): r
                                        for r in schedule.to_dict("records")}
    rows: list[dict[str, Any]] = []
    traces: list[Iterator[dict[str, Any]]] = []
    for h, ids in senders.items():
        send_dir = hosts_dir / h / "send"
        src_ip = topo.host(h).ip
        offset: float | None = None
        fct = hp.read_csv(send_dir / "fct.csv")
        ids = _started_order(fct, ids)
        for r in fct:
            local = int(hp.num(r.get("flow_id"), 0))
            if not 1 <= local <= len(ids):
                continue  # a flow whose start time never came
            fid = int(ids[local - 1])
            if fid not in sched:
                continue
            s = sched[fid]
            start_epoch = hp.num(r.get("start_epoch"))
            start = start_epoch - t0_epoch
            if offset is None and math.isfinite(start_epoch):
                offset = start_epoch - hp.num(r.get("start_s")) - t0_epoch
            fct_s = hp.num(r.get("fct_s"))
            done = hp.truthy(r.get("completed"))
            rr = rx.get((src_ip, int(hp.num(r.get("sport"), -1))))
            size = int(s["size_bytes"])
            rows.append({
                "flow_id": fid, "src": h, "dst": str(s["dst"]), "size_bytes": size,
                "cls": s["cls"], "tag": s["tag"], "start_s": start,
                "end_s": start + fct_s if done else math.nan,
                "fct_s": fct_s if done else math.nan,
                "bytes_rx": int(hp.num(rr.get("rx_bytes"), 0)) if rr else (size if done else 0),
                "retransmissions": int(hp.num(r.get("retx_bytes"), 0) // payload),
                "completed": done, "base_rtt_s": math.nan,
                "cnps": int(hp.num(r.get("cnps"), 0))})
        if offset is not None:
            traces.append(hp.iter_trace_rows(send_dir / "trace.csv", h, offset, ids))
    rows.sort(key=lambda x: int(x["flow_id"]))
    return rows, traces


def bulk_records(procs: Sequence[hp.HostProc], bulk_rows: pd.DataFrame
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(``bulk`` table rows, flow rows) from the iperf3 clients' JSON output."""
    from p4cc.traffic.iperf import Iperf3Error, parse_iperf3_json

    tags = {int(r["flow_id"]): r["tag"] for r in bulk_rows.to_dict("records")}
    table, flows = [], []
    for p in procs:
        try:
            res = parse_iperf3_json(p.log_path.read_text())
        except (OSError, Iperf3Error) as exc:
            res = {"error": str(exc), "bytes_received": 0, "retransmits": -1}
        fid = int(p.meta["flow_id"])
        table.append({"flow_id": fid, "src": p.host, "dst": p.meta["dst"],
                      "error": res.get("error"), "bytes_received": res.get("bytes_received"),
                      "bps_received": res.get("bps_received"),
                      "retransmits": res.get("retransmits")})
        flows.append({"flow_id": fid, "src": p.host, "dst": p.meta["dst"], "size_bytes": 0,
                      "cls": "bulk", "tag": tags.get(fid, "bulk"), "start_s": p.meta["start_s"],
                      "end_s": math.nan, "fct_s": math.nan,
                      "bytes_rx": int(res.get("bytes_received") or 0),
                      "retransmissions": int(res.get("retransmits") or 0),
                      "completed": res.get("error") is None, "base_rtt_s": math.nan,
                      "cnps": 0})
    return table, flows


def int_rows(rec: Any) -> list[dict[str, Any]]:
    """One row per hop of a p4cc.controlplane.int_collector.IntRecord (fixed columns)."""
    rep = rec.report
    return [{"t_s": rec.t_s, "switch": rec.switch, "src": rep.src, "dst": rep.dst,
             "sport": rep.sport, "dport": rep.dport, "hop": i, "hop_switch_id": h.switch_id,
             "ingress_port": h.ingress_port, "egress_port": h.egress_port,
             "hop_latency_us": h.hop_latency_us, "qdepth_pkts": h.qdepth_pkts,
             "sojourn_us": h.sojourn_us, "flow_id": -1}
            for i, h in enumerate(rep.hops)]
