"""The BMv2 backend's refusals and record plumbing (no root, BMv2 or Mininet needed)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from p4cc.errors import ConfigError
from p4cc.experiment.backend import get_backend
from p4cc.experiment.bmv2 import collect as bmv2_collect
from p4cc.experiment.bmv2 import hosts as bmv2_hosts
from p4cc.experiment.bmv2.limits import (
    DCQCN_PROBE_INTERVAL_S,
    MAX_SWITCHES,
    check_spec,
    probe_interval_s,
)
from p4cc.experiment.default import DEFAULT_SPEC, resolve_backend
from p4cc.experiment.spec import load_spec, parse_spec
from p4cc.hostcc.wire import data_overhead
from p4cc.topo.spec import parse_topo

BASE: dict[str, Any] = {
    "name": "t", "backend": "bmv2", "topology": "star,hosts=3", "duration_s": 5,
    "interval_s": 0.25, "host_cc": "dcqcn",
    "workloads": [{"type": "incast", "receiver": "h3", "senders": [2, 2], "sizes": [1000],
                   "load": 0.1}],
}


def _check(**over: Any) -> None:
    check_spec(parse_spec({**BASE, **over}))


def test_registry_finds_the_backend() -> None:
    assert get_backend("bmv2").name == "bmv2"


@pytest.mark.parametrize("over, words", [
    ({"topology": "leafspine,spines=4,leaves=4,hosts=2"}, [f"at most {MAX_SWITCHES}",
                                                          "bmv2 backend", "--backend sim"]),
    ({"topology": "star,hosts=12"}, ["12 hosts", "bmv2 backend"]),
    ({"scale": "paper"}, ["25000 Mb/s", "bmv2"]),
    ({"interval_s": 0.01}, ["interval_s", "bmv2 backend's minimum"]),
    ({"host_cc": "tcp"}, ["host_cc 'tcp'", "bmv2 backend"]),
])
def test_refusals_name_feature_and_backend(over: dict[str, Any], words: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        _check(**over)
    for w in words:
        assert w in str(info.value), str(info.value)


def test_flows_started_after_others_are_played(monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 10: storage and query/response chains (schedule column 'after') run on
    # bmv2 (p4cc.hostcc.chain); they used to be refused.  The spec's checks, not the
    # tools': on a machine without BMv2 check_spec would stop at those
    from p4cc.experiment import doctor

    monkeypatch.setattr(doctor, "bmv2_missing", lambda checks=None: [])
    check_spec(parse_spec({**BASE, "topology": "star,hosts=8",
                           "workloads": [{"type": "storage", "pattern": "oltp"}]}),
               within_budget=False)


def test_default_spec_fits_the_limits() -> None:
    spec = load_spec(DEFAULT_SPEC)
    topo = spec.topo()
    assert len(topo.switches) <= MAX_SWITCHES
    assert spec.agents[:2] == ("secn1", "secn2")
    assert resolve_backend("sim") == "sim"
    with pytest.raises(ConfigError):
        resolve_backend("ns3")


def test_probe_interval() -> None:
    pps = 1250.0
    assert probe_interval_s("dcqcn", 4, pps, 2e-3) == DCQCN_PROBE_INTERVAL_S
    # RL-CC: 4 sources within 5 % of 1250 pps -> 64 ms
    assert probe_interval_s("rlcc", 4, pps, 2e-3) == pytest.approx(0.064)
    assert probe_interval_s("rlcc", 1, 1e6, 2e-3) == pytest.approx(8e-3)  # hostcc default



def test_probe_cap_is_each_sources_share_of_the_budget() -> None:
    from p4cc.experiment.bmv2.limits import PROBE_PPS_BUDGET, probe_max_pps

    # 4 sources at 625 pps (5 Mb/s): together at most 5 % of the port, 31.25 probes/s
    assert 4 * probe_max_pps(4, 625.0) == pytest.approx(PROBE_PPS_BUDGET * 625.0)
    assert probe_max_pps(0, 625.0) == pytest.approx(31.25)


def _csv(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(path, index=False)


def test_sender_records_map_ids_and_times(tmp_path: Path) -> None:
    topo = parse_topo("star,hosts=3")
    sched = pd.DataFrame({"flow_id": [0, 1, 2], "start_s": [0.0, 0.0, 1.0],
                          "src": ["h1", "h2", "h1"], "dst": ["h3", "h3", "h3"],
                          "size_bytes": [5000, 5000, 7000], "cls": "incast", "tag": "i"})
    t0 = 1000.0
    _csv(tmp_path / "h1" / "send" / "fct.csv", [
        {"flow_id": 1, "sport": 4000, "start_s": 0.01, "fct_s": 0.5, "start_epoch": t0 + 0.03,
         "completed": True, "retx_bytes": 2 * (1000 - data_overhead()), "cnps": 3, "nacks": 1,
         "timeouts": 0},
        {"flow_id": 2, "sport": 4001, "start_s": 1.01, "fct_s": "", "start_epoch": t0 + 1.03,
         "completed": False, "retx_bytes": 0, "cnps": 0, "nacks": 0, "timeouts": 2}])
    _csv(tmp_path / "h1" / "send" / "trace.csv", [
        {"t": 0.1, "flow_id": 1, "rate_bps": 5e6, "snd_una": 3},
        {"t": 1.1, "flow_id": 2, "rate_bps": 7e6, "snd_una": 1}])
    _csv(tmp_path / "h3" / "recv" / "rx_flows.csv", [
        {"src": topo.host("h1").ip, "sport": 4001, "rx_bytes": 3000}])
    rows, traces = bmv2_collect.sender_records(sched, {"h1": [0, 2]}, tmp_path, topo, t0)
    assert [r["flow_id"] for r in rows] == [0, 2]
    assert rows[0]["start_s"] == pytest.approx(0.03)
    assert rows[0]["end_s"] == pytest.approx(0.53)
    assert rows[0]["retransmissions"] == 2 and rows[0]["bytes_rx"] == 5000
    assert not rows[1]["completed"] and math.isnan(rows[1]["fct_s"])
    assert rows[1]["bytes_rx"] == 3000
    tr = [r for it in traces for r in it]
    assert [r["flow_id"] for r in tr] == [0, 2]
    assert tr[0]["t_s"] == pytest.approx(0.1 + 0.02)  # sender clock started 20 ms after t0


def test_wrapper_waits_for_go_and_runs_p4cc(tmp_path: Path) -> None:
    ready, go = tmp_path / "ready", tmp_path / "go"
    go.write_text(json.dumps(0.0))  # t0 in the past: run at once
    code = bmv2_hosts._main(["--ready", str(ready), "--go", str(go), "--", "host", "send",
                             "--cc", "nosuch", "--dst", "10.0.0.1", "--size", "1"])
    assert ready.is_file()
    assert code == 2  # p4cc's error exit for a bad --cc, as `p4cc host send` gives


def test_run_dir_handed_to_hosts_is_absolute(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Host processes run in other working directories: a relative run dir (the default
    `runs/<name>`) must reach them as an absolute path (a `make testbed` regression)."""
    from types import SimpleNamespace

    from p4cc.experiment.bmv2.backend import _Run
    from p4cc.experiment.schedule import build_schedule

    monkeypatch.chdir(tmp_path)
    spec = load_spec(DEFAULT_SPEC)
    schedule, events = build_schedule(spec, spec.seeds[0])
    sink = SimpleNamespace(path=Path("runs") / "testbed" / "secn1", seed=spec.seeds[0])
    run = _Run(spec, schedule, events, "secn1", sink, None)
    assert run.root.is_absolute() and run.hosts_dir == tmp_path / "runs/testbed/secn1/hosts"


def test_rlcc_senders_probe_every_interval_others_only_without_ack_samples() -> None:
    """RL-CC decides on the RTT: its BMv2 senders get ``--probe-quiet 0`` (a probe every
    interval); the others keep the hosts' default (probes only for flows without a
    recent ACK RTT sample), and the option reaches the SenderConfig."""
    import argparse

    from p4cc.experiment.bmv2.launch import quiet_args
    from p4cc.hostcc.cli_config import sender_config
    from p4cc.scale import Scale

    assert quiet_args("rlcc") == quiet_args("rlcc:adpg-trees") == ["--probe-quiet", "0"]
    assert quiet_args("dcqcn") == quiet_args("dcqcn:nvidia") == []
    base = dict(nic_rate=0.0, dev="", netns="", sport_base=0, pkt_bytes=0,
                probe_interval=0.064, rto=0.0, rto_max=0.0, rtt_window=1, ack_interval=None,
                completions="", pad=False)
    assert sender_config(argparse.Namespace(**base, probe_quiet=0.0), Scale()).probe_quiet_s \
        == 0.0
    assert sender_config(argparse.Namespace(**base, probe_quiet=None), Scale()).probe_quiet_s \
        is None
