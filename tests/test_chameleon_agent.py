"""The agent ``chameleon``: per-switch proxies of one fabric-wide controller, on the sim
backend (tuning the DCQCN hook and every switch's thresholds) and over a real
connection (a switch proxy reporting to and taking settings from a MonitorServer)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from p4cc.chameleon.server import MonitorServer
from p4cc.chameleon.stats import Periods
from p4cc.chameleon.wire import Message
from p4cc.controlplane.agents.chameleon import ChameleonProxy, make_chameleon
from p4cc.controlplane.agents.static import make_agent
from p4cc.controlplane.ecn import EcnConfig
from p4cc.controlplane.records import PortTelemetry
from p4cc.errors import ConfigError
from p4cc.experiment import chameleon, chameleon_sim
from p4cc.experiment.runner import run_spec
from p4cc.experiment.spec import parse_spec
from p4cc.scale import get_scale
from p4cc.sim.config import SimConfig
from p4cc.sim.engine import Engine
from p4cc.topo.spec import parse_topo
from p4cc.traffic.workloads import frame
from tests.test_chameleon_monitor import wait_for

TOPO = "leafspine,spines=1,leaves=2,hosts=2"


def spec(agent: str, duration: float = 0.008) -> object:
    return parse_spec({
        "name": "cham", "backend": "sim", "topology": TOPO, "scale": "paper",
        "duration_s": duration, "seeds": [3], "interval_s": 1e-4, "agents": [agent],
        "host_cc": "dcqcn:nvidia", "outputs": ["flows", "telemetry"],
        "workloads": [{"type": "bulk", "pairs": [["h1", "h3"], ["h2", "h3"], ["h4", "h1"],
                                                 ["h3", "h2"]]}]})


def test_chameleon_needs_its_controller_and_checks_options() -> None:
    with pytest.raises(ConfigError, match="fabric-wide controller"):
        make_agent("chameleon", get_scale("paper"))
    assert parse_spec  # the name is a registered agent: a spec with it validates
    spec("chameleon:long=0.001,patience=2")
    cfg = chameleon.parse_options("long=0.002,beta=0.02,params=rai_bps+pmax,max_rounds=5")
    assert cfg.long_period_s == 0.002 and cfg.params == ("rai_bps", "pmax")
    assert cfg.tuner.beta == 0.02 and cfg.tuner.max_rounds_per_param == 5
    with pytest.raises(ConfigError, match="keys: long"):
        chameleon.parse_options("bogus=1")
    with pytest.raises(ConfigError, match="unknown parameters"):
        chameleon.parse_options("params=rai_bps+g")


class _Scripted:
    """An objective that gives period ``t``'s value (both variants)."""

    def __init__(self, values: list[float]) -> None:
        self.values, self.t = values, 0

    def __call__(self, metric: str = "") -> float:
        return self.values[self.t]


