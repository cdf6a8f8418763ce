"""CHAMELEON on the hosts: DCQCN parameters changed at run time, validated, reaching the
running core over the monitor's real connection."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from p4cc.chameleon.server import MonitorServer
from p4cc.chameleon.stats import Periods
from p4cc.chameleon.wire import Message
from p4cc.errors import ConfigError
from p4cc.hostcc import api, tuning
from p4cc.hostcc.cc import DcqcnController
from p4cc.hostcc.dcqcn import DcqcnFlows, dcqcn_params
from p4cc.hostcc.flow import FlowSpec
from p4cc.hostcc.receiver import ReceiverConfig
from p4cc.hostcc.sender import SenderConfig
from p4cc.scale import get_scale
from tests.test_chameleon_monitor import wait_for

GOLD = dcqcn_params("golden", 100e9)  # REFERENCE §2: timers 1/4/300 µs, F = 1
ONE = np.zeros(1, dtype=np.int64)


def play(ctl: DcqcnController, switch_at: float | None = None,
         new: dict[str, float] | None = None) -> list[float]:
    """CNPs at 0 and 400 µs; rates every 50 µs up to 1.5 ms (a switch of parameters at
    ``switch_at``).  The second cut sets Rt = Rc, so the additive increase at 1004 µs
    (stage F after the second cut) shows R_AI."""
    out = []
    for k in range(31):
        t = k * 50e-6
        if switch_at is not None and abs(t - switch_at) < 1e-9:
            assert new is not None
            ctl.set_params(replace(ctl.params, **new))
        if k in (0, 8):
            ctl.on_cnp(t)
        out.append(ctl.rate_bps(t))
    return out


def test_a_change_reaches_the_core_and_its_later_decisions() -> None:
    new = {"rai_bps": 4e9}
    switched = play(DcqcnController(GOLD), switch_at=100e-6, new=new)
    fresh = play(DcqcnController(replace(GOLD, **new)))
    old = play(DcqcnController(GOLD))
    # R_AI is first used after the switch (at 100 µs): from then on the switched
    # controller decides as one that had the new R_AI all along, not as the old one
    first = next(i for i, (a, b) in enumerate(zip(old, fresh, strict=True)) if a != b)
    assert first * 50e-6 > 100e-6
    assert switched[:first] == old[:first]
    assert switched == pytest.approx(fresh, rel=1e-12)
    assert switched[-1] != pytest.approx(old[-1], rel=1e-6)


def test_set_params_in_place_timers_and_refusals() -> None:
    f = DcqcnFlows(GOLD, 2)
    f.on_cnp(0.0, np.arange(2))
    f.rate(50e-6)
    f.set_params(replace(GOLD, alpha_period_s=2e-6, increase_period_s=100e-6))
    assert f.params.increase_ns == 100_000 and f.params.alpha_ns == 2000
    s = f.state
    assert np.all(s.next_alpha > to_ns(50e-6)) and np.all(s.alpha < 1.0)
    with pytest.raises(ConfigError, match="line_rate_bps"):
        f.set_params(replace(GOLD, line_rate_bps=50e9, min_rate_bps=1e9))
    with pytest.raises(ConfigError, match="decrease_period_s"):
        f.set_params(replace(GOLD, decrease_period_s=None))


def to_ns(t: float) -> int:
    return round(t * 1e9)


def test_runtime_params_validated_like_thresholds() -> None:
    sc = get_scale("testbed")
    rp = tuning.RuntimeParams(sc)
    ctl = rp.wrap(api.controller_factory(sc))(FlowSpec("10.0.0.2", 1000, cc="dcqcn"))
    assert isinstance(ctl, DcqcnController)
    with pytest.raises(ConfigError, match=r"rai_bps=1e\+12 is outside its range \["):
        rp.apply({"rai_bps": 1e12})
    with pytest.raises(ConfigError, match="unknown run-time parameter 'g'"):
        rp.apply({"g": 0.5})
    with pytest.raises(ConfigError, match=r"min_dec_factor.*range"):
        rp.apply({"min_dec_factor": 0.95})
    with pytest.raises(ConfigError, match="finite number"):
        rp.apply({"alpha_period_s": float("nan")})
    assert rp.overrides == {} and ctl.rate_bps(0.0) > 0 and ctl.params.rai_bps == \
        api.controller_factory(sc)(FlowSpec("10.0.0.2", 1000)).params.rai_bps  # type: ignore[attr-defined]
    rp.apply({"rai_bps": 2e3, "kmin_bytes": 5000.0})  # switch values are not the host's
    ctl.rate_bps(0.001)
    assert ctl.params.rai_bps == ctl.flows.params.rai_bps == 2e3


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="p4cc-host-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_settings_over_the_connection_reach_a_live_sender_and_receiver(
        sock_dir: Path) -> None:
    sc = get_scale("testbed")
    rx = api.start_receiver(ReceiverConfig(bind="127.0.0.1", port=0))
    params_rx = tuning.RuntimeParams(sc, rx)
    params_tx = tuning.RuntimeParams(sc)
    periods = Periods(0.02, 0.1)
    with MonitorServer(f"unix:{sock_dir}/m.sock", expiry_s=2.0) as srv:
        # two flows: one running when the settings come, one starting after them
        specs = [FlowSpec("127.0.0.1", 2_000_000, 0.0, "dcqcn", rx.port),
                 FlowSpec("127.0.0.1", 200_000, 1.0, "dcqcn", rx.port)]
        tx = api.start_flows(specs, SenderConfig(pkt_bytes=986),
                             make_ctl=params_tx.wrap(api.controller_factory(sc)))
        reps = [tuning.start_reporter(srv.address, "h1/send", tuning.sender_sampler(tx),
                                      params_tx, periods),
                tuning.start_reporter(srv.address, "h2/recv", tuning.receiver_sampler(rx),
                                      params_rx, periods)]
        try:
            assert wait_for(lambda: len(srv.state.live("host")) == 2)
            assert wait_for(lambda: bool(tx.flows))
            running = tx.flows[0][0].ctl
            assert isinstance(running, DcqcnController)
            before = running.params
            # garbage first: refused by the hosts (nack), nothing changes
            srv.broadcast(Message("settings", "controller", round=1,
                                  params={"increase_period_s": 99.0}))
            assert wait_for(lambda: srv.state.counters.nacks >= 2)
            assert "increase_period_s" in srv.state.nacks[0].error
            assert running.params == before
            new = {"rai_bps": 1234.0, "increase_period_s": 0.05, "cnp_interval_s": 2e-3}
            srv.broadcast(Message("settings", "controller", round=2, params=new))
            # the running flow's core takes them (at the sender thread's next call)
            assert wait_for(lambda: running.flows.params.rai_bps == 1234.0)
            assert running.flows.params.increase_period_s == 0.05
            assert wait_for(lambda: rx.core.cfg.cnp_interval_s == 2e-3)
            assert wait_for(lambda: len(tx.flows) == 2, 5.0)
            later = tx.flows[1][0].ctl
            assert isinstance(later, DcqcnController)
            assert wait_for(lambda: later.flows.params.rai_bps == 1234.0)
            # the reports carry the host's filtered statistics
            assert wait_for(lambda: "goodput_bps" in srv.state.live()["h1/send"].metrics)
            assert wait_for(lambda: srv.state.live()["h2/recv"].metrics.get(
                "rx_bps", {}).get("n", 0) > 0)
        finally:
            for r in reps:
                r.stop()
            tx.stop()
            api.stop_receiver(rx)


def test_a_real_sender_process_takes_parameters_over_the_connection(sock_dir: Path) -> None:
    import subprocess
    import sys

    rx = api.start_receiver(ReceiverConfig(bind="127.0.0.1", port=0))
    with MonitorServer(f"unix:{sock_dir}/m.sock", expiry_s=30.0) as srv:
        proc = subprocess.Popen(
            [sys.executable, "-m", "p4cc", "host", "send", "--dst", "127.0.0.1", "--size",
             "10000000", "--port", str(rx.port), "--cc", "dcqcn", "--deadline", "60",
             "--scale", "paper", "--line-rate", "1e6", "--monitor", srv.address,
             "--monitor-id", "h1/send"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            # paper scale: the poster's periods (10 ms, 100 ms); a 1 Mb/s flow keeps running
            assert wait_for(lambda: "h1/send" in srv.state.live("host"), 10.0)
            srv.broadcast(Message("settings", "controller", round=1,
                                  params={"rai_bps": 4.321e6}))
            assert wait_for(lambda: srv.state.live().get("h1/send") is not None and srv.state
                            .live()["h1/send"].metrics.get("core_rai_bps", {}).get("last")
                            == 4.321e6, 10.0), proc.stderr.read() if proc.poll() else ""
        finally:
            proc.terminate()
            proc.wait(10)
            api.stop_receiver(rx)


@pytest.mark.parametrize("seed", range(5))
def test_setting_the_same_parameters_changes_nothing(seed: int) -> None:
    """set_params(params in force) mid-run: the pool's rates stay those of a pool that was
    never touched (the α catch-up before a switch is exact)."""
    rng = np.random.default_rng(seed)
    p = dcqcn_params("nvidia", 25e9)
    a, b = DcqcnFlows(p, 4), DcqcnFlows(p, 4)
    times = np.sort(rng.uniform(0, 3e-3, 40))
    switch = float(rng.uniform(0, 3e-3))
    done = False
    for t in times:
        if not done and t > switch:
            a.set_params(replace(p))
            done = True
        ix = np.flatnonzero(rng.random(4) < 0.5)
        for f in (a, b):
            f.on_cnp(float(t), ix)
            f.on_bytes_sent(float(t), np.full(4, 5000.0))
        assert np.array_equal(a.rate(float(t)), b.rate(float(t)))
    assert np.allclose(a.state.alpha, b.state.alpha, rtol=1e-12)
