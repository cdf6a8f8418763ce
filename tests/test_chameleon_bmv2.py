"""CHAMELEON's controller as the bmv2 backend runs it (no Mininet needed): a Unix socket,
host reporters (the code of ``p4cc host send/recv --monitor``) and a switch proxy (the
agent in a session loop) on real connections; rounds dispatch to all of them together,
and a host that dies is dropped while the rounds go on."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from p4cc.chameleon.stats import Periods
from p4cc.controlplane.agents.chameleon import ChameleonProxy
from p4cc.controlplane.agents.static import make_agent
from p4cc.controlplane.records import PortTelemetry
from p4cc.experiment import chameleon_bmv2
from p4cc.experiment.chameleon import links as chameleon_links
from p4cc.hostcc import tuning
from p4cc.topo.spec import parse_topo
from tests.test_chameleon_monitor import wait_for


class _Sink:
    def __init__(self) -> None:
        self.tables: dict[str, list[dict[str, object]]] = {}
        self.lines: list[str] = []

    def table(self, name: str, rows: list[dict[str, object]]) -> None:
        self.tables.setdefault(name, []).extend(rows)

    def log(self, line: str) -> None:
        self.lines.append(line)


def test_bmv2_controller_rounds_reach_hosts_and_switches() -> None:
    topo = parse_topo("star,hosts=3", "testbed")
    fab = chameleon_bmv2.for_bmv2("chameleon:long=0.2,short=0.04,patience=1", topo)
    assert fab is not None and chameleon_bmv2.for_bmv2("secn1", topo) is None
    assert chameleon_bmv2.for_bmv2("chameleon:unix:/x.sock", topo) is None  # external
    sink = _Sink()
    reps = []
    try:
        assert len(fab.address) < 100 and Path(fab.address[5:]).exists()
        assert fab.host_args("h1", "send") == ["--monitor", fab.address,
                                               "--monitor-id", "h1/send",
                                               "--monitor-periods", "0.04,0.2"]
        params = {h: tuning.RuntimeParams(topo.scale) for h in ("h1", "h2")}
        period = Periods(0.04, 0.2)
        for h, p in params.items():
            reps.append(tuning.start_reporter(
                fab.address, f"{h}/recv", lambda t: {"rx_bps": 5e6}, p, period))
        with chameleon_links(fab):
            proxy = make_agent("chameleon", topo.scale)
        assert isinstance(proxy, ChameleonProxy)
        rec = PortTelemetry("s1", 1, 0.0, 0.04, 1000.0, 2000.0, 5e6, 1e5, 10, 1, 0, None,
                            1, 1, 0)
        proxy.reset({1: None})
        assert proxy.act({1: rec}) == {}
        fab.begin(time.monotonic())
        # the starting setting first, then one decision per long period
        assert wait_for(lambda: all(p.applied >= 2 for p in params.values()), 5.0)
        got: dict[int, object] = {}
        assert wait_for(lambda: bool(got.update(proxy.act({})) or got), 5.0)
        assert set(got) == {1}
        assert fab.ctl.round >= 1 and fab.ctl.rows[0]["hosts"] == 2
        # a host dies: dropped after 3 long periods, the rounds go on
        reps.pop().stop()
        assert wait_for(lambda: set(fab.server.state.live("host")) == {"h1/recv"}, 5.0)
        r = fab.ctl.round
        assert wait_for(lambda: fab.ctl.round > r, 5.0)
        assert wait_for(lambda: params["h1"].overrides == {
            k: v for k, v in fab.ctl.settings.items() if k in params["h1"].overrides}, 5.0)
    finally:
        for rep in reps:
            rep.stop()
        fab.stop(sink)
    assert sink.tables["chameleon"] and not fab.dir.exists()
    assert any("chameleon:" in line for line in sink.lines)


def test_a_fixed_setting_reaches_a_proxy_that_links_after_t0() -> None:
    """tune=0 never makes a new setting: a switch proxy links on its first telemetry
    record, after t0's broadcast, and is answered with the setting in force (before,
    such a run had no ECN marking at all)."""
    topo = parse_topo("star,hosts=3", "testbed")
    fab = chameleon_bmv2.for_bmv2("chameleon:long=0.2,short=0.04,tune=0,ecn=SECN2", topo)
    assert fab is not None
    rep = None
    try:
        p = tuning.RuntimeParams(topo.scale)
        rep = tuning.start_reporter(fab.address, "h1/recv", lambda t: {"rx_bps": 5e6}, p,
                                    Periods(0.04, 0.2))
        fab.begin(time.monotonic())  # t0: the setting goes to the host only
        assert wait_for(lambda: p.applied >= 1, 5.0)
        with chameleon_links(fab):
            proxy = make_agent("chameleon", topo.scale)  # links after t0
        assert isinstance(proxy, ChameleonProxy)
        proxy.reset({1: None})
        rec = PortTelemetry("s1", 1, 1.0, 0.04, 1000.0, 2000.0, 5e6, 1e5, 10, 1, 0, None,
                            1, 1, 0)
        got: dict[int, object] = dict(proxy.act({1: rec}))  # its first record: it links
        assert wait_for(lambda: bool(got.update(proxy.act({})) or got), 5.0)
        assert got[1].kmin_bytes == round(fab.ctl.settings["kmin_bytes"])  # type: ignore[attr-defined]
        assert fab.ctl.round == 0  # nothing was tuned
    finally:
        if rep is not None:
            rep.stop()
        fab.stop(_Sink())


def test_bmv2_evaluation_runs_at_the_scale_asked_for(tmp_path: Path) -> None:
    """`chameleon_eval --backend bmv2 --scale testbed-5m`: every run's spec has the
    scale, and an unknown scale is refused by name before anything starts."""
    import pytest

    from p4cc.errors import ConfigError
    from p4cc.experiment import chameleon_eval, chameleon_eval_bmv2

    spec = chameleon_eval_bmv2._spec("t", "dumbbell,left=2,right=1,bottleneck=0.5", 1, 10.0,
                                     "chameleon:long=2.5,short=0.25", "nvidia", 0.5,
                                     "testbed-5m")
    assert spec.scale == "testbed-5m" and spec.topo().scale.link_rate_bps == 5e6
    with pytest.raises(ConfigError, match="unknown scale 'nope'"):
        chameleon_eval.main(["--backend", "bmv2", "--scale", "nope", "--seeds", "1",
                             "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_bmv2_tuning_runs_use_the_measured_beta_unless_told(
        tmp_path: Path, monkeypatch: Any) -> None:
    """The tuning run's controller gets β = NOISE_BETA (the metric's measured noise on
    this fabric), and a ``beta=`` in the options replaces it."""
    import pytest

    from p4cc.experiment import chameleon_eval_bmv2
    from p4cc.experiment.chameleon import own_controller, parse_options

    agents: list[str] = []

    class Stop(Exception):
        pass

    def run(spec: object, out: Path, sched: object) -> Path:
        agents.append(spec.agents[0])  # type: ignore[attr-defined]
        raise Stop

    monkeypatch.setattr(chameleon_eval_bmv2, "_run", run)
    topo = "dumbbell,left=2,right=1,bottleneck=0.5"
    for options in ("", "beta=0.05,patience=2"):
        with pytest.raises(Stop):
            chameleon_eval_bmv2.tune(topo, 1, 100_000, 2.5, 10, tmp_path, options,
                                     "testbed-5m")
    first, second = (parse_options(own_controller(a) or "") for a in agents)
    assert first.tuner.beta == chameleon_eval_bmv2.NOISE_BETA == 0.2
    assert second.tuner.beta == 0.05 and second.tuner.patience == 2