def test_warmup_periods_are_recorded_but_not_given_to_the_tuner() -> None:
    """The tuner's first baseline is the first period AFTER the warm-up: a first
    collective in an empty fabric scored high (0.73 against a steady 0.63 on 8 hosts)
    and, as the first parameter's baseline, stood as its best value for good."""
    assert chameleon.ChameleonConfig().warmup == 1
    assert chameleon.parse_options("warmup=0").warmup == 0
    with pytest.raises(ConfigError, match=r"'warmup=-1'.*>= 0"):
        chameleon.parse_options("warmup=-1")
    with pytest.raises(ConfigError, match="'warmup=x'"):
        chameleon.parse_options("warmup=x")
    for warmup in (0, 2):
        ctl = chameleon.ChameleonController(
            get_scale("paper"), chameleon.parse_options(f"warmup={warmup},params=pmax"))
        objective = _Scripted([0.9, 0.9, 0.5, 0.6])
        ctl.objective = objective  # type: ignore[method-assign]
        for t in range(4):
            objective.t = t
            ctl.decide(float(t))
        assert [r["param"] for r in ctl.rows] == ["warmup"] * warmup + ["pmax"] * (
            4 - warmup)
        baseline = ctl.tuner.history[0]
        assert baseline.action == "baseline" and baseline.metric == [0.9, 0.5][warmup // 2]


def test_sim_backend_tunes_hosts_and_switches_together(tmp_path: Path) -> None:
    agent = "chameleon:long=0.001,patience=1,beta=0.5"
    (run,) = run_spec(spec(agent), "sim", out=tmp_path / "a", progress=lambda *a: (
        lambda t: None))
    rows = pd.read_csv(run / "chameleon.csv")
    assert len(rows) >= 6
    # the first long period is a warm-up: recorded, not a round of the tuner
    assert list(rows["param"][:2]) == ["warmup", "rai_bps"]
    assert list(rows["round"][:4]) == [0, 0, 1, 2]
    assert (rows["hosts"][1:] == 4).all() and (rows["switches"][2:] == 3).all()
    moved = rows[["rai_bps", "rhai_bps", "increase_period_s", "min_dec_factor"]]
    assert len(moved.drop_duplicates()) > 1  # host parameters changed run by run
    # every switch got the controller's thresholds at its round (the proxies)
    act = pd.read_csv(run / "agent.csv")
    assert set(act["switch"]) == {"leaf1", "leaf2", "spine1"}
    first = rows.iloc[0]
    assert (act["kmin_bytes"] == round(first["kmin_bytes"])).any()
    # deterministic: the same run again gives the same decisions
    (again,) = run_spec(spec(agent), "sim", out=tmp_path / "b", progress=lambda *a: (
        lambda t: None))
    assert (run / "chameleon.csv").read_bytes() == (again / "chameleon.csv").read_bytes()


class _Sink:
    def __init__(self) -> None:
        self.tables: dict[str, list[dict[str, object]]] = {}

    def table(self, name: str, rows: list[dict[str, object]]) -> None:
        self.tables.setdefault(name, []).extend(rows)


def test_sim_controller_applies_host_parameters_to_the_hook_and_engine() -> None:
    topo = parse_topo(TOPO, "paper")
    sched = frame({"start_s": [0.0, 0.0], "src": ["h1", "h2"], "dst": ["h3", "h3"],
                   "size_bytes": 0, "cls": "bulk", "tag": "b", "stop_s": 1.0})
    sink = _Sink()
    fab = chameleon_sim.SimChameleon(topo, sink, chameleon.parse_options("long=0.0005"),
                                     interval_s=1e-4)
    eng = Engine(topo, sched, SimConfig(cc_params="nvidia", telemetry_interval_s=1e-4),
                 on_interval=lambda t, recs: fab.on_interval(eng, t, recs))
    eng.run(0.0031)
    s = fab.ctl.settings
    assert fab.applied >= 4 and len(sink.tables["chameleon"]) >= 4
    assert eng.cc.params.rai_bps == pytest.approx(s["rai_bps"])  # type: ignore[attr-defined]
    assert eng.cc.flows.params.rai_bps == pytest.approx(s["rai_bps"])  # type: ignore[attr-defined]
    assert eng.cnp_interval == pytest.approx(s["cnp_interval_s"])


def rec(t: float, port: int, marked: int = 10) -> PortTelemetry:
    return PortTelemetry("s1", port, t, 0.01, 5000.0, 9000.0, 8e6, 1e6, 100, marked, 0,
                         None, 2, 2, 0, utilization=0.8)


def test_switch_proxy_over_a_real_connection() -> None:
    d = Path(tempfile.mkdtemp(prefix="p4cc-sw-"))
    sc = get_scale("testbed")
    try:
        with MonitorServer(f"unix:{d}/m.sock", expiry_s=5.0) as srv:
            proxy = make_chameleon(sc, srv.address)
            assert isinstance(proxy, ChameleonProxy)
            proxy.periods = Periods(0.01, 0.05)
            proxy.reset({1: None, 2: None})
            for k in range(6):
                assert proxy.act({1: rec(k * 0.01, 1), 2: rec(k * 0.01, 2)}) == {}
            # the switch is live from its hello on; its report's metrics come after it
            assert wait_for(lambda: "mark_rate" in getattr(
                srv.state.live("switch").get("s1"), "metrics", {}))
            m = srv.state.live()["s1"].metrics
            assert m["mark_rate"]["mean"] == pytest.approx(0.1)
            assert m["qlen_avg_bytes"]["n"] == 6 and "pfc" not in str(m)  # none on BMv2
            # a threshold the switch cannot take is refused (nack), not applied
            srv.broadcast(Message("settings", "controller", round=1, params={
                "kmin_bytes": 5000.0, "kmax_bytes": 200_000.0, "pmax": 0.5}))
            assert wait_for(lambda: proxy.act({}) == {} and srv.state.counters.nacks == 1)
            srv.broadcast(Message("settings", "controller", round=2, params={
                "kmin_bytes": 5000.0, "kmax_bytes": 20_000.0, "pmax": 0.5,
                "rai_bps": 1.0}))  # host values are not the switch's business
            want = EcnConfig(5000, 20_000, 0.5)
            got: dict[int, EcnConfig] = {}
            assert wait_for(lambda: bool(got.update(proxy.act({})) or got))
            assert got == {1: want, 2: want}
            assert proxy.act({}) == {}  # in force: nothing more to write
            proxy.link.client.close()  # type: ignore[union-attr]
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_fixed_setting_options_start_from_it_and_never_step(tmp_path: Path) -> None:
    """``tune=0`` with ``initial``/``ecn`` or ``from``: the controller serves one setting
    (the evaluation arms of chameleon_eval on BMv2), recording the objective only."""
    paper = get_scale("paper")
    expert = chameleon.default_settings(paper, "hpcc-ns3", "SECN2")
    cfg = chameleon.parse_options("tune=0,initial=hpcc-ns3,ecn=SECN2")
    assert not cfg.tune and cfg.starting(paper) == expert
    (run,) = run_spec(spec("chameleon:long=0.001,tune=0,initial=hpcc-ns3,ecn=SECN2"), "sim",
                      out=tmp_path / "a", progress=lambda *a: (lambda t: None))
    rows = pd.read_csv(run / "chameleon.csv")
    assert len(rows) >= 5 and set(rows["param"]) == {"fixed"} and (rows["round"] == 0).all()
    assert rows["metric"].notna().all()
    assert (rows[list(expert)].iloc[-1] == pd.Series(expert)).all()
    act = pd.read_csv(run / "agent.csv")
    assert set(act["kmin_bytes"]) == {round(expert["kmin_bytes"])}
    # a setting from a file: its values replace the starting ones, and reach the hosts
    f = tmp_path / "tuned.json"
    f.write_text('{"rai_bps": 2e7, "cnp_interval_s": 2e-5}')
    topo = parse_topo(TOPO, "paper")
    sched = frame({"start_s": [0.0], "src": ["h1"], "dst": ["h3"], "size_bytes": 0,
                   "cls": "bulk", "tag": "b", "stop_s": 1.0})
    fab = chameleon_sim.SimChameleon(topo, _Sink(), chameleon.parse_options(
        f"long=0.0005,tune=0,from={f}"), interval_s=1e-4)
    eng = Engine(topo, sched, SimConfig(cc_params="nvidia", telemetry_interval_s=1e-4),
                 on_interval=lambda t, recs: fab.on_interval(eng, t, recs))
    eng.run(0.0012)
    assert eng.cc.params.rai_bps == pytest.approx(2e7)  # type: ignore[attr-defined]
    assert eng.cnp_interval == pytest.approx(2e-5) and fab.applied == 1
    for bad, why in (("tune=2", "expected 0 or 1"), ("ecn=NOPE", "NOPE"),
                     ("initial=nope", "nope"), (f"from={tmp_path}/missing.json", "cannot read")):
        with pytest.raises(ConfigError, match=why):
            chameleon.parse_options(bad)
    f.write_text('{"rai_bps": 1e15}')
    with pytest.raises(ConfigError, match=r"rai_bps=.* is outside"):
        chameleon.parse_options(f"from={f}").starting(paper)
