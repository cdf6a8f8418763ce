"""The BMv2 backend's INT watch: which sources, which sink mode, and the after-run check
(p4cc.experiment.bmv2.int_watch; the switch side: p4cc.controlplane.switch)."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from fake_switch import FakeP4RuntimeServer, FakeThrift

from p4cc.constants import ROCE_PORT
from p4cc.controlplane.p4runtime import P4RuntimeClient
from p4cc.controlplane.switch import SwitchControl, int_watch_action
from p4cc.errors import ConfigError
from p4cc.experiment.bmv2 import int_watch as iw
from p4cc.experiment.bmv2.int_watch import INT_SOURCES
from p4cc.experiment.spec import load_spec
from p4cc.topo.spec import parse_topo

ROOT = Path(__file__).parent.parent
REAL = ROOT / "p4cc" / "data" / "p4" / "p4cc.p4info.txtpb"
EXAMPLE = ROOT / "examples" / "rlcc_bmv2_4to1.yaml"


def _schedule(srcs: list[str], bulk: tuple[str, ...] = ()) -> pd.DataFrame:
    rows = [{"flow_id": i, "src": s, "dst": "h5", "cls": "incast", "start_s": 0.1 * i}
            for i, s in enumerate(srcs)]
    rows += [{"flow_id": 100 + i, "src": s, "dst": "h5", "cls": "bulk", "start_s": 0.0}
             for i, s in enumerate(bulk)]
    return pd.DataFrame(rows)


TOPO = parse_topo("star,hosts=5")


@pytest.mark.parametrize(("host_cc", "reads"), [
    ("rlcc:adpg-mlp-int", True), ("rlcc:adpg-mlp-int-int8", True),
    ("rlcc:adpg-mlp-long", False), ("rlcc", False), ("rlcc:pi", False),
    ("dcqcn", False), ("fixed:1M", False), ("tcp", False)])
def test_which_cc_reads_the_int_queue_depth(host_cc: str, reads: bool) -> None:
    assert iw.host_cc_reads_qdepth(host_cc, TOPO) is reads


def test_plan_reports_only_without_qdepth_cc() -> None:
    sched = _schedule(["h3", "h1", "h3", "h2"], bulk=("h4",))
    plan = iw.watch_plan(TOPO, sched, reports=True, qdepth_cc=False)
    assert [(w.host, w.report) for w in plan] == [("h3", True)][:INT_SOURCES]
    assert iw.watch_plan(TOPO, sched, reports=False, qdepth_cc=False) == ()


def test_plan_qdepth_cc_watches_every_sized_source_summary_only() -> None:
    sched = _schedule(["h3", "h1", "h3", "h2"], bulk=("h4",))
    plan = iw.watch_plan(TOPO, sched, reports=False, qdepth_cc=True)
    assert [(w.host, w.report) for w in plan] == [("h3", False), ("h1", False),
                                                  ("h2", False)]
    assert [w.ip for w in plan] == [TOPO.host(h).ip for h in ("h3", "h1", "h2")]


def test_plan_qdepth_cc_with_int_output_reports_the_first_sources_only() -> None:
    sched = _schedule(["h3", "h1", "h3", "h2"])
    plan = iw.watch_plan(TOPO, sched, reports=True, qdepth_cc=True)
    assert [w.host for w in plan] == ["h3", "h1", "h2"]  # every source, each once
    assert [w.report for w in plan] == [True] * INT_SOURCES + [False] * (3 - INT_SOURCES)


def test_plan_refuses_more_sources_than_the_watchlist_holds() -> None:
    sched = _schedule([f"h{i}" for i in range(1, iw.INT_WATCHLIST_SIZE + 2)])
    with pytest.raises(ConfigError, match="int_watchlist holds"):
        iw.watch_plan(TOPO, sched, reports=False, qdepth_cc=True)


def test_watchlist_size_matches_the_p4info() -> None:
    if not REAL.is_file():
        pytest.skip(f"{REAL} not built (make p4)")
    text = REAL.read_text()
    block = re.search(r'tables \{\s*preamble \{[^}]*name: "[^"]*int_watchlist".*?\n\}',
                      text, re.S)
    assert block is not None
    assert f"size: {iw.INT_WATCHLIST_SIZE}" in block.group(0)


class _Ctl:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def add_int_watch(self, **kw: Any) -> None:
        self.calls.append(kw)


def test_install_puts_every_watch_on_every_switch() -> None:
    plan = (iw.IntWatch("h1", "10.0.1.1", True), iw.IntWatch("h2", "10.0.1.2", False))
    ctls = {"s1": _Ctl(), "s2": _Ctl()}
    iw.install(plan, ctls)
    for c in ctls.values():
        assert c.calls == [
            {"src": "10.0.1.1", "proto": 17, "dport": ROCE_PORT, "report": True},
            {"src": "10.0.1.2", "proto": 17, "dport": ROCE_PORT, "report": False}]


@pytest.mark.parametrize(("host_cc", "outputs", "want"), [
    ("rlcc:adpg-mlp-int", ["flows"], [(h, False) for h in ("h1", "h2", "h3", "h4")]),
    ("rlcc:adpg-mlp-int", ["flows", "int"], [("h1", True)] + [(h, False)
                                                             for h in ("h2", "h3", "h4")]),
    ("rlcc:adpg-trees", ["flows", "int"], [("h1", True)]),
    ("dcqcn", ["flows"], []),
])
def test_run_watches_by_cc_and_outputs(host_cc: str, outputs: list[str],
                                       want: list[tuple[str, bool]]) -> None:
    """The backend's own wiring (_Run._watch_int) on the 4->1 example, whose schedule
    has h1..h4 as sources (INT_SOURCES = 1 here)."""
    from dataclasses import replace

    from p4cc.experiment.bmv2.backend import _Run
    from p4cc.experiment.schedule import build_schedule

    if INT_SOURCES != 1:
        pytest.skip("expectations written for INT_SOURCES = 1")
    spec = replace(load_spec(EXAMPLE), host_cc=host_cc, outputs=tuple(outputs))
    schedule, events = build_schedule(spec, spec.seeds[0])
    lines: list[str] = []
    sink = SimpleNamespace(path=Path("runs/x"), seed=spec.seeds[0], log=lines.append)
    run = _Run(spec, schedule, events, "secn1", sink, None)  # type: ignore[arg-type]
    ctl = _Ctl()
    run.session = SimpleNamespace(controls={"s1": ctl})  # type: ignore[assignment]
    run._watch_int()
    got = sorted((next(h.name for h in run.topo.hosts if h.ip == c["src"]), c["report"])
                 for c in ctl.calls)
    assert got == sorted(want)
    assert run.qdepth_cc is (host_cc == "rlcc:adpg-mlp-int")
    assert any("summary only" in x for x in lines) is any(not r for _h, r in want)


def _trace(path: Path, rows: list[dict[str, Any]]) -> None:
    path.mkdir(parents=True)
    pd.DataFrame(rows, columns=["t", "flow_id", "rtt_ctl_s", "max_qdepth"]).to_csv(
        path / "trace.csv", index=False)


def test_coverage_names_flows_that_ran_on_the_rtt(tmp_path: Path) -> None:
    nan = float("nan")
    _trace(tmp_path / "h1" / "send", [
        {"t": 0.0, "flow_id": 1, "rtt_ctl_s": nan, "max_qdepth": nan},  # no sample yet
        {"t": 0.1, "flow_id": 1, "rtt_ctl_s": 0.01, "max_qdepth": 3},
        {"t": 0.1, "flow_id": 2, "rtt_ctl_s": 0.01, "max_qdepth": 0}])
    _trace(tmp_path / "h2" / "send", [
        {"t": 0.1, "flow_id": 1, "rtt_ctl_s": 0.02, "max_qdepth": nan},  # fell back
        {"t": 0.2, "flow_id": 1, "rtt_ctl_s": 0.02, "max_qdepth": 5}])
    cov = iw.coverage(tmp_path, ["h1", "h2", "h3"])  # h3: no trace (sent nothing)
    assert cov.flows == 3 and cov.without_int == (("h2", 1),)
    assert not cov.ok and "1 of 3 flows ran their CC on the RTT" in cov.summary()
    assert cov.to_json()["without_int"] == [["h2", 1]]
    ok = iw.coverage(tmp_path, ["h1"])
    assert ok.ok and ok.flows == 2 and "every controlled flow (2)" in ok.summary()


def test_switch_control_writes_the_mode_as_the_entrys_action(tmp_path: Path) -> None:
    if not REAL.is_file():
        pytest.skip(f"{REAL} not built (make p4)")
    assert (int_watch_action(True), int_watch_action(False)) == ("int_source",
                                                                 "int_source_summary")
    js = tmp_path / "p4cc.json"
    js.write_text("{}")
    topo = parse_topo("star,hosts=3")
    spec = topo.switch("s1")
    with FakeP4RuntimeServer(device_id=spec.device_id) as srv:
        p4rt = P4RuntimeClient(srv.address, spec.device_id, timeout_s=0.5)
        ctl = SwitchControl(spec, topo, REAL, js, p4rt=p4rt, thrift=FakeThrift({}))
        ctl.connect()
        try:
            p4rt.set_pipeline(REAL, js)
            ctl.add_int_watch(src="10.0.1.1", proto=17, dport=ROCE_PORT)
            ctl.add_int_watch(src="10.0.1.2", proto=17, dport=ROCE_PORT, report=False)
            info = p4rt.p4info
            assert info is not None
            got = [e.action.action.action_id for e in srv.table_entries("int_watchlist")]
            assert got == [info.action_id("int_source"), info.action_id("int_source_summary")]
        finally:
            ctl.close()


def test_scapy_metadata_carries_no_report_where_the_p4_header_has_it() -> None:
    """int_md_t: version 4, e 1, no_report 1, rsvd0 2 (p4src/include/headers.p4)."""
    from p4cc.packets.int import IntMetadata

    assert bytes(IntMetadata(no_report=1))[0] == (1 << 4) | (1 << 2)
    assert bytes(IntMetadata(e=1))[0] == (1 << 4) | (1 << 3)
    assert IntMetadata(bytes(IntMetadata(no_report=1))).no_report == 1
