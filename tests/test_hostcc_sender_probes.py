"""RTT probes only for flows without recent ACK RTT samples (p4cc.hostcc.rtt_samples):
the schedule's logic, then live over loopback with the sender's userspace pacing (no
root): a flow with steady ACK samples sends (almost) no probes, a flow whose ACKs stop
is probed every ``probe_interval_s`` and its controller keeps getting samples."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from p4cc.errors import ConfigError
from p4cc.hostcc.cc import FixedController
from p4cc.hostcc.flow import Flow, FlowSpec
from p4cc.hostcc.receiver import Receiver, ReceiverConfig
from p4cc.hostcc.rtt_samples import ProbeSchedule
from p4cc.hostcc.sender import Sender
from p4cc.hostcc.sender_config import SenderConfig

IV = 8e-3  # the hostcc default probe interval (4 base RTTs of the testbed scale)


def probe_times(ps: ProbeSchedule, ack_t: list[float], until: float,
                step: float = 1e-4) -> list[float]:
    """Drive one flow's schedule in ``step``s from 0 to ``until`` with ACK RTT samples at
    ``ack_t``; the times it probes."""
    ps.add(1, 0.0)
    got, acks = [], np.asarray(ack_t)
    for t in np.arange(0.0, until, step):
        if ps.due(1, float(t), int(np.searchsorted(acks, t, side="right"))):
            got.append(float(t))
    return got


def test_schedule_skips_flows_with_ack_samples_and_probes_the_quiet_ones() -> None:
    # ACK samples every 2 ms for 0.5 s, then none: no probe while they come, then one
    # probe a quiet interval after the last sample and one per interval from there
    got = probe_times(ProbeSchedule(IV, IV), list(np.arange(1e-3, 0.5, 2e-3)), 0.6)
    last = float(np.arange(1e-3, 0.5, 2e-3)[-1])
    assert got[0] == pytest.approx(last + IV, abs=2e-4)
    assert np.diff(got) == pytest.approx(IV, abs=2e-4)
    assert len(got) == pytest.approx((0.6 - last) / IV, abs=1)
    # a flow without any ACK sample: a probe one interval after its start, then every one
    assert probe_times(ProbeSchedule(IV, IV), [], 0.05) == pytest.approx(
        [IV * k for k in range(1, 7)], abs=2e-4)
    # quiet 0: every interval from the start whatever the ACKs (the former behaviour)
    assert len(probe_times(ProbeSchedule(IV, 0.0), list(np.arange(1e-3, 0.5, 2e-3)),
                           0.5)) == pytest.approx(0.5 / IV, abs=1)
    # a longer quiet window: probed only after 30 ms without a sample, then every 8 ms
    got = probe_times(ProbeSchedule(IV, 0.03), [0.001, 0.02, 0.045], 0.1)
    assert got[0] == pytest.approx(0.075, abs=2e-4) and np.diff(got) == pytest.approx(IV,
                                                                                      abs=2e-4)
    with pytest.raises(ConfigError):
        SenderConfig(probe_quiet_s=-1.0)


class TwoRates:
    """Test controller: ``fast`` b/s until ``until`` (run clock), then ``slow`` (RL-CC's
    400 b/s testbed floor: a packet per 20 s, so ACKs stop); records its RTT samples."""

    def __init__(self, fast: float, slow: float, until: float) -> None:
        self.name = "two-rates"
        self.fast, self.slow, self.until = fast, slow, until
        self.samples: list[float] = []

    def on_cnp(self, t: float) -> None: ...
    def on_bytes_sent(self, t: float, nbytes: int) -> None: ...
    def on_nack(self, t: float) -> None: ...

    def on_rtt_sample(self, t: float, rtt_s: float, q: int | None = None) -> None:
        self.samples.append(t)

    def rate_bps(self, t: float) -> float:
        return self.fast if t < self.until else self.slow

    def trace(self, t: float) -> dict[str, Any]:
        return {}


@pytest.fixture
def rx() -> Iterator[Receiver]:
    r = Receiver(ReceiverConfig(bind="127.0.0.1", port=0)).start()
    yield r
    r.stop()


def run_until(rx: Receiver, ctl: Any, cfg: SenderConfig,
              cond: Callable[[Flow], bool]) -> tuple[Flow, float]:
    """One 50 MB flow to ``rx`` until ``cond(flow)`` (polled, 20 s deadline); the flow
    and the sender's run time when it held."""
    tx = Sender([FlowSpec("127.0.0.1", 50_000_000, port=rx.port)], lambda _s: ctl,
                cfg).start()
    try:
        deadline = time.monotonic() + 20.0
        while time.monotonic() < deadline:
            with tx._lock:
                flow = tx.flows[0][0] if tx.flows else None
            if flow is not None and cond(flow):
                break
            time.sleep(0.01)  # poll interval of the condition
        else:
            pytest.fail("condition not met in 20 s")
        return flow, time.monotonic() - tx.t0
    finally:
        tx.stop()


