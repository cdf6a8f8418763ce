"""One decision rule: a host flow (p4cc.hostcc.cc controllers) and a simulated flow
(p4cc.sim.cc hooks) fed the same feedback take the same decisions, to the bit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from p4cc.errors import ConfigError
from p4cc.hostcc import cc, dcqcn, rlcc, rlcc_rule
from p4cc.hostcc.rlcc_policies import ReferencePolicy
from p4cc.scale import get_scale
from p4cc.sim.cc import DcqcnHook, RlccHook, make_hook, sim_host_cc_names
from p4cc.sim.config import SimConfig
from p4cc.sim.engine import Engine
from p4cc.topo.spec import parse_topo

SC = get_scale("testbed")
IV = rlcc_rule.decision_interval_s(SC)  # 4 ms
SLOTS, MINE = 3, 1

# an event: (gap since the previous one in s, kind, value); kinds: rtt (value = RTT in
# normaliser units), nak, cnp
rlcc_events = st.lists(st.tuples(st.floats(0.0, 3 * IV), st.sampled_from(["rtt", "nak", "cnp"]),
                                 st.floats(0.3, 12.0)), min_size=1, max_size=60)


def _host_and_hook(interval: float) -> tuple[cc.RlccController, RlccHook]:
    params = rlcc.RlccParams(SC.link_rate_bps, rlcc.norm_rtt_s(SC), pkt_bytes=SC.pkt_bytes)
    host = cc.RlccController(ReferencePolicy(), params, decision_interval_s=interval)
    hook = RlccHook(params, ReferencePolicy(), interval)
    hook.grow(SLOTS, 0.0)
    hook.reset_slots(np.arange(SLOTS), 0.0, np.full(SLOTS, SC.link_rate_bps))
    return host, hook


def _run_rlcc(events: list[tuple[float, str, float]], interval: float,
              others: np.random.Generator) -> tuple[list[float], list[float]]:
    """Host and sim rates after every event; the sim's other slots get random events."""
    host, hook = _host_and_hook(interval)
    norm = host.params.base_rtt_s
    t, got_host, got_sim = 0.0, [], []
    for gap, kind, value in events:
        t += gap
        mine = np.arange(SLOTS) == MINE
        extra = (others.random(SLOTS) < 0.5) & ~mine
        rtt = np.where(mine, value * norm, others.uniform(0.5, 8.0, SLOTS) * norm)
        if kind == "rtt":
            host.on_rtt_sample(t, value * norm)
            hook.on_rtt(t, mine | extra, rtt)
        elif kind == "nak":
            host.on_nack(t)
            hook.on_nack(t, mine | extra)
        else:
            host.on_cnp(t)
            hook.on_cnp(t, mine | extra)
        got_host.append(host.rate_bps(t))
        got_sim.append(float(hook.rate(t)[MINE]))
    assert host.state.decisions[0] == hook.state.decisions[MINE]
    return got_host, got_sim


@settings(max_examples=60, deadline=None)
@given(events=rlcc_events, seed=st.integers(0, 2**16), per_sample=st.booleans())
def test_rlcc_host_and_sim_take_the_same_decisions(events: list, seed: int,
                                                   per_sample: bool) -> None:
    host, sim = _run_rlcc(events, 0.0 if per_sample else IV, np.random.default_rng(seed))
    assert host == sim


def test_rlcc_hand_made_sequences_exercise_every_part_of_the_rule() -> None:
    """Averaged samples, catch-up, a NAK decision and a held-back cut, on both sides."""
    seq = [(0.0, "rtt", 1.0),      # first sample: a decision (at line rate: stays)
           (0.3 * IV, "rtt", 9.0),  # pending (within the interval)
           (0.8 * IV, "rtt", 1.0),  # decides on the mean δ of 9 and 1: a cut
           (3.5 * IV, "rtt", 10.0),  # 3 intervals late: 3 decisions, cuts held back (the
           #                           80 ms sample left before the last cut)
           (0.2 * IV, "nak", 0.0),   # within the interval: nothing
           (1.0 * IV, "nak", 0.0),   # a decision on the last sample: still held back
           (30 * IV, "nak", 0.0),    # one RTT after the cut: cuts (catch-up capped)
           (0.1 * IV, "cnp", 0.0)]   # CNPs do not move RL-CC
    host, sim = _run_rlcc(seq, IV, np.random.default_rng(0))
    assert host == sim
    assert host[1] == host[0] == SC.link_rate_bps and host[2] < host[1]
    assert host[3] == host[4] == host[5] == host[2] and host[6] < host[5] == host[2]
    assert host[7] == host[6]
    h, _ = _host_and_hook(IV)
    for t, r in ((0.0, 1.0), (1.05 * IV, 1.0), (4.2 * IV, 1.0)):
        h.on_rtt_sample(t, r * h.params.base_rtt_s)
    assert h.state.decisions[0] == 1 + 1 + 3


