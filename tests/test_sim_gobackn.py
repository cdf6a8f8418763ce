"""Go-back-N loss recovery in the simulator (p4cc.sim.gobackn) and the marking rule at a
Kmax at the buffer: the two places where the fluid engine differed from p4cc's hosts and
BMv2 on runs that overflow a buffer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from p4cc.controlplane.ecn import EcnConfig
from p4cc.errors import ConfigError
from p4cc.sim import gobackn
from p4cc.sim.config import SimConfig
from p4cc.sim.engine import Engine
from p4cc.sim.fabric import Fabric
from p4cc.topo.spec import parse_topo


def test_mode_is_checked() -> None:
    assert SimConfig().loss_recovery == "go-back-n"
    with pytest.raises(ConfigError, match="loss_recovery"):
        SimConfig(loss_recovery="sack")


def test_first_loss_opens_a_gap_later_losses_and_junk_drops_do_not() -> None:
    idx = np.array([0, 1, 2])
    lost = np.array([100.0, 50.0, 30.0])
    junk = np.array([0.0, 0.0, 40.0])
    epsn = np.array([np.nan, 7_000.0, np.nan])  # flow 1 has a gap pending already
    delivered = np.array([1_000.0, 2_000.0, 3_000.0])
    flight = np.array([500.0, 600.0, 100.0])
    opened = gobackn.on_losses(idx, lost, junk, epsn, delivered, flight)
    # flow 0: new gap at what is delivered + everything ahead in the fabric
    # flow 1: no second NAK, but its expected byte can only move back (to 2 000 + 600)
    # flow 2: 30 of its 40 junk bytes dropped, no loss
    assert opened.tolist() == [0]
    assert epsn[0] == 1_500.0 and epsn[1] == 2_600.0 and np.isnan(epsn[2])
    assert junk.tolist() == [0.0, 0.0, 10.0]


def test_only_bytes_past_the_fullest_queue_are_ahead_of_the_drop() -> None:
    # one flow over queues 0 -> 1 -> 2; queue 1 is full, so its drops were there
    path = np.array([[0, 1, 2]])
    fill = np.array([0.1, 1.0, 0.0])
    b = np.array([[300.0, 500.0, 200.0]])  # queued at each hop
    prev_dep = np.array([[40.0, 60.0, 0.0]])  # in transit to the next hop
    got = gobackn.ahead_of_drop(b, prev_dep, path, fill, np.array([0]))
    assert got.tolist() == [500.0 + 60.0 + 200.0]  # hop 0's bytes are behind the drop


def test_nak_rewinds_and_turns_what_follows_the_gap_into_junk() -> None:
    idx = np.array([0, 1])
    epsn = np.array([1_500.0, 5_000.0])
    delivered = np.array([1_200.0, 5_600.0])  # flow 0: 300 B before ePSN still to come
    junk = np.zeros(2)
    remaining = np.array([0.0, 100.0])
    size = np.array([10_000.0, 20_000.0])
    retx = np.zeros(2)
    flight = np.array([2_000.0, 900.0])
    gobackn.on_naks(idx, epsn, delivered, junk, remaining, size, retx, flight,
                    np.array([100.0, 200.0]))
    assert delivered.tolist() == [1_200.0, 5_000.0]  # flow 1's 600 B beyond ePSN dropped
    assert junk.tolist() == [1_700.0, 900.0]  # in flight beyond ePSN
    assert remaining.tolist() == [8_500.0, 15_000.0]  # everything from ePSN again
    # from ePSN to where each sender was (10 000 and 19 900 bytes sent once so far)
    assert retx.tolist() == [10_000.0 - 1_500.0, 19_900.0 - 5_000.0]
    assert np.isnan(epsn).all()


def test_junk_is_discarded_first() -> None:
    junk = np.array([300.0, 0.0])
    before = np.array([1_000.0, 1_000.0])
    delivered = np.array([1_200.0, 1_200.0])
    assert gobackn.discard(junk, delivered, before)  # 100 junk bytes left
    assert delivered.tolist() == [1_000.0, 1_200.0] and junk.tolist() == [100.0, 0.0]
    before = delivered.copy()
    delivered += 250.0
    assert not gobackn.discard(junk, delivered, before)
    assert delivered.tolist() == [1_150.0, 1_450.0] and junk.tolist() == [0.0, 0.0]


def _overload(mode: str) -> Engine:
    """Three line-rate flows of 400 kB into one port with a 100 kB buffer, no marking:
    the buffer overflows every few RTTs."""
    topo = parse_topo("star,hosts=4", "testbed")
    sched = pd.DataFrame({"flow_id": [0, 1, 2], "start_s": 0.0, "src": ["h1", "h2", "h3"],
                          "dst": "h4", "size_bytes": 400_000})
    eng = Engine(topo, sched, SimConfig(cc="line", host_traces=False, loss_recovery=mode))
    assert eng.run_to_completion(60.0)
    return eng


def test_go_back_n_costs_more_than_selective_and_still_delivers_every_byte() -> None:
    sel, gbn = _overload("selective"), _overload("go-back-n")
    fs, fg = sel.flow_records(), gbn.flow_records()
    assert (fs["completed"] & fg["completed"]).all()
    np.testing.assert_allclose(fg["bytes_delivered"].to_numpy(float), 400_000, rtol=1e-6)
    np.testing.assert_allclose(fs["bytes_delivered"].to_numpy(float), 400_000, rtol=1e-6)
    # go-back-N resends what followed each loss: more bytes sent again, later FCTs
    # (measured: 1.05 vs 0.65 MB per flow, 1.35 vs 1.03 s)
    assert fg["retx_bytes"].sum() > 1.3 * fs["retx_bytes"].sum() > 0
    assert fg["fct_s"].mean() > 1.2 * fs["fct_s"].mean()
    assert (gbn.junk < 1e-6).all() and np.isnan(gbn.gbn_epsn).all()


def test_flows_csv_counts_resent_packets_not_drops() -> None:
    """``retransmissions`` in flows.csv means packets sent again on both backends
    (p4cc.analysis.runs): under go-back-N more than were dropped, under selective
    recovery exactly the drops (it once reported the drops under both)."""
    from p4cc.experiment.sim_backend import flow_rows

    for mode in ("selective", "go-back-n"):
        eng = _overload(mode)
        rec = eng.flow_records().set_index("flow_id")
        rows = {r["flow_id"]: r for r in flow_rows(eng)}
        assert set(rows) == {0, 1, 2}
        for fid, r in rows.items():
            drops = int(rec.loc[fid, "drops_pkts"])
            assert drops > 0
            assert r["retransmissions"] == round(rec.loc[fid, "retx_bytes"] / 1000)
            if mode == "selective":
                assert abs(r["retransmissions"] - drops) <= 1
            else:
                assert r["retransmissions"] > drops  # the drops and what followed them


def test_a_flow_missing_bytes_with_nothing_in_flight_times_out() -> None:
    active = np.array([True, True, True, False])
    remaining = np.array([0.0, 0.0, 500.0, 0.0])
    epsn = np.full(4, np.nan)
    junk = np.zeros(4)
    flight = np.array([0.0, 0.0, 0.0, 0.0])
    delivered = np.array([900.0, 1_000.0, 200.0, 0.0])
    size = np.full(4, 1_000.0)
    thr = size * (1 - 1e-9)
    retx = np.zeros(4)
    # flow 0 is stuck; 1 is complete; 2 still has bytes to send; 3 is a free slot
    assert gobackn.timeouts(active, remaining, epsn, junk, flight, delivered, size, thr,
                            retx) == 1
    assert remaining.tolist() == [100.0, 0.0, 500.0, 0.0] and retx.tolist()[0] == 100.0


def test_kmax_at_the_buffer_is_never_reached() -> None:
    topo = parse_topo("star,hosts=3", "testbed")
    fab = Fabric(topo)
    key = fab.keys[0]
    i = fab.port(key)
    buf = float(fab.buffer_bytes[i])
    pkt = topo.scale.pkt_bytes
    q = np.zeros(fab.n_ports + 1)
    q[i] = buf  # a full queue
    fab.set_ecn(key, EcnConfig(4 * pkt, int(buf), 0.1))
    assert fab.mark_probability(q)[i] == pytest.approx(0.1, abs=1e-4)
    fab.set_ecn(key, EcnConfig(4 * pkt, int(buf) - pkt, 0.1))  # one packet below: reached
    assert fab.mark_probability(q)[i] == 1.0