@pytest.mark.parametrize("quiet", [None, 0.0])
def test_steady_ack_samples_send_almost_no_probes(rx: Receiver, quiet: float | None) -> None:
    """8 Mb/s with an ACK asked every 2 ms: an RTT sample from ACKs every ~2 ms, so the
    flow needs no probe (quiet None); with the skip off (0) it probes every 8 ms."""
    cfg = SenderConfig(probe_interval_s=IV, probe_quiet_s=quiet, ack_interval_s=2e-3)
    flow, run_s = run_until(rx, FixedController(8e6), cfg,
                            lambda f: f.ack_rtt_samples >= 150)
    assert flow.ack_rtt_samples >= 150 and run_s > 0.25
    if quiet is None:
        assert flow.probes <= 2, (flow.probes, run_s)
    else:
        assert flow.probes >= 0.5 * run_s / IV, (flow.probes, run_s)


def test_flow_whose_acks_stop_is_probed_every_interval(rx: Receiver) -> None:
    """Fast (ACK samples) for 0.3 s, then at the 400 b/s floor, where its ACKs stop: no
    probes before, then one per probe interval, each an RTT sample for the controller."""
    ctl = TwoRates(8e6, 400.0, 0.3)
    cfg = SenderConfig(probe_interval_s=IV, ack_interval_s=2e-3)
    flow, _run_s = run_until(rx, ctl, cfg, lambda f: f.probes >= 40)
    acks = flow.ack_rtt_samples
    assert acks >= 50
    # the samples after the last ACK sample are probe replies: as many as the probes,
    # one per interval (on the run clock; a loaded machine stretches gaps, never shrinks)
    quiet = np.asarray(ctl.samples[acks:])
    assert len(quiet) >= 35 and quiet[0] > 0.3
    gaps = np.diff(quiet)
    assert np.median(gaps) == pytest.approx(IV, rel=0.25), gaps
    # no two probes in one interval: their replies would come back well under 1 ms
    # apart; a reply that a loaded machine delays shortens the gap after it (3.3 ms of
    # the 8 ms seen with two simulations running), so the floor is a quarter interval
    assert gaps.min() > 0.25 * IV
    assert flow.probes <= len(quiet) + 3  # (a few replies may still be on their way)


def test_negative_probe_quiet_names_the_setting() -> None:
    with pytest.raises(ConfigError, match=r"probe_quiet_s=-1.0 must be >= 0 \(0: off\)"):
        SenderConfig(probe_quiet_s=-1.0)


def _sender_config(**over: Any) -> SenderConfig:
    """``sender_config`` of ``p4cc host send`` arguments (the defaults, then ``over``)."""
    import argparse

    from p4cc.hostcc.cli_config import sender_config
    from p4cc.scale import Scale

    args = dict(nic_rate=0.0, dev="", netns="", sport_base=0, pkt_bytes=0,
                probe_interval=0.064, rto=0.0, rto_max=0.0, rtt_window=1, ack_interval=None,
                completions="", pad=False, cc="dcqcn", probe_quiet=None)
    return sender_config(argparse.Namespace(**{**args, **over}), Scale())


def test_rlcc_senders_default_to_a_probe_every_interval() -> None:
    """`p4cc host send --cc rlcc` without --probe-quiet probes every interval (RL-CC
    decides on the RTT); other CCs and an explicit value keep theirs."""

    def quiet(cc: str, q: float | None) -> float | None:
        return _sender_config(cc=cc, probe_quiet=q).probe_quiet_s

    assert quiet("rlcc", None) == quiet("rlcc:pi", None) == 0.0
    assert quiet("dcqcn", None) is None and quiet("rlcc", 0.2) == 0.2


def test_probe_cap_spreads_the_senders_probes_over_its_flows() -> None:
    """``max_pps`` caps a sender's probes in all: 12 flows probing every interval (quiet
    0) with a 10 probes/s cap send ~10 probes/s, not 12 / 8 ms = 1,500/s; one flow alone
    keeps its interval."""
    ps = ProbeSchedule(IV, 0.0, max_pps=10.0)
    for fid in range(12):
        ps.add(fid, 0.0)
    sent = sum(ps.due(fid, float(t), 0) for t in np.arange(0.0, 2.0, 1e-3)
               for fid in range(12))
    assert 12 <= sent <= 12 + 2.0 * 10.0 + 1  # each flow's first probe, then the cap
    # one flow: its own interval when the cap allows it, else the cap's
    assert probe_times(ProbeSchedule(IV, 0.0, max_pps=500.0), [], 0.05) == pytest.approx(
        [IV * k for k in range(7)], abs=2e-4)
    assert probe_times(ProbeSchedule(IV, 0.0, max_pps=10.0), [], 0.35) == pytest.approx(
        [0.0, 0.1, 0.2, 0.3], abs=2e-4)


def test_probe_cap_is_checked_and_reaches_the_sender_config() -> None:
    with pytest.raises(ConfigError, match=r"probe_max_pps=-1.0 must be >= 0"):
        SenderConfig(probe_max_pps=-1.0)
    with pytest.raises(ConfigError, match="probe rate cap"):
        ProbeSchedule(IV, 0.0, max_pps=float("inf"))
    assert _sender_config(cc="rlcc", probe_max_pps=31.25).probe_max_pps == 31.25