dcqcn_events = st.lists(st.tuples(st.floats(0.0, 2e-3), st.sampled_from(["cnp", "bytes", "rate"]),
                                  st.integers(0, 40_000)), min_size=1, max_size=80)


def _run_dcqcn(events: list[tuple[float, str, int]], name: str,
               same_everywhere: bool) -> tuple[list[float], list[float]]:
    params = dcqcn.dcqcn_params(name, SC.link_rate_bps, SC)
    host = cc.DcqcnController(params)
    hook = DcqcnHook(params)
    hook.grow(SLOTS, 0.0)
    hook.reset_slots(np.arange(SLOTS), 0.0, np.full(SLOTS, SC.link_rate_bps))
    mine = (np.ones(SLOTS, np.bool_) if same_everywhere else np.arange(SLOTS) == MINE)
    t, got_host, got_sim = 0.0, [], []
    for gap, kind, nbytes in events:
        t += gap  # (testbed timers: decrease checks 1 ms, increases 75 ms apart)
        if kind == "cnp":
            host.on_cnp(t)
            hook.on_cnp(t, mine)
        elif kind == "bytes":
            host.on_bytes_sent(t, nbytes)
            hook.on_sent(t, np.where(mine, float(nbytes), 0.0))
        got_host.append(host.rate_bps(t))
        rates = hook.rate(t)
        got_sim.append(float(rates[MINE]))
        if same_everywhere:
            assert np.all(rates == rates[MINE])
    return got_host, got_sim


@settings(max_examples=60, deadline=None)
@given(events=dcqcn_events, name=st.sampled_from(["hpcc-ns3", "nvidia", "dcqcn-paper"]),
       same=st.booleans())
def test_dcqcn_host_and_sim_take_the_same_decisions(events: list, name: str,
                                                    same: bool) -> None:
    host, sim = _run_dcqcn(events, name, same)
    assert host == sim


def test_dcqcn_hand_made_cnp_train_and_recovery() -> None:
    seq = [(0.0, "rate", 0)] + [(1e-3, "cnp", 0)] * 10 + [(5e-3, "rate", 0)] * 40
    host, sim = _run_dcqcn(seq, "hpcc-ns3", False)
    assert host == sim
    assert min(host) < 0.5 * SC.link_rate_bps and host[-1] > host[11]  # cut, then recovery
    host, sim = _run_dcqcn([(0.0, "cnp", 0)] + [(2e-4, "bytes", 3000)] * 30, "nvidia", False)
    assert host == sim and host[-1] > min(host)  # the byte counter raises the rate


# -- the registry --------------------------------------------------------------------------
def test_host_cc_kinds_are_a_registry_the_spec_and_the_sim_share() -> None:
    from p4cc.experiment.spec import HOST_CC

    assert HOST_CC == cc.host_cc_names() == ("dcqcn", "rlcc", "fixed", "tcp")
    assert sim_host_cc_names() == cc.userspace_cc_names() == ("dcqcn", "rlcc", "fixed")
    assert cc.host_cc_kind("rlcc:pi-lstm").name == "rlcc"
    with pytest.raises(ConfigError, match="unknown host CC 'bbr'"):
        cc.host_cc_kind("bbr")
    with pytest.raises(ConfigError, match="kernel"):
        cc.make_controller("tcp", SC)
    with pytest.raises(ConfigError, match="registered already"):
        cc.register_host_cc(cc.HostCcKind("dcqcn", "dcqcn", None))
    assert cc.host_cc_kind("rlcc").sender_opts(SC) == {"decision_interval_s": IV}
    assert cc.host_cc_kind("dcqcn").sender_opts(SC) == {}
    hook = make_hook("rlcc", SC, "")
    assert isinstance(hook, RlccHook) and hook.rule.decision_interval_s == IV
    with pytest.raises(ConfigError, match="unknown congestion control 'tcp'"):
        make_hook("tcp", SC)


def test_engine_delivers_loss_notices_to_the_hook_as_naks() -> None:
    """Eight flows start at line rate into one port: drops, whose notices are NAKs."""

    class Recording(RlccHook):
        naks = 0

        def on_nack(self, t: float, mask: np.ndarray) -> None:
            self.naks += int(mask.sum())
            super().on_nack(t, mask)

    topo = parse_topo("star,hosts=9", "testbed")
    params = rlcc.RlccParams(SC.link_rate_bps, rlcc.norm_rtt_s(SC), pkt_bytes=SC.pkt_bytes)
    hook = Recording(params, ReferencePolicy(), IV)
    sched = pd.DataFrame({"flow_id": range(8), "start_s": 0.0,
                          "src": [f"h{i + 1}" for i in range(8)], "dst": "h9",
                          "size_bytes": 0})
    eng = Engine(topo, sched, SimConfig(cc="rlcc", host_traces=False), cc=hook)
    eng.run(200 * SC.base_rtt_s)
    assert hook.naks > 0 and eng.lost.sum() > 0
